"""The case page (``/console/cases/{case_id}``): one subject's alerts and everything officers did
about them, in ledger order, with the actions an officer may take next.

The timeline mixes each alert's decision (the payment laid out as a person reads it, the rules
that fired with the feature values their conditions read, the reason codes, the alert's state and
due dates) with each sealed ``case_event`` (who, when, what, their words, applied or why not) and
each ``annotation`` officers sealed on those decisions (who, when, disposition, note), in seq
order. The evidence under a decision (hashes, proof, fuel, batch) is one click below, on its
decision page. Reads are ``case_detail`` and ``get_traces`` (the case's decisions in a few
statements, not three each), and each view of the page is sealed as a ``case_read`` record
before it is shown (tipping-off, FATF R.21; as the API's case reads are); every action form
posts to one route that calls ``audit.cases.service.act``, as the API's action routes do, and a
refusal is shown on the page with the status the API would answer (422 bad input, 409 conflict,
403 four-eyes).

The Report section lists the reports filed on the case and the legal holds over their evidence,
and lets an officer draft the case's goAML STR (``draft_case_report``: nothing sealed; the
document shown) and file exactly the document shown (``file_case_report``: the legal hold first,
then the sealed ``file_report`` event), as ``/v1/cases/{case_id}/reports`` does.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode

import orjson
from defusedxml.ElementTree import ParseError, fromstring
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
from audit.cases.counterparties import counterparty_cases
from audit.cases.events import MAX_RATIONALE
from audit.cases.query import CaseDetail, CaseEvent, case_detail
from audit.cases.reads import record_reads
from audit.cases.reports import (
    Draft,
    FiledVersion,
    ReportHoldError,
    draft_case_report,
    file_case_report,
    list_case_reports,
    read_reporting_settings,
)
from audit.cases.service import act
from audit.cases.state import AlertState, AlertStatus, CaseState, Disposition, Payment
from audit.decide.runtime import Runtime
from audit.errors import CaseError, GovernanceError, ReportError
from audit.governance.state import same_person
from audit.query.traces import AnnotationView, get_traces
from inference.messages import Transaction
from inference.schema import SCORE_NAME
from ledger.records import now_utc
from ledger.retention import Hold, current_holds
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

__all__ = ["ALERT_ACTIONS", "CASE_ACTIONS", "TIMELINE_PAGE", "AnnotationItem", "Counterparty", "DecisionItem",
           "DraftView", "EventItem", "FiledItem", "RuleCheck", "TimelinePage", "parse_before",
           "parse_indicators", "parse_rates", "router"]

router = APIRouter(prefix="/console")
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "²", int() does not
log = logging.getLogger("sealtrail.console")

# What the action forms may ask for; drafting and filing a report have their own routes (below).
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


@dataclass(frozen=True)
class AnnotationItem:
    """An annotation sealed on the decision that opened one of the case's alerts, as sealed."""

    note: AnnotationView
    alert: AlertState
    kind: str = "annotation"

    @property
    def seq(self) -> int:
        return self.note.seq

    @property
    def body(self) -> dict[str, Any]:
        return self.note.body

    @property
    def principal(self) -> dict[str, Any]:
        p = self.note.body.get("principal")
        return p if isinstance(p, dict) else {}

    @property
    def correction(self) -> dict[str, Any] | None:
        c = self.note.body.get("correction")
        return c if isinstance(c, dict) else None


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


_PARSED_RULES: dict[tuple[str, str], dict[str, Rule]] = {}  # (ruleset@version, module SHA-256) -> its rules
_PARSED_MAX = 64


