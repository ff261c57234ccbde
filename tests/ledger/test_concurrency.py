"""One sequencer per log: threads and real processes appending together never fork the
chain, leave a gap or reuse a seq."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger

BATCHES, PER_BATCH = 15, 7


def _append_from_process(url: str, skey: str, worker: int, out: multiprocessing.Queue) -> None:
    lg = Ledger(store.connect(url), NoteSigner.from_skey(skey))
    seqs = []
    for b in range(BATCHES):
        batch = [Record("test.event", {"worker": worker, "b": b, "i": i}) for i in range(PER_BATCH)]
        seqs += [r.seq for r in lg.append_many(batch)]
    out.put((worker, seqs))


def _check(lg: Ledger, signer: NoteSigner, all_seqs: list[int], writers: int) -> None:
    total = writers * BATCHES * PER_BATCH
    assert sorted(all_seqs) == list(range(1, total + 1))  # no gap, no reuse
    lg.checkpoint()
    report = verify_ledger(lg.engine, [signer.verifier], workers=1)
    assert report.size == total + 1


def test_processes_share_one_sequencer(db: Db, signer: NoteSigner) -> None:
    lg = make_ledger(db, signer, every=20)
    ctx = multiprocessing.get_context("spawn")
    q: multiprocessing.Queue = ctx.Queue()
    procs = [ctx.Process(target=_append_from_process, args=(db.url, signer.skey, w, q))
             for w in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for _, seqs in results:
        assert seqs == sorted(seqs)  # each writer's own batches are in order
    _check(lg, signer, [s for _, seqs in results for s in seqs], 4)


def test_threads_with_shared_and_separate_ledger_objects(db: Db, signer: NoteSigner) -> None:
    shared = make_ledger(db, signer, every=20)
    own = [Ledger(shared.engine, signer) for _ in range(2)]  # separate tree caches
    seqs: list[int] = []
    lock = threading.Lock()

    def work(lg: Ledger, w: int) -> None:
        for b in range(BATCHES):
            got = lg.append_many([Record("test.event", {"w": w, "b": b, "i": i})
                                  for i in range(PER_BATCH)])
            with lock:
                seqs.extend(r.seq for r in got)

    threads = [threading.Thread(target=work, args=(lg, w))
               for w, lg in enumerate([shared, shared, *own])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check(shared, signer, seqs, 4)


def test_a_second_writer_waits_its_turn_in_the_kernel_and_goes_the_moment_the_first_is_done(
        db: Db, signer: NoteSigner) -> None:
    """SQLite on a file: writers queue on ``<database>-writer.lock`` (flock) before BEGIN IMMEDIATE,
    so the next one goes when the last is done instead of sleeping in SQLite's busy back-off;
    PostgreSQL queues on its advisory lock and has no lock file."""
    lg = make_ledger(db, signer)
    path = store._sqlite_file(db.url)
    holding, waiting, done = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        with store.writer_turn(lg.engine):
            holding.set()
            assert waiting.wait(5)
            time.sleep(0.05)  # the second writer is queued behind this one meanwhile
            order.append("first done")

    def second() -> None:
        assert holding.wait(5)
        waiting.set()
        with store.writer_turn(lg.engine):
            order.append("second in")
        done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert done.is_set()
    if path is None:  # PostgreSQL: no lock file, the writers did not wait on each other here
        assert db.dialect == "postgresql"
        return
    assert order == ["first done", "second in"]
    lock = Path(f"{path}-writer.lock")
    assert lock.exists() and os.stat(lock).st_mode & 0o077 == 0 and lock.read_bytes() == b""
    lg.append(Record("test", {"n": 1}))  # appends take their turn the same way
    lg.engine.dispose()
