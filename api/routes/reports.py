"""/v1/cases/{case_id}/reports: suspicious transaction reports drafted from a case and filed.

A thin face over ``audit.cases.reports``: ``POST .../draft`` answers the goAML document (nothing
sealed), ``POST ...`` files one (the sealed ``file_report`` event and the legal holds over the
case's evidence and the document), ``GET ...`` lists the filed versions and ``GET .../{sha256}``
downloads one. Drafting needs the reporting-entity file (``SEALTRAIL_REPORTING_ENTITY``): without
it, or with one that does not read, the answer is 409 naming the setting. Reading a case's reports
and downloading one are sealed as ``case_read`` records before the content is answered
(``audit.cases.reads``; FATF R.21 tipping-off), as every read of case state is. docs/goaml.md
documents the endpoints.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from api.auth import Caller
from api.bodies import json_model
from api.config import Settings
from api.deps import RuntimeDep, allow
from api.openapi import json_body, problems
from api.problems import Problem, audit_problem
from audit.cases.query import case_detail
from audit.cases.reads import record_reads
from audit.cases.reports import (
    FiledReport,
    FiledVersion,
    ReportHoldError,
    ReportingSettings,
    ReportPurgedError,
    draft_case_report,
    file_case_report,
    filed_report,
    list_case_reports,
    read_reporting_settings,
)
from audit.errors import CaseError, ReportError
from ledger.records import now_utc

__all__ = ["DraftIn", "FileIn", "router"]

router = APIRouter(prefix="/v1/cases/{case_id}/reports", tags=["alerts and cases"])

XML = "application/xml"
SHA_HEADER = "X-Report-SHA256"
_SHA = re.compile(r"[0-9a-f]{64}")
_RATE = re.compile(r"[0-9]{1,12}(\.[0-9]{1,12})?")
_T = TypeVar("_T")
CaseId = Annotated[int, Path(ge=0, le=2**63 - 1, description="the case id (the seq of its first alert)")]


class DraftIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(description="the officer's narrative: why the transactions are suspicious")
    indicators: list[str] = Field(min_length=1, description="the FIU's indicator codes (at least one)")
    action: str | None = Field(None, description="what the bank did (held, rejected, exited the customer)")
    amends: str | None = Field(None, description="SHA-256 of the report in force, for a new version of it")
    fiu_ref_number: str | None = Field(None, description="the FIU's reference of the report amended")
    rates: dict[str, str] = Field(
        default_factory=dict, description="the bank's rate per currency not the local one: local units for "
                                          'one unit, as a decimal string ({"USD": "0.9215"}); sealtrail '
                                          "invents none")


class FileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    xml: str | None = Field(None, description="the document as text (UTF-8), as the draft answered it")
    xml_base64: str | None = Field(None, description="or its bytes in base64")
    rationale: str = Field(description="the officer's statement, sealed with the filing")
    amends: str | None = Field(None, description="SHA-256 of the report in force, when this is a new version")


_SHA_EX = "5b0f4e1c3a9d2e7f6b8c1d0e9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
DRAFT_EXAMPLE = {"reason": "Three transfers just under the reporting threshold within a week to a newly "
                 "opened account abroad; the customer gave no account of their purpose.",
                 "indicators": ["STRUC"], "action": "Payments held; relationship under review.",
                 "rates": {"USD": "0.9215"}}
FILE_EXAMPLE = {"xml": '<?xml version="1.0" encoding="UTF-8"?>\n<report>...</report>\n',
                "rationale": "Reviewed and approved by the MLRO; filed to the FIU."}
_FILED = {"case_id": 41873, "seq": 42007, "trace_id": "019ae3c6-0b1d-7c2e-8f3a-4d5e6f708192",
          "recorded_at": "2026-12-03T10:02:11.004512Z", "report_sha256": _SHA_EX, "amends": None,
          "hold_id": "case-41873-5b0f4e1c", "hold_from": 41873, "hold_to": 41990,
          "report_hold_id": "case-41873-5b0f4e1c.report"}
_VERSION = {"seq": 42007, "recorded_at": "2026-12-03T10:02:11.004512Z", "sha256": _SHA_EX, "amends": None,
            "principal": {"subject": "CN=Alice,O=Example Bank", "fingerprint_sha256": "a1" * 32},
            "rationale": "Reviewed and approved by the MLRO; filed to the FIU.", "in_force": True,
            "hold_id": "case-41873-5b0f4e1c", "held": True}
_XML_RESPONSE = {"content": {XML: {"schema": {"type": "string"}}}}
_DRAFTED = {**_XML_RESPONSE, "description": f"The document; its SHA-256 in `{SHA_HEADER}`",
            "headers": {SHA_HEADER: {"description": "SHA-256 of the document's bytes",
                                     "schema": {"type": "string"}}}}
_CONFIG = {409: "The report cannot be drafted or filed now: no reporting-entity file is configured "
                "(`SEALTRAIL_REPORTING_ENTITY`) or it does not read; `amends` is not the report in force "
                "(`case_conflict`); or a legal hold it needs is held by another report"}


def _settings(s: Settings) -> ReportingSettings:
    """The reporting entity from its file, read per request (an operator's fix needs no restart)."""
    if s.reporting_entity is None:
        raise Problem(409, "reporting_entity_unconfigured",
                      "drafting a report needs the reporting-entity file: set SEALTRAIL_REPORTING_ENTITY "
                      "(docs/goaml.md, example docs/reporting-entity.example.toml)",
                      [{"field": "SEALTRAIL_REPORTING_ENTITY", "message": "not set"}])
    try:
        return read_reporting_settings(s.reporting_entity)
    except ReportError as exc:
        raise Problem(409, "reporting_entity_invalid",
                      f"the reporting-entity file (SEALTRAIL_REPORTING_ENTITY) does not read: {exc}",
                      [{"field": f"SEALTRAIL_REPORTING_ENTITY:{exc.field}", "message": exc.why}]) from exc


def _problem(exc: CaseError | ReportError) -> Problem:
    """The problem of a refusal, naming its fields (status and kind from ``audit_problem``)."""
    status, kind, _ = audit_problem(exc)
    if isinstance(exc, ReportError):
        faults = [{"field": f.path, "message": f.why} for f in exc.faults] or [
            {"field": exc.field, "message": exc.why}]
        return Problem(status, kind, str(exc), faults)
    return Problem(status, kind, str(exc), [{"field": exc.field, "message": exc.message}])


async def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` (blocking: the database) in the thread pool; refusals as their problems."""
    try:
        return await run_in_threadpool(fn, *args, **kwargs)
    except ReportPurgedError as exc:
        raise Problem(410, "report_purged", str(exc), [{"field": exc.field, "message": exc.why}]) from exc
    except (CaseError, ReportError) as exc:
        raise _problem(exc) from exc
    except ReportHoldError as exc:
        raise Problem(500, "report_hold_failed", str(exc), [{"field": "hold", "message": str(exc)}]) from exc


def _rates(rates: dict[str, str]) -> dict[str, Decimal]:
    out = {}
    for ccy, text in rates.items():
        try:
            if not _RATE.fullmatch(text):
                raise InvalidOperation
            out[ccy] = Decimal(text)
        except InvalidOperation:
            why = f"{text!r} is not a rate (a decimal string such as \"0.9215\")"
            raise Problem(422, "invalid_request", f"rates.{ccy}: {why}",
                          [{"field": f"rates.{ccy}", "message": why}]) from None
    return out


def _xml(data: bytes, sha: str, case_id: int) -> Response:
    return Response(data, media_type=XML, headers={
        SHA_HEADER: sha, "Content-Disposition": f'attachment; filename="case-{case_id}-{sha[:8]}.xml"'})


def _ok(status: int, content: dict[str, Any]) -> dict[int | str, dict[str, Any]]:
    return {status: content}


def filed_json(f: FiledReport) -> dict[str, Any]:
    return {"case_id": f.case_id, "seq": f.seq, "trace_id": f.trace_id, "recorded_at": f.recorded_at,
            "report_sha256": f.report_sha256, "amends": f.amends, "hold_id": f.hold_id,
            "hold_from": f.hold_from, "hold_to": f.hold_to, "report_hold_id": f.report_hold_id}


def version_json(v: FiledVersion) -> dict[str, Any]:
    return {"seq": v.seq, "recorded_at": v.recorded_at, "sha256": v.sha256, "amends": v.amends,
            "principal": {"subject": v.principal.get("subject"),
                          "fingerprint_sha256": v.principal.get("fingerprint_sha256")},
            "rationale": v.rationale, "in_force": v.in_force, "hold_id": v.hold_id, "held": v.held}


@router.post("/draft", summary="Draft the goAML STR of a case (nothing is sealed)",
             openapi_extra=json_body(DraftIn, DRAFT_EXAMPLE),
             responses=_ok(200, _DRAFTED)
             | problems(404, 409, 422, notes={**_CONFIG, 404: "No such case", 422: (
                 "Refused input, or a transaction the report cannot carry: `errors` names it (a purged "
                 "payload by its seq; a foreign amount without a rate)")}),
             response_model=None)
async def draft(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("cases.act")],
                case_id: CaseId) -> Response:
    body: DraftIn = await json_model(request, DraftIn, optional=False)
    reporting = await run_in_threadpool(_settings, rt.settings)
    rates = _rates(body.rates)
    # the draft shows the case's payments (and a conflict names the report in force): a read of it,
    # sealed before anything is answered, once the case is known to exist
    await _call(lambda: (case_detail(rt.engine, case_id),
                         record_reads(rt.ledger, caller.principal, [{"case": case_id, "what": "case"}])))
    d = await _call(draft_case_report, rt.engine, case_id, reporting, reason=body.reason,
                    indicators=body.indicators, action=body.action, submission_date=now_utc(),
                    amends=body.amends, rates=rates, fiu_ref_number=body.fiu_ref_number)
    return _xml(d.xml, d.sha256, case_id)


@router.post("", status_code=201, summary="File a report: the sealed file_report event, under legal hold",
             openapi_extra=json_body(FileIn, FILE_EXAMPLE),
             responses=_ok(201, {"content": {"application/json": {"example": _FILED}}})
             | problems(404, 409, 422, 500, 503, notes={
                 **_CONFIG, 404: "No such case",
                 422: "The document does not validate, is another case's, or states another amendment; or "
                      "the rationale is refused: `errors` names it; nothing was sealed",
                 500: "`report_hold_failed`: the report was filed (sealed at `seq`) but the hold on its own "
                      "bytes could not be placed; the detail says how to place it"}))
async def file(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("cases.act")],
               case_id: CaseId, response: Response) -> dict[str, Any]:
    body: FileIn = await json_model(request, FileIn, optional=False)
    if (body.xml is None) == (body.xml_base64 is None):
        why = "give the document as exactly one of xml (text) and xml_base64"
        raise Problem(422, "invalid_request", why, [{"field": "xml", "message": why}])
    if body.xml is not None:
        try:
            xml = body.xml.encode("utf-8")
        except UnicodeEncodeError:
            why = "is not text that UTF-8 can carry"
            raise Problem(422, "invalid_request", f"xml: {why}", [{"field": "xml", "message": why}]) from None
    else:
        try:
            xml = base64.b64decode(body.xml_base64 or "", validate=True)
        except (binascii.Error, ValueError):
            why = "is not base64"
            raise Problem(422, "invalid_request", f"xml_base64: {why}",
                          [{"field": "xml_base64", "message": why}]) from None
    filed = await _call(file_case_report, rt.ledger, case_id, xml, caller.principal, rationale=body.rationale,
                        amends=body.amends)
    response.headers["Location"] = f"/v1/cases/{case_id}/reports/{filed.report_sha256}"
    return filed_json(filed)


@router.get("", summary="The reports filed on a case, oldest first (the read is sealed)",
            responses=_ok(200, {"content": {"application/json": {"example": {"case_id": 41873,
                                                                             "items": [_VERSION]}}}})
            | problems(404, 503, notes={404: "No such case"}))
async def list_reports(rt: RuntimeDep, caller: Annotated[Caller, allow("cases.get")],
                       case_id: CaseId) -> dict[str, Any]:
    items = await _call(list_case_reports, rt.engine, case_id)
    await _call(record_reads, rt.ledger, caller.principal, [{"case": case_id, "what": "case"}])
    return {"case_id": case_id, "items": [version_json(v) for v in items]}


@router.get("/{sha256}", summary="Download a filed report's document (the read is sealed)",
            responses=_ok(200, _XML_RESPONSE) | problems(404, 410, 503, notes={
                404: "No such case, or no report with this SHA-256 was filed on it",
                410: "The document's bytes were purged (an erasure order); the sealed event keeps its "
                     "SHA-256. A filed report is under legal hold, so only a released hold allows it"}),
            response_model=None)
async def download(rt: RuntimeDep, caller: Annotated[Caller, allow("cases.get")], case_id: CaseId,
                   sha256: str) -> Response:
    if not _SHA.fullmatch(sha256):
        raise Problem(404, "not_found", f"no report {sha256} on case {case_id}",
                      [{"field": "sha256", "message": "a report is named by its SHA-256 in lower-case hex"}])
    data = await _call(filed_report, rt.engine, case_id, sha256)
    await _call(record_reads, rt.ledger, caller.principal, [{"case": case_id, "what": "report",
                                                             "report": sha256}])
    return _xml(data, sha256, case_id)
