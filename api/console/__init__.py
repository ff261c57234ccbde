"""The compliance console: server-rendered pages under ``/console``, behind the API's mTLS roles.

Each page module owns one area (the alert queue and cases, search, a decision, the ledger, rules,
exports, the overview charts) and calls the same ``audit`` functions the ``/v1`` routes call: the
console is another face on the same operations, authorised by the same role matrix (``api.access``), never a
second implementation of them.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from api.console import alerts, case_page, decision, exports, ledger_page, overview, refusals, rules, search
from api.console.render import CSP, STATIC, render_error

__all__ = ["install_console", "render_error"]


class _Assets(StaticFiles):
    """The console's scripts and stylesheet, with the pages' own security headers."""

    async def get_response(self, path: str, scope: Any) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update({"X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP})
        return response


def install_console(app: FastAPI) -> None:
    """Add the console's pages and its static assets (served by the app itself: no CDN)."""
    for module in (overview, alerts, case_page, search, refusals, decision, ledger_page, rules, exports):
        app.include_router(module.router, include_in_schema=False)
    app.mount("/console/static", _Assets(directory=STATIC), name="console-static")
