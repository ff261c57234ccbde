"""Every refusal and failure of the audit layer, one tree under ``AuditError``.

The API maps the tree to HTTP statuses in one place (``api/problems.py``) and the CLI to exit
codes; each error carries its evidence (the field, the record, the bundle file, what differed).
Branches: ``QueryError`` (a filter, cursor or id that cannot be used; also a ``ValueError``),
``AnnotationError``, ``ExportError``, ``GovernanceError``, ``ModelRegistryError``,
``PrincipalError``, ``SubmissionRefusedError`` (messages the scoring path refused) and
``BundleError`` (the offline verifier's outcomes; also a ``ledger.VerificationError``, so one
``except`` catches every "does not verify").

The bundle verifier's errors collect record-level failures (up to a cap) and raise them
together as ``BundleFailed`` so an examiner sees the extent, not only the first.
This module imports nothing that needs a database: the offline verifier uses it.
"""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.errors import DamageError, LedgerUnavailableError, VerificationError

if TYPE_CHECKING:
    from audit.bundle.verify import BundleReport
    from audit.cases.goaml.schema import SchemaFault

__all__ = [
    "AccountRiskError",
    "AnnotationError",
    "AuditError",
    "BundleError",
    "BundleFailed",
    "BundleMalformed",
    "BundleTampered",
    "BundleUnreadable",
    "BundleUntrusted",
    "CaseConflictError",
    "CaseError",
    "CaseFourEyesError",
    "CaseNotFoundError",
    "CasesFailedError",
    "ClearanceError",
    "ClearanceNotFoundError",
    "ComplianceFactsError",
    "DerivedRowError",
    "DuplicateRulesetError",
    "ExplanationError",
    "ExportError",
    "ExportFilterError",
    "ExportUnavailableError",
    "FourEyesError",
    "GovernanceError",
    "GovernanceRecordError",
    "IdempotencyRaceError",
    "ListError",
    "ListNotFoundError",
    "ModelConflictError",
    "ModelRegistryError",
    "ModuleIntegrityError",
    "NoActiveRulesetError",
    "OneMessageExpectedError",
    "PrincipalError",
    "ProofMismatch",
    "QueryError",
    "ReplayMismatch",
    "ReportError",
    "ReportHoldError",
    "ReportPurgedError",
    "RulesetRefusedError",
    "StateDeltaError",
    "StateError",
    "StateSnapshotError",
    "StateSuperseded",
    "SubmissionFault",
    "SubmissionRefusedError",
    "SummaryError",
    "TooManySubmissionsError",
    "TraceNotFoundError",
    "UnknownRulesetError",
    "UnregisteredModelError",
    "WebhookConfigError",
]


class AuditError(Exception):
    """Base of every audit-layer error; ``str(err)`` is a sentence a person can act on."""


class AccountRiskError(AuditError, ValueError):
    """An account-risk policy value (a setting), or a recorded ``account_risk``, that cannot be
    used (``audit.decide.account_risk``); the message names the field and what it must be."""


class ExplanationError(AuditError, ValueError):
    """A recorded ``explanation`` that is not one a version 3 decision record can state
    (``audit.decide.explanation``); the message names what is wrong."""


class WebhookConfigError(AuditError, ValueError):
    """An outcome webhook endpoint, secret or setting that cannot be used (``audit.cases.webhooks``);
    the message names it. The CLI answers it as configuration (exit 2)."""


class ComplianceFactsError(AuditError, ValueError):
    """A sealed entry the compliance facts (``audit.compliance``) cannot be derived from (a malformed
    body, history out of seq order); names the seq."""

    def __init__(self, seq: int, detail: str) -> None:
        self.seq, self.detail = seq, detail
        super().__init__(f"ledger entry {seq}: {detail}")


class BundleError(AuditError, VerificationError):
    """Base of every verifier outcome. ``kind`` is a short stable code (``leaf_hash``,
    ``replay.outcome``, ...); ``file``, ``seq`` and ``trace_id`` say where; ``detail`` what."""

    code = "bundle"

    def __init__(self, detail: str, *, kind: str | None = None, file: str | None = None,
                 seq: int | None = None, trace_id: str | None = None) -> None:
        self.kind = kind or self.code
        self.file, self.seq, self.trace_id, self.detail = file, seq, trace_id, detail
        where = ", ".join(x for x in (file, None if seq is None else f"seq {seq}", trace_id) if x)
        super().__init__(f"{self.kind}: {detail}" + (f" [{where}]" if where else ""))

    @property
    def failures(self) -> tuple[BundleError, ...]:
        """The individual failures this error stands for (itself, unless an aggregate)."""
        return (self,)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "seq": self.seq, "trace_id": self.trace_id,
                "detail": self.detail}

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.detail, self.kind, self.file, self.seq, self.trace_id))


