"""Alert and case states and the actions that move them: a pure state machine.

An alert is a sealed decision that needs an officer: a REVIEW, HOLD or BLOCK outcome, or an
account alert (``account_risk.alerts``). Its state moves only by sealed ``case_event`` records
(``audit.cases.events``); :func:`step` says what one action does to one alert, and is the
single place those rules live: the service checks an action with it before sealing, and the
fold (``audit.cases.fold``) applies sealed events with it, so what an officer was told and
what the view holds cannot disagree.

States: ``new`` -> ``assigned`` -> ``in_review`` -> ``escalated`` -> ``closed`` (with a
disposition) -> ``reopened``. A HOLD or BLOCK also has a payment state: ``HELD`` until an
officer releases or rejects it (``RELEASED`` / ``REJECTED``); releasing a BLOCK, and closing
as a false positive where the policy says so, is a proposal another officer approves
(four-eyes, :func:`audit.governance.state.same_person`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from audit.cases.policy import DeadlinePolicy
from audit.errors import CaseConflictError, CaseError, CaseFourEyesError
from audit.governance.state import same_person
from ledger.jcs import canonical_bytes

__all__ = [
    "ACTIONS",
    "ALERT_OUTCOMES",
    "CASE_ACTIONS",
    "MAX_SEQ",
    "OPEN_STATES",
    "AlertState",
    "AlertStatus",
    "CaseState",
    "Disposition",
    "Payment",
    "QaVerdict",
    "Step",
    "is_seq",
    "step",
]

ALERT_OUTCOMES = ("REVIEW", "HOLD", "BLOCK")  # decisions that open an alert (and any account alert)
MAX_SEQ = 2**63 - 1  # a ledger seq is a signed 64-bit integer in both databases


def is_seq(value: object) -> bool:
    """Whether ``value`` can be a ledger seq (an alert's, a case's id): an int, not a bool, from 0
    to 2**63 - 1."""
    return type(value) is int and 0 <= value <= MAX_SEQ


class AlertStatus(enum.StrEnum):
    NEW = "new"
    ASSIGNED = "assigned"
    IN_REVIEW = "in_review"
    ESCALATED = "escalated"
    CLOSED = "closed"
    REOPENED = "reopened"


OPEN_STATES = frozenset(s for s in AlertStatus if s is not AlertStatus.CLOSED)


class Disposition(enum.StrEnum):
    FALSE_POSITIVE = "FALSE_POSITIVE"
    NO_FURTHER_ACTION = "NO_FURTHER_ACTION"
    REPORT_FILED = "REPORT_FILED"


class QaVerdict(enum.StrEnum):
    AGREE = "AGREE"
    DISAGREE = "DISAGREE"


class Payment(enum.StrEnum):
    HELD = "HELD"
    RELEASED = "RELEASED"
    REJECTED = "REJECTED"


# Actions on one alert; a case takes assign, comment, close, link, approve and refuse.
ACTIONS = ("assign", "start_review", "escalate", "close", "reopen", "comment", "release", "reject",
           "approve", "refuse", "qa_review")
CASE_ACTIONS = ("assign", "comment", "close", "link", "approve", "refuse", "file_report")
_PENDING_CLOSE = "close:" + Disposition.FALSE_POSITIVE


@dataclass(frozen=True)
class AlertState:
    """One alert as the view holds it (``audit_alerts``)."""

    seq: int  # of the decision that opened it
    trace_id: str
    leaf_hash: str  # of the decision's entry (hex): events name it
    opened_at: str
    outcome: str  # the decision: ALLOW (an account alert alone), REVIEW, HOLD, BLOCK
    account_alert: int  # 1 originator, 2 beneficiary, 3 both, 0 none
    fired: str  # rule ids, comma-separated
    scorer_fp: str  # the principal that asked for the decision
    subject: str  # "account:<keyed account>" or "decision:<seq>"
    case_id: int
    policy_seq: int  # 0: the built-in default policy
    review_due: str
    filing_due: str
    ruleset: str = ""  # "<ruleset_id>@<version>" of the rule module that decided
    model_sha256: str = ""  # of the model that scored ("" if none)
    score_ppm: int | None = None  # the score in millionths (None: not scored)
    state: str = AlertStatus.NEW
    assignee_fp: str | None = None
    assignee_subject: str | None = None
    disposition: str | None = None
    closed_at: str | None = None
    closed_by: str | None = None  # who closed it (with a proposal: proposer, approver), canonical JSON list
    next_review_due: str | None = None
    qa: str | None = None  # "due" when sampled for quality assurance, then "agreed" / "disagreed"
    payment: str | None = None  # HELD for a HOLD or BLOCK until decided
    pending: str | None = None  # "release" or "close:FALSE_POSITIVE", awaiting a second officer
    pending_by: str | None = None  # the proposer's principal, canonical JSON
    last_event_seq: int | None = None
    events: int = 0

    @property
    def open(self) -> bool:
        return self.state != AlertStatus.CLOSED


@dataclass(frozen=True)
class CaseState:
    """One case (``audit_cases``): the alerts of one subject while any is open."""

    case_id: int  # the seq of the alert that opened it
    subject: str
    opened_at: str
    alerts: int = 0
    open_alerts: int = 0
    assignee_fp: str | None = None
    assignee_subject: str | None = None
    disposition: str | None = None
    closed_at: str | None = None
    pending: str | None = None
    pending_by: str | None = None
    links: str = ""  # linked case ids, comma-separated, ascending
    reports: int = 0  # reports filed (an amendment counts)
    last_report: str | None = None  # SHA-256 of the report in force
    last_report_seq: int | None = None  # the event that filed it
    last_event_seq: int | None = None
    last_alert_seq: int = 0

    @property
    def open(self) -> bool:
        return self.open_alerts > 0


@dataclass(frozen=True)
class Step:
    """What one action did: the alert after it, and the payment outcome it decided, if any."""

    alert: AlertState
    payment_outcome: str | None = None


def _who(principal: Mapping[str, Any]) -> tuple[str, str]:
    return str(principal.get("fingerprint_sha256", "")), str(principal.get("subject", ""))


def _need(cond: bool, alert: AlertState, action: str, why: str) -> None:
    if not cond:
        raise CaseConflictError("action", f"cannot {action} alert {alert.seq} ({alert.state}"
                                          f"{', payment ' + alert.payment if alert.payment else ''}): {why}")


def _close(a: AlertState, disposition: str, at: str, policy: DeadlinePolicy,
           *closers: Mapping[str, Any]) -> AlertState:
    nxt = policy.continuing_review_due(at) if disposition == Disposition.REPORT_FILED else None
    return replace(a, state=AlertStatus.CLOSED, disposition=disposition, closed_at=at, next_review_due=nxt,
                   pending=None, pending_by=None,
                   closed_by=canonical_bytes([dict(c) for c in closers]).decode(),
                   qa="due" if policy.qa_sampled(a.trace_id) else None)


def _certified(a: AlertState, actor: Mapping[str, Any], action: str) -> None:
    """Four-eyes steps need a certificate: two local CLI principals cannot be told apart."""
    if not actor.get("fingerprint_sha256"):
        raise CaseFourEyesError("principal", f"{action} on alert {a.seq} is a four-eyes step: it needs "
                                             "an officer's certificate (the console or the API), not the "
                                             "local CLI")


def _disposition(value: object) -> str:
    try:
        return Disposition(str(value)).value
    except ValueError:
        raise CaseError("disposition", f"{value!r} is not one of "
                                       f"{', '.join(d.value for d in Disposition)}") from None


def _proposer(actor: Mapping[str, Any]) -> str:
    return canonical_bytes(dict(actor)).decode()


def step(a: AlertState, action: str, actor: Mapping[str, Any], args: Mapping[str, Any], *, at: str,
         policy: DeadlinePolicy) -> Step:
    """``a`` after ``actor`` takes ``action`` with ``args`` at ``at`` under the alert's ``policy``.

    A proposal (releasing a BLOCK; a four-eyes false positive) keeps its proposer in
    ``pending_by``, and its approval by the same person is refused. Raises
    ``CaseConflictError`` when the action does not apply in the alert's state,
    ``CaseFourEyesError`` when the proposer approves their own proposal, ``CaseError`` for a
    bad argument. Pure: the same inputs give the same result in every process."""
    is_open = a.state != AlertStatus.CLOSED
    if action == "assign":
        _need(is_open, a, action, "it is closed")
        fp, subject = _who(args["assignee"])
        state = a.state if a.state in (AlertStatus.IN_REVIEW, AlertStatus.ESCALATED) else AlertStatus.ASSIGNED
        return Step(replace(a, state=state, assignee_fp=fp, assignee_subject=subject))
    if action == "start_review":
        _need(a.state in (AlertStatus.NEW, AlertStatus.ASSIGNED, AlertStatus.REOPENED, AlertStatus.ESCALATED),
              a, action, "it is not waiting for review")
        fp, subject = _who(actor)
        if a.assignee_fp is not None and not same_person({"fingerprint_sha256": a.assignee_fp,
                                                          "subject": a.assignee_subject or ""}, actor):
            raise CaseConflictError("assignee", f"alert {a.seq} is assigned to {a.assignee_subject}; "
                                                "assign it first")
        return Step(replace(a, state=AlertStatus.IN_REVIEW, assignee_fp=fp, assignee_subject=subject))
    if action == "escalate":
        _need(a.state in (AlertStatus.ASSIGNED, AlertStatus.IN_REVIEW, AlertStatus.REOPENED), a, action,
              "only an assigned alert or one in review is escalated")
        return Step(replace(a, state=AlertStatus.ESCALATED))
    if action == "close":
        disposition = _disposition(args.get("disposition"))
        _need(is_open, a, action, "it is closed already")
        _need(a.pending is None, a, action, f"{a.pending} awaits a second officer")
        _need(a.payment != Payment.HELD, a, action, "the held payment is not released or rejected yet")
        if disposition == Disposition.FALSE_POSITIVE and policy.four_eyes_false_positive:
            _certified(a, actor, "closing as a false positive")
            return Step(replace(a, pending=_PENDING_CLOSE, pending_by=_proposer(actor)))
        return Step(_close(a, disposition, at, policy, actor))
    if action == "reopen":
        _need(not is_open, a, action, "it is open")
        return Step(replace(a, state=AlertStatus.REOPENED, disposition=None, closed_at=None,
                            closed_by=None, next_review_due=None, qa=None))
    if action == "qa_review":
        _need(a.qa == "due", a, action, "it is not waiting for quality assurance")
        closers = orjson.loads(a.closed_by) if a.closed_by else []
        if any(same_person(c, actor) for c in closers):
            raise CaseFourEyesError("principal", f"{_who(actor)[1]} took part in closing alert {a.seq} and "
                                                 "cannot review their own closure")
        verdict = QaVerdict(str(args["verdict"]))
        return Step(replace(a, qa="agreed" if verdict is QaVerdict.AGREE else "disagreed"))
    if action == "comment":
        return Step(a)
    if action == "release":
        _need(a.payment == Payment.HELD, a, action, "no payment of it is held")
        _need(a.pending is None, a, action, f"{a.pending} awaits a second officer")
        if a.outcome == "BLOCK":  # four-eyes: another officer approves
            _certified(a, actor, "releasing a BLOCK")
            return Step(replace(a, pending="release", pending_by=_proposer(actor)))
        return Step(replace(a, payment=Payment.RELEASED), Payment.RELEASED)
    if action == "reject":
        _need(a.payment == Payment.HELD, a, action, "no payment of it is held")
        _need(a.pending is None, a, action, f"{a.pending} awaits a second officer")
        return Step(replace(a, payment=Payment.REJECTED), Payment.REJECTED)
    if action in ("approve", "refuse"):
        _need(a.pending is not None, a, action, "nothing awaits a second officer")
        if action == "refuse":
            return Step(replace(a, pending=None, pending_by=None))
        _certified(a, actor, "approving")
        proposer = orjson.loads(a.pending_by) if a.pending_by else {}
        if same_person(proposer, actor):
            raise CaseFourEyesError("principal", f"{_who(actor)[1]} proposed {a.pending} on alert {a.seq} "
                                                 "and cannot approve it too (four-eyes)")
        cleared = replace(a, pending=None, pending_by=None)
        if a.pending == "release":
            return Step(replace(cleared, payment=Payment.RELEASED), Payment.RELEASED)
        return Step(_close(cleared, Disposition.FALSE_POSITIVE, at, policy, proposer, actor))
    raise CaseError("action", f"{action!r} is not one of {', '.join(ACTIONS)}")
