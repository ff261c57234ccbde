"""The compliance facts of a period, as one pure function of sealed records.

What an examiner checks against the compliance map (docs/compliance.md) for a period
``[from, to)``: the signing keys and their rotations and revocations, the legal holds in force,
the payload purges, the ruleset versions with who proposed, approved and activated them, and the
decisions' outcomes, fail-safe HOLDs and refusals. Everything here is derived from sealed ledger
entries (their envelopes, parsed), so ``sealtrail compliance report``, the exporter (from the
database) and the offline verifier (from the bundle's records) compute it with the same code:
``compute_facts`` or, streamed, ``FactsBuilder``.

Two sets of entries feed it:

- ``HISTORY_KINDS``: every entry of these kinds from seq 0 up to the period's end (a hold placed
  before the period can be in force during it; a key in use then was introduced earlier), in seq
  order;
- ``COUNTED_KINDS`` (decisions and refusals): those recorded inside the period, in any order.

Entries of other kinds, and history entries recorded at or after the period's end, are ignored.
Facts that no sealed entry states (retention settings, checkpoint and cosignature rows, the
witnesses configured) are not computed here: ``audit.compliance.store`` reads them, and they
travel as "stated, not proven".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from audit.errors import ComplianceFactsError
from wasm_rules import OUTCOMES

__all__ = ["COUNTED_KINDS", "FACTS_SCHEMA", "HISTORY_KINDS", "ComplianceFactsError", "FactsBuilder", "Period",
           "compute_facts", "covering", "first_difference"]

FACTS_SCHEMA = "sealtrail.compliance-facts/1"
GENESIS, ROTATION, REVOCATION = "ledger.genesis", "ledger.key_rotation", "ledger.key_revocation"
HOLD, PURGE = "ledger.legal_hold", "ledger.payload_purge"
# audit.governance.state's kinds, spelled out: the offline verifier imports no governance service
PROPOSED, APPROVED, ACTIVATED, BOOTSTRAPPED = (
    "ruleset.proposed", "ruleset.approved", "ruleset.activated", "ruleset.bootstrapped")
HISTORY_KINDS = frozenset({GENESIS, ROTATION, REVOCATION, HOLD, PURGE, PROPOSED, APPROVED, ACTIVATED,
                           BOOTSTRAPPED})
COUNTED_KINDS = frozenset({"decision", "refusal"})




@dataclass(frozen=True)
class Period:
    """``[start, end)`` in the ledger's ``recorded_at`` form (UTC, microseconds, ``Z``): the strings
    order as the instants do."""

    start: str
    end: str

    def __contains__(self, at: object) -> bool:
        return isinstance(at, str) and self.start <= at < self.end

    def to_json(self) -> dict[str, str]:
        return {"from": self.start, "to": self.end}


_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_FORM = "%Y-%m-%dT%H:%M:%S.%fZ"


def covering(first: str, last: str) -> Period:
    """The shortest period that holds the instants ``first`` to ``last``, both included:
    ``[first, last + 1 us)``. A bundle cut for one case states the facts of the period its records span
    (docs/bundle-format.md); the exporter and the verifier both derive it here. ``ValueError`` where
    either is not in the ledger's ``recorded_at`` form or ``last`` is before ``first``."""
    for at in (first, last):
        if not _AT.fullmatch(at):
            raise ValueError(f"{at!r} is not a recorded_at (UTC, microseconds, Z)")
    datetime.strptime(first, _FORM)  # a real instant, or ValueError
    try:
        end = datetime.strptime(last, _FORM) + timedelta(microseconds=1)
    except OverflowError:
        raise ValueError(f"{last} is the last instant a recorded_at can state") from None
    if last < first:
        raise ValueError(f"{last} is before {first}")
    return Period(first, f"{end.year:04d}-{end:%m-%dT%H:%M:%S.%f}Z")


def _step(seq: int, at: str, who: Mapping[str, Any] | None) -> dict[str, Any]:
    who = who or {}
    return {"seq": seq, "recorded_at": at, "subject": str(who.get("subject", "")),
            "fingerprint_sha256": str(who.get("fingerprint_sha256", ""))}


