"""The console's exports page: past regulator bundles (from their ``export.created`` records)
with download links to ``/v1/exports/{id}``, and a form that creates one for a filter.

Creation calls ``audit.export.create.create_bundle`` exactly as ``POST /v1/exports`` does (same key,
same file name under ``settings.exports_dir``), in a worker thread; refused filters re-render
the form with the errors beside their fields, and nothing is written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from api import ops
from api.auth import Caller
from api.console.forms import form_time, read_form
from api.console.render import page_caller, render
from api.deps import RuntimeDep
from audit.decide.runtime import Runtime
from audit.errors import ExportError, ExportFilterError, QueryError
from audit.export.create import ExportFilters, create_bundle, list_exports, uuid7
from ledger.records import now_utc
from wasm_rules import OUTCOMES

__all__ = ["router"]

router = APIRouter(prefix="/console")
FIELDS = ("from", "to", "account", "decision", "rule")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_range(now: datetime) -> dict[str, str]:
    """The last 24 hours, ``to`` rounded up to the next minute so that what was just decided is in."""
    end = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return {"from": _iso(end - timedelta(days=1)), "to": _iso(end), "account": "", "decision": "", "rule": ""}


def _utc(text: str, name: str) -> datetime:
    """``form_time`` for a required bound, refused in the bundle's terms."""
    if not text:
        raise ExportFilterError(name, "is required (ISO 8601, e.g. 2026-12-02T11:22:18Z)")
    try:
        return form_time(text, name)
    except ExportFilterError:
        raise
    except QueryError as exc:
        raise ExportFilterError(name, exc.message) from None


def filters_of(values: dict[str, str]) -> ExportFilters:
    """The form's values as export filters; ``ExportFilterError`` names the first bad field."""
    start, end = _utc(values["from"], "from"), _utc(values["to"], "to")
    return ExportFilters.of(start, end, account=values["account"] or None,
                            decision=values["decision"] or None, rule=values["rule"] or None)


def _rows(rt: Runtime) -> list[dict[str, Any]]:
    """Past exports, newest first, each with whether its file is on this server."""
    out = []
    for e in reversed(list_exports(rt.engine)):
        r = e["record"]
        path = rt.settings.exports_dir / str(r.get("file_name", ""))
        out.append({"seq": e["seq"], **r, "size_bytes": path.stat().st_size if path.is_file() else None})
    return out


def _page(request: Request, rt: Runtime, caller: Caller, status: int, values: dict[str, str],
          errors: dict[str, str], created: str | None = None, problem: str | None = None) -> Response:
    rows = _rows(rt)
    new = next((row for row in rows if row["bundle_id"] == created), None)
    return render(request, "exports.html", caller, status, rows=rows, created=new, values=values,
                  errors=errors, problem=problem, outcomes=OUTCOMES)


@router.get("/exports")
def exports_page(request: Request, rt: RuntimeDep, created: str | None = None) -> Response:
    caller = page_caller(request, "exports.list")
    wanted = created if created is not None and _UUID.fullmatch(created) else None
    return _page(request, rt, caller, 200, default_range(now_utc()), {}, wanted)


@router.post("/exports")
async def exports_create(request: Request, rt: RuntimeDep) -> Response:
    caller = page_caller(request, "exports.create")
    form = await read_form(request)
    values = {k: form.get(k, "").strip() for k in FIELDS}

    async def again(status: int, errors: dict[str, str], problem: str) -> Response:
        return await run_in_threadpool(_page, request, rt, caller, status, values, errors, None, problem)

    try:
        f = filters_of(values)
        now = now_utc()
        bundle_id = uuid7(now)
        path = rt.settings.exports_dir / f"{bundle_id}.zip"
        signer = await run_in_threadpool(ops.export_signer, rt.settings, rt.ledger)
        summary = await run_in_threadpool(create_bundle, rt.engine, rt.ledger, signer, path, f,
                                          caller.principal, now=now, bundle_id=bundle_id,
                                          cosign=ops.export_cosign(rt.settings, rt.engine),
                                          **ops.export_stated(rt.settings))
    except ExportFilterError as exc:
        where = exc.field if exc.field in FIELDS else "filters"
        return await again(422, {where: exc.message}, "The export was refused; nothing was written.")
    except ExportError as exc:
        return await again(409, {"filters": str(exc)}, "The bundle cannot be made; nothing was written.")
    return RedirectResponse(f"/console/exports?created={summary.bundle_id}", status_code=303)
