"""The stored alert and case view: the incremental catch-up that keeps it current, and reads.

``catch_up(engine)`` folds every sealed record after the view's watermark into the tables, in
one transaction that first locks the watermark row (so two processes never fold the same
records twice): decisions that open an alert, deadline policies and case events, read from the
ledger's own entries (never from another derived table). It is cheap when little is new and is
called before every read and after every action, so the view trails the log only by what was
sealed since. Rows the fold needs and has not seen come from the tables (``StoredView``, the
fold's loader).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, Row, Table, func, insert, select, update

from audit.cases.events import EVENT_KIND, parse_policy
from audit.cases.fold import CaseFold, EventRow, OutcomeRow
from audit.cases.policy import POLICY_KIND, DeadlinePolicy
from audit.cases.state import AlertState, CaseState
from audit.cases.tables import alerts, case_events, cases, payment_outcomes, watermark
from audit.decide.record import DECISION_KIND
from audit.errors import CaseError
from ledger import store

__all__ = ["KINDS", "CatchUpReport", "StoredView", "alert_from_row", "alert_row", "case_from_row", "case_row",
           "catch_up", "event_row", "outcome_row", "sealed_records"]

KINDS = (DECISION_KIND, POLICY_KIND, EVENT_KIND)
_IDLE_SPAN = 1024  # entries of other kinds a read may find past the mark without moving it
_PAGE = 5000
_ALERT_FIELDS = [f.name for f in fields(AlertState)]
_CASE_FIELDS = [f.name for f in fields(CaseState)]


@dataclass(frozen=True)
class CatchUpReport:
    """What one catch-up folded: the seq range, alerts and cases opened, events applied."""

    from_seq: int
    to_seq: int
    alerts_opened: int
    cases_opened: int
    events: int
    events_refused: int
    outcomes: int


def alert_row(a: AlertState) -> dict[str, Any]:
    """The ``audit_alerts`` row of an alert."""
    return {**asdict(a), "is_open": int(a.open)}


def alert_from_row(r: Row[Any] | dict[str, Any]) -> AlertState:
    m = r if isinstance(r, dict) else r._mapping
    return AlertState(**{k: m[k] for k in _ALERT_FIELDS})


def case_row(c: CaseState) -> dict[str, Any]:
    return {**asdict(c), "is_open": int(c.open)}


def case_from_row(r: Row[Any] | dict[str, Any]) -> CaseState:
    m = r if isinstance(r, dict) else r._mapping
    return CaseState(**{k: m[k] for k in _CASE_FIELDS})


def sealed_records(conn: Connection, after: int, upto: int, *, page: int = _PAGE
                   ) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """The sealed records the fold reads, ``after < seq <= upto``, in seq order, parsed."""
    e = store.entries
    last = after
    while True:
        rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record, e.c.leaf_hash)
                            .where(e.c.seq > last, e.c.seq <= upto, e.c.kind.in_(KINDS))
                            .order_by(e.c.seq).limit(page)).all()
        for seq, kind, record, leaf in rows:
            # the parsed envelope, and beside it the entry's leaf hash, which events name
            yield int(seq), str(kind), {**orjson.loads(record), "leaf_hash": bytes(leaf).hex()}
        if len(rows) < page:
            return
        last = int(rows[-1].seq)


class StoredView:
    """The fold's loader over the stored tables, inside the catch-up's transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def alert(self, seq: int) -> AlertState | None:
        r = self._conn.execute(select(alerts).where(alerts.c.seq == seq)).first()
        return None if r is None else alert_from_row(r)

    def case(self, case_id: int) -> CaseState | None:
        r = self._conn.execute(select(cases).where(cases.c.case_id == case_id)).first()
        return None if r is None else case_from_row(r)

    def open_cases(self, subject: str) -> list[int]:
        return [int(c) for c in self._conn.execute(
            select(cases.c.case_id).where(cases.c.subject == subject, cases.c.is_open == 1)).scalars()]

    def case_alerts(self, case_id: int) -> list[AlertState]:
        return [alert_from_row(r) for r in self._conn.execute(
            select(alerts).where(alerts.c.case_id == case_id).order_by(alerts.c.seq))]

    def policy_at(self, seq: int) -> DeadlinePolicy | None:
        e = store.entries
        rec = self._conn.execute(select(e.c.record).where(e.c.seq == seq, e.c.kind == POLICY_KIND)).scalar()
        return None if rec is None else parse_policy(orjson.loads(rec)["record"])

    def policy_before(self, seq: int) -> tuple[int, DeadlinePolicy] | None:
        """The policy in force before ``seq``: the last readable ``alert_policy`` record (one not
        as sealtrail seals a policy leaves the one before it in force, as the fold does)."""
        e = store.entries
        rows = self._conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == POLICY_KIND, e.c.seq < seq)
                                  .order_by(e.c.seq.desc()))
        for at, rec in rows:
            try:
                return int(at), parse_policy(orjson.loads(rec)["record"])
            except CaseError:
                continue
        return None


