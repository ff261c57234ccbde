"""``create_app(settings)``: the FastAPI application, built from settings, no module globals.

The runtime (ledger, model, rules, batcher) opens in the app's lifespan, so a process that
cannot open its ledger or key fails at start-up, not on the first request. Tests may hand in a
runtime of their own.

Every request passes, outermost first: the cross-site guard (``api.csrf``), the gate
(``api.limits``: the caller authenticated once, its rate limit, the body cap of the endpoint),
then the 500 catch-all (``api.problems.InternalErrors``) around the routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from api.auth import Authenticator, ProxyTrust
from api.config import Settings
from api.console import install_console, render_error
from api.csrf import CrossSiteGuard
from api.limits import Gate, RateLimiter
from api.metrics import Metrics
from api.openapi import install_docs
from api.problems import install_handlers
from api.readiness import CommitHealth
from api.roles import RoleMap
from api.routes import (
    cases,
    clearances,
    decisions,
    exports,
    health,
    ledger,
    lists,
    models,
    performance,
    reports,
    rulesets,
    traces,
)
from audit.decide.runtime import Runtime
from audit.decide.types import Decision
from inference.drift_reference import reference_for
from inference.errors import ModelError
from inference.model import ModelFiles
from inference.schema import MODEL_SCHEMA, feature_names

__all__ = ["create_app"]

DESCRIPTION = """\
Sealed AML decisions. Every decision is sealed into an append-only Merkle ledger (RFC 6962 / 9162)
with signed C2SP checkpoints **before** it is answered. Callers authenticate with X.509 client
certificates (mutual TLS); roles come from the role map. Errors are RFC 9457 problem details
(`application/problem+json`) naming the offending field.
"""


def authenticator(s: Settings) -> Authenticator:
    """The role map and, only where configured, the trusted proxy. The per-role rate limits are
    checked here too (``ValueError`` naming a role that does not exist), so that ``serve`` refuses
    them before it opens anything."""
    RateLimiter(s.rate_limits)
    roles = RoleMap.load(s.roles_file) if s.roles_file is not None else RoleMap(())
    proxy = None
    if s.proxy_cert_header:
        if s.client_ca is None:
            raise ValueError("proxy_cert_header needs client_ca: a forwarded certificate is verified again")
        proxy = ProxyTrust.of(s.proxy_cert_header, s.trusted_proxies, s.client_ca.read_bytes())
    return Authenticator(roles, proxy)


def score_reference(model_sha256: str) -> dict[str, Any] | None:
    """The training score distribution the shipped model's card states, when the runtime scores
    with that model (a card without one, or another model: no drift gauge)."""
    try:
        files = ModelFiles.open()
    except ModelError:
        return None
    ref = files.card.get("drift_reference")
    if files.model_sha256 != model_sha256 or not isinstance(ref, dict):
        return None
    if not isinstance(ref.get("score"), dict):
        return None
    return dict(ref["score"])


def create_app(settings: Settings, runtime: Runtime | None = None) -> FastAPI:
    auth = authenticator(settings)
    limiter = RateLimiter(settings.rate_limits)  # an unknown role in the settings fails here
    commit_health = CommitHealth(settings.commit_failure_hold_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rt = runtime if runtime is not None else await run_in_threadpool(Runtime.open, settings)
        sha = rt.pipeline.scorer.model_sha256
        metrics = Metrics(rt.ledger_state, rt.index_conflicts, score_reference(sha), reference_for(sha),
                          feature_names(MODEL_SCHEMA))
        if metrics.feature_drift is not None:  # the rows the model scores feed the feature drift
            rt.pipeline.on_scored = metrics.feature_drift.observe

        def on_batch(decisions: Sequence[Decision]) -> None:  # a committed batch
            metrics.observe_batch(decisions)
            commit_health.committed()

        rt.service.on_batch = on_batch
        app.state.runtime = rt
        app.state.metrics = metrics
        try:
            yield
        finally:
            if metrics.feature_drift is not None and rt.pipeline.on_scored == metrics.feature_drift.observe:
                rt.pipeline.on_scored = None  # a runtime handed in outlives this app
            if runtime is None:
                await run_in_threadpool(rt.close)

    # FastAPI's own /openapi.json, /docs and /redoc would need no certificate and load from a CDN.
    app = FastAPI(title="sealtrail", version="1", description=DESCRIPTION, lifespan=lifespan,
                  openapi_url=None, docs_url=None, redoc_url=None)
    app.state.auth = auth
    app.state.commit_health = commit_health
    app.state.rate_limiter = limiter

    def on_unavailable() -> None:  # a 503: the ledger could not commit (or be read)
        app.state.metrics.unavailable.inc()
        commit_health.failed()

    install_handlers(app, on_unavailable=on_unavailable, html=render_error)
    for module in (decisions, traces, cases, reports, performance, ledger, rulesets, models, lists,
                   clearances, exports, health):
        app.include_router(module.router)
    install_docs(app)
    install_console(app)
    app.add_middleware(Gate, auth=auth, limiter=limiter, html=render_error)
    app.add_middleware(CrossSiteGuard)
    return app
