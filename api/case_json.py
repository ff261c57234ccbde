"""Alerts, cases, their events and recorded reads as JSON: the shapes the HTTP API answers and
the CLI's ``--json`` prints (one definition, so the two cannot drift apart). No web framework here:
the CLI imports it on every call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # only the types: importing this costs the CLI nothing of the audit layer
    from datetime import date

    from audit.cases.query import CaseEvent
    from audit.cases.reads import CaseRead
    from audit.cases.state import AlertState, CaseState
    from audit.query.traces import AnnotationView

__all__ = ["alert_json", "annotation_json", "case_json", "event_json", "read_json"]

_SIDES = (("originator", 1), ("beneficiary", 2))  # AlertState.account_alert's bits


def _who(fingerprint: str | None, subject: str | None) -> dict[str, str] | None:
    return None if fingerprint is None else {"subject": subject or "", "fingerprint_sha256": fingerprint}


def _sealed_who(principal: str | None) -> dict[str, str] | None:
    """A principal the view keeps as canonical JSON (who proposed what awaits a second officer, who
    closed), as its subject and fingerprint."""
    if principal is None:
        return None
    p = orjson.loads(principal)
    return {"subject": str(p.get("subject", "")), "fingerprint_sha256": str(p.get("fingerprint_sha256", ""))}


def _sealed_whos(principals: str | None) -> list[dict[str, str]] | None:
    """Who closed an alert (the view keeps a canonical JSON list: the closer, or the proposer and
    the approver of a four-eyes close), each as subject and fingerprint."""
    if principals is None:
        return None
    return [{"subject": str(p.get("subject", "")), "fingerprint_sha256": str(p.get("fingerprint_sha256", ""))}
            for p in orjson.loads(principals)]


def annotation_json(n: AnnotationView) -> dict[str, Any]:
    """An annotation sealed on a decision, in the shape ``GET /v1/traces/{trace_id}`` lists it: its
    seq, trace id, time and the sealed ``sealtrail.annotation/1`` record (who, disposition, note)."""
    return {"seq": n.seq, "trace_id": n.trace_id, "recorded_at": n.recorded_at, "record": n.body}


def alert_json(a: AlertState, today: date) -> dict[str, Any]:
    """An alert as the API answers it; ``overdue``: open, and its review was due before ``today``.
    An alert read through its case (``CaseAlert``) adds ``annotations``: those of its decision."""
    from audit.cases.query import CaseAlert  # loaded already: the caller holds an alert it read

    out = {"seq": a.seq, "trace_id": a.trace_id, "opened_at": a.opened_at, "outcome": a.outcome,
           "account_alerts": [side for side, bit in _SIDES if a.account_alert & bit],
           "fired": [r for r in a.fired.split(",") if r], "subject": a.subject, "case_id": a.case_id,
           "state": a.state, "assignee": _who(a.assignee_fp, a.assignee_subject),
           "disposition": a.disposition, "closed_at": a.closed_at, "closed_by": _sealed_whos(a.closed_by),
           "qa": a.qa, "review_due": a.review_due, "filing_due": a.filing_due,
           "next_review_due": a.next_review_due, "overdue": a.open and a.review_due < today.isoformat(),
           "payment": a.payment, "pending": a.pending, "pending_by": _sealed_who(a.pending_by),
           "last_event_seq": a.last_event_seq, "events": a.events, "policy_seq": a.policy_seq,
           "scorer_fingerprint_sha256": a.scorer_fp}
    if isinstance(a, CaseAlert):
        out["annotations"] = [annotation_json(n) for n in a.annotations]
    return out


def case_json(c: CaseState) -> dict[str, Any]:
    """A case as the API answers it."""
    return {"case_id": c.case_id, "subject": c.subject, "opened_at": c.opened_at,
            "state": "open" if c.open else "closed", "alert_count": c.alerts,
            "open_alert_count": c.open_alerts, "assignee": _who(c.assignee_fp, c.assignee_subject),
            "disposition": c.disposition,
            "closed_at": c.closed_at, "pending": c.pending, "pending_by": _sealed_who(c.pending_by),
            "links": [int(i) for i in c.links.split(",") if i], "reports": c.reports,
            "last_report_sha256": c.last_report, "last_event_seq": c.last_event_seq,
            "last_alert_seq": c.last_alert_seq}


def event_json(e: CaseEvent) -> dict[str, Any]:
    """One sealed event of a case's history as the API answers it, with the officer's words."""
    return {"seq": e.seq, "recorded_at": e.recorded_at, "alert_seq": e.alert_seq, "action": e.action,
            "applied": e.applied, "why": e.why,
            "principal": {"subject": e.principal.get("subject", ""),
                          "fingerprint_sha256": e.principal.get("fingerprint_sha256", "")},
            "rationale": e.rationale,
            "assignee": None if e.assignee is None else _who(e.assignee.get("fingerprint_sha256", ""),
                                                             e.assignee.get("subject", "")),
            "disposition": e.disposition, "link": e.link, "report_sha256": e.report, "verdict": e.verdict}


def read_json(r: CaseRead) -> dict[str, Any]:
    """One sealed ``case_read`` record as the API answers it: who read (the certificate as sealed),
    when, and which cases (``what``: ``case``, ``queue`` or ``report`` with its SHA-256)."""
    p = r.principal if isinstance(r.principal, dict) else {}  # as sealtrail seals it, or nothing
    sans = p.get("sans")
    return {"seq": r.seq, "recorded_at": r.recorded_at,
            "principal": {"subject": str(p.get("subject", "")),
                          "sans": [str(x) for x in sans] if isinstance(sans, list) else [],
                          "issuer": str(p.get("issuer", "")),
                          "fingerprint_sha256": str(p.get("fingerprint_sha256", "")),
                          "serial": str(p.get("serial", ""))},
            "reads": r.reads}