class _Rulesets:
    """The rules of the rulesets decisions name, from their sealed proposal records, once a view.
    A ruleset version's sealed source never changes, so the rules parsed from it are kept for the
    process (by version and module SHA-256, a few dozen at most); a source not found is looked up
    again by the next view."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._seen: dict[str, dict[str, Rule]] = {}

    def rules(self, body: dict[str, Any]) -> dict[str, Rule]:
        r = body.get("rules")
        if not isinstance(r, dict):
            return {}
        key = f"{r.get('ruleset_id')}@{r.get('version')}"
        if key not in self._seen:
            kept = _PARSED_RULES.get((key, str(r.get("module_sha256"))))
            self._seen[key] = {} if kept is None else kept
            if kept is None:
                try:
                    proposal = self._rt.governance.proposal(key)
                    source = proposal.get("source")
                    # only the source of the very module that decided: another would state other conditions
                    if proposal.get("module_sha256") == r.get("module_sha256") and isinstance(source, str):
                        self._seen[key] = {x.id: x for x in parse_ruleset(source).rules}
                        if len(_PARSED_RULES) >= _PARSED_MAX:
                            _PARSED_RULES.clear()
                        _PARSED_RULES[(key, str(r.get("module_sha256")))] = self._seen[key]
                except (GovernanceError, RuleError) as exc:
                    log.info("no rule source for %s: %s", key, exc)
        return self._seen[key]


def rule_checks(body: dict[str, Any], rules: dict[str, Rule]) -> tuple[RuleCheck, ...]:
    """Each fired rule of a decision body with the values its condition compared."""
    named: list[tuple[str, Any]] | None = None  # decoded once, and only for a rule whose source is known
    by_name: dict[str, Any] = {}
    out = []
    fired = body.get("fired")
    for h in fired if isinstance(fired, list) else []:
        if not isinstance(h, dict):
            continue
        rule = rules.get(str(h.get("id", "")))
        values: list[tuple[str, float | None]] = []
        if rule is not None:
            if named is None:
                named = _features(body)
                by_name = dict(named)
                by_name[SCORE_NAME] = _score(body)  # what the model-score bands read: the recorded score
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


TIMELINE_PAGE = 100  # timeline entries a page shows; older ones are a keyset page away (``?before=<seq>``)


@dataclass(frozen=True)
class TimelinePage:
    """One page of the timeline: the entries shown (oldest first), how many the whole timeline
    holds of each kind, and the ``before`` of the older and newer pages (None: there is none; for
    ``newer``, ``0`` is the newest page, which takes no ``before``)."""

    items: list[DecisionItem | EventItem | AnnotationItem]
    total: int
    counts: dict[str, int]
    before: int | None  # the cursor this page was asked for
    older: int | None
    newer: int | None

    @property
    def seqs(self) -> set[int]:
        return {i.seq for i in self.items}


def _timeline(rt: Runtime, caller: Caller, detail: CaseDetail, today: str,
              before: int | None = None) -> TimelinePage:
    """The newest ``TIMELINE_PAGE`` entries of the timeline older than ``before`` (all, without):
    which entries they are is known from the case's rows alone, so only the decisions shown get
    their records read (``get_traces``), their payments parsed and their rules checked."""
    notes = [(n.seq, n, a) for a in detail.alerts for n in detail.annotations_of(a)]
    keys = sorted([(a.seq, "decision") for a in detail.alerts] + [(e.seq, "event") for e in detail.events]
                  + [(seq, "annotation") for seq, _, _ in notes])
    end = len(keys) if before is None else bisect.bisect_left(keys, (before, ""))
    start = max(0, end - TIMELINE_PAGE)
    shown = {seq for seq, _ in keys[start:end]}
    older = keys[start][0] if start > 0 else None
    newer = None if end >= len(keys) else (keys[end + TIMELINE_PAGE][0] if end + TIMELINE_PAGE < len(keys)
                                           else 0)
    parsed: dict[tuple[str, str], list[Transaction]] = {}
    rulesets = _Rulesets(rt)
    items: list[DecisionItem | EventItem | AnnotationItem] = []
    mine = [a for a in detail.alerts if a.seq in shown]
    traces = get_traces(rt.engine, [a.trace_id for a in mine])  # one read for those shown, not one each
    for a in mine:
        trace = traces.get(a.trace_id.lower()) if isinstance(a.trace_id, str) else None
        if trace is None:
            items.append(DecisionItem(a.seq, a, a.opened_at, {}, PaymentView("absent"), (), None,
                                      a.open and a.review_due < today))
            continue
        body = trace.body
        items.append(DecisionItem(a.seq, a, trace.recorded_at, body, read_payment(trace, caller, parsed),
                                  rule_checks(body, rulesets.rules(body)), _score(body),
                                  a.open and a.review_due < today))
    by_seq = {a.seq: a for a in detail.alerts}
    items += [EventItem(ev, _event_words(ev, by_seq)) for ev in detail.events if ev.seq in shown]
    items += [AnnotationItem(n, a) for seq, n, a in notes if seq in shown]
    counts = Counter(kind for _, kind in keys)
    return TimelinePage(sorted(items, key=lambda i: i.seq), len(keys),
                        {k: counts.get(k, 0) for k in ("decision", "event", "annotation")},
                        before, older, newer)


def parse_before(text: str | None) -> int | None:
    """The timeline's ``before`` cursor: a seq (the newest page without one). Anything else is
    refused (422), as the queue refuses a cursor it did not issue, before the case is read."""
    if text is None or text == "":
        return None
    if not _DIGITS.fullmatch(text):
        raise Problem(422, "invalid_request", f"before={text[:40]!r} is not a seq: the timeline's older "
                      "pages are reached by their links (before=<seq>)",
                      [{"field": "before", "message": "must be a seq (digits), as the page's links give it"}])
    return int(text)


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
    at: str = ""  # the input it belongs to, where ``field`` is none (``transactions[0].amount_local``)


@dataclass(frozen=True)
class FiledItem:
    """A report filed on the case, with its two legal holds: (hold id, the hold while it is active;
    None once released)."""

    version: FiledVersion
    holds: tuple[tuple[str, Hold | None], ...]


@dataclass(frozen=True)
class DraftRow:
    """A transaction of a drafted report, as the page lists it."""

    number: str
    date: str
    amount: str
    decision_seq: int | None = None


@dataclass(frozen=True)
class DraftView:
    """A drafted report as the page shows it: the document's text and SHA-256, what it amends, its
    transactions."""

    xml: str
    sha256: str
    amends: str | None
    rows: tuple[DraftRow, ...] = ()


def _context(rt: Runtime, caller: Caller, case_id: int, before: int | None = None) -> dict[str, Any]:
    """What the page shows of ``case_id`` (404 if none), the timeline's page older than ``before``;
    the read, of the case and of its counterparties' cases (as a page of the queue is read), is
    sealed first, in one record (503 if it cannot be)."""
    detail = case_detail(rt.engine, case_id)
    others = counterparty_cases(rt.engine, case_id)
    record_reads(rt.ledger, caller.principal, [{"case": case_id, "what": "case"}]
                 + [{"case": o.case_id, "what": "queue"} for o in others])
    today = today_of(rt)
    me = caller.principal.to_json()

    def by_me(pending_by: str | None) -> bool:
        return bool(pending_by) and same_person(_proposer(pending_by), me)

    c = detail.case
    links = [int(x) for x in c.links.split(",") if x]
    page = _timeline(rt, caller, detail, today.isoformat(), before)
    here = f"/console/cases/{case_id}"

    def at(seq: int, anchor: str) -> str:
        """A link to a timeline entry: its anchor on this page, or the page that ends with it."""
        return f"#{anchor}" if seq in page.seqs else f"{here}?{urlencode({'before': seq + 1})}#{anchor}"

    return {**_report_context(rt, c),
            "detail": detail, "case": c, "timeline": page.items, "page": page, "at": at, "here": here,
            "today": today, "subject": subject_label(c.subject), "links": links,
            "others": [Counterparty(o, subject_label(o.subject), o.case_id in links) for o in others],
            "link_to": "", "by_me": by_me,
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


@dataclass(frozen=True)
class Counterparty:
    """A counterparty's case as the page lists it: the case, its subject as the page labels
    subjects, and whether this case already links it."""

    case: CaseState
    label: str
    linked: bool


def _report_context(rt: Runtime, c: CaseState) -> dict[str, Any]:
    """The Report section: the filed versions with their holds, and whether drafting is configured.
    A case on which no report was filed (its row counts them) reads nothing more."""
    versions = list_case_reports(rt.engine, c.case_id) if c.reports else []
    active = {h.hold_id: h for h in current_holds(rt.engine)} if versions else {}
    filed = [FiledItem(v, tuple((h, active.get(h)) for h in (v.hold_id, f"{v.hold_id}.report")))
             for v in versions]
    return {"filed": filed, "reporting": rt.settings.reporting_entity is not None, "draft": None, "typed": {}}


def _before_of(raw: dict[str, str]) -> int | None:
    """The timeline page an action form was posted from (its hidden ``before``), to come back to;
    anything but a seq is the newest page."""
    text = raw.get("before", "")
    return int(text) if _DIGITS.fullmatch(text) else None


@router.get("/cases/{case_id}")
def case_page(request: Request, case_id: int) -> HTMLResponse:
    """A case: its header, its counterparties' cases, its report in force, a page of its timeline
    (the newest, or the one older than ``?before=<seq>``), and the actions open to the caller;
    ``?link_to=<case id>`` types that case's number into the link form (nothing else is chosen)."""
    caller = page_caller(request, "cases.get")
    rt: Runtime = request.app.state.runtime
    params = request.query_params
    before = parse_before(params.get("before"))  # refused before anything is read or sealed
    ctx = _context(rt, caller, case_id, before)
    sealed = params.get("sealed", "")
    if _DIGITS.fullmatch(sealed):
        ctx["sealed"] = next((e for e in ctx["detail"].events if e.seq == int(sealed)), None)
    link_to = params.get("link_to", "")
    if _DIGITS.fullmatch(link_to):  # a counterparty's "Link": the case number typed for the officer
        ctx["link_to"] = link_to
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

    before = _before_of(raw)

    async def refuse(failure: Failure) -> HTMLResponse:
        ctx = await run_in_threadpool(_context, rt, caller, case_id, before)
        return render(request, "case.html", caller, status=failure.status, **{**ctx, "failure": failure})

    def bad(name: str, message: str) -> Failure:
        return Failure(form_id, 422, "invalid_request", name, message, values)

    if alert_text and not _DIGITS.fullmatch(alert_text):
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
        if not _DIGITS.fullmatch(text):
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
    back = {"sealed": receipt.seq} if before is None or alert is None else {"before": before,
                                                                              "sealed": receipt.seq}
    return RedirectResponse(f"/console/cases/{case_id}?{urlencode(back)}#{where}", status_code=303)


