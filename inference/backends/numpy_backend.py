"""The numpy backend: the reference forward pass, on the CPU, with no dependency beyond numpy.

It is the default and the judge: replay re-scores recorded features with it, and every other
backend is tested for parity against it. Asked for another ``precision`` (``fp64`` or ``fp16``,
``inference.precision.forward_at``) it computes the same maths at that precision instead: ``fp16``
simulates a lower-precision backend on the CPU, and the record states the precision it scored at.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from inference.backends import BackendBase
from inference.model import MlpModel, forward
from inference.precision import NUMPY_PRECISIONS, REFERENCE_PRECISION, forward_at

__all__ = ["NumpyBackend", "open_backend", "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Always available: numpy is a core dependency."""
    return None


class NumpyBackend(BackendBase):
    """Scores with ``inference.model.forward`` (float32 arithmetic, float64 scores), or with its
    maths at ``precision`` (``inference.precision.NUMPY_PRECISIONS``)."""

    name = "numpy"

    def __init__(self, model: MlpModel, model_sha256: str | None = None, *,
                 precision: str = REFERENCE_PRECISION) -> None:
        if precision not in NUMPY_PRECISIONS:
            raise ValueError(f"the numpy backend computes at {', '.join(NUMPY_PRECISIONS)}, "
                             f"not {precision!r}")
        super().__init__(model, model_sha256)
        self.precision = precision  # the float dtype it computes in: fp32 is the reference's own

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        if self.precision == REFERENCE_PRECISION:
            return forward(self.model, rows)
        return forward_at(self.model, rows, self.precision)


def open_backend(model: MlpModel, model_sha256: str | None = None, *,
                 precision: str = REFERENCE_PRECISION) -> NumpyBackend:
    """The numpy backend on ``model``, computing at ``precision`` (default: the reference's fp32)."""
    return NumpyBackend(model, model_sha256, precision=precision)
