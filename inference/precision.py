"""Score precision: the arithmetic a backend scores at, and how far each lies from the reference.

The numpy reference (``inference.model.forward``) computes in float32 (``REFERENCE_PRECISION``):
the weights are float32 and every activation is. A backend states the precision it scores at
(``precision`` on every ``inference.backends`` backend): numpy as asked (``fp32``, the reference,
by default), onnxruntime and CuPy ``fp32``, TensorRT as its engine was built (``fp32``, ``fp16`` or
``int8``). A decision record (``sealtrail.decision/6``) states it beside the backend.

A lower precision scores further from the reference than the replay's fixed tolerance allows, so
the model card carries, under ``score_precision`` (``SECTION``), the largest absolute difference
from the reference that was measured for each precision and backend over the card's evaluation
sets (``measure``: ``python -m inference.precision_bounds`` writes it into a card). ``card_bound``
reads one back; a precision and backend the card has no figure for has no bound
(``MissingBoundError``). The reference precision needs none: replay recomputes at it.

``forward_at`` is the reference maths at another float precision, which the numpy backend runs
when asked: ``fp64`` (float64 throughout) and ``fp16`` (inputs, weights and every activation
rounded to float16, products summed in float32 as GPU tensor cores do, the preprocessing in
float32 as the TensorRT engine pins it). It simulates a lower-precision backend; it is not one:
a TensorRT engine fuses and orders its work otherwise, so its figures are measured on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from inference.errors import ModelError
from inference.model import Z_CLIP, MlpModel, check_rows, forward, preprocess

__all__ = [
    "COMMAND", "NOT_MEASURED", "NUMPY_PRECISIONS", "PRECISIONS", "REFERENCE_PRECISION", "SECTION",
    "SECTION_FORMAT", "MissingBoundError", "card_bound", "card_bounds", "card_section", "forward_at",
    "measure", "round_up",
]

PRECISIONS = ("fp64", "fp32", "fp16", "int8")  # every precision a record may state
REFERENCE_PRECISION = "fp32"  # what inference.model.forward computes at
NUMPY_PRECISIONS = ("fp64", "fp32", "fp16")  # what the numpy backend can be asked to compute at
SECTION = "score_precision"  # the model card's key
SECTION_FORMAT = "sealtrail.score-precision/1"
F64 = np.float64
COMMAND = "python -m inference.precision_bounds"  # what writes the section into a model card
# What a CPU cannot measure, said in the section itself: a record at a precision and backend the card
# has no figure for fails replay.
NOT_MEASURED = (
    "fp16 on tensorrt: an FP16 engine needs a GPU; until its scores over these sets are measured, "
    "a record scored by it has no bound and fails replay",
    "int8 on tensorrt: an INT8 engine (and its calibration) needs a GPU; no bound, likewise",
    "fp32 on any backend is the reference's own precision: replay holds it to the fixed tolerance, "
    "measured or not",
)


class MissingBoundError(ModelError):
    """A model card states no measured bound for a precision and backend (or not as a number)."""


class Scoring(Protocol):
    """A backend as ``measure`` reads it: its name, its precision, its scores."""

    name: str
    precision: str

    def predict(self, rows: npt.ArrayLike) -> npt.NDArray[np.float64]: ...


def _preprocess64(model: MlpModel, rows: npt.ArrayLike) -> npt.NDArray[F64]:
    """``inference.model.preprocess`` in float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.array(check_rows(rows, model.n_features), dtype=F64)
        z[np.isnan(z)] = 0.0
        cols = model.log_mask
        z[:, cols] = np.log(np.maximum(z[:, cols], 0.0) + 1.0)
        z = (z - model.mean.astype(F64)) * model.scale.astype(F64)
        np.clip(z, -Z_CLIP, Z_CLIP, out=z)
    return z