# -- the report: drafted (nothing sealed), then filed under legal hold -------------------------------

_DRAFT_FIELDS = ("reason", "indicators", "action", "rates")
_RATE_LINE = re.compile(r"([A-Za-z]{3})\s*=\s*([0-9]{1,12}(?:\.[0-9]{1,12})?)")
_SHA = re.compile(r"[0-9a-f]{64}")
UNCONFIGURED = ("drafting a report needs the reporting-entity file: set SEALTRAIL_REPORTING_ENTITY "
                "(docs/goaml.md, example docs/reporting-entity.example.toml)")


def _input_of(fault: str) -> str:
    """The draft form's input a refusal's field belongs to ('' for none: shown above the form)."""
    if fault.startswith(("reason", "indicators", "action", "rates")):
        return fault.split("[", 1)[0].split(".", 1)[0]
    return "rates" if fault.endswith(".amount_local") else ""


def _report_refused(form: str, exc: CaseError | ReportError, values: dict[str, str]) -> Failure:
    status, kind, _ = audit_problem(exc)
    fault, why = (exc.field, exc.why) if isinstance(exc, ReportError) else (exc.field, exc.message)
    at = _input_of(fault) if form == "report-draft" else fault
    return Failure(form, status, kind, fault, why, values, at)


def parse_indicators(text: str) -> list[str]:
    """The indicator codes typed, separated by commas or lines."""
    return [c.strip() for c in re.split(r"[,\n]", text) if c.strip()]


