"""What one principal may cost the server: requests per second, and bytes per request body.

``Gate`` is ASGI middleware in front of every route. It authenticates the request once (the
route reuses that caller), refuses a principal over its rate with 429 and Retry-After before
anything else happens (token buckets keyed by the certificate's SHA-256 fingerprint, the rate
chosen by role), and caps the request body by endpoint kind (a sanctions list load's large cap
only for a caller allowed to load one): a declared ``Content-Length`` over the cap is refused at
once, unread (the server's HTTP parser holds a body to its declared length); a body without one
(chunked) is read here as it streams, counted, and refused at the first chunk past the cap, so the
route never runs: nothing is decided or recorded, whether or not the route would have read a body.
Under the cap the route gets it whole. Both refusals are problem+json; under ``/console`` they are
the console's error page, with the same status.

A body over the cap sent to a decision endpoint by a caller allowed to score is a screening
request refused: it is sealed as a ``refusal`` record without payload (it was never read), and
the 413 carries its ``trace_id`` (``api.routes.decisions.seal_refused``: a failure to seal still
refuses, without it). A caller refused for its rate, or not allowed to score, leaves no record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from api.access import may
from api.auth import CALLER_SCOPE_KEY, Authenticator, AuthError, Caller
from api.config import DEFAULT_RATE_LIMITS, RateLimit
from api.console.forms import MAX_FORM
from api.problems import HtmlErrors, problem_response
from api.roles import ROLES
from audit.screening.lists import MAX_LIST_BYTES
from inference.messages import MAX_FILE_BYTES

__all__ = ["ANY_ROLE", "LIST_CAP", "BodyCaps", "Gate", "RateLimiter", "body_cap"]

ANY_ROLE = "*"  # the limit of a caller none of whose roles has one (a certificate with no role)

# Request body caps by endpoint kind (bytes). The scoring endpoints take what parse_submissions
# takes (a file of up to 10,000 messages); a ruleset proposal its TOML (1 MiB) and test cases
# (16 MiB) JSON-escaped; a sanctions list load the file as published (the full OFAC XML is about
# 100 MB), for a caller allowed to load one; the console its forms; everything else small JSON
# (an annotation's note is at most 10,000 characters, an export's filters a few strings).
DECISIONS_CAP = MAX_FILE_BYTES
PROPOSAL_CAP = 32 << 20
LIST_CAP = MAX_LIST_BYTES
CONSOLE_CAP = MAX_FORM
DEFAULT_CAP = 256 << 10
# the scoring endpoints, by path, and the operation a caller must be allowed to seal a refusal there
_SCORING = {"/v1/decisions": "decisions.create", "/v1/decisions/batch": "decisions.batch"}


@dataclass(frozen=True)
class BodyCaps:
    """Body caps by endpoint kind; ``of(method, path, roles)`` picks one for any request."""

    decisions: int = DECISIONS_CAP
    proposal: int = PROPOSAL_CAP
    lists: int = LIST_CAP
    console: int = CONSOLE_CAP
    default: int = DEFAULT_CAP

    def of(self, method: str, path: str, roles: frozenset[str] | None = None) -> int:
        """The cap of a request; ``roles`` are the caller's (an empty set: none authenticated). A list
        load's large cap is only for a caller allowed to load lists, so that no other caller can make
        the server hold a body of that size before the route refuses it; ``roles`` None: the cap of
        one allowed (the documented figure)."""
        if path in ("/v1/decisions", "/v1/decisions/batch"):
            return self.decisions
        if path == "/v1/rulesets" and method == "POST":
            return self.proposal
        if path == "/v1/lists" and method == "POST":
            return self.lists if roles is None or may("lists.load", roles) else self.default
        if path == "/console" or path.startswith("/console/"):
            return self.console
        return self.default


def body_cap(method: str, path: str) -> int:
    """The body cap of a request with the default caps (the documented figures)."""
    return BodyCaps().of(method, path)


class RateLimiter:
    """Token buckets, one per principal (certificate fingerprint), with the rate of its roles.

    A caller holding several roles gets the most generous of their limits; one whose roles name
    none gets ``ANY_ROLE``'s. Not thread-safe: it is used from the event loop only."""

    def __init__(self, limits: Mapping[str, RateLimit], clock: Callable[[], float] = time.monotonic,
                 max_principals: int = 100_000) -> None:
        unknown = sorted(set(limits) - {*ROLES, ANY_ROLE})
        if unknown:
            raise ValueError(f"rate_limits names {', '.join(map(repr, unknown))}: not a role "
                             f"(roles: {', '.join(ROLES)}; {ANY_ROLE!r}: a caller whose roles have no limit)")
        merged = {**DEFAULT_RATE_LIMITS, **limits}
        self.limits = merged
        self.clock = clock
        self._max = max_principals
        self._buckets: dict[str, list[float]] = {}  # fingerprint -> [tokens, last refill]
        self._of_roles: dict[frozenset[str], RateLimit] = {}

    def limit_of(self, roles: frozenset[str]) -> RateLimit:
        hit = self._of_roles.get(roles)
        if hit is None:
            own = [self.limits[r] for r in roles if r in self.limits]
            hit = max(own, key=lambda x: (x.per_second, x.burst)) if own else self.limits[ANY_ROLE]
            self._of_roles[roles] = hit
        return hit

    def take(self, key: str, roles: frozenset[str]) -> float | None:
        """Spend one token of ``key``'s bucket: None if there was one, else the seconds until there is."""
        limit = self.limit_of(roles)
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max:  # the oldest principal starts again with a full bucket
                del self._buckets[next(iter(self._buckets))]
            bucket = self._buckets[key] = [float(limit.burst), now]
        tokens = min(float(limit.burst), bucket[0] + (now - bucket[1]) * limit.per_second)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return None
        bucket[0] = tokens
        return (1.0 - tokens) / limit.per_second


