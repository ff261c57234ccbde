"""Benchmark of the cyclic garbage collector's pauses over the feature state.

A decider holds its feature state (velocity windows, transaction graph) in Python objects for the
process's life. CPython's cyclic collector walks every container object of the generations it
collects, and a full collection (generation 2) walks the whole state while every thread waits:
the decider and every request in flight. ``sealtrail serve`` freezes what start-up built
(``api.server.tune_gc_for_serving``, after the state caught up), so a full collection walks only
what came after; the state's churn (new edges and accounts replacing the expired ones) brings
that back to the whole state within one window.

For each size, the state is built from the seeded stream of ``bench.graph_features`` (accounts
with Pareto activity, 30 days), then: the container objects the collector tracks, a full
collection's pause (median of 3), and the same-run baseline: the pause once the state is frozen,
as start-up leaves it. The pauses are what ``sealtrail_gc_pause_seconds{generation="2"}`` on
/metrics reports in service. The largest size is scaled to 200,000 accounts and 6,000,000 payments
(the memory target's state) by its payments, as ``bench.graph_features`` scales memory.

Then the service itself, at each size: the collector set as ``sealtrail serve`` sets it
(``api.server.GC_THRESHOLD``), the first half of the stream taken in as a catch-up, collected and
frozen as start-up does, and the second half decided with the collector running, every collection
timed through ``gc.callbacks``; at the end, the objects the collector still tracks outside the
frozen ones (what the state made since start-up) and the full collection that walks them, the one
the service would meet next.

Run from the repository root: ``python -m bench.gc_pause [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.gc_pause")

import argparse
import gc
import statistics
import time
from pathlib import Path
from typing import Any

from api.server import GC_THRESHOLD
from bench.graph_features import FULL_ACCOUNTS, FULL_PAYMENTS, stream
from bench.machine import host_info, probe_ms, report_probe
from bench.report import Row, format_table, write_json
from inference.graph import GraphFeatures
from inference.velocity import VelocityState


def build(accounts: int, payments: int) -> tuple[GraphFeatures, VelocityState]:
    """The feature state after ``payments`` payments among ``accounts`` accounts (collector off)."""
    graph, windows = GraphFeatures(), VelocityState()
    scratch: list[float] = []
    for o, b, t, c in stream(accounts, payments, seed=7):
        graph.observe_sealed(o, b, t, c)
        scratch.clear()
        windows.observe_ids_into(scratch, o, b, t, c)
    return graph, windows


def service(accounts: int, payments: int) -> dict[str, Any]:
    """The collector as a serving decider runs it: catch up on the first half of the stream, collect
    and freeze (start-up), take the second half with the serving thresholds; every collection timed."""
    graph, windows = GraphFeatures(), VelocityState()
    scratch: list[float] = []
    pauses: list[tuple[int, float]] = []  # (generation, seconds)
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((int(info["generation"]), time.perf_counter() - started[0]))

    old = gc.get_threshold()
    gc.collect()
    gc.set_threshold(*GC_THRESHOLD)
    half = payments // 2
    try:
        for i, (o, b, t, c) in enumerate(stream(accounts, payments, seed=7)):
            if i == half:  # start-up: the state caught up, then collected and frozen
                gc.collect()
                gc.freeze()
                gc.callbacks.append(timed)
            graph.observe_sealed(o, b, t, c)
            scratch.clear()
            windows.observe_ids_into(scratch, o, b, t, c)
        gc.callbacks.remove(timed)
        waiting = len(gc.get_objects(0)) + len(gc.get_objects(1)) + len(gc.get_objects(2))
        t0 = time.perf_counter()
        gc.collect()  # the full collection the service would meet next: what came after start-up
        next_full = time.perf_counter() - t0
    finally:
        if timed in gc.callbacks:
            gc.callbacks.remove(timed)
        gc.set_threshold(*old)
        gc.unfreeze()
    full = [s for g, s in pauses if g == 2]
    del graph, windows
    gc.collect()
    return {"accounts": accounts, "payments": payments, "served": payments - half,
            "collections": len(pauses), "full_collections": len(full),
            "full_max_s": max(full, default=0.0), "full_total_s": sum(full),
            "max_s": max((s for _, s in pauses), default=0.0), "total_s": sum(s for _, s in pauses),
            "unfrozen_objects": waiting, "next_full_s": next_full}


def _full_pause() -> float:
    t0 = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t0


def measure(accounts: int, payments: int) -> dict[str, Any]:
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())  # the process's own (imports, the benchmark)
        t0 = time.perf_counter()
        state = build(accounts, payments)
        built_s = time.perf_counter() - t0
        tracked = len(gc.get_objects())
        pauses = [_full_pause() for _ in range(3)]
        after = len(gc.get_objects())  # a collection stops tracking what can hold no reference cycle
        gc.freeze()
        frozen = [_full_pause() for _ in range(3)]
        gc.unfreeze()
        del state
        gc.collect()
    finally:
        gc.enable()
    pause = statistics.median(pauses)
    return {"accounts": accounts, "payments": payments, "build_s": round(built_s, 1), "tracked": tracked,
            "state_objects": tracked - before, "state_objects_tracked_after": after - before,
            "pause_s": pause, "pauses_s": pauses, "frozen_pause_s": statistics.median(frozen),
            # the median pause is a collection after the first, which walks only what is still tracked
            "ns_per_object": pause / after * 1e9}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small state (seconds)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}")
    probe_before = probe_ms()
    sizes = [(2_000, 20_000)] if args.quick else [(20_000, 200_000), (200_000, 2_000_000)]
    runs = []
    for accounts, payments in sizes:
        m = measure(accounts, payments)
        runs.append(m)
        print(f"{accounts:,} accounts, {payments:,} payments (built in {m['build_s']} s): {m['tracked']:,} "
              f"container objects tracked, {m['state_objects']:,} of them the state's "
              f"({m['state_objects_tracked_after']:,} still tracked after a collection); "
              f"a full collection {m['pause_s'] * 1e3:,.1f} ms "
              f"({m['ns_per_object']:.0f} ns an object), once frozen {m['frozen_pause_s'] * 1e3:,.2f} ms",
              flush=True)
    served = []
    for accounts, payments in sizes:
        s = service(accounts, payments)
        served.append(s)
        print(f"serving {s['served']:,} payments after catching up on as many ({accounts:,} accounts): "
              f"{s['collections']:,} collections ({s['total_s'] * 1e3:,.1f} ms in all, the longest "
              f"{s['max_s'] * 1e3:,.1f} ms), {s['full_collections']} full "
              f"(the longest {s['full_max_s'] * 1e3:,.1f} ms); then {s['unfrozen_objects']:,} objects "
              f"not frozen, the next full collection {s['next_full_s'] * 1e3:,.1f} ms", flush=True)
    large = runs[-1]
    scale = FULL_PAYMENTS / large["payments"]
    full = large["pause_s"] * scale
    rows = [Row(f"full collection, {r['accounts']:,} accounts, {r['payments']:,} payments",
                f"{r['pause_s'] * 1e3:,.1f} ms", f"state frozen {r['frozen_pause_s'] * 1e3:,.2f} ms",
                f"{r['pause_s'] / max(r['frozen_pause_s'], 1e-9):,.0f}x") for r in runs]
    rows.append(Row(f"full collection, {FULL_ACCOUNTS:,} accounts, {FULL_PAYMENTS:,} payments",
                    f"{full:,.1f} s (x{scale:.0f} of the largest run)", "", ""))
    rows += [Row(f"serving {s['served']:,} payments after a catch-up, {s['accounts']:,} accounts: "
                 f"the longest pause (full collections)",
                 f"{s['max_s'] * 1e3:,.1f} ms ({s['full_collections']} full, "
                 f"longest {s['full_max_s'] * 1e3:,.1f} ms)",
                 f"all collections {s['total_s'] * 1e3:,.1f} ms", "")
             for s in served]
    rows += [Row(f"then the next full collection: {s['unfrozen_objects']:,} objects made since start-up",
                 f"{s['next_full_s'] * 1e3:,.1f} ms", "", "") for s in served]
    print("\n" + format_table(rows, "pause"))
    report_probe(host, probe_before)
    if args.json:
        write_json(args.json, {"machine": host, "runs": runs, "service": served, "full_scale_pause_s": full})


if __name__ == "__main__":
    main()
