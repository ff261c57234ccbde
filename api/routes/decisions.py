"""POST /v1/decisions and /v1/decisions/batch: parse, decide, seal, then answer.

The answer leaves only after the decision's ledger record is durable; if the ledger cannot
commit, the caller gets 503 with Retry-After and no decision exists. A request refused as input
(unreadable message, empty body, wrong content type, bad X-Priority or Idempotency-Key) is
refused whole: nothing is decided. Every refusal of a caller allowed to score is sealed as a
``refusal`` record (``audit.decide.refusal``, sealed by ``audit.decide.refusal_seal``) whose
``trace_id`` the problem carries: a body the scoring path refuses (``parse_submissions``: 422, or
413 for too many transactions), an empty one, one over the size cap (here, or in ``api.limits``
before any route), and a refusal for a header (then before the body was read: no payload). If it
cannot be sealed the refusal is answered all the same, without ``trace_id``, logged and counted
(``sealtrail_refusal_seal_failures_total``). Requests refused before authentication or
authorisation, and for their rate, are not sealed: no principal allowed to score stands behind
the first, and the rate limit is what bounds how fast refusals can grow the ledger.
A payment decided before (the same idempotency key: ``Idempotency-Key``, else its UETR, else its
reference, with the same content) is answered with its existing decision, marked ``replayed``
(and, on ``POST /v1/decisions``, the response header ``Idempotent-Replayed: true``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from api.deps import authorize
from api.openapi import body, examples, media, operation, problems, schema_of
from api.problems import Problem
from audit.decide.idempotency import HEADER_KEY
from audit.decide.refusal import Refusal, empty_body, header_refused, refusal_of, too_large
from audit.decide.refusal_seal import seal_refusal
from audit.decide.runtime import Runtime
from audit.decide.submissions import MAX_BATCH, parse_submissions
from audit.decide.types import Decision, Submission
from audit.errors import SubmissionRefusedError
from inference.batcher import Priority
from inference.messages import MAX_FILE_BYTES
from inference.messages.json_message import TransactionIn

__all__ = ["MAX_BATCH", "format_of", "router", "seal_refused", "via_of"]

log = logging.getLogger("sealtrail.api")


class _RequestRoute(APIRoute):
    """A route whose endpoint takes the ``Request`` alone and returns its ``Response``.

    The scoring path's two endpoints skip FastAPI's per-request dependency solving and
    response-model validation (about a third of the app's CPU per decision); each endpoint
    authenticates first, itself, through ``api.deps.authorize``, as ``allow()`` does elsewhere.
    OpenAPI still documents the body, the response model and the errors.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return endpoint


router = APIRouter(prefix="/v1/decisions", tags=["decisions"], route_class=_RequestRoute)
# XML is any ISO 20022 message sealtrail reads (pacs.008, pacs.009, pacs.004, pain.001), told apart by
# its Document's namespace; the record names the one it was.
_FORMATS = {"application/json": "json", "application/x-swift-fin": "mt", "application/xml": "iso20022",
            "text/xml": "iso20022"}


class FiredRule(BaseModel):
    id: str
    outcome: str
    reason: str


class LedgerRef(BaseModel):
    seq: int = Field(description="position of the decision record in the ledger")
    leaf_hash: str = Field(description="RFC 6962 leaf hash of the record, lower-case hex")


class AccountRiskSideOut(BaseModel):
    account: str = Field(description="the account keyed under the ledger's account secret (32 hex digits, "
                                     "as in the decision summary), never the account itself")
    before_milli: int = Field(description="its risk before this decision (decayed to the decision's hour), "
                                          "in milli-points")
    after_milli: int = Field(description="its risk after this decision's points")


class AccountRiskPolicyOut(BaseModel):
    id: str = Field(description='"sealtrail.account-risk/1"')
    half_life_hours: int
    threshold_milli: int = Field(description="an account alert is raised on crossing it from below")
    floor_milli: int = Field(description="risk below it at the start of a UTC day is forgotten")
    score_milli: int = Field(description="points of a score of 1.0 (the score is quantised to thousandths)")
    missing_score_milli: int
    outcome_milli: dict[str, int] = Field(description="points per outcome: ALLOW, REVIEW, HOLD, BLOCK")


class AccountRiskOut(BaseModel):
    policy: AccountRiskPolicyOut
    account_key_id: str = Field(description="which account secret keyed the accounts")
    points_milli: int = Field(description="the points this decision added to each of its accounts")
    originator: AccountRiskSideOut | None
    beneficiary: AccountRiskSideOut | None
    max_milli: int = Field(description="the larger of the two sides' after_milli")
    alerts: list[str] = Field(description="originator and/or beneficiary: the sides whose risk crossed the "
                                          "threshold with this decision (an account alert), whatever the "
                                          "decision itself")


class ReasonOut(BaseModel):
    code: str = Field(description="TEMPORAL_CYCLE, PASS_THROUGH, FAN_IN, AMOUNT_VS_HISTORY, ... "
                                  "(docs/explanations.md lists them)")
    contribution_milli: int = Field(description="how much its features raised the score, in thousandths")
    text: str = Field(description="the reason in words, from this payment's own feature values")


class ExplanationOut(BaseModel):
    method: str = Field(description='"sealtrail.integrated-gradients/1"')
    reasons: list[ReasonOut] = Field(description="at most 3, largest contribution first; empty when no "
                                                 "group of features raised the score by 0.02 or more")


class DecisionOut(BaseModel):
    trace_id: str = Field(description="UUIDv7 of the sealed record")
    decision: str = Field(description="ALLOW | REVIEW | HOLD | BLOCK")
    score: float | None = Field(description="model risk score in [0, 1]; null if the model did not score")
    fired: list[FiredRule]
    fail_safe: str | None = Field(description="why the decision is a fail-safe HOLD, or null")
    reference: str | None = Field(None, description="the message's own reference (:20: / EndToEndId)")
    recorded_at: str
    ledger: LedgerRef
    latency_us: dict[str, int] = Field(description="queue, features, model, rules, explain, seal, ledger, "
                                                   "total; request: the whole request inside the server")
    replayed: bool = Field(False, description="present and true when this payment (its idempotency key, "
                                              "same content) was decided before: the answer is that "
                                              "existing decision, and nothing new was sealed")
    account_risk: AccountRiskOut | None = Field(None, description="the accounts' risk after this decision "
                                                "and any account alert (docs/account-risk.md), as the record "
                                                "states it; null where the record states none")
    explanation: ExplanationOut | None = Field(
        None, description="why the model scored as it did: reason codes, for a decision scored 0.5 or more "
                          "or ended REVIEW or worse (docs/explanations.md), as the record states them; null "
                          "for other decisions and where the record states none")

    model_config = {"json_schema_extra": {"examples": [{
        "trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11", "decision": "REVIEW", "score": 0.71,
        "fired": [{"id": "R16_INCOMPLETE", "outcome": "REVIEW",
                   "reason": "Originator information incomplete (FATF R.16)"}],
        "fail_safe": None, "reference": "REF20261203-001", "recorded_at": "2026-12-03T09:12:44.123456Z",
        "ledger": {"seq": 41873, "leaf_hash": "5f1c...e2"},
        "latency_us": {"queue": 40, "features": 30, "model": 60, "rules": 35, "seal": 20, "ledger": 900,
                       "total": 1050, "request": 1300},
        "account_risk": {
            "policy": {"id": "sealtrail.account-risk/1", "half_life_hours": 336, "threshold_milli": 50000,
                       "floor_milli": 1000, "score_milli": 10000, "missing_score_milli": 5000,
                       "outcome_milli": {"ALLOW": 0, "REVIEW": 10000, "HOLD": 25000, "BLOCK": 50000}},
            "account_key_id": "3f0c9a1b2d4e5f60", "points_milli": 17100,
            "originator": {"account": "9b1d5c0e7a2f4b3c8d6e1f0a2b3c4d5e", "before_milli": 36200,
                           "after_milli": 53300},
            "beneficiary": {"account": "0c4e6a8b2d1f3e5a7c9b0d2f4a6c8e1b", "before_milli": 0,
                            "after_milli": 17100},
            "max_milli": 53300, "alerts": ["originator"]},
        "explanation": {"method": "sealtrail.integrated-gradients/1", "reasons": [
            {"code": "TEMPORAL_CYCLE", "contribution_milli": 212,
             "text": "money returned to the sender in 3 hops, each later than the last (1 such paths)"},
            {"code": "PASS_THROUGH", "contribution_milli": 97,
             "text": "the sender paid on 96% of what it received in 24 hours (96% over 7 days)"}]}}]}}


class BatchOut(BaseModel):
    count: int
    decisions: list[DecisionOut]


_CREATE, _BATCH = "decisions.create", "decisions.batch"  # operations of the role matrix
_TRANSACTION = schema_of(TransactionIn)
_FIN = {"type": "string", "description": "SWIFT FIN: MT103, MT202 or MT202COV"}
_PACS008 = {"type": "string", "description": "ISO 20022 pacs.008 (FIToFICstmrCdtTrf)"}
_PRIORITY = {"parameters": [{"name": "X-Priority", "in": "header", "required": False,
                             "description": "batcher lane: P0 first, P2 last",
                             "schema": {"type": "string", "enum": ["P0", "P1", "P2"], "default": "P1"}}]}
_IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False,
                "description": "the payment's idempotency key (1-255 visible ASCII characters; default: "
                               "its UETR, else its reference); a key already decided with the same content "
                               "answers the existing decision (Idempotent-Replayed: true)",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255}}
