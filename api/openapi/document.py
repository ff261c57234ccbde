"""The OpenAPI document, completed from the sources the routes themselves obey.

FastAPI documents what it sees in endpoint signatures. The rest is added here, each fact from
the one place it lives: how a caller authenticates (mutual TLS); who may call each operation
(the role matrix, ``api.access``, read off the ``allow(...)`` dependency a route declares, or the
``operation(...)`` a self-authorising route names); the bodies that routes read themselves
(:func:`json_body`, :func:`body`); and the error format, RFC 9457 problem details
(``api.problems``), in place of FastAPI's default ``HTTPValidationError``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from http import HTTPStatus
from typing import Any

import fastapi.routing
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import BaseRoute

from api.access import ACCESS
from api.deps import operation_of
from api.problems import PROBLEM_JSON

__all__ = ["OPERATION", "ROLES", "SECURITY", "body", "complete", "json_body", "media", "operation",
           "problems", "schema_of"]

OPERATION = "x-sealtrail-operation"  # the operation's name in the role matrix
ROLES = "x-sealtrail-roles"  # the roles that may call it; empty: any verified certificate
SECURITY: list[dict[str, list[str]]] = [{"mtls": []}]
_REF = "#/components/schemas/"

_MTLS = {"type": "mutualTLS", "description": (
    "An X.509 client certificate issued by the server's client CA, verified in the TLS handshake "
    "(or, behind a trusted TLS-terminating proxy, forwarded in the configured header and verified again). "
    "The role map grants roles to the certificate's subject, URI subjectAltName or SHA-256 fingerprint; "
    "each operation lists the roles that may call it in `x-sealtrail-roles`.")}

# What each error status means on this API; a route may say more for its own case.
STATUS: Mapping[int, str] = {
    401: "No acceptable client certificate (none, or a forwarded one that was refused)",
    403: "The certificate's roles may not call this operation",
    404: "Not found",
    409: "Refused by the ledger's current state",
    413: "Body over this endpoint's cap (`limit_bytes`); nothing was read past it, decided or written",
    415: "Unsupported Content-Type",
    422: "Refused input: `errors` names each field at fault",
    429: "Over the principal's rate limit for its role; nothing was read or written. Retry after "
         "`Retry-After` seconds",
    500: "An unexpected error: the body names an `incident` id that the server log holds; nothing "
         "half-written",
    503: "Unavailable: the ledger cannot commit or the signing key cannot be read; nothing was decided "
         "or written. Retry after `Retry-After` seconds",
}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying",
                                 "schema": {"type": "integer"}}}


class FieldError(BaseModel):
    field: str = Field(description="where: a JSON path (`$.originator.country`, `[3].amount`), a header "
                                   "(`Content-Type`, `X-Priority`), a query parameter or `body`")
    message: str


class ProblemDetails(BaseModel):
    """An RFC 9457 problem details object, as ``api.problems.problem_response`` writes it."""

    model_config = ConfigDict(title="Problem")
    type: str = Field(description="a stable URN naming the kind of problem",
                      examples=["urn:sealtrail:problem:message_refused"])
    title: str = Field(examples=["Refused input"])
    status: int = Field(examples=[422])
    detail: str = Field(examples=["1 message(s) refused; nothing was decided or recorded: "
                                  "originator.country: 'XX' is not an ISO 3166 country code"])
    instance: str | None = Field(None, description="the request path", examples=["/v1/decisions"])
    errors: list[FieldError] | None = Field(None, description="the fields at fault, where input was refused")
    incident: str | None = Field(None, description="on a 500: the id of the server log line that holds the "
                                                   "traceback (the client never sees the exception text)")
    limit_bytes: int | None = Field(None, description="on a 413: the body cap of this endpoint")
    retry_after_s: int | None = Field(None, description="on a 429: seconds until the principal's rate "
                                                        "limit admits another request (also Retry-After)")


def operation(name: str) -> dict[str, Any]:
    """``openapi_extra`` for a route that authorises itself (``authorize(request, name)``) instead of
    declaring ``allow(name)``: the document then lists the roles of ``name``."""
    if name not in ACCESS:
        raise KeyError(f"operation {name!r} is not in the access matrix")
    return {OPERATION: name}


def problems(*statuses: int, notes: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for the error statuses a route answers besides 401/403 (added to every
    operation); each is documented as ``application/problem+json``."""
    notes = notes or {}
    return {s: {"description": notes.get(s, STATUS.get(s, HTTPStatus(s).phrase))} for s in statuses}


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A reference to ``model``'s request (validation) schema; the model and the models it uses
    become named components when the document is completed."""
    full = model.model_json_schema(ref_template=_REF + "{model}")
    defs = full.pop("$defs", {})
    return {"$ref": _REF + model.__name__, "$defs": {model.__name__: full, **defs}}


def media(schema: Mapping[str, Any], example: Any = None, *,
          examples: Mapping[str, tuple[str, Any]] | None = None) -> dict[str, Any]:
    """A media type entry: its schema and one ``example`` or named ``examples`` (summary, value)."""
    out: dict[str, Any] = {"schema": dict(schema)}
    if example is not None:
        out["example"] = example
    if examples:
        out["examples"] = {name: {"summary": summary, "value": value}
                           for name, (summary, value) in examples.items()}
    return out


def body(content: Mapping[str, Mapping[str, Any]], *, required: bool = True,
         description: str | None = None) -> dict[str, Any]:
    """``openapi_extra`` declaring the request body of a route that reads it itself."""
    rb: dict[str, Any] = {"required": required, "content": dict(content)}
    if description:
        rb["description"] = description
    return {"requestBody": rb}


def json_body(model: type[BaseModel], example: Any, *, required: bool = True,
              description: str | None = None) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body read with ``api.bodies.json_model(request, model)``."""
    return body({"application/json": media(schema_of(model), example)}, required=required,
                description=description)


