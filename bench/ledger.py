"""Benchmark of the sealtrail ledger: durable appends, full verification, inclusion proofs.

Every figure is printed next to a baseline measured in the same run on the same machine.
Run from the repository root: ``python -m bench.ledger [--quick] [--skip-postgres]``.
"""

from __future__ import annotations

import sys

if not __package__:  # run as a file, bench/ledger.py would shadow the ledger package
    sys.exit("run it as a module from the repository root: python -m bench.ledger")

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.dbs import backends, connect_postgres, fresh_sqlite
from bench.ledger_append import (
    APPEND_POLICY,
    TARGET_APPEND_RATE,
    TARGET_APPEND_RATIO,
    AppendResult,
    append_rows,
    run_appends,
)
from bench.ledger_proofs import TARGET_PROOF_MS, ProofResult, measure_proofs, proof_rows
from bench.ledger_verify import TARGET_VERIFY_RATE, VerifyResult, measure_verify, verify_rows
from bench.machine import machine_info, print_machine
from bench.report import format_table, write_json
from bench.workload import BUILD_POLICY, KIND, record_pool, record_sizes
from ledger import Record


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.ledger", description=__doc__)
    ap.add_argument("--entries", type=int, default=None,
                    help="ledger size for verification and proofs (default 1,000,000)")
    ap.add_argument("--quick", action="store_true",
                    help="100,000 entries and shorter append runs")
    ap.add_argument("--skip-postgres", action="store_true", help="SQLite only")
    ap.add_argument("--rounds", type=int, default=3,
                    help="append rounds per measurement, fresh database each (median shown)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--dir", type=Path, default=None,
                    help="directory for the SQLite files (default: the system temp dir)")
    return ap.parse_args(argv)


def workload(pool: Sequence[Record]) -> dict[str, Any]:
    """Sizes of the records appended and the checkpoint policies used."""
    return {
        **record_sizes(pool),
        "append_policy": asdict(APPEND_POLICY),
        "build_policy": asdict(BUILD_POLICY),
    }


def print_header(load: dict[str, Any], rounds: int) -> None:
    """What was appended and how the append figures read (after the machine header)."""
    print(f"Records:    {KIND}, body {load['body_bytes_mean']} B, "
          f"envelope {load['envelope_bytes_mean']} B (mean)")
    print("Baselines:  plain insert; plain+hash cols = the same plus leaf_hash, chain_hash "
          "(2 x 32 precomputed random bytes)")
    print(f"Appends:    median of {rounds} rounds [min-max], fresh database each; "
          "ledger slower by: vs plain, vs plain+hash cols\n")


def figures_json(
    machine: dict[str, Any], load: dict[str, Any], appends: Sequence[AppendResult],
    verify: VerifyResult, proofs: ProofResult,
) -> dict[str, Any]:
    """All figures as one JSON-ready object."""
    return {
        "machine": machine,
        "workload": load,
        "appends": [a.figures() for a in appends],
        "verify": verify.figures(),
        "proofs": proofs.figures(),
        "targets": {
            "append_rate_sqlite_batch_1000": TARGET_APPEND_RATE,
            "append_ratio_max": TARGET_APPEND_RATIO,
            "verify_rate": TARGET_VERIFY_RATE,
            "proof_median_ms": TARGET_PROOF_MS,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run every measurement, print the machine and the figures, optionally write JSON."""
    args = parse_args(argv)
    entries = args.entries or (100_000 if args.quick else 1_000_000)
    admin, pg = connect_postgres(args.skip_postgres)
    pool = record_pool()
    load = workload(pool)
    with tempfile.TemporaryDirectory(prefix="sealtrail-bench-", dir=args.dir) as tmp:
        root = Path(tmp)
        machine = machine_info(root, pg)
        print_machine(machine)
        print_header(load, args.rounds)
        try:
            appends = run_appends(backends(admin), args.quick, args.rounds, pool, root, admin)
        finally:
            if admin is not None:
                admin.dispose()
        with fresh_sqlite(root) as engine:
            verify, led, _ = measure_verify(engine, pool, entries)
            proofs = measure_proofs(engine, led)
    rows = [*(row for a in appends for row in append_rows(a)), *verify_rows(verify), *proof_rows(proofs)]
    print("\n" + format_table(rows, subject="ledger"))
    if args.json is not None:
        write_json(args.json, figures_json(machine, load, appends, verify, proofs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
