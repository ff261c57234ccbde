"""``/openapi.json``, Swagger UI at ``/docs`` and ReDoc at ``/redoc``, served whole by this process.

The viewers come from the ``fastapi-offline`` package (Swagger UI and ReDoc as published,
shipped in its wheel) and Swagger UI starts from ``static/swagger-init.js``, so the pages work
on a network with no way out (an examiner's laptop, an air-gapped site) and their
Content-Security-Policy refuses any script that is not a file of this server. ReDoc's page is
FastAPI's own; Swagger UI's is not, because FastAPI's starts Swagger UI from an inline script.
Like every route, each needs a verified client certificate (any role).
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from api.deps import Authenticated
from api.problems import Problem

__all__ = ["ASSETS", "ASSETS_URL", "PAGE_CSP", "REDOC_CSP", "router"]

ASSETS_URL = "/docs/assets"
OPENAPI_URL = "/openapi.json"
_VENDOR = Path(fastapi_offline.__file__).parent / "static"
ASSETS = {
    "swagger-ui-bundle.js": _VENDOR / "swagger-ui-bundle.js",
    "swagger-ui.css": _VENDOR / "swagger-ui.css",
    "redoc.standalone.js": _VENDOR / "redoc.standalone.js",
    "favicon.png": _VENDOR / "favicon.png",
    "swagger-init.js": Path(__file__).parent / "static" / "swagger-init.js",
}

# Scripts and styles only from this server; "Try it out" fetches only from it.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
# ReDoc writes its styles into <style> elements as it renders (styled-components): inline styles
# are allowed there, inline scripts still not. Its search index runs in a worker built from a blob.
REDOC_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
             "img-src 'self' data:; connect-src 'self'; worker-src blob:; form-action 'none'; "
             "frame-ancestors 'none'; base-uri 'none'")
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}

router = APIRouter(include_in_schema=False)


def check_assets() -> None:
    """Refuse to start without the viewers' files (a blank page on the first visit helps nobody)."""
    missing = [str(p) for p in ASSETS.values() if not p.is_file()]
    if missing:
        raise RuntimeError(f"API documentation assets are missing: {', '.join(missing)} "
                           "(reinstall sealtrail and fastapi-offline)")


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


@router.get(OPENAPI_URL)
async def openapi(request: Request, caller: Authenticated) -> JSONResponse:
    app: FastAPI = request.app
    return JSONResponse(app.openapi())


@router.get("/docs")
async def swagger_ui(request: Request, caller: Authenticated) -> HTMLResponse:
    root = _root(request)
    assets = escape(root + ASSETS_URL)
    title = escape(f"{request.app.title} API – Swagger UI")
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{escape(root + OPENAPI_URL)}"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{assets}/swagger-init.js"></script>
</body>
</html>
"""
    return HTMLResponse(page, headers={**_HEADERS, "Content-Security-Policy": PAGE_CSP})


@router.get("/redoc")
async def redoc(request: Request, caller: Authenticated) -> HTMLResponse:
    root = _root(request)
    page = get_redoc_html(openapi_url=root + OPENAPI_URL, title=f"{request.app.title} API – ReDoc",
                          redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                          redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False)
    page.headers.update({**_HEADERS, "Content-Security-Policy": REDOC_CSP})
    return page


@router.get(ASSETS_URL + "/{name}")
async def asset(name: str, caller: Authenticated) -> FileResponse:
    path = ASSETS.get(name)
    if path is None:
        raise Problem(404, "not_found", f"no documentation asset {name}")
    return FileResponse(path, headers={**_HEADERS, "Content-Security-Policy": PAGE_CSP})
