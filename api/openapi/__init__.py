"""The API's own documentation: the OpenAPI document (``document``), complete examples
(``examples``) and the pages that show it offline (``pages``: ``/docs``, ``/redoc``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from api.openapi import pages
from api.openapi.document import SECURITY, body, complete, json_body, media, operation, problems, schema_of

__all__ = ["body", "install_docs", "json_body", "media", "operation", "problems", "schema_of"]


def install_docs(app: FastAPI) -> None:
    """Serve the completed OpenAPI document and its viewers (``app`` built with ``openapi_url``,
    ``docs_url`` and ``redoc_url`` None: FastAPI's own serve them without a certificate, from a CDN)."""
    pages.check_assets()

    def openapi() -> dict[str, Any]:
        doc = FastAPI.openapi(app)  # cached by FastAPI until the routes change
        if doc.get("security") != SECURITY:
            complete(doc, app.routes)
        return doc

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented extension point
    app.include_router(pages.router)
