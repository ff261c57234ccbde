"""``sealtrail serve --workers 2`` seals, over HTTP and across processes, the records one process
seals deciding the same batches in the log's order.

The in-process proof is ``tests/audit/test_many_deciders.py``; this one drives two real worker
processes through mutual TLS with payments among a handful of accounts, first handing consecutive
batches to alternate workers, then from several clients at once, so that most payments touch an
account the other worker updated last (measured on the log). Each commit is then rebuilt from the
log (its decisions' payloads, principals and event times, the Idempotency-Key a client sent) and
decided again, commit by commit, by one runtime on a fresh ledger opened as the supervisor and a
worker open theirs. Every ``decision``, ``decision.summary`` and ``state.delta`` must match, but
for what legitimately differs per process: stage latencies, the decider's name, and identifiers
keyed under each ledger's own secrets (renamed one to one).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import Engine

from api import ops
from api.config import Settings
from audit.decide.idempotency import decide_keyed
from audit.decide.runtime import Runtime
from audit.decide.submissions import parse_submissions
from audit.decide.types import Submission
from audit.query.index import payload_data
from ledger import database
from ledger.append import Ledger
from tests.api.server_proc import ServerFiles, ServerProcess, prepare, start
from tests.api.test_fail_closed import txs
from tests.api.test_serve_workers import Load
from tests.audit.test_many_deciders import _entries, _same, _shared_share, _translator
from tests.conftest import Db

pytestmark = pytest.mark.slow  # two server processes, then one runtime deciding it all again: ~10 s a dialect

JSON = {"content-type": "application/json"}
POOL = 6  # accounts every payment is between: each batch touches most of them
PER_BATCH = 4
PAYMENTS = 360


@dataclass(frozen=True)
class _Commit:
    """One commit as the log holds it: who sealed it, and each decision's trace id, record body
    and payload."""

    decider: str
    decisions: list[tuple[str, dict[str, Any], bytes]]


def _payments(n: int, seed: int) -> list[bytes]:
    """``n`` simulated payments, each between two of ``POOL`` parties."""
    docs = [orjson.loads(b) for b in txs(n, seed=seed)]
    parties: dict[str, Any] = {}
    for d in docs:
        for role in ("originator", "beneficiary"):
            if d[role]["account"]:
                parties.setdefault(d[role]["account"], d[role])
    pool = list(parties.values())[:POOL]
    assert len(pool) == POOL
    rng = random.Random(seed)
    for d in docs:
        d["originator"], d["beneficiary"] = rng.sample(pool, 2)
        del d["r16"]  # derived from the parties (given, it must match them)
    return [orjson.dumps(d) for d in docs]


def _post_batch(client: httpx.Client, bodies: list[bytes]) -> list[dict[str, Any]]:
    r = client.post("/v1/decisions/batch", content=b"[" + b",".join(bodies) + b"]", headers=JSON)
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["decisions"]
    return out


def _decider_of(engine: Engine, seq: int) -> str:
    """Who sealed the commit that holds the decision at ``seq`` (its state delta's decider)."""
    with engine.connect() as conn:
        rec = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE kind = 'state.delta' "
                                   f"AND seq > {int(seq)} ORDER BY seq LIMIT 1").scalar_one()
    return str(orjson.loads(rec)["record"]["decider"])


def _first_seq(gate: threading.Barrier, client: httpx.Client, body: bytes) -> int:
    """The seq of ``body`` posted on ``client`` once every other thread at ``gate`` posts too."""
    gate.wait(timeout=30)
    return int(_post_batch(client, [body])[0]["ledger"]["seq"])


def _client_per_worker(srv: ServerProcess, engine: Engine, bodies: Iterator[bytes]) -> list[httpx.Client]:
    """A keep-alive connection held by each of the two workers. The kernel hands a connection to
    whichever worker accepts it first, so connections are opened four at a time until both
    workers hold one; which worker that is, the state delta of its first payment's commit says."""
    held: dict[str, httpx.Client] = {}
    with ThreadPoolExecutor(4) as pool:
        for _ in range(10):
            clients = [srv.client(timeout=30) for _ in range(4)]
            gate = threading.Barrier(4)
            seqs = list(pool.map(_first_seq, [gate] * 4, clients, [next(bodies) for _ in clients]))
            for c, seq in zip(clients, seqs, strict=True):
                who = _decider_of(engine, seq)
                if who in held:
                    c.close()
                else:
                    held[who] = c
            if len(held) == 2:
                return list(held.values())
    for c in held.values():
        c.close()
    raise AssertionError(f"every connection went to one worker ({list(held)}) in 40 tries")


