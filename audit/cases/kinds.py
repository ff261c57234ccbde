"""The record kinds that state case work: dispositions (annotations), case events (filed reports
among them) and who read a case. Tipping-off (FATF R.21): only roles that work or examine cases
read them, wherever the trail is otherwise open to a role."""

from __future__ import annotations

from audit.cases.events import EVENT_KIND
from audit.cases.reads import READ_KIND
from audit.query.index import ANNOTATION_KIND

__all__ = ["CASE_KINDS"]

CASE_KINDS = frozenset({ANNOTATION_KIND, EVENT_KIND, READ_KIND})
