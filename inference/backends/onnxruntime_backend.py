"""The onnxruntime backend: the model's ONNX export on onnxruntime's CPU provider.

It runs the same graph TensorRT builds its engine from, so parity with numpy here (tested in
CI, <= 1e-5) checks the export itself. The session is single-threaded by default and asks
for deterministic compute, so a score does not depend on the machine's load.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from inference.backends import BackendBase
from inference.errors import BackendUnavailableError
from inference.model import INPUT_NAME, OUTPUT_NAME, MlpModel, check_onnx_matches, to_onnx_bytes

__all__ = ["OnnxRuntimeBackend", "open_backend", "unavailable_reason"]

INSTALL_HINT = "pip install 'sealtrail[onnx]'"


def unavailable_reason() -> str | None:
    """None when onnxruntime imports, else why not and how to install it."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return f"onnxruntime is not installed: {INSTALL_HINT}"
    except OSError as e:  # a broken native library
        return f"onnxruntime failed to load ({e}): reinstall with {INSTALL_HINT}"
    return None


class OnnxRuntimeBackend(BackendBase):
    """An ``InferenceSession`` on ``CPUExecutionProvider`` over the export of ``model``.

    ``onnx_bytes`` (an ONNX file's content) must be the export of ``model``: a file exported
    from other weights is refused with ModelError, since records name the weights only.
    """

    name = "onnxruntime"
    precision = "fp32"  # float32 inputs, weights and activations, as the reference

    def __init__(self, model: MlpModel, model_sha256: str | None = None, onnx_bytes: bytes | None = None,
                 *, intra_op_threads: int = 1) -> None:
        if (reason := unavailable_reason()) is not None:
            raise BackendUnavailableError(reason)
        import onnxruntime as ort

        if onnx_bytes is None:
            onnx_bytes = to_onnx_bytes(model)
        else:
            check_onnx_matches(model, onnx_bytes)
        super().__init__(model, model_sha256)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.use_deterministic_compute = True
        opts.log_severity_level = 3  # errors only
        self._session: Any = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        with np.errstate(over="ignore"):  # 1e300 -> inf, which the graph clips like numpy does
            x = rows.astype(np.float32)
        (scores,) = self._session.run([OUTPUT_NAME], {INPUT_NAME: x})
        return np.asarray(scores[:, 0], np.float64)

    def _release(self) -> None:
        del self._session


def open_backend(model: MlpModel, model_sha256: str | None = None, *, onnx_bytes: bytes | None = None,
                 intra_op_threads: int = 1) -> OnnxRuntimeBackend:
    """The onnxruntime backend; ``intra_op_threads`` sets the session's thread count (default 1)."""
    return OnnxRuntimeBackend(model, model_sha256, onnx_bytes, intra_op_threads=intra_op_threads)
