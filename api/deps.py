"""FastAPI dependencies: the runtime, and the caller checked against the role matrix."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from api.access import ACCESS, may
from api.auth import Authenticator, AuthError, Caller
from api.metrics import Metrics
from api.runtime import Runtime

__all__ = ["MetricsDep", "RuntimeDep", "allow", "authorize"]


async def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


async def _metrics(request: Request) -> Metrics:
    m: Metrics = request.app.state.metrics
    return m


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]


def authorize(request: Request, operation: str) -> Caller:
    """The caller of ``request`` if one of its roles may ``operation``; else ``AuthError`` (401/403)."""
    auth: Authenticator = request.app.state.auth
    caller = auth.caller(request.scope, request.headers)
    if not may(operation, caller.roles):
        have = ", ".join(sorted(caller.roles)) or "none"
        need = ", ".join(sorted(ACCESS[operation]))
        raise AuthError(403, "forbidden", f"{caller.principal.subject} (roles: {have}) may not "
                                          f"{operation}; it needs one of: {need}")
    return caller


def allow(operation: str) -> Any:
    """``Depends`` that authenticates the request and requires a role allowed ``operation``."""
    if operation not in ACCESS:
        raise KeyError(f"operation {operation!r} is not in the access matrix")

    async def check(request: Request) -> Caller:  # async: no threadpool hop per request
        return authorize(request, operation)

    return Depends(check)
