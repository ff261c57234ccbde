"""/healthz and /metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from api.auth import Caller
from api.deps import MetricsDep, RuntimeDep, allow
from api.openapi import problems
from api.problems import Problem

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness and readiness: the ledger answers and the batcher runs",
            responses=problems(503, notes={503: "The ledger database does not answer (Retry-After)"}))
def healthz(rt: RuntimeDep, caller: Annotated[Caller, allow("healthz")]) -> dict[str, Any]:
    try:
        size, _ = rt.ledger_state()
    except Exception as exc:
        raise Problem(503, "ledger_unavailable", f"the ledger database does not answer: {exc}",
                      headers={"Retry-After": "1"}) from exc
    rules = rt.pipeline.rules.module
    return {"status": "ok", "ledger_size": size, "origin": rt.ledger.origin,
            "ruleset": f"{rules.manifest.ruleset_id}@{rules.manifest.version}",
            "module_sha256": rules.sha256, "model_sha256": rt.scorer.model_sha256,
            "backend": rt.scorer.name,
            "velocity": {"from_snapshot": rt.velocity_from_snapshot, "replayed_at_start": rt.replay.replayed}}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(m: MetricsDep, caller: Annotated[Caller, allow("metrics")]) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
