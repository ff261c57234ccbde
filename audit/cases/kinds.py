"""The record kinds that state case work: dispositions (annotations), case events (filed reports
among them), who read a case, the legal holds a filing places and the exports that carry a case.
Tipping-off (FATF R.21): only roles that work or examine cases read them, wherever the trail is
otherwise open to a role."""

from __future__ import annotations

from audit.cases.events import EVENT_KIND
from audit.cases.reads import READ_KIND
from audit.query.index import ANNOTATION_KIND

__all__ = ["CASE_KINDS", "report_read"]

CASE_KINDS = frozenset({ANNOTATION_KIND, EVENT_KIND, READ_KIND, "ledger.legal_hold", "export.created"})


def report_read(kind: str, body: object) -> dict[str, object] | None:
    """The read a record's payload is, where it is a filed report (a ``file_report`` event's
    payload is the report's bytes): ``{"case", "what": "report", "report"}``; else None."""
    if kind != EVENT_KIND or not isinstance(body, dict) or body.get("action") != "file_report":
        return None
    target = body.get("target")
    case = target.get("case") if isinstance(target, dict) else None
    if not isinstance(case, int) or not isinstance(body.get("report"), str):
        return None
    return {"case": case, "what": "report", "report": body["report"]}
