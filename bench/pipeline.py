"""Benchmark of the decision pipeline in process: durable decisions/s, stage by stage.

Seeded simulated payments (JSON messages, parsed before timing) go through
``audit.decide.pipeline.Pipeline.decide`` in batches: features, the numpy model, one sandboxed call
of the default rule pack, decision records (fast RFC 8785), one ledger commit per batch
(SQLite WAL + synchronous=FULL; PostgreSQL fsync on). The same-run baseline is a plain insert
of the very record bytes the ledger stored, in the same batches, into a table of the same
shape: the storage ceiling. Each configuration runs with one caller (batches one after
another) and with two callers (two threads calling ``decide``, as two batcher workers would:
one batch's records are built while the one before it commits). With ``audit.query.index``
present, batch 1,024 also runs (1 and 2 callers) with its ``TraceIndex`` writing in the sealing
commit, as the server runs it. Each run also reports how long the sequencer lock was held a
decision (the ledger's own clock around each commit: what several deciders on one log must take
turns at) and its share of the wall time a decision costs, and, for one caller, the storage alone:
the ledger stage (the batch's writes and durable commit) a decision against the plain insert's
time. The server's path (batch 1,024, one caller, the index) then runs once more with a sanctions
list in force (``--list-entries``, 30,000 entries by default, as ``bench.screening`` builds them
from the UN list's own words; 0 skips it): every party, agent and line of free text screened, as
a bank screening its payments would run.
Run from the repository root:
``python -m bench.pipeline [--quick] [--skip-postgres] [--no-index] [--list-entries N] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.pipeline")

import argparse
import gc
import importlib
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import select

import migrations
from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules, Submission
from audit.screening.lists import seal_list
from audit.screening.screener import Screener
from bench.baselines import plain_rate, plain_table
from bench.dbs import backends, connect_postgres, fresh_db
from bench.machine import host_info, probe_ms
from bench.report import Row, format_table, verdict, write_json
from bench.screening import list_csv
from inference.backends import load_backend
from inference.model import ModelFiles
from inference.simulate import SimConfig, simulate
from ledger import NoteSigner, store
from ledger.append import CheckpointPolicy, Ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

TARGET = 20_000.0
PACK = Path(__file__).parents[1] / "wasm_rules" / "packs" / "aml_core.toml"
PRINCIPAL = {"subject": "CN=sealtrail-scorer,O=sealtrail bench", "sans": ["URI:spiffe://sealtrail.dev/role/scorer"],
             "issuer": "CN=sealtrail bench CA", "fingerprint_sha256": "ab" * 32, "serial": "01"}


def workload(n: int) -> list[Submission]:
    sims = simulate(SimConfig(seed=21, n_normal=n, days=max(7, n // 5000)))
    out = []
    for s in sims:
        (sub,) = Submission.parse(s.transaction.canonical_bytes(), "json", PRINCIPAL, s.at)
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def trace_index() -> Any:
    """``audit.query.index.TraceIndex`` when that module exists here, else None."""
    try:
        return importlib.import_module("audit.query.index").TraceIndex
    except ImportError:
        return None


def run(backend: str, root: Path, admin: Any, subs: list[Submission], batch: int,
        wasm: bytes, callers: int = 1, index: Any = None, sanctions: bytes | None = None) -> dict[str, Any]:
    files = ModelFiles.open()
    with fresh_db(backend, root, admin) as engine, Sandbox() as sandbox:
        migrations.upgrade(engine)
        ledger = Ledger.create(engine, NoteSigner.generate("bench.sealtrail/log"), "bench.sealtrail/log",
                               policy=CheckpointPolicy(every_entries=100_000, every_seconds=3600))
        screener = None
        if sanctions is not None:
            seal_list(ledger, sanctions, "internal-csv", "bench-list", PRINCIPAL, "benchmark")
            screener = Screener(engine, background=False)
            screener.refresh()
        pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), ActiveRules.of(sandbox.load(wasm)),
                        index=None if index is None else index(), screener=screener)
        first = 0 if sanctions is None else 1  # the list's own record
        pipe.decide(subs[:batch])  # warm: first instance, first commit
        stages: dict[str, int] = defaultdict(int)
        outcomes: dict[str, int] = defaultdict(int)
        batches = iter(range(batch, len(subs), batch))
        taken = threading.Lock()

        def caller() -> None:
            while True:
                with taken:
                    i = next(batches, None)
                if i is None:
                    return
                ds = pipe.decide(subs[i:i + batch])
                with taken:
                    for k, v in ds[0].latency_us.items():
                        if k != "queue":
                            stages[k] += v
                    for d in ds:
                        outcomes[d.decision] += 1

        threads = [threading.Thread(target=caller) for _ in range(callers)]
        t0, cpu0, held0 = time.perf_counter(), time.process_time(), ledger.held_s
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        held = ledger.held_s - held0
        n = len(subs) - batch
        e = store.entries
        with engine.connect() as conn:
            rows = conn.execute(select(e.c.kind, e.c.record).where(e.c.seq > batch + first)
                                .order_by(e.c.seq)).all()
        payloads = [(k, r) for k, r in rows]
        plain = plain_rate(engine, plain_table("plain", hash_columns=False), payloads, batch)
    return {"backend": backend, "batch": batch, "callers": callers, "index": index is not None,
            "list_entries": 0 if sanctions is None else sanctions.count(b"\n") - 1,  # less the header
            "decisions": n, "per_s": n / wall, "cpu_us_per_decision": cpu / n * 1e6,
            "sequencer_us_per_decision": held / n * 1e6, "sequencer_share_of_wall": held / wall,
            "stages_us_per_decision": {k: v / n for k, v in stages.items()},
            "plain_insert_per_s": plain, "outcomes": dict(outcomes),
            "mean_record_bytes": sum(len(r) for _, r in payloads) / len(payloads)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--no-index", action="store_true", help="skip the runs with audit.query.index")
    ap.add_argument("--list-entries", type=int, default=30_000,
                    help="entries of the sanctions list in force for the last run (0: no such run)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    host = host_info()
    admin, pg = connect_postgres(args.skip_postgres)
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}; "
          f"PostgreSQL {pg.get('server_version')}")
    probe_before = probe_ms()
    subs = workload(10_000 if args.quick else 40_000)
    gc.collect()
    gc.freeze()  # the benchmark's own input is not the service's garbage (see bench/inference.py)
    wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
    index = None if args.no_index else trace_index()
    configs: list[tuple[int, int, Any, bytes | None]] = [
        (batch, callers, None, None) for batch in (256, 1024) for callers in (1, 2)]
    if index is not None:  # the server's path: audit/decide/runtime.py runs the pipeline with a TraceIndex
        configs += [(1024, 1, index, None), (1024, 2, index, None)]
    else:
        why = "skipped (--no-index)" if args.no_index else "not present, no index runs"
        print(f"audit.query.index: {why}")
    if args.list_entries > 0:  # the server's path as a bank runs it: screening every payment
        configs.append((1024, 1, index, list_csv(args.list_entries)))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends(admin):
            for batch, callers, idx, sanctions in configs:
                r = run(backend, Path(tmp), admin, subs, batch, wasm, callers, idx, sanctions)
                results.append(r)
                st = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_us_per_decision"].items())
                print(f"{label(r):<34}: {r['per_s']:>9,.0f} decisions/s, this process's CPU "
                      f"{r['cpu_us_per_decision']:.0f} µs/decision, sequencer held "
                      f"{r['sequencer_us_per_decision']:.1f} µs/decision ({r['sequencer_share_of_wall']:.0%} "
                      "of the wall time) "
                      f"(plain insert of the same bytes {r['plain_insert_per_s']:,.0f}/s; µs/decision, per "
                      f"batch, overlapping with 2 callers: {st}; record {r['mean_record_bytes']:.0f} B)")
    table = [Row(label(r), f"{r['per_s']:,.0f} decisions/s",
                 f"plain insert {r['plain_insert_per_s']:,.0f}/s",
                 f"{r['plain_insert_per_s'] / r['per_s']:.2f}x",
                 ">= 20,000/s", verdict(r["per_s"] >= TARGET)) for r in results]
    # The same ratio for the storage alone: the ledger stage (the batch's writes and durable commit,
    # index included) against the plain insert of the same bytes, one caller (with two, the stages
    # overlap and the stage times are not a decision's cost).
    table += [Row(f"{label(r)}, storage alone", f"{r['stages_us_per_decision']['ledger']:.1f} µs/decision",
                  f"plain insert {1e6 / r['plain_insert_per_s']:.1f} µs",
                  f"{r['stages_us_per_decision']['ledger'] * r['plain_insert_per_s'] / 1e6:.2f}x")
              for r in results if r["callers"] == 1 and "ledger" in r["stages_us_per_decision"]]
    print("\n" + format_table(table, "pipeline (durable)"))
    probe_after = probe_ms()
    print(f"\nCPU probe: {probe_before:.1f} ms before, {probe_after:.1f} ms after")
    host["cpu_probe_ms"] = {"before": probe_before, "after": probe_after}
    if args.json:
        write_json(args.json, {"machine": host, "postgresql": pg, "results": results})


def label(r: dict[str, Any]) -> str:
    out = (f"{r['backend']}, batch {r['batch']}, {r['callers']} caller{'s' if r['callers'] > 1 else ''}"
           f"{', +index' if r['index'] else ''}")
    if r.get("list_entries"):
        out += f", +{r['list_entries']:,}-entry list"
    return out


if __name__ == "__main__":
    main()