def parse_rates(text: str) -> dict[str, Decimal]:
    """The rates typed, one ``CCY=RATE`` a line; ``ValueError`` naming the line that is not one."""
    out: dict[str, Decimal] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _RATE_LINE.fullmatch(line.strip())
        if m is None:
            raise ValueError(f"line {n}, {line.strip()!r}, is not CCY=RATE (USD=0.9215)")
        ccy = m[1].upper()
        if ccy in out:
            raise ValueError(f"line {n} gives a second rate for {ccy}")
        try:
            out[ccy] = Decimal(m[2])
        except InvalidOperation:  # the pattern admits only decimals; kept for the type's sake
            raise ValueError(f"line {n}: {m[2]!r} is not a rate") from None
    return out


def _from_draft(d: Draft, amends: str | None) -> DraftView:
    rows = tuple(DraftRow(t.number, t.date.isoformat(), f"{t.currency} {t.amount:,}"
                          + (f" (local {t.amount_local:,})" if t.amount_local is not None else ""), seq)
                 for t, seq in zip(d.transactions, d.decision_seqs, strict=True))
    return DraftView(d.xml.decode("utf-8"), d.sha256, amends, rows)


def _from_document(xml: bytes, sha: str, amends: str | None) -> DraftView:
    """A document posted back for filing, shown again; its transactions as the document lists them."""
    rows: list[DraftRow] = []
    try:
        doc = fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True)
        local = doc.findtext("currency_code_local") or ""
        rows = [DraftRow(t.findtext("transactionnumber") or "", t.findtext("date_transaction") or "",
                         f"{local} {t.findtext('amount_local') or ''}".strip())
                for t in doc.iter("transaction")]
    except ParseError:
        pass  # the refusal says why; the text is still shown
    return DraftView(xml.decode("utf-8", errors="replace"), sha, amends, tuple(rows))


