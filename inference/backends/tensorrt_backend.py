"""The TensorRT backend: an FP16 (optionally INT8) engine built from the model's ONNX export.

NOT RUN YET. This module is written against the documented TensorRT 10 Python API and CuPy
(for device memory, pinned host memory, the stream and CUDA graphs). The machine it was
written on has no GPU and no TensorRT: here it has only been imported, type-checked, and run
as far as refusing to start (``BackendUnavailableError``: TensorRT not installed). A first GPU
run must check, with ``pytest -m gpu`` and ``python -m bench.gpu``:

* the ONNX export parses and the engine builds (FP16; INT8 with calibration rows);
* parity with numpy on rows with NaN, zeros and huge values (FP16 tolerance 1e-2, FP32 1e-5);
* the engine cache is hit on the second start (no rebuild) and missed for another model;
* CUDA-graph replay returns the same scores as plain ``execute_async_v3``;
* batches of 0, 1, a bucket size, a size between buckets and above the largest bucket.

Design: one optimization profile per batch-size bucket (min = opt = max = the bucket), one
execution context per bucket with its shape fixed once, and pinned host plus device buffers
per bucket allocated at start, so a request allocates nothing; a request is padded up to its
bucket, and one larger than the largest bucket is scored in slices. The preprocessing layers
(NaN fill, log, standardise, clip) are pinned to FP32, so FP16 applies to the matrix products
only. Engines are cached on disk, keyed by model SHA-256, GPU, compute capability, TensorRT
version, precision and buckets (and the calibration rows, for INT8). INT8 uses TensorRT's
calibrator API (implicit quantization), which TensorRT 10 deprecates in favour of explicit
Q/DQ nodes but still supports.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.backends import BackendBase
from inference.errors import BackendUnavailableError, InferenceError, ModelError
from inference.model import (
    INPUT_NAME,
    OUTPUT_NAME,
    MlpModel,
    check_onnx_matches,
    check_rows,
    sha256_hex,
    to_onnx_bytes,
)

__all__ = ["DEFAULT_BUCKETS", "PRECISIONS", "TensorRTBackend", "default_cache_dir", "engine_cache_key",
           "open_backend", "unavailable_reason"]

INSTALL_HINT = ("pip install 'sealtrail[tensorrt]' (NVIDIA's wheels; they need a CUDA 12 driver "
                "and may need --extra-index-url https://pypi.nvidia.com)")
DEFAULT_BUCKETS = (1, 8, 64, 256, 1024)
PRECISIONS = ("fp32", "fp16", "int8")


def unavailable_reason() -> str | None:
    """None when TensorRT imports and CuPy sees a CUDA device, else why not."""
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return f"TensorRT not installed: {INSTALL_HINT}"
    except Exception as e:  # the wheel is there but its CUDA libraries are not
        return f"TensorRT failed to load ({e})"
    from inference.backends.cupy_backend import unavailable_reason as cupy_reason

    reason = cupy_reason()
    return None if reason is None else f"the TensorRT backend needs CuPy and a GPU: {reason}"


def default_cache_dir() -> Path:
    """Where engines are kept: $SEALTRAIL_TRT_CACHE, else ~/.cache/sealtrail/tensorrt."""
    if env := os.environ.get("SEALTRAIL_TRT_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sealtrail" / "tensorrt"


def engine_cache_key(*, model_sha256: str, gpu: str, compute_capability: str, trt_version: str,
                     precision: str, buckets: tuple[int, ...], calibration_sha256: str | None = None) -> str:
    """The engine file's name (hex SHA-256 over everything that makes an engine differ)."""
    doc = {"model_sha256": model_sha256, "gpu": gpu, "compute_capability": compute_capability,
           "tensorrt": trt_version, "precision": precision, "buckets": list(buckets),
           "calibration_sha256": calibration_sha256, "format": "sealtrail.trt-engine/1"}
    return sha256_hex(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


@dataclass
class _Bucket:
    """Everything one batch size needs, allocated once: context, pinned and device buffers, graph."""

    size: int
    context: Any
    host_in: npt.NDArray[np.float32]
    host_out: npt.NDArray[np.float32]
    dev_in: Any
    dev_out: Any
    pinned: tuple[Any, Any]  # keeps the pinned allocations behind host_in / host_out alive
    graph: Any = None


def _pinned(cupy: Any, shape: tuple[int, int]) -> tuple[npt.NDArray[np.float32], Any]:
    count = shape[0] * shape[1]
    mem = cupy.cuda.alloc_pinned_memory(count * 4)
    return np.frombuffer(mem, np.float32, count).reshape(shape), mem


def _make_calibrator(trt: Any, cupy: Any, rows32: npt.NDArray[np.float32], batch: int,
                     cache_path: Path) -> Any:
    """An entropy calibrator (TensorRT's IInt8EntropyCalibrator2) fed ``rows32`` in batches."""

    class _Calibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]  # tensorrt is untyped: its base is Any
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batch, self._next = batch, 0
            self._dev = cupy.empty((batch, rows32.shape[1]), cupy.float32)

        def get_batch_size(self) -> int:
            return self.batch

        def get_batch(self, names: list[str]) -> list[int] | None:
            if self._next + self.batch > len(rows32):
                return None
            self._dev.set(rows32[self._next: self._next + self.batch])  # synchronous copy
            self._next += self.batch
            return [int(self._dev.data.ptr)]

        def read_calibration_cache(self) -> bytes | None:
            return cache_path.read_bytes() if cache_path.exists() else None

        def write_calibration_cache(self, cache: Any) -> None:
            cache_path.write_bytes(bytes(cache))

    return _Calibrator()


