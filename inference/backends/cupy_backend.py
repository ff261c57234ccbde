"""The CuPy backend: the model's arithmetic on an NVIDIA GPU, without TensorRT.

It exists so that GPU latency and parity can be measured on any CUDA machine. The maths is
written once over an array module ``xp`` (``forward_xp``): with ``xp=cupy`` it runs on the
GPU, and the CPU test suite runs the very same code with ``xp=numpy``.

NOT RUN HERE: the machine this was written on has no GPU and no CuPy; ``forward_xp`` has been
run only with ``xp=numpy``. A GPU run (``pytest -m gpu``, ``python -m bench.gpu``) must check
parity <= 1e-5 with numpy and report latency per batch size.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.backends import BackendBase
from inference.errors import BackendUnavailableError
from inference.model import Z_CLIP, MlpModel

__all__ = ["CupyBackend", "XpWeights", "forward_xp", "open_backend", "unavailable_reason", "upload"]

INSTALL_HINT = "pip install 'sealtrail[gpu]'"


def unavailable_reason() -> str | None:
    """None when CuPy imports and sees a CUDA device, else why not."""
    try:
        import cupy
    except ImportError:
        return f"CuPy is not installed: {INSTALL_HINT}"
    except Exception as e:  # a CuPy build whose CUDA libraries are missing raises its own errors
        return f"CuPy failed to import ({e})"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # CUDARuntimeError when there is no driver
        return f"no CUDA GPU visible ({e})"
    return None if count > 0 else "no CUDA GPU visible"


@dataclass(frozen=True)
class XpWeights:
    """The model's arrays in one array module (numpy or cupy), uploaded once."""

    log_mask: Any
    mean: Any
    scale: Any
    layers: tuple[tuple[Any, Any], ...]


def upload(model: MlpModel, xp: Any) -> XpWeights:
    """Copy the model's arrays into ``xp`` (for cupy: to the current device)."""
    return XpWeights(xp.asarray(model.log_mask), xp.asarray(model.mean), xp.asarray(model.scale),
                     tuple((xp.asarray(w), xp.asarray(b)) for w, b in model.layers))


def forward_xp(xp: Any, weights: XpWeights, x: Any) -> Any:
    """Scores (float32, shape (N,)) for float32 rows ``x`` (N, n): ``inference.model.forward``'s maths."""
    zero, one, clip = xp.float32(0), xp.float32(1), xp.float32(Z_CLIP)
    with np.errstate(over="ignore", invalid="ignore"):  # numpy only; cupy does not warn
        x = xp.where(xp.isnan(x), zero, x)
        x = xp.where(weights.log_mask, xp.log(xp.maximum(x, zero) + one), x)
        h = xp.clip((x - weights.mean) * weights.scale, -clip, clip)
        *hidden, (w_last, b_last) = weights.layers
        for w, b in hidden:
            h = xp.maximum(h @ w + b, zero)
        logit = h @ w_last + b_last
        return (one / (one + xp.exp(-logit)))[:, 0]


class CupyBackend(BackendBase):
    """``forward_xp`` on a CUDA device through CuPy; weights uploaded once at construction."""

    name = "cupy"
    precision = "fp32"  # float32 inputs, weights and activations, as the reference

    def __init__(self, model: MlpModel, model_sha256: str | None = None, *, device: int = 0) -> None:
        if (reason := unavailable_reason()) is not None:
            raise BackendUnavailableError(reason)
        import cupy

        super().__init__(model, model_sha256)
        self._cp: Any = cupy
        self._device: Any = cupy.cuda.Device(device)
        self._lock = threading.Lock()
        with self._device:
            self._weights = upload(model, cupy)
            self._stream: Any = cupy.cuda.Stream(non_blocking=True)

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        cp = self._cp
        with np.errstate(over="ignore"):
            x32 = np.ascontiguousarray(rows, np.float32)
        with self._lock, self._device, self._stream:
            scores = forward_xp(cp, self._weights, cp.asarray(x32))
            host = cp.asnumpy(scores, stream=self._stream)
            self._stream.synchronize()
        return np.asarray(host, np.float64)

    def _release(self) -> None:
        with self._device:
            self._stream.synchronize()
        del self._weights, self._stream


def open_backend(model: MlpModel, model_sha256: str | None = None, *, device: int = 0) -> CupyBackend:
    """The CuPy backend on CUDA device ``device``."""
    return CupyBackend(model, model_sha256, device=device)
