"""A client with API access that means harm, at the transport: forged identity headers,
certificates issued for something else, oversized and endless bodies, floods, errors that
should say nothing, and a readiness check that must not lie while the ledger cannot commit.

In process where the app alone decides (both databases), over a real ``sealtrail serve``
where the TLS layer has a say."""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import fastapi.routing
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID
from fastapi import FastAPI
from starlette.testclient import TestClient

from api import ops
from api.access import ACCESS
from api.app import create_app
from api.certs import create_dev_pki
from api.config import Settings
from api.limits import BodyCaps, body_cap
from api.openapi.document import OPERATION
from api.server import TLS_PEER_DER
from audit.decide.runtime import Runtime
from ledger import store
from tests.api.server_proc import ServerProcess, prepare, start
from tests.api.test_auth import issue_from_dev_ca
from tests.api.test_fail_closed import _Outage, txs
from tests.conftest import Db

JSON = {"content-type": "application/json"}
PROBLEM = "application/problem+json"
REFUSED = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)
XFCC = "x-forwarded-client-cert"


# -- in process: the app with a chosen peer certificate per request ---------------------------


@dataclass
class App:
    app: FastAPI
    client: TestClient
    runtime: Runtime
    ders: dict[str, bytes]

    def headers(self, role: str, **more: str) -> dict[str, str]:
        return {"x-test-role": role, **more}

    def size(self) -> int:
        with self.runtime.engine.connect() as conn:
            return store.tail(conn)[0]


def _with_peer(app: Any, ders: dict[str, bytes]) -> Any:
    """What api.server does for a TLS connection: the peer certificate of the role named in a test
    header (the header itself is never read by the app)."""
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            role = dict(scope["headers"]).get(b"x-test-role", b"scorer").decode()
            scope = {**scope, "extensions": {"tls": {TLS_PEER_DER: ders[role]}}}
        await app(scope, receive, send)
    return wrapped


def _served(db: Db, tmp_path: Path, **settings: Any) -> Iterator[App]:
    pki = create_dev_pki(tmp_path / "certs")
    s = Settings.model_validate({"db": db.url, "keys": tmp_path / "keys", "roles_file": pki.roles_file,
                                 "decision_timeout_ms": 2000, "exports_dir": tmp_path / "exports",
                                 **settings})
    store.connect(db.url, create_file=True).dispose()
    ops.initialise(s)
    rt = Runtime.open(s)
    ders = {role: x509.load_pem_x509_certificate(c.cert_path.read_bytes()).public_bytes(Encoding.DER)
            for role, c in pki.clients.items()}
    app = create_app(s, runtime=rt)
    try:
        # raise_server_exceptions=False: what a client sees, not what the test harness re-raises
        with TestClient(_with_peer(app, ders), raise_server_exceptions=False) as client:
            yield App(app, client, rt, ders)
    finally:
        rt.close()


@pytest.fixture
def served(db: Db, tmp_path: Path) -> Iterator[App]:
    yield from _served(db, tmp_path)


