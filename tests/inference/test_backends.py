"""Backends: parity with the numpy reference, the ONNX binding, clear refusals when a library or
device is missing, and (marked ``gpu``) the CuPy and TensorRT backends on a real GPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference.backends import (
    BACKENDS,
    Backend,
    BackendClosedError,
    UnknownBackendError,
    available_backends,
    load_backend,
)
from inference.backends.cupy_backend import forward_xp, upload
from inference.backends.tensorrt_backend import engine_cache_key
from inference.errors import BackendUnavailableError, ModelError
from inference.model import MlpModel, forward, save_npz, sha256_file, to_onnx_bytes
from tests.inference.test_model import FEATURE_NAMES, FEATURE_SCHEMA, fitted_model, hostile_rows

PARITY = 1e-5  # onnxruntime and CuPy against numpy, max absolute difference
FP16_PARITY = 1e-2  # TensorRT FP16 keeps preprocessing in FP32; the matrix products are FP16
INT8_PARITY = 5e-2
BATCHES = (0, 1, 7, 64, 1024)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """The fitted model's weights file and its ONNX export, on disk."""
    model = fitted_model()
    save_npz(model, tmp_path / "weights.npz")
    (tmp_path / "model.onnx").write_bytes(to_onnx_bytes(model))
    return tmp_path / "weights.npz", tmp_path / "model.onnx"