def complete(doc: dict[str, Any], routes: Iterable[BaseRoute]) -> dict[str, Any]:
    """Add mutual TLS, each operation's roles, problem+json errors and the body models to ``doc``
    (FastAPI's document of ``routes``), in place; returns it."""
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    components.setdefault("securitySchemes", {})["mtls"] = copy.deepcopy(_MTLS)
    doc["security"] = copy.deepcopy(SECURITY)
    doc["paths"] = copy.deepcopy(doc["paths"])  # FastAPI shares the routes' openapi_extra dicts
    for route in _api_routes(routes):
        if not route.include_in_schema:
            continue
        for method in sorted(route.methods):
            op = doc["paths"][route.path_format][method.lower()]
            _roles(op, _operation_name(route, op))
            _body_cap(op)
            _errors(op)
    _hoist_defs(doc["paths"], schemas)
    problem = ProblemDetails.model_json_schema(ref_template=_REF + "{model}")
    for name, definition in {"Problem": problem, **problem.pop("$defs", {})}.items():
        _define(schemas, name, definition)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return doc


def _api_routes(routes: Iterable[BaseRoute]) -> Iterator[Any]:
    """Every API route, as FastAPI documents it: FastAPI 0.16x keeps included routers as such and
    walks them with ``iter_route_contexts`` (each context reads like an ``APIRoute``)."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    if contexts is None:
        yield from (r for r in routes if isinstance(r, APIRoute))
        return
    for ctx in contexts(list(routes)):
        if isinstance(ctx.original_route, APIRoute):
            yield ctx


def _walk(dependant: Dependant) -> Iterator[Dependant]:
    for d in dependant.dependencies:
        yield d
        yield from _walk(d)


def _operation_name(route: Any, op: Mapping[str, Any]) -> str:
    names = {n for d in _walk(route.dependant) if (n := operation_of(d.call)) is not None}
    if OPERATION in op:
        names.add(op[OPERATION])
    if len(names) != 1:
        where = f"{', '.join(sorted(route.methods))} {route.path_format}"
        raise ValueError(f"{where} must name exactly one operation of the role matrix (allow(...) or "
                         f"openapi_extra=operation(...)); it names {sorted(names) or 'none'}")
    return names.pop()


def _roles(op: dict[str, Any], name: str) -> None:
    roles = sorted(ACCESS[name])
    op[OPERATION] = name
    op[ROLES] = roles
    who = (f"**Roles:** {', '.join(f'`{r}`' for r in roles)}" if roles
           else "**Roles:** none needed: any verified client certificate")
    sentence = f"{who} (operation `{name}` of the role matrix)."
    op["description"] = f"{op['description']}\n\n{sentence}" if op.get("description") else sentence
    responses = op.setdefault("responses", {})
    responses.setdefault("401", {"description": STATUS[401]})
    if roles:
        responses.setdefault("403", {"description": STATUS[403]})
    responses.setdefault("429", {"description": STATUS[429]})  # api.limits: every operation, per principal
    responses.setdefault("500", {"description": STATUS[500]})  # api.problems: any unmapped error


def _body_cap(op: dict[str, Any]) -> None:
    """A request with a body may meet the body cap (api.limits) before the route runs."""
    if "requestBody" in op:
        op["responses"].setdefault("413", {"description": STATUS[413]})


def _errors(op: dict[str, Any]) -> None:
    """Every 4xx/5xx response is problem+json (FastAPI's default 422 included)."""
    responses = op["responses"]
    for code, response in responses.items():
        if not (code.isdigit() and int(code) >= 400):
            continue
        status = int(code)
        if response.get("description") in (None, "", "Validation Error", HTTPStatus(status).phrase):
            response["description"] = STATUS.get(status, HTTPStatus(status).phrase)
        response["content"] = {PROBLEM_JSON: {"schema": {"$ref": _REF + "Problem"}}}
        if status in (429, 503):
            response.setdefault("headers", {}).update(_RETRY_AFTER)
    op["responses"] = dict(sorted(responses.items()))


def _hoist_defs(node: Any, schemas: dict[str, Any]) -> None:
    """Move every ``$defs`` under ``node`` into ``components.schemas`` (refs already point there)."""
    if isinstance(node, dict):
        for name, definition in node.pop("$defs", {}).items():
            _define(schemas, name, definition)
        for value in node.values():
            _hoist_defs(value, schemas)
    elif isinstance(node, list):
        for value in node:
            _hoist_defs(value, schemas)


def _define(schemas: dict[str, Any], name: str, definition: Any) -> None:
    if name in schemas and schemas[name] != definition:
        raise ValueError(f"two different schemas are both named {name!r} in the OpenAPI document")
    schemas[name] = definition
