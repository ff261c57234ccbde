"""Durable ledger appends, each run beside two same-run plain-insert baselines.

"plain" inserts the same envelopes into a copy of ``ledger_entries`` without its hash columns;
"plain + hash columns" also fills ``leaf_hash`` and ``chain_hash`` with precomputed random bytes,
so the gap between the two is the cost of storing the hashes, and the rest is the ledger's own.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.baselines import Payload, plain_rate, plain_table, with_random_hashes
from bench.dbs import fresh_db
from bench.report import Row, spread, verdict
from bench.workload import SEED, chunked, cycle, envelopes, new_ledger
from ledger import Record
from ledger.append import CheckpointPolicy

APPEND_POLICY = CheckpointPolicy(every_entries=1000, every_seconds=60.0)
TARGET_APPEND_RATE = 60_000.0
TARGET_APPEND_RATIO = 1.5
BATCH_SIZES = (1, 100, 1000)
# records appended per measurement: (backend, batch size) -> (default, --quick)
APPEND_COUNTS: dict[tuple[str, int], tuple[int, int]] = {
    ("sqlite", 1): (300, 100),
    ("sqlite", 100): (50_000, 10_000),
    ("sqlite", 1000): (100_000, 20_000),
    ("postgresql", 1): (1000, 300),
    ("postgresql", 100): (50_000, 10_000),
    ("postgresql", 1000): (100_000, 20_000),
}
PLAIN, HASH_COLS, LEDGER = "plain", "plain_hash_cols", "ledger"
SIDES = (PLAIN, HASH_COLS, LEDGER)


@dataclass(frozen=True)
class AppendResult:
    """Per-round appends/s of the ledger and of both baselines for one backend and batch size."""

    backend: str
    batch: int
    records: int
    ledger_rates: tuple[float, ...]
    plain_rates: tuple[float, ...]
    plain_hash_cols_rates: tuple[float, ...]

    @property
    def ledger_rate(self) -> float:
        """Median ledger appends/s over the rounds."""
        return statistics.median(self.ledger_rates)

    @property
    def plain_rate(self) -> float:
        """Median plain inserts/s over the rounds."""
        return statistics.median(self.plain_rates)

    @property
    def plain_hash_cols_rate(self) -> float:
        """Median plain inserts/s with the two hash columns filled, over the rounds."""
        return statistics.median(self.plain_hash_cols_rates)

    @property
    def ratio(self) -> float:
        """How many times slower the ledger is than the plain insert."""
        return self.plain_rate / self.ledger_rate

    @property
    def ratio_hash_cols(self) -> float:
        """How many times slower the ledger is than the plain insert with hash columns."""
        return self.plain_hash_cols_rate / self.ledger_rate

    def figures(self) -> dict[str, Any]:
        """The per-round rates, their medians and both ratios, JSON-ready."""
        return {
            **asdict(self), "ledger_rate": self.ledger_rate, "plain_rate": self.plain_rate,
            "plain_hash_cols_rate": self.plain_hash_cols_rate, "ratio": self.ratio,
            "ratio_hash_cols": self.ratio_hash_cols,
        }


@dataclass(frozen=True)
class AppendWork:
    """The same records as the ledger appends them and as each baseline inserts them."""

    records: list[Record]
    plain: list[Payload]
    hash_cols: list[Payload]


def ledger_rate(engine: Engine, records: Sequence[Record], batch: int) -> float:
    """Durable ledger appends/s of ``records`` through ``append_many`` in batches of ``batch``."""
    led, _ = new_ledger(engine, APPEND_POLICY)
    batches = chunked(records, batch)
    started = time.perf_counter()
    for chunk in batches:
        led.append_many(chunk)
    return len(records) / (time.perf_counter() - started)


def side_rate(side: str, engine: Engine, work: AppendWork, batch: int) -> float:
    """Appends/s of one side (ledger or a baseline) on an empty database."""
    if side == LEDGER:
        return ledger_rate(engine, work.records, batch)
    if side == PLAIN:
        return plain_rate(engine, plain_table("bench_plain", hash_columns=False), work.plain, batch)
    return plain_rate(engine, plain_table("bench_plain_hash", hash_columns=True), work.hash_cols, batch)


def append_round(
    backend: str, batch: int, work: AppendWork, root: Path, admin: Engine | None,
    order: Sequence[str],
) -> dict[str, float]:
    """Rate per side, each side on its own fresh database, in ``order``."""
    rates: dict[str, float] = {}
    for side in order:
        with fresh_db(backend, root, admin) as engine:
            rates[side] = side_rate(side, engine, work, batch)
    return rates


def measure_appends(
    backend: str, batch: int, n: int, pool: Sequence[Record], root: Path,
    admin: Engine | None, rounds: int,
) -> AppendResult:
    """``rounds`` rounds of both baselines and the ledger on the same records, rotating who goes first."""
    records = cycle(pool, n)
    plain: list[Payload] = list(envelopes(records))
    work = AppendWork(records, plain, with_random_hashes(plain, SEED + 2))
    got = [
        append_round(backend, batch, work, root, admin, SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)])
        for r in range(rounds)
    ]
    return AppendResult(
        backend, batch, n, *(tuple(g[side] for g in got) for side in (LEDGER, PLAIN, HASH_COLS))
    )


def progress_line(r: AppendResult) -> str:
    """One measurement's medians and ranges, as printed when it finishes."""
    return (
        f"  {r.backend:<10} batch={r.batch:<5} ledger {spread(r.ledger_rates)}  "
        f"plain {spread(r.plain_rates)}  plain+hash cols {spread(r.plain_hash_cols_rates)}  "
        f"{r.ratio:.2f}x  {r.ratio_hash_cols:.2f}x"
    )


def run_appends(
    backends: Sequence[str], quick: bool, rounds: int, pool: Sequence[Record], root: Path,
    admin: Engine | None,
) -> list[AppendResult]:
    """Every append measurement, printed as it finishes."""
    results = []
    for backend in backends:
        for batch in BATCH_SIZES:
            n = APPEND_COUNTS[(backend, batch)][int(quick)]
            r = measure_appends(backend, batch, n, pool, root, admin, rounds)
            print(progress_line(r), flush=True)
            results.append(r)
    return results


def append_rows(r: AppendResult) -> list[Row]:
    """Table lines of one append measurement: against plain (targets only for SQLite, batch
    1000), then against plain + hash columns."""
    row = Row(
        f"append {r.backend} batch={r.batch} ({r.records:,} rec x{len(r.ledger_rates)})",
        f"{r.ledger_rate:,.0f} /s", f"plain insert {r.plain_rate:,.0f} /s", f"{r.ratio:.2f}x",
    )
    if r.backend == "sqlite" and r.batch == 1000:
        ok = r.ledger_rate >= TARGET_APPEND_RATE and r.ratio <= TARGET_APPEND_RATIO
        target = f">= {TARGET_APPEND_RATE:,.0f}/s, <= {TARGET_APPEND_RATIO}x"
        row = Row(row.what, row.result, row.baseline, row.ratio, target, verdict(ok))
    hash_cols = Row(
        "", "", f"plain insert + hash cols {r.plain_hash_cols_rate:,.0f} /s", f"{r.ratio_hash_cols:.2f}x"
    )
    return [row, hash_cols]
