"""Errors of the transaction graph: a ``FeatureError`` (the scoring layer's tree) that says which
input or setting was refused and why."""

from __future__ import annotations

from inference.errors import FeatureError

__all__ = ["GraphConfigError", "GraphError", "GraphInputError"]


class GraphError(FeatureError):
    """Base of the transaction graph's errors."""


class GraphConfigError(GraphError):
    """A graph setting is out of its stated range (window, hops, caps, tolerance)."""


class GraphInputError(GraphError):
    """A payment could not be added: a bad account key, time or amount, or a time that goes back
    further than the late-arrival tolerance allows."""
