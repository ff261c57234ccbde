"""Benchmark of several deciders on one log, in process: what a decider more adds, and the sequencer.

N processes, each with its own ``audit.decide.pipeline.Pipeline`` (numpy model, the default rule
pack in its own sandbox, the trace index, as ``sealtrail serve --workers N`` runs them), decide
seeded simulated payments (JSON messages parsed before timing) into one durable log (SQLite WAL +
``synchronous=FULL``, or PostgreSQL with fsync on), taking batches of 1,024 from one shared
counter as they finish the one before: every batch but a decider's first meets state another
decider sealed, so each catches up before it prepares and a batch another decider got ahead of is
refused and prepared again under the sequencer lock (``audit.decide.log_tip``). With
``--list-entries`` (30,000 by default, as ``bench.screening`` builds them from the UN list's own
words; 0: none) a sanctions list is in force and every party, agent and line of free text is
screened, as a bank runs it.

For each count of deciders it prints decisions/s over the wall time all of them took, the CPU a
decision summed over the deciders, the sequencer lock's hold a decision (the ledger's own clock
around each commit, summed) and its share of the wall time, and how many batches were refused
and prepared again or prepared under the lock. The same-run baseline is one decider on the same
payments: the ratio says what each further decider adds. The machine's cores bound it: N deciders
on C cores can reach min(N, C) times one decider's rate, less what they wait on one another at
the sequencer.

Run from the repository root:
``python -m bench.deciders [--quick] [--deciders 1,2] [--list-entries N] [--backend sqlite|postgresql]
[--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.deciders")

import argparse
import multiprocessing as mp
import tempfile
import time
from multiprocessing.synchronize import Barrier, Lock
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

import migrations
from api.server import tune_gc_for_serving
from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules, Submission
from audit.query.index import TraceIndex
from audit.screening.lists import seal_list
from audit.screening.screener import Screener
from bench.dbs import connect_postgres, fresh_db
from bench.machine import host_info, probe_ms, report_probe
from bench.pipeline import PACK, PRINCIPAL, workload
from bench.report import Row, format_table, write_json
from bench.screening import list_csv
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner, store
from ledger.append import CheckpointPolicy, Ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

BATCH = 1024
ORIGIN = "bench.sealtrail/deciders"
POLICY = CheckpointPolicy(every_entries=100_000, every_seconds=3600)


def _decider(k: int, url: str, signer: NoteSigner, subs: list[Submission], wasm: bytes, listed: bool,
             counter: Any, taken: Lock, start: Barrier, out: Any) -> None:
    """One decider process: warm on a batch of its own, then batches from the shared counter."""
    engine = store.connect(url)
    ledger = Ledger(engine, signer, policy=POLICY)
    screener = None
    if listed:
        screener = Screener(engine, background=False)
        screener.refresh()
    with Sandbox() as sandbox:
        pipe = Pipeline(ledger, load_backend("numpy", ModelFiles.open().weights_path),
                        ActiveRules.of(sandbox.load(wasm)), index=TraceIndex(), screener=screener,
                        decider=f"bench-decider-{k}")
        pipe.decide(subs[k * BATCH:(k + 1) * BATCH])  # warm: first instance, first commit
        tune_gc_for_serving()  # as ``sealtrail serve`` leaves each worker after its start-up
        start.wait()
        t0, cpu0, held0 = time.perf_counter(), time.process_time(), ledger.held_s
        superseded0, locked0 = pipe.superseded, pipe.locked
        decided = 0
        while True:
            with taken:
                i = counter.value
                counter.value = i + 1
            if i * BATCH >= len(subs):
                break
            decided += len(pipe.decide(subs[i * BATCH:(i + 1) * BATCH]))
        out.put({"decider": k, "decisions": decided, "end": time.perf_counter(), "t0": t0,
                 "cpu_s": time.process_time() - cpu0, "held_s": ledger.held_s - held0,
                 "superseded": pipe.superseded - superseded0, "locked": pipe.locked - locked0,
                 "caught_up": pipe.caught_up})
    engine.dispose()


def run(n: int, engine: Engine, signer: NoteSigner, subs: list[Submission], wasm: bytes,
        sanctions: bytes | None) -> dict[str, Any]:
    """``n`` decider processes on the fresh database behind ``engine``; their figures together."""
    migrations.upgrade(engine)
    ledger = Ledger.create(engine, signer, ORIGIN, policy=POLICY)
    if sanctions is not None:
        seal_list(ledger, sanctions, "internal-csv", "bench-list", PRINCIPAL, "benchmark")
    url = engine.url.render_as_string(hide_password=False)
    engine.dispose()  # each process opens its own
    ctx = mp.get_context("fork")  # the payments are the parent's, shared with the children as they are
    counter, taken, start, out = ctx.Value("q", n, lock=False), ctx.Lock(), ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_decider, args=(k, url, signer, subs, wasm, sanctions is not None, counter,
                                                taken, start, out)) for k in range(n)]
    for p in procs:
        p.start()
    start.wait()
    got = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a decider process exited with {p.exitcode}")
    wall = max(g["end"] for g in got) - min(g["t0"] for g in got)
    decided = sum(g["decisions"] for g in got)
    held = sum(g["held_s"] for g in got)
    return {"deciders": n, "decisions": decided, "wall_s": wall, "per_s": decided / wall,
            "cpu_us_per_decision": sum(g["cpu_s"] for g in got) / decided * 1e6,
            "sequencer_us_per_decision": held / decided * 1e6, "sequencer_share_of_wall": held / wall,
            "superseded": sum(g["superseded"] for g in got), "locked": sum(g["locked"] for g in got),
            "batches": sum(-(-g["decisions"] // BATCH) for g in got),
            "list_entries": 0 if sanctions is None else sanctions.count(b"\n") - 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10,000 payments (default 40,000)")
    ap.add_argument("--deciders", default="1,2", help="counts of deciders, comma-separated (the first is "
                                                      "the baseline)")
    ap.add_argument("--list-entries", type=int, default=30_000,
                    help="entries of the sanctions list in force, also run without one (0: only without)")
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    counts = [int(c) for c in args.deciders.split(",") if c.strip()]
    if not counts or min(counts) < 1:
        ap.error("--deciders: counts of 1 or more, comma-separated")
    host = host_info()
    admin, pg = connect_postgres(args.backend != "postgresql")
    if args.backend == "postgresql" and admin is None:
        raise SystemExit(f"PostgreSQL not reachable: {pg.get('server_version')}")
    version = "" if admin is None else f" {pg.get('server_version')}"
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}; "
          f"{args.backend}{version}; batches of {BATCH:,}")
    probe_before = probe_ms()
    subs = workload(10_000 if args.quick else 40_000)
    wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
    signer = NoteSigner.generate(ORIGIN)
    lists: list[bytes | None] = [None] if args.list_entries <= 0 else [None, list_csv(args.list_entries)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for sanctions in lists:
            for n in counts:
                with fresh_db(args.backend, Path(tmp), admin) as engine:
                    r = run(n, engine, signer, subs, wasm, sanctions)
                r["backend"] = args.backend
                results.append(r)
                print(f"{label(r):<40}: {r['per_s']:>7,.0f} decisions/s, CPU {r['cpu_us_per_decision']:.0f} "
                      f"µs/decision (all deciders), sequencer held {r['sequencer_us_per_decision']:.1f} "
                      f"µs/decision ({r['sequencer_share_of_wall']:.0%} of the wall time); "
                      f"{r['superseded']} of {r['batches']} batches refused and prepared again, "
                      f"{r['locked']} prepared under the lock", flush=True)
    table = []
    for r in results:
        base = next(b for b in results if b["list_entries"] == r["list_entries"])
        table.append(Row(label(r), f"{r['per_s']:,.0f} decisions/s",
                         f"{label(base)}: {base['per_s']:,.0f}/s",
                         f"{r['per_s'] / base['per_s']:.2f}x",
                         "never lower" if r is not base else "",
                         ("yes" if r["per_s"] >= base["per_s"] else "NO") if r is not base else ""))
    print("\n" + format_table(table, "deciders on one log (durable)"))
    report_probe(host, probe_before)
    if args.json:
        write_json(args.json, {"machine": host, "postgresql": pg, "results": results})


def label(r: dict[str, Any]) -> str:
    out = f"{r['backend']}, {r['deciders']} decider{'s' if r['deciders'] > 1 else ''}"
    if r["list_entries"]:
        out += f", +{r['list_entries']:,}-entry list"
    return out


if __name__ == "__main__":
    main()
