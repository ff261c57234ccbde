"""Full verification of a built SQLite ledger against a bare fetch of the same columns."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.dbs import sqlite_path
from bench.report import Row, verdict
from bench.workload import BUILD_BATCH, build_ledger
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.verify import verify_ledger

TARGET_VERIFY_RATE = 500_000.0


@dataclass(frozen=True)
class VerifyResult:
    """Full verification of an ``entries``-long SQLite ledger against a bare fetch."""

    entries: int
    build_seconds: float
    fetch_seconds: float
    verify_seconds_1: float
    verify_seconds_default: float
    db_bytes: int

    def figures(self) -> dict[str, Any]:
        """Seconds, rates and ratios to the bare fetch, JSON-ready."""
        return {
            **asdict(self),
            "rate_1": self.entries / self.verify_seconds_1,
            "rate_default": self.entries / self.verify_seconds_default,
            "fetch_rate": self.entries / self.fetch_seconds,
            "ratio_1": self.verify_seconds_1 / self.fetch_seconds,
            "ratio_default": self.verify_seconds_default / self.fetch_seconds,
        }


def bare_fetch_seconds(path: Path) -> float:
    """Seconds to stream every entry's stored columns with sqlite3: any verifier's floor."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        started = time.perf_counter()
        sql = "SELECT seq, record, leaf_hash, chain_hash FROM ledger_entries ORDER BY seq"
        for _row in con.execute(sql):
            pass
        return time.perf_counter() - started
    finally:
        con.close()


def verify_seconds(engine: Engine, signer: NoteSigner, workers: int | None, size: int) -> float:
    """Wall seconds of a full ``verify_ledger`` pinned to ``signer``; checks it saw ``size``."""
    started = time.perf_counter()
    report = verify_ledger(engine, [signer.verifier], workers=workers)
    took = time.perf_counter() - started
    if report.size != size or report.unsealed_entries:
        raise RuntimeError(f"verified {report.size} entries, {report.unsealed_entries} unsealed")
    return took


def measure_verify(
    engine: Engine, pool: Sequence[Record], n: int
) -> tuple[VerifyResult, Ledger, NoteSigner]:
    """Build the ledger, then time a bare fetch and verification with 1 and default workers."""
    led, signer, build = build_ledger(engine, pool, n)
    size = led.checkpoint().checkpoint.size
    path = sqlite_path(engine)
    bare_fetch_seconds(path)  # warm the page cache for everyone
    fetch = bare_fetch_seconds(path)
    one = verify_seconds(engine, signer, 1, size)
    default = verify_seconds(engine, signer, None, size)
    db_bytes = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return VerifyResult(size, build, fetch, one, default, db_bytes), led, signer


def verify_rows(v: VerifyResult) -> list[Row]:
    """Table lines of the build and of both verification runs."""
    rows = [Row(f"build {v.entries:,} (batch {BUILD_BATCH}, checkpoint/1000)",
                f"{v.entries / v.build_seconds:,.0f} /s", f"{v.build_seconds:.1f} s", "")]
    fetch = f"bare fetch {v.entries / v.fetch_seconds:,.0f} /s ({v.fetch_seconds:.2f} s)"
    for label, secs in (("1", v.verify_seconds_1), ("default", v.verify_seconds_default)):
        rate = v.entries / secs
        rows.append(Row(
            f"verify workers={label}", f"{rate:,.0f} /s ({secs:.2f} s)", fetch,
            f"{secs / v.fetch_seconds:.2f}x", f">= {TARGET_VERIFY_RATE:,.0f}/s",
            verdict(rate >= TARGET_VERIFY_RATE),
        ))
    return rows
