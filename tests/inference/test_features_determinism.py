"""Feature rows do not depend on the CPU (DESIGN.md invariant 10): the same payments give the same
``features_sha256``, row for row, whether numpy may use its SIMD kernels (AVX2, AVX-512) or is
limited to the baseline instruction set, as on an examiner's older laptop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]

# Simulated traffic (velocity windows, FX, country risk) and the public sample messages (findings,
# data-quality columns), extracted in file order at fixed times; prints the SIMD kernels numpy
# could dispatch to and every row's hash.
_CHILD = r"""
import json, sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
from inference.features import FeatureExtractor, features_sha256
from inference.messages import Transaction, parse_messages
from inference.simulate import SimConfig, simulate

sims = simulate(SimConfig(seed=11, n_normal=3000, n_accounts=300, days=4))
txs = [s.transaction for s in sims]
ats = [s.at for s in sims]
t0 = datetime(2026, 12, 1, tzinfo=UTC)
for i, p in enumerate(sorted(Path(sys.argv[1]).rglob("*"))):
    kept = p.suffix in (".fin", ".txt", ".xml", ".rje", ".dos", ".json") and p.name != "expected.json"
    if p.is_file() and kept:
        for t in parse_messages(p.read_bytes(), "auto"):
            if isinstance(t, Transaction):
                txs.append(t)
                ats.append(t0 + timedelta(minutes=i))
rows = FeatureExtractor().extract(txs, ats)
print(json.dumps({"simd": [f for f in __cpu_dispatch__ if __cpu_features__.get(f)],
                  "with_findings": sum(bool(t.findings) for t in txs),
                  "rows": [features_sha256(r) for r in rows]}))
"""


def _run(env_extra: dict[str, str]) -> dict[str, object]:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT / "tests" / "vectors" / "public")],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True, timeout=600)
    doc: dict[str, object] = json.loads(out.stdout)
    return doc


def test_feature_hashes_are_the_same_with_and_without_simd_kernels() -> None:
    full = _run({})
    baseline = _run({"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR AVX2 AVX512F"})
    assert baseline["simd"] == []  # numpy really ran without its dispatched kernels
    assert isinstance(full["rows"], list) and len(full["rows"]) > 3000
    assert isinstance(full["with_findings"], int) and full["with_findings"] > 50
    assert full["rows"] == baseline["rows"]
