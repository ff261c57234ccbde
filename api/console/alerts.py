"""The alert queue (``/console/alerts``): the officer's home, one keyset page of alerts at a time.

The tabs are views of :class:`audit.cases.query.AlertFilter` (``mine`` is the caller's
certificate fingerprint; ``overdue`` is judged against today's UTC date from the runtime's
clock), read by ``alert_page``, the function ``GET /v1/alerts`` reads. Each row lays the payment
out as a person reads it, from the decision's sealed payload (or says it is purged), parsed as
the ledger index parses it: the transaction in the payload whose hash the record seals. A page
that lists alerts is a read of their cases: it is sealed as one ``case_read`` record (``what``:
``queue``) before it is shown (tipping-off, FATF R.21). Bulk "assign to me" seals one
``case_event`` per alert through ``audit.cases.service.act``, as the API's action route does; the
cross-site guard (``api.csrf``) protects the form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from api.access import PAYLOAD_ROLES, may
from api.auth import Caller
from api.console.forms import read_form
from api.console.render import page_caller, render
from api.problems import audit_problem
from audit.cases.query import AlertFilter, AlertPage, alert_page
from audit.cases.reads import record_reads
from audit.cases.service import act
from audit.cases.state import ALERT_OUTCOMES, AlertState
from audit.decide.runtime import Runtime
from audit.errors import CaseError
from audit.query.traces import TraceDetail, get_traces
from audit.screening.evidence import sealed_hits
from inference.messages import MessageError, Transaction, parse_messages, transaction_schema_of

__all__ = ["PAGE", "TABS", "PaymentView", "QueueForm", "QueueRow", "age_days", "parse_queue", "read_payment",
           "router", "subject_label", "today_of"]

router = APIRouter(prefix="/console")
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "²", int() does not

PAGE = 50  # rows a page; the bulk form's checkboxes stay under read_form's 64 fields
TABS = (("mine", "Mine"), ("unassigned", "Unassigned"), ("overdue", "Overdue"), ("open", "Open"),
        ("closed", "Closed"), ("qa", "Quality review"))
_ORDERS = (("newest", "Newest first"), ("oldest", "Oldest first"))
_FIELDS = ("view", "outcome", "rule", "order")
_PICK = "alert-"  # a checkbox per alert: read_form keeps one value per name, so each has its own


def today_of(rt: Runtime) -> date:
    """Today's UTC date by the runtime's clock (the one that stamps sealed records)."""
    return rt.ledger.clock().astimezone(UTC).date()


def age_days(opened_at: str, today: date) -> int:
    """Whole UTC days from the day an alert opened to ``today``."""
    return (today - date.fromisoformat(opened_at[:10])).days


def subject_label(subject: str) -> str:
    """A case subject as a person reads it: ``account ••••<last 6 of the keyed account>``, or the
    decision a case stands for alone. The key is already a keyed hash, never the account."""
    kind, _, key = subject.partition(":")
    if kind == "account" and key:
        return f"account ••••{key[-6:]}"
    if kind == "decision" and key:
        return f"decision {key}"
    return subject


# -- the payment, read from the decision's payload ------------------------------------------------


@dataclass(frozen=True)
class PaymentView:
    """The payment of one decision as this caller may read it. ``state``: ``present`` (``tx`` is
    the sealed transaction), ``purged``, ``withheld`` (this role reads no payment data), ``absent``
    (the hash is sealed but the payload row is missing: damage), ``unreadable`` (no transaction in
    the payload hashes to the sealed one), ``none`` (the record has no payload)."""

    state: str
    tx: Transaction | None = None


def read_payment(detail: TraceDetail, caller: Caller,
                 parsed: dict[tuple[str, str], list[Transaction]] | None = None) -> PaymentView:
    """The transaction ``detail`` seals, from its payload; ``parsed`` caches a payload's messages
    (the decisions of one file share it) within one page view."""
    if detail.payload is None:
        return PaymentView(detail.payload_state)
    if not caller.roles & PAYLOAD_ROLES:
        return PaymentView("withheld")
    inp: Any = detail.body.get("input")
    try:
        fmt, want = str(inp["format"]), str(inp["transaction_sha256"])
        schema = transaction_schema_of(inp.get("parser"))
    except (KeyError, TypeError, ValueError):
        return PaymentView("unreadable")
    key = (detail.payload_sha256 or "", fmt)
    cache = parsed if parsed is not None else {}
    if key not in cache:
        try:
            got = parse_messages(detail.payload, fmt)  # type: ignore[arg-type]
        except (MessageError, ValueError):
            got = []
        cache[key] = [t for t in got if isinstance(t, Transaction)]
    tx = next((t for t in cache[key] if t.sha256_of(schema) == want), None)
    return PaymentView("unreadable") if tx is None else PaymentView("present", tx)


# -- the queue ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueForm:
    """The queue's view and filters as typed, the filter they make, and each refused value."""

    values: dict[str, str]
    cursor: str | None
    filter: AlertFilter | None
    errors: dict[str, str]

    def query(self, **extra: str) -> str:
        """The view and filters as a query string (empty ones left out), plus ``extra``."""
        return urlencode({**{k: v for k, v in self.values.items() if v}, **extra})