def _problem(r: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM, r.headers
    body: dict[str, Any] = r.json()
    assert body["type"] == f"urn:sealtrail:problem:{kind}" and body["status"] == status, body
    return body


# -- B. request bodies: capped, streamed, refused with 413, nothing written ---------------------


def _routes(app: FastAPI) -> list[Any]:
    """Every route of the app, included routers walked (FastAPI 0.16x keeps them as such and
    walks them with ``iter_route_contexts``; each context reads like the route)."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(app.routes) if contexts is None else list(contexts(list(app.routes)))


SCORING = ("/v1/decisions", "/v1/decisions/batch")


def _post_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(path with its parameters filled in, a role allowed to call it) for every POST route."""
    out = []
    for r in _routes(app):
        if "POST" not in (getattr(r, "methods", None) or ()):
            continue
        op = (getattr(r, "openapi_extra", None) or {}).get(OPERATION)
        for d in getattr(getattr(r, "dependant", None), "dependencies", []):
            op = op or getattr(d.call, "operation", None)
        allowed = sorted(ACCESS.get(op, ())) if op else []
        path = re.sub(r"\{[^}]+\}", "00000000-0000-7000-8000-000000000000", r.path)
        out.append((path, allowed[0] if allowed else "officer"))
    return out


def test_the_post_routes_enumerated_are_the_apps(served: App) -> None:
    paths = {p for p, _ in _post_routes(served.app)}
    z = "00000000-0000-7000-8000-000000000000"
    assert {"/v1/decisions", "/v1/decisions/batch", f"/v1/traces/{z}/annotations", "/v1/rulesets",
            f"/v1/rulesets/{z}/approve", f"/v1/rulesets/{z}/activate", "/v1/exports",
            "/v1/ledger/verify"} <= paths
    assert any(p.startswith("/console") for p in paths)  # the console's forms too


def test_every_post_refuses_a_declared_oversized_body_unread(served: App) -> None:
    before = served.size()
    for path, role in _post_routes(served.app):
        cap = body_cap("POST", path)
        # Content-Length says one byte more than the cap: refused on the header, before a byte is read.
        declared = {"content-length": str(cap + 1)}
        r = served.client.post(path, content=b"{}", headers=served.headers(role, **JSON, **declared))
        if path.startswith("/console/"):  # the console's own error page, same status
            assert r.status_code == 413 and r.headers["content-type"].startswith("text/html"), path
            assert f"form over {cap:,} bytes" in r.text and f"{cap + 1:,} bytes" in r.text, path
            continue
        body = _problem(r, 413, "too_large")
        assert body["limit_bytes"] == cap and f"{cap + 1:,} bytes" in body["detail"], (path, body)
        # a screening request refused is sealed (its refusal and the summary after it); nothing else is
        assert ("trace_id" in body) == (path in SCORING), (path, body)
    assert served.size() == before + 2 * len(SCORING)


def _endless_post(served: App, path: str, role: str, chunk: bytes, give_up_at: int,
                  more_headers: tuple[tuple[bytes, bytes], ...] = ()) -> tuple[int, int]:
    """POST to ``path`` a chunked body that ends only after ``give_up_at`` bytes, straight into the
    ASGI app; (the status answered, how many bytes the app pulled)."""
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal pulled
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": pulled < give_up_at}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "https", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "server": ("testserver", 443), "client": ("127.0.0.1", 50000),
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"transfer-encoding", b"chunked"), *more_headers],
             "extensions": {"tls": {TLS_PEER_DER: served.ders[role]}}, "state": {}}
    assert served.client.portal is not None

    async def post() -> None:
        await served.app(scope, receive, send)

    served.client.portal.call(post)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, (path, starts)
    ctype = dict(starts[0]["headers"])[b"content-type"].decode()
    assert ctype.startswith("text/html" if path.startswith("/console/") else PROBLEM), (path, ctype)
    return starts[0]["status"], pulled


def test_every_post_stops_reading_a_chunked_body_at_its_cap(served: App) -> None:
    """A body with no Content-Length that goes on and on: the app reads at most the cap (plus
    one chunk), answers 413, and writes nothing."""
    chunk = b"[" + b" " * (256 << 10)
    before = served.size()
    for path, role in _post_routes(served.app):
        cap = body_cap("POST", path)
        status, pulled = _endless_post(served, path, role, chunk, give_up_at=cap + 16 * len(chunk))
        assert status == 413 and pulled <= cap + len(chunk), (path, status, pulled, cap)
    assert served.size() == before + 2 * len(SCORING)  # the decision endpoints' refusals, sealed unread


def test_a_small_content_length_beside_chunked_encoding_does_not_let_a_big_body_through(served: App) -> None:
    # RFC 9112: Transfer-Encoding wins over Content-Length, so the declared length is no limit.
    path, chunk = "/v1/traces/00000000-0000-7000-8000-000000000000/annotations", b" " * (64 << 10)
    cap = body_cap("POST", path)
    status, pulled = _endless_post(served, path, "officer", chunk, give_up_at=64 * cap,
                                   more_headers=((b"content-length", b"2"),))
    assert status == 413 and pulled <= cap + len(chunk)


