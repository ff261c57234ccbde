"""Plain-insert baselines: tables shaped like ``ledger_entries``, written with no ledger logic.

A baseline row is ``(seq, *payload, recorded_at, trace_id)``: the payload (kind, envelope and,
for the hash-columns variant, two 32-byte hashes) is built before timing; the timestamp and
UUIDv7 trace ids are made per batch inside the timed loop, as the ledger's sequencer makes them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Engine, Index, LargeBinary, MetaData, String, Table

from bench.dbs import placeholder
from bench.workload import chunked
from ledger import store
from ledger.records import format_time, new_trace_ids

HASH_BYTES = 32

Payload = tuple[Any, ...]


def plain_table(prefix: str, hash_columns: bool) -> Table:
    """``ledger_entries``'s types, keys and indexes, with or without ``leaf_hash``/``chain_hash``."""
    hashes = [
        Column("leaf_hash", LargeBinary(HASH_BYTES), nullable=False),
        Column("chain_hash", LargeBinary(HASH_BYTES), nullable=False),
    ]
    return Table(
        f"{prefix}_entries",
        MetaData(),
        Column("seq", store.SeqType, primary_key=True, autoincrement=False),
        Column("kind", String(64), nullable=False),
        Column("record", LargeBinary, nullable=False),
        *(hashes if hash_columns else []),
        Column("recorded_at", String(27), nullable=False),
        Column("trace_id", String(36), nullable=False),
        Index(f"ix_{prefix}_trace_id", "trace_id", unique=True),
        Index(f"ix_{prefix}_kind_seq", "kind", "seq"),
    )


def with_random_hashes(items: Sequence[Payload], seed: int) -> list[Payload]:
    """``items`` each extended by two random 32-byte values standing in for the hashes."""
    rng = random.Random(seed)
    return [(*item, rng.randbytes(HASH_BYTES), rng.randbytes(HASH_BYTES)) for item in items]


def plain_rows(batch: Sequence[Payload], seq: int) -> list[Payload]:
    """Row tuples for one batch, each with a fresh UUIDv7, as the sequencer builds them."""
    ts = format_time(datetime.now(UTC))
    ids = new_trace_ids(len(batch))  # the same generator the ledger uses
    return [(seq + i, *payload, ts, ids[i]) for i, payload in enumerate(batch)]


def commit_rows(engine: Engine, sql: str, rows: list[Payload]) -> None:
    """One executemany in one transaction, opened the way the sequencer opens its own."""
    with engine.connect() as conn:
        conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            conn.exec_driver_sql(sql, rows)


def insert_sql(engine: Engine, table: Table) -> str:
    """A positional INSERT of every column of ``table``."""
    cols = [c.name for c in table.columns]
    marks = ", ".join([placeholder(engine)] * len(cols))
    return f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({marks})"


def plain_rate(engine: Engine, table: Table, payloads: Sequence[Payload], batch: int) -> float:
    """Plain inserts/s of ``payloads`` into a new ``table``, in batches of ``batch``, one transaction each."""
    table.metadata.create_all(engine)
    sql = insert_sql(engine, table)
    batches = chunked(payloads, batch)
    started = time.perf_counter()
    seq = 0
    for chunk in batches:
        commit_rows(engine, sql, plain_rows(chunk, seq))
        seq += len(chunk)
    return len(payloads) / (time.perf_counter() - started)
