"""The search page: filter sealed decisions and page through them, newest first.

The filter form reads the same :class:`audit.query.traces.TraceFilter` the ``/v1/traces`` route
does, and results come from ``query_traces`` (keyset pagination on seq: the hundredth page
costs what the first does; nothing counts the table). Times without a UTC offset, as a
``datetime-local`` input sends them, are read as UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse

from api.console.forms import form_time
from api.console.render import page_caller, render
from audit.decide.runtime import Runtime
from audit.errors import QueryError
from audit.query.traces import TraceFilter, TracePage, query_traces
from wasm_rules import OUTCOMES

__all__ = ["DEFAULT_LIMIT", "FIELDS", "SearchForm", "parse_search", "router"]

router = APIRouter(prefix="/console")

DEFAULT_LIMIT = 50
FIELDS = ("since", "until", "account", "decision", "rule", "principal", "score_min", "score_max", "limit")
# TraceFilter's argument for each form field (and back, to put an error next to its field)
_ARG = {"rule": "rule_id"}
_FIELD = {v: k for k, v in _ARG.items()}


@dataclass(frozen=True)
class SearchForm:
    """What the officer typed (kept as typed, to re-render the form) and what it means."""

    values: dict[str, str]
    cursor: str | None
    filter: TraceFilter | None  # None when any value was refused
    errors: dict[str, str]  # form field (or "cursor") -> message

    def query(self, **extra: str) -> str:
        """The filters as a query string (empty ones left out), plus ``extra``."""
        return urlencode({**{k: v for k, v in self.values.items() if v}, **extra})


def _number(text: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise QueryError(name, f"{text!r} is not a number in [0, 1]") from None


def _integer(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise QueryError(name, f"{text!r} is not a whole number") from None


def _argument(name: str, text: str) -> Any:
    """The TraceFilter value of one non-empty form field; ``QueryError`` if it cannot be one."""
    if name in ("since", "until"):
        return form_time(text, name)
    if name in ("score_min", "score_max"):
        return _number(text, name)
    if name == "limit":
        return _integer(text, name)
    return text


def parse_search(params: dict[str, str]) -> SearchForm:
    """The form's values, its filter, and every refused field with its reason (not just the first)."""
    values = {k: params.get(k, "").strip() for k in FIELDS}
    if values["decision"].lower() == "any":
        values["decision"] = ""
    values["limit"] = values["limit"] or str(DEFAULT_LIMIT)
    cursor = params.get("cursor", "").strip() or None
    kwargs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, text in values.items():
        if not text:
            continue
        try:  # each field on its own first, so that every bad field gets its message
            arg = _argument(name, text)
            TraceFilter(**{_ARG.get(name, name): arg})
            kwargs[_ARG.get(name, name)] = arg
        except QueryError as exc:
            errors[name] = exc.message
    f: TraceFilter | None = None
    if not errors:
        try:  # then together: since < until, score_min <= score_max, the cursor's filter
            f = TraceFilter(**kwargs, cursor=cursor)
        except QueryError as exc:
            errors[_FIELD.get(exc.field, exc.field)] = exc.message
    return SearchForm(values, cursor, f, errors)


@router.get("/search")
def search_page(request: Request) -> HTMLResponse:
    """The filter form and one page of matching decisions (422 with the errors inline)."""
    caller = page_caller(request, "traces.query")
    form = parse_search(dict(request.query_params))
    page: TracePage | None = None
    if form.filter is not None:
        rt: Runtime = request.app.state.runtime
        page = query_traces(rt.engine, form.filter)
    next_href = (f"/console/search?{form.query(cursor=page.next_cursor)}"
                 if page is not None and page.next_cursor else None)
    return render(request, "search.html", caller, status=422 if form.errors else 200, form=form,
                  page=page, outcomes=OUTCOMES, next_href=next_href,
                  first_href=f"/console/search?{form.query()}" if form.cursor else None)
