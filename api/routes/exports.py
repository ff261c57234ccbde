"""POST /v1/exports (create a bundle), GET /v1/exports (past exports), GET /v1/exports/{id} (the zip).

Bundles are written to ``settings.exports_dir`` as ``<bundle_id>.zip``; the list is read from
the ``export.created`` ledger records, so it survives restarts and spans replicas that share
the directory. Creation runs in a worker thread (a large bundle takes seconds to minutes).
A body with ``case_id`` (and no ``from``/``to`` or filter) cuts the bundle of one case
(``sealtrail.bundle/5``, docs/bundle-format.md "Case bundles").
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from api import ops
from api.auth import Caller
from api.bodies import json_model
from api.deps import RuntimeDep, allow
from api.openapi import examples, json_body, problems
from api.problems import Problem
from audit.cases.reads import record_reads
from audit.cases.state import is_seq
from audit.errors import ExportFilterError
from audit.export.create import ExportFilters, create_bundle, create_case_bundle, list_exports, uuid7
from ledger.records import now_utc

__all__ = ["router"]

router = APIRouter(prefix="/v1/exports", tags=["exports"])
_ZIP = {"type": "string", "format": "binary"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    start: str | None = Field(None, alias="from", description="recorded_at >= from (ISO 8601 with a UTC "
                                                              "offset); required without case_id")
    end: str | None = Field(None, alias="to", description="recorded_at < to; required without case_id")
    account: str | None = Field(None, description="originator or beneficiary account / IBAN")
    decision: str | None = Field(None, description="ALLOW | REVIEW | HOLD | BLOCK")
    rule: str | None = Field(None, description="a rule id that fired")
    case_id: int | None = Field(None, ge=0, description="the bundle of this case instead of a window (no "
                                                        "from, to or filter with it)")


def _item(e: dict[str, Any]) -> dict[str, Any]:
    r = e["record"]
    return {"bundle_id": r["bundle_id"], "seq": e["seq"], "created_at": r["created_at"],
            "creator": r["creator"], "filters": r["filters"], "counts": r["counts"],
            "checkpoint": r["checkpoint"], "previous": r["previous"], "manifest_sha256": r["manifest_sha256"]}


@router.post("", status_code=201, summary="Create a regulator export bundle (sealed as export.created)",
             openapi_extra=json_body(ExportIn, examples.EXPORT),
             responses=problems(409, 422, 503, notes={409: "The export cannot be made from this ledger now"}))
async def create(request: Request, response: Response, rt: RuntimeDep,
                 caller: Annotated[Caller, allow("exports.create")]) -> dict[str, Any]:
    body: ExportIn = await json_model(request, ExportIn, optional=False)
    f = None
    if body.case_id is not None:
        given = [n for n, v in (("from", body.start), ("to", body.end), ("account", body.account),
                                ("decision", body.decision), ("rule", body.rule)) if v is not None]
        if given:
            raise ExportFilterError("case_id", f"takes no {', '.join(given)} (a case bundle holds the whole "
                                               "case)")
    else:
        f = ExportFilters.of(body.start, body.end, account=body.account, decision=body.decision,
                             rule=body.rule)
    now = now_utc()
    bundle_id = uuid7(now)
    path = rt.settings.exports_dir / f"{bundle_id}.zip"
    signer = await run_in_threadpool(ops.export_signer, rt.settings, rt.ledger)
    cosign = ops.export_cosign(rt.settings, rt.engine)
    if f is None:
        assert body.case_id is not None
        summary = await run_in_threadpool(create_case_bundle, rt.engine, rt.ledger, signer, path,
                                          body.case_id, caller.principal, now=now, bundle_id=bundle_id,
                                          cosign=cosign, **ops.export_stated(rt.settings))
    else:
        summary = await run_in_threadpool(create_bundle, rt.engine, rt.ledger, signer, path, f,
                                          caller.principal, now=now, bundle_id=bundle_id, cosign=cosign,
                                          **ops.export_stated(rt.settings))
    response.headers["Location"] = f"/v1/exports/{summary.bundle_id}"
    doc = summary.to_json()
    del doc["file"]  # a server path is nobody's business
    return doc


@router.get("", summary="Every export made from this ledger, oldest first")
async def list_all(rt: RuntimeDep, caller: Annotated[Caller, allow("exports.list")]) -> dict[str, Any]:
    items = await run_in_threadpool(list_exports, rt.engine)
    return {"items": [_item(e) for e in items]}


@router.get("/{bundle_id}", summary="Download a bundle (application/zip)",
            responses={200: {"content": {"application/zip": {"schema": _ZIP}}}, **problems(404)},
            response_model=None)
async def download(bundle_id: str, rt: RuntimeDep,
                   caller: Annotated[Caller, allow("exports.get")]) -> FileResponse:
    if not _UUID.fullmatch(bundle_id):
        raise Problem(404, "not_found", f"no export {bundle_id}")
    items = await run_in_threadpool(list_exports, rt.engine)
    rec = next((e["record"] for e in items if e["record"]["bundle_id"] == bundle_id), None)
    if rec is None:
        raise Problem(404, "not_found", f"no export {bundle_id}")
    path = rt.settings.exports_dir / str(rec["file_name"])
    if not path.is_file():
        raise Problem(404, "not_found", f"export {bundle_id} is recorded but its file is not on this server")
    case = rec.get("case")
    if isinstance(case, dict) and is_seq(case.get("case_id")):  # a case's history and reports: a read
        await run_in_threadpool(record_reads, rt.ledger, caller.principal,
                                [{"case": case["case_id"], "what": "case"}])
    return FileResponse(path, media_type="application/zip", filename=f"{bundle_id}.zip")
