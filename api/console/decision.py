"""The decision page: one sealed record in full, its annotations, and its proof, checked in the browser.

Reads the trace as ``GET /v1/traces/{id}`` does (``get_trace`` + ``ops.prove``; the payload
only for roles in ``PAYLOAD_ROLES``). The proof panel embeds the exact record bytes, the
inclusion proof, the signed checkpoint and the ledger's public key; ``static/proof.js``
recomputes the leaf hash, the path to the root and the signature itself, trusting no hash
the server states. Annotations are posted here and sealed as new ledger records.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, replace
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse

from api import ops
from api.access import PAYLOAD_ROLES
from api.auth import Caller
from api.console.forms import read_form
from api.console.render import page_caller, render
from api.problems import Problem
from audit.annotations import ANNOTATION_KIND, Disposition, annotate
from audit.cases.kinds import CASE_KINDS, report_read
from audit.cases.reads import record_reads
from audit.decide.fixed_point import decode
from audit.decide.record import (
    DECISION_KIND,
    FIXED_SCHEMAS,
    body_score,
    features_from_body,
    states_explanation,
)
from audit.decide.runtime import Runtime
from audit.errors import AnnotationError, QueryError, TraceNotFoundError
from audit.query.traces import TraceDetail, get_trace
from inference.schema import FEATURE_SCHEMAS
from ledger.errors import LedgerError
from wasm_rules import OUTCOMES

__all__ = ["ANNOTATION_FIELDS", "STAGES", "router"]

router = APIRouter(prefix="/console")
log = logging.getLogger("sealtrail.console")

# Pipeline order of the recorded stage latencies; any other stage follows, by name.
STAGES = ("queue", "features", "model", "rules")
ANNOTATION_FIELDS = ("disposition", "note", "correction_decision", "correction_reason")
_ERROR_FIELD = {"correction.decision": "correction_decision", "correction.reason": "correction_reason"}


@dataclass(frozen=True)
class Payload:
    """The raw payment message as this caller may see it."""

    state: str  # present | withheld | purged | none | absent
    text: str | None = None  # pretty-printed JSON or the message text
    encoding: str | None = None  # json | text | base64


def _payload(detail: TraceDetail, caller: Caller) -> Payload:
    if detail.payload is None:
        return Payload(detail.payload_state)
    if not caller.roles & PAYLOAD_ROLES:
        return Payload("withheld")  # present, but this role may not read payment data
    data = detail.payload
    try:
        pretty = orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2).decode()
        return Payload("present", pretty, "json")
    except orjson.JSONDecodeError:
        pass
    try:
        return Payload("present", data.decode("utf-8"), "text")
    except UnicodeDecodeError:
        return Payload("present", base64.b64encode(data).decode(), "base64")


def _features(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, value) for each recorded feature; names from the schema the record names."""
    f = body.get("features")
    if not isinstance(f, dict):
        return []
    values: Any = f.get("values")
    if body.get("schema") in FIXED_SCHEMAS:  # integers in fixed units: the values they stand for
        try:
            got = features_from_body(body)[0]
        except (KeyError, TypeError, ValueError):
            try:  # a feature schema this build does not know: the record's own digits still read it
                got = decode(f.get("scaled"), f.get("digits"))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return []  # unreadable: the integers alone, shown as values, would mislead
        values = [None if v != v else v for v in got]
    if not isinstance(values, list):
        return []
    schema = f.get("schema")
    names = FEATURE_SCHEMAS.get(schema, ()) if isinstance(schema, str) else ()
    named = len(values) == len(names)
    return [(names[i] if named else f"feature[{i}]", v) for i, v in enumerate(values)]


def _score(body: dict[str, Any]) -> float | None:
    """The recorded score (None: not scored, or not readable as one)."""
    try:
        return body_score(body)
    except (TypeError, ValueError):
        return None


def _latencies(body: dict[str, Any]) -> list[tuple[str, int]]:
    lat = body.get("latency_us")
    if not isinstance(lat, dict):
        return []
    order = [s for s in STAGES if s in lat] + sorted(k for k in lat if k not in STAGES)
    return [(s, lat[s]) for s in order if isinstance(lat[s], int)]


def _vkey(rt: Runtime) -> str:
    """The key the browser checks the checkpoint against: the pinned one, else the ledger's active
    key (from the open ledger: a page view does not read the private key file)."""
    return rt.settings.trusted_key or rt.ledger.active_vkey


