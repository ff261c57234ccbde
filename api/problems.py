"""Errors as RFC 9457 problem details (``application/problem+json``), mapped in one place.

Every error body has ``type`` (a stable URN naming the kind), ``title``, ``status`` and
``detail``; refused input also names the offending field(s) in ``errors[{field, message}]``.
An error nothing here maps is a 500 ``internal`` problem with an ``incident`` id that the
server log repeats beside the traceback; the exception's own text never reaches the client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from api.auth import AuthError
from audit.errors import (
    AuditError,
    CaseConflictError,
    CaseFourEyesError,
    CaseNotFoundError,
    CasesFailedError,
    ClearanceError,
    ClearanceNotFoundError,
    DerivedRowError,
    DuplicateRulesetError,
    ExportError,
    FourEyesError,
    GovernanceError,
    GovernanceRecordError,
    ListError,
    ListNotFoundError,
    ModelConflictError,
    ModelRegistryError,
    ModuleIntegrityError,
    NoActiveRulesetError,
    OneMessageExpectedError,
    PrincipalError,
    QueryError,
    ReportError,
    ReportHoldError,
    ReportPurgedError,
    RulesetRefusedError,
    StateError,
    SubmissionRefusedError,
    TooManySubmissionsError,
    TraceNotFoundError,
    UnknownRulesetError,
    UnregisteredModelError,
)
from ledger import LedgerUnavailableError
from ledger.errors import EntryNotFoundError, KeyFileError, RefusedError

__all__ = ["PROBLEM_JSON", "HtmlErrors", "InternalErrors", "Problem", "audit_extra", "audit_problem",
           "install_handlers", "problem_response"]

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("sealtrail.api")
RETRY_AFTER_S = 1


class Problem(Exception):
    """An error the API answers with as it is: status, kind, detail and the fields at fault."""

    def __init__(self, status: int, kind: str, detail: str,
                 errors: Sequence[dict[str, str]] = (), headers: dict[str, str] | None = None,
                 extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.errors = list(errors)
        self.headers = headers or {}
        self.extra = dict(extra or {})


_TITLES = {400: "Bad request", 401: "Unauthenticated", 403: "Forbidden", 404: "Not found",
           405: "Method not allowed", 409: "Conflict", 410: "Gone", 413: "Too large",
           415: "Unsupported media type", 422: "Refused input", 429: "Too many requests",
           500: "Internal error", 503: "Ledger unavailable"}


def problem_response(status: int, kind: str, detail: str, errors: Sequence[dict[str, str]] = (),
                     headers: dict[str, str] | None = None, instance: str | None = None,
                     extra: Mapping[str, Any] | None = None) -> Response:
    """An RFC 9457 problem+json response; ``extra`` adds members (``incident``, ``retry_after_s``)."""
    body: dict[str, Any] = {"type": f"urn:sealtrail:problem:{kind}", "title": _TITLES.get(status, kind),
                            "status": status, "detail": detail}
    if errors:
        body["errors"] = list(errors)
    if instance:
        body["instance"] = instance
    if extra:
        body.update(extra)
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers)


# The audit layer's whole error tree, in one table: the nearest class in an error's MRO decides.
_AUDIT: dict[type[AuditError], tuple[int, str]] = {
    AuditError: (500, "internal"),
    TraceNotFoundError: (404, "not_found"),
    QueryError: (422, "invalid_request"),
    CaseNotFoundError: (404, "not_found"),
    CaseConflictError: (409, "case_conflict"),
    CaseFourEyesError: (403, "four_eyes"),
    ListError: (422, "list_refused"),
    ListNotFoundError: (404, "not_found"),
    ClearanceError: (422, "clearance_refused"),
    ClearanceNotFoundError: (404, "not_found"),
    ReportError: (422, "report_invalid"),
    ReportPurgedError: (410, "report_purged"),
    ReportHoldError: (500, "report_hold_failed"),
    ExportError: (409, "export_unavailable"),
    DerivedRowError: (409, "derived_row_mismatch"),
    ModelRegistryError: (409, "model_registry"),
    UnregisteredModelError: (409, "model_unregistered"),
    ModelConflictError: (409, "model_conflict"),
    GovernanceError: (409, "governance_refused"),
    CasesFailedError: (422, "ruleset_cases_failed"),
    RulesetRefusedError: (422, "ruleset_refused"),
    DuplicateRulesetError: (409, "ruleset_exists"),
    UnknownRulesetError: (404, "unknown_ruleset"),
    StateError: (409, "ruleset_state"),
    FourEyesError: (403, "four_eyes"),
    NoActiveRulesetError: (409, "no_active_ruleset"),
    ModuleIntegrityError: (500, "module_integrity"),
    GovernanceRecordError: (500, "governance_records_damaged"),
    PrincipalError: (401, "bad_certificate"),
    SubmissionRefusedError: (422, "message_refused"),
    OneMessageExpectedError: (422, "one_message_expected"),
    TooManySubmissionsError: (413, "batch_too_large"),
}


def audit_problem(exc: AuditError) -> tuple[int, str, list[dict[str, str]]]:
    """Status, kind and the fields at fault for any audit error (the one mapping of the tree)."""
    status, kind = next(_AUDIT[c] for c in type(exc).__mro__ if c in _AUDIT)
    errors: list[dict[str, str]] = []
    if isinstance(exc, CasesFailedError):
        errors = [{"field": f"cases[{f.get('line', '?')}]", "message": str(f)} for f in exc.failures[:50]]
    elif isinstance(exc, RulesetRefusedError):
        where = ".".join(p for p in ("source", exc.field, exc.rule_id and f"rule[{exc.rule_id}]",
                                     exc.line and f"line {exc.line}") if p)
        errors = [{"field": where, "message": str(exc)}]
    elif isinstance(exc, SubmissionRefusedError):
        errors = [f.to_json() for f in exc.faults]
    elif isinstance(exc, QueryError) and status == 422:
        errors = [{"field": exc.field, "message": exc.message}]
    return status, kind, errors


def audit_extra(exc: AuditError) -> dict[str, Any] | None:
    """Members an audit error adds to its problem: a refused request's ``trace_id`` (its sealed
    ``refusal`` record; absent where it could not be sealed)."""
    if isinstance(exc, SubmissionRefusedError) and exc.trace_id is not None:
        return {"trace_id": exc.trace_id}
    return None


def _loc(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


HtmlErrors = Callable[[Request, int, str, str, list[dict[str, str]]], Response]
InternalError = Callable[[Request, Exception], Awaitable[Response]]


def new_incident() -> str:
    """An id for one unexpected error: in the answer and in the log line that holds the traceback."""
    return uuid.uuid4().hex


class InternalErrors:
    """ASGI middleware, innermost of the app's own: an exception no handler mapped is answered by
    ``render`` (a 500 problem with an incident id) and logged there, once, with its traceback.

    Starlette's outermost ``ServerErrorMiddleware`` would answer ``text/plain`` "Internal Server
    Error" unless a handler is installed, and re-raises to the server, which logs it a second
    time without the incident. A client that went away mid-request (``ClientDisconnect``) is
    nobody to answer. An exception after the response began cannot be answered: it is logged with
    an incident and re-raised so that the server drops the connection."""

    def __init__(self, app: Any, render: InternalError) -> None:
        self.app = app
        self.render = render

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except ClientDisconnect:
            log.debug("client went away during %s %s", scope.get("method"), scope.get("path"))
        except Exception as exc:
            if started:
                log.error("incident %s: %s %s failed after its response began", new_incident(),
                          scope.get("method"), scope.get("path"), exc_info=exc)
                raise
            response = await self.render(Request(scope, receive), exc)
            await response(scope, receive, send)


def install_handlers(app: FastAPI, on_unavailable: Any = None, html: HtmlErrors | None = None,
                     html_prefix: str = "/console") -> None:
    """Map every error the API can meet to problem+json; ``on_unavailable()`` counts 503s.

    Under ``html_prefix`` (the console) the same errors are rendered by ``html(request, status,
    title, detail, errors)`` as pages instead, with the same status codes. Anything else becomes
    a 500 ``internal`` problem with an incident id (``InternalErrors``, added here as the app's
    innermost middleware; the handler of ``Exception`` covers what fails outside it)."""

    def respond(request: Request, status: int, kind: str, detail: str,
                errors: Sequence[dict[str, str]] = (), headers: dict[str, str] | None = None,
                extra: Mapping[str, Any] | None = None) -> Response:
        if html is not None and request.url.path.startswith(html_prefix):
            page = html(request, status, _TITLES.get(status, kind), detail, list(errors))
            page.headers.update(headers or {})
            return page
        return problem_response(status, kind, detail, errors, headers, request.url.path, extra)

    async def _internal(request: Request, exc: Exception) -> Response:
        incident = new_incident()
        log.error("incident %s: unexpected %s on %s %s", incident, type(exc).__name__, request.method,
                  request.url.path, exc_info=exc)
        return respond(request, 500, "internal",
                       f"an unexpected error; nothing about it is told here: the operator finds "
                       f"incident {incident} in the server log", extra={"incident": incident})

    app.add_exception_handler(Exception, _internal)
    app.add_middleware(InternalErrors, render=_internal)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> Response:
        if exc.status == 503 and on_unavailable is not None:
            on_unavailable()
        return respond(request, exc.status, exc.kind, exc.detail, exc.errors, exc.headers, exc.extra or None)

    @app.exception_handler(AuthError)
    async def _auth(request: Request, exc: AuthError) -> Response:
        return respond(request, exc.status, exc.reason, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [{"field": _loc(e.get("loc", ())), "message": str(e.get("msg", ""))} for e in exc.errors()]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return respond(request, 422, "invalid_request", detail, errors)

    @app.exception_handler(LedgerUnavailableError)
    async def _unavailable(request: Request, exc: LedgerUnavailableError) -> Response:
        if on_unavailable is not None:
            on_unavailable()
        return respond(request, 503, "ledger_unavailable", f"no decision was issued: {exc}",
                       headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(KeyFileError)
    async def _key(request: Request, exc: KeyFileError) -> Response:
        log.error("signing key unavailable: %s", exc)  # the path stays in the log, not in the answer
        if on_unavailable is not None:
            on_unavailable()
        return respond(request, 503, "signing_key_unavailable",
                       "the ledger's signing key is unavailable on this server; the operator has the detail",
                       headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(EntryNotFoundError)
    async def _not_found(request: Request, exc: EntryNotFoundError) -> Response:
        return respond(request, 404, "not_found", str(exc))

    @app.exception_handler(RefusedError)
    async def _refused(request: Request, exc: RefusedError) -> Response:
        return respond(request, 409, "refused", str(exc))

    @app.exception_handler(AuditError)
    async def _audit(request: Request, exc: AuditError) -> Response:
        status, kind, errors = audit_problem(exc)
        if status == 500:
            incident = new_incident()
            log.error("incident %s: audit error %s on %s %s", incident, kind, request.method,
                      request.url.path, exc_info=exc)
            if type(exc) is AuditError:  # no kind of its own: its text was written for no reader
                return respond(request, 500, kind, f"an unexpected error; the operator finds incident "
                               f"{incident} in the server log", extra={"incident": incident})
            return respond(request, status, kind, str(exc), errors, extra={"incident": incident})
        return respond(request, status, kind, str(exc), errors, extra=audit_extra(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return respond(request, exc.status_code, kind, str(exc.detail))