def parse_queue(params: dict[str, str], *, me: str, default_view: str) -> QueueForm:
    """The queue's form: each value checked on its own (so each bad one gets its message), then
    together with the cursor, which names the filter it was issued for."""
    values = {k: params.get(k, "").strip() for k in _FIELDS}
    values["view"] = values["view"] or default_view
    values["order"] = values["order"] or "newest"
    if values["outcome"].lower() == "any":
        values["outcome"] = ""
    cursor = params.get("cursor", "").strip() or None
    args: dict[str, Any] = {"view": values["view"], "order": values["order"],
                            "outcome": values["outcome"] or None, "rule": values["rule"] or None}
    errors: dict[str, str] = {}
    for name in _FIELDS:
        if args[name] is None:
            continue
        try:
            AlertFilter(**{name: args[name]}, me=me)
        except CaseError as exc:
            errors[name] = exc.message
    f: AlertFilter | None = None
    if not errors:
        try:
            f = AlertFilter(**args, me=me, limit=PAGE, cursor=cursor)
        except CaseError as exc:
            errors[exc.field if exc.field in values else "cursor"] = exc.message
    return QueueForm(values, cursor, f, errors)


@dataclass(frozen=True)
class QueueRow:
    """One alert as the queue shows it."""

    alert: AlertState
    payment: PaymentView
    age: int  # days since it opened
    overdue: bool  # open, and its review was due before today
    mine: bool
    hits: tuple[dict[str, Any], ...] = ()  # the sanctions entries the decision's screening met

    @property
    def rules(self) -> list[str]:
        return [r for r in self.alert.fired.split(",") if r]


def _rows(rt: Runtime, caller: Caller, page: AlertPage, today: date) -> list[QueueRow]:
    parsed: dict[tuple[str, str], list[Transaction]] = {}
    me = caller.principal.fingerprint_sha256
    out = []
    traces = get_traces(rt.engine, [a.trace_id for a in page.items])  # a few statements, not three a row
    for a in page.items:
        detail = traces.get(a.trace_id.lower()) if isinstance(a.trace_id, str) else None
        payment = PaymentView("absent") if detail is None else read_payment(detail, caller, parsed)
        overdue = a.open and a.review_due < today.isoformat()
        out.append(QueueRow(a, payment, age_days(a.opened_at, today), overdue, a.assignee_fp == me,
                            sealed_hits(None if detail is None else detail.body)))
    return out


