"""``case/case.json``: what a case bundle (``sealtrail.bundle/5``) states about its case.

The exporter writes it from the bank's alert and case view (after checking that view against
the sealed records it carries, ``audit.export.cases``); the verifier re-derives every row of it
from those records (``audit.bundle.cases``). It holds:

- ``case``, ``alerts``, ``events``, ``outcomes``: the case's row, its alerts' rows, the row of
  every case event the bundle carries (applied or not, and why) and the payment outcomes its
  events decided, as the view held them at seq ``search.to_seq``: exactly the fields
  ``CASE_FIELDS``, ``ALERT_FIELDS``, ``EVENT_FIELDS`` and ``OUTCOME_FIELDS`` name (those of
  ``audit.cases.fold``'s rows that this format fixes; a field the view gains later is not part
  of it, so a bundle written now verifies then);
- ``search``: the seqs ``[from_seq, to_seq]`` in which the exporter looked at every sealed
  ``case_event`` record for those about the case (``from_seq`` is the case id: the seq of the
  decision that opened it, before which nothing can act on it);
- ``withheld``: every other ``case_event`` record of that range as its seq and leaf hash only
  (proved against the checkpoint with the records, never disclosed: another case's rationale is
  no business of this case's examiner; docs/bundle-format.md, "Case bundles");
- ``policies`` and ``holds``: the seqs of the ``alert_policy`` and ``ledger.legal_hold`` lines
  the bundle carries for the case.

This module parses the file into frozen types, naming the first field that is wrong. It is pure
and imports nothing of the case fold, so that the proof check can read ``withheld`` in bundles
where nothing else of the case is checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from audit.errors import BundleMalformed
from ledger.jcs import canonical_bytes

__all__ = ["ALERT_FIELDS", "CASE_DOC_SCHEMA", "CASE_FIELDS", "CASE_FILE", "EVENT_FIELDS", "OUTCOME_FIELDS",
           "CaseDoc", "project"]

CASE_FILE = "case/case.json"
CASE_DOC_SCHEMA = "sealtrail.case-bundle/1"
CASE_FIELDS = ("case_id", "subject", "opened_at", "alerts", "open_alerts", "assignee_fp", "assignee_subject",
               "disposition", "closed_at", "pending", "pending_by", "links", "reports", "last_report",
               "last_event_seq", "last_alert_seq")
ALERT_FIELDS = ("seq", "trace_id", "opened_at", "outcome", "account_alert", "fired", "scorer_fp", "subject",
                "case_id", "policy_seq", "review_due", "filing_due", "state", "assignee_fp",
                "assignee_subject", "disposition", "closed_at", "next_review_due", "payment", "pending",
                "pending_by", "last_event_seq", "events")
EVENT_FIELDS = ("seq", "case_id", "alert_seq", "action", "actor_fp", "recorded_at", "applied", "why")
OUTCOME_FIELDS = ("seq", "alert_seq", "trace_id", "scorer_fp", "outcome", "recorded_at")


def project(row: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """``row`` cut to ``fields`` (a field it lacks is None)."""
    return {f: row.get(f) for f in fields}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEYS = {"schema", "case_id", "search", "case", "alerts", "events", "outcomes", "policies", "holds",
         "withheld"}


def _bad(detail: str) -> BundleMalformed:
    return BundleMalformed(detail, kind="case.file", file=CASE_FILE)


def _int(v: object, where: str) -> int:
    if type(v) is not int or v < 0:
        raise _bad(f"{where} is not a whole number: {v!r}"[:300])
    return v


def _seqs(v: object, where: str) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise _bad(f"{where} is not a list")
    out = tuple(_int(x, f"{where}[{i}]") for i, x in enumerate(v))
    if list(out) != sorted(set(out)):
        raise _bad(f"{where} is not ascending without repeats")
    return out


def _rows(v: object, where: str, fields: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    if not isinstance(v, list) or not all(isinstance(r, dict) for r in v):
        raise _bad(f"{where} is not a list of objects")
    for i, r in enumerate(v):
        if set(r) != set(fields):
            raise _bad(f"{where}[{i}] has fields {sorted(r)}, not {sorted(fields)}"[:400])
    keys = [_int(r.get("seq"), f"{where}[{i}].seq") for i, r in enumerate(v)]
    if keys != sorted(set(keys)):
        raise _bad(f"{where} is not in ascending seq without repeats")
    return tuple(v)


@dataclass(frozen=True)
class CaseDoc:
    """``case/case.json``, parsed: rows as plain objects (the fold's field names)."""

    case_id: int
    from_seq: int
    to_seq: int
    case: dict[str, Any]
    alerts: tuple[dict[str, Any], ...]
    events: tuple[dict[str, Any], ...]
    outcomes: tuple[dict[str, Any], ...]
    policies: tuple[int, ...]
    holds: tuple[int, ...]
    withheld: tuple[tuple[int, bytes], ...]  # (seq, leaf hash), ascending

    @classmethod
    def parse(cls, data: bytes) -> CaseDoc:
        """The file's bytes as a ``CaseDoc``; ``BundleMalformed`` (kind ``case.file``) names the
        first field that is not what docs/bundle-format.md says."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise _bad(f"is not JSON: {exc}") from None
        if not isinstance(doc, dict) or set(doc) != _KEYS:
            got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
            raise _bad(f"has fields {got}, not {sorted(_KEYS)}")
        if doc["schema"] != CASE_DOC_SCHEMA:
            raise _bad(f"schema is {doc['schema']!r}, not {CASE_DOC_SCHEMA}")
        search = doc["search"]
        if not isinstance(search, dict) or set(search) != {"from_seq", "to_seq"}:
            raise _bad("search is not {from_seq, to_seq}")
        case_id = _int(doc["case_id"], "case_id")
        lo, hi = _int(search["from_seq"], "search.from_seq"), _int(search["to_seq"], "search.to_seq")
        if lo != case_id or hi < lo:
            raise _bad(f"search [{lo}, {hi}] does not start at the case id {case_id}")
        if not isinstance(doc["case"], dict) or set(doc["case"]) != set(CASE_FIELDS):
            raise _bad(f"case is not an object of the fields {sorted(CASE_FIELDS)}")
        withheld = doc["withheld"]
        if not isinstance(withheld, list):
            raise _bad("withheld is not a list")
        pairs: list[tuple[int, bytes]] = []
        for i, w in enumerate(withheld):
            if not isinstance(w, dict) or set(w) != {"seq", "leaf_hash"}:
                raise _bad(f"withheld[{i}] is not {{seq, leaf_hash}}")
            leaf = w["leaf_hash"]
            if not isinstance(leaf, str) or not _HEX64.fullmatch(leaf):
                raise _bad(f"withheld[{i}].leaf_hash is not a lower-case hex SHA-256")
            pairs.append((_int(w["seq"], f"withheld[{i}].seq"), bytes.fromhex(leaf)))
        seqs = [s for s, _ in pairs]
        if seqs != sorted(set(seqs)):
            raise _bad("withheld is not in ascending seq without repeats")
        return cls(case_id=case_id, from_seq=lo, to_seq=hi, case=doc["case"],
                   alerts=_rows(doc["alerts"], "alerts", ALERT_FIELDS),
                   events=_rows(doc["events"], "events", EVENT_FIELDS),
                   outcomes=_rows(doc["outcomes"], "outcomes", OUTCOME_FIELDS),
                   policies=_seqs(doc["policies"], "policies"),
                   holds=_seqs(doc["holds"], "holds"), withheld=tuple(pairs))

    def to_bytes(self) -> bytes:
        """The file's bytes (RFC 8785)."""
        return canonical_bytes({
            "schema": CASE_DOC_SCHEMA, "case_id": self.case_id,
            "search": {"from_seq": self.from_seq, "to_seq": self.to_seq}, "case": self.case,
            "alerts": list(self.alerts), "events": list(self.events), "outcomes": list(self.outcomes),
            "policies": list(self.policies), "holds": list(self.holds),
            "withheld": [{"leaf_hash": leaf.hex(), "seq": s} for s, leaf in self.withheld]})