def _proof(rt: Runtime, detail: TraceDetail, payload: Payload) -> tuple[dict[str, Any] | None, str | None]:
    """What proof.js needs (no server-computed leaf hash in it), or why there is no proof.

    Besides the proof it carries what the page shows that is not inside the record body: the
    trace id, kind and time (proof.js checks them against the sealed envelope) and, where this
    role sees it, the payload (its SHA-256 must be the one the envelope seals). A page view
    never signs: an entry newer than the latest checkpoint is "not yet covered" (``None, ""``)."""
    try:
        proof = ops.prove(rt.settings, detail.seq, rt.ledger, sign=False)
    except ops.NotCoveredError:
        return None, ""
    except LedgerError as exc:
        log.warning("no proof for seq %s: %s", detail.seq, exc)
        return None, type(exc).__name__  # the detail (paths, key files) stays in the server's log
    p = proof.to_json()
    shown = {"trace_id": detail.trace_id, "kind": detail.kind, "recorded_at": detail.recorded_at}
    raw = detail.payload if payload.state == "present" else None
    return {"record_bytes": base64.b64encode(detail.record).decode(), "index": p["index"], "size": p["size"],
            "hashes": p["hashes"], "checkpoint": p["checkpoint"], "vkey": _vkey(rt), "shown": shown,
            "payload_state": payload.state,
            "payload": None if raw is None else base64.b64encode(raw).decode()}, None


def _context(rt: Runtime, caller: Caller, trace_id: str) -> dict[str, Any]:
    """Everything the page shows about ``trace_id``; 404 if there is no such trace."""
    try:
        detail = get_trace(rt.engine, trace_id)
    except QueryError:
        detail = None
    if detail is None:
        raise Problem(404, "not_found", f"no trace {trace_id}")
    case_state = bool(caller.roles & PAYLOAD_ROLES)  # tipping-off (FATF R.21): officers and regulators
    if detail.kind in CASE_KINDS and not case_state:
        raise Problem(403, "forbidden", f"a {detail.kind} record is case state, which only officers and "
                                        "regulators read")
    withheld = not case_state
    if withheld:
        detail = replace(detail, annotations=())
    read = report_read(detail.kind, detail.body) if detail.payload is not None and case_state else None
    if read is not None:  # a filed report's bytes are shown with this record: the read is sealed first
        record_reads(rt.ledger, caller.principal, [read])
    body = detail.body
    payload = _payload(detail, caller)
    proof, proof_error = _proof(rt, detail, payload)
    return {"detail": detail, "body": body, "is_decision": detail.kind == DECISION_KIND,
            "is_annotation": detail.kind == ANNOTATION_KIND, "annotations_withheld": withheld,
            "body_json": orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode(),
            "payload": payload, "features": _features(body), "score": _score(body),
            "explains": isinstance(body, dict) and states_explanation(body),
            "latencies": _latencies(body), "proof": proof, "proof_error": proof_error,
            "dispositions": [d.value for d in Disposition], "outcomes": OUTCOMES,
            "form": dict.fromkeys(ANNOTATION_FIELDS, ""), "errors": {}}


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


@router.get("/decisions/{trace_id}")
def decision_page(request: Request, trace_id: str) -> HTMLResponse:
    """One trace: the decision, its payload as the caller may see it, annotations, proof panel."""
    caller = page_caller(request, "traces.get")
    ctx = _context(_runtime(request), caller, trace_id)
    return render(request, "decision.html", caller, **ctx)


@router.post("/decisions/{trace_id}/checkpoint")
async def sign_checkpoint(request: Request, trace_id: str) -> RedirectResponse:
    """Sign a checkpoint now (as ``GET /v1/ledger/checkpoint`` may), so this entry has a proof."""
    page_caller(request, "ledger.checkpoint")
    rt = _runtime(request)
    try:
        found = await run_in_threadpool(get_trace, rt.engine, trace_id)
    except QueryError:
        found = None
    if found is None:
        raise Problem(404, "not_found", f"no trace {trace_id}")
    latest = rt.ledger.latest_checkpoint()
    if latest is None or latest.checkpoint.size <= found.seq:
        await run_in_threadpool(rt.ledger.checkpoint)
    return RedirectResponse(f"/console/decisions/{found.trace_id}#proof", status_code=303)


def _correction(form: dict[str, str]) -> dict[str, str] | None:
    """The correction fields as the API takes them: both given, or none (``annotate`` judges)."""
    decision, reason = form["correction_decision"], form["correction_reason"]
    return {"decision": decision, "reason": reason} if decision or reason else None


@router.post("/decisions/{trace_id}/annotations")
async def annotate_decision(request: Request, trace_id: str) -> Any:
    """Seal an annotation of the decision, then back to its page (303); refused input: 422, inline."""
    caller = page_caller(request, "traces.annotate")
    raw = await read_form(request)
    form = {k: raw.get(k, "") for k in ANNOTATION_FIELDS}
    rt = _runtime(request)
    try:
        if not form["disposition"]:  # the form preselects none: the officer chooses
            raise AnnotationError("disposition", "choose a disposition: none is chosen for you")
        await run_in_threadpool(annotate, rt.ledger, trace_id, caller.principal, form["disposition"],
                                form["note"], _correction(form))
    except TraceNotFoundError:
        raise Problem(404, "not_found", f"no trace {trace_id}") from None
    except AnnotationError as exc:
        ctx = await run_in_threadpool(_context, rt, caller, trace_id)
        field = _ERROR_FIELD.get(exc.field, exc.field)
        ctx |= {"form": form, "errors": {field: exc.message}}
        return render(request, "decision.html", caller, status=422, **ctx)
    return RedirectResponse(f"/console/decisions/{trace_id.lower()}", status_code=303)

