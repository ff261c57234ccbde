"""The case page (``/console/cases/{case_id}``): one subject's alerts and everything officers did
about them, in ledger order, with the actions an officer may take next.

The timeline mixes each alert's decision (the payment laid out as a person reads it, the rules
that fired with the feature values their conditions read, the reason codes, the alert's state and
due dates) with each sealed ``case_event`` (who, when, what, their words, applied or why not), in
seq order. The evidence under a decision (hashes, proof, fuel, batch) is one click below, on its
decision page. Reads are ``case_detail`` and ``get_trace``, and each view of the page is sealed
as a ``case_read`` record before it is shown (tipping-off, FATF R.21; as the API's case reads
are); every form posts to one route that
calls ``audit.cases.service.act``, as the API's action routes do, and a refusal is shown on the
page with the status the API would answer (422 bad input, 409 conflict, 403 four-eyes).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from api.access import may
from api.auth import Caller
from api.console.alerts import PaymentView, age_days, read_payment, subject_label, today_of
from api.console.decision import _features, _score
from api.console.forms import read_form
from api.console.render import page_caller, render
from api.problems import Problem, audit_problem
from audit.cases.events import MAX_RATIONALE
from audit.cases.query import CaseDetail, CaseEvent, case_detail
from audit.cases.reads import record_reads
from audit.cases.service import act
from audit.cases.state import AlertState, AlertStatus, Disposition, Payment
from audit.decide.runtime import Runtime
from audit.errors import CaseError, GovernanceError, QueryError
from audit.governance.state import same_person
from audit.query.traces import get_trace
from inference.messages import Transaction
from wasm_rules import RuleError
from wasm_rules.language import (
    Arith,
    BoolOp,
    Call,
    Compare,
    Expr,
    Feature,
    InSet,
    Neg,
    Not,
    Rule,
    parse_ruleset,
)

__all__ = ["ALERT_ACTIONS", "CASE_ACTIONS", "DecisionItem", "EventItem", "RuleCheck", "router"]

router = APIRouter(prefix="/console")
log = logging.getLogger("sealtrail.console")

# What the page's forms may ask for; filing a report has its own page (api/routes/reports.py).
ALERT_ACTIONS = ("assign", "start_review", "escalate", "close", "reopen", "release", "reject", "approve",
                 "refuse", "qa_review")
CASE_ACTIONS = ("assign", "comment", "close", "link", "approve", "refuse")
_FORM_FIELDS = ("rationale", "disposition", "link", "verdict")
_DONE = {"assign": "assigned", "start_review": "started the review", "escalate": "escalated",
         "close": "closed", "reopen": "reopened", "comment": "commented", "release": "released the payment",
         "reject": "rejected the payment", "approve": "approved", "refuse": "refused", "link": "linked",
         "file_report": "filed a report", "qa_review": "recorded a quality-review verdict"}


# -- the timeline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleCheck:
    """A fired rule: its outcome and reason as sealed, its condition as its ruleset's recorded
    source states it (None where that source is not the module the decision ran), and the value of
    each feature the condition reads, as this decision's feature row holds it."""

    id: str
    outcome: str
    reason: str
    when: str | None
    values: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class DecisionItem:
    """A decision that opened one of the case's alerts, with that alert as it is now."""

    seq: int
    alert: AlertState
    recorded_at: str
    body: dict[str, Any]
    payment: PaymentView
    rules: tuple[RuleCheck, ...]
    score: float | None
    overdue: bool
    kind: str = "decision"


@dataclass(frozen=True)
class EventItem:
    """A sealed case event, and what it did in words."""

    event: CaseEvent
    what: str
    kind: str = "event"

    @property
    def seq(self) -> int:
        return self.event.seq


def _reads(e: Expr) -> list[Feature]:
    """The features an expression reads, in the order written."""
    if isinstance(e, Feature):
        return [e]
    if isinstance(e, Neg | Not):
        return _reads(e.operand)
    if isinstance(e, Arith | Compare):
        return [*_reads(e.left), *_reads(e.right)]
    if isinstance(e, Call):
        return [f for a in e.args for f in _reads(a)]
    if isinstance(e, InSet):
        return _reads(e.operand)
    if isinstance(e, BoolOp):
        return [f for a in e.operands for f in _reads(a)]
    return []


