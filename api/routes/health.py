"""/healthz and /metrics.

``/healthz`` is ready (200) when the ledger answers a read and the commits this process last
attempted succeeded (``api.readiness``); otherwise 503 with Retry-After, naming which.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from api.auth import Caller
from api.deps import MetricsDep, RuntimeDep, allow
from api.openapi import problems
from api.problems import problem_response
from api.readiness import CommitHealth
from ledger.errors import KeyFileError

__all__ = ["router"]

router = APIRouter(tags=["operations"])
log = logging.getLogger("sealtrail.api")


@router.get("/healthz", summary="Liveness and readiness: the ledger answers, its commits succeed",
            response_model=dict[str, Any],
            responses=problems(503, notes={503: "The ledger database does not answer, its last commit "
                                                "failed, or the signing key is unusable (Retry-After)"}))
def healthz(request: Request, rt: RuntimeDep, m: MetricsDep,
            caller: Annotated[Caller, allow("healthz")]) -> Any:
    # Answered here rather than raised: a 503 of /healthz is a report, not a failed commit.
    try:
        size, _ = rt.ledger_state()
    except Exception as exc:
        m.unavailable.inc()
        log.warning("/healthz: the ledger database does not answer: %s", exc)  # its text stays here
        return problem_response(503, "ledger_unavailable", "the ledger database does not answer "
                                "(the server log says why)", headers={"Retry-After": "1"},
                                instance=request.url.path)
    try:
        rt.ledger.require_signer()  # free while signing works; after a key failure, looks again
    except KeyFileError as exc:
        m.unavailable.inc()
        log.warning("/healthz: the signing key is unusable: %s", exc)  # the path stays in the log
        return problem_response(503, "signing_key_unavailable", "the ledger's signing key is unavailable "
                                "on this server (the server log says why); nothing can be sealed",
                                headers={"Retry-After": "1"}, instance=request.url.path,
                                extra={"ledger_size": size})
    health: CommitHealth = request.app.state.commit_health
    down = health.unready()
    if down is not None:
        m.unavailable.inc()
        return problem_response(
            503, "ledger_not_committing",
            f"the ledger answers reads, but {down.failures} commit(s) failed, the last "
            f"{down.since_s:.1f} s ago, and none succeeded since; ready again once a commit "
            f"succeeds or in {down.retry_after_s} s without another failure",
            headers={"Retry-After": str(down.retry_after_s)}, instance=request.url.path,
            extra={"ledger_size": size, "failed_commits": down.failures})
    rules = rt.pipeline.rules.module
    return {"status": "ok", "ledger_size": size, "origin": rt.ledger.origin,
            "ruleset": f"{rules.manifest.ruleset_id}@{rules.manifest.version}",
            "module_sha256": rules.sha256, "model_sha256": rt.scorer.model_sha256,
            "backend": rt.scorer.name,
            "velocity": {"from_snapshot": rt.velocity_from_snapshot, "replayed_at_start": rt.replay.replayed}}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(m: MetricsDep, caller: Annotated[Caller, allow("metrics")]) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
