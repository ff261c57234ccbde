"""Errors of the scoring layer (features, model files, backends); messages have their own
``MessageError``. Each says what was refused and why."""

from __future__ import annotations

__all__ = ["BackendUnavailableError", "FeatureError", "InferenceError", "ModelError"]


class InferenceError(Exception):
    """Base of the scoring layer's errors."""


class FeatureError(InferenceError):
    """A feature row could not be computed (bad time, bad table, bad state snapshot)."""


class ModelError(InferenceError):
    """A model file is missing, malformed, or does not match the feature schema."""


class BackendUnavailableError(InferenceError):
    """The backend's library or device is not present here (e.g. no GPU, no TensorRT)."""
