"""Rendering console pages: one Jinja2 environment (autoescaped), the caller, the navigation.

Pages are server-rendered HTML; the few scripts are static files under ``/console/static``
(no inline script, no CDN), so the Content-Security-Policy can forbid everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from api.access import may
from api.auth import Authenticator, AuthError, Caller
from api.deps import authorize

__all__ = ["CSP", "NAV", "NavItem", "page_caller", "render", "render_error"]

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

# No inline script, no inline style, nothing from another origin; forms post only here.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class NavItem:
    """One navigation link, shown to callers whose roles may ``operation``."""

    href: str
    label: str
    operation: str


NAV = (
    NavItem("/console/overview", "Overview", "traces.query"),
    NavItem("/console/search", "Search", "traces.query"),
    NavItem("/console/refusals", "Refusals", "traces.query"),
    NavItem("/console/ledger", "Ledger", "ledger.checkpoint"),
    NavItem("/console/rules", "Rules", "rulesets.list"),
    NavItem("/console/exports", "Exports", "exports.list"),
)

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def page_caller(request: Request, operation: str) -> Caller:
    """The caller, if its roles may ``operation``; else ``AuthError``, rendered as an HTML page."""
    return authorize(request, operation)


def _common(request: Request, caller: Caller | None) -> dict[str, Any]:
    roles = caller.roles if caller is not None else frozenset()
    path = request.url.path.rstrip("/") or "/"
    nav = [{"href": n.href, "label": n.label, "current": path == n.href or (path.startswith(n.href + "/")
            and n.href != "/console")} for n in NAV if caller is not None and may(n.operation, roles)]
    return {"nav": nav, "caller": caller, "roles": sorted(roles), "may": lambda op: may(op, roles)}


def render(request: Request, template: str, caller: Caller | None, status: int = 200,
           **context: Any) -> HTMLResponse:
    """``template`` rendered with ``context`` plus the caller and the navigation it may see."""
    html = _env.get_template(template).render(**_common(request, caller), **context)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def _caller_or_none(request: Request) -> Caller | None:
    """The caller for the error page's navigation, if there is one (there is none on a 401)."""
    try:
        auth: Authenticator = request.app.state.auth
        return auth.caller(request.scope, request.headers)
    except (AuthError, AttributeError):
        return None


def render_error(request: Request, status: int, title: str, detail: str,
                 errors: list[dict[str, str]] | None = None) -> HTMLResponse:
    """An error as a console page, with the navigation the caller may use (none if unauthenticated)."""
    return render(request, "error.html", _caller_or_none(request), status, title=title, detail=detail,
                  errors=errors or [], status_code=status)
