"""A commit's last record made under the sequencer lock (``append_many(tail=...)``), and
``recorded_at`` that never decreases along the log whatever the writer's clock says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from ledger import NoteSigner, Record, RecordError, store
from ledger.append import Ledger
from ledger.records import Receipt
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger


def _entries(ledger: Ledger) -> list[tuple[int, str, dict[str, Any]]]:
    with ledger.engine.connect() as conn:
        return [(int(s), str(k), orjson.loads(bytes(r))) for s, k, r in conn.exec_driver_sql(
            "SELECT seq, kind, record FROM ledger_entries ORDER BY seq")]


def test_the_tail_record_is_sealed_last_and_sees_the_log_as_it_was(ledger: Ledger) -> None:
    seen: list[tuple[int, int]] = []
    got: list[list[Receipt]] = []

    def tail(conn: Any, seq: int) -> Record:
        size = store.head(conn).size
        seen.append((seq, size))
        return Record("test.tail", {"at": seq, "size_before": size})

    def alongside(conn: Any, receipts: list[Receipt]) -> None:
        got.append(receipts)

    before = ledger.size()
    receipts = ledger.append_many([Record("test.a", {"i": 1}), Record("test.a", {"i": 2})],
                                  alongside=alongside, tail=tail)
    assert [r.seq for r in receipts] == [before, before + 1, before + 2]
    assert seen == [(before + 2, before)]  # asked for the seq it gets, under the lock, the batch unwritten
    assert [r.seq for r in got[0]] == [before, before + 1]  # alongside: the batch's own receipts only
    last = _entries(ledger)[-1]
    assert (last[0], last[1]) == (before + 2, "test.tail")
    assert last[2]["record"] == {"at": before + 2, "size_before": before}
    assert len({e[2]["recorded_at"] for e in _entries(ledger)[before:]}) == 1  # one commit, one time
    assert verify_ledger(ledger.engine).size == ledger.size()  # raises on any failure


def test_a_tail_alone_commits_one_record(ledger: Ledger) -> None:
    before = ledger.size()
    (r,) = ledger.append_many([], tail=lambda conn, seq: Record("test.tail", {"seq": seq}))
    assert r.seq == before and _entries(ledger)[-1][2]["record"] == {"seq": before}


@pytest.mark.parametrize("bad", ["raises", "ledger kind"])
def test_a_failing_tail_writes_nothing_of_the_batch(ledger: Ledger, bad: str) -> None:
    def tail(conn: Any, seq: int) -> Record:
        if bad == "raises":
            raise RuntimeError("injected")
        return Record("ledger.genesis", {})

    before = ledger.size()
    with pytest.raises((RuntimeError, RecordError)):
        ledger.append_many([Record("test.a", {"i": 1})], tail=tail)
    assert ledger.size() == before
    assert ledger.append_many([Record("test.a", {"i": 1})])[0].seq == before  # the sequencer is intact


def test_recorded_at_never_goes_back_when_the_clock_does(db: Db, signer: NoteSigner) -> None:
    ledger = make_ledger(db, signer)
    try:
        late = datetime.now(UTC) + timedelta(hours=1)
        times = iter([late, late - timedelta(minutes=30), late + timedelta(seconds=1)])
        ledger.clock = lambda: next(times)
        stamps = [ledger.append(Record("test.a", {"i": i})).recorded_at for i in range(3)]
        assert stamps[1] == stamps[0]  # the clock stepped back: the log's last time, not the clock's
        assert stamps[2] > stamps[1]
        sealed = [e[2]["recorded_at"] for e in _entries(ledger)]
        assert sealed == sorted(sealed)
        assert verify_ledger(ledger.engine).size == ledger.size()  # raises on any failure
    finally:
        ledger.engine.dispose()
