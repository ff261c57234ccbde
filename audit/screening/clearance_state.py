"""Which good-guy clearances are in force: a function of their sealed records alone (no database).

``fold`` turns the ``screening.clearance`` records (``audit.screening.clearance`` seals them) into
``Clearance`` values; the deciding process and the offline bundle verifier both read clearances
through it, so they agree on which clearance cleared which hit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from audit.governance.state import same_person

__all__ = ["CLEARANCE_KIND", "CLEARANCE_SCHEMA", "Clearance", "fold"]

CLEARANCE_KIND = "screening.clearance"
CLEARANCE_SCHEMA = "sealtrail.screening-clearance/1"


@dataclass(frozen=True)
class Clearance:
    """One proposed clearance and what became of it."""

    seq: int  # the proposal's
    list_name: str
    entry_id: str
    account_key: str
    key_id: str
    until: date
    trace_id: str  # the decision the proposer looked at
    where: str
    proposer: dict[str, Any]
    rationale: str
    recorded_at: str
    approved_seq: int | None = None
    approver: dict[str, Any] | None = None
    revoked_seq: int | None = None
    revoker: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        if self.revoked_seq is not None:
            return "revoked"
        return "approved" if self.approved_seq is not None else "proposed"

    def clears(self, on: date, before_seq: int | None = None) -> bool:
        """Whether it clears a decision made on day ``on`` (and sealed at ``before_seq``, if given:
        approved before it and not revoked before it)."""
        if self.approved_seq is None or on > self.until:
            return False
        if before_seq is None:
            return self.revoked_seq is None
        return self.approved_seq < before_seq and (self.revoked_seq is None or self.revoked_seq > before_seq)

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "status": self.status, "list": self.list_name, "entry_id": self.entry_id,
                "account_key": self.account_key, "key_id": self.key_id, "until": self.until.isoformat(),
                "trace_id": self.trace_id, "where": self.where, "proposer": self.proposer,
                "rationale": self.rationale, "recorded_at": self.recorded_at,
                "approved_seq": self.approved_seq, "approver": self.approver, "revoked_seq": self.revoked_seq,
                "revoker": self.revoker}


def proposed(seq: int, rec: Mapping[str, Any], recorded_at: str) -> Clearance:
    """The clearance a proposal record states; ValueError (or KeyError, TypeError) if it is not one."""
    d = rec["decision"]
    return Clearance(seq, str(rec["list"]), str(rec["entry_id"]), str(rec["account_key"]),
                     str(rec["key_id"]), date.fromisoformat(rec["until"]), str(d["trace_id"]),
                     str(d["where"]), dict(rec["principal"]), str(rec["rationale"]), recorded_at)


def fold(records: Sequence[tuple[int, Mapping[str, Any], str]]) -> list[Clearance]:
    """The clearances the records (seq, body, recorded_at; in seq order) make, oldest first. A step
    that names no earlier proposal, repeats one or is a self-approval changes nothing."""
    out: dict[int, Clearance] = {}
    for seq, rec, at in records:
        action = rec.get("action")
        if action == "proposed":
            out[seq] = proposed(seq, rec, at)
            continue
        target = rec.get("clearance")
        c = out.get(target) if type(target) is int else None
        if c is None or c.revoked_seq is not None:
            continue
        who = dict(rec.get("principal") or {})
        if action == "approved" and c.approved_seq is None and not same_person(c.proposer, who):
            out[c.seq] = replace(c, approved_seq=seq, approver=who)
        elif action == "revoked":
            out[c.seq] = replace(c, revoked_seq=seq, revoker=who)
    return list(out.values())
