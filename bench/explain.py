"""Reason codes' cost: integrated-gradient attributions and reason codes per decision, beside the
model's own forward pass in the same run (the same-run baseline), and the share of decisions of
normal simulated traffic that carry an explanation (``audit.decide.explanation``).

Run: ``python -m bench.explain`` (``--batch N``, ``--rows N``). Prints the machine, each figure in
microseconds per row (best of several passes), and the ratio to the forward pass.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np

from audit.decide.explanation import explain_decisions, is_explained
from bench.machine import host_info, probe_ms
from inference.explain import explain, reasons
from inference.features import FeatureExtractor
from inference.model import ModelFiles, forward, load_npz
from inference.simulate import SimConfig, simulate


def _best_us(fn: Callable[[], object], n: int, passes: int = 5) -> float:
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e6 / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.explain", description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1024, help="rows per call (default 1,024, the pipeline's)")
    ap.add_argument("--rows", type=int, default=20_000, help="simulated payments for the share explained")
    args = ap.parse_args(argv)
    info = host_info()
    print(f"CPU: {info['cpu']} ({info['cores']} cores), Python {info['python']}")
    print(f"CPU probe: {probe_ms():.1f} ms before")
    model = load_npz(ModelFiles.open().weights_path.read_bytes())
    sims = simulate(SimConfig(seed=31, n_normal=args.rows, n_accounts=max(100, args.rows // 10), days=30))
    rows = FeatureExtractor().extract([s.transaction for s in sims], [s.at for s in sims])
    x = rows[:args.batch, :model.n_features]
    n = len(x)
    fwd = _best_us(lambda: forward(model, x), n)
    attr = explain(model, x)
    ig = _best_us(lambda: explain(model, x), n)
    words = _best_us(lambda: [reasons(model.feature_names, x[i], attr[i]) for i in range(n)], n)
    print(f"batch {n}: forward {fwd:.2f} us/row (baseline); attributions {ig:.2f} us/row "
          f"({ig / fwd:.1f}x); reason codes {words:.2f} us/row")
    scores = forward(model, rows[:, :model.n_features])
    normal = np.array([s.label == 0 for s in sims])
    share = np.mean([is_explained(float(s), "ALLOW") for s in scores[normal]])
    # the step on normal payments only (the traffic's laundering ones are explained far more often)
    plain_rows, plain_scores = rows[normal][:n], scores[normal][:n]
    m = len(plain_rows)
    pipe = _best_us(lambda: explain_decisions(model, plain_rows, plain_scores.tolist(), ["ALLOW"] * m), m)
    print(f"simulated traffic ({int(normal.sum()):,} normal payments of {len(rows):,}, 30 days): "
          f"{share:.2%} of the normal ones scored 0.5 or more; the pipeline's explanation step on its "
          f"first {m} normal payments {pipe:.2f} us/decision ({pipe / fwd:.2f}x the forward pass)")
    print(f"CPU probe: {probe_ms():.1f} ms after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