class FactsBuilder:
    """``compute_facts`` fed one entry at a time (``add``), for callers that stream."""

    def __init__(self, period: Period) -> None:
        self.period = period
        self._last_history = -1
        self._keys: list[dict[str, Any]] = []
        self._rotations: list[dict[str, Any]] = []
        self._revocations: list[dict[str, Any]] = []
        self._holds: dict[str, dict[str, Any]] = {}  # every hold placed before the end, by id (latest)
        self._held: list[dict[str, Any]] = []  # in placing order
        self._placed = self._released = 0
        self._purges = 0
        self._purged = 0
        self._purge_reasons: Counter[str] = Counter()
        self._rulesets: dict[str, dict[str, Any]] = {}
        self._active: str | None = None
        self._active_at_start: str | None = None
        self._touched: set[str] = set()
        self._decisions = 0
        self._by_decision: Counter[str] = Counter()
        self._fail_safe: Counter[str] = Counter()
        self._refusals: Counter[str] = Counter()

    def add(self, seq: int, env: Mapping[str, Any]) -> None:
        """Take one sealed entry (its envelope, parsed); entries the facts do not use are ignored."""
        kind, at = env.get("kind"), env.get("recorded_at")
        if not isinstance(at, str):
            raise ComplianceFactsError(seq, "the entry has no recorded_at")
        try:
            if kind in COUNTED_KINDS:
                if at in self.period:
                    self._count(str(kind), env["record"])
            elif kind in HISTORY_KINDS and at < self.period.end:
                if seq <= self._last_history:
                    raise ComplianceFactsError(
                        seq, f"history entries out of seq order (after {self._last_history})")
                self._last_history = seq
                if at >= self.period.start and self._active_at_start is None:
                    self._active_at_start = self._active or ""
                self._history(seq, str(kind), at, env["record"])
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, ComplianceFactsError):
                raise
            raise ComplianceFactsError(seq, f"a {kind} entry the facts cannot read: {type(exc).__name__}: "
                                            f"{exc}") from None

    def _count(self, kind: str, body: Mapping[str, Any]) -> None:
        if kind == "decision":
            self._decisions += 1
            self._by_decision[str(body["decision"])] += 1
            if body.get("fail_safe") is not None:
                self._fail_safe[str(body["fail_safe"])] += 1
        else:
            self._refusals[str(body["refusal"]["kind"])] += 1

    def _history(self, seq: int, kind: str, at: str, body: Mapping[str, Any]) -> None:
        inside = at in self.period
        if kind == GENESIS:
            self._keys.append({"vkey": str(body["vkey"]), "from_seq": seq, "from_at": at, "until_seq": None})
        elif kind == ROTATION:
            if self._keys:
                self._keys[-1]["until_seq"] = seq
            self._keys.append({"vkey": str(body["new_vkey"]), "from_seq": seq, "from_at": at,
                               "until_seq": None})
            if inside:
                self._rotations.append({"seq": seq, "recorded_at": at, "old_vkey": str(body["old_vkey"]),
                                        "new_vkey": str(body["new_vkey"])})
        elif kind == REVOCATION:
            self._revocations.append({"seq": seq, "recorded_at": at,
                                      "revoked_vkey": str(body["revoked_vkey"]),
                                      "from_size": int(body["from_size"]), "reason": str(body["reason"]),
                                      "in_period": inside})
        elif kind == HOLD:
            self._hold(seq, at, body, inside)
        elif kind == PURGE:
            if inside:
                self._purges += 1
                self._purged += len(body["payloads"])
                self._purge_reasons[str(body["reason"])] += 1
        else:
            self._governance(seq, kind, at, body, inside)

    def _hold(self, seq: int, at: str, body: Mapping[str, Any], inside: bool) -> None:
        hold_id, action = str(body["hold_id"]), body["action"]
        h: dict[str, Any] | None
        if action == "place":
            h = {"hold_id": hold_id, "placed_seq": seq, "placed_at": at, "seq_from": int(body["seq_from"]),
                 "seq_to": int(body["seq_to"]), "reason": str(body["reason"]), "released_seq": None,
                 "released_at": None}
            self._holds[hold_id] = h
            self._held.append(h)
            self._placed += inside
        elif action == "release":
            h = self._holds.get(hold_id)
            if h is not None and h["released_seq"] is None:
                h["released_seq"], h["released_at"] = seq, at
            self._released += inside
        else:
            raise ValueError(f"action {action!r}")

    def _governance(self, seq: int, kind: str, at: str, body: Mapping[str, Any], inside: bool) -> None:
        rid = str(body["id"])
        if kind in (PROPOSED, BOOTSTRAPPED):
            boot = kind == BOOTSTRAPPED
            self._rulesets[rid] = {"id": rid, "module_sha256": str(body["module_sha256"]),
                                   "bootstrapped": boot,
                                   "proposed": _step(seq, at, body["operator" if boot else "proposer"]),
                                   "approved": None, "activations": []}
            if boot:
                self._rulesets[rid]["activations"].append(_step(seq, at, body["operator"]))
                self._active = rid
        else:
            v = self._rulesets.get(rid)
            if v is None:
                raise ValueError(f"{kind} of ruleset {rid}, never proposed")
            if kind == APPROVED:
                v["approved"] = _step(seq, at, body["approver"])
            elif kind == ACTIVATED:
                v["activations"].append(_step(seq, at, body["activator"]))
                self._active = rid
        if inside:
            self._touched.add(rid)

    def facts(self) -> dict[str, Any]:
        """The facts, as JSON (keys sorted by the caller's canonical encoding)."""
        start_active = self._active if self._active_at_start is None else (self._active_at_start or None)
        shown = set(self._touched) | ({start_active} if start_active is not None else set())
        rulesets = [{**v, "four_eyes": v["approved"] is not None,
                     "active_at_start": v["id"] == start_active, "active_at_end": v["id"] == self._active}
                    for v in self._rulesets.values() if v["id"] in shown]
        in_force = [h for h in self._held
                    if h["released_seq"] is None or h["released_at"] >= self.period.start]
        return {
            "schema": FACTS_SCHEMA, "period": self.period.to_json(),
            "keys": {"history": [dict(k) for k in self._keys], "rotations": list(self._rotations),
                     "revocations": list(self._revocations),
                     "active_at_end": self._keys[-1]["vkey"] if self._keys else None},
            "legal_holds": {"in_force": [dict(h) for h in in_force], "placed": self._placed,
                            "released": self._released},
            "purges": {"records": self._purges, "payloads": self._purged,
                       "by_reason": dict(sorted(self._purge_reasons.items()))},
            "rulesets": sorted(rulesets, key=lambda v: v["proposed"]["seq"]),
            "decisions": {"total": self._decisions,
                          "by_decision": {o: self._by_decision[o] for o in OUTCOMES},
                          "fail_safe": {"total": sum(self._fail_safe.values()),
                                        "by_reason": dict(sorted(self._fail_safe.items()))}},
            "refusals": {"total": sum(self._refusals.values()),
                         "by_kind": dict(sorted(self._refusals.items()))},
        }


def compute_facts(period: Period, entries: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """The compliance facts of ``period`` from sealed entries ``(seq, envelope)`` (history entries in
    seq order; see the module's docstring for which entries it needs)."""
    b = FactsBuilder(period)
    for seq, env in entries:
        b.add(seq, env)
    return b.facts()


def first_difference(stated: Any, got: Any, path: str = "") -> str | None:
    """The path of the first fact where ``stated`` and ``got`` differ (``keys.rotations[0].new_vkey``),
    or None where they are equal."""
    if isinstance(stated, dict) and isinstance(got, dict):
        for k in sorted(set(stated) | set(got)):
            sub = f"{path}.{k}" if path else str(k)
            if k not in stated or k not in got:
                return sub
            d = first_difference(stated[k], got[k], sub)
            if d is not None:
                return d
        return None
    if isinstance(stated, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(stated, got, strict=False)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d is not None:
                return d
        return None if len(stated) == len(got) else f"{path}[{min(len(stated), len(got))}]"
    if type(stated) is not type(got) or stated != got:
        return path or "(the whole object)"
    return None
