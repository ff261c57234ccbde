"""The compliance facts of a period read from the ledger's database: the sealed entries
``audit.compliance.facts`` derives them from, and the facts no sealed entry states (checkpoint
coverage, witness cosignatures, the retention setting), which travel as "stated, not proven".

``sealtrail compliance report`` and the exporter read here; the offline verifier never does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, func, select

from audit.compliance.facts import COUNTED_KINDS, HISTORY_KINDS, FactsBuilder, Period
from ledger import store

__all__ = ["STATED_NOTE", "ComplianceReport", "compliance_report", "history_entries", "stated_facts"]

STATED_NOTE = ("stated by the bank's system from its database and configuration when this was produced; "
               "no sealed record proves these, so a verifier cannot check them")
_PAGE = 5000


@dataclass(frozen=True)
class ComplianceReport:
    """``facts``: derived from sealed entries (what a bundle's verifier recomputes); ``stated``:
    read from tables and settings that are not sealed."""

    facts: dict[str, Any]
    stated: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"period": self.facts["period"], "facts": self.facts, "stated": self.stated}


def history_entries(conn: Connection, end: str) -> list[tuple[int, bytes]]:
    """Every entry of ``HISTORY_KINDS`` recorded before ``end``, in seq order: ``(seq, entry bytes)``."""
    e = store.entries
    q = (select(e.c.seq, e.c.record).where(e.c.kind.in_(sorted(HISTORY_KINDS)), e.c.recorded_at < end)
         .order_by(e.c.seq))
    return [(int(s), bytes(r)) for s, r in conn.execute(q)]


def _counted(conn: Connection, period: Period) -> Iterator[tuple[int, bytes]]:
    e = store.entries
    after = -1
    while True:
        q = (select(e.c.seq, e.c.record).where(e.c.kind.in_(sorted(COUNTED_KINDS)), e.c.seq > after,
                                               e.c.recorded_at >= period.start, e.c.recorded_at < period.end)
             .order_by(e.c.seq).limit(_PAGE))
        rows = conn.execute(q).all()
        for s, r in rows:
            yield int(s), bytes(r)
        if len(rows) < _PAGE:
            return
        after = int(rows[-1][0])


def _micros(at: str) -> int:
    t = datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=None)
    return (t - datetime(1970, 1, 1)) // _US


_US = datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1)


def _at(micros: int) -> str:
    return (datetime(1970, 1, 1) + micros * _US).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stated_facts(conn: Connection, period: Period, *, retention_days: int | None = None,
                 witnesses_configured: Sequence[str] | None = None) -> dict[str, Any]:
    """The period's facts that no sealed entry states: checkpoints signed in it (by the table's
    ``created_at``), the newest by its end and the entries recorded by then that it does not cover;
    witness cosignatures received in it; and, where the caller knows them, the payload retention
    setting and the witnesses configured."""
    cp, cs, e = store.checkpoints, store.cosignatures, store.entries
    lo, hi = _micros(period.start), _micros(period.end)
    signed = conn.execute(select(func.count()).select_from(cp)
                          .where(cp.c.created_at >= lo, cp.c.created_at < hi)).scalar_one()
    newest = conn.execute(select(cp.c.size, cp.c.created_at).where(cp.c.created_at < hi)
                          .order_by(cp.c.size.desc()).limit(1)).first()
    covered = 0 if newest is None else int(newest[0])
    recorded = conn.execute(select(func.count()).select_from(e)
                            .where(e.c.seq >= covered, e.c.recorded_at < period.end)).scalar_one()
    by_witness: dict[str, dict[str, Any]] = {}
    for w, n, size in conn.execute(select(cs.c.witness, func.count(), func.max(cs.c.size))
                                   .where(cs.c.received_at >= lo, cs.c.received_at < hi)
                                   .group_by(cs.c.witness).order_by(cs.c.witness)):
        by_witness[str(w)] = {"cosignatures": int(n), "newest_size": int(size)}
    return {
        "note": STATED_NOTE,
        "retention": None if retention_days is None else {"payload_retention_days": retention_days},
        "checkpoints": {"signed_in_period": int(signed),
                        "newest": None if newest is None else {"size": int(newest[0]),
                                                               "created_at": _at(int(newest[1]))},
                        "entries_not_covered": int(recorded)},
        "witnesses": {"configured": None if witnesses_configured is None else sorted(witnesses_configured),
                      "cosigned_in_period": by_witness},
    }


def compliance_report(engine: Engine, period: Period, *, retention_days: int | None = None,
                      witnesses_configured: Sequence[str] | None = None) -> ComplianceReport:
    """The compliance facts of ``period`` from the ledger (one read snapshot on PostgreSQL)."""
    pg = engine.dialect.name == "postgresql"
    opts: Mapping[str, Any] = {"isolation_level": "REPEATABLE READ"} if pg else {}
    b = FactsBuilder(period)
    loads = orjson.loads
    with engine.connect().execution_options(**opts) as conn, conn.begin():
        for seq, rec in history_entries(conn, period.end):
            b.add(seq, loads(rec))
        for seq, rec in _counted(conn, period):
            b.add(seq, loads(rec))
        stated = stated_facts(conn, period, retention_days=retention_days,
                              witnesses_configured=witnesses_configured)
    return ComplianceReport(b.facts(), stated)
