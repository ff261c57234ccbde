"""The overview page (``GET /console``): decisions per outcome over time, top firing rules, the
score distribution and stage latencies for a time window, as charts and as tables.

The numbers come from ``audit.query.stats`` (bounded reads of the trace index); the charts from
``api.console.charts``. A "last 24 h" window ends at the newest decision, so a quiet ledger
still shows its last day of work; the page says where the window ends and why. Callers who may
not query traces (an approver, the scoring service) are sent to the ledger page instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from api.access import may
from api.auth import AuthError, Caller
from api.console import charts
from api.console.forms import form_time
from api.console.render import page_caller, render
from audit.decide.runtime import Runtime
from audit.errors import QueryError
from audit.query import stats
from wasm_rules import OUTCOMES

__all__ = ["CAP", "LATENCY_SAMPLE", "SPANS", "WindowForm", "clock", "overview_page", "parse_window", "router"]

router = APIRouter(prefix="/console")

SPANS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7),
         "30d": timedelta(days=30)}
SPAN_LABELS = {"1h": "Last hour", "24h": "Last 24 hours", "7d": "Last 7 days", "30d": "Last 30 days"}
DEFAULT_SPAN = "24h"
CAP = stats.CAP  # decisions aggregated at most (the newest of a larger window)
LATENCY_SAMPLE = stats.LATENCY_SAMPLE  # newest records read for latencies


def _utc_now() -> datetime:
    return datetime.now(UTC)


clock: Callable[[], datetime] = _utc_now  # the page's clock; tests replace it


@dataclass(frozen=True)
class WindowForm:
    """The window selector as typed, and the bounds it asks for (None where it was refused)."""

    values: dict[str, str]  # span, since, until
    since: datetime | None
    until: datetime | None
    errors: dict[str, str]


def _utc(text: str, name: str, errors: dict[str, str]) -> datetime | None:
    """``form_time``, its refusal collected in ``errors``; None when empty or refused."""
    if not text:
        return None
    try:
        return form_time(text, name)
    except QueryError as exc:
        errors[name] = exc.message
        return None


def parse_window(params: dict[str, str]) -> WindowForm:
    """The selector's values, each bad one with its reason."""
    values = {k: params.get(k, "").strip() for k in ("span", "since", "until")}
    values["span"] = values["span"] or DEFAULT_SPAN
    errors: dict[str, str] = {}
    if values["span"] not in SPANS:
        errors["span"] = f"{values['span']!r} is not one of {', '.join(SPANS)}"
    since = _utc(values["since"], "since", errors)
    until = _utc(values["until"], "until", errors)
    return WindowForm(values, since, until, errors)


def _caller(request: Request) -> Caller | Response:
    """The caller if it may query traces; a redirect to the ledger page if it may at least read
    that; else the 403 page."""
    try:
        return page_caller(request, "traces.query")
    except AuthError as refused:
        if refused.status != 403:
            raise
        try:
            page_caller(request, "ledger.checkpoint")
        except AuthError:
            raise refused from None
        return RedirectResponse("/console/ledger", status_code=303)


@router.get("")
def home(request: Request) -> Response:
    """The console's front door: an officer's home is the alert queue; everyone else (and a link
    that carries a window) gets the overview."""
    caller = _caller(request)
    if isinstance(caller, Response):
        return caller
    if not request.query_params and may("alerts.act", caller.roles):
        return RedirectResponse("/console/alerts", status_code=303)
    return overview_page(request)


@router.get("/overview")
def overview_page(request: Request) -> Response:
    """The window selector, headline counts and the four charts (422 with the errors inline)."""
    caller = _caller(request)
    if isinstance(caller, Response):
        return caller
    form = parse_window(dict(request.query_params))
    ov: stats.Overview | None = None
    errors = dict(form.errors)
    if not errors:
        rt: Runtime = request.app.state.runtime
        try:
            w = stats.window(rt.engine, now=clock(), since=form.since, until=form.until,
                             span=SPANS[form.values["span"]])
            ov = stats.overview(rt.engine, w, cap=CAP, latency_limit=LATENCY_SAMPLE)
        except QueryError as exc:
            errors[exc.field if exc.field in form.values else "since"] = exc.message
    drawn = {}
    if ov is not None:
        drawn = {"outcomes": charts.outcome_chart(ov.buckets, ov.window.bucket),
                 "rules": charts.rules_chart(ov.rules, ov.total),
                 "scores": charts.score_chart(ov.scores),
                 "latency": charts.latency_chart(ov.latency)}
    return render(request, "overview.html", caller, status=422 if errors else 200, form=form,
                  errors=errors, ov=ov, charts=drawn, outcomes=OUTCOMES, spans=SPAN_LABELS,
                  unit=charts.bucket_unit, fmt_us=charts.fmt_us, bucket_label=charts.bucket_label)
