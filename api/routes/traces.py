"""GET /v1/traces (search), GET /v1/traces/refusals (refused requests), GET /v1/traces/{trace_id}
(record, payload, proof: a refusal's too), annotations."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from api import ops
from api.access import PAYLOAD_ROLES
from api.auth import Caller
from api.bodies import json_model
from api.deps import RuntimeDep, allow
from api.openapi import examples, json_body, problems
from api.problems import Problem
from audit.annotations import Disposition, annotate
from audit.cases.kinds import CASE_KINDS, report_read
from audit.cases.reads import record_reads
from audit.query.refusals import RefusalFilter, query_refusals, refusal_json
from audit.query.traces import MAX_LIMIT, TraceFilter, get_trace, query_traces

__all__ = ["router"]

router = APIRouter(prefix="/v1/traces", tags=["traces"])



_SEARCH_EXAMPLE: dict[int | str, dict[str, Any]] = {200: {"content": {"application/json": {"example": {
    "items": [{"seq": 41873, "trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11",
               "recorded_at": "2026-12-03T09:12:44.123456Z", "event_at": "2026-12-03T09:12:44.120001Z",
               "decision": "HOLD", "score": 0.86, "fail_safe": None, "fired": ["MODEL_SCORE_HIGH"],
               "principal": {"subject": "CN=payments-engine,O=Example Bank",
                             "fingerprint_sha256": "9f86...0a08"},
               "ruleset": "aml_core@2026.12.0", "module_sha256": "9170...2337",
               "account_risk_milli": 53300, "account_alerts": ["originator"]}],
    "next_cursor": "dDEuNDE4NzMuM2E5ZjBjMWI"}}}}}
_TRACE_EXAMPLE: dict[int | str, dict[str, Any]] = {200: {"content": {"application/json": {"example": {
    "seq": 41873, "trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11", "kind": "decision",
    "recorded_at": "2026-12-03T09:12:44.123456Z", "leaf_hash": "5f1c...e2", "chain_hash": "77a0...19",
    "record": {"kind": "decision", "payload_sha256": "4825...8fea",
               "record": {"schema": "sealtrail.decision/4"},
               "recorded_at": "2026-12-03T09:12:44.123456Z", "trace_id": "019ae3c4-...", "v": 1},
    "record_bytes": "eyJraW5kIjoiZGVjaXNpb24iLC4uLn0=",
    "payload": {"sha256": "4825...8fea", "state": "present", "encoding": "utf-8", "data": "{1:F01...}"},
    "annotations": [],
    "proof": {"index": 41873, "size": 42000, "leaf_hash": "XxzH...4g=", "hashes": ["UG7d...xiU="],
              "checkpoint": "sealtrail.local/ledger\n42000\n..."}}}}}}


@router.get("", summary="Search sealed decisions, newest first, with cursor pagination",
            responses=_SEARCH_EXAMPLE | problems(422))
def search(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("traces.query")],
    since: str | None = Query(None, description="recorded_at >= since (ISO 8601, UTC)"),
    until: str | None = Query(None, description="recorded_at < until"),
    decision: str | None = Query(None, description="ALLOW | REVIEW | HOLD | BLOCK"),
    rule: str | None = Query(None, description="a rule id that fired"),
    account: str | None = Query(None, description="originator or beneficiary account / IBAN"),
    principal: str | None = Query(None, description="client certificate SHA-256 fingerprint or subject DN"),
    score_min: float | None = Query(None, ge=0, le=1),
    score_max: float | None = Query(None, ge=0, le=1),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
    cursor: str | None = Query(None, description="next_cursor of the previous page"),
    account_risk_min_milli: int | None = Query(
        None, ge=0, description="only decisions whose larger account risk (account_risk.max_milli, "
                                "milli-points) is at least this; records without account risk never match"),
    account_alert: bool = Query(False, description="true: only decisions that raised an account alert"),
) -> dict[str, Any]:
    f = TraceFilter(since=since, until=until, decision=decision, rule_id=rule, account=account,
                    principal=principal, score_min=score_min, score_max=score_max, limit=limit, cursor=cursor,
                    account_risk_min_milli=account_risk_min_milli, account_alert=account_alert)
    page = query_traces(rt.engine, f)
    return {"items": [{"seq": t.seq, "trace_id": t.trace_id, "recorded_at": t.recorded_at,
                       "event_at": t.event_at, "decision": t.decision, "score": t.score,
                       "fail_safe": t.fail_safe, "fired": list(t.fired),
                       "principal": {"subject": t.principal_subject, "fingerprint_sha256": t.principal_fp},
                       "ruleset": f"{t.ruleset_id}@{t.ruleset_version}", "module_sha256": t.module_sha256,
                       "account_risk_milli": t.account_risk_milli, "account_alerts": list(t.account_alerts)}
                      for t in page.items],
            "next_cursor": page.next_cursor}


_REFUSALS_EXAMPLE: dict[int | str, dict[str, Any]] = {200: {"content": {"application/json": {"example": {
    "items": [{"seq": 41874, "trace_id": "019ae3c4-2a10-7c41-8e02-5b7d1c9e3f20",
               "recorded_at": "2026-12-03T09:12:45.000812Z", "at": "2026-12-03T09:12:45.000512Z",
               "principal": {"subject": "CN=payments-engine,O=Example Bank",
                             "fingerprint_sha256": "9f86...0a08"},
               "via": "POST /v1/decisions/batch", "format": "mt", "batch": True, "kind": "message_refused",
               "reason": "1 message(s) refused; nothing was decided or recorded: [0].message: message type "
                         "MT940 is not supported (MT103, MT202, MT202COV)",
               "faults": [{"index": 0, "field": "message", "reason": "message type MT940 is not supported "
                                                                    "(MT103, MT202, MT202COV)"}],
               "fault_count": 1,
               "payload": {"sha256": "4825...8fea", "bytes": 212, "kept": True, "withheld": None}}],
    "next_cursor": None}}}}}


@router.get("/refusals", summary="Search refused screening requests (sealed refusal records), newest first",
            responses=_REFUSALS_EXAMPLE | problems(422))
def search_refusals(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("traces.query")],
    since: str | None = Query(None, description="recorded_at >= since (ISO 8601, UTC)"),
    until: str | None = Query(None, description="recorded_at < until"),
    principal: str | None = Query(None, description="client certificate SHA-256 fingerprint or subject DN"),
    format: str | None = Query(None, description="json | mt | pacs008: the format the request was read as"),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
    cursor: str | None = Query(None, description="next_cursor of the previous page"),
) -> dict[str, Any]:
    f = RefusalFilter(since=since, until=until, principal=principal, format=format, limit=limit,
                      cursor=cursor)
    page = query_refusals(rt.engine, f)
    return {"items": [refusal_json(r) for r in page.items], "next_cursor": page.next_cursor}


def _payload(data: bytes) -> dict[str, Any]:
    try:
        return {"encoding": "utf-8", "data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "base64", "data": base64.b64encode(data).decode()}


@router.get("/{trace_id}", summary="One sealed record, its payload, inclusion proof and checkpoint",
            responses=_TRACE_EXAMPLE | problems(404, 503))
async def get(trace_id: str, rt: RuntimeDep,
              caller: Annotated[Caller, allow("traces.get")]) -> dict[str, Any]:
    detail = await run_in_threadpool(get_trace, rt.engine, trace_id)
    if detail is None:
        raise Problem(404, "not_found", f"no trace {trace_id}")
    case_state = bool(caller.roles & PAYLOAD_ROLES)  # tipping-off (FATF R.21): officers and regulators
    if detail.kind in CASE_KINDS and not case_state:
        raise Problem(403, "forbidden", f"a {detail.kind} record is case state, which only officers and "
                                        "regulators read")
    read = report_read(detail.kind, detail.body) if detail.payload is not None else None
    if read is not None:  # a filed report's bytes come with this record: the read is sealed first
        await run_in_threadpool(record_reads, rt.ledger, caller.principal, [read])
    proof = await run_in_threadpool(ops.prove, rt.settings, detail.seq, rt.ledger)
    payload: dict[str, Any] = {"sha256": detail.payload_sha256, "state": detail.payload_state}
    if detail.payload is not None:
        if caller.roles & PAYLOAD_ROLES:
            payload |= _payload(detail.payload)
        else:
            payload["state"] = "withheld"  # present, but this role may not read payment data
    return {"seq": detail.seq, "trace_id": detail.trace_id, "kind": detail.kind,
            "recorded_at": detail.recorded_at, "leaf_hash": detail.leaf_hash, "chain_hash": detail.chain_hash,
            "record": orjson.loads(detail.record),
            "record_bytes": base64.b64encode(detail.record).decode(),
            "payload": payload,
            "annotations": [{"seq": a.seq, "trace_id": a.trace_id, "recorded_at": a.recorded_at,
                             "record": a.body} for a in detail.annotations] if case_state else [],
            "annotations_withheld": not case_state,
            "proof": proof.to_json()}


class AnnotationIn(BaseModel):
    model_config = {"extra": "forbid"}
    disposition: Disposition
    note: str = Field(min_length=1, max_length=10_000)
    correction: dict[str, Any] | None = Field(None, description="with CORRECTION: {decision, reason}")


@router.post("/{trace_id}/annotations", status_code=201,
             summary="Annotate a decision: a new ledger record referencing it (never an edit)",
             openapi_extra=json_body(AnnotationIn, examples.ANNOTATION),
             responses=problems(404, 422, 503, notes={404: "No decision with this trace id"}))
async def add_annotation(trace_id: str, request: Request, rt: RuntimeDep,
                         caller: Annotated[Caller, allow("traces.annotate")]) -> dict[str, Any]:
    body: AnnotationIn = await json_model(request, AnnotationIn, optional=False)
    r = await run_in_threadpool(annotate, rt.ledger, trace_id, caller.principal, body.disposition,
                                body.note, body.correction)
    return {"trace_id": r.trace_id, "seq": r.seq, "leaf_hash": r.leaf_hash, "recorded_at": r.recorded_at,
            "refers_to": {"trace_id": r.target_trace_id, "seq": r.target_seq}}
