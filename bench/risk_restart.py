"""Benchmark of account risk at a start: from a sealed account-risk snapshot and the tail, against a
rebuild from every decision record.

Account risk has no window: without a snapshot, every start applies every decision record of the
log. This decides seeded simulated payments among ``--accounts`` accounts (JSON messages parsed before
timing) through one
``audit.decide.pipeline.Pipeline`` (numpy model, the default rule pack, no trace index) into a
durable SQLite ledger (WAL + ``synchronous=FULL``), seals the account-risk state as the runtime
does at a stop (``audit.state.risk_snapshot.save_risk``: the tree's root in a ``state.account-risk``
record, the state to its file) after all but the last ``--tail`` decisions, decides those, then
times what a start does: ``restore_account_risk`` from the file (the file checked against the
sealed root, then the tail applied), beside the same-run baseline, ``rebuild_account_risk`` over
the whole log. Both must end in the same state, bit for bit; the run fails otherwise. It also
prints what sealing the snapshot cost (the copy between batches, and the tree, seal and file).

Run from the repository root: ``python -m bench.risk_restart [--quick] [--decisions N] [--tail N]
[--accounts N] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.risk_restart")

import argparse
import tempfile
import time
from pathlib import Path

import migrations
from audit.decide.account_risk import AccountRiskPolicy
from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules, Submission
from audit.state.account_risk_replay import rebuild_account_risk
from audit.state.replay import ledger_size
from audit.state.risk_snapshot import restore_account_risk, save_risk
from audit.state.risk_snapshot_body import RiskState
from bench.dbs import fresh_sqlite
from bench.machine import host_info, probe_ms, report_probe
from bench.pipeline import PACK, PRINCIPAL
from bench.report import Row, format_table, write_json
from inference.backends import load_backend
from inference.model import ModelFiles
from inference.simulate import SimConfig, simulate
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

ORIGIN = "bench.sealtrail/risk-restart"
BATCH = 1024


def payments(n: int, accounts: int) -> list[Submission]:
    """``n`` seeded simulated payments among ``accounts`` accounts, parsed as the API would."""
    out = []
    for s in simulate(SimConfig(seed=23, n_normal=n, n_accounts=accounts, days=max(7, n // 5000)))[:n]:
        (sub,) = Submission.parse(s.transaction.canonical_bytes(), "json", PRINCIPAL, s.at)
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 decisions (default 100,000)")
    ap.add_argument("--decisions", type=int, help="decisions in the ledger (overrides --quick)")
    ap.add_argument("--tail", type=int, default=1000, help="decisions sealed after the snapshot")
    ap.add_argument("--accounts", type=int, default=20_000, help="accounts the payments are among")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    n = args.decisions or (20_000 if args.quick else 100_000)
    if not 0 < args.tail < n:
        ap.error("--tail is at least 1 and fewer than the decisions")
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}; "
          f"SQLite WAL, synchronous=FULL; {n:,} decisions among {args.accounts:,} accounts, the last "
          f"{args.tail:,} after the snapshot")
    probe0 = probe_ms()
    subs = payments(n, args.accounts)
    policy = AccountRiskPolicy()
    with tempfile.TemporaryDirectory() as name, fresh_sqlite(Path(name)) as engine, Sandbox() as sandbox:
        migrations.upgrade(engine)
        ledger = Ledger.create(engine, NoteSigner.generate(ORIGIN), ORIGIN,
                               policy=CheckpointPolicy(every_entries=100_000, every_seconds=3600))
        pipe = Pipeline(ledger, load_backend("numpy", ModelFiles.open().weights_path),
                        ActiveRules.of(sandbox.load(compile_ruleset(parse_ruleset(PACK.read_text())))),
                        decider="bench-risk-restart")
        cut = len(subs) - args.tail
        t0 = time.perf_counter()
        for i in range(0, cut, BATCH):
            pipe.decide(subs[i:min(i + BATCH, cut)])
        decide_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        held = RiskState.of(pipe.account_risk)  # what the runtime copies between two batches
        copy_s = time.perf_counter() - t0
        path = Path(name) / "velocity.snapshot.account-risk"
        t0 = time.perf_counter()
        sealed = save_risk(path, ledger, held, policy, ledger_size(engine), pipe.decider)
        seal_s = time.perf_counter() - t0
        for i in range(cut, len(subs), BATCH):
            pipe.decide(subs[i:i + BATCH])
        live = pipe.account_risk.fingerprint()
        t0, c0 = time.perf_counter(), time.process_time()
        restored = restore_account_risk(path, engine, ORIGIN, policy)
        restore_s, restore_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        rebuilt, report = rebuild_account_risk(engine, policy)
        rebuild_s, rebuild_cpu = time.perf_counter() - t0, time.process_time() - c0
        if restored.sealed is None or restored.sealed.seq != sealed.seq:
            raise SystemExit("the start did not use the sealed snapshot")
        if not restored.state.fingerprint() == rebuilt.fingerprint() == live:
            raise SystemExit("the restored account risk differs from the rebuild's")
        size = path.stat().st_size
    result = {"decisions": n, "tail": args.tail, "accounts": sealed.accounts, "decide_s": decide_s,
              "copy_s": copy_s, "seal_s": seal_s, "file_bytes": size, "restore_s": restore_s,
              "restore_cpu_s": restore_cpu, "rebuild_s": rebuild_s, "rebuild_cpu_s": rebuild_cpu,
              "rebuild_us_per_decision": rebuild_s / report.applied * 1e6,
              "tail_applied": restored.report.applied}
    table = [
        Row("account risk at a start, snapshot + tail",
            f"{restore_s * 1e3:,.1f} ms (CPU {restore_cpu * 1e3:,.1f} ms; "
            f"{restored.report.applied:,} decisions applied)",
            f"rebuild of the whole log: {rebuild_s * 1e3:,.0f} ms ({report.applied:,} decisions, "
            f"{result['rebuild_us_per_decision']:.1f} µs each)", f"{rebuild_s / restore_s:.1f}x faster"),
        Row("sealing it (between batches / beside them)", f"copy {copy_s * 1e3:.1f} ms; tree, seal and file "
            f"{seal_s * 1e3:.1f} ms", f"{sealed.accounts:,} accounts, file {size / 1e6:.2f} MB", ""),
    ]
    print(format_table(table, "account risk at a start"))
    print("same state: the restored, rebuilt and live account risk are bit for bit equal")
    report_probe(host, probe0)
    if args.json:
        write_json(args.json, {"machine": host, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
