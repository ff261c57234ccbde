"""Scoring backends behind one interface: numpy (the reference), onnxruntime, TensorRT, CuPy.

Every backend scores float64 feature rows ``(N, n)`` into float64 scores ``(N,)`` with the same
model; what differs is where the arithmetic runs. A backend names itself (``name``) and the
model it runs (``model_sha256``, the SHA-256 of the weights file) and the precision it computes
at (``precision``: ``fp32`` for the numpy reference, onnxruntime and CuPy, as built for TensorRT;
``inference.precision``) so that all three go into every decision record. Backend modules are
imported only when asked for, so a machine without onnxruntime, CuPy or TensorRT imports this
package, and asking for a missing one raises ``BackendUnavailableError`` with the reason and the
install hint.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from inference.errors import BackendUnavailableError, InferenceError, ModelError
from inference.model import MlpModel, check_rows, load_npz, model_npz_bytes, sha256_hex
from inference.precision import REFERENCE_PRECISION
from inference.schema import FEATURE_NAMES, N_EXTRACTED, N_FEATURES

__all__ = [
    "BACKENDS", "Backend", "BackendBase", "BackendClosedError", "UnknownBackendError",
    "available_backends", "load_backend",
]

BACKENDS = ("numpy", "onnxruntime", "tensorrt", "cupy")
_MODULES = {"numpy": "numpy_backend", "onnxruntime": "onnxruntime_backend",
            "tensorrt": "tensorrt_backend", "cupy": "cupy_backend"}


class UnknownBackendError(InferenceError, ValueError):
    """A backend name that is not one of ``BACKENDS``."""


class BackendClosedError(InferenceError):
    """``predict`` on a backend after ``close()``."""


@runtime_checkable
class Backend(Protocol):
    """What the pipeline scores with. ``predict`` MUST NOT change its input and MUST return one
    float64 score per row, in row order; it MUST raise ModelError for rows of the wrong width.
    ``close()`` (or leaving a ``with`` block) frees it; a closed backend MUST refuse to score."""

    name: str
    model_sha256: str
    precision: str  # the arithmetic it scores at (inference.precision): what a decision record states

    def predict(self, rows: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class BackendBase(ABC):
    """Shared plumbing: row checks, empty batches, close-once and use-after-close refusal."""

    name = ""
    precision = REFERENCE_PRECISION  # a backend computing at another precision says so

    def __init__(self, model: MlpModel, model_sha256: str | None = None) -> None:
        self.model = model
        self.model_sha256 = model_sha256 or sha256_hex(model_npz_bytes(model))
        self._closed = False

    def predict(self, rows: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """One float64 score per row of ``rows``: (N, n) for a model of n features, or whole rows of
        this build's schema when the model's features are their leading columns; N may be 0."""
        if self._closed:
            raise BackendClosedError(f"the {self.name} backend is closed")
        n = self.model.n_features
        arr = np.asarray(rows)
        leading = self.model.feature_names == FEATURE_NAMES[:n]
        if arr.ndim == 2 and arr.shape[1] in (N_FEATURES, N_EXTRACTED) and arr.shape[1] != n and leading:
            arr = arr[:, :n]
        arr = check_rows(arr, n)
        if arr.shape[0] == 0:
            return np.empty(0, np.float64)
        return self._predict(arr)

    @abstractmethod
    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        """Scores for a non-empty (N, n) array; each backend implements this."""

    def _release(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing to free
        """Free what the backend holds (sessions, device memory); called once by close()."""

    def close(self) -> None:
        """Release the backend; later predict calls raise BackendClosedError."""
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__} model={self.model_sha256[:12]}{state}>"


def _module(name: str) -> Any:
    if name not in BACKENDS:
        raise UnknownBackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return importlib.import_module(f"{__name__}.{_MODULES[name]}")


def available_backends() -> dict[str, str | None]:
    """Each backend's name mapped to None when it can run here, else the reason it cannot."""
    return {name: _module(name).unavailable_reason() for name in BACKENDS}


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read {what} {path}: {e.strerror or e}") from None


def load_backend(name: str, weights_path: str | Path, onnx_path: str | Path | None = None,
                 *, expect_schema: bool = True, **options: Any) -> Backend:
    """Open backend ``name`` on the weights file (and, for onnxruntime / TensorRT, its ONNX export).

    The model's identity is the SHA-256 of the weights file. An ONNX file must be the export of
    those weights (ModelError otherwise); without one, the export is made in memory. ``options``
    go to the backend (e.g. ``intra_op_threads``, ``precision``, ``cuda_graph``).
    """
    module = _module(name)
    if (reason := module.unavailable_reason()) is not None:
        raise BackendUnavailableError(f"backend {name!r} is unavailable: {reason}")
    data = _read(weights_path, "weights file")
    model = load_npz(data, expect_schema=expect_schema)
    if name in ("onnxruntime", "tensorrt"):
        options["onnx_bytes"] = None if onnx_path is None else _read(onnx_path, "ONNX file")
    backend: Backend = module.open_backend(model, sha256_hex(data), **options)
    return backend