def _rebuild(cls: type[BundleError], detail: str, kind: str, file: str | None, seq: int | None,
             trace_id: str | None) -> BundleError:
    return cls(detail, kind=kind, file=file, seq=seq, trace_id=trace_id)


class BundleUnreadable(BundleError):
    """The file cannot be read as a ZIP at all (missing, truncated, not a zip): exit 2."""

    code = "unreadable"


class BundleMalformed(BundleError):
    """The bundle is readable but breaks the format (unsafe paths, bomb-like sizes, a manifest
    or line that is not what the spec says)."""

    code = "malformed"


class BundleTampered(BundleError):
    """Bytes differ from what the signed manifest or the records state (file hash, leaf hash,
    index line, chain, payload, unlisted or missing file)."""

    code = "tampered"


class BundleUntrusted(BundleError):
    """A signature (manifest or checkpoint) is not by a trusted key, or does not verify."""

    code = "untrusted"


class ProofMismatch(BundleError):
    """The Merkle evidence does not lead to the signed checkpoint (multiproof, inclusion
    path, consistency with the previous export)."""

    code = "proof"


class ReplayMismatch(BundleError):
    """Re-running a decision (rules in the sandbox, numpy model) does not give what it records."""

    code = "replay"


class BundleFailed(BundleError):
    """Several failures at once (at most the verifier's cap, ``dropped`` more not kept), with the
    report of what was checked so far."""

    code = "failed"

    def __init__(self, failures: list[BundleError], dropped: int = 0,
                 report: BundleReport | None = None) -> None:
        self._failures = tuple(failures)
        self.dropped = dropped
        self.report = report
        more = f" (and {dropped} more)" if dropped else ""
        first = "; ".join(str(f) for f in failures[:3])
        super().__init__(f"{len(failures) + dropped} failure(s){more}: {first}", kind=self.code)

    @property
    def failures(self) -> tuple[BundleError, ...]:
        return self._failures

    def __reduce__(self) -> Any:
        return (type(self), (list(self._failures), self.dropped, self.report))


# -- queries, annotations, exports ---------------------------------------------------------


