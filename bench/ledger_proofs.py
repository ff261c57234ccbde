"""Inclusion-proof latency on a built ledger against a primary-key lookup of the leaf hash."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from bench.dbs import placeholder
from bench.report import Row, percentile, verdict
from bench.workload import SEED
from ledger.append import Ledger
from ledger.merkle import verify_inclusion
from ledger.proofs import inclusion_proof

TARGET_PROOF_MS = 2.0
PROOF_SAMPLES = 2000
WARMUP_CALLS = 50


@dataclass(frozen=True)
class ProofResult:
    """Inclusion-proof latency against a primary-key lookup, in milliseconds."""

    size: int
    samples: int
    proof_median_ms: float
    proof_p99_ms: float
    lookup_median_ms: float
    lookup_p99_ms: float
    proof_hashes_mean: float

    def figures(self) -> dict[str, Any]:
        """Latencies and the median ratio to the lookup, JSON-ready."""
        return {**asdict(self), "ratio": self.proof_median_ms / self.lookup_median_ms}


def timed_ms(
    conn: Connection, indices: Sequence[int], size: int, lookup_sql: str | None
) -> tuple[list[float], list[list[bytes]]]:
    """Per-call ms of an inclusion proof (or, with ``lookup_sql``, a leaf lookup) per index."""
    times: list[float] = []
    proofs: list[list[bytes]] = []
    clock = time.perf_counter_ns
    for i in indices:
        started = clock()
        if lookup_sql is None:
            proofs.append(inclusion_proof(conn, i, size))
        else:
            conn.exec_driver_sql(lookup_sql, (i,)).scalar()
        times.append((clock() - started) / 1e6)
    return times, proofs


def check_proofs(
    conn: Connection, sql: str, indices: Sequence[int], proofs: Sequence[list[bytes]],
    size: int, root: bytes,
) -> None:
    """Verify every timed proof against the signed root (raises on the first bad one)."""
    for i, proof in zip(indices, proofs, strict=True):
        leaf = conn.exec_driver_sql(sql, (i,)).scalar()
        if leaf is None:
            raise RuntimeError(f"no entry at seq {i}")
        verify_inclusion(i, size, bytes(leaf), proof, root)


def measure_proofs(engine: Engine, led: Ledger, samples: int = PROOF_SAMPLES) -> ProofResult:
    """Median/p99 of inclusion proofs at random indices vs. a leaf-hash lookup, one connection."""
    signed = led.checkpoint().checkpoint
    size, root = signed.size, signed.root
    rng = random.Random(SEED + 1)
    indices = [rng.randrange(size) for _ in range(samples)]
    sql = f"SELECT leaf_hash FROM ledger_entries WHERE seq = {placeholder(engine)}"
    with engine.connect() as conn:
        timed_ms(conn, indices[:WARMUP_CALLS], size, None)
        timed_ms(conn, indices[:WARMUP_CALLS], size, sql)
        proof_ms, proofs = timed_ms(conn, indices, size, None)
        lookup_ms, _ = timed_ms(conn, indices, size, sql)
        check_proofs(conn, sql, indices, proofs, size, root)
    return ProofResult(
        size, samples,
        statistics.median(proof_ms), percentile(proof_ms, 99),
        statistics.median(lookup_ms), percentile(lookup_ms, 99),
        statistics.fmean(len(p) for p in proofs),
    )


def proof_rows(p: ProofResult) -> list[Row]:
    """Table lines of inclusion-proof latency."""
    return [
        Row(f"inclusion proof median (size {p.size:,})", f"{p.proof_median_ms:.3f} ms",
            f"pk lookup {p.lookup_median_ms:.3f} ms",
            f"{p.proof_median_ms / p.lookup_median_ms:.1f}x",
            f"<= {TARGET_PROOF_MS} ms", verdict(p.proof_median_ms <= TARGET_PROOF_MS)),
        Row(f"inclusion proof p99 ({p.samples} samples)", f"{p.proof_p99_ms:.3f} ms",
            f"pk lookup {p.lookup_p99_ms:.3f} ms", f"{p.proof_p99_ms / p.lookup_p99_ms:.1f}x"),
    ]
