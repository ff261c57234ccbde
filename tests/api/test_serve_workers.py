"""``sealtrail serve --workers N``: N deciding processes on one port and one log, over mutual TLS.

Every worker takes payments (each commit's state delta names the worker that sealed it); a worker
killed under load is replaced while the others keep answering, and every payment acknowledged
is in a ledger that verifies; a worker paused past the others' commits carries on without a
fork or a wrong state; SIGHUP restarts the workers one at a time with no payment lost nor
decided twice; SIGTERM drains them all and exits 0. Clients retry a request whose connection
closed under them with the same Idempotency-Key, as a payment system does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ledger import store
from tests.api.server_proc import ServerFiles, ServerProcess, prepare, start
from tests.api.test_fail_closed import txs
from tests.api.test_rotation_live import sealtrail
from tests.conftest import Db

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.slow  # real server processes under load, 5-45 s each (CI runs them)


def workers_of(srv: ServerProcess) -> list[int]:
    """The pids of the supervisor's live child processes."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == srv.proc.pid and fields[0] != "Z":
            kids.append(int(entry.name))
    return sorted(kids)


def wait_for(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.1)


class Load:
    """Threads posting payments, each over a new connection, retrying with the payment's
    Idempotency-Key a transport failure (``retries``) or a 503 (``unavailable``: nothing was
    written, Retry-After says when); ``answers`` maps each key to the trace ids answered."""

    def __init__(self, srv: ServerProcess, bodies: list[bytes], threads: int = 4) -> None:
        self.srv, self.bodies = srv, bodies
        self.answers: dict[str, list[str]] = {}
        self.failures: list[str] = []
        self.retries = 0
        self.unavailable = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(bodies[i::threads],), daemon=True)
                         for i in range(threads)]

    def _run(self, chunk: list[bytes]) -> None:
        for body in chunk:
            key = str(uuid.uuid4())
            for attempt in range(20):
                try:
                    with self.srv.client(timeout=30) as c:
                        r = c.post("/v1/decisions", content=body, headers={**JSON, "Idempotency-Key": key})
                except httpx.TransportError:
                    with self._lock:
                        self.retries += 1
                    time.sleep(0.05 * (attempt + 1))
                    continue
                if r.status_code == 503:
                    with self._lock:
                        self.unavailable += 1
                    time.sleep(0.2)
                    continue
                with self._lock:
                    if r.status_code == 200:
                        self.answers.setdefault(key, []).append(r.json()["trace_id"])
                    else:
                        self.failures.append(f"HTTP {r.status_code}: {r.text[:300]}")
                break
            else:
                with self._lock:
                    self.failures.append("no answer after 20 connections")

    def start(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def join(self) -> None:
        deadline = time.monotonic() + 300
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = sum(t.is_alive() for t in self._threads)
        assert stuck == 0, f"{stuck} load thread(s) still posting after 300 s"

    def done(self) -> int:
        with self._lock:
            return len(self.answers) + len(self.failures)


def deltas(files: ServerFiles) -> list[dict[str, Any]]:
    from ledger import database

    engine = database.open_engine(files.db)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE kind = 'state.delta' "
                                        "ORDER BY seq").all()
    finally:
        engine.dispose()
    return [orjson.loads(r[0])["record"] for r in rows]


def decided(files: ServerFiles) -> list[str]:
    from ledger import database

    engine = database.open_engine(files.db)
    try:
        with engine.connect() as conn:
            return [str(t) for (t,) in conn.exec_driver_sql(
                "SELECT trace_id FROM ledger_entries WHERE kind = 'decision' ORDER BY seq")]
    finally:
        engine.dispose()


def verified(files: ServerFiles, *more: str) -> dict[str, Any]:
    r = sealtrail("ledger", "verify", "--db", files.db, "--keys", str(files.keys), "--json", *more)
    assert r.returncode == 0, r.stdout + r.stderr
    doc: dict[str, Any] = orjson.loads(r.stdout)
    return doc


def settled(files: ServerFiles, *loads: Load) -> None:
    """Nothing failed, every payment answered once (a retried one: the same decision), and every
    answer is a sealed decision of a ledger that verifies."""
    answers: dict[str, list[str]] = {}
    for load in loads:
        assert load.failures == []
        assert len(load.answers) == len(load.bodies)
        answers |= load.answers
    assert all(len(set(ids)) == 1 for ids in answers.values())  # retried: the same decision
    sealed = decided(files)
    assert len(sealed) == len(set(sealed)) == len(answers)  # each payment decided exactly once
    assert {ids[0] for ids in answers.values()} == set(sealed)
    doc = verified(files)
    assert doc["derived"]["state_deltas"] == len(deltas(files))


@pytest.fixture
def files(db: Db, tmp_path: Path) -> Iterator[ServerFiles]:
    yield prepare(tmp_path, None if db.dialect == "sqlite" else db.url)


def test_every_worker_decides_and_sigterm_drains_them_all(files: ServerFiles) -> None:
    with start(files, extra_args=("--workers", "2")) as srv:
        assert len(workers_of(srv)) == 2
        load = Load(srv, txs(80, seed=51)).start()
        load.join()
        assert srv.stop() == 0
    settled(files, load)
    assert (load.retries, load.unavailable) == (0, 0)
    assert len({d["decider"] for d in deltas(files)}) == 2  # both workers sealed commits


