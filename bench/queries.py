"""Benchmark of trace queries at scale: the first page of each filter over ~1,000,000 decisions.

The index tables (``audit.query.index``, migration 0003) are filled directly with seeded,
skewed data (90% ALLOW, scores mostly near 0, rules fired on the rest, 50,000 accounts, five
principals, 1,000 decisions per commit), then ``audit.query.traces.query_traces`` fetches the first
page (100) of each filter, and a page deep in the log through a cursor. The same-run baseline
is a bare primary-key lookup of one index row: the ratio says how many such lookups a page
costs. Run from the repository root:
``python -m bench.queries [--rows N] [--skip-postgres] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.queries")

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

import migrations
from audit.query.index import account_key, trace_accounts, trace_rules, traces
from audit.query.traces import TraceFilter, query_traces
from bench.dbs import backends, connect_postgres, fresh_db
from bench.machine import machine_info, print_machine
from bench.report import Row, format_table, write_json
from ledger import store

RULES = ["MODEL_SCORE_BLOCK", "MODEL_SCORE_REVIEW", "R16_ORIGINATOR_INCOMPLETE", "JURISDICTION_HIGH_RISK",
         "STRUCTURING_24H", "VELOCITY_BURST", "ROUND_AMOUNTS", "NEW_BENEFICIARY", "MODEL_SCORE_MISSING",
         "RARE_RULE"]
PRINCIPALS = [(f"{i:02x}" * 32, f"CN=scorer-{i},O=bank") for i in range(5)]
OUTCOME_WEIGHTS = (("ALLOW", 0.90), ("REVIEW", 0.06), ("HOLD", 0.03), ("BLOCK", 0.01))
BATCH = 1000


def _time(i: int) -> str:  # one commit every 50 ms from 2026-01-01
    ms = (i // BATCH) * 50
    s, ms = divmod(ms, 1000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    return f"2026-01-{1 + d:02d}T{h:02d}:{m:02d}:{s:02d}.{ms:03d}000Z"


def populate(engine: Engine, n: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    accounts = [f"ACC{i:08d}" for i in range(50_000)]
    keys = [account_key(a) for a in accounts]
    outcomes = [o for o, _ in OUTCOME_WEIGHTS]
    weights = [w for _, w in OUTCOME_WEIGHTS]
    cols = [c.name for c in traces.columns]
    t0 = time.perf_counter()
    for lo in range(1, n + 1, 50_000):
        rows, rules, accts = [], [], []
        for seq in range(lo, min(n + 1, lo + 50_000)):
            decision = rng.choices(outcomes, weights)[0]
            fired = [] if decision == "ALLOW" else rng.sample(RULES[:-1], rng.randint(1, 3))
            if seq % 100_000 == 0:
                fired.append("RARE_RULE")
            score = rng.random() ** 8 if decision == "ALLOW" else rng.random()
            fp, subject = PRINCIPALS[seq % 5]
            at = _time(seq)
            alert = 0 if rng.random() < 0.99 else rng.choice((1, 2, 3))  # account_alert: 1% of decisions
            risk = rng.randrange(0, 500) if alert == 0 else rng.randrange(5_000, 20_000)
            rows.append((seq, f"{seq:08x}-0000-7000-8000-000000000000", at, at, decision, score, None,
                         ",".join(fired), fp, subject, "aml_core", "2026.12.0", "ab" * 32, risk, alert))
            rules += [(r, seq) for r in fired]
            a, b = rng.randrange(50_000), rng.randrange(50_000)
            accts += [(keys[a], seq)] + ([(keys[b], seq)] if b != a else [])
        with engine.begin() as conn:
            store.insert_rows(conn, traces, cols, rows)
            store.insert_rows(conn, trace_rules, ("rule_id", "seq"), rules)
            store.insert_rows(conn, trace_accounts, ("account_key", "seq"), accts)
    if engine.dialect.name == "postgresql":  # as its autovacuum would; sealtrail never runs ANALYZE on SQLite
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    return {"accounts": accounts, "load_s": time.perf_counter() - t0}


def timed(fn: Any, repeat: int = 7) -> float:
    """Median wall time of ``fn()`` in ms (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def run(engine: Engine, n: int) -> list[Row]:
    migrations.upgrade(engine)
    info = populate(engine, n)
    print(f"  loaded {n:,} decisions in {info['load_s']:.1f} s")
    p = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    mid = n // 2

    def pk() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT * FROM audit_traces WHERE seq = {p}", (mid,)).all()

    base = timed(pk)
    late, early = _time(n - 20 * BATCH), _time(20 * BATCH)
    cases: dict[str, dict[str, Any]] = {
        "no filter": {},
        "decision=BLOCK (1%)": {"decision": "BLOCK"},
        "decision=ALLOW (90%)": {"decision": "ALLOW"},
        "rule_id (common)": {"rule_id": "VELOCITY_BURST"},
        "rule_id (10 rows)": {"rule_id": "RARE_RULE"},
        "account (~40 rows)": {"account": info["accounts"][123]},
        "principal fingerprint": {"principal": PRINCIPALS[2][0]},
        "principal subject": {"principal": PRINCIPALS[3][1]},
        "score >= 0.99": {"score_min": 0.99},
        "score >= 0.0 (all)": {"score_min": 0.0},
        "score 0.5..0.5001": {"score_min": 0.5, "score_max": 0.5001},
        "since (last 20k)": {"since": late},
        "until (first 20k)": {"until": early},
        "since far back (all)": {"since": "2025-01-01T00:00:00Z"},
        "window mid-log (20k)": {"since": _time(mid), "until": _time(mid + 20 * BATCH)},
        "decision=ALLOW + window mid-log": {"decision": "ALLOW", "since": _time(mid),
                                            "until": _time(mid + 20 * BATCH)},
        "account_alert (1%)": {"account_alert": True},
        "rule + account": {"rule_id": "VELOCITY_BURST", "account": info["accounts"][123]},
        "decision=HOLD + score >= 0.9": {"decision": "HOLD", "score_min": 0.9},
    }
    rows = [Row("primary-key lookup (baseline)", f"{base:.3f} ms", f"{base:.3f} ms", "1.0x")]
    for name, given in cases.items():
        f = TraceFilter(**given)
        ms = timed(lambda f=f: query_traces(engine, f))
        rows.append(Row(f"first page: {name}", f"{ms:.2f} ms", f"{base:.3f} ms", f"{ms / base:,.0f}x"))
    deep = TraceFilter(decision="REVIEW", cursor=TraceFilter(decision="REVIEW").cursor_after(mid))
    ms = timed(lambda: query_traces(engine, deep))
    rows.append(Row("page at seq n/2: decision=REVIEW", f"{ms:.2f} ms", f"{base:.3f} ms",
                    f"{ms / base:,.0f}x"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    admin, pg = connect_postgres(args.skip_postgres)
    root = Path(tempfile.mkdtemp(prefix="sealtrail-bench-"))
    machine = machine_info(root, pg)
    print_machine(machine)
    figures: dict[str, Any] = {"machine": machine, "rows": args.rows}
    for backend in backends(admin):
        print(f"\n{backend}: {args.rows:,} indexed decisions")
        with fresh_db(backend, root, admin) as engine:
            rows = run(engine, args.rows)
        print(format_table(rows, "median of 7"))
        figures[backend] = [r.__dict__ for r in rows]
    if args.json:
        write_json(args.json, figures)


if __name__ == "__main__":
    main()