def test_the_caps_are_sized_by_endpoint_kind() -> None:
    caps = BodyCaps()
    assert caps.of("POST", "/v1/decisions/batch") == caps.of("POST", "/v1/decisions") == 64 << 20
    assert caps.of("POST", "/v1/rulesets") == 32 << 20
    assert caps.of("POST", "/v1/traces/x/annotations") == caps.of("POST", "/v1/exports") == 256 << 10
    assert caps.of("POST", "/console/rulesets") == 4 << 20


def test_a_body_under_its_cap_is_still_decided(served: App) -> None:
    r = served.client.post("/v1/decisions/batch", content=b"[" + b",".join(txs(3, seed=31)) + b"]",
                           headers=served.headers("scorer", **JSON))
    assert r.status_code == 200 and r.json()["count"] == 3


# -- C. an unexpected error: problem+json 500 with an incident id, nothing of the exception -------


def test_an_unexpected_error_is_a_500_problem_with_an_incident_in_the_log(
        served: App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("secret detail: /srv/sealtrail/keys/signing.key")

    monkeypatch.setattr(served.runtime.governance, "list", broken)  # a sync route (threadpool)
    monkeypatch.setattr(served.runtime.service, "decide_async", broken)  # an async one
    with caplog.at_level(logging.ERROR, logger="sealtrail.api"):
        r1 = served.client.get("/v1/rulesets", headers=served.headers("officer"))
        r2 = served.client.post("/v1/decisions", content=txs(1, seed=32)[0],
                                headers=served.headers("scorer", **JSON))
    for r in (r1, r2):
        body = _problem(r, 500, "internal")
        assert re.fullmatch(r"[0-9a-f]{32}", body["incident"]) and body["incident"] in body["detail"]
        assert "secret" not in r.text and "RuntimeError" not in r.text
        (line,) = [rec for rec in caplog.records if body["incident"] in rec.getMessage()]
        assert line.exc_info is not None and "secret detail" in str(line.exc_info[1])  # the traceback
    assert r1.json()["incident"] != r2.json()["incident"]


# -- D. readiness while the ledger cannot commit ---------------------------------------------------


def test_healthz_is_unready_while_commits_fail_and_ready_after(served: App) -> None:
    outage = _Outage(served.runtime.engine)
    first, second = txs(2, seed=33)
    admin = served.headers("admin")
    assert served.client.get("/healthz", headers=admin).status_code == 200
    outage.down = True
    scorer = served.headers("scorer", **JSON)
    assert served.client.post("/v1/decisions", content=first, headers=scorer).status_code == 503
    r = served.client.get("/healthz", headers=admin)  # reads still work: only commits fail
    body = _problem(r, 503, "ledger_not_committing")
    assert int(r.headers["retry-after"]) >= 1 and body["failed_commits"] == 1
    outage.down = False
    assert served.client.get("/healthz", headers=admin).status_code == 503  # nothing committed yet
    assert served.client.post("/v1/decisions", content=second, headers=scorer).status_code == 200
    r = served.client.get("/healthz", headers=admin)
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_healthz_is_ready_again_after_the_hold_without_another_failure(served: App) -> None:
    health = served.app.state.commit_health
    now = [1000.0]
    health.clock = lambda: now[0]
    outage = _Outage(served.runtime.engine)
    outage.down = True
    assert served.client.post("/v1/decisions", content=txs(1, seed=34)[0],
                              headers=served.headers("scorer", **JSON)).status_code == 503
    r = served.client.get("/healthz", headers=served.headers("admin"))
    assert r.status_code == 503 and r.headers["retry-after"] == str(round(health.hold_s))
    now[0] += health.hold_s  # no request came: a load balancer sends traffic again, to find out
    assert served.client.get("/healthz", headers=served.headers("admin")).status_code == 200


# -- F. per-principal rate limits ------------------------------------------------------------------


@pytest.fixture
def limited(db: Db, tmp_path: Path) -> Iterator[App]:
    yield from _served(db, tmp_path, rate_limits={"scorer": {"per_second": 0.01, "burst": 3}})


def test_a_flood_gets_429_with_retry_after_writes_nothing_and_spares_others(limited: App) -> None:
    before = limited.size()
    bodies = txs(10, seed=35)
    answers = [limited.client.post("/v1/decisions", content=b, headers=limited.headers("scorer", **JSON))
               for b in bodies]
    assert [r.status_code for r in answers] == [200] * 3 + [429] * 7
    for r in answers[3:]:
        body = _problem(r, 429, "rate_limited")
        assert int(r.headers["retry-after"]) >= 1 and body["retry_after_s"] == int(r.headers["retry-after"])
    # the three accepted sealed a decision and their batch's summary and state delta each; the refused
    # seven nothing
    assert [r.json()["ledger"]["seq"] for r in answers[:3]] == [before, before + 3, before + 6]
    assert limited.size() == before + 3 * 3
    # checked before the body is read: an oversized body is refused as a flood, not read
    r = limited.client.post("/v1/decisions", content=b"{}",
                            headers=limited.headers("scorer", **JSON, **{"content-length": str(1 << 40)}))
    assert r.status_code == 429
    # another principal is unaffected
    assert limited.client.get("/v1/traces?limit=1", headers=limited.headers("officer")).status_code == 200
    assert limited.client.get("/healthz", headers=limited.headers("admin")).status_code == 200


def test_rate_limits_naming_an_unknown_role_are_refused(tmp_path: Path) -> None:
    s = Settings.model_validate({"db": f"sqlite:///{tmp_path / 'x.db'}",
                                 "rate_limits": {"scorers": {"per_second": 1, "burst": 1}}})
    with pytest.raises(ValueError, match="'scorers': not a role"):
        create_app(s)


# -- over a real server: the TLS layer and the proxy header (A, E) -------------------------------


@dataclass
class Real:
    proc: ServerProcess
    pki: Path

    def client(self, cert: Path, key: Path) -> httpx.Client:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.pem"))
        ctx.load_cert_chain(str(cert), str(key))
        return httpx.Client(base_url=self.proc.url, verify=ctx, timeout=30)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Real]:
    """``sealtrail serve`` over mutual TLS that also trusts a proxy header from 127.0.0.1: the
    set-up in which a scorer's own header once named the admin."""
    files = prepare(tmp_path_factory.mktemp("proxied"))
    with start(files, extra_args=("--proxy-cert-header", XFCC, "--trusted-proxy", "127.0.0.1")) as proc:
        yield Real(proc, files.pki)
        assert proc.stop() == 0, proc.stderr()


