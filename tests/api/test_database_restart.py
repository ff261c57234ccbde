"""The database restarted under load: ``sealtrail serve --workers 2`` on a PostgreSQL cluster that
the test owns (``tests.pg_cluster``), crashed (``pg_ctl stop -m immediate``) while payments are
posted, left down a few seconds, then started again.

What a client sees: while the database is down every request is answered 503 with Retry-After and
a problem+json body (never a 500, never a decision); once it is back the same server processes
decide again within a bounded time, with no restart of anything but the database; every payment
acknowledged (200 with a trace id and a seq) is that sealed decision, every sealed decision was
acknowledged (clients retry with the same Idempotency-Key, or the same payments in a batch), and
``sealtrail ledger verify`` passes: nothing half-written.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
import pytest

from ledger import database
from tests import pg_cluster
from tests.api.server_proc import ServerFiles, ServerProcess, prepare, start
from tests.api.test_fail_closed import txs
from tests.api.test_serve_workers import verified, wait_for, workers_of

JSON = {"content-type": "application/json"}
OUTAGE_S = 3.0  # how long the database stays down under load
RECOVERY_S = 20.0  # the bound on the first decision after the database is back
RETRY_S = 0.2  # clients retry sooner than Retry-After (1 s) says, to see the recovery closely
pytestmark = pytest.mark.slow  # a PostgreSQL cluster and two server processes, ~15 s


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange: when it was sent and answered (monotonic), and what came back."""

    sent: float
    answered: float
    status: int  # 0: the connection failed (no HTTP answer)
    headers: dict[str, str]
    body: bytes


