"""FastAPI dependencies: the runtime, and the caller checked against the role matrix."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from api.access import ACCESS, may
from api.auth import Authenticator, AuthError, Caller
from api.metrics import Metrics
from audit.decide.runtime import Runtime

__all__ = ["Authenticated", "MetricsDep", "RuntimeDep", "allow", "authenticate", "authorize", "operation_of"]


async def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


async def _metrics(request: Request) -> Metrics:
    m: Metrics = request.app.state.metrics
    return m


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]


def authenticate(request: Request) -> Caller:
    """The caller of ``request``, whatever its roles; ``AuthError`` (401) without a verified certificate."""
    auth: Authenticator = request.app.state.auth
    return auth.caller(request.scope, request.headers)


async def _authenticated(request: Request) -> Caller:
    return authenticate(request)


# Any verified client certificate, no role needed (the API's documentation pages).
Authenticated = Annotated[Caller, Depends(_authenticated)]


def authorize(request: Request, operation: str) -> Caller:
    """The caller of ``request`` if one of its roles may ``operation``; else ``AuthError`` (401/403)."""
    caller = authenticate(request)
    if not may(operation, caller.roles):
        have = ", ".join(sorted(caller.roles)) or "none"
        need = ", ".join(sorted(ACCESS[operation]))
        raise AuthError(403, "forbidden", f"{caller.principal.subject} (roles: {have}) may not "
                                          f"{operation}; it needs one of: {need}")
    return caller


class _Allow:
    """The dependency of ``allow(operation)``; the OpenAPI document reads ``operation`` off it."""

    def __init__(self, operation: str) -> None:
        self.operation = operation

    async def __call__(self, request: Request) -> Caller:  # async: no threadpool hop per request
        return authorize(request, self.operation)


def allow(operation: str) -> Any:
    """``Depends`` that authenticates the request and requires a role allowed ``operation``."""
    if operation not in ACCESS:
        raise KeyError(f"operation {operation!r} is not in the access matrix")
    return Depends(_Allow(operation))


def operation_of(dependency: object) -> str | None:
    """The operation a dependency made by ``allow`` checks, or None for any other callable."""
    return dependency.operation if isinstance(dependency, _Allow) else None
