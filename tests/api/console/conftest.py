"""The console in process: a fresh ledger and runtime behind a client whose ``x-test-role``
header picks the dev certificate the app sees as the TLS peer (see tests/api/test_fail_closed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from api.config import Settings
from audit.decide.runtime import Runtime
from tests.api.test_fail_closed import in_process, txs
from tests.conftest import Db

FORM = {"content-type": "application/x-www-form-urlencoded"}


@dataclass
class Console:
    client: TestClient
    runtime: Runtime
    settings: Settings

    def get(self, path: str, role: str = "officer", **kw: Any) -> Any:
        return self.client.get(path, headers={"x-test-role": role, **kw.pop("headers", {})}, **kw)

    def post_form(self, path: str, data: dict[str, str], role: str = "officer", **headers: str) -> Any:
        return self.client.post(path, content=urlencode(data), follow_redirects=False,
                                headers={**FORM, "x-test-role": role, **headers})

    def score(self, n: int, seed: int = 21, *, checkpoint: bool = True) -> list[dict[str, Any]]:
        """Decide ``n`` simulated payments through the API; the decisions as answered. With
        ``checkpoint``, a checkpoint is signed after them (a page view never signs one)."""
        out = []
        for tx in txs(n, seed):
            r = self.client.post("/v1/decisions", content=tx,
                                 headers={"content-type": "application/json", "x-test-role": "scorer"})
            assert r.status_code == 200, r.text
            out.append(r.json())
        if checkpoint:
            self.runtime.ledger.checkpoint()
        return out


@pytest.fixture
def console(sqlite_db: Db, tmp_path: Path) -> Iterator[Console]:
    """The console on SQLite (the queries under it are tested on both dialects in tests/audit)."""
    with in_process(sqlite_db, tmp_path, exports_dir=tmp_path / "exports") as (client, rt, s):
        yield Console(client, rt, s)


@pytest.fixture
def console_any(db: Db, tmp_path: Path) -> Iterator[Console]:
    """The console on each dialect, for pages whose SQL is the console's own."""
    with in_process(db, tmp_path, exports_dir=tmp_path / "exports") as (client, rt, s):
        yield Console(client, rt, s)
