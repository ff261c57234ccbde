"""Records made under the sequencer lock (``append_many(build=...)``), tails of several records,
and the PostgreSQL sequencer lease: a writer stalled inside its commit loses the lock."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

from ledger import LedgerUnavailableError, NoteSigner, Record, RecordError, store
from ledger.append import Ledger
from ledger.records import Receipt
from ledger.verify import verify_ledger
from tests.conftest import Db


def test_build_makes_the_records_under_the_lock_seeing_the_log_as_it_is(ledger: Ledger,
                                                                         signer: NoteSigner) -> None:
    seen: list[tuple[int, int]] = []
    got: list[list[Receipt]] = []

    def build(conn: Any, seq: int) -> list[Record]:
        seen.append((seq, store.head(conn).size))
        return [Record("test.built", {"i": i, "at": seq}) for i in range(3)]

    def tail(conn: Any, seq: int) -> list[Record]:
        return [Record("test.tail", {"n": 1}), Record("test.tail", {"n": 2})]

    before = ledger.size()
    receipts = ledger.append_many([], build=build, tail=tail,
                                  alongside=lambda conn, rs: got.append(list(rs)))
    assert seen == [(before, before)]
    assert [r.seq for r in receipts] == list(range(before, before + 5))
    assert [r.seq for r in got[0]] == list(range(before, before + 3))  # alongside: the built ones only
    assert ledger.size() == before + 5
    verify_ledger(ledger.engine, [signer.verifier])


def test_build_and_records_together_are_refused_and_a_build_that_raises_writes_nothing(
        ledger: Ledger) -> None:
    before = ledger.size()
    with pytest.raises(RecordError, match="not both"):
        ledger.append_many([Record("test.a", {})], build=lambda conn, seq: [])

    def broken(conn: Any, seq: int) -> list[Record]:
        raise RuntimeError("the batch could not be prepared")
    with pytest.raises(RuntimeError, match="could not be prepared"):
        ledger.append_many([], build=broken)
    with pytest.raises(RecordError, match="reserved for the ledger"):
        ledger.append_many([], build=lambda conn, seq: [Record("ledger.genesis", {})])
    assert ledger.size() == before


def test_a_writer_stalled_inside_its_commit_loses_the_lock_on_postgresql(
        db: Db, signer: NoteSigner, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    if db.dialect != "postgresql":
        pytest.skip("SQLite has no server to end a stalled writer's transaction: a writer stopped "
                    "inside its commit holds the file lock until it resumes or dies (documented)")
    monkeypatch.setattr(store, "SEQUENCER_BUILD_LEASE_MS", 500)  # a build's lease (the plain one: 10 s)
    other = Ledger(db.engine(), signer)
    before = ledger.size()
    stalled = threading.Event()
    woke = threading.Event()
    errors: list[BaseException] = []

    def stall(conn: Any, seq: int) -> list[Record]:
        stalled.set()
        time.sleep(2.0)  # idle inside the sequencer transaction: a stopped process
        woke.set()
        return [Record("test.stalled", {})]

    def stalled_writer() -> None:
        try:
            ledger.append_many([], build=stall)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=stalled_writer)
    t.start()
    assert stalled.wait(10)
    t0 = time.monotonic()
    (r,) = other.append_many([Record("test.other", {})])  # waits for the lease, not for the writer
    assert time.monotonic() - t0 < 1.8 and not woke.is_set()
    t.join()
    assert len(errors) == 1, errors  # its commit failed when it woke: the server had ended it
    assert isinstance(errors[0], LedgerUnavailableError | DBAPIError), repr(errors[0])
    assert other.size() == before + 1 and r.seq == before  # the stalled writer wrote nothing
    other.engine.dispose()