def _commits(engine: Engine) -> list[_Commit]:
    """The log's commits in seq order: consecutive decisions, their summary, their state delta."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT kind, record FROM ledger_entries WHERE kind IN ('decision', 'decision.summary', "
            "'state.delta') ORDER BY seq").all()
        envs = [(str(k), orjson.loads(r)) for k, r in rows]
        data = payload_data(conn, sorted({e["payload_sha256"] for k, e in envs if k == "decision"}))
    out: list[_Commit] = []
    batch: list[tuple[str, dict[str, Any], bytes]] = []
    summarised = False
    for kind, env in envs:
        if kind == "decision":
            assert not summarised, "a decision between a commit's summary and its state delta"
            payload = data[env["payload_sha256"]]
            assert payload is not None  # nothing purged
            batch.append((str(env["trace_id"]), env["record"], payload))
        elif kind == "decision.summary":
            assert batch and not summarised, "a summary without decisions before it"
            summarised = True
        else:
            assert summarised, "a state delta without its commit's summary"
            out.append(_Commit(str(env["record"]["decider"]), batch))
            batch, summarised = [], False
    assert not batch, "decisions without their commit's summary and state delta"
    return out


def _submissions(commit: _Commit, keys: dict[str, str]) -> list[Submission]:
    """The commit's payments as its worker decided them: each payload parsed as the endpoint that
    took it parses it (a batch element, or one payment with the Idempotency-Key its client sent),
    with the principal and event time its record states. A payment whose record says its deadline
    passed in the queue is decided as expired: the log states that only there."""
    subs = []
    for trace_id, body, payload in commit.decisions:
        at = datetime.fromisoformat(body["at"])
        key = keys.get(trace_id)
        if key is None:
            (s,) = parse_submissions(b"[" + payload + b"]", "json", body["principal"], batch=True,
                                     received_at=at)
        else:
            (s,) = parse_submissions(payload, "json", body["principal"], batch=False, received_at=at,
                                     idempotency_key=key)
        assert s.raw == payload
        subs.append(replace(s, expired=True) if body["fail_safe"] == "DEADLINE_EXCEEDED" else s)
    return subs


def _traffic(srv: ServerProcess, engine: Engine, seed: int) -> dict[str, str]:
    """Payments among ``POOL`` accounts through both workers; the trace id of each payment sent
    with an Idempotency-Key -> that key."""
    bodies = _payments(PAYMENTS, seed)
    first, batched, single = iter(bodies[:200]), bodies[200:280], bodies[280:]
    clients = _client_per_worker(srv, engine, first)
    try:
        alternate = list(first)
        for i in range(0, len(alternate), PER_BATCH):  # one worker, then the other, on the same accounts
            _post_batch(clients[(i // PER_BATCH) % 2], alternate[i:i + PER_BATCH])

        def batches_on(client: httpx.Client, part: list[bytes]) -> None:
            for i in range(0, len(part), PER_BATCH):
                _post_batch(client, part[i:i + PER_BATCH])
        # then all at once: each worker's connection posts batches while clients with new connections
        # post payments one by one, wherever the kernel sends them
        load = Load(srv, single, threads=3).start()
        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(batches_on, c, part)
                    for c, part in zip(clients, (batched[0::2], batched[1::2]), strict=True)]
            for f in done:
                f.result()
        load.join()
    finally:
        for c in clients:
            c.close()
    assert load.failures == [] and len(load.answers) == len(single)
    assert all(len(set(ids)) == 1 for ids in load.answers.values())  # a retry: the same decision
    return {ids[0]: key for key, ids in load.answers.items()}


@pytest.fixture
def files(db: Db, tmp_path: Path) -> Iterator[ServerFiles]:
    yield prepare(tmp_path / "served", None if db.dialect == "sqlite" else db.url)


def test_two_workers_over_http_seal_what_one_process_seals(files: ServerFiles, tmp_path: Path) -> None:
    with start(files, extra_args=("--workers", "2")) as srv:
        engine = database.open_engine(files.db)
        try:
            keys = _traffic(srv, engine, seed=61)
        finally:
            engine.dispose()
        assert srv.stop() == 0
    engine = database.open_engine(files.db)
    try:
        commits = _commits(engine)
        batches = [_submissions(c, keys) for c in commits]
        assert sum(map(len, batches)) == PAYMENTS  # every payment sealed once
        deciders = sorted({c.decider for c in commits})
        assert len(deciders) == 2
        share = _shared_share(batches, [deciders.index(c.decider) for c in commits])
        assert share >= 0.5, share  # on the log: payments that met the other worker's last update
        # one process: a fresh ledger, opened and closed as the supervisor does, then opened as a worker
        fresh: dict[str, Any] = {"db": f"sqlite:///{tmp_path / 'one-process.db'}",
                                 "keys": tmp_path / "one-process-keys"}  # the rest: defaults, as served
        settings = Settings(**fresh)
        ops.initialise(settings)
        Runtime.open(settings).close()  # its state.snapshot: the first decision lands at the served seq
        with Runtime.open(settings) as rt:
            for batch in batches:
                decide_keyed(rt.pipeline.decide, lambda: rt.engine, batch)  # as a worker's batcher calls it
            served = Ledger(engine, None)
            names = _translator(rt.ledger, served, [s for batch in batches for s in batch])
            ours, theirs = _entries(rt.ledger), _entries(served)
        assert [k for k, _ in theirs] == [k for k, _ in ours]
        for (kind, a), (_, b) in zip(ours, theirs, strict=True):
            _same(kind, a, b, names)
    finally:
        engine.dispose()
