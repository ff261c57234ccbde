"""Benchmark of decision summaries: what sealing a ``decision.summary`` with every batch costs
the pipeline, per decision.

Seeded simulated payments (the pipeline tests' traffic) in batches of 1,024: the accounts keyed
(HMAC-SHA256) three ways: cold, every account new (a population of 100,000 accounts, the keyer's
and the IBAN parser's caches emptied before each pass); a first batch of a 400-account population
(the caches emptied before it, so an account met again within the batch is a hit); warm, the
keyer's cache holding every account, as for repeat customers. Then the canonical ``decisions``
array assembled, and the bytes a decision adds to the summary. The same-run baseline is
``ledger.jcs.canonical_bytes`` of each decision's own typical record
(``bench.canonical.typical_record``), the unit of work the summary rides along with.
Run from the repository root: ``python -m bench.summaries``.
"""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run it as a module from the repository root: python -m bench.summaries")

import random
import secrets
import time
from collections.abc import Callable

from audit.decide.summary import AccountKeyer, entries_jcs
from bench.canonical import typical_record
from bench.machine import host_info, probe_ms
from inference.messages.fields import iban_or_none
from inference.simulate import SimConfig, simulate
from ledger.jcs import canonical_bytes

BATCH = 1024


def _best_us(fn: Callable[[], object], n: int, passes: int = 7) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def main() -> int:
    info = host_info()
    print(f"CPU: {info['cpu']} ({info['cores']} cores), Python {info['python']}")
    probe = probe_ms()
    sims = simulate(SimConfig(seed=11, n_normal=BATCH, n_accounts=400, days=3))[:BATCH]
    accounts = [(s.transaction.originator.account, s.transaction.beneficiary.account) for s in sims]
    wide = simulate(SimConfig(seed=11, n_normal=BATCH, n_accounts=100_000, days=3))[:BATCH]
    new = [(s.transaction.originator.account, s.transaction.beneficiary.account) for s in wide]
    distinct = len({a for pair in new for a in pair if a})
    rng = random.Random(5)
    records = [typical_record(rng) for _ in range(BATCH)]
    outs = [rng.choice(("ALLOW", "ALLOW", "ALLOW", "REVIEW", "HOLD", "BLOCK")) for _ in range(BATCH)]
    rules = [canonical_bytes(rng.sample(["R1", "R2", "R3", "R4"], rng.randint(0, 2))) for _ in range(BATCH)]
    keyer = AccountKeyer(secrets.token_bytes(32))

    def first(batch: list[tuple[str | None, str | None]]) -> Callable[[], list[list[str]]]:
        def run() -> list[list[str]]:
            keyer._seen.clear()
            iban_or_none.cache_clear()
            return [keyer.keys(a) for a in batch]
        return run

    keys = first(accounts)()
    cold_us = _best_us(first(new), BATCH)
    first_us = _best_us(first(accounts), BATCH)
    keys = first(accounts)()
    warm_us = _best_us(lambda: [keyer.keys(a) for a in accounts], BATCH)
    array_us = _best_us(lambda: entries_jcs(outs, rules, keys), BATCH)
    record_us = _best_us(lambda: [canonical_bytes(r) for r in records], BATCH)
    size = len(entries_jcs(outs, rules, keys)) / BATCH
    total = cold_us + array_us
    print(f"batch {BATCH}: account keys {cold_us:.2f} us/decision cold ({distinct:,} distinct accounts), "
          f"{first_us:.2f} a first batch of 400 accounts, {warm_us:.2f} warm; decisions array "
          f"{array_us:.2f} us; {size:.0f} bytes/decision sealed in the summary")
    print(f"summary, cold keys: {total:.2f} us/decision; baseline canonical_bytes of the decision record "
          f"{record_us:.2f} us/decision; ratio {total / record_us:.2f}x")
    print(f"CPU probe: {probe:.1f} ms before, {probe_ms():.1f} ms after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