def _lock_watermark(conn: Connection) -> int:
    """The view's seq, with its row locked for this transaction (SQLite: the write lock)."""
    if conn.dialect.name == "postgresql":
        got = conn.execute(select(watermark.c.seq).where(watermark.c.id == 1).with_for_update()).scalar()
    else:
        conn.execute(update(watermark).where(watermark.c.id == 1).values(seq=watermark.c.seq))
        got = conn.execute(select(watermark.c.seq).where(watermark.c.id == 1)).scalar()
    if got is None:
        raise RuntimeError("audit_case_watermark has no row: run the migrations (sealtrail init)")
    return int(got)


def _store(conn: Connection, table: Table, key: str, rows: dict[int, dict[str, Any]], new: set[int]) -> None:
    """Insert the ``new`` rows, update the others in place (current state: the view's own)."""
    fresh = [rows[k] for k in sorted(new)]
    if fresh:
        conn.execute(insert(table), fresh)
    for k in sorted(set(rows) - new):
        conn.execute(update(table).where(table.c[key] == k)
                     .values(**{c: v for c, v in rows[k].items() if c != key}))


def _write(conn: Connection, fold: CaseFold) -> None:
    _store(conn, alerts, "seq", {s: alert_row(fold.alerts[s]) for s in fold.dirty_alerts}, fold.new_alerts)
    _store(conn, cases, "case_id", {c: case_row(fold.cases[c]) for c in fold.dirty_cases}, fold.new_cases)
    if fold.events:
        conn.execute(insert(case_events), [event_row(e) for e in fold.events])
    if fold.outcomes:
        conn.execute(insert(payment_outcomes), [outcome_row(o) for o in fold.outcomes])


def event_row(e: EventRow) -> dict[str, Any]:
    return {**asdict(e), "applied": int(e.applied)}


def outcome_row(o: OutcomeRow) -> dict[str, Any]:
    return asdict(o)


def catch_up(engine: Engine, *, upto: int | None = None) -> CatchUpReport:
    """Fold every sealed record after the watermark (up to ``upto``, default the tip) into the
    view, in one transaction; returns what it folded. Idempotent; safe beside live writers and
    other catch-ups (the watermark row is locked)."""
    e = store.entries
    with engine.connect() as conn:  # the common case, nothing new: no lock taken
        mark = conn.execute(select(watermark.c.seq).where(watermark.c.id == 1)).scalar()
        tip = conn.execute(select(func.max(e.c.seq))).scalar()
        end = min(int(tip or 0), upto) if upto is not None else int(tip or 0)
        if mark is not None and int(mark) >= end:
            return CatchUpReport(int(mark), int(mark), 0, 0, 0, 0, 0)
        # Nothing the view reads since the mark (a console read seals a case_read each time,
        # so the next read would otherwise take the view's lock to fold nothing): leave the mark
        # where it is, up to _IDLE_SPAN entries behind; the next record the fold reads moves it.
        if mark is not None and end - int(mark) <= _IDLE_SPAN and conn.execute(
                select(e.c.seq).where(e.c.seq > int(mark), e.c.seq <= end, e.c.kind.in_(KINDS)).limit(1)
        ).first() is None:
            return CatchUpReport(int(mark), int(mark), 0, 0, 0, 0, 0)
    with engine.begin() as conn:
        start = _lock_watermark(conn)
        tip = conn.execute(select(func.max(e.c.seq))).scalar()
        end = min(int(tip or 0), upto) if upto is not None else int(tip or 0)
        if end <= start:
            return CatchUpReport(start, start, 0, 0, 0, 0, 0)
        fold = CaseFold(StoredView(conn))
        fold.apply(sealed_records(conn, start, end))
        _write(conn, fold)
        conn.execute(update(watermark).where(watermark.c.id == 1).values(seq=end))
        refused = sum(not ev.applied for ev in fold.events)
        return CatchUpReport(start, end, len(fold.new_alerts), len(fold.new_cases),
                             len(fold.events) - refused, refused, len(fold.outcomes))