def _pin_preprocessing_fp32(trt: Any, network: Any) -> None:
    """Ask for FP32 in every layer before the first matrix product (the features' raw range
    overflows FP16); layers with non-float outputs (IsNaN's bool) are left alone."""
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type == trt.LayerType.MATRIX_MULTIPLY:
            return
        outs = [layer.get_output(j) for j in range(layer.num_outputs)]
        if all(t.dtype == trt.float32 for t in outs):
            layer.precision = trt.float32
            for j in range(layer.num_outputs):
                layer.set_output_type(j, trt.float32)


def _build(trt: Any, logger: Any, onnx_bytes: bytes, n: int, buckets: tuple[int, ...], precision: str,
           calibrator: Any, workspace_bytes: int) -> bytes:
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ModelError(f"TensorRT could not parse the ONNX export: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if precision in ("fp16", "int8"):
        config.set_flag(trt.BuilderFlag.FP16)
        _pin_preprocessing_fp32(trt, network)
        config.set_flag(trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS)
    if precision == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
    for b in buckets:
        profile = builder.create_optimization_profile()
        profile.set_shape(INPUT_NAME, (b, n), (b, n), (b, n))
        config.add_optimization_profile(profile)
        if calibrator is not None and b == calibrator.batch:
            config.set_calibration_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ModelError("TensorRT failed to build an engine from the ONNX export (see its log)")
    return bytes(serialized)


class TensorRTBackend(BackendBase):
    """Scores on a TensorRT engine; see the module docstring for what has and has not been run.

    ``precision`` is "fp16" (default), "fp32" or "int8" (then ``calibration_rows``, float64
    feature rows, are required). ``cuda_graph`` captures one CUDA graph per bucket at start.
    """

    name = "tensorrt"

    def __init__(self, model: MlpModel, model_sha256: str | None = None, onnx_bytes: bytes | None = None,
                 *, precision: str = "fp16", calibration_rows: npt.ArrayLike | None = None,
                 buckets: tuple[int, ...] = DEFAULT_BUCKETS, cache_dir: str | Path | None = None,
                 cuda_graph: bool = False, device: int = 0, workspace_bytes: int = 1 << 28) -> None:
        if (reason := unavailable_reason()) is not None:
            raise BackendUnavailableError(reason)
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
        if not buckets or list(buckets) != sorted(set(buckets)) or buckets[0] < 1:
            raise ValueError(f"buckets must be distinct positive sizes in increasing order; got {buckets}")
        import cupy
        import tensorrt as trt

        if onnx_bytes is None:
            onnx_bytes = to_onnx_bytes(model)
        else:
            check_onnx_matches(model, onnx_bytes)
        super().__init__(model, model_sha256)
        self.precision, self.buckets, self.cuda_graph = precision, tuple(buckets), cuda_graph
        self._cp, self._lock = cupy, threading.Lock()
        self._device: Any = cupy.cuda.Device(device)
        self._logger: Any = trt.Logger(trt.Logger.WARNING)  # must outlive runtime and engine
        with self._device:
            self._stream: Any = cupy.cuda.Stream(non_blocking=True)
            blob = self._engine_bytes(trt, cupy, onnx_bytes, calibration_rows, cache_dir, workspace_bytes)
            self._runtime: Any = trt.Runtime(self._logger)
            self._engine: Any = self._runtime.deserialize_cuda_engine(blob)
            if self._engine is None:
                raise ModelError(f"TensorRT could not load the engine at {self.engine_path}")
            self._buckets = [self._bucket(i, b) for i, b in enumerate(self.buckets)]

    def _engine_bytes(self, trt: Any, cupy: Any, onnx_bytes: bytes, calibration_rows: npt.ArrayLike | None,
                      cache_dir: str | Path | None, workspace_bytes: int) -> bytes:
        """The cached engine for this model, GPU and TensorRT version, built on a miss."""
        n = self.model.n_features
        rows32, calib_sha = None, None
        if self.precision == "int8":
            if calibration_rows is None:
                raise ValueError("int8 needs calibration_rows (feature rows like the production mix)")
            with np.errstate(over="ignore"):
                rows32 = np.ascontiguousarray(check_rows(calibration_rows, n), np.float32)
            if len(rows32) < self.buckets[0]:
                raise ValueError(f"int8 calibration needs at least {self.buckets[0]} rows")
            calib_sha = sha256_hex(rows32.tobytes())
        props = cupy.cuda.runtime.getDeviceProperties(self._device.id)
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.gpu, self.trt_version = gpu, str(trt.__version__)
        key = engine_cache_key(model_sha256=self.model_sha256, gpu=gpu,
                               compute_capability=str(self._device.compute_capability),
                               trt_version=self.trt_version, precision=self.precision,
                               buckets=self.buckets, calibration_sha256=calib_sha)
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.engine_path = folder / f"{key}.engine"
        self.engine_cache_hit = self.engine_path.exists()
        if self.engine_cache_hit:
            return self.engine_path.read_bytes()
        calibrator = None
        if rows32 is not None:
            batch = max(b for b in self.buckets if b <= len(rows32))
            calibrator = _make_calibrator(trt, cupy, rows32, batch, folder / f"{key}.calib")
        blob = _build(trt, self._logger, onnx_bytes, n, self.buckets, self.precision, calibrator,
                      workspace_bytes)
        tmp = self.engine_path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(blob)
        os.replace(tmp, self.engine_path)  # atomic: a concurrent start never reads half an engine
        return blob

    def _bucket(self, profile: int, size: int) -> _Bucket:
        cp, n = self._cp, self.model.n_features
        ctx = self._engine.create_execution_context()
        ctx.set_optimization_profile_async(profile, self._stream.ptr)
        if not ctx.set_input_shape(INPUT_NAME, (size, n)):
            raise InferenceError(f"TensorRT refused input shape ({size}, {n}) for profile {profile}")
        host_in, mem_in = _pinned(cp, (size, n))
        host_out, mem_out = _pinned(cp, (size, 1))
        bucket = _Bucket(size, ctx, host_in, host_out, cp.empty((size, n), cp.float32),
                         cp.empty((size, 1), cp.float32), (mem_in, mem_out))
        ctx.set_tensor_address(INPUT_NAME, int(bucket.dev_in.data.ptr))
        ctx.set_tensor_address(OUTPUT_NAME, int(bucket.dev_out.data.ptr))
        if self.cuda_graph:
            self._enqueue(bucket)  # TensorRT asks for one plain run before capture
            self._stream.synchronize()
            self._stream.begin_capture()
            self._enqueue(bucket)
            bucket.graph = self._stream.end_capture()
        return bucket

    def _enqueue(self, bucket: _Bucket) -> None:
        rt, stream = self._cp.cuda.runtime, self._stream.ptr
        rt.memcpyAsync(int(bucket.dev_in.data.ptr), bucket.host_in.ctypes.data, bucket.host_in.nbytes,
                       rt.memcpyHostToDevice, stream)
        if not bucket.context.execute_async_v3(stream):
            raise InferenceError("TensorRT execute_async_v3 failed (see its log)")
        rt.memcpyAsync(bucket.host_out.ctypes.data, int(bucket.dev_out.data.ptr), bucket.host_out.nbytes,
                       rt.memcpyDeviceToHost, stream)

    def _run(self, chunk: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        m = len(chunk)
        bucket = next(b for b in self._buckets if b.size >= m)
        with np.errstate(over="ignore"):
            bucket.host_in[:m] = chunk
        bucket.host_in[m:] = 0
        if bucket.graph is not None:
            bucket.graph.launch(self._stream)
        else:
            self._enqueue(bucket)
        self._stream.synchronize()
        return bucket.host_out[:m, 0].astype(np.float64)

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        top = self.buckets[-1]
        with self._lock, self._device:
            parts = [self._run(rows[i: i + top]) for i in range(0, len(rows), top)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _release(self) -> None:
        with self._device:
            self._stream.synchronize()
        self._buckets.clear()  # graphs, contexts and buffers before the engine that owns them
        del self._engine, self._runtime


def open_backend(model: MlpModel, model_sha256: str | None = None, *, onnx_bytes: bytes | None = None,
                 **options: Any) -> TensorRTBackend:
    """The TensorRT backend; ``options`` as for ``TensorRTBackend``."""
    return TensorRTBackend(model, model_sha256, onnx_bytes, **options)
