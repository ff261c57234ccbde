"""The numpy backend: the reference forward pass, on the CPU, with no dependency beyond numpy.

It is the default and the judge: replay re-scores recorded features with it, and every other
backend is tested for parity against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from inference.backends import BackendBase
from inference.model import MlpModel, forward

__all__ = ["NumpyBackend", "open_backend", "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Always available: numpy is a core dependency."""
    return None


class NumpyBackend(BackendBase):
    """Scores with ``inference.model.forward`` (float32 arithmetic, float64 scores)."""

    name = "numpy"

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        return forward(self.model, rows)


def open_backend(model: MlpModel, model_sha256: str | None = None) -> NumpyBackend:
    """The numpy backend on ``model`` (no options)."""
    return NumpyBackend(model, model_sha256)
