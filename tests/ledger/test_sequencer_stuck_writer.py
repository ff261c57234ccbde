"""PostgreSQL: a writer holding the sequencer lock while its process is stopped mid-read (the
server blocked sending it a result) is not idle, so its lease never ends it; a writer waiting for
the lock ends it (``store.end_stuck_writer``). A writer that is merely busy is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine

from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.conftest import Db, _postgres

pytestmark = pytest.mark.postgres

# A writer that takes the sequencer lock as the ledger does (a 60 s lease: longer than this test
# waits, so the lease is not what frees the lock), says so, then reads a result far larger than
# the socket's buffers, or runs a long statement.
_HOLDER = """
import sys
from ledger import store
engine = store.connect(sys.argv[1])
with engine.connect() as conn, conn.begin():
    store.lock_sequencer(conn, 60_000)
    print(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar(), flush=True)
    rows = conn.exec_driver_sql(sys.argv[2]).fetchall()
print("committed", flush=True)
"""
# some 400 MB, after 0.3 s of work before the first row (so the test can pause the client before
# any row reaches it)
_LARGE = ("SELECT repeat('x', 1000) || CASE WHEN g = 1 THEN pg_sleep(0.3)::text ELSE '' END "
          "FROM generate_series(1, 400000) g")


@pytest.fixture
def db() -> Iterator[Db]:
    """PostgreSQL alone (this module's tests are about the server's sequencer lock; SQLite's write
    lock is the file's): overrides the two-dialect ``db`` for ``ledger`` and the rest."""
    yield from _postgres()


@contextmanager
def holder(db: Db, statement: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, db.url, statement], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.stderr.read() if proc.stderr else line
        yield proc, int(line)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait()


def backend(db: Db, pid: int) -> tuple[str, str] | None:
    admin = create_engine(db.url)
    try:
        with admin.connect() as conn:
            row = conn.exec_driver_sql("SELECT state, coalesce(wait_event, '') FROM pg_stat_activity "
                                       "WHERE pid = %(pid)s", {"pid": pid}).first()
    finally:
        admin.dispose()
    return None if row is None else (row[0], row[1])


def wait_until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def append_in_thread(ledger: Ledger) -> tuple[threading.Thread, list[object]]:
    got: list[object] = []

    def run() -> None:
        try:
            got.append(ledger.append_many([Record("test.after", {})])[0])
        except BaseException as exc:  # the test reports it
            got.append(exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def test_a_writer_stopped_mid_read_under_the_lock_is_ended_by_the_next_writer(
        db: Db, signer: NoteSigner, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 1_000)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 200)
    before = ledger.size()
    with holder(db, _LARGE) as (proc, pid):
        wait_until(lambda: backend(db, pid) == ("active", "PgSleep"), 30)
        os.kill(proc.pid, signal.SIGSTOP)  # paused before the server sends it rows
        wait_until(lambda: backend(db, pid) == ("active", "ClientWrite"), 30)
        t0 = time.monotonic()
        t, got = append_in_thread(ledger)
        t.join(30)
        waited = time.monotonic() - t0
        stuck_then = backend(db, pid)
        proc.send_signal(signal.SIGCONT)  # unblocks the old code's waiter too, so a failure is reported
        t.join(30)
        assert not isinstance(got[0], BaseException), repr(got[0])
        assert waited < 20, f"the next writer waited {waited:.1f} s, the stuck one held the log"
        assert stuck_then is None  # its backend was ended, not left holding the lock
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode != 0 and "committed" not in out  # its commit failed when it woke
    assert ledger.size() == before + 1
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_writer_busy_in_a_long_statement_under_the_lock_is_waited_for(
        db: Db, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 200)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    before = ledger.size()
    with holder(db, "SELECT pg_sleep(2)") as (proc, pid):
        wait_until(lambda: backend(db, pid) == ("active", "PgSleep"), 30)
        t, got = append_in_thread(ledger)
        t.join(30)
        out, err = proc.communicate(timeout=30)
        assert "committed" in out, err  # busy, not stuck: it finished its commit
    assert not isinstance(got[0], BaseException), repr(got[0])
    assert ledger.size() == before + 1


def test_a_free_lock_is_taken_at_once_and_the_lock_timeout_is_left_as_it_was(db: Db) -> None:
    engine = db.engine()
    try:
        with engine.connect() as first, engine.connect() as second:
            held = first.begin()
            store.lock_sequencer(first)
            with second.begin():
                second.exec_driver_sql("SET LOCAL lock_timeout = '7s'")
                # the second writer queues behind the first, which ends its transaction meanwhile
                ended = threading.Event()
                threading.Timer(0.5, lambda: (held.commit(), ended.set())).start()
                store.lock_sequencer(second)
                assert ended.is_set()
                assert second.exec_driver_sql("SHOW lock_timeout").scalar() == "7s"
            with second.begin():  # a free lock: one statement, no savepoint
                store.lock_sequencer(second)
                assert second.exec_driver_sql("SHOW lock_timeout").scalar() == "0"
    finally:
        engine.dispose()
