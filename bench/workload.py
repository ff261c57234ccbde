"""What benchmarks write: decision-like records built before any timing, and ledgers holding them."""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any, TypeVar

import rfc8785
from sqlalchemy import Engine

import migrations
from ledger import NoteSigner, Record
from ledger.append import CheckpointPolicy, Ledger
from ledger.records import seal

T = TypeVar("T")

ORIGIN = "bench.sealtrail/log"
KIND = "bench.event"
SEAL_TIME = "2026-12-02T00:00:00.000000Z"
SEED = 20261202
POOL_SIZE = 4096
RULES = ("velocity_24h", "high_risk_country", "structuring", "new_counterparty", "pep_match")
BUILD_BATCH = 1000
BUILD_POLICY = CheckpointPolicy(every_entries=1000, every_seconds=3600.0)
BACKEND_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def decision_body(rng: random.Random) -> dict[str, Any]:
    """A decision-like JSON object of about 150 bytes once canonical."""
    return {
        "subject": f"cust_{rng.randrange(10**6):06d}",
        "decision": rng.choice(("allow", "review", "block")),
        "score": round(rng.random(), 4),
        "rules": rng.sample(RULES, k=rng.randint(0, 2)),
        "amount": {"currency": rng.choice(("EUR", "USD", "GBP")), "minor": rng.randrange(10**8)},
        "model": "aml-gbm-2026.11",
    }


def record_pool(size: int = POOL_SIZE, seed: int = SEED) -> list[Record]:
    """``size`` distinct records, their canonical bodies built once, before any timing."""
    rng = random.Random(seed)
    bodies = [rfc8785.dumps(decision_body(rng)) for _ in range(size)]
    return [Record.from_canonical_body(KIND, body) for body in bodies]


def cycle(pool: Sequence[T], n: int) -> list[T]:
    """The first ``n`` items of ``pool`` repeated end to end."""
    return [pool[i % len(pool)] for i in range(n)]


def chunked(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into consecutive lists of ``size`` (the last may be shorter)."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def envelopes(records: Sequence[Record]) -> list[tuple[str, bytes]]:
    """(kind, sealed envelope bytes) per record, for plain-insert baselines."""
    return [(r.kind, seal(r, SEAL_TIME)[1]) for r in records]


def record_sizes(pool: Sequence[Record]) -> dict[str, Any]:
    """Kind, count and mean body and envelope sizes of the records written."""
    bodies = [len(r.canonical_body()) for r in pool]
    sealed = [len(seal(r, SEAL_TIME)[1]) for r in pool]
    return {
        "kind": KIND,
        "distinct_bodies": len(pool),
        "body_bytes_mean": round(statistics.fmean(bodies), 1),
        "envelope_bytes_mean": round(statistics.fmean(sealed), 1),
    }


def new_ledger(engine: Engine, policy: CheckpointPolicy) -> tuple[Ledger, NoteSigner]:
    """Migrate ``engine``'s database and write a new ledger's genesis."""
    migrations.upgrade(engine)
    signer = NoteSigner.generate(ORIGIN)
    return Ledger.create(engine, signer, ORIGIN, policy=policy), signer


def build_ledger(
    engine: Engine, pool: Sequence[Record], n: int,
    policy: CheckpointPolicy = BUILD_POLICY, batch: int = BUILD_BATCH,
) -> tuple[Ledger, NoteSigner, float]:
    """Append ``n`` records in batches of ``batch``, progress on a terminal; seconds taken."""
    led, signer = new_ledger(engine, policy)
    batches = chunked(cycle(pool, n), batch)
    tty = sys.stderr.isatty()
    name = BACKEND_NAMES.get(engine.dialect.name, engine.dialect.name)
    print(f"  building a {n:,}-entry {name} ledger...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    for i, chunk in enumerate(batches, 1):
        led.append_many(chunk)
        if tty and (i % 100 == 0 or i == len(batches)):
            print(f"\r  built {min(i * batch, n):,}", end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    return led, signer, time.perf_counter() - started
