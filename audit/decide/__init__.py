"""The decision path: submissions in, the batch pipeline (features, model, rules, seal), decisions out.

The scoring path's Python entry point (docs/python-api.md): open a runtime from settings, parse
a body into submissions, decide them (each returned once its record is durable), close::

    with open_runtime(settings) as runtime:
        decisions = runtime.decide(parse_submissions(raw, "json", principal, batch=True))

The names below are imported on first use: ``audit.decide.record`` and the other modules of the
package are imported by governance and the query index, which the runtime itself imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from audit.decide.principal import Principal
    from audit.decide.runtime import Runtime, RuntimeSettings, open_runtime
    from audit.decide.submissions import MAX_BATCH, parse_submissions
    from audit.decide.types import Decision, Submission
    from audit.errors import SubmissionFault, SubmissionRefusedError

__all__ = [
    "MAX_BATCH",
    "Decision",
    "Principal",
    "Runtime",
    "RuntimeSettings",
    "Submission",
    "SubmissionFault",
    "SubmissionRefusedError",
    "open_runtime",
    "parse_submissions",
]

_HOME = {
    "MAX_BATCH": "audit.decide.submissions",
    "Decision": "audit.decide.types",
    "Principal": "audit.decide.principal",
    "Runtime": "audit.decide.runtime",
    "RuntimeSettings": "audit.decide.runtime",
    "Submission": "audit.decide.types",
    "SubmissionFault": "audit.errors",
    "SubmissionRefusedError": "audit.errors",
    "open_runtime": "audit.decide.runtime",
    "parse_submissions": "audit.decide.submissions",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
