"""GPU benchmark: each GPU backend's parity with numpy and its latency per batch size.

For CuPy and TensorRT (FP16, FP16 with CUDA graphs, INT8 with ``--int8``) it prints the largest
absolute score difference from the numpy reference on a seeded set of rows (NaN, zeros and huge
values included), then call latency p50 / p99 and rows/s at batch 1, 64, 1024 and 4096, next
to numpy (and onnxruntime on the CPU) timed in the same run. A call is the whole ``predict``:
host-to-device copy, inference, copy back. Where there is no GPU it says why, prints the CPU
baseline and exits 0. Run from the repository root:
``python -m bench.gpu [--weights P] [--onnx P] [--int8] [--seconds S] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.gpu")

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import host_info, version_of
from bench.report import percentile, write_json
from inference.backends import Backend, cupy_backend, onnxruntime_backend, tensorrt_backend
from inference.backends.numpy_backend import NumpyBackend
from inference.model import MlpModel, check_onnx_matches, load_npz, sha256_hex, to_onnx_bytes

DEFAULT_WEIGHTS = Path("inference/models/aml_mlp/weights.npz")
DEFAULT_ONNX = Path("inference/models/aml_mlp/model.onnx")
BATCH_SIZES = (1, 64, 1024, 4096)
SEED = 20240611
PARITY_ROWS = 65_536
TOLERANCE = {"cupy": 1e-5, "tensorrt fp32": 1e-5, "tensorrt fp16": 1e-2, "tensorrt fp16 graph": 1e-2,
             "tensorrt int8": 5e-2}


@dataclass(frozen=True)
class Cell:
    """One backend at one batch size: every timed call."""

    backend: str
    batch: int
    calls: int
    rows: int
    seconds: float
    p50_us: float
    p99_us: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__)
    ap.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS, help="weights file (.npz)")
    ap.add_argument("--onnx", type=Path, default=DEFAULT_ONNX, help="its ONNX export")
    ap.add_argument("--int8", action="store_true", help="also build and time a TensorRT INT8 engine")
    ap.add_argument("--seconds", type=float, default=1.0, help="time spent per cell (default 1.0)")
    ap.add_argument("--engine-cache", type=Path, default=None,
                    help="TensorRT engine cache (default: a fresh temporary folder, so builds are timed)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return ap.parse_args(argv)


def gpu_info() -> list[str]:
    """Each GPU as nvidia-smi names it (name, driver, memory), or [] where there is none."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        out = subprocess.run(query, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    pkgs = {d: version_of(d) for d in ("numpy", "onnxruntime", "cupy-cuda12x", "cupy", "tensorrt")}
    return {**host_info(), "gpus": gpu_info(), "packages": {k: v for k, v in pkgs.items()
                                                            if v != "missing" or k in ("numpy", "tensorrt")}}


def load_model(weights: Path, onnx_path: Path) -> tuple[MlpModel, str, bytes, str]:
    """The shipped model (or, where it is absent, a seeded random one) with its ONNX export."""
    if weights.exists():
        data = weights.read_bytes()
        model = load_npz(data)
        if onnx_path.exists():
            onnx_bytes = onnx_path.read_bytes()
            check_onnx_matches(model, onnx_bytes)
            return model, sha256_hex(data), onnx_bytes, f"{weights} + {onnx_path}"
        return model, sha256_hex(data), to_onnx_bytes(model), f"{weights} (ONNX exported in memory)"
    model = MlpModel.init(np.random.default_rng(SEED), (32, 32, 16, 1))
    note = f"{weights} not found: a random (32, 32, 16, 1) model from seed {SEED}, ONNX exported in memory"
    return model, "", to_onnx_bytes(model), note


def sample_rows(model: MlpModel, n: int, seed: int) -> np.ndarray[Any, Any]:
    """Feature-like rows: heavy-tailed on the log-masked columns; 2 % NaN, 2 % zero, 0.1 % huge."""
    rng = np.random.default_rng(seed)
    x = np.where(model.log_mask, rng.lognormal(3.0, 2.5, (n, model.n_features)),
                 rng.normal(0.3, 1.0, (n, model.n_features)))
    u = rng.random(x.shape)
    x[u < 0.02] = np.nan
    x[(u >= 0.02) & (u < 0.04)] = 0.0
    x[(u >= 0.04) & (u < 0.041)] = 1e30
    return x


