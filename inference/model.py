"""The risk model: a small MLP over a feature row; here its maths, the reference every form follows.

One model, three forms that must agree: the frozen ``MlpModel`` (numpy, the reference the
replay check trusts; this module), the weights file (``.npz`` with byte-for-byte deterministic
content; its SHA-256 is the model's identity in every decision record; ``inference.model_npz``)
and an ONNX graph that computes the same function with operators TensorRT and onnxruntime both
support (``inference.model_onnx``). This module re-exports both modules' public names, so
``from inference.model import load_npz, to_onnx_bytes`` is the one import path for all three.

The function, for rows ``x`` (float64 in, float64 scores out)::

    x = float32(x); x = 0 where NaN (a missing feature)
    x = log(relu(x) + 1) on the log-masked columns (heavy-tailed counts and sums)
    z = clip((x - mean) * scale, -Z_CLIP, Z_CLIP)
    h = relu(h @ W + b) for the hidden layers; score = sigmoid(h @ W_last + b_last)

The clip is part of format ``sealtrail.mlp/1``: it keeps +/-inf and absurd values finite (no
NaN reaches a score), bounds float32 rounding so that backends agree within 1e-5 even on hostile
rows (with +/-1000, onnxruntime and numpy drifted 2.6e-5 apart), and keeps FP16 activations in range.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from inference.errors import ModelError
from inference.schema import FEATURE_NAMES, FEATURE_SCHEMA

__all__ = [
    "FORMAT", "INPUT_NAME", "OUTPUT_NAME", "Z_CLIP", "MlpModel", "check_onnx_matches", "check_rows",
    "forward", "load_npz", "model_npz_bytes", "preprocess", "save_npz", "sha256_file", "sha256_hex",
    "to_onnx_bytes",
]

FORMAT = "sealtrail.mlp/1"
Z_CLIP = 100.0  # standardised values beyond +/-100 standard deviations are clipped (format constant)

Floats = npt.NDArray[np.float32]
Layer = tuple[Floats, Floats]


def _frozen(arr: np.ndarray[Any, Any]) -> Any:
    """A private, read-only, C-contiguous copy (the model is immutable, its arrays too)."""
    out = np.array(arr, copy=True, order="C")
    out.setflags(write=False)
    return out


def _check_float32(name: str, arr: object, shape: tuple[int, ...]) -> None:
    if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
        raise ModelError(f"{name} must be a float32 array; got {getattr(arr, 'dtype', type(arr).__name__)}")
    if arr.shape != shape:
        raise ModelError(f"{name} must have shape {shape}; got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ModelError(f"{name} holds NaN or infinite values")


@dataclass(frozen=True, eq=False)
class MlpModel:
    """A validated MLP: hidden layers ReLU, one sigmoid output; weights float32 ``W (in, out)``."""

    feature_schema: str
    feature_names: tuple[str, ...]
    log_mask: npt.NDArray[np.bool_]
    mean: Floats
    scale: Floats
    layers: tuple[Layer, ...]
    _log_cols: npt.NDArray[np.intp] = field(init=False, repr=False)  # derived from log_mask

    def __post_init__(self) -> None:
        n = len(self.feature_names)
        if not self.feature_schema or not isinstance(self.feature_schema, str):
            raise ModelError("feature_schema must be a non-empty string")
        if n == 0 or not all(isinstance(s, str) and s for s in self.feature_names):
            raise ModelError("feature_names must be a non-empty tuple of non-empty strings")
        if len(set(self.feature_names)) != n:
            raise ModelError("feature_names holds a duplicate name")
        lm = self.log_mask
        if not isinstance(lm, np.ndarray) or lm.dtype != np.bool_ or lm.shape != (n,):
            raise ModelError(f"log_mask must be a bool array of shape ({n},) (one per feature); got "
                             f"{getattr(lm, 'dtype', type(lm).__name__)} {getattr(lm, 'shape', '')}")
        _check_float32("mean", self.mean, (n,))
        _check_float32("scale", self.scale, (n,))
        if not (self.scale > 0).all():
            raise ModelError("scale (1/std) must be positive for every feature")
        if not self.layers:
            raise ModelError("a model needs at least one layer")
        width = n
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, tuple) or len(layer) != 2:
                raise ModelError(f"layer {i} must be a (W, b) pair")
            w, b = layer
            if not isinstance(w, np.ndarray) or w.ndim != 2 or w.shape[0] != width or w.shape[1] < 1:
                raise ModelError(f"W{i} must have shape ({width}, out): {width} rows, the width before it; "
                                 f"got {getattr(w, 'shape', type(w).__name__)}")
            width = w.shape[1]
            _check_float32(f"W{i}", w, w.shape)
            _check_float32(f"b{i}", b, (width,))
        if width != 1:
            raise ModelError(f"the last layer must have one output (the score); it has {width}")
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        for name in ("log_mask", "mean", "scale"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "layers", tuple((_frozen(w), _frozen(b)) for w, b in self.layers))
        object.__setattr__(self, "_log_cols", _frozen(np.flatnonzero(self.log_mask)))

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer widths, input first: (32, 32, 16, 1) for the shipped model."""
        return (self.n_features, *(w.shape[1] for w, _ in self.layers))

    @classmethod
    def init(cls, rng: np.random.Generator, sizes: Sequence[int] = (32, 32, 16, 1),
             feature_names: Sequence[str] = FEATURE_NAMES, log_mask: npt.ArrayLike | None = None,
             mean: npt.ArrayLike | None = None, scale: npt.ArrayLike | None = None,
             feature_schema: str = FEATURE_SCHEMA) -> MlpModel:
        """A fresh model: He-normal weights drawn from ``rng`` layer by layer, zero biases."""
        n = len(feature_names)
        if len(sizes) < 2 or sizes[0] != n or sizes[-1] != 1:
            raise ModelError(f"sizes must run from the feature count {n} to 1; got {tuple(sizes)}")
        layers = tuple(
            ((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).astype(np.float32),
             np.zeros(fan_out, np.float32))
            for fan_in, fan_out in itertools.pairwise(sizes))
        return cls(feature_schema, tuple(feature_names),
                   np.zeros(n, bool) if log_mask is None else np.asarray(log_mask, bool),
                   np.zeros(n, np.float32) if mean is None else np.asarray(mean, np.float32),
                   np.ones(n, np.float32) if scale is None else np.asarray(scale, np.float32),
                   layers)