_ONE_PARAMS = {"parameters": [*_PRIORITY["parameters"], _IDEMPOTENCY]}
_ONE_DOC = body({
    "application/json": media(_TRANSACTION, examples.TRANSACTION_JSON),
    "application/x-swift-fin": media(_FIN, examples.MT103),
    "application/xml": media(_PACS008, examples.PACS008),
    "text/xml": media(_PACS008, examples.PACS008)},
    description="One payment message: the `sealtrail.transaction/1` JSON, a FIN MT103/MT202/MT202COV, "
                "or a pacs.008 holding one credit transfer")
_ARRAY = {"type": "array", "items": _TRANSACTION, "minItems": 1, "maxItems": MAX_BATCH}
_BATCH_DOC = body({
    "application/json": media(
        {"oneOf": [_ARRAY, {"type": "object", "properties": {"transactions": _ARRAY},
                            "required": ["transactions"], "additionalProperties": False}]},
        examples={"array": ("A JSON array of transactions", examples.BATCH_JSON),
                  "object": ("The same array under transactions", {"transactions": examples.BATCH_JSON})}),
    "application/x-swift-fin": media(_FIN, examples.MT103_RJE),
    "application/xml": media(_PACS008, examples.PACS008),
    "text/xml": media(_PACS008, examples.PACS008)},
    description=f"Up to {MAX_BATCH:,} transactions: a JSON array, an RJE file of FIN messages ('$' between "
                "them), or a pacs.008 with several CdtTrfTxInf")
