"""The HTTP benchmark's load generator against a real ``sealtrail serve``: it counts answers that
were replays (a payment sent again is answered from the idempotency store, not decided), and with
``--once`` never sends a body twice, so a benchmark cannot time replays as decisions unnoticed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.http import Feed
from tests.api.server_proc import ServerProcess, prepare, start

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start(prepare(tmp_path_factory.mktemp("serve"))) as proc:
        yield proc


def _load(server: ServerProcess, path: str, bodies: Path, *extra: str) -> dict[str, Any]:
    files = server.files
    cert, key = files.client_cert("scorer")
    res = subprocess.run([sys.executable, "-m", "bench.http_load", "--url", server.url, "--path", path,
                          "--ca", str(files.ca), "--cert", str(cert), "--key", str(key),
                          "--bodies", str(bodies), *extra],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stderr
    doc: dict[str, Any] = orjson.loads(res.stdout.strip().splitlines()[-1])
    return doc


def test_a_payment_sent_again_is_counted_as_a_replay(server: ServerProcess, tmp_path: Path) -> None:
    five = Feed(tmp_path).ledger().singles(5)
    first = _load(server, "/v1/decisions", five, "--rate", "50", "--duration", "0.1", "--warmup", "0",
                  "--connections", "2")
    assert first["requests_sent"] == 5 and first["replayed"] == 0
    # the same five again, and the file cycled: every answer is the first decision
    again = _load(server, "/v1/decisions", five, "--rate", "50", "--duration", "0.2", "--warmup", "0",
                  "--connections", "2")
    assert again["requests_sent"] == 10 and again["replayed"] == 10 and again["ok"] == 10


def test_once_refuses_a_schedule_longer_than_its_payments(server: ServerProcess, tmp_path: Path) -> None:
    five = Feed(tmp_path).ledger().singles(5)
    files = server.files
    cert, key = files.client_cert("scorer")
    res = subprocess.run([sys.executable, "-m", "bench.http_load", "--url", server.url, "--ca", str(files.ca),
                          "--cert", str(cert), "--key", str(key), "--bodies", str(five), "--once",
                          "--rate", "100", "--duration", "1", "--warmup", "0"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert res.returncode != 0 and "5 bodies, the schedule sends 100" in res.stderr


def test_a_closed_loop_with_once_stops_when_its_payments_run_out(server: ServerProcess,
                                                                 tmp_path: Path) -> None:
    cursor = Feed(tmp_path).ledger()
    cursor.singles(5)  # the payments the first test sent: this run takes the ones after them
    batches = cursor.batches(4, 3)
    doc = _load(server, "/v1/decisions/batch", batches, "--mode", "batch", "--duration", "30",
                "--connections", "2", "--once")
    assert doc["ok"] == 3 and doc["decisions"] == 12 and doc["exhausted"] is True
    assert doc["replayed"] == 0  # twelve payments the ledger had not been sent, each decided