def measure(name: str, predict: Callable[[np.ndarray[Any, Any]], object], pool: np.ndarray[Any, Any],
            batch: int, seconds: float) -> Cell:
    """Call ``predict`` on successive slices of ``pool`` for ``seconds`` (after a short warm-up)."""
    batches = [pool[i: i + batch] for i in range(0, len(pool) - batch + 1, batch)]
    for b in batches[: max(3, 256 // batch)]:
        predict(b)
    clock = time.perf_counter_ns
    durations: list[int] = []
    deadline = clock() + int(seconds * 1e9)
    i = 0
    while True:
        t0 = clock()
        predict(batches[i])
        t1 = clock()
        durations.append(t1 - t0)
        i = (i + 1) % len(batches)
        if t1 >= deadline and len(durations) >= 20:
            break
    us = [d / 1000 for d in durations]
    return Cell(name, batch, len(us), batch * len(us), sum(durations) / 1e9,
                percentile(us, 50), percentile(us, 99))


def candidates(model: MlpModel, sha: str, onnx: bytes, args: argparse.Namespace, cache: Path,
               calib: np.ndarray[Any, Any]) -> list[tuple[str, Callable[[], Backend], str | None]]:
    """(label, factory, reason it cannot run here or None) for every backend compared with numpy."""
    sha_or_none = sha or None
    ort_reason = onnxruntime_backend.unavailable_reason()
    cupy_reason = cupy_backend.unavailable_reason()
    trt_reason = tensorrt_backend.unavailable_reason()

    def trt(precision: str, graph: bool = False) -> Callable[[], Backend]:
        return lambda: tensorrt_backend.TensorRTBackend(
            model, sha_or_none, onnx, precision=precision, cuda_graph=graph, cache_dir=cache,
            calibration_rows=calib if precision == "int8" else None)

    out: list[tuple[str, Callable[[], Backend], str | None]] = [
        ("onnxruntime (CPU)", lambda: onnxruntime_backend.OnnxRuntimeBackend(model, sha_or_none, onnx),
         ort_reason),
        ("cupy", lambda: cupy_backend.CupyBackend(model, sha_or_none), cupy_reason),
        ("tensorrt fp32", trt("fp32"), trt_reason),
        ("tensorrt fp16", trt("fp16"), trt_reason),
        ("tensorrt fp16 graph", trt("fp16", graph=True), trt_reason),
    ]
    if args.int8:
        out.append(("tensorrt int8", trt("int8"), trt_reason))
    return out


def grid(cells: Sequence[Cell], base: dict[int, Cell]) -> str:
    """Every cell as an aligned table, with its speed relative to numpy at the same batch size."""
    head = ("backend", "batch", "p50 us", "p99 us", "rows/s", "vs numpy", "calls")
    body = [(c.backend, str(c.batch), f"{c.p50_us:,.1f}", f"{c.p99_us:,.1f}", f"{c.rows_per_s:,.0f}",
             f"{c.rows_per_s / base[c.batch].rows_per_s:,.2f}x", f"{c.calls:,}") for c in cells]
    widths = [max(len(r[i]) for r in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                       for i, (v, w) in enumerate(zip(r, widths, strict=True))) for r in (head, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the machine, then parity and latency for every backend that can run here."""
    args = parse_args(argv)
    machine = machine_info()
    print(f"CPU:        {machine['cpu']} ({machine['cores']} cores), {machine['ram_gib']} GiB")
    print(f"OS:         {machine['os']}; Python {machine['python']}")
    print(f"GPU:        {'; '.join(machine['gpus']) or 'none (nvidia-smi absent or sees no GPU)'}")
    print("Packages:   " + ", ".join(f"{k} {v}" for k, v in machine["packages"].items()))
    model, sha, onnx, note = load_model(args.weights, args.onnx)
    print(f"Model:      {note}; sizes {model.sizes}; sha256 {sha or '(random model, no file)'}")
    parity_rows = sample_rows(model, PARITY_ROWS, SEED)
    pool = sample_rows(model, 4 * max(BATCH_SIZES), SEED + 1)
    print(f"Rows:       parity on {PARITY_ROWS:,} seeded rows (seed {SEED}); timing pool {len(pool):,} rows; "
          f"{args.seconds:g} s per cell\n")

    numpy_backend = NumpyBackend(model, sha or None)
    with np.errstate(over="ignore"):
        want = numpy_backend.predict(parity_rows)
    cells = [measure("numpy", numpy_backend.predict, pool, b, args.seconds) for b in BATCH_SIZES]
    base = {c.batch: c for c in cells}
    parity: dict[str, Any] = {}
    gpu_ran = False
    with tempfile.TemporaryDirectory(prefix="sealtrail-trt-") as tmp:
        cache = args.engine_cache or Path(tmp)
        for label, factory, reason in candidates(model, sha, onnx, args, cache, parity_rows[:8192]):
            if reason is not None:
                print(f"{label}: not run: {reason}")
                parity[label] = {"ran": False, "reason": reason}
                continue
            t0 = time.perf_counter()
            backend = factory()
            start_s = time.perf_counter() - t0
            try:
                diff = float(np.abs(backend.predict(parity_rows) - want).max())
                tol = TOLERANCE.get(label)
                verdict = "" if tol is None else f" (bound {tol:g}: {'met' if diff <= tol else 'NOT MET'})"
                print(f"{label}: max |score - numpy| = {diff:.3e}{verdict}; start-up {start_s:.2f} s")
                parity[label] = {"ran": True, "max_abs_diff": diff, "bound": tol, "startup_s": start_s}
                cells += [measure(label, backend.predict, pool, b, args.seconds) for b in BATCH_SIZES]
                gpu_ran = gpu_ran or label != "onnxruntime (CPU)"
            finally:
                backend.close()
    print()
    if not gpu_ran:
        print("No GPU backend ran on this machine (reasons above): GPU parity and latency were NOT measured; "
              "the CPU baseline follows.\n")
    print(grid(cells, base))
    if args.json is not None:
        write_json(args.json, {
            "machine": machine, "model": {"note": note, "sha256": sha, "sizes": model.sizes},
            "seed": SEED, "parity_rows": PARITY_ROWS, "parity": parity, "seconds_per_cell": args.seconds,
            "gpu_measured": gpu_ran, "cells": [{**asdict(c), "rows_per_s": c.rows_per_s} for c in cells]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