class QueryError(AuditError, ValueError):
    """A filter, cursor or trace id that cannot be used as given; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class AnnotationError(QueryError):
    """An annotation that cannot be written as given; ``field`` names the culprit."""


class TraceNotFoundError(AnnotationError):
    """The trace to annotate does not exist (the API answers 404, not 422)."""


class CaseError(QueryError):
    """An alert, case or policy action that cannot be taken as given; ``field`` names the culprit."""


class CaseNotFoundError(CaseError):
    """The alert or case does not exist (the API answers 404)."""


class CaseConflictError(CaseError):
    """The alert or case is no longer in the state the officer acted on (another officer moved it
    first, or the action does not apply in its state): the API answers 409."""


class CaseFourEyesError(CaseError):
    """The second step of a four-eyes action by the officer who took the first (403)."""


class ListError(QueryError):
    """A sanctions list that cannot be loaded, read or compared as asked; ``field`` names the
    culprit (the file, its format, the list's name, a seq)."""


class ListNotFoundError(ListError):
    """No list of that name (or no load at that seq) was ever sealed (the API answers 404)."""


class ClearanceError(QueryError):
    """A good-guy clearance that cannot be proposed, approved or revoked as asked; ``field`` names
    the culprit (the decision, the entry, the date, the principal, a seq)."""


class ClearanceNotFoundError(ClearanceError):
    """No decision with that trace id, or no clearance proposed at that seq (the API answers 404)."""


class ReportError(AuditError, ValueError):
    """A report that cannot be drafted or does not validate. ``field`` names the culprit: an input
    field (``reason``, ``transactions[0].amount_local``) or an element path (``report/rentity_id``);
    ``why`` says what is wrong. From schema validation, ``faults`` holds the first differences
    (up to 10) in document order, ``field``/``why`` being the first of them."""

    def __init__(self, field: str, why: str, *, faults: tuple[SchemaFault, ...] = ()) -> None:
        more = f" (and {len(faults) - 1} more)" if len(faults) > 1 else ""
        super().__init__(f"{field}: {why}{more}")
        self.field = field
        self.why = why
        self.faults = faults

    def __reduce__(self) -> Any:
        return (_rebuild_report, (type(self), self.field, self.why, self.faults))


def _rebuild_report(cls: type[ReportError], field: str, why: str,
                   faults: tuple[SchemaFault, ...]) -> ReportError:
    return cls(field, why, faults=faults)


class ReportPurgedError(ReportError):
    """A filed report whose bytes were purged (an erasure order): the API answers 410."""


class ReportHoldError(AuditError):
    """The report was filed (sealed at ``seq``) but a legal hold it needs could not be placed."""

    def __init__(self, message: str, *, seq: int, hold_id: str, report_sha256: str) -> None:
        super().__init__(message)
        self.seq = seq
        self.hold_id = hold_id
        self.report_sha256 = report_sha256


class ExportError(AuditError):
    """Base of the refusals of export creation that are not about the filters."""


class ExportUnavailableError(ExportError):
    """Something the bundle must hold cannot be had (a model's weights, a ruleset's module, a
    payload row): configuration or ledger damage; nothing was written."""


class ExportFilterError(QueryError):
    """A filter that cannot be used as given, or a selection that matches nothing; ``field``
    names it in the bundle's terms (from, to, account, decision, rule, filters)."""


class SummaryError(AuditError, ValueError):
    """A ``decision.summary`` body that does not follow ``sealtrail.decision.summary/1``, or a
    summary that disagrees with the decisions it speaks for (``audit.decide.summary``)."""


class StateDeltaError(AuditError, ValueError):
    """A sealed state delta that does not follow its schema, or one that cannot apply to the state
    at hand (another state key, another position in the log)."""


class StateSnapshotError(AuditError, ValueError):
    """A state snapshot that cannot be made, read or trusted: a feature state that is not keyed, a
    ``state.snapshot`` body that does not follow its schema, an account it does not hold, or a
    proof that does not lead to its sealed root (``audit.state.tree``, ``audit.state.sealed``)."""


class DerivedRowError(AuditError, DamageError):
    """A derived row (the trace index: ``audit_traces``, ``audit_trace_rules``,
    ``audit_trace_accounts``, ``audit_annotations``) disagrees with the sealed record it derives
    from, or has none. ``table``, ``seq`` and ``detail`` name the first; ``findings`` holds up to
    50 as ``(table, seq, detail)``, ``total`` counts them all. Raised by ``ledger verify`` and by
    export creation, which selects no evidence through a damaged index (nothing written)."""

    def __init__(self, table: str, seq: int, detail: str, *,
                 findings: Sequence[tuple[str, int, str]] = (), total: int = 1) -> None:
        self.table = table
        self.findings = tuple(findings) or ((table, seq, detail),)
        self.total = max(total, len(self.findings))
        more = f" (and {self.total - 1} more)" if self.total > 1 else ""
        DamageError.__init__(self, "derived row mismatch", seq, f"{table}: {detail}{more}")
        self.detail = detail

    def __reduce__(self) -> Any:
        return (_derived, (self.table, self.seq, self.detail, self.findings, self.total))


def _derived(table: str, seq: int, detail: str, findings: tuple[tuple[str, int, str], ...],
             total: int) -> DerivedRowError:
    return DerivedRowError(table, seq, detail, findings=findings, total=total)


# -- governance and the model registry ------------------------------------------------------



class GovernanceError(AuditError):
    """Base of every refusal by rule governance; nothing was written when one is raised."""


class RulesetRefusedError(GovernanceError):
    """The ruleset does not parse, compile or fit the pipeline (API: 422). ``rule_id``,
    ``line`` and ``column`` are set when the compiler named them, ``field`` when the parser
    named a key (``ruleset.version``)."""

    def __init__(self, message: str, *, rule_id: str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.rule_id, self.line, self.column, self.field = rule_id, line, column, field


class CasesFailedError(RulesetRefusedError):
    """The ruleset's own test cases fail; ``failures`` names each (line, case, what differed)."""

    def __init__(self, message: str, failures: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.failures = failures


class DuplicateRulesetError(GovernanceError):
    """A ruleset with this ``id@version`` was already proposed (or bootstrapped)."""


class UnknownRulesetError(GovernanceError):  # deliberately not a LookupError: see Governance._append
    """No ruleset with this id was ever proposed."""


class StateError(GovernanceError):
    """The step does not follow from the ruleset's state (not proposed, already approved,
    not approved, already active, or a stated module SHA-256 that is not this one's)."""


class FourEyesError(GovernanceError):
    """The approver is the proposer (same certificate fingerprint or same subject DN)."""


class NoActiveRulesetError(GovernanceError):
    """No ruleset is active: bootstrap the default pack or activate an approved one."""


class GovernanceRecordError(GovernanceError):
    """The governance records cannot be derived: one is malformed, or breaks the rules (a
    self-approval, an unapproved activation) because it was appended around Governance.
    Fail-closed: nothing governed proceeds until an operator looks (API: 500)."""


class ModuleIntegrityError(GovernanceError):
    """The module bytes in a record do not hash to the SHA-256 the record states."""


class ModelRegistryError(AuditError):
    """Base of the registry's refusals; nothing was written when one is raised."""


class UnregisteredModelError(ModelRegistryError):
    """Scoring was asked of a model no ``model.registered`` record names."""


class ModelConflictError(ModelRegistryError):
    """The SHA-256 is registered already, with a different card."""


# -- principals ----------------------------------------------------------------------------


class PrincipalError(AuditError):
    """A certificate or chain that does not yield a principal; ``reason`` is a stable code:
    ``malformed``, ``no_trust_anchor``, ``not_yet_valid``, ``expired``, ``not_client``,
    ``unknown_ca`` (issuer is no trusted CA), ``untrusted`` (bad signature, broken chain or
    another path-validation failure)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# -- the scoring path's input --------------------------------------------------------------


@dataclass(frozen=True)
class SubmissionFault:
    """Why one message, or the request's body as a whole, was refused.

    ``index`` is the message's place in a batch (None: the body as a whole, or the single
    message of a one-decision request); ``field`` the field within it (None: all of it)."""

    index: int | None
    field: str | None
    message: str

    @property
    def where(self) -> str:
        """``[3].$.currency``, ``[3]``, ``$.currency`` or ``body``: how the API and CLI name it."""
        if self.index is None:
            return self.field or "body"
        return f"[{self.index}]" + (f".{self.field}" if self.field else "")

    def to_json(self) -> dict[str, str]:
        return {"field": self.where, "message": self.message}


class SubmissionRefusedError(AuditError):
    """Messages that may not be decided, so nothing of the request was decided or recorded.
    ``faults`` names each refused one (at most the first 100), ``total`` counts them all,
    ``str(err)`` sums them up. ``trace_id`` is set once the refusal is sealed (a ``refusal``
    record, ``audit.decide.refusal``); None where it was not."""

    def __init__(self, detail: str, faults: Sequence[SubmissionFault], *, total: int | None = None) -> None:
        super().__init__(detail)
        self.faults = tuple(faults)
        self.total = max(len(self.faults), total or 0)
        self.trace_id: str | None = None


class TooManySubmissionsError(SubmissionRefusedError):
    """More transactions in one request than may be decided at once (API: 413)."""


class OneMessageExpectedError(SubmissionRefusedError):
    """A one-decision request whose body holds no transaction or several."""


class IdempotencyRaceError(LedgerUnavailableError, AuditError):
    """An idempotency key of the batch was sealed by another writer after it was looked up, so
    the commit was refused and nothing written (``audit.decide.idempotency`` looks again). A
    ``LedgerUnavailableError`` first: should it escape, the API answers 503 with Retry-After."""


class StateSuperseded(LedgerUnavailableError, AuditError):
    """Another decider committed after this batch's feature state was caught up with the log, so
    the database refused the commit and nothing was written (``audit.decide.log_tip``); the
    pipeline prepares the batch again on the state caught up with it. A ``LedgerUnavailableError``
    first: should it escape (another decider got ahead every time), the API answers 503."""

    def __init__(self, expected: int | None, found: int | None, why: str | None = None) -> None:
        super().__init__(why or f"another decider sealed the state delta at seq {found} after this batch's "
                         f"state (which ends at {'no delta' if expected is None else f'seq {expected}'}) was "
                         "caught up: nothing written")
        self.expected, self.found = expected, found
