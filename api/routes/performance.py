"""/v1/performance/rules and /v1/performance/models: how each rule and each model fares once
officers have worked its alerts, as JSON or as CSV for a spreadsheet.

A thin face over ``audit.cases.performance`` (read from the alert view, brought current first, and
the trace index, both checked by ``ledger verify``). The rows are counts and rates: no case, no
alert and no payment is shown, so reading them seals no ``case_read`` record, and approvers, who
judge rule changes by them, read them too. CSV is answered for ``format=csv``, or, without
``format``, when ``Accept`` prefers ``text/csv`` to JSON; it comes as an attachment named after the
table and the day (UTC, by the ledger's clock).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine
from starlette.responses import Response

from api.auth import Caller
from api.deps import RuntimeDep, allow
from api.openapi import problems
from audit.cases.performance import BANDS, Performance, model_performance, rule_performance, to_csv
from audit.decide.runtime import Runtime

__all__ = ["CSV", "router", "wants_csv"]

router = APIRouter(prefix="/v1/performance", tags=["performance"])
CSV = "text/csv; charset=utf-8; header=present"  # RFC 4180, a header line first

_FORMAT = Query(None, description="`json` or `csv`; without it, `Accept: text/csv` asks for CSV")
_RULE_ROW = {"key": "STRUCTURING_ORIG_24H", "group": "aml_core@2026.12.0", "hits": 412, "alerts": 388,
             "open": 41, "closed": 347, "false_positive": 296, "no_further_action": 38, "report_filed": 13,
             "false_positive_rate": 0.8530259365994236, "report_conversion": 0.037463976945244955,
             "median_hours_to_close": 26.5}
_MODEL_ROW = {**_RULE_ROW, "key": "5d2f0c3e8b1a4f6e9d7c2b5a8e1f4c3d6b9a2e5f8c1d4b7a0e3f6c9b2a5d8e1f",
              "group": "[0.95, 0.97)", "hits": None}


def _ranges(accept: str) -> list[tuple[str, float]]:
    """``Accept``'s media ranges with their weights, in the order given (RFC 9110 12.5.1)."""
    out = []
    for item in accept.split(","):
        media, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            out.append((media.lower(), q))
    return out


def wants_csv(format: str | None, accept: str | None) -> bool:
    """Whether to answer CSV: ``format`` decides when given; else ``Accept``, whose range with the
    highest weight, among those that name CSV or JSON, wins (ties: the first listed)."""
    if format is not None:
        return format == "csv"
    best: tuple[float, bool] | None = None
    for media, q in _ranges(accept or ""):
        csv = media in ("text/csv", "text/*")
        if q > 0 and (csv or media in ("application/json", "application/*", "*/*")) and (
                best is None or q > best[0]):
            best = (q, csv)
    return best is not None and best[1]


def _answer(rt: Runtime[Any], rows: list[Performance], table: str, as_csv: bool) -> Any:
    if not as_csv:
        return {"items": [p.to_json() for p in rows]}
    day = rt.ledger.clock().astimezone(UTC).date().isoformat()
    return Response(to_csv(rows), media_type=CSV, headers={
        "Content-Disposition": f'attachment; filename="sealtrail-{table}-performance-{day}.csv"'})


async def _read(rt: Runtime[Any], fn: Callable[[Engine], list[Performance]], table: str,
                format: str | None, request: Request) -> Any:
    rows = await run_in_threadpool(fn, rt.engine)
    return _answer(rt, rows, table, wants_csv(format, request.headers.get("accept")))


def _responses(example: dict[str, Any], csv: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"description": "The rows, as JSON or (`format=csv`, `Accept: text/csv`) as CSV with a "
                                 "header line, as an attachment (`Content-Disposition`)",
                  "content": {"application/json": {"example": {"items": [example]}},
                              "text/csv": {"schema": {"type": "string"}, "example": csv}}},
            **problems(422, 503)}


_CSV_HEAD = ("key,group,hits,alerts,open,closed,false_positive,no_further_action,report_filed,"
             "false_positive_rate,report_conversion,median_hours_to_close\r\n")


@router.get("/rules", response_model=None,
            summary="Per rule and ruleset version: hits, alerts, dispositions, false-positive rate, report "
                    "conversion, median hours to close",
            responses=_responses(_RULE_ROW, _CSV_HEAD + "STRUCTURING_ORIG_24H,aml_core@2026.12.0,412,388,41,"
                                                        "347,296,38,13,0.8530259365994236,"
                                                        "0.037463976945244955,26.5\r\n"))
async def rules(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("performance.read")],
                format: Literal["json", "csv"] | None = _FORMAT) -> Any:
    return await _read(rt, rule_performance, "rule", format, request)


@router.get("/models", response_model=None,
            summary="Per model and score band (" + ", ".join(b[0] for b in BANDS) + "): alerts, "
                    "dispositions, false-positive rate, report conversion, median hours to close",
            responses=_responses(_MODEL_ROW, _CSV_HEAD + f"{_MODEL_ROW['key']},\"[0.95, 0.97)\",,388,41,347,"
                                                         "296,38,13,0.8530259365994236,"
                                                         "0.037463976945244955,26.5\r\n"))
async def models(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("performance.read")],
                 format: Literal["json", "csv"] | None = _FORMAT) -> Any:
    return await _read(rt, model_performance, "model", format, request)
