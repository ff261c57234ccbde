"""Same payments in the same order give the same values and the same state bytes, whatever the
batching, the hash seed (``PYTHONHASHSEED``) of the process or the order accounts were flagged in."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]

# A seeded stream with cycles, fan-in, late payments inside the tolerance and flags set as it goes;
# prints the SHA-256 of every value and of the state bytes. Run here and in child processes.
_RUN = r"""
import hashlib, json, random, sys
from inference.graph import GraphConfig, GraphFeatures

def run(batch):
    rng = random.Random(2026)
    gf = GraphFeatures(GraphConfig(cycle_hops=5, node_cap=64, global_cap=3000, late_us=60_000_000,
                                   window_us=3 * 86_400_000_000, scatter_us=86_400_000_000))
    names = [f"AC{i:03d}-" + "x" * (i % 7) for i in range(300)]
    t = 1_767_225_600_000_000
    payments = []
    for i in range(6000):
        t += rng.randrange(120_000_000)
        late = rng.randrange(50_000_000) if rng.random() < 0.05 else 0
        payments.append((rng.choice(names[:40] if i % 3 else names), rng.choice(names), t - late,
                         rng.randrange(1, 5_000_000)))
    h = hashlib.sha256()
    for start in range(0, len(payments), 700):  # a flag after every 700 payments, as a BLOCK would set
        part = payments[start:start + 700]
        for i in range(0, len(part), batch):
            for row in gf.observe_many(part[i:i + batch]):
                h.update(repr(row).encode())
        gf.flag(part[-1][1])
    return h.hexdigest(), hashlib.sha256(gf.state_bytes()).hexdigest(), gf.graph.edges_held

if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]))))
"""


def _child(seed: str, batch: int) -> list[object]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run([sys.executable, "-c", _RUN, str(batch)], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    got: list[object] = json.loads(out.stdout)
    return got


def _here(batch: int) -> list[object]:
    scope: dict[str, object] = {"__name__": "graph_determinism"}
    exec(compile(_RUN, "graph_determinism", "exec"), scope)  # the child's own code, run here
    run = scope["run"]
    return list(run(batch))  # type: ignore[operator]


def test_same_values_and_state_under_other_hash_seeds_and_batchings() -> None:
    here = _here(1024)
    assert here[2] == 3000  # the global cap was reached: the stream is not trivial
    assert _here(1) == here
    assert _here(7) == here
    assert _child("0", 1024) == here
    assert _child("987654321", 333) == here


def test_state_bytes_differ_when_one_payment_differs() -> None:
    from inference.graph import GraphFeatures

    a, b = GraphFeatures(), GraphFeatures()
    for gf, cents in ((a, 100), (b, 101)):
        gf.observe("A", "B", 1, 100)
        gf.observe("B", "C", 2, cents)
    assert hashlib.sha256(a.state_bytes()).digest() != hashlib.sha256(b.state_bytes()).digest()
