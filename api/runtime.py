"""Deprecated: the runtime moved to ``audit.decide.runtime`` (``Runtime``, ``open_runtime``).

``from api.runtime import Runtime`` still gives the very same class, with a
``DeprecationWarning``, for one version. The API opens it from its ``Settings`` as before:
``Runtime.open(settings)``; ``runtime.settings`` is that object.
"""

from __future__ import annotations

import warnings

from audit.decide.runtime import Runtime

__all__ = ["Runtime"]

warnings.warn("api.runtime moved to audit.decide.runtime; the old path goes in the next version",
              DeprecationWarning, stacklevel=2)