def _queue(request: Request, caller: Caller, params: dict[str, str], *, status: int = 200,
           notice: str | None = None, failures: list[tuple[int, str]] | None = None) -> HTMLResponse:
    rt: Runtime = request.app.state.runtime
    acts = may("alerts.act", caller.roles)
    form = parse_queue(params, me=caller.principal.fingerprint_sha256,
                       default_view="mine" if acts else "open")
    today = today_of(rt)
    page: AlertPage | None = None
    rows: list[QueueRow] = []
    if form.filter is not None:
        page = alert_page(rt.engine, form.filter, today=today)
        rows = _rows(rt, caller, page, today)
        if rows:  # sealed before it is shown: if the ledger cannot, the page fails (503)
            cases = dict.fromkeys(r.alert.case_id for r in rows)
            record_reads(rt.ledger, caller.principal, [{"case": c, "what": "queue"} for c in cases])
    kept = {k: x for k, x in form.values.items() if x}
    tabs = [(v, label, f"/console/alerts?{urlencode({**kept, 'view': v})}") for v, label in TABS
            if v != "mine" or acts]
    next_href = (f"/console/alerts?{form.query(cursor=page.next_cursor)}"
                 if page is not None and page.next_cursor else None)
    return render(request, "alerts.html", caller, status=422 if form.errors and status == 200 else status,
                  form=form, rows=rows, tabs=tabs, orders=_ORDERS, outcomes=ALERT_OUTCOMES, today=today,
                  acts=acts, next_href=next_href, notice=notice, failures=failures or [],
                  first_href=f"/console/alerts?{form.query()}" if form.cursor else None,
                  section="alerts", subject_label=subject_label, pick=_PICK)


@router.get("/alerts")
def alerts_page(request: Request) -> HTMLResponse:
    """The queue: tabs, filters, one page of alerts, and (for officers) bulk assign to me."""
    caller = page_caller(request, "alerts.list")
    params = dict(request.query_params)
    notice = None
    assigned = params.get("assigned", "")
    if _DIGITS.fullmatch(assigned):
        n = int(assigned)
        notice = f"Assigned {n} alert{'s' if n != 1 else ''} to you; each is a sealed ledger entry."
    return _queue(request, caller, params, notice=notice)


def _back(raw: str) -> dict[str, str]:
    """The queue's filters the bulk form came from (known names only: this is no open redirect)."""
    return {k: v for k, v in parse_qsl(raw, keep_blank_values=False) if k in _FIELDS}


@router.post("/alerts/assign")
async def assign_to_me(request: Request) -> Response:
    """Assign each ticked alert to the caller: one sealed ``assign`` event per alert. All done:
    back to the queue (303). Any refused: the queue again, saying which and why (409 when one
    was moved by someone else first; nothing is undone, each sealed event stands)."""
    caller = page_caller(request, "alerts.act")
    form = await read_form(request)
    back = _back(form.get("back", ""))
    picked: list[int] = []
    for name, value in form.items():
        if name.startswith(_PICK) and value:
            number = name.removeprefix(_PICK)
            if not _DIGITS.fullmatch(number):
                return await run_in_threadpool(_queue, request, caller, back, status=422,
                                               failures=[(0, f"{name!r} does not name an alert")])
            picked.append(int(number))
    if not picked:
        return await run_in_threadpool(_queue, request, caller, back, status=422, failures=[
            (0, "no alert was ticked: tick the alerts to assign to yourself")])
    rt: Runtime = request.app.state.runtime
    failures: list[tuple[int, str]] = []
    status = 200
    for seq in sorted(picked):
        try:
            await run_in_threadpool(act, rt.ledger, caller.principal, "assign", alert=seq,
                                    assignee=caller.principal)
        except CaseError as exc:
            failures.append((seq, str(exc)))
            status = max(status, audit_problem(exc)[0])
    done = len(picked) - len(failures)
    if not failures:
        return RedirectResponse(f"/console/alerts?{urlencode({**back, 'assigned': str(done)})}",
                                status_code=303)
    notice = f"Assigned {done} of {len(picked)} alerts to you." if done else None
    return await run_in_threadpool(_queue, request, caller, back, status=status, notice=notice,
                                   failures=failures)
