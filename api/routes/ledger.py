"""GET /v1/ledger/checkpoint (and /checkpoint/cosigned), GET /v1/ledger/consistency,
POST /v1/ledger/verify."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse

from api import ops
from api.auth import Caller
from api.deps import RuntimeDep, allow
from api.openapi import body, media, problems
from api.problems import Problem

__all__ = ["router"]

router = APIRouter(prefix="/v1/ledger", tags=["ledger"])
# Verification takes no parameters: it always covers the whole ledger.
_NO_BODY = body({"application/json": media({"type": "object", "maxProperties": 0}, {})}, required=False,
                description="None needed: the whole ledger is verified; a body, if sent, is not read")


@router.get("/checkpoint", response_class=PlainTextResponse,
            summary="The newest signed checkpoint (C2SP tlog-checkpoint in a signed note)",
            responses={**problems(503), 200: {"content": {"text/plain": {"example":
                "sealtrail.local/ledger\n5001\nZulFEnR8742JQ1C5X2vlx3CuZn8dyWLWlt5hB+/OF5g=\n\n"
                "— sealtrail.local/ledger A7ru...\n"}}}})
def checkpoint(rt: RuntimeDep, caller: Annotated[Caller, allow("ledger.checkpoint")]) -> PlainTextResponse:
    latest = rt.ledger.latest_checkpoint()
    if latest is None:
        latest = rt.ledger.checkpoint()
    return PlainTextResponse(latest.note, media_type="text/plain; charset=utf-8")


@router.get("/checkpoint/cosigned", response_class=PlainTextResponse,
            summary="The newest checkpoint witnesses cosigned, with their cosignatures (tlog-cosignature)",
            responses={**problems(404, 503, notes={404: "No checkpoint has that many cosignatures yet"}),
                       200: {"content": {"text/plain": {"example":
                           "sealtrail.local/ledger\n5001\nZulFEnR8742JQ1C5X2vlx3CuZn8dyWLWlt5hB+/OF5g=\n\n"
                           "— sealtrail.local/ledger A7ru...\n— audit.bank.example/witness Mq1x...\n"}}}})
def checkpoint_cosigned(rt: RuntimeDep, caller: Annotated[Caller, allow("ledger.checkpoint_cosigned")],
                        min_witnesses: int = Query(1, ge=1, le=100,
                                                   description="cosignatures the checkpoint must carry"),
                        ) -> PlainTextResponse:
    from ledger.cosign import newest_witnessed

    got = newest_witnessed(rt.ledger.engine, min_witnesses)
    if got is None:
        raise Problem(404, "not_found", f"no checkpoint has {min_witnesses} witness cosignature(s) yet "
                      "(sealtrail ledger cosign collects them)")
    return PlainTextResponse(got[1], media_type="text/plain; charset=utf-8")


@router.get("/consistency", summary="RFC 9162 consistency proof between two tree sizes",
            responses=problems(409, 422, notes={409: "A size beyond the ledger's size"}))
def consistency(rt: RuntimeDep, caller: Annotated[Caller, allow("ledger.consistency")],
                old: int = Query(..., ge=1, description="older tree size"),
                new: int = Query(..., ge=1, description="newer tree size")) -> dict[str, Any]:
    if old > new:
        raise Problem(422, "invalid_request", "old must be <= new",
                      [{"field": "old", "message": "old > new"}])
    return ops.consistency(rt.settings, old, new)


@router.post("/verify", summary="Verify the whole ledger now (every leaf, chain, node and signature)",
             openapi_extra=_NO_BODY)
async def verify(rt: RuntimeDep, caller: Annotated[Caller, allow("ledger.verify")]) -> dict[str, Any]:
    return await run_in_threadpool(ops.verify_now, rt.settings)