_ERRORS = problems(413, 415, 422, 503, notes={
    413: f"Body over {MAX_FILE_BYTES:,} bytes, or more than {MAX_BATCH:,} transactions; `trace_id`: its "
         "sealed `refusal` record",
    415: f"Content-Type is none of {', '.join(_FORMATS)}; `trace_id`: its sealed `refusal` record",
    422: "A message refused, an empty body, or a bad X-Priority or Idempotency-Key: `errors` names each "
         "field; nothing was decided. The problem carries `trace_id`, its sealed `refusal` record",
    503: "Ledger unavailable: no decision was issued. Retry after `Retry-After` seconds"})


def _priority(request: Request) -> Priority:
    text = request.headers.get("x-priority", "P1")
    try:
        return Priority.parse(text)
    except ValueError as exc:
        raise Problem(422, "invalid_priority", str(exc),
                      [{"field": "X-Priority", "message": str(exc)}]) from exc


def _format(request: Request) -> str:
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    fmt = _FORMATS.get(ctype)
    if fmt is None:
        raise Problem(415, "unsupported_media_type",
                      f"Content-Type {ctype or '(none)'} is not accepted; send one of {', '.join(_FORMATS)}",
                      [{"field": "Content-Type", "message": "unsupported media type"}])
    return fmt


