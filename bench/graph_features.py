"""Benchmark of the transaction-graph features (``inference.graph``) on the CPU.

- speed: rows/s of ``GraphFeatures.observe_many`` in batches of 1,024 over simulated payments
  (``inference.simulate``: 200,000 payments among 20,000 accounts over 30 days), at cycle depth
  k = 3 and separately at k = 4, 5 and 6, beside ``inference.features.FeatureExtractor`` (every
  value of ``sealtrail.features/6``: static, velocity and the graph's sealed values, which skip the
  flagged-account search) on the same transactions in the same run; one account in every 20
  laundering payments is flagged as it is seen, as a BLOCK would flag it, so the hop search runs;
- memory: what the graph holds for a 30-day window at 30 payments an account (the ratio of the
  target, 200,000 accounts and 6,000,000 payments), over a seeded stream with hub accounts:
  traced with tracemalloc at two sizes (10,000 and 20,000 accounts; 1,000 and 2,000 with
  ``--quick``) to show it grows with the payments, and scaled to 6,000,000 payments, said as such;
  ``--memory-full`` measures the full size instead, as the growth of the resident set. Then one
  payment a window later: the accounts still held (the two of it: the others are let go).
Run from the repository root: ``python -m bench.graph_features [--quick] [--memory-full] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.graph_features")

import argparse
import gc
import math
import os
import random
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import host_info, probe_ms, report_probe
from bench.report import Row, format_table, verdict, write_json
from inference.features import FeatureExtractor, epoch_us
from inference.graph import GraphConfig, GraphFeatures, Payment
from inference.messages.transaction import Party
from inference.reference_tables import default_tables
from inference.simulate import SimConfig, simulate

BATCH = 1024
TARGET_ROWS_PER_S = 30_000.0
TARGET_BYTES = 1.5e9  # 1.5 GB
FULL_ACCOUNTS, FULL_PAYMENTS = 200_000, 6_000_000
DAY_US = 86_400_000_000


def _key(p: Party) -> str:
    """An account key as the feature extractor names one (IBAN, else account, else BIC, else name)."""
    return p.iban or p.account or (f"BIC:{p.bic}" if p.bic else f"NAME:{p.name}")


def simulated(n: int, accounts: int, seed: int) -> tuple[list[Any], list[Any], list[Payment], list[int]]:
    """Transactions, their times, the same as graph payments, and the indices of laundering ones."""
    sims = simulate(SimConfig(seed=seed, n_normal=n, n_accounts=accounts, days=30))
    fx = default_tables().fx
    payments: list[Payment] = []
    for s in sims:
        tx = s.transaction
        cents = fx.usd_cents(tx.amount, tx.currency)
        payments.append((_key(tx.originator), _key(tx.beneficiary), epoch_us(s.at), cents or 0))
    bad = [i for i, s in enumerate(sims) if s.label]
    return [s.transaction for s in sims], [s.at for s in sims], payments, bad


def run_graph(payments: list[Payment], flag_at: dict[int, str], config: GraphConfig) -> float:
    """Seconds to observe every payment in batches of 1,024, flagging as laundering is seen."""
    gf = GraphFeatures(config)
    t0 = time.perf_counter()
    for i in range(0, len(payments), BATCH):
        gf.observe_many(payments[i:i + BATCH])
        for j in range(i, min(i + BATCH, len(payments))):
            if j in flag_at:
                gf.flag(flag_at[j])
    return time.perf_counter() - t0


def bench_speed(n: int, accounts: int, passes: int) -> dict[str, Any]:
    txs, ats, payments, bad = simulated(n, accounts, seed=11)
    flag_at = {i: payments[i][0] for i in bad[::20]}
    gc.collect()
    gc.freeze()  # the benchmark's input is not the service's garbage (see bench/inference.py)
    base: list[float] = []
    graph: dict[int, list[float]] = {k: [] for k in (3, 4, 5, 6)}
    for _ in range(passes):  # each pass takes turns, so a slow spell of the host hits all alike
        fe = FeatureExtractor()
        t0 = time.perf_counter()
        for i in range(0, len(txs), BATCH):
            fe.extract(txs[i:i + BATCH], ats[i:i + BATCH])
        base.append(len(txs) / (time.perf_counter() - t0))
        for k, rates in graph.items():
            rates.append(len(payments) / run_graph(payments, flag_at, GraphConfig(cycle_hops=k)))
    gc.unfreeze()
    out: dict[str, Any] = {"rows": len(payments), "accounts": accounts, "flagged": len(flag_at),
                           "features_rows_per_s": statistics.median(base)}
    for k, rates in graph.items():
        out[f"graph_k{k}_rows_per_s"] = statistics.median(rates)
        out[f"graph_k{k}_range"] = [min(rates), max(rates)]
    return out


def stream(accounts: int, payments: int, seed: int) -> Iterator[Payment]:
    """A seeded stream over 30 days: some accounts send far more than others (Pareto weights, so
    there are hubs), 80 % of payments go to one of the sender's five usual payees, amounts
    log-normal around USD 200."""
    rng = random.Random(seed)  # the set-up runs here, before a memory run takes its baseline
    weights = [rng.paretovariate(1.5) for _ in range(accounts)]
    cum = [float(c) for c in np.cumsum(weights)]
    payees = [[rng.randrange(accounts) for _ in range(5)] for _ in range(accounts)]
    step = 30 * DAY_US // payments

    def gen() -> Iterator[Payment]:
        t = 1_767_225_600_000_000  # 2026-01-01
        for start in range(0, payments, 65_536):  # in chunks: the stream holds little of its own
            for s in rng.choices(range(accounts), cum_weights=cum, k=min(65_536, payments - start)):
                t += rng.randrange(2 * step + 1)
                b = rng.choice(payees[s]) if rng.random() < 0.8 else rng.randrange(accounts)
                # keys made afresh, as parsed messages would bring them: the graph keeps one per account
                yield f"ACCT{s:09d}", f"ACCT{b:09d}", t, int(20_000 * math.exp(rng.gauss(0.0, 1.0)))

    return gen()


def _rss_bytes() -> int:
    """Resident memory of this process now, from /proc/self/statm."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_memory(accounts: int, payments: int, traced: bool = True) -> dict[str, Any]:
    """What the graph holds once ``payments`` (30 days) are in, at k = 3: traced by tracemalloc (what
    Python allocated and still holds), or untraced as the growth of the resident set (faster, and an
    upper bound: it also counts freed memory the allocator keeps)."""
    gc.collect()
    gf = GraphFeatures()
    payments_in = stream(accounts, payments, seed=5)
    if traced:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
    else:
        base = _rss_bytes()
    t0 = time.perf_counter()
    for p in payments_in:
        gf.observe(*p)
    seconds = time.perf_counter() - t0
    gc.collect()
    if traced:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    else:
        current = peak = _rss_bytes()
    g = gf.graph
    out = {"accounts": g.accounts, "payments": payments, "edges_held": g.edges_held, "bytes": current - base,
           "peak_bytes": peak - base, "seconds": seconds, "how": "tracemalloc" if traced else "RSS growth"}
    # a window later, one more payment: every edge before it expires, and the accounts with them
    assert g.watermark is not None
    gf.observe("QUIET-AFTER-A", "QUIET-AFTER-B", g.watermark + gf.config.window_us, 100)
    out["accounts_a_window_later"] = g.accounts
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (under a minute)")
    ap.add_argument("--memory-full", action="store_true",
                    help="only memory, at 200,000 accounts and 6,000,000 payments (resident set; minutes)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    quick = args.quick
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
          f"numpy {np.__version__}")
    probe_before = probe_ms()

    speed: dict[str, Any] | None = None
    if not args.memory_full:
        n, accounts = (30_000, 3_000) if quick else (200_000, 20_000)
        speed = bench_speed(n, accounts, 1 if quick else 3)
        print(f"\nspeed over {speed['rows']:,} simulated payments, {accounts:,} accounts, 30 days, "
              f"batches of {BATCH} ({speed['flagged']} accounts flagged along the way):")
        print(f"  feature extractor (features/6)        {speed['features_rows_per_s']:>10,.0f} rows/s")
        for k in (3, 4, 5, 6):
            lo, hi = speed[f"graph_k{k}_range"]
            rate = speed[f"graph_k{k}_rows_per_s"]
            print(f"  graph features, cycles k <= {k}         {rate:>10,.0f} rows/s [{lo:,.0f}-{hi:,.0f}]")

    if args.memory_full:
        runs = [bench_memory(FULL_ACCOUNTS, FULL_PAYMENTS, traced=False)]
    else:
        accounts = 1_000 if quick else 10_000
        runs = [bench_memory(a, a * FULL_PAYMENTS // FULL_ACCOUNTS) for a in (accounts, 2 * accounts)]
    for m in runs:
        print(f"\nmemory ({m['how']}): {m['accounts']:,} accounts, {m['payments']:,} payments in 30 days -> "
              f"{m['edges_held']:,} edges held, {m['bytes'] / 2**20:,.1f} MiB "
              f"(peak {m['peak_bytes'] / 2**20:,.1f} MiB), {m['bytes'] / m['payments']:,.0f} bytes a payment;"
              f" one payment a window later: {m['accounts_a_window_later']:,} accounts held")
    large = runs[-1]
    measured_full = large["accounts"] >= FULL_ACCOUNTS and large["payments"] >= FULL_PAYMENTS
    full = large["bytes"] * FULL_PAYMENTS / large["payments"]
    how = "measured" if measured_full else f"x{FULL_PAYMENTS / large['payments']:.0f} of the larger run"
    print(f"  200,000 accounts, 6,000,000 payments: {full / 1e9:.2f} GB ({how}; 30 payments an account "
          "in both, so the size scales with the payments)")

    table = [Row("graph memory, 200k accounts, 6M payments", f"{full / 1e9:.2f} GB ({how})",
                 f"{large['payments']:,} payments {large['bytes'] / 1e9:.3f} GB",
                 f"{full / large['bytes']:.1f}x", "<= 1.5 GB", verdict(full <= TARGET_BYTES))]
    if speed is not None:
        k3 = speed["graph_k3_rows_per_s"]
        fe = speed["features_rows_per_s"]
        table[:0] = [
            Row("graph features k<=3, batch 1024", f"{k3:,.0f} rows/s", f"features/6 extractor {fe:,.0f}/s",
                f"{k3 / fe:.2f}x", ">= 30,000/s", verdict(k3 >= TARGET_ROWS_PER_S)),
            *(Row(f"graph features k<={k}", f"{speed[f'graph_k{k}_rows_per_s']:,.0f} rows/s",
                  f"graph k<=3 {k3:,.0f}/s", f"{speed[f'graph_k{k}_rows_per_s'] / k3:.2f}x")
              for k in (4, 5, 6)),
        ]
    print("\n" + format_table(table, "sealtrail graph"))
    report_probe(host, probe_before)
    if args.json:
        write_json(args.json, {"machine": host, "speed": speed, "memory": runs, "full_bytes": full,
                               "full_measured": measured_full})


if __name__ == "__main__":
    main()