def test_over_tls_a_forwarded_header_never_overrides_the_peer_certificate(proxied: Real) -> None:
    admin = quote((proxied.pki / "admin.pem").read_text())
    with proxied.client(proxied.pki / "scorer.pem", proxied.pki / "scorer.key") as c:
        for value in (admin, f'Cert="{admin}"', f'Cert="{admin}",By=spiffe://x;Cert="{admin}"'):
            r = c.get("/metrics", headers={XFCC: value})
            body = _problem(r, 403, "forbidden")
            assert "roles: scorer" in body["detail"], body
    with proxied.client(proxied.pki / "admin.pem", proxied.pki / "admin.key") as c:
        assert c.get("/metrics").status_code == 200  # the admin, by its own connection


def test_over_tls_a_certificate_without_client_auth_is_refused(proxied: Real, tmp_path: Path) -> None:
    for eku, name in ((None, "none"), ([ExtendedKeyUsageOID.SERVER_AUTH], "server")):
        cert, key = issue_from_dev_ca(proxied.pki / "ca.pem", proxied.pki / "ca.key", eku, "admin")
        (tmp_path / f"{name}.pem").write_bytes(cert.public_bytes(Encoding.PEM))
        (tmp_path / f"{name}.key").write_bytes(key.private_bytes(
            Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    # No extendedKeyUsage at all: OpenSSL's handshake lets it through; the app refuses it, saying why.
    with proxied.client(tmp_path / "none.pem", tmp_path / "none.key") as c:
        body = _problem(c.get("/metrics"), 401, "not_client")
        assert "no extendedKeyUsage" in body["detail"] and "clientAuth" in body["detail"]
    # serverAuth only: refused by the TLS layer itself.
    with proxied.client(tmp_path / "server.pem", tmp_path / "server.key") as c, pytest.raises(REFUSED):
        c.get("/metrics")
