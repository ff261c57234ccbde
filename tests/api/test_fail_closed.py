"""Fail-closed behaviour of the served pipeline (in process, both databases): a ledger that
cannot commit answers 503 with Retry-After and writes nothing; a faulting rule module and a
passed deadline are recorded fail-safe HOLDs; bad principals never reach a handler."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from starlette.testclient import TestClient

from api import ops
from api.app import create_app
from api.certs import create_dev_pki
from api.config import Settings
from api.server import TLS_PEER_DER
from audit.decide.runtime import Runtime
from audit.decide.types import ActiveRules
from inference.simulate import SimConfig, simulate
from ledger import store
from ledger.keys import load_signer
from ledger.verify import verify_ledger
from tests.conftest import Db
from tests.wasm_rules.guests import MANIFEST, guest

JSON = {"content-type": "application/json"}


@dataclass
class Served:
    client: TestClient
    runtime: Runtime
    settings: Settings

    def post(self, tx: bytes, role: str = "scorer", **headers: str) -> Any:
        return self.client.post("/v1/decisions", content=tx, headers={**JSON, **headers,
                                                                        "x-test-role": role})

    def batches(self, txs: list[bytes], size: int = 550) -> list[Any]:
        """``txs`` decided through ``/v1/decisions/batch``, ``size`` at a time; each answer, checked 200."""
        out = []
        for i in range(0, len(txs), size):
            r = self.client.post("/v1/decisions/batch", content=b"[" + b",".join(txs[i:i + size]) + b"]",
                                 headers={**JSON, "x-test-role": "scorer"})
            assert r.status_code == 200, r.text
            out.append(r)
        return out

    def size(self) -> int:
        with self.runtime.engine.connect() as conn:
            return store.tail(conn)[0]


def _with_peer(app: Any, ders: dict[str, bytes]) -> Any:
    """What api.server does for a TLS connection, for an in-process client: the peer certificate
    of the role named in a test header (the header itself is never read by the app)."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            role = dict(scope["headers"]).get(b"x-test-role", b"scorer").decode()
            scope = {**scope, "extensions": {"tls": {TLS_PEER_DER: ders[role]}}}
        await app(scope, receive, send)
    return wrapped


@contextmanager
def in_process(db: Db, tmp_path: Path, **settings: Any) -> Iterator[tuple[TestClient, Runtime, Settings]]:
    """A fresh ledger, dev PKI and runtime behind an in-process client whose ``x-test-role``
    header picks the dev certificate the app sees as the connection's peer."""
    pki = create_dev_pki(tmp_path / "certs")
    s = Settings.model_validate({"db": db.url, "keys": tmp_path / "keys", "roles_file": pki.roles_file,
                                 "decision_timeout_ms": 2000, **settings})
    store.connect(db.url, create_file=True).dispose()
    ops.initialise(s)
    rt = Runtime.open(s)
    ders = {role: x509.load_pem_x509_certificate(c.cert_path.read_bytes()).public_bytes(Encoding.DER)
            for role, c in pki.clients.items()}
    try:
        with TestClient(_with_peer(create_app(s, runtime=rt), ders)) as client:
            yield client, rt, s
    finally:
        rt.close()



def txs(n: int, seed: int = 21) -> list[bytes]:
    return [s.transaction.canonical_bytes()
            for s in simulate(SimConfig(seed=seed, n_normal=max(n, 100), n_accounts=100, days=3))[:n]]


