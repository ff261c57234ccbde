"""Cross-site request refusal for a mutual-TLS API that browsers also use.

A browser presents its client certificate to any page's request, so a hostile page could make
an officer's browser post to the console or to ``/v1`` (a ``text/plain`` form needs no
preflight). Browsers say where a request comes from (``Origin``, ``Sec-Fetch-Site``); a
state-changing request that a browser marks as coming from another site is refused with 403
before any route runs. Scripts and payment engines send neither header and are unaffected.

Reading case state writes too: every read of a case, a queue page, a report or a case bundle is
sealed as a ``case_read`` record (who read which case: tipping-off evidence). So a GET of one of
those paths that a browser marks as sent from another site is refused as well, unless it is the
officer's own top-level navigation (a link they clicked: ``Sec-Fetch-Mode: navigate``,
``Sec-Fetch-Dest: document``, ``Sec-Fetch-User: ?1``); an image or a script of a hostile page
cannot make the officer's browser seal reads in the officer's name.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from api.problems import problem_response

__all__ = ["CrossSiteGuard"]

SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
# GETs that seal a case_read (api/routes/cases.py, reports.py, exports.py, traces.py; the console)
SEALED_READS = ("/v1/alerts", "/v1/cases", "/v1/exports/", "/v1/traces/", "/console/alerts",
                "/console/cases", "/console/decisions/")


class CrossSiteGuard:
    """ASGI middleware: refuse an unsafe request that a browser marks as cross-origin."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (scope["method"] not in SAFE or self._sealed_read(scope)):
            reason = self._refusal(scope)
            if reason is not None:
                response = problem_response(403, "cross_site", reason, instance=scope.get("path"))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _sealed_read(scope: dict[str, Any]) -> bool:
        """A GET that seals a read, and not the officer's own click from elsewhere."""
        if scope["method"] not in ("GET", "HEAD") or not str(scope.get("path", "")).startswith(SEALED_READS):
            return False
        h = {k.lower(): v for k, v in scope.get("headers", ())}
        clicked = (h.get(b"sec-fetch-mode") == b"navigate" and h.get(b"sec-fetch-dest") == b"document"
                   and h.get(b"sec-fetch-user") == b"?1")
        return not clicked

    @staticmethod
    def _refusal(scope: dict[str, Any]) -> str | None:
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
        if site in ("cross-site", "same-site"):
            return f"refused a {site} {scope['method']} request (Sec-Fetch-Site: {site})"
        if site in ("same-origin", "none"):
            return None  # the browser itself says so (a page cannot set Sec-Fetch-*)
        origin = headers.get(b"origin")
        if origin is None:
            return None
        host = headers.get(b"host", b"").decode("latin-1").lower()
        got = origin.decode("latin-1")
        # host and port only: behind a TLS-terminating proxy this process sees http, the page https
        if urlsplit(got).netloc.lower() != host or not host:
            return f"refused a {scope['method']} request from origin {got} (this server is {host or '?'})"
        return None
