"""More hostile tests of ``store.lock_sequencer``'s wait on PostgreSQL (its loop of short lock waits
and looks at the holder, ``store.end_stuck_writer``), from the caller's side: the lock_timeout it
set reads back as it set it; when the wait fails (its own lock_timeout or statement_timeout, a
cancel, its backend ended) ``Ledger.append`` says the ledger is unavailable, writes nothing, and
the next append works; a holder whose client dies frees the lock at once; a reader that is slow
but alive, or several waiters behind a busy holder, are handled as the docs say.

Builds on the helpers of ``test_sequencer_stuck_writer_hostile`` (``Watch``, ``Looks``,
``Background``, the ``hostile_marks`` table); the holder here is its own script, with reads that
trickle, a client that starts reading late, and work after its commit on the same connection."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial

import pytest
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from ledger import NoteSigner, Receipt, Record, store
from ledger.append import CheckpointPolicy, Ledger
from ledger.errors import LedgerUnavailableError
from ledger.verify import verify_ledger
from tests.conftest import Db, _postgres
from tests.ledger.test_sequencer_stuck_writer_hostile import (
    Background,
    Holder,
    Looks,
    Watch,
    _marks_table,
    kinds_after,
    run_holder,
    stuck_read,
    wait_until,
)

pytestmark = pytest.mark.postgres


# A writer that takes the sequencer lock as the ledger does (a 60 s lease, longer than any test
# here: the lease never frees the lock), writes a 'holder' mark under it, says its backend pid, then
# runs its steps: WAIT (idle in transaction until the test writes a line), TRICKLE:<sql> (a slow
# but alive reader: 1000 rows, then 200 ms of other work, and so on), LATE:<sql> (a client that
# starts reading 250 ms after the first row came, then reads all), or an SQL statement read in full.
# A last step AFTER: once committed, a second transaction on the same connection (the same backend)
# marks 'after' and works 1 s (AFTER_SQL), without the lock. On its way out it says how many rows
# it streamed.
_HOLDER = """
import sys, time
from ledger import store
url, *steps = sys.argv[1:]
after = steps[-1:] == ["AFTER"]
steps = steps[:-1] if after else steps
engine = store.connect(url)
read = 0
try:
    with engine.connect() as conn:
        with conn.begin():
            store.lock_sequencer(conn, 60_000)
            conn.exec_driver_sql("INSERT INTO hostile_marks (note) VALUES ('holder')")
            print(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar(), flush=True)
            for step in steps:
                kind, _, sql = step.partition(":")
                if step == "WAIT":
                    sys.stdin.readline()
                elif kind == "TRICKLE":
                    for _ in store.raw_cursor(conn).stream(sql):
                        read += 1
                        if read % 1000 == 0:
                            time.sleep(0.2)
                elif kind == "LATE":
                    for i, _ in enumerate(store.raw_cursor(conn).stream(sql)):
                        if i == 0:
                            time.sleep(0.25)
                        read += 1
                else:
                    conn.exec_driver_sql(step).fetchall()
        print("committed", flush=True)
        if after:
            with conn.begin():
                conn.exec_driver_sql("INSERT INTO hostile_marks (note) VALUES ('after')")
                conn.exec_driver_sql(AFTER_SQL).fetchall()
            print("after", flush=True)
finally:
    print(f"read {read}", flush=True)
