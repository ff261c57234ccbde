"""Benchmark of RFC 8785 canonical bytes: microseconds per decision record, one core.

Seeded decision records (32 features: counts, ratios, amounts, flags and a few missing values;
a score skewed towards 0) in two sets: as ``sealtrail.decision/4`` states them (integers in fixed
units, no float: "fixed") and as earlier versions did (floats, some in the 1e-6 decade orjson
writes differently: "floats"). Each is encoded by ``rfc8785.dumps`` (the reference),
``orjson.dumps`` with sorted keys (not JCS for floats: the unsafe floor) and
``ledger.jcs.canonical_bytes`` (the ledger's encoder: orjson for float-free values, the reference
otherwise). Every record is first checked to give the reference's bytes, and the share that took
the orjson path is printed.
Run from the repository root: ``python -m bench.canonical [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.canonical")

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import rfc8785

from bench.machine import host_info, probe_ms, version_of
from bench.report import Row, format_table, write_json
from ledger.jcs import _fast_path_taken, canonical_bytes

SEED = 8785
DECISIONS_PER_SECOND = 20_000  # the throughput target the encoder has to fit inside (2 cores)


def typical_record(rng: random.Random, odd: bool = False) -> dict[str, Any]:
    """One decision record as audit writes it; ``odd`` adds floats orjson writes unlike JCS."""
    def hx() -> str:
        return rng.randbytes(32).hex()

    values: list[float | None] = []
    for i in range(32):
        kind = i % 4
        values.append(None if rng.random() < 0.05 else float(rng.randint(0, 20)) if kind == 0
                      else rng.random() * 10 ** rng.randint(-3, 6) if kind == 1
                      else round(rng.uniform(0, 99_999), 2) if kind == 2 else rng.choice([0.0, 1.0]))
    if odd:
        values[:4] = [-0.0, rng.uniform(1e16, 1e20), rng.uniform(1e-6, 1e-5), rng.uniform(1e-7, 1e-6)]
    bits = rng.getrandbits(128) & ~(0xF << 76 | 0x3 << 62) | 7 << 76 | 2 << 62  # UUIDv7 layout
    trace = f"{bits:032x}"
    return {
        "trace_id": f"{trace[:8]}-{trace[8:12]}-{trace[12:16]}-{trace[16:20]}-{trace[20:]}",
        "recorded_at": "2026-12-02T20:15:28.123456Z",
        "principal": {"subject": "CN=scorer,O=Bank", "sans": ["URI:spiffe://bank.example/ns/aml/sa/scorer"],
                      "issuer": "CN=Bank Issuing CA,O=Bank", "fingerprint_sha256": hx()},
        "input": {"raw_sha256": hx(), "transaction_sha256": hx()},
        "features": {"values": values, "sha256": hx()},
        "model": {"sha256": hx(), "backend": "numpy"},
        "score": rng.random() ** 8,
        "rules": {"module_sha256": hx(), "ruleset_id": "aml_core", "version": "2026.12.0"},
        "decision": "HOLD",
        "fired": [{"id": "high_amount_new_payee", "outcome": "HOLD",
                   "reason": "amount 12345.67 EUR above 10000 for a payee first seen today"}],
        "fuel": rng.randint(0, 10**6),
        "latency_us": {"features": rng.randint(5, 90), "model": rng.randint(20, 400),
                       "rules": rng.randint(5, 90), "ledger": rng.randint(200, 3000)},
    }


def fixed_record(rng: random.Random) -> dict[str, Any]:
    """``typical_record`` as a version 4 record holds it: feature values as integers in fixed
    units (cents, millionths or whole) with their digits, and the score in millionths."""
    record = typical_record(rng)
    values = record["features"].pop("values")
    digits = [(0, 6, 2, 0)[i % 4] for i in range(len(values))]
    record["features"]["digits"] = digits
    record["features"]["scaled"] = [None if v is None else round(v * 10**d)
                                    for v, d in zip(values, digits, strict=True)]
    record["score_ppm"] = round(record.pop("score") * 1_000_000)
    return record


ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "rfc8785": rfc8785.dumps,
    "orjson sorted (not JCS)": lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS),
    "canonical_bytes": canonical_bytes,
}


@dataclass(frozen=True)
class Cell:
    """One encoder on one record set: microseconds per record, each timed pass."""

    records: str
    encoder: str
    us: tuple[float, ...]

    @property
    def median_us(self) -> float:
        return statistics.median(self.us)


def measure(name: str, records: Sequence[dict[str, Any]], seconds: float, min_passes: int) -> list[Cell]:
    """Whole passes over the set, the encoders taking turns, until each ran ``seconds``."""
    for fn in ENCODERS.values():
        for r in records[:100]:
            fn(r)
    gc.collect()
    times: dict[str, list[float]] = {k: [] for k in ENCODERS}
    spent = dict.fromkeys(ENCODERS, 0.0)
    while min(spent.values()) < seconds or min(map(len, times.values())) < min_passes:
        for k, fn in ENCODERS.items():
            t0 = time.perf_counter()
            for r in records:
                fn(r)
            dt = time.perf_counter() - t0
            times[k].append(dt / len(records) * 1e6)
            spent[k] += dt
    return [Cell(name, k, tuple(v)) for k, v in times.items()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.canonical", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer records and shorter cells")
    ap.add_argument("--records", type=int, default=None, help="records per set (default 2,000)")
    ap.add_argument("--seconds", type=float, default=None, help="time per cell (default 1.0, quick 0.3)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.records or (300 if args.quick else 2_000)
    seconds = args.seconds or (0.3 if args.quick else 1.0)
    machine: dict[str, Any] = {**host_info(), "packages": {d: version_of(d) for d in ("orjson", "rfc8785")}}
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores; one thread timed)")
    print(f"OS:         {machine['os']}")
    print(f"Python:     {machine['python']}; orjson {machine['packages']['orjson']}, "
          f"rfc8785 {machine['packages']['rfc8785']}")
    rng = random.Random(SEED)
    sets = {"fixed": [fixed_record(rng) for _ in range(n)],
            "floats": [typical_record(rng) for _ in range(n)]}
    checks: dict[str, Any] = {}
    for name, records in sets.items():
        same = sum(canonical_bytes(r) == rfc8785.dumps(r) for r in records)
        fast = sum(_fast_path_taken(r) for r in records)
        size = statistics.mean(len(rfc8785.dumps(r)) for r in records)
        checks[name] = {"records": n, "identical_to_rfc8785": same, "orjson_path": fast, "mean_bytes": size}
        print(f"Records:    {name}: {n:,} (seed {SEED}), mean {size:,.0f} bytes; identical to rfc8785: "
              f"{same:,}/{n:,}; took the orjson path: {fast:,}/{n:,}")
        if same != n:
            print("FAILED: canonical_bytes differs from rfc8785")
            return 1
    probe = probe_ms()
    cells = [c for name, records in sets.items() for c in measure(name, records, seconds, 5)]
    print(f"CPU probe:  {probe:.1f} ms before, {probe_ms():.1f} ms after (a fixed pure-Python loop)\n")
    at = {(c.records, c.encoder): c for c in cells}
    rows = []
    for c in cells:
        ref = at[(c.records, "rfc8785")].median_us
        spread = f"{c.median_us:.2f} us [{min(c.us):.2f}-{max(c.us):.2f}]"
        rows.append(Row(f"{c.records}: {c.encoder}", spread, f"rfc8785 {ref:.1f} us",
                        f"{ref / c.median_us:.1f}x faster"))
    passes = min(len(c.us) for c in cells)
    print(format_table(rows, subject=f"us/record, median [min-max] of >= {passes} passes"))
    ours = at[("fixed", "canonical_bytes")].median_us
    print(f"\nAt {DECISIONS_PER_SECOND:,} decisions/s, canonical_bytes on version 4 records keeps "
          f"{ours * DECISIONS_PER_SECOND / 1e6:.0%} of one core busy "
          f"(rfc8785: {at[('fixed', 'rfc8785')].median_us * DECISIONS_PER_SECOND / 1e6:.0%}).")
    if args.json:
        figures = [{"records": c.records, "encoder": c.encoder, "median_us": c.median_us,
                    "passes_us": list(c.us)} for c in cells]
        write_json(args.json, {"machine": machine, "checks": checks, "cells": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
