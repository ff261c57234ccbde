"""The scoring path's Python entry point (docs/python-api.md, "The scoring path").

Open a runtime from settings, parse a body into submissions, decide them (each returned once its
record is durable), close::

    with open_runtime(settings) as runtime:
        decisions = runtime.decide(parse_submissions(raw, "json", principal, batch=True))

A module of its own rather than the face of ``audit.decide``: the runtime imports governance and
the query index, which import modules of ``audit.decide``, so that package's ``__init__`` stays empty.
"""

from __future__ import annotations

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