# ---------------------------------------------------------------- the reference forward pass

def check_rows(rows: npt.ArrayLike, n_features: int) -> np.ndarray[Any, Any]:
    """``rows`` as an (N, n_features) numeric array, or ModelError saying what is wrong."""
    arr = np.asarray(rows)
    if arr.ndim != 2 or arr.shape[1] != n_features:
        raise ModelError(f"feature rows must have shape (N, {n_features}); got {arr.shape}")
    if arr.dtype.kind not in "fiub":
        raise ModelError(f"feature rows must be numeric; got dtype {arr.dtype}")
    return arr


def preprocess(model: MlpModel, rows: npt.ArrayLike) -> Floats:
    """The standardised float32 input ``z`` of the first layer (missing -> 0, log, scale, clip)."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = check_rows(rows, model.n_features).astype(np.float32)
        np.copyto(z, np.float32(0), where=np.isnan(z))
        cols = model._log_cols
        if cols.size:
            sub = z[:, cols]
            np.maximum(sub, np.float32(0), out=sub)
            sub += np.float32(1)
            np.log(sub, out=sub)
            z[:, cols] = sub
        z -= model.mean
        z *= model.scale
        np.clip(z, np.float32(-Z_CLIP), np.float32(Z_CLIP), out=z)
    return z


# OpenBLAS runs a product of m*n*k <= 2**18 on the calling thread. Past that it wakes worker
# threads, which for products this small cost more than they save and, on a 2-core host, busy-wait
# against the caller (batch 1024: p99 went from 0.4 ms to 20 ms). So products go in row blocks.
_GEMM_MNK = 1 << 18


def _dense(h: Floats, w: Floats, b: Floats) -> Floats:
    """``h @ w + b`` in row blocks small enough for BLAS to stay on this thread."""
    out = np.empty((h.shape[0], w.shape[1]), np.float32)
    block = max(1, _GEMM_MNK // w.size)
    for i in range(0, h.shape[0], block):
        np.matmul(h[i: i + block], w, out=out[i: i + block])
    out += b
    return out


def forward(model: MlpModel, rows: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Risk scores in [0, 1] for (N, n) feature rows: the numpy reference every backend must match."""
    h = preprocess(model, rows)
    *hidden, (w_last, b_last) = model.layers
    for w, b in hidden:
        h = _dense(h, w, b)
        np.maximum(h, np.float32(0), out=h)
    logit = _dense(h, w_last, b_last)
    with np.errstate(over="ignore"):  # exp(-logit) -> inf gives the right limit, 0
        np.negative(logit, out=logit)
        np.exp(logit, out=logit)
        logit += np.float32(1)
        np.reciprocal(logit, out=logit)
    return logit[:, 0].astype(np.float64)


# ---------------------------------------------------------------- the other two forms, re-exported
#
# inference.model_npz and inference.model_onnx import the maths above, so importing them here at
# load time would be an import cycle, and one that breaks by entry point: a program whose first
# import is ``inference.model_npz`` would run this module to the end, where
# ``from inference.model_npz import load_npz`` meets a half-initialised module and fails. So the
# dependency runs one way at load time (model_npz, model_onnx -> model) and their public names
# resolve here on first access (PEP 562 ``__getattr__``), when every module involved is complete.
# Type checkers read the imports under TYPE_CHECKING instead. tests/inference/test_model.py checks
# that every public name of both modules resolves here, whichever module is imported first.

_REEXPORTS: dict[str, tuple[str, ...]] = {
    "inference.model_npz": ("load_npz", "model_npz_bytes", "save_npz", "sha256_file", "sha256_hex"),
    "inference.model_onnx": ("INPUT_NAME", "OUTPUT_NAME", "check_onnx_matches", "to_onnx_bytes"),
}

if TYPE_CHECKING:
    from inference.model_npz import load_npz, model_npz_bytes, save_npz, sha256_file, sha256_hex
    from inference.model_onnx import INPUT_NAME, OUTPUT_NAME, check_onnx_matches, to_onnx_bytes
else:
    def __getattr__(name: str) -> object:
        for module, names in _REEXPORTS.items():
            if name in names:
                value = getattr(importlib.import_module(module), name)
                globals()[name] = value  # later lookups find it without coming here
                return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
