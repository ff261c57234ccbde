"""The alert and case view checked row by row against the sealed records (DESIGN.md invariant 11).

``check_case_view`` rebuilds the whole view from the sealed records up to the view's watermark
with the same fold the catch-up runs (``audit.cases.fold.CaseFold``, no loader: nothing is
trusted from the tables) and compares every row of ``audit_alerts``, ``audit_cases``,
``audit_case_events`` and ``audit_payment_outcomes`` with it: a row that differs, is missing or
has no record behind it is named by table, seq (the case id for a case) and what differed.
``ledger verify`` runs it beside the trace index's check.

Known limit: the rebuild holds the whole view in memory (about 0.5 kB an alert).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, func, select

from audit.cases.fold import CaseFold
from audit.cases.store import alert_row, case_row, event_row, outcome_row, sealed_records
from audit.cases.tables import alerts, case_events, cases, payment_outcomes, watermark
from ledger import store

__all__ = ["CaseViewReport", "check_case_view"]


@dataclass(frozen=True)
class CaseViewReport:
    """Rows checked per table, and the seq the view is current to."""

    watermark: int
    alerts: int
    cases: int
    events: int
    outcomes: int


def _compare(conn: Connection, table: Table, key: str, want: Mapping[int, dict[str, Any]],
             add: Callable[[str, int, str], None]) -> int:
    seen: set[int] = set()
    col = table.c[key]
    for r in conn.execute(select(table).order_by(col)):
        got = dict(r._mapping)
        k = int(got[key])
        seen.add(k)
        exp = want.get(k)
        if exp is None:
            add(table.name, k, "a row no sealed record gives")
            continue
        diff = sorted(c for c in exp if got.get(c) != exp[c])
        if diff:
            add(table.name, k, "; ".join(f"{c}: {got.get(c)!r}, the records give {exp[c]!r}"
                                         for c in diff[:3]))
    for k in sorted(set(want) - seen):
        add(table.name, k, "missing: the sealed records give this row")
    return len(seen)


def _by(rows: Iterable[dict[str, Any]], key: str) -> dict[int, dict[str, Any]]:
    return {int(r[key]): r for r in rows}


def check_case_view(conn: Connection, add: Callable[[str, int, str], None]) -> CaseViewReport:
    """Rebuild the view from the sealed records and report every difference through ``add``
    (table, seq, what); the counts of rows checked."""
    mark = conn.execute(select(watermark.c.seq).where(watermark.c.id == 1)).scalar()
    if mark is None:
        add(watermark.name, 0, "no watermark row")
        return CaseViewReport(0, 0, 0, 0, 0)
    tip = int(conn.execute(select(func.max(store.entries.c.seq))).scalar() or 0)
    if int(mark) > tip:
        add(watermark.name, int(mark), f"the view claims seq {mark}, past the ledger's last ({tip})")
    fold = CaseFold()
    fold.apply(sealed_records(conn, 0, min(int(mark), tip)))
    want_alerts = _by((alert_row(a) for a in fold.alerts.values()), "seq")
    want_cases = _by((case_row(c) for c in fold.cases.values()), "case_id")
    n_alerts = _compare(conn, alerts, "seq", want_alerts, add)
    n_cases = _compare(conn, cases, "case_id", want_cases, add)
    n_events = _compare(conn, case_events, "seq", _by((event_row(e) for e in fold.events), "seq"), add)
    n_out = _compare(conn, payment_outcomes, "seq", _by((outcome_row(o) for o in fold.outcomes), "seq"), add)
    return CaseViewReport(int(mark), n_alerts, n_cases, n_events, n_out)
