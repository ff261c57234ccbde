"""Rule governance as ledger records (DESIGN.md invariant 8): proposed -> approved -> active.

Each step is a sealed record (``ruleset.proposed``, ``ruleset.approved``, ``ruleset.activated``;
``ruleset.bootstrapped`` for the operator's first install of the shipped pack, which says
plainly that nobody approved it). The state is derived from those records, never kept in a
mutable table. A proposal carries the TOML source and the compiled module itself, so replay
years later runs exactly the bytes that decided. Approval needs a principal other than the
proposer (four-eyes: neither the same certificate fingerprint nor the same subject DN); only
an approved (or bootstrapped) module can become active, and scoring loads only the active one.

Each transition is checked twice: before compiling (a clean refusal, nothing computed), and
again inside the sealing transaction under the ledger's sequencer lock, on the log as it was
just before the new record (``append_many(alongside=...)``, whose failure writes nothing),
so two replicas racing to approve or activate cannot both succeed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from sqlalchemy import Connection, select
from sqlalchemy.exc import DBAPIError

from audit.canonical import canonical_bytes
from audit.pipeline import ActiveRules
from audit.principal import Principal
from inference.schema import RULE_FEATURE_NAMES
from ledger import Ledger, LedgerUnavailableError, Receipt, Record, store
from wasm_rules import RuleError, RuleSyntaxError, Sandbox, compile_ruleset, parse_ruleset
from wasm_rules.cases import CaseResult, check_cases, parse_cases, rows_of
from wasm_rules.reference import evaluate_rows

__all__ = [
    "ACTIVATED", "APPROVED", "BOOTSTRAPPED", "DEFAULT_PACK", "KINDS", "PROPOSED",
    "CasesFailedError", "DuplicateRulesetError", "FourEyesError", "Governance", "GovernanceError",
    "GovernanceRecordError", "ModuleIntegrityError", "NoActiveRulesetError", "RulesetRefusedError",
    "RulesetView", "StateError", "Step", "UnknownRulesetError", "same_person",
]

PROPOSED, APPROVED, ACTIVATED, BOOTSTRAPPED = (
    "ruleset.proposed", "ruleset.approved", "ruleset.activated", "ruleset.bootstrapped")
KINDS = (PROPOSED, APPROVED, ACTIVATED, BOOTSTRAPPED)
DEFAULT_PACK = Path(__file__).parents[1] / "wasm_rules" / "packs" / "aml_core.toml"
BOOTSTRAP_NOTE = ("operator install of the shipped default pack at init; NOT four-eyes approved "
                  "(no second principal reviewed it)")


class GovernanceError(Exception):
    """Base of every refusal by rule governance; nothing was written when one is raised."""


class RulesetRefusedError(GovernanceError):
    """The ruleset does not parse, compile or fit the pipeline (API: 422). ``rule_id``,
    ``line`` and ``column`` are set when the compiler named them."""

    def __init__(self, message: str, *, rule_id: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.rule_id, self.line, self.column = rule_id, line, column


class CasesFailedError(RulesetRefusedError):
    """The ruleset's own test cases fail; ``failures`` names each (line, case, what differed)."""

    def __init__(self, message: str, failures: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.failures = failures


class DuplicateRulesetError(GovernanceError):
    """A ruleset with this ``id@version`` was already proposed (or bootstrapped)."""


class UnknownRulesetError(GovernanceError):  # deliberately not a LookupError: see _append
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


@dataclass(frozen=True)
class Step:
    """One governance record: where it sits in the log, when, and by whom."""

    seq: int
    recorded_at: str
    subject: str
    fingerprint_sha256: str  # "" for a local (unverified) principal
    comment: str | None


@dataclass(frozen=True)
class RulesetView:
    """A ruleset's state as its records derive it."""

    id: str  # "{ruleset_id}@{version}"
    ruleset_id: str
    version: str
    module_sha256: str
    status: str  # proposed | approved | active | retired
    bootstrapped: bool  # installed by the operator at init: active, never four-eyes approved
    proposed: Step  # the ruleset.proposed (or ruleset.bootstrapped) record
    approved: Step | None
    activated: Step | None  # the latest activation (the bootstrap record for a bootstrapped one)
    retired_seq: int | None  # seq of the activation that replaced it, while it is not active
    rules: tuple[tuple[str, str], ...]  # (rule id, outcome)
    cases: Mapping[str, Any] | None  # {sha256, count, passed} of the cases run, None if none ran

    @property
    def four_eyes(self) -> bool:
        return self.approved is not None

    def to_json(self) -> dict[str, Any]:
        def step(s: Step | None) -> dict[str, Any] | None:
            return None if s is None else {"seq": s.seq, "recorded_at": s.recorded_at, "subject": s.subject,
                                           "fingerprint_sha256": s.fingerprint_sha256, "comment": s.comment}
        return {"id": self.id, "ruleset_id": self.ruleset_id, "version": self.version,
                "module_sha256": self.module_sha256, "status": self.status,
                "bootstrapped": self.bootstrapped, "four_eyes": self.four_eyes,
                "proposed": step(self.proposed), "approved": step(self.approved),
                "activated": step(self.activated), "retired_seq": self.retired_seq,
                "rules": [{"id": i, "outcome": o} for i, o in self.rules],
                "cases": None if self.cases is None else dict(self.cases)}


def same_person(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two recorded principals (``Principal.to_json()``) are one person: the same
    certificate, or the same subject DN under another certificate. Local principals have no
    fingerprint and are compared whole (which includes their subject)."""
    fa, fb = a.get("fingerprint_sha256", ""), b.get("fingerprint_sha256", "")
    if fa and fa == fb:
        return True
    if not fa or not fb:
        return dict(a) == dict(b) or a.get("subject") == b.get("subject")
    return bool(a.get("subject") == b.get("subject"))


# -- derivation: records in seq order -> state (pure) ------------------------------------------


@dataclass(frozen=True)
class _Ledgered:
    views: dict[str, RulesetView]
    active: str | None
    proposers: dict[str, dict[str, Any]]  # id -> recorded principal of the proposer
    ever_active: bool


def _step(seq: int, env: Mapping[str, Any], who: str) -> Step:
    body, p = env["record"], env["record"][who]
    return Step(seq, str(env["recorded_at"]), str(p["subject"]), str(p["fingerprint_sha256"]),
                body.get("comment"))


def _derive(rows: list[tuple[int, dict[str, Any]]]) -> _Ledgered:
    """State from governance records in seq order. A malformed record is a GovernanceError
    naming its seq (never a KeyError: under the ledger's lock that would read as damage)."""
    views: dict[str, RulesetView] = {}
    proposers: dict[str, dict[str, Any]] = {}
    active: str | None = None
    for seq, env in rows:
        try:
            active = _apply(views, proposers, active, seq, env)
        except (KeyError, TypeError, AttributeError) as exc:
            raise GovernanceRecordError(f"ledger entry {seq} is not a well-formed governance record: "
                                  f"{type(exc).__name__}: {exc}") from exc
    for rid, v in views.items():
        status = ("active" if rid == active else "retired" if v.activated is not None
                  else "approved" if v.approved is not None else "proposed")
        views[rid] = replace(v, status=status)
    return _Ledgered(views, active, proposers, active is not None)


def _apply(views: dict[str, RulesetView], proposers: dict[str, dict[str, Any]], active: str | None,
           seq: int, env: Mapping[str, Any]) -> str | None:
    kind, body = env["kind"], env["record"]
    rid = str(body["id"])
    v = views.get(rid)
    broken = _broken(kind, body, v, active, proposers.get(rid))
    if broken is not None:
        raise GovernanceRecordError(f"ledger entry {seq} ({kind} {rid}) is {broken}; governance state "
                              "cannot be derived (fail-closed)")
    if kind in (PROPOSED, BOOTSTRAPPED):
        boot = kind == BOOTSTRAPPED
        who = "operator" if boot else "proposer"
        step = _step(seq, env, who)
        views[rid] = RulesetView(
            rid, str(body["ruleset_id"]), str(body["version"]), str(body["module_sha256"]),
            "proposed", boot, step, None, step if boot else None, None,
            tuple((str(r["id"]), str(r["outcome"])) for r in body["rules"]), body.get("cases"))
        proposers[rid] = body[who]
        if boot:
            active = _switch(views, active, rid, seq)
    elif kind == APPROVED:
        views[rid] = replace(views[rid], approved=_step(seq, env, "approver"))
    else:
        views[rid] = replace(views[rid], activated=_step(seq, env, "activator"))
        active = _switch(views, active, rid, seq)
    return active


def _broken(kind: str, body: Mapping[str, Any], v: RulesetView | None, active: str | None,
            proposer: Mapping[str, Any] | None) -> str | None:
    """What is wrong with a record Governance would never have written (one appended around
    it, or damage), or None. Derivation enforces the rules, not only the writers."""
    if kind in (PROPOSED, BOOTSTRAPPED):
        if v is not None:
            return "a second proposal of the same id"
        return "a bootstrap after a ruleset was active" if kind == BOOTSTRAPPED and active else None
    if v is None or proposer is None:
        return "a step for a ruleset never proposed"
    if kind == APPROVED:
        if v.bootstrapped or v.approved is not None:
            return "an approval of a bootstrapped or already approved ruleset"
        return "a self-approval (four-eyes)" if same_person(proposer, body["approver"]) else None
    if active == v.id or not (v.four_eyes or v.bootstrapped):
        return "an activation of a ruleset not approved or already active"
    return None


def _switch(views: dict[str, RulesetView], active: str | None, rid: str, seq: int) -> str:
    if active is not None and active != rid:
        views[active] = replace(views[active], retired_seq=seq)
    views[rid] = replace(views[rid], retired_seq=None)
    return rid


def _read(conn: Connection, below: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind.in_(KINDS))
    if below is not None:
        q = q.where(e.c.seq < below)
    return [(int(seq), orjson.loads(bytes(rec))) for seq, rec in conn.execute(q.order_by(e.c.seq))]


# -- building a proposal (pure, apart from the sandbox that runs the cases) --------------------


@dataclass(frozen=True)
class _Built:
    body: dict[str, Any]
    module: bytes


def _refused(exc: RuleError) -> RulesetRefusedError:
    if isinstance(exc, RuleSyntaxError):
        return RulesetRefusedError(str(exc), rule_id=exc.rule_id, line=exc.line, column=exc.column)
    return RulesetRefusedError(str(exc))


def _build(toml_text: str, cases_text: str | None, sandbox: Sandbox | None) -> _Built:
    try:
        ruleset = parse_ruleset(toml_text)
        unknown = [f for f in ruleset.features if f not in RULE_FEATURE_NAMES]
        if unknown:
            raise RulesetRefusedError(f"ruleset {ruleset.id} reads features the pipeline does not "
                                      f"produce: {', '.join(unknown)}")
        module = compile_ruleset(ruleset)
        cases = None
        if cases_text is not None:
            cases = _run_cases(ruleset, module, cases_text, sandbox)
    except RuleError as exc:
        raise _refused(exc) from exc
    body = {
        "id": f"{ruleset.id}@{ruleset.version}", "ruleset_id": ruleset.id, "version": ruleset.version,
        "description": ruleset.description, "source": toml_text, "source_sha256": ruleset.source_sha256,
        "module_sha256": hashlib.sha256(module).hexdigest(),
        "module": base64.b64encode(module).decode("ascii"),
        "rules": [{"id": r.id, "outcome": r.outcome} for r in ruleset.rules], "cases": cases,
    }
    return _Built(body, module)


def _run_cases(ruleset: Any, module: bytes, text: str, sandbox: Sandbox | None) -> dict[str, Any]:
    parsed = parse_cases(text, ruleset.features, {r.id for r in ruleset.rules})
    rows = rows_of(parsed, ruleset.features)
    own = sandbox is None
    sb = Sandbox() if sandbox is None else sandbox
    try:
        with sb.load(module) as mod:
            batch = mod.evaluate(rows)
            results: list[CaseResult] = check_cases(parsed, batch, mod.manifest)
    finally:
        if own:
            sb.close()
    ref_out, ref_fired = evaluate_rows(ruleset, rows)
    failures = [{"line": r.case.line, "case": r.case.name, "why": r.explain()} for r in results if not r.ok]
    if not (np.array_equal(ref_out, batch.outcomes) and np.array_equal(ref_fired, batch.fired)):
        failures.append({"line": None, "case": None,
                         "why": "the reference evaluator disagrees with the module"})
    if failures:
        named = "; ".join(f"line {f['line']} {f['case']!r}: {f['why']}" for f in failures[:5])
        raise CasesFailedError(f"{len(failures)} of {len(results)} cases fail: {named}", failures)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "count": len(results),
            "passed": len(results)}


# -- the service -------------------------------------------------------------------------------


class Governance:
    """Proposes, approves and activates rulesets in one ledger; reads state from its records."""

    def __init__(self, ledger: Ledger, *, sandbox: Sandbox | None = None) -> None:
        self.ledger = ledger
        self._sandbox = sandbox  # runs proposals' cases; a short-lived one when None

    def _state(self) -> _Ledgered:
        try:
            with self.ledger.engine.connect() as conn:
                return _derive(_read(conn))
        except DBAPIError as exc:
            raise LedgerUnavailableError(f"cannot read governance records: {exc.orig}") from exc

    def _append(self, kind: str, body: dict[str, Any], check: Callable[[_Ledgered], None]) -> Receipt:
        """Seal one record if ``check`` (which the caller already ran outside the lock) still
        passes on the log as it is under the sequencer lock.

        The recheck runs as ``alongside``: after the entry is inserted, in the same
        transaction, reading only entries before it; a refusal rolls everything back. It must
        not raise a ``LookupError`` (the ledger reports those as damage), hence our own tree."""
        record = Record.from_canonical_body(kind, canonical_bytes(body))

        def under_lock(conn: Connection, receipts: list[Receipt]) -> None:
            check(_derive(_read(conn, below=receipts[0].seq)))

        (receipt,) = self.ledger.append_many([record], alongside=under_lock)
        return receipt

    def list(self) -> list[RulesetView]:
        """Every ruleset ever proposed, in the order proposed."""
        return list(self._state().views.values())

    def get(self, ruleset: str) -> RulesetView:
        view = self._state().views.get(ruleset)
        if view is None:
            raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")
        return view

    def active(self) -> RulesetView | None:
        s = self._state()
        return None if s.active is None else s.views[s.active]

    def propose(self, toml_text: str, principal: Principal, comment: str | None = None, *,
                cases: str | None = None) -> RulesetView:
        """Compile ``toml_text``, run its ``cases`` (JSONL) if given, and record the proposal."""
        try:
            head = parse_ruleset(toml_text)
        except RuleError as exc:
            raise _refused(exc) from exc
        rid = f"{head.id}@{head.version}"

        def fresh(s: _Ledgered) -> None:
            if rid in s.views:
                raise DuplicateRulesetError(f"ruleset {rid} was already proposed (seq "
                                            f"{s.views[rid].proposed.seq}); give it a new version")
        fresh(self._state())
        built = _build(toml_text, cases, self._sandbox)
        body = {"schema": "sealtrail.ruleset.proposed/1", **built.body,
                "proposer": principal.to_json(), "comment": comment}
        self._append(PROPOSED, body, fresh)
        return self.get(rid)

    def approve(self, ruleset: str, principal: Principal, comment: str | None = None, *,
                module_sha256: str | None = None) -> RulesetView:
        """Record a second principal's approval; ``module_sha256``, if given, must be the proposal's."""
        who = principal.to_json()

        def check(s: _Ledgered) -> None:
            v = _known(s, ruleset, module_sha256)
            if v.bootstrapped:
                raise StateError(f"ruleset {ruleset} was bootstrapped by the operator; approve a "
                                 "proposal of it under a new version instead")
            if v.approved is not None:
                raise StateError(f"ruleset {ruleset} is already approved (seq {v.approved.seq})")
            if same_person(s.proposers[ruleset], who):
                raise FourEyesError(f"{principal.subject} proposed ruleset {ruleset} and cannot "
                                    "approve it: a second principal must (four-eyes)")
        s = self._state()
        check(s)
        self._append(APPROVED, {"schema": "sealtrail.ruleset.approved/1", "id": ruleset,
                                "module_sha256": s.views[ruleset].module_sha256, "approver": who,
                                "comment": comment}, check)
        return self.get(ruleset)

    def activate(self, ruleset: str, principal: Principal, comment: str | None = None, *,
                 module_sha256: str | None = None) -> RulesetView:
        """Make an approved ruleset the one that scores (a retired approved one may return)."""
        def check(s: _Ledgered) -> None:
            v = _known(s, ruleset, module_sha256)
            if v.approved is None and not v.bootstrapped:
                raise StateError(f"ruleset {ruleset} is not approved; only an approved ruleset "
                                 "can become active")
            if s.active == ruleset:
                raise StateError(f"ruleset {ruleset} is already active")
        s = self._state()
        check(s)
        self._append(ACTIVATED, {"schema": "sealtrail.ruleset.activated/1", "id": ruleset,
                                 "module_sha256": s.views[ruleset].module_sha256,
                                 "activator": principal.to_json(), "previous_active": s.active,
                                 "comment": comment}, check)
        return self.get(ruleset)

    def bootstrap_default(self, pack_path: Path | None = None, *, principal: Principal,
                          cases_path: Path | None = None) -> RulesetView | None:
        """Install the shipped pack as active at init, if no ruleset was ever active; returns
        None (writing nothing) otherwise. Runs the pack's ``<name>_cases.jsonl`` when present."""
        pack = pack_path if pack_path is not None else DEFAULT_PACK
        if cases_path is None:
            beside = pack.with_name(f"{pack.stem}_cases.jsonl")
            cases_path = beside if beside.exists() else None
        if self._state().ever_active:
            return None
        built = _build(pack.read_text(encoding="utf-8"),
                       None if cases_path is None else cases_path.read_text(encoding="utf-8"),
                       self._sandbox)
        rid = str(built.body["id"])

        def first(s: _Ledgered) -> None:
            if s.ever_active:
                raise StateError("a ruleset was already active; bootstrap happens only once")
            if rid in s.views:
                raise DuplicateRulesetError(f"ruleset {rid} was already proposed")
        try:
            self._append(BOOTSTRAPPED, {"schema": "sealtrail.ruleset.bootstrapped/1", **built.body,
                                        "operator": principal.to_json(), "four_eyes": False,
                                        "note": BOOTSTRAP_NOTE}, first)
        except StateError:
            return None  # another replica bootstrapped meanwhile
        return self.get(rid)

    def module_bytes(self, ruleset: str) -> bytes:
        """The compiled module recorded with the proposal, checked against its SHA-256."""
        with self.ledger.engine.connect() as conn:
            for seq, env in _read(conn):
                body = env["record"]
                if env["kind"] in (PROPOSED, BOOTSTRAPPED) and body["id"] == ruleset:
                    try:
                        data = base64.b64decode(body["module"], validate=True)
                    except (binascii.Error, ValueError) as exc:
                        raise ModuleIntegrityError(f"entry {seq}: module is not base64: {exc}") from exc
                    got = hashlib.sha256(data).hexdigest()
                    if got != body["module_sha256"]:
                        raise ModuleIntegrityError(f"entry {seq}: module hashes to {got}, the record "
                                                   f"says {body['module_sha256']}")
                    return data
        raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")

    def load_active(self, sandbox: Sandbox) -> ActiveRules:
        """The active module, loaded into ``sandbox`` for the pipeline (start-up, after activate)."""
        view = self.active()
        if view is None:
            raise NoActiveRulesetError("no ruleset is active (bootstrap the default pack or "
                                       "activate an approved one)")
        try:
            module = sandbox.load(self.module_bytes(view.id))
        except RuleError as exc:
            raise ModuleIntegrityError(f"the sandbox refuses the module of {view.id}: {exc}") from exc
        m = module.manifest
        if (m.ruleset_id, m.version) != (view.ruleset_id, view.version):
            module.close()
            raise ModuleIntegrityError(f"module of {view.id} declares {m.ruleset_id}@{m.version}")
        return ActiveRules.of(module)


def _known(s: _Ledgered, ruleset: str, module_sha256: str | None) -> RulesetView:
    v = s.views.get(ruleset)
    if v is None:
        raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")
    if module_sha256 is not None and module_sha256 != v.module_sha256:
        raise StateError(f"ruleset {ruleset} has module {v.module_sha256}, not {module_sha256}")
    return v
