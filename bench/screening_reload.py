"""Loading a sanctions list while deciding: no request fails, and the new list is used once indexed.

``python -m bench.screening_reload [--entries N] [--json PATH]``: a runtime (the production scoring
path: batcher, 250 ms queue deadline, SQLite WAL + FULL sync) decides payments one request at a time
on one thread, as a payment engine sends them, while the main thread seals an ``internal-csv`` list
of N entries (default 30,000, names from ``bench.screening``'s list). The runtime notices the new
list record within a second and indexes it beside the batches (``audit.screening.screener``).
Printed: the decisions made while the list was parsed and indexed, their latency (median, p99, max)
against the same requests before the load, fail-safe decisions (a request whose deadline passed in
the queue is one: a failed request), the seconds from the seal to the first decision naming the
list, and the machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from api import ops
from api.config import Settings
from audit.decide.principal import Principal
from audit.decide.runtime import Runtime
from audit.decide.types import Submission
from audit.screening.lists import seal_list
from bench.http import bodies
from bench.machine import host_info
from bench.report import write_json
from bench.screening import list_csv

__all__ = ["main", "reload"]

PRINCIPAL = {"subject": "CN=bench-scorer,O=sealtrail bench", "sans": [], "issuer": "CN=bench CA",
             "fingerprint_sha256": "ab" * 32, "serial": "01"}


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def reload(entries: int, *, before_s: float = 2.0, after_s: float = 2.0) -> dict[str, Any]:
    """Decide one request at a time while a list of ``entries`` is sealed and indexed; the figures."""
    data = list_csv(entries)
    subs = [s for raw in bodies(20_000) for s in Submission.parse(raw, "json", PRINCIPAL, datetime.now(UTC))
            if isinstance(s, Submission)]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        overrides: dict[str, Any] = {"db": f"sqlite:///{tmp / 'ledger.db'}", "keys": tmp / "keys"}
        settings = Settings(**overrides)
        ops.initialise(settings)
        rt = Runtime.open(settings)
        assert rt.screener is not None
        lat: list[tuple[float, float, str | None, int]] = []  # (start, seconds, fail_safe, lists named)
        stop = threading.Event()

        def decide() -> None:
            k = 50  # after the warm-up's payments: each one decided once
            while not stop.is_set() and k < len(subs):
                t0 = time.perf_counter()
                (d,) = rt.service.decide([subs[k]])
                lat.append((t0, time.perf_counter() - t0, d.fail_safe,
                            len(rt.screener.in_force.loads) if rt.screener else 0))
                k += 1

        try:
            rt.service.decide(subs[:50])  # warm
            t = threading.Thread(target=decide, name="bench-payments")
            t.start()
            time.sleep(before_s)
            sealed_at = time.perf_counter()
            seal_list(rt.ledger, data, "internal-csv", "bench-list", Principal.local("bench"), "bench reload",
                      source="internal", published=date.today())
            seal_s = time.perf_counter() - sealed_at
            while not rt.screener.in_force.loads and time.perf_counter() - sealed_at < 120:
                time.sleep(0.01)
            indexed_s = time.perf_counter() - sealed_at
            time.sleep(after_s)
            stop.set()
            t.join(60)
        finally:
            rt.close()
    before = [s for t0, s, _, _ in lat if t0 < sealed_at]
    during = [s for t0, s, _, _ in lat if sealed_at <= t0 < sealed_at + indexed_s]
    failed = sum(1 for _, _, why, _ in lat if why)
    first_named = next((t0 for t0, _, _, n in lat if n), None)
    slowest = sorted(lat, key=lambda x: -x[1])[:5]
    return {
        "entries": entries, "list_bytes": len(data), "seal_s": round(seal_s, 2),
        "indexed_after_s": round(indexed_s, 2),
        "first_decision_with_the_list_after_s": (None if first_named is None
                                                 else round(first_named - sealed_at, 2)),
        "decisions": len(lat), "decisions_while_indexing": len(during), "fail_safe": failed,
        "slowest": [{"ms": round(s * 1e3, 1), "started_s_after_seal": round(t0 - sealed_at, 2)}
                    for t0, s, _, _ in slowest],
        "latency_ms_before": {"median": round(statistics.median(before) * 1e3, 2),
                              "p99": round(_pct(before, 0.99) * 1e3, 2), "max": round(max(before) * 1e3, 2)},
        "latency_ms_while_indexing": {"median": round(statistics.median(during) * 1e3, 2) if during else None,
                                      "p99": round(_pct(during, 0.99) * 1e3, 2) if during else None,
                                      "max": round(max(during) * 1e3, 2) if during else None},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--entries", type=int, default=30_000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    doc = {"machine": host_info(), "reload": reload(args.entries)}
    r = doc["reload"]
    print(f"machine: {doc['machine']}")
    print(f"list of {r['entries']:,} entries ({r['list_bytes']:,} bytes): sealed in {r['seal_s']} s (the "
          f"caller's load, parsed once to check it), indexed beside the batches {r['indexed_after_s']} s "
          "after the seal")
    print(f"decisions: {r['decisions']:,} one request at a time, {r['decisions_while_indexing']:,} while "
          f"indexing; fail-safe (failed requests): {r['fail_safe']}")
    print(f"latency before the load (ms): {r['latency_ms_before']}")
    print(f"slowest requests: {r['slowest']} (the seal took the first {r['seal_s']} s)")
    print(f"latency while indexing (ms):  {r['latency_ms_while_indexing']}  (baseline: the line above, same "
          "run)")
    if args.json:
        write_json(args.json, doc)
    return 0 if r["fail_safe"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