class _Rulesets:
    """The rules of the rulesets decisions name, from their sealed proposal records, once a view."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._seen: dict[str, dict[str, Rule]] = {}

    def rules(self, body: dict[str, Any]) -> dict[str, Rule]:
        r = body.get("rules")
        if not isinstance(r, dict):
            return {}
        key = f"{r.get('ruleset_id')}@{r.get('version')}"
        if key not in self._seen:
            self._seen[key] = {}
            try:
                proposal = self._rt.governance.proposal(key)
                source = proposal.get("source")
                # only the source of the very module that decided: another would state other conditions
                if proposal.get("module_sha256") == r.get("module_sha256") and isinstance(source, str):
                    self._seen[key] = {x.id: x for x in parse_ruleset(source).rules}
            except (GovernanceError, RuleError) as exc:
                log.info("no rule source for %s: %s", key, exc)
        return self._seen[key]


def rule_checks(body: dict[str, Any], rules: dict[str, Rule]) -> tuple[RuleCheck, ...]:
    """Each fired rule of a decision body with the values its condition compared."""
    named = _features(body)
    by_name = dict(named)
    out = []
    fired = body.get("fired")
    for h in fired if isinstance(fired, list) else []:
        if not isinstance(h, dict):
            continue
        rule = rules.get(str(h.get("id", "")))
        values: list[tuple[str, float | None]] = []
        if rule is not None:
            for f in dict.fromkeys(_reads(rule.expr)):
                if f.name in by_name:
                    values.append((f.name, by_name[f.name]))
                elif f.index < len(named):
                    values.append((f.name, named[f.index][1]))
        out.append(RuleCheck(str(h.get("id", "")), str(h.get("outcome", "")), str(h.get("reason", "")),
                             None if rule is None else rule.when, tuple(values)))
    return tuple(out)


def _proposer(pending_by: str | None) -> dict[str, Any]:
    try:
        got = orjson.loads(pending_by) if pending_by else {}
    except orjson.JSONDecodeError:
        return {}
    return got if isinstance(got, dict) else {}


def pending_label(pending: str | None) -> str:
    """What a proposal awaiting a second officer is, in words."""
    if pending == "release":
        return "releasing the held payment"
    if pending and pending.startswith("close:"):
        return f"closing as {pending.split(':', 1)[1]}"
    return pending or ""


def _event_words(ev: CaseEvent, alerts: dict[int, AlertState]) -> str:
    """What an event did, in words (its arguments and whether it applied are shown beside it)."""
    done = _DONE.get(ev.action, ev.action)
    a = alerts.get(ev.alert_seq) if ev.alert_seq is not None else None
    if ev.action == "release" and a is not None and a.outcome == "BLOCK":
        done = "proposed releasing the blocked payment (a second officer approves)"
    if ev.action == "assign" and ev.assignee:
        who = ev.assignee.get("subject", "")
        done += " to themselves" if ev.assignee.get("fingerprint_sha256") == ev.principal.get(
            "fingerprint_sha256") else f" to {who}"
    if ev.action == "link" and ev.link is not None:
        done += f" case {ev.link}"
    return done


def _timeline(rt: Runtime, caller: Caller, detail: CaseDetail, today: str) -> list[DecisionItem | EventItem]:
    parsed: dict[tuple[str, str], list[Transaction]] = {}
    rulesets = _Rulesets(rt)
    items: list[DecisionItem | EventItem] = []
    for a in detail.alerts:
        try:
            trace = get_trace(rt.engine, a.trace_id)
        except QueryError:
            trace = None
        if trace is None:
            items.append(DecisionItem(a.seq, a, a.opened_at, {}, PaymentView("absent"), (), None,
                                      a.open and a.review_due < today))
            continue
        body = trace.body
        items.append(DecisionItem(a.seq, a, trace.recorded_at, body, read_payment(trace, caller, parsed),
                                  rule_checks(body, rulesets.rules(body)), _score(body),
                                  a.open and a.review_due < today))
    by_seq = {a.seq: a for a in detail.alerts}
    items += [EventItem(ev, _event_words(ev, by_seq)) for ev in detail.events]
    return sorted(items, key=lambda i: i.seq)


# -- the page -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """An action refused: which form (so its error sits there, with what was typed), the status the
    API would answer, the field at fault and why."""

    form: str
    status: int
    kind: str
    field: str
    message: str
    values: dict[str, str]  # what was typed, to show again


def _context(rt: Runtime, caller: Caller, case_id: int) -> dict[str, Any]:
    """What the page shows of ``case_id`` (404 if none); the read is sealed first (503 if it cannot be)."""
    detail = case_detail(rt.engine, case_id)
    record_reads(rt.ledger, caller.principal, [{"case": case_id, "what": "case"}])
    today = today_of(rt)
    me = caller.principal.to_json()

    def by_me(pending_by: str | None) -> bool:
        return bool(pending_by) and same_person(_proposer(pending_by), me)

    c = detail.case
    return {"detail": detail, "case": c, "timeline": _timeline(rt, caller, detail, today.isoformat()),
            "today": today, "subject": subject_label(c.subject),
            "links": [int(x) for x in c.links.split(",") if x], "by_me": by_me,
            "proposer": lambda p: _proposer(p).get("subject", ""), "pending_label": pending_label,
            "age": lambda at: age_days(at, today), "dispositions": [d.value for d in Disposition],
            "waiting": (AlertStatus.NEW, AlertStatus.ASSIGNED, AlertStatus.REOPENED, AlertStatus.ESCALATED),
            "escalable": (AlertStatus.ASSIGNED, AlertStatus.IN_REVIEW, AlertStatus.REOPENED),
            "held": Payment.HELD, "me_fp": caller.principal.fingerprint_sha256,
            "held_open": [a.seq for a in detail.alerts if a.open and a.payment == Payment.HELD],
            # a case closed alert by alert has no disposition of its own: its alerts' say how
            "closed_as": sorted(Counter(a.disposition for a in detail.alerts if a.disposition).items()),
            "acts": may("alerts.act", caller.roles), "acts_case": may("cases.act", caller.roles),
            "max_rationale": MAX_RATIONALE, "failure": None, "sealed": None, "section": "alerts"}


@router.get("/cases/{case_id}")
def case_page(request: Request, case_id: int) -> HTMLResponse:
    """A case: its header, its timeline, its report in force, and the actions open to the caller."""
    caller = page_caller(request, "cases.get")
    rt: Runtime = request.app.state.runtime
    ctx = _context(rt, caller, case_id)
    sealed = request.query_params.get("sealed", "")
    if sealed.isdigit():
        ctx["sealed"] = next((e for e in ctx["detail"].events if e.seq == int(sealed)), None)
    return render(request, "case.html", caller, **ctx)


def _refused(form: str, exc: CaseError, values: dict[str, str]) -> Failure:
    status, kind, _ = audit_problem(exc)
    return Failure(form, status, kind, exc.field, exc.message, values)


@router.post("/cases/{case_id}/act")
async def case_act(request: Request, case_id: int) -> Response:
    """Take one action on the case or one of its alerts (the form's ``action`` and ``alert``);
    sealed: back to the case (303). Refused: the case page with the refusal at its form, with the
    API's status; nothing is sealed unless the refusal says it was (an event that lost a race)."""
    caller = page_caller(request, "cases.act")
    raw = await read_form(request)
    alert_text, action, form_id = raw.get("alert", ""), raw.get("action", ""), raw.get("form", "")[:64]
    values = {k: raw.get(k, "") for k in _FORM_FIELDS}
    if alert_text:
        caller = page_caller(request, "alerts.act")
    rt: Runtime = request.app.state.runtime

    async def refuse(failure: Failure) -> HTMLResponse:
        ctx = await run_in_threadpool(_context, rt, caller, case_id)
        return render(request, "case.html", caller, status=failure.status, **{**ctx, "failure": failure})

    def bad(name: str, message: str) -> Failure:
        return Failure(form_id, 422, "invalid_request", name, message, values)

    if alert_text and not alert_text.isdigit():
        return await refuse(bad("alert", f"{alert_text!r} is not an alert number"))
    allowed = ALERT_ACTIONS if alert_text else CASE_ACTIONS
    if action not in allowed:
        return await refuse(bad("action", f"{action!r} is not one of {', '.join(allowed)}"
                                          f" (on {'an alert' if alert_text else 'a case'})"))
    detail = await run_in_threadpool(case_detail, rt.engine, case_id)  # 404 if there is no such case
    alert = int(alert_text) if alert_text else None
    if alert is not None and alert not in {a.seq for a in detail.alerts}:
        raise Problem(404, "not_found", f"case {case_id} holds no alert {alert}",
                      [{"field": "alert", "message": "not an alert of this case"}])
    disposition = values["disposition"] or None
    if action == "close" and disposition is None:
        return await refuse(bad("disposition", "choose a disposition: none is chosen for you"))
    verdict = values["verdict"] or None
    if action == "qa_review" and verdict is None:
        return await refuse(bad("verdict", "choose a verdict: none is chosen for you"))
    link: int | None = None
    if action == "link":
        text = values["link"].strip().removeprefix("#")
        if not text.isdigit():
            return await refuse(bad("link", "give the number of the case to link (its page's title says it)"))
        link = int(text)
    rationale = values["rationale"] if values["rationale"].strip() else None
    try:
        receipt = await run_in_threadpool(
            lambda: act(rt.ledger, caller.principal, action, alert=alert, case=None if alert else case_id,
                        rationale=rationale, assignee=caller.principal if action == "assign" else None,
                        disposition=disposition if action == "close" else None, link=link,
                        verdict=verdict if action == "qa_review" else None))
    except CaseError as exc:  # 422 bad input, 409 conflict, 403 four-eyes, 404 no such target
        return await refuse(_refused(form_id, exc, values))
    where = f"alert-{alert}" if alert is not None else "case-actions"
    return RedirectResponse(f"/console/cases/{case_id}?{urlencode({'sealed': receipt.seq})}#{where}",
                            status_code=303)
