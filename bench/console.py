"""Benchmark of what the console reads: the overview's aggregates and search pages over 1,000,000
indexed decisions.

What is synthetic: the index tables (``audit_traces``, ``audit_trace_rules``) are filled
directly with seeded rows (90% ALLOW, rules fired on the rest, as ``bench.queries`` does),
spread evenly over 40 days, so that a 1 h window holds ~1,000 decisions, 24 h ~25,000 and
30 d ~750,000 (over the 500,000 cap: the newest 500,000 are aggregated). Latencies are read from
``ledger_entries``; only the newest 20,000 decisions get an entry there: an envelope of a real
decision record's shape and size (~1.6 kB) with seeded stage latencies, not a sealed record
(no valid hashes or tree). No account rows are written. Timed: ``audit.query.stats.window`` +
``overview`` for 1 h, 24 h and 30 d windows, against a same-run ``SELECT count(*)`` over the
same range; ``audit.query.traces.query_traces`` first and 100th page by cursor (no filter,
decision, rule), against a primary-key lookup. Run from the repository root:
``python -m bench.console [--rows N] [--skip-postgres] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.console")

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine

import migrations
from audit.query import stats
from audit.query.index import trace_rules, traces
from audit.query.traces import TraceFilter, query_traces
from bench.dbs import backends, connect_postgres, fresh_db, placeholder
from bench.machine import machine_info, print_machine
from bench.queries import OUTCOME_WEIGHTS, PRINCIPALS, RULES, timed
from bench.report import Row, format_table, write_json
from ledger import store

START = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 40
WITH_RECORDS = 20_000  # newest decisions that get a ledger entry (latency is read from those)
CHUNK = 50_000
WINDOWS = {"1 h": timedelta(hours=1), "24 h": timedelta(hours=24), "30 d": timedelta(days=30)}


def _at(seq: int, n: int) -> str:
    t = START + timedelta(seconds=DAYS * 86400 * seq / n)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _envelope(seq: int, at: str, decision: str, score: float, fired: list[str], rng: random.Random) -> bytes:
    """A decision envelope shaped like a sealed one (same members, similar size); hashes are fake."""
    h = f"{seq:064x}"
    lat = {"queue": int(rng.lognormvariate(6.0, 0.6)), "features": int(rng.lognormvariate(4.5, 0.4)),
           "model": int(rng.lognormvariate(5.5, 0.4)), "rules": int(rng.lognormvariate(5.8, 0.5))}
    body = {"at": at, "batch_size": 64, "decision": decision, "fail_safe": None,
            "features": {"schema": "sealtrail.features/1", "sha256": h, "tables": {"fx_rates": "ecb-2025-10"},
                         "values": [round(rng.random() * 500, 2) for _ in range(32)]},
            "fired": [{"id": r, "reason": "synthetic"} for r in fired], "fuel": 272,
            "input": {"format": "json", "message_type": "json", "raw_sha256": h, "reference": f"B{seq}",
                      "transaction_sha256": h},
            "latency_us": lat, "model": {"backend": "numpy", "sha256": h},
            "principal": {"fingerprint_sha256": PRINCIPALS[seq % 5][0], "subject": PRINCIPALS[seq % 5][1]},
            "rules": {"module_sha256": "ab" * 32, "ruleset_id": "aml_core", "version": "2026.12.0"},
            "schema": "sealtrail.decision/1", "score": score}
    return orjson.dumps({"kind": "decision", "payload_sha256": h, "record": body, "recorded_at": at,
                         "trace_id": _tid(seq), "v": 1}, option=orjson.OPT_SORT_KEYS)


def _tid(seq: int) -> str:
    return f"{seq:08x}-0000-7000-8000-000000000000"


def populate(engine: Engine, n: int, seed: int = 7) -> float:
    """Fill the index (and the newest entries) with seeded rows; seconds taken."""
    rng = random.Random(seed)
    outcomes = [o for o, _ in OUTCOME_WEIGHTS]
    weights = [w for _, w in OUTCOME_WEIGHTS]
    cols = [c.name for c in traces.columns]
    entry_cols = ("seq", "kind", "record", "leaf_hash", "chain_hash", "recorded_at", "trace_id")
    t0 = time.perf_counter()
    for lo in range(1, n + 1, CHUNK):
        rows, rules, entries = [], [], []
        for seq in range(lo, min(n + 1, lo + CHUNK)):
            decision = rng.choices(outcomes, weights)[0]
            fired = [] if decision == "ALLOW" else rng.sample(RULES[:-1], rng.randint(1, 3))
            score = rng.random() ** 8 if decision == "ALLOW" else rng.random()
            fp, subject = PRINCIPALS[seq % 5]
            at = _at(seq, n)
            rows.append((seq, _tid(seq), at, at, decision, score, None, ",".join(fired), fp, subject,
                         "aml_core", "2026.12.0", "ab" * 32))
            rules += [(r, seq) for r in fired]
            if seq > n - WITH_RECORDS:
                entries.append((seq, "decision", _envelope(seq, at, decision, score, fired, rng),
                                seq.to_bytes(32, "big"), seq.to_bytes(32, "big"), at, _tid(seq)))
        with engine.begin() as conn:
            store.insert_rows(conn, traces, cols, rows)
            store.insert_rows(conn, trace_rules, ("rule_id", "seq"), rules)
            store.insert_rows(conn, store.entries, entry_cols, entries)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE" if engine.dialect.name == "postgresql" else "ANALYZE")
    return time.perf_counter() - t0


def _page(engine: Engine, given: dict[str, Any], page: int) -> tuple[TraceFilter, int]:
    """The filter of page ``page`` (1-based) of ``given``, its cursor found by walking there (or
    of the last page, if there are fewer), and that page's number."""
    f = TraceFilter(**given)
    for reached in range(1, page):
        cursor = query_traces(engine, f).next_cursor
        if cursor is None:
            return f, reached
        f = TraceFilter(**given, cursor=cursor)
    return f, page