def via_of(batch: bool) -> str:
    """The refusal record's ``request.via`` of a decision endpoint."""
    return "POST /v1/decisions/batch" if batch else "POST /v1/decisions"


def format_of(content_type: str | None) -> str:
    """The format a ``Content-Type`` header names; ``auto`` (none determined) where it names none
    the scoring path reads."""
    return _FORMATS.get((content_type or "").split(";", 1)[0].strip().lower(), "auto")


async def seal_refused(state: Any, refusal: Refusal) -> str | None:
    """Seal ``refusal`` in the ledger of the app whose ``state`` is given; its trace id, or None
    (logged and counted) where it could not be sealed."""
    rt: Runtime = state.runtime
    metrics = getattr(state, "metrics", None)
    try:
        receipt = await run_in_threadpool(seal_refusal, rt.ledger, refusal)
    except Exception:
        log.exception("a refused request (%s, %s) could not be sealed as a refusal record; answered "
                      "without trace_id", refusal.via, refusal.kind)
        if metrics is not None:
            metrics.refusal_seal_failures.inc()
        return None
    if metrics is not None:
        metrics.refusals.labels(refusal.kind).inc()
    return receipt.trace_id


async def _parse(request: Request, raw: bytes, fmt: str, principal: dict[str, Any], *, batch: bool,
                 key: str | None) -> list[Submission]:
    """``parse_submissions`` (in a worker thread for a batch); a refusal is sealed, its trace id
    on the ``SubmissionRefusedError`` raised again."""
    try:
        if batch:
            subs: list[Submission] = await run_in_threadpool(parse_submissions, raw, fmt, principal,
                                                             batch=True)
        else:
            subs = parse_submissions(raw, fmt, principal, batch=False, idempotency_key=key)
        return subs
    except SubmissionRefusedError as exc:
        refusal = refusal_of(exc, raw, fmt=fmt, principal=principal, batch=batch, via=via_of(batch),
                             max_items=MAX_BATCH, idempotency_key=key is not None)
        exc.trace_id = await _seal(request, refusal)
        raise


async def _seal(request: Request, refusal: Refusal) -> str | None:
    return await seal_refused(request.app.state, refusal)


async def _too_large(request: Request, principal: dict[str, Any], fmt: str, batch: bool,
                     declared: int | None) -> Problem:
    """The 413 of a body over the cap, sealed as a refusal without payload (it was never read)."""
    tid = await _seal(request, too_large(declared, MAX_FILE_BYTES, fmt=fmt, principal=principal, batch=batch,
                                         via=via_of(batch)))
    what = "more than" if declared is None else f"{declared:,} bytes,"
    return Problem(413, "too_large", f"body of {what} {MAX_FILE_BYTES:,} bytes at most",
                   extra=None if tid is None else {"trace_id": tid})


async def _body(request: Request, principal: dict[str, Any], fmt: str, batch: bool, key: str | None) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_FILE_BYTES:
        raise await _too_large(request, principal, fmt, batch, int(declared))
    # The ASGI messages read directly (Request.body() is an async generator per request), and the
    # cap enforced as chunks arrive rather than after a chunked body was held whole.
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise await _too_large(request, principal, fmt, batch, None)
        chunks.append(chunk)
        if not msg.get("more_body", False):
            break
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if not raw.strip():
        tid = await _seal(request, empty_body(raw, fmt=fmt, principal=principal, batch=batch,
                                              via=via_of(batch), max_items=MAX_BATCH,
                                              idempotency_key=key is not None))
        raise Problem(422, "empty_body", "the request body is empty", [{"field": "body", "message": "empty"}],
                      extra=None if tid is None else {"trace_id": tid})
    return raw


