"""``/docs`` (Swagger UI) and ``/redoc`` in a real browser with no way out: every request to another
host is aborted, and the pages still list every operation of ``/openapi.json``.

A real ``sealtrail serve`` over mutual TLS (tests/api/server_proc.py) and Debian's Chromium driven
by Playwright (tests/api/console/browser.py), as in the console's browser tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.api import server_proc
from tests.api.console.browser import Browser
from tests.api.console.test_browser import browser  # noqa: F401  (the module's Chromium, a fixture)
from tests.api.server_proc import ServerProcess

pytestmark = pytest.mark.browser

# The one thing a viewer asks another host for: ReDoc's "API docs by Redocly" badge image. The
# page's Content-Security-Policy stops it in the browser (so it never reaches the network, nor the
# route below) and ReDoc then drops the image; the link text stays.
REDOCLY_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    files = server_proc.prepare(tmp_path_factory.mktemp("apidocs"))
    with server_proc.start(files) as srv:
        yield srv
        srv.stop()


@dataclass
class Offline:
    """What a page asked for while every other host was unreachable."""

    aborted: list[str] = field(default_factory=list)  # requests to another host (aborted here)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, why) that got no answer
    errors: list[int | str] = field(default_factory=list)  # >= 400 answers, script errors
    csp_blocked: list[str] = field(default_factory=list)  # console reports of the page's CSP

    @classmethod
    def on(cls, page: Any, srv: ServerProcess) -> Offline:
        seen = cls()

        def route(r: Any) -> None:
            if urlsplit(r.request.url).hostname == srv.host:
                r.continue_()
            else:
                seen.aborted.append(r.request.url)
                r.abort("internetdisconnected")

        page.route("**/*", route)
        page.on("requestfailed", lambda r: seen.failed.append((r.url, r.failure or "")))
        page.on("response", lambda r: r.status >= 400 and seen.errors.append(f"{r.status} {r.url}"))
        page.on("pageerror", lambda e: seen.errors.append(str(e)))
        page.on("console", lambda m: "Content Security Policy" in m.text and seen.csp_blocked.append(m.text))
        return seen


def _operations(srv: ServerProcess) -> list[tuple[str, str, str]]:
    with srv.client("officer") as c:
        paths = c.get("/openapi.json").json()["paths"]
    return [(m.upper(), p, op["summary"]) for p, item in paths.items() for m, op in item.items()]


def test_swagger_ui_lists_every_operation_with_the_network_blocked(browser: Browser,  # noqa: F811
                                                                   server: ServerProcess) -> None:
    expected = _operations(server)
    with browser.as_role(server, "scorer") as page:  # any verified certificate may read the docs
        seen = Offline.on(page, server)
        page.goto(f"{server.url}/docs")
        page.locator(".opblock-summary-path[data-path='/v1/decisions']").wait_for()
        shown = page.locator(".opblock").evaluate_all(
            "bs => bs.map(b => [b.querySelector('.opblock-summary-method').textContent,"
            " b.querySelector('.opblock-summary-path').dataset.path])")
        assert sorted(map(tuple, shown)) == sorted((m, p) for m, p, _ in expected)
        assert page.get_by_text("/v1/decisions", exact=True).filter(visible=True).count() == 1
        # An operation opens on its example: the complete transaction, with its roles above it.
        page.locator(".opblock-summary-path[data-path='/v1/decisions']").click()
        body = page.locator(".opblock-body").first
        body.get_by_text("PAY-2026-00018").first.wait_for()
        roles = page.locator(".opblock-description-wrapper").first
        assert roles.locator("code").all_text_contents() == ["scorer", "decisions.create"]
    assert seen.aborted == [] and seen.failed == [] and seen.errors == [], seen
    assert seen.csp_blocked == [], seen


def test_redoc_lists_every_operation_with_the_network_blocked(browser: Browser,  # noqa: F811
                                                              server: ServerProcess) -> None:
    expected = _operations(server)
    with browser.as_role(server, "admin") as page:
        seen = Offline.on(page, server)
        page.goto(f"{server.url}/redoc")
        page.get_by_text("/v1/decisions", exact=True).filter(visible=True).first.wait_for()
        labels = page.locator("li[data-item-id*='/operation/'] label").evaluate_all(
            "ls => ls.map(l => l.textContent)")
        assert sorted(labels) == sorted(f"{m.lower()}{s}" for m, _, s in expected)
        for path in ("/v1/decisions/batch", "/v1/traces/{trace_id}/annotations", "/v1/ledger/verify"):
            assert page.get_by_text(path, exact=True).filter(visible=True).count() >= 1, path
        # The search index runs in a worker the CSP allows (worker-src blob:).
        page.locator("input[aria-label=Search]").fill("annotate")
        page.locator("[data-role='search:results'] li[data-item-id*='/operation/add_annotation']").wait_for()
    assert seen.aborted == [] and seen.errors == [], seen
    assert set(seen.failed) <= {(REDOCLY_BADGE, "csp")}, seen
    assert all(REDOCLY_BADGE in m for m in seen.csp_blocked), seen.csp_blocked
