"""The refusals page: screening requests refused as unreadable, sealed as ``refusal`` records,
filtered by time, principal and format and paged newest first.

It reads what ``GET /v1/traces/refusals`` reads (``audit.query.refusals``), under the same
permission (``traces.query``); each row links to the record's trace (``/v1/traces/{id}``, which
serves a refusal's record, payload and proof like any other).
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
from audit.query.refusals import FORMATS, RefusalFilter, RefusalPage, query_refusals

__all__ = ["FIELDS", "RefusalForm", "parse_refusal_form", "router"]

router = APIRouter(prefix="/console")

DEFAULT_LIMIT = 50
FIELDS = ("since", "until", "principal", "format", "limit")


@dataclass(frozen=True)
class RefusalForm:
    """What the officer typed (kept as typed) and the filter it means (None when refused)."""

    values: dict[str, str]
    cursor: str | None
    filter: RefusalFilter | None
    errors: dict[str, str]

    def query(self, **extra: str) -> str:
        return urlencode({**{k: v for k, v in self.values.items() if v}, **extra})


def _argument(name: str, text: str) -> Any:
    if name in ("since", "until"):
        return form_time(text, name)
    if name == "limit":
        if not text.isascii() or not text.isdigit():
            raise QueryError("limit", f"{text!r} is not an integer")
        return int(text)
    return text


def parse_refusal_form(params: dict[str, str]) -> RefusalForm:
    """The form's values, its filter, and every refused field with its reason."""
    values = {k: params.get(k, "").strip() for k in FIELDS}
    if values["format"].lower() == "any":
        values["format"] = ""
    values["limit"] = values["limit"] or str(DEFAULT_LIMIT)
    cursor = params.get("cursor", "").strip() or None
    kwargs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, text in values.items():
        if not text:
            continue
        try:
            arg = _argument(name, text)
            RefusalFilter(**{name: arg})
            kwargs[name] = arg
        except QueryError as exc:
            errors[name] = exc.message
    f: RefusalFilter | None = None
    if not errors:
        try:
            f = RefusalFilter(**kwargs, cursor=cursor)
        except QueryError as exc:
            errors[exc.field] = exc.message
    return RefusalForm(values, cursor, f, errors)


@router.get("/refusals")
def refusals_page(request: Request) -> HTMLResponse:
    """The filter form and one page of sealed refusals (422 with the errors inline)."""
    caller = page_caller(request, "traces.query")
    form = parse_refusal_form(dict(request.query_params))
    page: RefusalPage | None = None
    if form.filter is not None:
        rt: Runtime = request.app.state.runtime
        page = query_refusals(rt.engine, form.filter)
    next_href = (f"/console/refusals?{form.query(cursor=page.next_cursor)}"
                 if page is not None and page.next_cursor else None)
    return render(request, "refusals.html", caller, status=422 if form.errors else 200, form=form,
                  page=page, formats=FORMATS, next_href=next_href,
                  first_href=f"/console/refusals?{form.query()}" if form.cursor else None)