def _half(a: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """``a`` rounded to float16 (what a float16 tensor holds), carried as float32."""
    with np.errstate(over="ignore"):
        return a.astype(np.float16).astype(np.float32)


def forward_at(model: MlpModel, rows: npt.ArrayLike, precision: str) -> npt.NDArray[np.float64]:
    """Scores of ``model`` computed at ``precision`` (one of ``NUMPY_PRECISIONS``); ``fp32`` is the
    reference itself. ValueError for a precision numpy does not compute at."""
    if precision == REFERENCE_PRECISION:
        return forward(model, rows)
    *hidden, (w_last, b_last) = model.layers
    if precision == "fp64":
        h64 = _preprocess64(model, rows)
        for w, b in hidden:
            h64 = np.maximum(h64 @ w.astype(F64) + b.astype(F64), 0.0)
        logit64 = h64 @ w_last.astype(F64) + b_last.astype(F64)
        with np.errstate(over="ignore"):
            return np.asarray((1.0 / (1.0 + np.exp(-logit64)))[:, 0], F64)
    if precision == "fp16":
        h = _half(preprocess(model, rows))
        for w, b in hidden:
            h = _half(np.maximum(h @ _half(w) + _half(b), np.float32(0)))
        logit = _half(h @ _half(w_last) + _half(b_last))
        with np.errstate(over="ignore"):
            return _half(np.float32(1) / (np.float32(1) + np.exp(-logit)))[:, 0].astype(F64)
    raise ValueError(f"numpy computes at {', '.join(NUMPY_PRECISIONS)}, not {precision!r}")


def round_up(x: float) -> float:
    """``x`` rounded up to three significant digits (a bound never below what was measured)."""
    if not x > 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    got = float(f"{math.ceil(x / step) * step:.3g}")
    while got < x:
        got = math.nextafter(got, math.inf)
    return got


def measure(model: MlpModel, backends: Iterable[Scoring], sets: Sequence[tuple[str, npt.ArrayLike]],
            *, command: str, not_measured: Sequence[str] = ()) -> dict[str, Any]:
    """The card's ``score_precision`` section: for each backend (by its precision, then its name), the
    largest absolute difference of its scores from the reference's over every row of ``sets``
    (named feature rows), rounded up to three significant digits."""
    arrays = [(name, np.asarray(rows, dtype=F64)) for name, rows in sets]
    reference = [forward(model, rows) for _, rows in arrays]
    found: dict[str, dict[str, float]] = {}
    for backend in backends:
        worst = 0.0
        for (_, rows), want in zip(arrays, reference, strict=True):
            if len(rows):
                got = np.asarray(backend.predict(rows), F64)
                worst = max(worst, float(np.max(np.abs(got - want))))
        found.setdefault(backend.precision, {})[backend.name] = round_up(worst)
    return {
        "format": SECTION_FORMAT,
        "reference": {"backend": "numpy", "precision": REFERENCE_PRECISION},
        "max_abs_diff": {p: dict(sorted(by.items())) for p, by in sorted(found.items())},
        "sets": {name: len(rows) for name, rows in arrays},
        "rows": sum(len(rows) for _, rows in arrays),
        "command": command,
        "not_measured": list(not_measured),
    }


def card_bounds(card: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Every bound a card states, by precision then backend (empty when it has no section);
    MissingBoundError when the section is there but not as ``SECTION_FORMAT`` says."""
    section = card.get(SECTION)
    if section is None:
        return {}
    if not isinstance(section, Mapping) or section.get("format") != SECTION_FORMAT:
        raise MissingBoundError(f"the card's {SECTION} is not a {SECTION_FORMAT} section")
    table = section.get("max_abs_diff")
    if not isinstance(table, Mapping):
        raise MissingBoundError(f"the card's {SECTION}.max_abs_diff is not an object")
    out: dict[str, dict[str, float]] = {}
    for precision, by in table.items():
        if not isinstance(by, Mapping):
            raise MissingBoundError(f"the card's bounds for precision {precision} are not an object")
        for backend, bound in by.items():
            if type(bound) not in (int, float) or not 0 <= bound < 1:
                raise MissingBoundError(f"the card's bound for precision {precision} on {backend} is "
                                        f"{bound!r}, not a number from 0 to 1")
            out.setdefault(str(precision), {})[str(backend)] = float(bound)
    return out


def card_bound(card: Mapping[str, Any], backend: str, precision: str) -> float:
    """The measured bound a card states for scores ``backend`` computed at ``precision``;
    MissingBoundError, naming what the card does state, when it has none."""
    bounds = card_bounds(card)
    got = bounds.get(precision, {}).get(backend)
    if got is None:
        stated = ", ".join(f"{p} on {b}" for p, by in sorted(bounds.items()) for b in sorted(by)) or "none"
        raise MissingBoundError(f"the model card states no measured bound for precision {precision} on "
                                f"backend {backend} (it states: {stated})")
    return got


def card_section(model: MlpModel, sets: Sequence[tuple[str, npt.ArrayLike]], onnx_bytes: bytes | None = None
                 ) -> dict[str, Any]:
    """``measure`` over every backend this machine can run on a CPU: numpy at each of its precisions
    and onnxruntime (when installed; on ``onnx_bytes``, the model's export, else one made here)."""
    from inference.backends.numpy_backend import NumpyBackend
    from inference.backends.onnxruntime_backend import OnnxRuntimeBackend, unavailable_reason

    backends: list[Any] = [NumpyBackend(model, precision=p) for p in NUMPY_PRECISIONS]
    if unavailable_reason() is None:
        backends.append(OnnxRuntimeBackend(model, onnx_bytes=onnx_bytes))
    try:
        return measure(model, backends, sets, command=COMMAND, not_measured=NOT_MEASURED)
    finally:
        for b in backends:
            b.close()