@dataclass
class Offered:
    """Threads posting payments until ``finish()``: ``singles`` threads one payment per request
    with an Idempotency-Key, one thread batches of ``batch`` payments; a payment not decided (503,
    or a failed connection) is posted again, the same key or the same batch, until it is. Every
    exchange is kept in ``answers``; ``acked`` maps each payment to the (trace id, seq) answered."""

    srv: ServerProcess
    bodies: list[bytes]
    singles: int = 3
    batch: int = 4
    answers: list[Answer] = field(default_factory=list)
    acked: dict[bytes, list[tuple[str, int]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Offered:
        self._threads = [threading.Thread(target=self._run, args=(1,)) for _ in range(self.singles)]
        self._threads.append(threading.Thread(target=self._run, args=(self.batch,)))
        for t in self._threads:
            t.start()
        return self

    def finish(self) -> None:
        """No new payment from now; returns once every payment taken was decided (or gave up)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in self._threads)

    def since(self, t: float) -> list[Answer]:
        with self._lock:
            return [a for a in self.answers if a.sent >= t]

    def decided(self) -> int:
        with self._lock:
            return len(self.acked)

    def _take(self, n: int) -> list[bytes]:
        with self._lock:
            chunk = self.bodies[self._next:self._next + n]
            self._next += len(chunk)
        return chunk

    def _run(self, n: int) -> None:
        while not self._stop.is_set():
            chunk = self._take(n)
            if not chunk:
                with self._lock:
                    self.failures.append("ran out of payments to offer")
                return
            self._decide(chunk)

    def _decide(self, chunk: list[bytes]) -> None:
        batch = len(chunk) > 1
        path = "/v1/decisions/batch" if batch else "/v1/decisions"
        content = b"[" + b",".join(chunk) + b"]" if batch else chunk[0]
        headers = JSON if batch else {**JSON, "Idempotency-Key": str(uuid.uuid4())}
        deadline = time.monotonic() + RECOVERY_S + 30
        while time.monotonic() < deadline:
            sent = time.monotonic()
            try:
                with self.srv.client(timeout=30) as c:
                    r = c.post(path, content=content, headers=headers)
                answer = Answer(sent, time.monotonic(), r.status_code, dict(r.headers), r.content)
            except httpx.TransportError as exc:
                answer = Answer(sent, time.monotonic(), 0, {}, repr(exc).encode())
            with self._lock:
                self.answers.append(answer)
            if answer.status == 200:
                doc = orjson.loads(answer.body)
                decisions = doc["decisions"] if batch else [doc]
                with self._lock:
                    for body, d in zip(chunk, decisions, strict=True):
                        self.acked.setdefault(body, []).append((d["trace_id"], d["ledger"]["seq"]))
                return
            if answer.status not in (0, 503):
                return  # not retried: the test fails on it (answers holds it)
            time.sleep(RETRY_S)
        with self._lock:
            self.failures.append(f"{len(chunk)} payment(s) not decided within {RECOVERY_S + 30:.0f} s")


def sealed(files: ServerFiles) -> dict[str, int]:
    """Every decision record in the ledger: trace id -> seq."""
    engine = database.open_engine(files.db)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT trace_id, seq FROM ledger_entries "
                                        "WHERE kind = 'decision'").all()
    finally:
        engine.dispose()
    return {str(t): int(s) for t, s in rows}


def unavailable_problem(a: Answer) -> str | None:
    """What is wrong with ``a`` as a 503 a client can act on; None when nothing is."""
    if a.status != 503:
        return f"HTTP {a.status}: {a.body[:300]!r}"
    retry = a.headers.get("retry-after", "")
    if not retry.isdigit() or int(retry) < 1:
        return f"503 with Retry-After {retry!r}"
    if a.headers.get("content-type") != "application/problem+json":
        return f"503 as {a.headers.get('content-type')!r}"
    doc = orjson.loads(a.body)
    if doc.get("status") != 503 or not str(doc.get("type", "")).startswith("urn:sealtrail:problem:"):
        return f"503 with body {doc!r}"
    return None


@pytest.fixture
def cluster() -> Iterator[pg_cluster.Cluster]:
    reason = pg_cluster.unavailable()
    if reason:
        pytest.skip(f"cannot start a throwaway PostgreSQL cluster: {reason}")
    with pg_cluster.Cluster.create() as pg:
        yield pg


def test_a_database_restart_under_load_is_503s_then_decisions_again(cluster: pg_cluster.Cluster,
                                                                    tmp_path: Path) -> None:
    files = prepare(tmp_path, cluster.url)
    with start(files, extra_args=("--workers", "2")) as srv:
        workers = workers_of(srv)
        assert len(workers) == 2
        load = Offered(srv, txs(3000, seed=61)).start()
        try:
            wait_for(lambda: load.decided() >= 30)
            cluster.stop(mode="immediate")  # a crash: every session cut, no shutdown checkpoint
            down = time.monotonic()
            wait_for(lambda: time.monotonic() - down >= OUTAGE_S and len(load.since(down)) >= 6)
            restarting = time.monotonic()
            cluster.start()
            up = time.monotonic()
            wait_for(lambda: any(a.status == 200 for a in load.since(up)), timeout=RECOVERY_S)
            recovered = min(a.answered for a in load.since(up) if a.status == 200) - up
            mark = load.decided()
            wait_for(lambda: load.decided() >= mark + 20, timeout=RECOVERY_S)  # and keeps deciding
        finally:
            load.finish()
        after = workers_of(srv)
        stderr = srv.stderr()
        assert srv.stop() == 0

    assert load.failures == []
    # While the database was down, every request was a 503 a client can act on.
    outage = [a for a in load.since(down) if a.answered < restarting]
    assert len(outage) >= 6
    assert [p for a in outage if (p := unavailable_problem(a))] == []
    # Over the whole run: decisions and 503s only (no 500, no dropped connection).
    assert [p for a in load.answers if a.status != 200 and (p := unavailable_problem(a))] == []
    assert recovered < RECOVERY_S
    # The same two workers served throughout: none died, the supervisor replaced none.
    assert after == workers, stderr
    assert "serving in place of" not in stderr
    # Every acknowledged payment is that sealed decision (a retried one: the same), and every
    # sealed decision was acknowledged.
    assert all(len(set(ids)) == 1 for ids in load.acked.values())
    acked = {ids[0][0]: ids[0][1] for ids in load.acked.values()}
    assert sealed(files) == acked
    verified(files)  # sealtrail ledger verify: nothing half-written
    replayed = sum(d.get("replayed", False) for a in load.answers if a.status == 200
                   for d in orjson.loads(a.body).get("decisions", [orjson.loads(a.body)]))
    print(f"outage: {len(outage)} answers, all 503; first decision {recovered:.2f} s after the restart; "
          f"{len(acked)} decisions ({replayed} answered from the ledger on a retry); "
          f"workers {workers} throughout")