def run(engine: Engine, n: int) -> list[Row]:
    migrations.upgrade(engine)
    print(f"  loaded {n:,} decisions ({WITH_RECORDS:,} with ledger entries) in {populate(engine, n):.1f} s")
    p = placeholder(engine)
    now = START + timedelta(days=DAYS + 1)
    rows: list[Row] = []
    for name, span in WINDOWS.items():
        w = stats.window(engine, now=now, span=span)
        ov = stats.overview(engine, w)

        def count(w: stats.Window = w) -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"SELECT count(*) FROM audit_traces WHERE recorded_at >= {p} "
                                     f"AND recorded_at < {p}", (w.since, w.until)).scalar()

        def page(span: timedelta = span) -> None:
            stats.overview(engine, stats.window(engine, now=now, span=span))

        base, ms = timed(count, repeat=5), timed(page, repeat=5)
        cut = f", newest {ov.cap:,} of more" if ov.truncated else ""
        rows.append(Row(f"overview {name} ({ov.total:,} decisions{cut}; {ov.latency.decisions:,} records)",
                        f"{ms:.1f} ms", f"{base:.1f} ms count(*)", f"{ms / base:.1f}x"))
    mid = n // 2

    def pk() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT * FROM audit_traces WHERE seq = {p}", (mid,)).all()

    base = timed(pk)
    for name, given in (("no filter", {}), ("decision=REVIEW (6%)", {"decision": "REVIEW"}),
                        ("rule_id=VELOCITY_BURST", {"rule_id": "VELOCITY_BURST"})):
        for number in (1, 100):
            f, reached = _page(engine, {**given, "limit": 50}, number)
            ms = timed(lambda f=f: query_traces(engine, f))
            rows.append(Row(f"search page {reached} (50 rows): {name}", f"{ms:.2f} ms", f"{base:.3f} ms pk",
                            f"{ms / base:,.0f}x"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
        print(f"\n{backend}: {args.rows:,} indexed decisions over {DAYS} days")
        with fresh_db(backend, root, admin) as engine:
            rows = run(engine, args.rows)
        print(format_table(rows, "median of 5 (overview) / 7 (search)"))
        figures[backend] = [r.__dict__ for r in rows]
    if args.json:
        write_json(args.json, figures)


if __name__ == "__main__":
    main()
