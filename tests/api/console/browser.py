"""A real browser on the console: Debian's Chromium driven by Playwright, over mutual TLS.

Playwright's own browser download does not work offline, so it drives ``/usr/bin/chromium``
(installed by ``.ci/browser``, which ``make test`` runs). Each role is a browser context that
presents that role's dev client certificate through Playwright's client-certificate option;
the dev CA is not in the browser's trust store, so the server certificate is not checked by
the browser (the client side of the handshake is what these tests are about).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest

from tests.api.server_proc import ServerProcess
from tests.api.test_fail_closed import txs

__all__ = ["CHROMIUM", "FLAGS", "Browser", "require_browser", "score"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update"]


def require_browser() -> str:
    """Chromium's path; the test fails in CI without it and is skipped, saying why, elsewhere."""
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/browser should have installed it")
        pytest.skip("chromium is not installed (make test installs it with .ci/browser as root)")
    return CHROMIUM


class Browser:
    """One headless Chromium; ``as_role(server, role)`` opens a page presenting that role's certificate."""

    def __init__(self, pw: Any, executable: str) -> None:
        self.browser = pw.chromium.launch(executable_path=executable, headless=True, args=FLAGS)

    @contextmanager
    def as_role(self, server: ServerProcess, role: str, **options: Any) -> Iterator[Any]:
        cert, key = server.files.client_cert(role)
        ctx = self.browser.new_context(
            ignore_https_errors=True, accept_downloads=True,
            client_certificates=[{"origin": server.url, "certPath": str(cert), "keyPath": str(key)}],
            **options)
        ctx.set_default_timeout(20_000)
        try:
            yield ctx.new_page()
        finally:
            ctx.close()

    def close(self) -> None:
        self.browser.close()


def score(server: ServerProcess, n: int, seed: int = 21) -> list[dict[str, Any]]:
    """Decide ``n`` simulated payments through the batch endpoint as the scorer."""
    body = b"[" + b",".join(txs(n, seed)) + b"]"
    with server.client("scorer", timeout=60) as c:
        r = c.post("/v1/decisions/batch", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = orjson.loads(r.content)["decisions"]
    return out