class _Outage:
    """The database refuses every write while ``down`` (as a dropped connection or full disk does)."""

    def __init__(self, engine: Any) -> None:
        self.down = False
        event.listen(engine, "before_cursor_execute", self._check)

    def _check(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.down and statement.lstrip().upper().startswith("INSERT"):
            raise OperationalError(statement[:40], None, Exception("injected: the database is unreachable"))


def test_ledger_down_answers_503_with_retry_after_and_writes_nothing(served: Served) -> None:
    outage = _Outage(served.runtime.engine)
    first, second, third = txs(3)
    r = served.post(first)
    assert r.status_code == 200
    first_seq = r.json()["ledger"]["seq"]
    before = served.size()
    outage.down = True
    r = served.post(second)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "1"
    assert r.headers["content-type"] == "application/problem+json"
    assert "no decision was issued" in r.json()["detail"]
    r = served.client.post("/v1/decisions/batch", content=b"[" + second + b"," + third + b"]",
                           headers={**JSON, "x-test-role": "scorer"})
    assert r.status_code == 503
    assert served.size() == before  # nothing half-written: no entry, node, payload or index row
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert "sealtrail_unavailable_responses_total 2.0" in metrics
    outage.down = False
    r = served.post(second)  # the ledger is back: velocity is rebuilt from it, then decided
    assert r.status_code == 200, r.text
    assert r.json()["ledger"]["seq"] == before
    verify_ledger(served.runtime.engine, [load_signer(served.settings.key_file).verifier])
    found = served.client.get("/v1/traces?limit=10", headers={"x-test-role": "officer"}).json()["items"]
    assert [t["seq"] for t in found] == [before, first_seq]  # (first's batch summary sealed between)


def test_a_faulting_rule_module_is_a_recorded_fail_safe_hold(served: Served) -> None:
    loop = ('(func (export "evaluate") (param $n i32) (result i32) '
            '(loop $forever (br $forever)) (i32.const 0))')
    module = served.runtime.sandbox.load(guest(loop, manifest={**MANIFEST, "features": ["model_score"]}))
    served.runtime.pipeline.activate(ActiveRules.of(module))
    r = served.post(txs(1, seed=22)[0])
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["decision"] == "HOLD" and d["fail_safe"].startswith("SANDBOX_FAULT")
    t = served.client.get(f"/v1/traces/{d['trace_id']}", headers={"x-test-role": "officer"}).json()
    assert t["record"]["record"]["fail_safe"].startswith("SANDBOX_FAULT")
    assert t["record"]["record"]["rules"]["module_sha256"] == module.sha256
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert "sealtrail_sandbox_faults_total 1.0" in metrics
    assert 'sealtrail_fail_safe_decisions_total{cause="SANDBOX_FAULT"} 1.0' in metrics


def test_a_request_whose_deadline_passes_in_the_queue_is_a_recorded_hold(served: Served) -> None:
    pipeline = served.runtime.pipeline
    a, b = txs(2, seed=23)
    results: dict[str, Any] = {}
    pipeline._lock.acquire()  # the worker is busy with another batch for as long as we hold this
    try:
        first = threading.Thread(target=lambda: results.setdefault("a", served.post(a)))
        first.start()
        deadline = time.monotonic() + 10
        while served.runtime.service.stats().batches < 1 and time.monotonic() < deadline:
            time.sleep(0.005)  # wait until the worker has taken `a` and blocks on the lock
        served.runtime.service.timeout_s = 0.001
        second = threading.Thread(
            target=lambda: results.setdefault("b", served.post(b, **{"x-priority": "P2"})))
        second.start()
        while served.runtime.service.stats().expired < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert served.runtime.service.stats().expired == 1
    finally:
        pipeline._lock.release()
    first.join(30)
    second.join(30)
    assert results["a"].status_code == 200 and results["a"].json()["fail_safe"] is None
    late = results["b"].json()
    assert results["b"].status_code == 200 and late["decision"] == "HOLD"
    assert late["fail_safe"] == "DEADLINE_EXCEEDED" and late["score"] is None
    t = served.client.get(f"/v1/traces/{late['trace_id']}", headers={"x-test-role": "officer"}).json()
    assert t["record"]["record"]["fail_safe"] == "DEADLINE_EXCEEDED"


def test_a_request_without_a_peer_certificate_never_reaches_a_handler(served: Served, tmp_path: Path) -> None:
    app = create_app(served.settings, runtime=served.runtime)
    with TestClient(app) as bare:  # no TLS extension at all: as plain HTTP would arrive
        r = bare.post("/v1/decisions", content=txs(1)[0], headers=JSON)
    assert r.status_code == 401 and r.json()["type"].endswith("no_certificate")