def reference(model: MlpModel, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    with np.errstate(over="ignore"):
        return forward(model, rows)


def max_diff(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == np.float64
    return float(np.abs(a - b).max(initial=0.0))


# ---------------------------------------------------------------- CPU: parity

@pytest.mark.parametrize("n", BATCHES)
def test_onnxruntime_matches_numpy_on_hostile_rows(files: tuple[Path, Path], n: int) -> None:
    rows = hostile_rows(np.random.default_rng(n), n)
    with load_backend("numpy", files[0]) as ref, load_backend("onnxruntime", *files) as ort:
        assert max_diff(ort.predict(rows), ref.predict(rows)) <= PARITY


@pytest.mark.parametrize("sizes", [(32, 32, 16, 1), (32, 64, 1), (32, 1)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_onnxruntime_matches_numpy_for_random_models(tmp_path: Path, sizes: tuple[int, ...],
                                                     seed: int) -> None:
    rng = np.random.default_rng(seed)
    model = MlpModel.init(rng, sizes, FEATURE_NAMES, log_mask=rng.random(32) < 0.4, mean=rng.normal(0, 2, 32),
                          scale=rng.uniform(0.05, 3, 32), feature_schema=FEATURE_SCHEMA)
    save_npz(model, tmp_path / "w.npz")
    rows = hostile_rows(rng, 2048)
    with load_backend("onnxruntime", tmp_path / "w.npz") as ort:  # no ONNX file: exported in memory
        assert max_diff(ort.predict(rows), reference(model, rows)) <= PARITY


def test_onnxruntime_threads_do_not_change_scores(files: tuple[Path, Path]) -> None:
    rows = hostile_rows(np.random.default_rng(9), 4096)
    with load_backend("onnxruntime", *files) as one, \
            load_backend("onnxruntime", *files, intra_op_threads=2) as two:
        assert max_diff(one.predict(rows), two.predict(rows)) <= PARITY


@pytest.mark.parametrize("n", BATCHES)
def test_gpu_maths_run_on_numpy_equal_the_reference(n: int) -> None:
    """The CuPy backend's code path, with numpy as the array module."""
    model = fitted_model()
    rows = hostile_rows(np.random.default_rng(n), n)
    with np.errstate(over="ignore"):
        got = forward_xp(np, upload(model, np), rows.astype(np.float32)).astype(np.float64)
    assert max_diff(got, reference(model, rows)) <= PARITY


# ---------------------------------------------------------------- CPU: the interface

@pytest.mark.parametrize("name", ["numpy", "onnxruntime"])
def test_backend_names_itself_and_the_weights_it_runs(files: tuple[Path, Path], name: str) -> None:
    with load_backend(name, *files) as backend:
        assert isinstance(backend, Backend)
        assert backend.name == name
        assert backend.model_sha256 == sha256_file(files[0])
        assert backend.predict(np.zeros((0, 32))).shape == (0,)
        one = backend.predict(hostile_rows(np.random.default_rng(0), 1))
        assert one.shape == (1,) and one.dtype == np.float64


@pytest.mark.parametrize("name", ["numpy", "onnxruntime"])
@pytest.mark.parametrize("shape", [(3, 31), (3, 33), (32,), (1, 2, 32)])
def test_predict_refuses_rows_of_the_wrong_width(files: tuple[Path, Path], name: str,
                                                 shape: tuple[int, ...]) -> None:
    with load_backend(name, *files) as backend, pytest.raises(ModelError, match=r"shape \(N, 32\)"):
        backend.predict(np.zeros(shape))


@pytest.mark.parametrize("name", ["numpy", "onnxruntime"])
def test_a_closed_backend_refuses_to_score(files: tuple[Path, Path], name: str) -> None:
    backend = load_backend(name, *files)
    backend.close()
    backend.close()  # closing twice is harmless
    with pytest.raises(BackendClosedError, match=f"the {name} backend is closed"):
        backend.predict(np.zeros((1, 32)))


def test_onnxruntime_refuses_an_onnx_file_from_other_weights(files: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    other = tmp_path / "other.onnx"
    other.write_bytes(to_onnx_bytes(fitted_model(seed=8)))
    with pytest.raises(ModelError, match="ONNX file was exported from weights"):
        load_backend("onnxruntime", files[0], other)


def test_load_backend_refuses_missing_files(files: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot read weights file"):
        load_backend("numpy", tmp_path / "absent.npz")
    with pytest.raises(ModelError, match="cannot read ONNX file"):
        load_backend("onnxruntime", files[0], tmp_path / "absent.onnx")


def test_unknown_backend_names_the_valid_ones(files: tuple[Path, Path]) -> None:
    with pytest.raises(UnknownBackendError, match="unknown backend 'torch'; choose one of numpy, "
                                                  "onnxruntime, tensorrt, cupy"):
        load_backend("torch", *files)
    assert issubclass(UnknownBackendError, ValueError)


@pytest.mark.parametrize(("name", "module", "hint"), [
    ("tensorrt", "tensorrt", "TensorRT not installed: pip install 'sealtrail[tensorrt]'"),
    ("cupy", "cupy", "CuPy is not installed: pip install 'sealtrail[gpu]'"),
    ("onnxruntime", "onnxruntime", "onnxruntime is not installed: pip install 'sealtrail[onnx]'"),
])
def test_a_missing_library_is_a_clear_refusal_with_the_install_hint(
        files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, name: str, module: str, hint: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed, on any machine
    with pytest.raises(BackendUnavailableError, match=f"backend '{name}' is unavailable: {hint}".replace(
            "[", r"\[").replace("]", r"\]")):
        load_backend(name, *files)
    assert available_backends()[name] is not None


def test_tensorrt_refuses_clearly_on_this_machine_when_it_cannot_run(files: tuple[Path, Path]) -> None:
    """Not a skip: where TensorRT or a GPU is missing, asking for it says which and how to fix it."""
    reason = available_backends()["tensorrt"]
    if reason is None:
        pytest.skip("TensorRT and a GPU are present here; the GPU tests below cover it")
    with pytest.raises(BackendUnavailableError, match="backend 'tensorrt' is unavailable: ") as err:
        load_backend("tensorrt", *files)
    assert "sealtrail[tensorrt]" in str(err.value) or "GPU" in str(err.value)


def test_available_backends_lists_every_backend_and_numpy_always_runs() -> None:
    found = available_backends()
    assert tuple(found) == BACKENDS
    assert found["numpy"] is None


def test_engine_cache_key_changes_with_everything_that_changes_an_engine() -> None:
    base: dict[str, Any] = {"model_sha256": "ab" * 32, "gpu": "NVIDIA H100", "compute_capability": "90",
                            "trt_version": "10.3.0", "precision": "fp16", "buckets": (1, 8, 64)}
    key = engine_cache_key(**base)
    assert len(key) == 64 and key == engine_cache_key(**base)
    for field, other in [("model_sha256", "cd" * 32), ("gpu", "NVIDIA L4"), ("compute_capability", "89"),
                         ("trt_version", "10.4.0"), ("precision", "int8"), ("buckets", (1, 8))]:
        assert engine_cache_key(**{**base, field: other}) != key, field
    assert engine_cache_key(**base, calibration_sha256="ef" * 32) != key


# ---------------------------------------------------------------- GPU (skipped without one)

def need(name: str) -> None:
    reason = available_backends()[name]
    if reason is not None:
        pytest.skip(f"no CUDA GPU: {reason}" if name == "cupy" else reason)


@pytest.mark.gpu
@pytest.mark.parametrize("n", (*BATCHES, 5000))
def test_cupy_matches_numpy_on_the_gpu(files: tuple[Path, Path], n: int) -> None:
    need("cupy")
    rows = hostile_rows(np.random.default_rng(n), n)
    with load_backend("numpy", files[0]) as ref, load_backend("cupy", files[0]) as gpu:
        assert gpu.name == "cupy" and gpu.model_sha256 == ref.model_sha256
        assert max_diff(gpu.predict(rows), ref.predict(rows)) <= PARITY


@pytest.mark.gpu
@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", PARITY), ("fp16", FP16_PARITY)])
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_tensorrt_matches_numpy_on_the_gpu(files: tuple[Path, Path], tmp_path: Path, precision: str,
                                           tolerance: float, cuda_graph: bool) -> None:
    need("tensorrt")
    rows = hostile_rows(np.random.default_rng(5), 3000)  # above the largest bucket: scored in slices
    with load_backend("numpy", files[0]) as ref, load_backend(
            "tensorrt", *files, precision=precision, cuda_graph=cuda_graph, cache_dir=tmp_path / "e") as trt:
        want = ref.predict(rows)
        for n in (*BATCHES, 100, 3000):  # 100 lies between buckets: padded up to 256
            assert max_diff(trt.predict(rows[:n]), want[:n]) <= tolerance, n


@pytest.mark.gpu
def test_tensorrt_engine_cache_is_reused_and_keyed_by_model(files: tuple[Path, Path], tmp_path: Path) -> None:
    need("tensorrt")
    cache = tmp_path / "engines"
    with load_backend("tensorrt", *files, cache_dir=cache) as first:
        assert not first.engine_cache_hit  # type: ignore[attr-defined]
    with load_backend("tensorrt", *files, cache_dir=cache) as second:
        assert second.engine_cache_hit  # type: ignore[attr-defined]
    save_npz(fitted_model(seed=8), tmp_path / "other.npz")
    with load_backend("tensorrt", tmp_path / "other.npz", cache_dir=cache) as other:
        assert not other.engine_cache_hit  # type: ignore[attr-defined]
    assert len(list(cache.glob("*.engine"))) == 2


@pytest.mark.gpu
def test_tensorrt_int8_with_calibration_stays_close_to_numpy(files: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    need("tensorrt")
    calib = hostile_rows(np.random.default_rng(20), 4096)
    rows = hostile_rows(np.random.default_rng(21), 2048)
    with load_backend("numpy", files[0]) as ref, load_backend(
            "tensorrt", *files, precision="int8", calibration_rows=calib, cache_dir=tmp_path) as trt:
        assert max_diff(trt.predict(rows), ref.predict(rows)) <= INT8_PARITY