def test_a_killed_worker_is_replaced_and_nothing_acknowledged_is_lost(files: ServerFiles) -> None:
    with start(files, extra_args=("--workers", "3")) as srv:
        first = workers_of(srv)
        assert len(first) == 3
        load = Load(srv, txs(240, seed=52), threads=6).start()
        wait_for(lambda: load.done() >= 40)
        os.kill(first[0], signal.SIGKILL)  # a crash under load
        wait_for(lambda: len(workers_of(srv)) == 3 and first[0] not in workers_of(srv))
        load.join()
        assert srv.stop() == 0
    settled(files, load)
    # each worker alive at the stop sealed its state (feature state and account risk) as it held it;
    # recomputed from the log, each root is the log's state at its seq: the survivors, the
    # replacement among them, held the state the log gives, whatever the crash cut short
    doc = verified(files, "--state-roots")["derived"]
    assert doc["state_snapshots"] >= 3 and doc["state_roots_recomputed"] == doc["state_snapshots"]
    assert doc["account_risk_snapshots"] >= 3
    assert doc["account_risk_roots_recomputed"] == doc["account_risk_snapshots"]


def test_a_worker_paused_past_the_others_commits_resumes_on_the_log(db: Db, files: ServerFiles) -> None:
    if db.dialect != "postgresql":
        pytest.skip("on SQLite a worker paused inside its commit holds the database's write lock until it "
                    "resumes (no server can end its transaction): documented in operations.md")
    with start(files, extra_args=("--workers", "3")) as srv:
        load = Load(srv, txs(240, seed=55), threads=6).start()
        wait_for(lambda: load.done() >= 60)
        paused = workers_of(srv)[-1]
        os.kill(paused, signal.SIGSTOP)  # paused while the others commit, past the sequencer lease
        stopped = time.monotonic()
        before = len(decided(files))
        # held the lock? its lease ends it (10 s, or 30 s inside a batch prepared under the lock)
        wait_for(lambda: len(decided(files)) >= before + 20, timeout=120)
        time.sleep(max(0.0, store.SEQUENCER_LEASE_MS / 1000 + 1 - (time.monotonic() - stopped)))
        os.kill(paused, signal.SIGCONT)
        load.join()
        woke = len(deltas(files))
        after = Load(srv, txs(300, seed=56)[240:]).start()
        after.join()
        assert paused in workers_of(srv)  # it carried on, caught up with what the others sealed
        assert srv.stop() == 0
    settled(files, load, after)
    assert any(f"/{paused}/" in d["decider"] for d in deltas(files)[woke:])  # and seals again


def test_sighup_restarts_the_workers_one_at_a_time_losing_no_payment(files: ServerFiles) -> None:
    with start(files, extra_args=("--workers", "2")) as srv:
        first = set(workers_of(srv))
        assert len(first) == 2
        load = Load(srv, txs(200, seed=53)).start()
        wait_for(lambda: load.done() >= 30)
        srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(workers_of(srv)) == 2 and not first & set(workers_of(srv)), timeout=120)
        after = Load(srv, txs(300, seed=54)[200:]).start()  # the new workers take payments too
        load.join()
        after.join()
        assert srv.stop() == 0
    settled(files, load, after)
    assert load.unavailable == after.unavailable == 0  # a restart is not an outage
    assert len({d["decider"] for d in deltas(files)}) >= 3  # the old workers and the new


def test_a_replacement_that_cannot_start_leaves_the_others_serving_until_it_can(files: ServerFiles) -> None:
    key = files.keys / "signing.key"
    hidden = files.keys.parent / "signing.key.away"
    with start(files, extra_args=("--workers", "2")) as srv:
        first = workers_of(srv)
        key.rename(hidden)  # a replacement now fails to open the ledger (as with the database down)
        try:
            os.kill(first[0], signal.SIGKILL)
            wait_for(lambda: "another in 2 s" in srv.stderr(), timeout=60)  # failed once, backing off
            load = Load(srv, txs(40, seed=57)).start()  # the survivor serves meanwhile
            load.join()
            assert srv.proc.poll() is None and load.unavailable == 0
        finally:
            hidden.rename(key)
        wait_for(lambda: "serving in place of" in srv.stderr(), timeout=60)  # the next try starts
        assert len(workers_of(srv)) == 2
        mark = len(deltas(files))
        later = Load(srv, txs(100, seed=58)[40:]).start()
        later.join()
        assert len({d["decider"] for d in deltas(files)[mark:]}) == 2  # both serve again
        assert srv.stop() == 0
    settled(files, load, later)


def test_workers_whose_supervisor_is_killed_drain_and_exit(files: ServerFiles) -> None:
    with start(files, extra_args=("--workers", "2")) as srv:
        kids = workers_of(srv)
        assert len(kids) == 2
        srv.proc.send_signal(signal.SIGKILL)  # the supervisor only: no chance to stop its workers
        srv.proc.wait(timeout=30)

        def gone() -> bool:
            alive = []
            for pid in kids:
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if state != "Z":
                    alive.append(pid)
            return not alive

        wait_for(gone, timeout=60)  # nothing serves on unsupervised, holding the port and the ledger
        assert "the supervisor is gone" in srv.stderr()
    verified(files)
