"""The alert view's catch-up skips what it does not read: records of other kinds past its mark
(each console read seals one) leave the mark and take no lock, yet the next record it does read
is folded, and the view still checks against the records."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from audit.cases import store as view_store
from audit.cases.reads import record_reads
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts, watermark
from audit.query.verify import verify_index
from ledger import store
from ledger.append import Ledger
from tests.audit.cases.test_cases import ALICE, decided, rows  # noqa: F401 - fixture


def mark(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(select(watermark.c.seq)).scalar_one())


def tip(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return store.tail(conn)[0] - 1


def test_reads_past_the_mark_leave_it_and_the_next_event_is_folded(decided: Ledger,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    catch_up(decided.engine)
    a = rows(decided.engine, alerts)[0]
    at = mark(decided)
    for _ in range(3):
        record_reads(decided, ALICE, [{"case": a.case_id, "what": "case"}])
    report = catch_up(decided.engine)
    assert (report.from_seq, report.to_seq, mark(decided)) == (at, at, at) and tip(decided) == at + 3
    assert verify_index(decided.engine).case_view["alerts"] == len(rows(decided.engine, alerts))
    event = act(decided, ALICE, "comment", alert=a.seq, rationale="called the branch")
    assert mark(decided) >= event.seq  # act brings the view current: the event and the reads before it
    (now,) = rows(decided.engine, alerts, alerts.c.seq == a.seq)
    assert now.last_event_seq == event.seq
    # past the span, the mark moves even over records it does not read (the skip's scan is bounded)
    monkeypatch.setattr(view_store, "_IDLE_SPAN", 2)
    at = mark(decided)
    for _ in range(3):
        record_reads(decided, ALICE, [{"case": a.case_id, "what": "case"}])
    assert catch_up(decided.engine).to_seq == tip(decided) == mark(decided) > at
