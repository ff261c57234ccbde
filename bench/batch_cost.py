"""What a batch costs apart from its decisions: the decider's CPU per batch by batch size.

A request alone on the single-request path is decided in a batch of its own, or with the few that
arrived while the batch before it ran; every batch pays a fixed share (its transactions, the
statements of its commit, the fence, the index write, the rule module's call, the template of its
records) on top of each decision's own work. This runs the server's runtime in process
(``audit.decide.runtime.Runtime`` on a fresh SQLite ledger, WAL + ``synchronous=FULL``, the
trace index, idempotency keys (each payment's, derived as the server derives it), account risk
and explanations: what ``sealtrail serve`` runs behind the HTTP stack) over seeded simulated
JSON payments parsed beforehand, each decided and sealed (a replay or a fail-safe answer stops the
run), in batches of 1,
3, 10, 30, 100 and 1,000, and fits this process's CPU per batch as ``fixed + per_decision x n``
(least squares over the sizes). The same-run baseline is the per-decision cost at 1,000 a
batch. Run from the repository root: ``python -m bench.batch_cost [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.batch_cost")

import argparse
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from api import ops
from api.config import Settings
from audit.decide.idempotency import derived_key
from audit.decide.runtime import Runtime
from audit.decide.types import Submission
from bench.http import bodies
from bench.machine import host_info, probe_ms
from bench.report import Row, format_table, write_json

SIZES = (1, 3, 10, 30, 100, 1000)
PRINCIPAL = {"subject": "CN=bench", "sans": [], "issuer": "CN=bench CA", "fingerprint_sha256": "ab" * 32,
             "serial": "1"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about 1,500 decisions a size instead of 4,000")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    per_size = 1500 if args.quick else 4000
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), Python {host['python']}; "
          "SQLite WAL, synchronous=FULL")
    probe0 = probe_ms()
    need = 200 + per_size * len(SIZES) + 1000 * len(SIZES)
    raws = bodies(need)
    now = datetime.now(UTC)
    # each with the idempotency key the server derives (its UETR): the key's lookup before a batch and
    # its insert in the commit are part of what a batch costs
    subs = [replace(s, idempotency=derived_key(s.transaction))
            for raw in raws for s in Submission.parse(raw, "json", PRINCIPAL, now)
            if isinstance(s, Submission)]
    if any(s.idempotency is None for s in subs):
        raise RuntimeError("a simulated payment has no idempotency key (no UETR, no reference)")
    if len(subs) < need:
        raise RuntimeError(f"{need - len(subs)} simulated payments did not parse")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        overrides: dict[str, Any] = {"db": f"sqlite:///{tmp / 'ledger.db'}", "keys": tmp / "keys"}
        settings = Settings(**overrides)
        ops.initialise(settings)
        rt = Runtime.open(settings)
        try:
            k = 200
            rt.service.decide(subs[:k])  # warm: model, module, caches
            for size in SIZES:
                batches = max(per_size // size, 3)
                got = []
                cpu0, wall0 = time.process_time(), time.perf_counter()
                for _ in range(batches):
                    got += rt.service.decide(subs[k:k + size], timeout_s=60.0)
                    k += size
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                if any(d.replayed or d.fail_safe for d in got):  # each one decided and sealed
                    raise RuntimeError(f"batch {size}: a payment was answered again or held fail-safe")
                rows.append({"batch": size, "batches": batches, "cpu_ms_per_batch": cpu / batches * 1e3,
                             "cpu_us_per_decision": cpu / (batches * size) * 1e6,
                             "wall_us_per_decision": wall / (batches * size) * 1e6})
        finally:
            rt.close()
    n = np.array([r["batch"] for r in rows], dtype=float)
    c = np.array([r["cpu_ms_per_batch"] * 1e3 for r in rows])
    per_decision, fixed = np.polyfit(n, c, 1, w=1 / n)  # relative errors: each size weighs alike
    base = rows[-1]["cpu_us_per_decision"]
    table = [Row(f"batch {r['batch']:,}", f"{r['cpu_us_per_decision']:,.0f} µs CPU/decision "
                 f"({r['cpu_ms_per_batch']:.2f} ms/batch; wall {r['wall_us_per_decision']:,.0f} µs)",
                 f"batch 1,000: {base:,.0f} µs", f"{r['cpu_us_per_decision'] / base:.1f}x") for r in rows]
    print(format_table(table, subject="this process's CPU (all threads)"))
    print(f"\nfit: {fixed:,.0f} µs a batch + {per_decision:,.0f} µs a decision; CPU probe {probe0:.1f} -> "
          f"{probe_ms():.1f} ms")
    if args.json:
        write_json(args.json, {"machine": host, "rows": rows, "fixed_us_per_batch": fixed,
                               "us_per_decision": per_decision})
    return 0


if __name__ == "__main__":
    sys.exit(main())