"""
AFTER_SQL = "SELECT pg_sleep(1) /* after the commit */"
_HOLDER = _HOLDER.replace("AFTER_SQL", repr(AFTER_SQL))


def holder(url: str, watch: Watch, *steps: str) -> AbstractContextManager[Holder]:
    return run_holder(_HOLDER, [url, *steps], watch)


@pytest.fixture
def db() -> Iterator[Db]:
    """PostgreSQL alone (this module's tests are about the server's sequencer lock; SQLite's write
    lock is the file's): overrides the two-dialect ``db`` for ``ledger`` and the rest."""
    yield from _postgres()


@pytest.fixture
def watch(db: Db) -> Iterator[Watch]:
    _marks_table(db.url)
    w = Watch(db.url)
    yield w
    w.close()


@contextmanager
def admin(db: Db) -> Iterator[Connection]:
    """An autocommit connection of its own (a fresh pg_stat_activity each statement)."""
    engine = create_engine(db.url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def engine_with(db: Db, **settings: str) -> Engine:
    """An engine whose connections set ``settings`` (an operator's ``options=-c...`` in the URL)."""
    url = make_url(db.url)
    extra = " ".join(f"-c{k}={v}" for k, v in settings.items())
    url = url.update_query_dict({"options": f"{url.query['options']} {extra}"})
    return store.connect(url.render_as_string(hide_password=False))


def ledger_on(engine: Engine, signer: NoteSigner) -> Ledger:
    return Ledger(engine, signer, policy=CheckpointPolicy(1000, 3600))


def append_kind(lg: Ledger, kind: str) -> Receipt:
    return lg.append(Record(kind, {}))


def busy(watch: Watch, h: Holder, sql: str) -> None:
    wait_until(lambda: watch.of(h.pid) == ("active", "PgSleep", sql), what=f"the holder running {sql}")


def state(watch: Watch, pid: int) -> tuple[str, str, str]:
    return watch.of(pid) or ("", "", "")


def sqlstate(exc: BaseException | None) -> str | None:
    return getattr(getattr(exc, "orig", None), "sqlstate", None)


# --------------------------------------------------------------------------- the caller's settings


@pytest.mark.parametrize(("scope", "value"), [
    ("LOCAL", "2min"), ("LOCAL", "1500ms"), ("LOCAL", "1.5s"), ("LOCAL", "1h"), ("LOCAL", "2500"),
    ("LOCAL", "24d"), ("SESSION", "2min"), ("SESSION", "1500ms"),
])
def test_the_callers_lock_timeout_in_any_unit_reads_back_as_it_was_after_a_wait(
        db: Db, scope: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller set lock_timeout in its transaction (SET LOCAL, or SET for the session) in some
    unit; lock_sequencer queues (its loop of short lock timeouts) and restores it from the ms
    integer: SHOW must print what it printed before, in the transaction and once it commits."""
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 50)
    looks = Looks(monkeypatch)
    engine = db.engine()
    try:
        with engine.connect() as first, engine.connect() as second:
            held = first.begin()
            store.lock_sequencer(first)
            with second.begin():
                second.exec_driver_sql(f"SET {'LOCAL ' if scope == 'LOCAL' else ''}lock_timeout = '{value}'")
                before = second.exec_driver_sql("SHOW lock_timeout").scalar()
                timer = threading.Timer(0.3, held.commit)
                timer.start()
                store.lock_sequencer(second)
                timer.join()
                in_tx = second.exec_driver_sql("SHOW lock_timeout").scalar()
            after = second.exec_driver_sql("SHOW lock_timeout").scalar()
            second.rollback()
    finally:
        engine.dispose()
    assert looks.results, "lock_sequencer took the lock without queueing: the wait loop never ran"
    assert in_tx == before, f"SET {scope} lock_timeout = '{value}' read {before!r}, then {in_tx!r}"
    assert after == (before if scope == "SESSION" else "0")


def test_a_caller_whose_lock_timeout_runs_out_keeps_a_usable_transaction_and_its_setting(
        db: Db, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """SET LOCAL lock_timeout = '350ms' against a holder busy 1.5 s: lock_sequencer raises 55P03
    after ~350 ms; the caller's transaction still answers (its own row visible, no 25P02 'current
    transaction is aborted'), its lock_timeout is its own 350ms (not the loop's last short wait),
    and rolling back leaves nothing of it."""
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    engine = db.engine()
    sql = "SELECT pg_sleep(1.5)"
    try:
        with holder(db.url, watch, sql) as h, engine.connect() as conn:
            busy(watch, h, sql)
            conn.begin()
            conn.exec_driver_sql("SET LOCAL lock_timeout = '350ms'")
            conn.exec_driver_sql("INSERT INTO hostile_marks (note) VALUES ('waiter')")
            t0 = time.monotonic()
            with pytest.raises(OperationalError) as exc:
                store.lock_sequencer(conn)
            waited = time.monotonic() - t0
            setting = conn.exec_driver_sql("SHOW lock_timeout").scalar()
            seen = list(conn.exec_driver_sql("SELECT note FROM hostile_marks ORDER BY id").scalars())
            conn.rollback()
            rc, out, err = h.finish()
    finally:
        engine.dispose()
    assert sqlstate(exc.value) == "55P03"
    assert 0.3 <= waited < 1.3, waited
    assert setting == "350ms"
    assert seen == ["waiter"]  # the holder's row is not committed yet; the caller's own row is there
    assert rc == 0 and "committed" in out, err
    assert watch.marks() == ["holder"]


# ------------------------------------------------------------------------- a failed wait, through the ledger


def test_a_ledger_writer_out_of_its_lock_timeout_is_unavailable_writes_nothing_and_goes_on(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine whose URL sets lock_timeout=300ms, a holder busy 1.5 s: ``append_many`` of three
    records raises ``LedgerUnavailableError`` (as before the wait loop: the 55P03 wrapped, not a raw
    OperationalError) after ~300 ms and writes none of them; once the holder is done the same
    ``Ledger`` appends, its pooled connection keeps the URL's 300ms and no lease, and the log
    verifies."""
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    engine = engine_with(db, lock_timeout="300ms")
    lg = ledger_on(engine, signer)
    before = ledger.size()
    sql = "SELECT pg_sleep(1.5)"
    try:
        with holder(db.url, watch, sql) as h:
            busy(watch, h, sql)
            t0 = time.monotonic()
            with pytest.raises(LedgerUnavailableError) as exc:
                lg.append_many([Record("test.timed_out", {"i": i}) for i in range(3)])
            waited = time.monotonic() - t0
            size_then = ledger.size()
            rc, out, err = h.finish()
        lg.append(Record("test.next", {}))
        with engine.connect() as conn:
            pooled = (conn.exec_driver_sql("SHOW lock_timeout").scalar(),
                      conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar())
    finally:
        engine.dispose()
    assert "lock timeout" in str(exc.value) and sqlstate(exc.value.__cause__) == "55P03"
    assert 0.25 <= waited < 1.3, waited
    assert size_then == before
    assert rc == 0 and "committed" in out, err
    assert kinds_after(ledger, before) == Counter({"test.next": 1})
    assert pooled == ("300ms", "0")
    verify_ledger(ledger.engine, [signer.verifier])


def _queued_pids(conn: Connection, holder_pid: int) -> list[int]:
    return [int(p) for p in conn.exec_driver_sql(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid <> %(h)s "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        {"h": holder_pid}).scalars()]


@pytest.mark.parametrize("interrupt", ["pg_cancel_backend", "pg_terminate_backend"])
def test_a_waiter_cancelled_or_ended_mid_wait_is_unavailable_and_the_ledger_goes_on(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, interrupt: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator cancels the queued writer's statement, or ends its backend, while it waits for
    a busy holder: another error than the loop's own lock timeout, inside the loop's savepoint.
    ``append`` must raise ``LedgerUnavailableError`` (not an SQLAlchemy error about a savepoint or
    a closed transaction), write nothing, and the same ``Ledger`` must append once the holder is
    done."""
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 300)
    looks = Looks(monkeypatch)
    before = ledger.size()
    sql = "SELECT pg_sleep(2)"
    with holder(db.url, watch, sql) as h, admin(db) as ops:
        busy(watch, h, sql)
        waiter = Background(lambda: ledger.append(Record("test.interrupted", {}))).start()
        wait_until(lambda: bool(_queued_pids(ops, h.pid)), what="the waiter queued on the lock")
        target = _queued_pids(ops, h.pid)[0]
        # a cancel that lands between two of the loop's statements is dropped by the server: again
        while not waiter.join(0.1):
            assert h.proc.poll() is None, "the holder finished before the waiter was interrupted"
            ops.exec_driver_sql(f"SELECT {interrupt}(%(pid)s)", {"pid": target})
        with pytest.raises(LedgerUnavailableError) as exc:
            waiter.value()
        size_then = ledger.size()
        rc, out, err = h.finish()
    assert isinstance(exc.value.__cause__, OperationalError), repr(exc.value.__cause__)
    assert looks.ended() == set()
    assert size_then == before
    assert rc == 0 and "committed" in out, err
    ledger.append(Record("test.next", {}))
    assert kinds_after(ledger, before) == Counter({"test.next": 1})
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_statement_timeout_shorter_than_a_look_ends_the_wait_as_before(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch) -> None:
    """statement_timeout=300ms on the writer's connection, the default 1 s between looks, a holder
    busy 1.5 s: the first short lock wait is cancelled by the statement timeout (57014), which the
    loop must not take for its own lock timeout and retry: ``append`` raises
    ``LedgerUnavailableError`` after ~300 ms, as the single lock wait did before the loop."""
    engine = engine_with(db, statement_timeout="300ms")
    lg = ledger_on(engine, signer)
    before = ledger.size()
    sql = "SELECT pg_sleep(1.5)"
    try:
        with holder(db.url, watch, sql) as h:
            busy(watch, h, sql)
            t0 = time.monotonic()
            with pytest.raises(LedgerUnavailableError) as exc:
                lg.append(Record("test.timed_out", {}))
            waited = time.monotonic() - t0
            rc, out, err = h.finish()
    finally:
        engine.dispose()
    assert sqlstate(exc.value.__cause__) == "57014" and "statement timeout" in str(exc.value)
    assert 0.25 <= waited < 1.2, waited
    assert rc == 0 and "committed" in out, err
    assert ledger.size() == before


def test_a_statement_timeout_longer_than_a_look_still_bounds_the_wait(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """statement_timeout=600ms on the writer's connection (an operator's bound on how long any
    statement, the lock wait included, may take), looks every 100 ms, a holder busy 2.5 s: the
    wait, many short statements now, still ends at about 600 ms and ``append`` raises
    ``LedgerUnavailableError``, as when the wait was one statement the server cancelled."""
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    engine = engine_with(db, statement_timeout="600ms")
    lg = ledger_on(engine, signer)
    sql = "SELECT pg_sleep(2.5)"
    try:
        with holder(db.url, watch, sql) as h:
            busy(watch, h, sql)
            t0 = time.monotonic()
            waiter = Background(lambda: lg.append(Record("test.bounded", {}))).start()
            done = waiter.join(1.5)
            waited = time.monotonic() - t0
            h.finish()
            waiter.join(30)
        assert done, f"the writer still waited {waited:.1f} s for the lock, past its 600 ms statement_timeout"
        with pytest.raises(LedgerUnavailableError):
            waiter.value()
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- holders that die or move on


@pytest.mark.parametrize("where", ["idle in transaction", "stuck in ClientWrite"])
def test_a_holder_whose_client_is_killed_frees_the_lock_at_once(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, where: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder's client process is SIGKILLed while it holds the lock (idle in its transaction,
    or paused with the server blocked sending it rows): the server sees its socket close and ends
    the backend, which frees the lock. The queued writer must get it at once (SEQUENCER_STUCK_MS is
    10 s here: nothing it does itself), ending no backend; the holder's write never lands."""
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 10_000)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    looks = Looks(monkeypatch)
    before = ledger.size()
    statement = stuck_read(0.3)
    with holder(db.url, watch, "WAIT" if where.startswith("idle") else statement) as h:
        if where.startswith("idle"):
            wait_until(lambda: state(watch, h.pid)[0] == "idle in transaction")
        else:
            h.pause_in_client_write(statement)
        waiter = Background(lambda: ledger.append(Record("test.after_kill", {}))).start()
        wait_until(lambda: len(looks.results) >= 2, what="the waiter's looks")
        os.kill(h.proc.pid, signal.SIGKILL)
        t0 = time.monotonic()
        done = waiter.join(5)
        waited = time.monotonic() - t0
        h.proc.wait(10)
        receipt = waiter.value()
        gone = watch.of(h.pid) is None
    assert done and waited < 3, f"the waiter took {waited:.1f} s to get a dead holder's lock"
    assert looks.ended() == set() and gone
    assert receipt.seq == before and ledger.size() == before + 1
    assert watch.marks() == []
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_holder_that_resumes_and_commits_just_as_it_is_judged_stuck_is_not_ended_afterwards(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """The waiter's look finds the holder stuck past SEQUENCER_STUCK_MS; before its
    pg_terminate_backend runs, the holder's client resumes, reads its rows, commits, and starts an
    unrelated transaction on the same connection. (The test widens that gap, one round trip in
    real life, by resuming the holder from inside ``StuckWriterWatch.saw`` once it says "stuck".)
    The backend pid is the same, but it no longer holds the lock nor is stuck: it must not be
    ended (that would kill work that has nothing to do with the sequencer)."""
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 500)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    looks = Looks(monkeypatch)
    before = ledger.size()
    statement = stuck_read(0.3)
    with holder(db.url, watch, statement, "AFTER") as h:
        judged: list[object] = []
        original = store.StuckWriterWatch.saw

        def saw(self: store.StuckWriterWatch, seen: tuple[int, object] | None) -> bool:
            stuck = original(self, seen)
            if stuck and not judged:
                judged.append(seen)
                h.resume()
                wait_until(lambda: state(watch, h.pid) == ("active", "PgSleep", AFTER_SQL),
                           what="the holder's later transaction")
            return stuck
        monkeypatch.setattr(store.StuckWriterWatch, "saw", saw)
        h.pause_in_client_write(statement)
        receipt = Background(lambda: ledger.append(Record("test.after", {}))).start().value()
        rc, out, err = h.finish()
    assert judged and "committed" in out  # it was judged stuck, then committed its transaction
    assert receipt.seq == before  # the waiter's record landed
    assert looks.ended() == set(), "a backend no longer holding the lock was ended"
    assert rc == 0 and "after" in out.split(), err
    assert watch.marks() == ["holder", "after"]


def _read_count(out: str) -> int:
    found = re.findall(r"^read (\d+)$", out, re.MULTILINE)
    return int(found[-1]) if found else -1


def test_a_slow_but_reading_holder_blocked_on_every_look_is_ended_and_fails_cleanly(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder that reads its result alive but slowly (1 MB, then 200 ms of other work, and so on)
    keeps the server blocked in ClientWrite on every look, in one statement: the server cannot tell
    it from a paused client, so after SEQUENCER_STUCK_MS (500 ms) the waiter ends it. What the user must get
    then: the holder's client an error (not a result cut short taken for whole: 'committed' is
    never printed), nothing of its transaction in the log, and the waiter's record in it. (The docs
    say the waiter ends a holder 'stopped'/'paused or frozen'; one that reads, slowly, is ended
    too: a limitation worth stating.)"""
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 500)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    looks = Looks(monkeypatch)
    before = ledger.size()
    trickle = "TRICKLE:SELECT repeat('x', 1000) FROM generate_series(1, 100000)"
    with holder(db.url, watch, trickle) as h:
        wait_until(lambda: state(watch, h.pid)[:2] == ("active", "ClientWrite"), what="ClientWrite")
        receipt = Background(lambda: ledger.append(Record("test.after_slow", {}))).start().value()
        rc, out, _ = h.finish()
    assert looks.ended() == {h.pid}
    assert _read_count(out) >= 3000  # it read on through at least three of its pauses: alive
    assert rc != 0 and "committed" not in out
    assert watch.marks() == []
    assert receipt.seq == before and kinds_after(ledger, before) == Counter({"test.after_slow": 1})
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_holder_blocked_on_its_client_in_many_short_reads_is_not_ended(
        db: Db, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder runs six reads of 20 MB, its client starting each 250 ms late: the server is
    blocked in ClientWrite ~0.3 s in each, some 1.5 s in all, far past SEQUENCER_STUCK_MS (700 ms
    here), but never 700 ms in one statement. The waiter must tell the statements apart on the same
    backend (its look keys on the statement, not the pid) and wait: the holder commits."""
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 700)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 100)
    looks = Looks(monkeypatch)
    before = ledger.size()
    late = "LATE:SELECT repeat('x', 100000) FROM generate_series(1, 200)"
    blocked_at: list[float] = []
    with holder(db.url, watch, *[late] * 6) as h:
        waiter = Background(lambda: ledger.append(Record("test.after_reads", {}))).start()
        while h.proc.poll() is None:
            if state(watch, h.pid)[:2] == ("active", "ClientWrite"):
                blocked_at.append(time.monotonic())
            time.sleep(0.02)
        out, err = h.proc.communicate(timeout=30)
        rc = h.proc.returncode
        receipt = waiter.value()
    assert blocked_at and blocked_at[-1] - blocked_at[0] >= 1.0, "the holder was not blocked on its client"
    assert len(looks.results) >= 5 and looks.ended() == set()
    assert rc == 0 and "committed" in out and _read_count(out) == 6 * 200, err
    assert watch.marks() == ["holder"]
    assert receipt.seq == before