class Gate:
    """ASGI middleware: authenticate once, rate-limit the principal, cap the request body."""

    def __init__(self, app: Any, *, auth: Authenticator, limiter: RateLimiter,
                 caps: BodyCaps | None = None, html: HtmlErrors | None = None,
                 html_prefix: str = "/console") -> None:
        self.app = app
        self.auth = auth
        self.limiter = limiter
        self.caps = caps or BodyCaps()
        self.html = html
        self.html_prefix = html_prefix

    def _refusal(self, scope: dict[str, Any], status: int, kind: str, title: str, detail: str,
                 headers: dict[str, str], extra: dict[str, Any]) -> Response:
        path: str = scope["path"]
        if self.html is not None and path.startswith(self.html_prefix):
            page = self.html(Request(scope), status, title, detail, [])
            page.headers.update(headers)
            return page
        return problem_response(status, kind, detail, headers=headers, instance=path, extra=extra)

    async def _too_large(self, scope: dict[str, Any], cap: int, what: str, caller: Caller | None,
                         declared: int | None) -> Response:
        noun = "form" if scope["path"].startswith(self.html_prefix) else "body"
        extra: dict[str, Any] = {"limit_bytes": cap}
        recorded = "nothing was decided or recorded"
        tid = await self._seal_too_large(scope, cap, caller, declared)
        if tid is not None:
            extra["trace_id"] = tid
            recorded = f"nothing was decided; the refusal is sealed as trace {tid}"
        # Connection: close, so that the server stops taking in the rest of the body after the answer.
        return self._refusal(scope, 413, "too_large", "Too large",
                             f"{noun} over {cap:,} bytes, this endpoint's limit ({what}); {recorded}",
                             {"Connection": "close"}, extra)

    async def _seal_too_large(self, scope: dict[str, Any], cap: int, caller: Caller | None,
                              declared: int | None) -> str | None:
        """Seal the refusal of a screening request over the cap (a caller allowed to score, a
        decision endpoint); its trace id, or None where there is none to seal or sealing failed."""
        operation = _SCORING.get(scope["path"])
        app = scope.get("app")
        if (operation is None or scope["method"] != "POST" or caller is None
                or not may(operation, caller.roles) or app is None
                or getattr(app.state, "runtime", None) is None):
            return None
        from api.routes.decisions import format_of, seal_refused, via_of
        from audit.decide.refusal import too_large

        batch = operation == "decisions.batch"
        refusal = too_large(declared, cap, fmt=format_of(Headers(scope=scope).get("content-type")),
                            principal=caller.principal.to_json(), batch=batch, via=via_of(batch))
        return await seal_refused(app.state, refusal)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        try:
            caller: Caller | None = self.auth.caller(scope, Headers(scope=scope))
        except AuthError:
            caller = None  # the route refuses it with 401 (a page under /console); its body stays unread
        if caller is not None:
            scope[CALLER_SCOPE_KEY] = caller
            principal = caller.principal
            wait = self.limiter.take(principal.fingerprint_sha256, caller.roles)
            if wait is not None:
                limit = self.limiter.limit_of(caller.roles)
                after = max(1, math.ceil(wait))
                roles = ", ".join(sorted(caller.roles)) or "none"
                refusal = self._refusal(
                    scope, 429, "rate_limited", "Too many requests",
                    f"{principal.subject} (roles: {roles}) is over its limit of {limit.per_second:g} "
                    f"requests a second (burst {limit.burst}); nothing was done; retry after {after} s",
                    {"Retry-After": str(after)}, {"retry_after_s": after})
                await refusal(scope, receive, send)
                return
        cap = self.caps.of(scope["method"], path, caller.roles if caller is not None else frozenset())
        declared = _content_length(scope)
        if declared is not None:
            if declared > cap:
                answer = await self._too_large(scope, cap, f"Content-Length: {declared:,} bytes", caller,
                                               declared)
                await answer(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if caller is None:  # every route refuses it (401) before reading a body: none is read here either
            await self.app(scope, receive, send)
            return
        body: list[bytes] = []
        size = 0
        while True:  # no Content-Length: read (chunked) to the end or to the cap, before any route
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                body.clear()
                answer = await self._too_large(scope, cap, "more than that sent, without a Content-Length",
                                               caller, None)
                await answer(scope, receive, send)
                return
            if chunk:
                body.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replaying(b"".join(body), receive), send)


def _content_length(scope: Mapping[str, Any]) -> int | None:
    """The declared body length; None where there is none, or where a Transfer-Encoding makes it
    meaningless (RFC 9112 6.3: the encoding wins), so that the body is counted as it arrives."""
    declared = None
    for k, v in scope["headers"]:
        if k == b"transfer-encoding":
            return None
        if k == b"content-length":
            text = v.decode("latin-1").strip()
            declared = int(text) if text.isdigit() else None
    return declared


def _replaying(body: bytes, receive: Any) -> Any:
    """``receive`` that first hands over ``body`` whole, then whatever the server sends (a disconnect)."""
    pending: list[bytes] = [body]

    async def replay() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replay
