"""Governance state derived from its ledger records (pure: records in seq order -> state).

The record kinds, the frozen views a ruleset's records derive to, and the derivation itself,
which enforces the rules as well as the writers do: a record Governance would never have
written (a self-approval, an unapproved activation) makes the state underivable, fail-closed.
Reading the records is the service's job (``audit.governance.service``); nothing here touches storage.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from cryptography import x509

from audit.errors import GovernanceRecordError, StateError, UnknownRulesetError

__all__ = [
    "ACTIVATED", "APPROVED", "BOOTSTRAPPED", "KINDS", "PROPOSED", "Ledgered", "RulesetView", "Step",
    "derive", "known", "normalised_dn", "same_person",
]

PROPOSED, APPROVED, ACTIVATED, BOOTSTRAPPED = (
    "ruleset.proposed", "ruleset.approved", "ruleset.activated", "ruleset.bootstrapped")
KINDS = (PROPOSED, APPROVED, ACTIVATED, BOOTSTRAPPED)


@dataclass(frozen=True)
class Step:
    """One governance record: where it sits in the log, when, and by whom."""

    seq: int
    recorded_at: str
    subject: str
    fingerprint_sha256: str  # "" for a local (unverified) principal
    comment: str | None
    spki_sha256: str = ""  # of the certificate's public key; "" for a local principal or an older record


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
    """Whether two recorded principals (``Principal.to_json()``, with ``spki_sha256`` where a
    governance record keeps it) are one person: the same certificate, the same public key under
    another certificate, or the same subject DN as a directory compares names
    (``normalised_dn``: ``CN=Alice,O=Example  Bank`` is ``O=example bank,CN=ALICE``). Local
    principals have no fingerprint and are compared whole, or by subject."""
    fa, fb = a.get("fingerprint_sha256", ""), b.get("fingerprint_sha256", "")
    if fa and fa == fb:
        return True
    ka, kb = a.get("spki_sha256", ""), b.get("spki_sha256", "")
    if ka and ka == kb:
        return True
    if (not fa or not fb) and dict(a) == dict(b):
        return True
    return normalised_dn(str(a.get("subject", ""))) == normalised_dn(str(b.get("subject", "")))


_SPACE = frozenset("\t\n\v\f\r\x85")


def _fold(value: str) -> str:
    """An attribute value as RFC 4518 prepares it for caseIgnoreMatch, near enough: NFKC,
    case-folded, format and control characters mapped to nothing (spaces to a space), and
    leading, trailing and repeated spaces insignificant."""
    out = []
    for c in unicodedata.normalize("NFKC", value).casefold():
        cat = unicodedata.category(c)
        if c in _SPACE or cat == "Zs":
            out.append(" ")
        elif cat not in ("Cc", "Cf"):
            out.append(c)
    return " ".join("".join(out).split())


@lru_cache(maxsize=1024)
def normalised_dn(subject: str) -> tuple[tuple[str, str], ...]:
    """An RFC 4514 subject as the sorted (attribute type OID, folded value) pairs of all its
    RDNs: two subjects that differ in case, spacing, attribute order or the spelling of a type
    (``CN`` or ``2.5.4.3``) are one name. Text that does not parse as RFC 4514 is one folded value."""
    try:
        name = x509.Name.from_rfc4514_string(subject)
    except ValueError:
        return (("", _fold(subject)),)
    return tuple(sorted((a.oid.dotted_string, _fold(a.value if isinstance(a.value, str) else a.value.hex()))
                        for a in name))


# -- derivation: records in seq order -> state (pure) ------------------------------------------


@dataclass(frozen=True)
class Ledgered:
    """What the governance records derive to: each ruleset's view, the active one, who proposed."""

    views: dict[str, RulesetView]
    active: str | None
    proposers: dict[str, dict[str, Any]]  # id -> recorded principal of the proposer
    ever_active: bool


def _step(seq: int, env: Mapping[str, Any], who: str) -> Step:
    body, p = env["record"], env["record"][who]
    return Step(seq, str(env["recorded_at"]), str(p["subject"]), str(p["fingerprint_sha256"]),
                body.get("comment"), str(p.get("spki_sha256", "")))


def derive(rows: list[tuple[int, dict[str, Any]]]) -> Ledgered:
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
    return Ledgered(views, active, proposers, active is not None)


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


def known(s: Ledgered, ruleset: str, module_sha256: str | None) -> RulesetView:
    """The view of ``ruleset``; refuses one never proposed, or a stated module SHA-256 not its own."""
    v = s.views.get(ruleset)
    if v is None:
        raise UnknownRulesetError(f"no ruleset {ruleset} was ever proposed")
    if module_sha256 is not None and module_sha256 != v.module_sha256:
        raise StateError(f"ruleset {ruleset} has module {v.module_sha256}, not {module_sha256}")
    return v
