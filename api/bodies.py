"""JSON request bodies read into pydantic models, refused as problem+json naming each field.

Routes that accept a JSON body beside other media types (rule proposals take TOML too), or
whose body is optional, read it themselves with :func:`json_model` rather than through a
FastAPI body parameter; their OpenAPI entries say so with ``api.openapi.json_body``.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError

from api.problems import Problem

__all__ = ["json_model"]


async def json_model(request: Request, model: type[BaseModel], *, optional: bool) -> Any:
    """The request's JSON body as ``model``; an empty body gives ``model()`` where ``optional``.

    Raises ``Problem`` 422: ``empty_body``, or ``invalid_request`` with ``errors[{field, message}]``."""
    raw = await request.body()
    if not raw.strip():
        if optional:
            return model()
        raise Problem(422, "empty_body", "the request body is empty", [{"field": "body", "message": "empty"}])
    try:
        return model.model_validate(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise Problem(422, "invalid_request", f"body is not JSON: {exc}",
                      [{"field": "body", "message": str(exc)}]) from exc
    except ValidationError as exc:
        errors = [{"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"]}
                  for e in exc.errors()]
        raise Problem(422, "invalid_request", "; ".join(f"{e['field']}: {e['message']}" for e in errors),
                      errors) from exc
