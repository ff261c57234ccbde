"""The held-out generator's one exception tree."""

from __future__ import annotations

from inference.errors import InferenceError

__all__ = ["HeldoutConfigError", "HeldoutError"]


class HeldoutError(InferenceError):
    """Base of the held-out generator's errors."""


class HeldoutConfigError(HeldoutError, ValueError):
    """A configuration outside the generator's stated ranges."""