async def _headers(request: Request, principal: dict[str, Any], *, batch: bool
                   ) -> tuple[str, Priority, str | None]:
    """The format, lane and idempotency key the headers give; a refused header is sealed (before
    the body is read: no payload) and its problem carries the trace id."""
    try:
        fmt = _format(request)
        priority = _priority(request)
        key = _idempotency_key(request) if not batch else None
    except Problem as p:
        declared = request.headers.get("content-length", "")
        field = p.errors[0]["field"] if p.errors else "header"
        refusal = header_refused(p.kind, field, p.detail, fmt=format_of(request.headers.get("content-type")),
                                 principal=principal, batch=batch, via=via_of(batch),
                                 declared=int(declared) if declared.isdigit() else None,
                                 idempotency_key="idempotency-key" in request.headers and not batch)
        tid = await _seal(request, refusal)
        if tid is not None:
            p.extra["trace_id"] = tid
        raise
    return fmt, priority, key


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is not None and not HEADER_KEY.fullmatch(key):
        msg = "Idempotency-Key must be 1 to 255 visible ASCII characters"
        raise Problem(422, "invalid_idempotency_key", msg, [{"field": "Idempotency-Key", "message": msg}])
    return key


def decision_json(d: Decision, reference: str | None, request_us: int) -> dict[str, Any]:
    out = {"trace_id": d.trace_id, "decision": d.decision, "score": d.score,
           "fired": [{"id": h.id, "outcome": h.outcome, "reason": h.reason} for h in d.fired],
           "fail_safe": d.fail_safe, "reference": reference, "recorded_at": d.recorded_at,
           "ledger": {"seq": d.seq, "leaf_hash": d.leaf_hash},
           "latency_us": {**d.latency_us, "request": request_us}}
    if d.replayed:
        out["replayed"] = True
    risk = getattr(d, "account_risk", None)  # (test doubles may lack the field)
    out["account_risk"] = None if risk is None else risk.to_json()
    said = getattr(d, "explanation", None)
    out["explanation"] = None if said is None else said.to_json()
    return out


@router.post("", response_model=DecisionOut, openapi_extra=operation(_CREATE) | _ONE_DOC | _ONE_PARAMS,
             summary="Decide one transaction; answered once its record is durable", responses=_ERRORS)
async def create_decision(request: Request) -> Response:
    t0 = time.perf_counter()
    caller = authorize(request, _CREATE)  # before the body is read
    rt: Runtime = request.app.state.runtime
    principal = caller.principal.to_json()
    fmt, priority, key = await _headers(request, principal, batch=False)
    raw = await _body(request, principal, fmt, False, key)
    subs = await _parse(request, raw, fmt, principal, batch=False, key=key)
    (d,) = await rt.service.decide_async(subs, priority)
    us = round((time.perf_counter() - t0) * 1e6)
    return Response(orjson.dumps(decision_json(d, subs[0].transaction.reference, us)),
                    media_type="application/json",
                    headers={"Idempotent-Replayed": "true"} if d.replayed else None)


@router.post("/batch", response_model=BatchOut, openapi_extra=operation(_BATCH) | _BATCH_DOC | _PRIORITY,
             summary=f"Decide up to {MAX_BATCH:,} transactions in one call (all refused if any is)",
             responses=_ERRORS)
async def create_batch(request: Request) -> Response:
    t0 = time.perf_counter()
    caller = authorize(request, _BATCH)  # before the body is read
    rt: Runtime = request.app.state.runtime
    principal = caller.principal.to_json()
    fmt, priority, _ = await _headers(request, principal, batch=True)
    raw = await _body(request, principal, fmt, True, None)
    subs = await _parse(request, raw, fmt, principal, batch=True, key=None)
    # Batch callers are not held to the interactive deadline: 10,000 at once exceed it by design.
    decisions = await rt.service.decide_async(subs, priority, timeout_s=60.0)
    us = round((time.perf_counter() - t0) * 1e6)
    body = {"count": len(decisions),
            "decisions": [decision_json(d, s.transaction.reference, us)
                          for d, s in zip(decisions, subs, strict=True)]}
    return Response(orjson.dumps(body), media_type="application/json")
