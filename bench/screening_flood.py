"""A payment written to flood sanctions screening, among healthy payments: what its batch-mates pay.

``python -m bench.screening_flood [--entries N] [--words N] [--seconds S] [--json PATH]``: a runtime
(the production scoring path: batcher, 250 ms queue deadline, SQLite WAL + FULL sync) with a list of
N entries in force (default 30,000, ``bench.screening``'s list) decides healthy payments one request
at a time on one thread, as a payment engine sends them, while a second thread sends, once a second,
a payment whose remittance is ``--words`` words (default 300) drawn from the list's own words. Run
twice in the same process: under the default screening budget, and with the budget set so high that
every payment is screened in full (the same-run baseline: how the decider behaved before the budget).
Printed per run: healthy decisions, those held fail-safe because their deadline passed in the queue
(``DEADLINE_EXCEEDED``), their latency (median, p99, max), and the flooded payments' decisions and
latency; and the machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from dataclasses import replace
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
from bench.report import percentile, write_json
from bench.screening import _list_entries, empty_caches, list_csv
from bench.screening_reload import PRINCIPAL
from inference.screening.screen import DEFAULT_BUDGET

__all__ = ["flood", "main"]

UNBOUNDED = 1 << 62  # a budget no payment reaches: screened in full, as before the budget


def _flooded(base: Submission, entries: int, words: int, n: int) -> list[Submission]:
    vocab = sorted({w for e in _list_entries(entries)[:500] for name in e.names for w in name.split()})
    rng = random.Random(7)
    out = []
    for i in range(n):
        tx = replace(base.transaction, reference=f"FLOOD-{i}",
                     remittance=" ".join(rng.choice(vocab) for _ in range(words)))
        out += [s for s in Submission.parse(tx.canonical_bytes(), "json", PRINCIPAL, datetime.now(UTC))
                if isinstance(s, Submission)]
    return out


def flood(entries: int, words: int, seconds: float, budget: int) -> dict[str, Any]:
    """Healthy payments one at a time for ``seconds``, a flooded one each second, under ``budget``."""
    data = list_csv(entries)
    now = datetime.now(UTC)
    healthy = [s for raw in bodies(20_000) for s in Submission.parse(raw, "json", PRINCIPAL, now)
               if isinstance(s, Submission)]
    flooded = _flooded(healthy[0], entries, words, int(seconds) + 2)
    empty_caches()  # each run starts cold: the second must not screen on the words the first cached
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        overrides: dict[str, Any] = {"db": f"sqlite:///{tmp / 'ledger.db'}", "keys": tmp / "keys",
                                     "screening_budget": budget}
        settings = Settings(**overrides)
        ops.initialise(settings)
        rt = Runtime.open(settings)
        assert rt.screener is not None
        seal_list(rt.ledger, data, "internal-csv", "bench-list", Principal.local("bench"), "bench flood",
                  source="internal", published=date.today())
        rt.screener.refresh(wait=True)
        good: list[tuple[float, str | None]] = []
        bad: list[tuple[float, str, str | None]] = []
        stop = threading.Event()

        def steady() -> None:
            k = 0
            while not stop.is_set() and k < len(healthy):
                t0 = time.perf_counter()
                (d,) = rt.service.decide([healthy[k]])
                good.append((time.perf_counter() - t0, d.fail_safe))
                k += 1

        def hostile() -> None:
            for sub in flooded:
                if stop.wait(1.0):
                    return
                t0 = time.perf_counter()
                (d,) = rt.service.decide([sub])
                bad.append((time.perf_counter() - t0, d.decision, d.fail_safe))

        try:
            rt.service.decide(healthy[:50])  # warm
            healthy = healthy[50:]
            threads = [threading.Thread(target=steady, name="bench-healthy"),
                       threading.Thread(target=hostile, name="bench-flood")]
            for t in threads:
                t.start()
            time.sleep(seconds)
            stop.set()
            for t in threads:
                t.join(120)
        finally:
            rt.close()
    lat = [s for s, _ in good]
    return {
        "budget": budget, "healthy": len(good),
        "healthy_deadline_exceeded": sum(1 for _, why in good if why == "DEADLINE_EXCEEDED"),
        "healthy_latency_ms": {"median": round(statistics.median(lat) * 1e3, 2),
                               "p99": round(percentile(lat, 99) * 1e3, 2), "max": round(max(lat) * 1e3, 2)},
        "flooded": len(bad), "flooded_decisions": sorted({f"{dec}/{why}" for _, dec, why in bad}),
        "flooded_latency_ms_max": round(max((s for s, _, _ in bad), default=float("nan")) * 1e3, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--entries", type=int, default=30_000)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {"machine": host_info(), "entries": args.entries, "words": args.words}
    print(f"machine: {doc['machine']}")
    for label, budget in (("default budget", DEFAULT_BUDGET), ("screened in full (baseline)", UNBOUNDED)):
        r = doc[label] = flood(args.entries, args.words, args.seconds, budget)
        print(f"{label}: {r['healthy']:,} healthy decisions, {r['healthy_deadline_exceeded']} held fail-safe "
              f"(DEADLINE_EXCEEDED), latency ms {r['healthy_latency_ms']}; {r['flooded']} flooded payments "
              f"({', '.join(r['flooded_decisions'])}), the slowest {r['flooded_latency_ms_max']} ms")
    if args.json:
        write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
