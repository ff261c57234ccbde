"""/v1/clearances: good-guy clearances: "this customer is not that listed person", four-eyes.

A thin face over ``audit.screening.clearance``. ``POST /v1/clearances`` seals an officer's proposal
that the party at ``where`` of decision ``trace_id`` is not entry ``entry_id`` of list ``list``,
until ``until`` (at most a year ahead); ``POST .../{seq}/approve`` seals a second officer's approval
(not the proposer: four-eyes), from which on that customer's name hits of that entry are cleared
(named in the decision record, raising no rule); ``POST .../{seq}/revoke`` ends it; ``GET`` lists
them. Officers propose, approve and revoke; officers, regulators and admins read. A refused request
seals nothing; its problem names the field. docs/http-api.md documents the endpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from api.auth import Caller
from api.bodies import json_model
from api.deps import RuntimeDep, allow
from api.openapi import examples, json_body, problems
from api.problems import Problem, audit_problem
from audit.errors import ClearanceError
from audit.screening.clearance import approve_clearance, clearances, propose_clearance, revoke_clearance

__all__ = ["ClearanceIn", "StepIn", "router"]

router = APIRouter(prefix="/v1/clearances", tags=["sanctions lists"])
_T = TypeVar("_T")
_RATIONALE = ("at most 2,000 characters, at least one visible; no control character but newline and tab, "
              "no bidirectional control")
Seq = Annotated[int, Path(ge=0, description="the seq of the clearance's proposal")]


class ClearanceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trace_id: str = Field(description="the decision whose record shows the name hit")
    where: str = Field(description="where the hit is in that payment (`beneficiary`, `originator`, ...), as "
                                   "the record's `screening.hits[].where` says")
    list: str = Field(description="the list's name, as the hit names it")
    entry_id: str = Field(description="the listed entry, as the hit names it")
    until: str = Field(description="the last day (UTC) the clearance clears, YYYY-MM-DD, at most 366 days "
                                   "ahead")
    rationale: str = Field(description=f"why the customer is not the listed one ({_RATIONALE})")


class StepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rationale: str = Field(description=f"why, sealed with the step ({_RATIONALE})")


async def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` in the thread pool; a ``ClearanceError`` as its problem, naming the field."""
    try:
        return await run_in_threadpool(fn, *args, **kwargs)
    except ClearanceError as exc:
        status, kind, _ = audit_problem(exc)
        raise Problem(status, kind, str(exc), [{"field": exc.field, "message": exc.message}]) from exc


def _ok(status: int, example: Any) -> dict[int | str, dict[str, Any]]:
    return {status: {"content": {"application/json": {"example": example}}}}


_OFFICER = {"subject": "CN=Ana Lima,OU=Sanctions,O=Example Bank", "sans": [],
            "issuer": "CN=Example Bank Issuing CA,O=Example Bank",
            "fingerprint_sha256": "8f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4",
            "serial": "6a1c2e",
            "spki_sha256": "1f2e3d4c5b6a79887766554433221100ffeeddccbbaa99887766554433221100"}
_APPROVER = {**_OFFICER, "subject": "CN=Tom Berg,OU=Sanctions,O=Example Bank",
             "fingerprint_sha256": "0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d48f1e2d3c4b5a69788796a5b4c3d2e1f",
             "serial": "6a1c31",
             "spki_sha256": "ffeeddccbbaa998877665544332211001f2e3d4c5b6a79887766554433221100"}
_CLEARANCE: dict[str, Any] = {
    "seq": 52210, "status": "approved", "list": "ofac-sdn", "entry_id": "12057",
    "account_key": "5b0e1f2a3c4d5e6f708192a3b4c5d6e7", "key_id": "9c8b7a6f5e4d3c2b",
    "until": "2027-06-30", "trace_id": "01938f2a-7c41-7d22-9a51-0c1d2e3f4a5b", "where": "beneficiary",
    "proposer": _OFFICER, "rationale": examples.CLEARANCE_PROPOSE["rationale"],
    "recorded_at": "2026-12-04T09:12:40.118201Z", "approved_seq": 52231, "approver": _APPROVER,
    "revoked_seq": None, "revoker": None}


_REVOKED = {**_CLEARANCE, "status": "revoked", "revoked_seq": 53002, "revoker": _OFFICER}


@router.get("", summary="Every good-guy clearance proposed and what became of it, oldest first",
            responses=_ok(200, {"clearances": [_CLEARANCE]}))
async def list_clearances(rt: RuntimeDep,
                          caller: Annotated[Caller, allow("clearances.read")]) -> dict[str, Any]:
    found = await _call(clearances, rt.engine)
    return {"clearances": [c.to_json() for c in found]}


@router.post("", status_code=201, summary="Propose a good-guy clearance of a decision's name hit (sealed)",
             openapi_extra=json_body(ClearanceIn, examples.CLEARANCE_PROPOSE),
             responses=_ok(201, {**_CLEARANCE, "status": "proposed", "approved_seq": None, "approver": None})
             | problems(404, 422, 503, notes={
                 404: "No decision has this trace id",
                 422: "Refused: `errors` names the field (`trace_id`: not screened, or its payment purged; "
                      "`entry_id`: no such hit there, or an exact identifier or BIC match, never cleared; "
                      "`where`: the party has no account; `until`, `rationale`); nothing was sealed"}))
async def propose(request: Request, rt: RuntimeDep,
                  caller: Annotated[Caller, allow("clearances.propose")]) -> dict[str, Any]:
    b: ClearanceIn = await json_model(request, ClearanceIn, optional=False)
    c = await _call(propose_clearance, rt.ledger, b.trace_id, b.where, b.list, b.entry_id, b.until,
                    caller.principal, b.rationale)
    return c.to_json()


@router.post("/{seq}/approve", summary="Approve a proposed clearance (a second officer: four-eyes)",
             openapi_extra=json_body(StepIn, examples.CLEARANCE_APPROVE),
             responses=_ok(200, _CLEARANCE) | problems(404, 422, 503, notes={
                 404: "No clearance was proposed at this seq",
                 422: "Refused: `errors` names the field (`principal`: the proposer, four-eyes; `seq`: "
                      "approved or revoked already; `rationale`); nothing was sealed"}))
async def approve(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("clearances.approve")],
                  seq: Seq) -> dict[str, Any]:
    b: StepIn = await json_model(request, StepIn, optional=False)
    c = await _call(approve_clearance, rt.ledger, seq, caller.principal, b.rationale)
    return c.to_json()


@router.post("/{seq}/revoke", summary="Revoke a clearance: it clears nothing from now on (sealed)",
             openapi_extra=json_body(StepIn, examples.CLEARANCE_REVOKE),
             responses=_ok(200, _REVOKED) | problems(404, 422, 503, notes={
                 404: "No clearance was proposed at this seq",
                 422: "Refused: `errors` names the field (`seq`: revoked already; `rationale`); nothing was "
                      "sealed"}))
async def revoke(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("clearances.revoke")],
                 seq: Seq) -> dict[str, Any]:
    b: StepIn = await json_model(request, StepIn, optional=False)
    c = await _call(revoke_clearance, rt.ledger, seq, caller.principal, b.rationale)
    return c.to_json()
