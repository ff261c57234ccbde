"""Rule governance: propose (compile), approve (four-eyes), activate, list.

Every step is a ledger record written by ``audit.governance.service``; activation makes the next
pipeline batch use the new module (a running batch finishes on the old one). Identifiers (the
ruleset id and version, rule ids) are checked by the rule language before anything is sealed,
and nothing that can fail runs between a sealed record and its answer.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import quote

import numpy as np
import orjson
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, ValidationError
from starlette.responses import Response

from api.auth import Caller
from api.bodies import json_model
from api.deps import RuntimeDep, allow
from api.openapi import body, examples, json_body, media, problems, schema_of
from api.problems import Problem

__all__ = ["MAX_JSON_NESTING", "MAX_SOURCE", "json_nesting", "router", "ruleset_location"]

router = APIRouter(prefix="/v1/rulesets", tags=["rule governance"])
MAX_SOURCE = 1 << 20
MAX_JSON_NESTING = 32  # arrays and objects inside each other in a JSON body; a proposal needs 1
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class Proposal(BaseModel):
    model_config = {"extra": "forbid"}
    source: str = Field(min_length=1, max_length=MAX_SOURCE, description="the ruleset TOML")
    cases: str | None = Field(None, max_length=16 * MAX_SOURCE, description="test cases (JSONL) to run first")
    comment: str | None = Field(None, max_length=10_000)


class Step(BaseModel):
    model_config = {"extra": "forbid"}
    comment: str | None = Field(None, max_length=10_000)
    module_sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$",
                                      description="the module you reviewed; refused if it is not this one's")


def json_nesting(raw: bytes) -> int:
    """How deep arrays and objects nest in JSON text ``raw``, strings aside, read without
    recursion and in time linear in the size (malformed text gets a number too: the parser
    then says what is wrong with it)."""
    steps = np.frombuffer(_JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS), np.uint8)
    if steps.size == 0:
        return 0
    return int(np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1)).max())


async def _json(request: Request, model: type[BaseModel], *, optional: bool) -> Any:
    """The JSON body as ``model`` (``api.bodies.json_model``), refused naming the limit if it
    nests deeper than ``MAX_JSON_NESTING``, checked before any parser sees it."""
    if json_nesting(await request.body()) > MAX_JSON_NESTING:
        raise Problem(422, "invalid_request", f"the JSON body nests arrays or objects more than "
                      f"{MAX_JSON_NESTING} levels deep (the limit, MAX_JSON_NESTING)",
                      [{"field": "body", "message": f"nested more than {MAX_JSON_NESTING} levels"}])
    return await json_model(request, model, optional=optional)


def ruleset_location(ruleset: str) -> str:
    """The ruleset's URL path, percent-encoded (ids are plain ASCII; encoding keeps it so)."""
    return f"/v1/rulesets/{quote(ruleset, safe='@')}"


_TOML = media({"type": "string", "maxLength": MAX_SOURCE, "description": "the ruleset TOML"},
              examples.RULESET_TOML)
_PROPOSE_DOC = body({
    "application/toml": _TOML, "text/x-toml": _TOML, "text/plain": _TOML,
    "application/json": media(schema_of(Proposal), {
        "source": examples.RULESET_TOML, "cases": examples.RULESET_CASES,
        "comment": "Adds the model score bands; thresholds as documented in the pack."})},
    description="The ruleset TOML alone, or JSON: the TOML, test cases (JSONL) to run first, a comment")
_STEP_DOC = json_body(Step, examples.STEP, required=False,
                      description="Optional: a comment, and the module SHA-256 you reviewed")


@router.get("", summary="Every ruleset and its status (proposed, approved, active, retired)")
def list_rulesets(rt: RuntimeDep, caller: Annotated[Caller, allow("rulesets.list")]) -> dict[str, Any]:
    active = rt.governance.active()
    return {"active": None if active is None else active.id,
            "rulesets": [v.to_json() for v in rt.governance.list()]}


@router.post("", status_code=201, openapi_extra=_PROPOSE_DOC,
             summary="Propose a ruleset: compiled, its cases run, recorded; answers its module SHA-256",
             responses=problems(409, 413, 415, 422, 503, notes={
                 409: "A ruleset with this id and version exists",
                 413: f"Ruleset source over {MAX_SOURCE:,} bytes",
                 422: "The ruleset does not compile, a case fails, or an identifier or limit is broken: "
                      "`errors` names the rule, line, case or field"}))
async def propose(request: Request, rt: RuntimeDep,
                  caller: Annotated[Caller, allow("rulesets.propose")]) -> Response:
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype == "application/json":
        p: Proposal = await _json(request, Proposal, optional=False)
    elif ctype in ("application/toml", "text/plain", "text/x-toml"):
        raw = await request.body()
        if len(raw) > MAX_SOURCE:
            raise Problem(413, "too_large", f"ruleset source over {MAX_SOURCE:,} bytes")
        try:
            p = Proposal(source=raw.decode("utf-8"), cases=None, comment=None)
        except (UnicodeDecodeError, ValidationError) as exc:
            raise Problem(422, "invalid_request", f"ruleset source: {exc}",
                          [{"field": "body", "message": "not a non-empty UTF-8 TOML text"}]) from exc
    else:
        raise Problem(415, "unsupported_media_type", "send application/toml or application/json",
                      [{"field": "Content-Type", "message": "unsupported media type"}])
    view = await run_in_threadpool(rt.governance.propose, p.source, caller.principal, p.comment,
                                   cases=p.cases)
    return Response(orjson.dumps(view.to_json()), status_code=201, media_type="application/json",
                    headers={"Location": ruleset_location(view.id)})


@router.get("/{ruleset}", summary="One ruleset's state", responses=problems(404))
def get_ruleset(ruleset: str, rt: RuntimeDep,
                caller: Annotated[Caller, allow("rulesets.list")]) -> dict[str, Any]:
    out: dict[str, Any] = rt.governance.get(ruleset).to_json()
    return out


@router.post("/{ruleset}/approve", summary="Approve (role approver; never the proposer)",
             openapi_extra=_STEP_DOC, responses=problems(403, 404, 409, 422, 503, notes={
                 403: "The certificate's roles may not approve, or it proposed this ruleset (four-eyes)",
                 409: "The ruleset is not proposed, or its module is not the one reviewed"}))
async def approve(ruleset: str, request: Request, rt: RuntimeDep,
                  caller: Annotated[Caller, allow("rulesets.approve")]) -> dict[str, Any]:
    step: Step = await _json(request, Step, optional=True)
    view = await run_in_threadpool(rt.governance.approve, ruleset, caller.principal, step.comment,
                                   module_sha256=step.module_sha256)
    out: dict[str, Any] = view.to_json()
    return out


@router.post("/{ruleset}/activate", summary="Activate an approved ruleset: the next batch uses it",
             openapi_extra=_STEP_DOC, responses=problems(404, 409, 422, 503, notes={
                 409: "The ruleset is not approved, or its module is not the one reviewed"}))
async def activate(ruleset: str, request: Request, rt: RuntimeDep,
                   caller: Annotated[Caller, allow("rulesets.activate")]) -> dict[str, Any]:
    step: Step = await _json(request, Step, optional=True)
    view = await run_in_threadpool(rt.governance.activate, ruleset, caller.principal, step.comment,
                                   module_sha256=step.module_sha256)
    await run_in_threadpool(rt.reload_rules)
    out: dict[str, Any] = view.to_json()
    return out