@router.post("/cases/{case_id}/reports/draft")
async def report_draft(request: Request, case_id: int) -> Response:
    """Draft the case's STR from the form (the reporting-entity file, the officer's reason,
    indicators, action and rates) and show it with the form that files it; nothing is sealed.
    A refusal is shown at the form with what was typed and the API's status (409: no
    reporting-entity file, or the report in force changed)."""
    caller = page_caller(request, "cases.act")
    raw = await read_form(request)
    values = {k: raw.get(k, "") for k in _DRAFT_FIELDS}
    rt: Runtime = request.app.state.runtime

    async def refuse(failure: Failure) -> HTMLResponse:
        ctx = await run_in_threadpool(_context, rt, caller, case_id)
        return render(request, "case.html", caller, status=failure.status, **{**ctx, "failure": failure})

    def bad(name: str, message: str) -> Failure:
        return Failure("report-draft", 422, "invalid_request", name, message, values, name)

    path = rt.settings.reporting_entity
    if path is None:
        return await refuse(Failure("report-draft", 409, "reporting_entity_unconfigured",
                                    "SEALTRAIL_REPORTING_ENTITY", UNCONFIGURED, values))
    try:
        reporting = await run_in_threadpool(read_reporting_settings, path)
    except ReportError as exc:
        return await refuse(Failure("report-draft", 409, "reporting_entity_invalid",
                                    f"SEALTRAIL_REPORTING_ENTITY:{exc.field}",
                                    f"the reporting-entity file does not read: {exc.why}", values))
    if not values["reason"].strip():
        return await refuse(bad("reason", "write the reason: why these transactions are suspicious"))
    indicators = parse_indicators(values["indicators"])
    if not indicators:
        return await refuse(bad("indicators", "give at least one of the FIU's indicator codes"))
    try:
        rates = parse_rates(values["rates"])
    except ValueError as exc:
        return await refuse(bad("rates", str(exc)))
    detail = await run_in_threadpool(case_detail, rt.engine, case_id)  # 404 if there is no such case
    amends = detail.case.last_report  # a new version amends the report in force
    try:
        drafted = await run_in_threadpool(
            lambda: draft_case_report(rt.engine, case_id, reporting, reason=values["reason"],
                                      indicators=indicators, action=values["action"].strip() or None,
                                      submission_date=now_utc(), amends=amends, rates=rates))
    except (CaseError, ReportError) as exc:  # a purged payload, a missing rate, a bad code, a race
        return await refuse(_report_refused("report-draft", exc, values))
    ctx = await run_in_threadpool(_context, rt, caller, case_id)
    return render(request, "case.html", caller, **{**ctx, "draft": _from_draft(drafted, amends),
                                                    "typed": values})


@router.post("/cases/{case_id}/reports")
async def report_file(request: Request, case_id: int) -> Response:
    """File the document the page showed (``xml``, checked against the ``sha256`` shown with it, so
    exactly the bytes shown are filed): the legal hold, then the sealed ``file_report`` event;
    back to the case (303). Refused: the page with the draft and the refusal at the form."""
    caller = page_caller(request, "cases.act")
    raw = await read_form(request)
    values = {"rationale": raw.get("rationale", "")}
    sha, amends = raw.get("sha256", ""), raw.get("amends", "") or None
    rt: Runtime = request.app.state.runtime
    xml = raw.get("xml", "").encode("utf-8")

    async def refuse(failure: Failure, draft: DraftView | None) -> HTMLResponse:
        ctx = await run_in_threadpool(_context, rt, caller, case_id)
        return render(request, "case.html", caller, status=failure.status,
                      **{**ctx, "failure": failure, "draft": draft})

    if not _SHA.fullmatch(sha) or hashlib.sha256(xml).hexdigest() != sha:
        return await refuse(Failure("report-draft", 422, "invalid_request", "xml",
                                    f"the document sent is not the one shown (SHA-256 {sha[:64]!r}): "
                                    "nothing was filed; draft it again", {}), None)
    if amends is not None and not _SHA.fullmatch(amends):
        return await refuse(Failure("report-file", 422, "invalid_request", "amends",
                                    "must be the SHA-256 of the report in force", values), None)
    shown = _from_document(xml, sha, amends)
    try:
        filed = await run_in_threadpool(
            lambda: file_case_report(rt.ledger, case_id, xml, caller.principal, rationale=values["rationale"],
                                     amends=amends))
    except (CaseError, ReportError) as exc:  # nothing sealed: the hold, if placed, was released
        return await refuse(_report_refused("report-file", exc, values), shown)
    except ReportHoldError as exc:  # filed and sealed, but the hold on the document's own bytes failed
        log.error("%s", exc)
        return await refuse(Failure("report-file", 500, "report_hold_failed", "hold", str(exc), values), None)
    return RedirectResponse(f"/console/cases/{case_id}?{urlencode({'sealed': filed.seq})}#report",
                            status_code=303)
