"""Benchmark of the rule sandbox: decisions per second at batch 1, 64 and 1024.

The wasm sandbox is timed side by side, in the same run and on the same rows, with the
``rule-engine`` package from PyPI, plain Python closures over dicts (no sandbox at all) and
our pure-Python reference evaluator, for a six-rule pack and for the full aml_core pack.
Run from the repository root: ``python -m bench.rules [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.rules")

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import wasm_rules
from bench.machine import host_info, version_of
from bench.report import Row, format_table, percentile, verdict, write_json
from bench.rules_workload import (
    SEED,
    agreement,
    batches_of,
    closure_predicates,
    dict_engine,
    dict_rows,
    feature_columns,
    have_rule_engine,
    pack_rows,
    packs,
    rule_engine_predicates,
)
from wasm_rules.reference import evaluate_rows

BATCH_SIZES = (1, 64, 1024)
ENGINES = ("sandbox", "closures", "rule-engine", "reference")
SLOW_ENGINES = ("rule-engine", "reference")
TARGET_US = 0.5  # per decision at batch 1024, six-rule pack
TARGET_VS_RULE_ENGINE = 100.0
TARGET_BATCH = 1024


@dataclass(frozen=True)
class Cell:
    """One engine at one batch size: rows decided and the time of every call."""

    pack: str
    engine: str
    batch: int
    rows: int
    calls: int
    seconds: float
    call_p50_us: float
    call_p99_us: float

    @property
    def us_per_decision(self) -> float:
        return self.seconds * 1e6 / self.rows

    @property
    def per_second(self) -> float:
        return self.rows / self.seconds

    def figures(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {**asdict(self), "us_per_decision": self.us_per_decision,
                "decisions_per_s": self.per_second}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="shorter cells and a smaller row pool")
    ap.add_argument("--seconds", type=float, default=None,
                    help="time spent per cell (default 1.0, quick 0.2)")
    ap.add_argument("--slow-rows", type=int, default=None,
                    help="most rows timed for rule-engine and the reference (default 20,000)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def machine_info() -> dict[str, Any]:
    """What the figures were measured on (no database here, unlike bench.machine)."""
    return {
        **host_info(),
        "packages": {d: version_of(d) for d in ("numpy", "wasmtime", "rule-engine")},
    }


def print_machine(machine: dict[str, Any]) -> None:
    """The machine header."""
    pkgs = ", ".join(f"{k} {v}" for k, v in machine["packages"].items())
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores)")
    print(f"RAM:        {machine['ram_gib']} GiB")
    print(f"OS:         {machine['os']}")
    print(f"Python:     {machine['python']}; {pkgs}")


def measure(run: Callable[[Any], object], batches: Sequence[Any], batch: int, seconds: float,
            max_rows: int) -> tuple[int, list[int]]:
    """Call ``run`` on successive batches for ``seconds`` or ``max_rows`` rows, whichever first.

    Returns the rows decided and each call's duration in ns (warm-up calls not counted).
    """
    for b in batches[: max(1, 256 // batch)]:
        run(b)
    clock = time.perf_counter_ns
    durations: list[int] = []
    rows = i = 0
    deadline = clock() + int(seconds * 1e9)
    while True:
        t0 = clock()
        run(batches[i])
        t1 = clock()
        durations.append(t1 - t0)
        rows += batch
        i = i + 1 if i + 1 < len(batches) else 0
        if t1 >= deadline or rows >= max_rows:
            return rows, durations


def run_pack(label: str, rs: wasm_rules.Ruleset, cols: dict[str, Any], sb: wasm_rules.Sandbox,
             seconds: float, slow_rows: int) -> tuple[list[Cell], dict[str, Any]]:
    """Cross-check every engine against the reference, then time each at each batch size."""
    rows = pack_rows(cols, rs)
    dicts = dict_rows(rows, rs)
    module = sb.load(wasm_rules.compile_ruleset(rs))
    preds = {"closures": closure_predicates(rs)}
    re_preds = rule_engine_predicates(rs)
    if re_preds is not None:
        preds["rule-engine"] = re_preds
    agree = agreement(rs, rows, dicts, module, preds)
    print_agreement(label, agree, list(preds))
    runners: dict[str, tuple[Callable[[Any], object], Any]] = {
        "sandbox": (module.evaluate, rows),
        "reference": (lambda b: evaluate_rows(rs, b), rows),
        **{name: (dict_engine(p), dicts) for name, p in preds.items()},
    }
    cells: list[Cell] = []
    for batch in BATCH_SIZES:
        print(f"  batch {batch:>4}, us/decision:", end="", flush=True)
        for engine in (e for e in ENGINES if e in runners):
            run, pool = runners[engine]
            cap = slow_rows if engine in SLOW_ENGINES else 1 << 62
            n, durations = measure(run, batches_of(pool, batch), batch, seconds, max(cap, batch))
            us = [d / 1000 for d in durations]
            cells.append(Cell(label, engine, batch, n, len(us), sum(durations) / 1e9,
                              percentile(us, 50), percentile(us, 99)))
            print(f"  {engine} {cells[-1].us_per_decision:.3f}", end="", flush=True)
        print()
    module.close()
    return cells, agree


def print_agreement(label: str, agree: dict[str, Any], engines: Sequence[str]) -> None:
    """How the engines agree with the reference on the row pool."""
    n = agree["rows"]
    fired = agree["rows_any_rule_fired"]
    mix = ", ".join(f"{k} {v:,}" for k, v in agree["outcomes"].items())
    print(f"{label}: {fired:,} of {n:,} rows fire a rule ({100 * fired / n:.1f} %); {mix}")
    sbx = agree["sandbox"]
    parts = [f"sandbox outcomes {sbx['outcomes_equal']:,}/{n:,}, fired rules {sbx['fired_equal']:,}/{n:,}"]
    for e in engines:
        a = agree[e]
        total = a["rules_agree"] + len(a["rules_disagree"])
        bad = f" (disagree: {', '.join(a['rules_disagree'])})" if a["rules_disagree"] else ""
        parts.append(f"{e} {a['rules_agree']}/{total} rules{bad}, outcomes {a['outcomes_equal']:,}/{n:,}")
    print("  agreement with the reference: " + "; ".join(parts))


def grid(cells: Sequence[Cell]) -> str:
    """Every cell as an aligned table."""
    head = ("pack", "batch", "engine", "us/decision", "decisions/s", "call p50 us", "call p99 us",
            "rows timed")
    body = [(c.pack, str(c.batch), c.engine, f"{c.us_per_decision:.3f}", f"{c.per_second:,.0f}",
             f"{c.call_p50_us:,.1f}", f"{c.call_p99_us:,.1f}", f"{c.rows:,}") for c in cells]
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    right = {1, 3, 4, 5, 6, 7}
    lines = ["  ".join(v.rjust(w) if i in right else v.ljust(w)
                       for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in (head, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def ratio_text(other: float, ours: float) -> str:
    """How much faster (or slower) ours is than other."""
    r = other / ours
    return f"{r:,.1f}x faster" if r >= 1 else f"{1 / r:,.1f}x slower"


def summary(cells: Sequence[Cell], labels: Sequence[str]) -> tuple[list[Row], dict[str, Any]]:
    """Target rows (first pack) and information rows (others), with the JSON verdicts."""
    at = {(c.pack, c.engine, c.batch): c for c in cells}
    rows: list[Row] = []
    figures: dict[str, Any] = {}
    for n, label in enumerate(labels):
        main = n == 0
        sb = at[(label, "sandbox", TARGET_BATCH)]
        us = sb.us_per_decision
        tag = f"{label}, batch {TARGET_BATCH}"
        ok_us = us <= TARGET_US
        rows.append(Row(f"{tag}: us/decision", f"{us:.3f} us", "", "",
                        f"<= {TARGET_US} us" if main else "(info)", verdict(ok_us) if main else ""))
        fig: dict[str, Any] = {"sandbox_us_per_decision": us, "us_target_met": ok_us}
        for engine, target in (("rule-engine", f">= {TARGET_VS_RULE_ENGINE:.0f}x"),
                               ("closures", "faster"), ("reference", "")):
            other = at.get((label, engine, TARGET_BATCH))
            if other is None:
                rows.append(Row(f"{tag}: vs {engine}", f"{us:.3f} us", f"{engine} not installed",
                                "n/a", target if main else "(info)", "n/a" if main else ""))
                fig[f"x_faster_than_{engine}"] = fig[f"{engine}_target_met"] = None
                continue
            x = other.us_per_decision / us
            ok = x >= TARGET_VS_RULE_ENGINE if engine == "rule-engine" else x > 1
            rows.append(Row(f"{tag}: vs {engine}", f"{us:.3f} us",
                            f"{engine} {other.us_per_decision:.3f} us",
                            ratio_text(other.us_per_decision, us),
                            target if main else "(info)", verdict(ok) if main and target else ""))
            fig[f"x_faster_than_{engine}"] = x
            if target:
                fig[f"{engine}_target_met"] = ok
        one = at[(label, "sandbox", 1)]
        for engine in ("closures", "rule-engine"):
            other = at.get((label, engine, 1))
            base = (f"{engine} {other.call_p50_us:.1f} / {other.call_p99_us:.1f} us" if other
                    else f"{engine} not installed")
            rows.append(Row(f"{label}, batch 1: call p50 / p99 vs {engine}",
                            f"{one.call_p50_us:.1f} / {one.call_p99_us:.1f} us", base,
                            ratio_text(other.call_p50_us, one.call_p50_us) if other else "n/a",
                            "(reported)"))
        fig["batch1_p50_us"], fig["batch1_p99_us"] = one.call_p50_us, one.call_p99_us
        figures[label] = fig
    return rows, figures


def main(argv: Sequence[str] | None = None) -> int:
    """Cross-check, time every engine, print the machine, the figures and the verdicts."""
    args = parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (0.2 if args.quick else 1.0)
    slow_rows = args.slow_rows or (4096 if args.quick else 20_000)
    pool = 4096 if args.quick else 8192
    machine = machine_info()
    print_machine(machine)
    if not have_rule_engine():
        print("rule-engine: MISSING (pip install rule-engine); its figures are left out")
    print(f"Rows:       {pool:,} seeded NaN-free payments (seed {SEED}), built before timing; "
          "dict rows for closures and rule-engine, float64 rows for sandbox and reference")
    print(f"Timing:     {seconds:g} s per cell (rule-engine and reference: at most {slow_rows:,} "
          "rows); us/decision = sum of call times / rows; decision = highest outcome fired\n")
    cols = feature_columns(pool)
    ps = packs()
    cells: list[Cell] = []
    agree: dict[str, Any] = {}
    with wasm_rules.Sandbox() as sb:
        for label, rs in ps.items():
            got, agree[label] = run_pack(label, rs, cols, sb, seconds, slow_rows)
            cells += got
            print()
    print(grid(cells))
    rows, verdicts = summary(cells, list(ps))
    print("\n" + format_table(rows, subject="sandbox"))
    if args.json is not None:
        write_json(args.json, {
            "machine": machine,
            "workload": {"seed": SEED, "rows": pool, "packs": {
                label: {"rules": [r.id for r in rs.rules], "features": len(rs.features)}
                for label, rs in ps.items()}},
            "settings": {"seconds_per_cell": seconds, "slow_engine_max_rows": slow_rows,
                         "batch_sizes": list(BATCH_SIZES)},
            "agreement": agree,
            "cells": [c.figures() for c in cells],
            "verdicts": verdicts,
            "targets": {"us_per_decision_batch_1024": TARGET_US,
                        "x_faster_than_rule_engine": TARGET_VS_RULE_ENGINE,
                        "faster_than_closures": True},
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