# --------------------------------------------------------------------------- many waiters


def test_five_writers_queued_behind_a_busy_holder_all_commit_in_one_order_and_none_is_ended(
        db: Db, signer: NoteSigner, ledger: Ledger, watch: Watch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five ledgers (five engines, so five transactions in the lock's queue, each leaving and
    rejoining it every 50 ms, and each looking at whoever holds it: the busy holder, then one
    another) behind a holder busy 1.5 s, with SEQUENCER_STUCK_MS 200 ms: no backend is ended, the
    holder commits, and the five records take the five next seqs, each stored as its receipt says,
    in a log that verifies."""
    monkeypatch.setattr(store, "SEQUENCER_STUCK_MS", 200)
    monkeypatch.setattr(store, "SEQUENCER_WAIT_CHECK_MS", 50)
    looks = Looks(monkeypatch)
    before = ledger.size()
    lgs = [ledger_on(db.engine(), signer) for _ in range(5)]
    sql = "SELECT pg_sleep(1.5)"
    try:
        with holder(db.url, watch, sql) as h:
            busy(watch, h, sql)
            writers = [Background(partial(append_kind, lg, f"test.waiter{i}")) for i, lg in enumerate(lgs)]
            for w in writers:
                w.start()
            done = all(w.join(30) for w in writers)
            rc, out, err = h.finish()
        assert done, "a queued writer was still waiting 30 s on"
        receipts: list[Receipt] = [w.value() for w in writers]
    finally:
        for lg in lgs:
            lg.engine.dispose()
    assert looks.ended() == set() and len(looks.results) >= 5 * 10
    assert rc == 0 and "committed" in out, err
    assert watch.marks() == ["holder"]
    assert sorted(r.seq for r in receipts) == list(range(before, before + 5))
    with ledger.engine.connect() as conn:
        for r in receipts:
            assert store.entry_leaf(conn, r.trace_id) == (r.seq, r.leaf_hash)
            assert store.chain_at(conn, r.seq) == r.chain_hash
    assert kinds_after(ledger, before) == Counter(f"test.waiter{i}" for i in range(5))
    verify_ledger(ledger.engine, [signer.verifier])
