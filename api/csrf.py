"""Cross-site request refusal for a mutual-TLS API that browsers also use.

A browser presents its client certificate to any page's request, so a hostile page could make
an officer's browser post to the console or to ``/v1`` (a ``text/plain`` form needs no
preflight). Browsers say where a request comes from (``Origin``, ``Sec-Fetch-Site``); a
state-changing request that a browser marks as coming from another site is refused with 403
before any route runs. Scripts and payment engines send neither header and are unaffected.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from api.problems import problem_response

__all__ = ["CrossSiteGuard"]

SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


class CrossSiteGuard:
    """ASGI middleware: refuse an unsafe request that a browser marks as cross-origin."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE:
            reason = self._refusal(scope)
            if reason is not None:
                response = problem_response(403, "cross_site", reason, instance=scope.get("path"))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

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
