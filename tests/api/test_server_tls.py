"""A real ``sealtrail serve`` process over real mutual TLS: who gets in, who may do what, the
four-eyes rule, and refusals of bad input. One server for the module; each test leaves it usable."""

from __future__ import annotations

import hashlib
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from api.access import ACCESS
from api.app import create_app
from api.config import Settings
from api.roles import ROLES
from inference.simulate import SimConfig, simulate
from tests.api.server_proc import ServerProcess, prepare, start
from wasm_rules import parse_ruleset

ROOT = Path(__file__).parents[2]
PACK = ROOT / "wasm_rules" / "packs" / "aml_core.toml"
SHIPPED_VERSION = parse_ruleset(PACK.read_bytes()).version
DUAL_URI = "spiffe://sealtrail.dev/test/officer-and-approver"
JSON = {"content-type": "application/json"}
TOML = {"content-type": "application/toml"}
REFUSED = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)


@dataclass
class Server:
    url: str
    certs: Path
    proc: ServerProcess

    def client(self, who: str | None, certs: Path | None = None) -> httpx.Client:
        ctx = tls_client(self.certs / "ca.pem", who, certs or self.certs)
        return httpx.Client(base_url=self.url, verify=ctx, timeout=30)


def tls_client(ca: Path, who: str | None, certs: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if who is not None:
        ctx.load_cert_chain(str(certs / f"{who}.pem"), str(certs / f"{who}.key"))
    return ctx


def _issue_dual(certs: Path) -> None:
    """A client certificate from the dev CA for a principal holding officer and approver."""
    ca_key = serialization.load_pem_private_key((certs / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dual-role test officer")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(DUAL_URI)]), False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    (certs / "dual.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (certs / "dual.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                       serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    with (certs / "roles.toml").open("a") as f:
        f.write(f'\n[[principal]]\nsan_uri = "{DUAL_URI}"\nroles = ["officer", "approver"]\n')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    files = prepare(tmp_path_factory.mktemp("serve"))
    _issue_dual(files.pki)
    with start(files) as proc:
        yield Server(proc.url, files.pki, proc)
        assert proc.stop() == 0, proc.stderr()  # SIGTERM: drain, then exit 0


def transactions(n: int, seed: int = 3) -> list[bytes]:
    sims = simulate(SimConfig(seed=seed, n_normal=max(n, 100), n_accounts=100, days=3))[:n]
    return [s.transaction.canonical_bytes() for s in sims]


def fingerprint(pem: Path) -> str:
    return x509.load_pem_x509_certificate(pem.read_bytes()).fingerprint(hashes.SHA256()).hex()


# -- the handshake ------------------------------------------------------------------------


def test_no_client_certificate_is_refused_at_the_handshake(server: Server) -> None:
    with server.client(None) as c, pytest.raises(REFUSED):
        c.get("/healthz")


def test_a_certificate_from_another_ca_is_refused(server: Server) -> None:
    with server.client("outsider", server.certs / "other-ca") as c, pytest.raises(REFUSED):
        c.get("/healthz")


def test_a_valid_certificate_gets_in(server: Server) -> None:
    with server.client("scorer") as c:
        r = c.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


# -- the role matrix, whole ---------------------------------------------------------------

# One request per operation; the body need not be valid: a refused role answers 403 before it
# is read, an allowed one anything but 401/403.
OPERATIONS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "decisions.create": ("POST", "/v1/decisions", {"content": b"{}", "headers": JSON}),
    "decisions.batch": ("POST", "/v1/decisions/batch", {"content": b"[]", "headers": JSON}),
    "traces.query": ("GET", "/v1/traces?limit=1", {}),
    "traces.get": ("GET", "/v1/traces/00000000-0000-7000-8000-000000000000", {}),
    "traces.annotate": ("POST", "/v1/traces/00000000-0000-7000-8000-000000000000/annotations",
                        {"json": {"disposition": "NOTE", "note": "x"}}),
    "ledger.checkpoint": ("GET", "/v1/ledger/checkpoint", {}),
    "ledger.checkpoint_cosigned": ("GET", "/v1/ledger/checkpoint/cosigned", {}),
    "ledger.consistency": ("GET", "/v1/ledger/consistency?old=1&new=1", {}),
    "ledger.verify": ("POST", "/v1/ledger/verify", {}),
    "rulesets.list": ("GET", "/v1/rulesets", {}),
    "rulesets.propose": ("POST", "/v1/rulesets", {"content": b"not toml =",
                                                  "headers": {"content-type": "application/toml"}}),
    "rulesets.approve": ("POST", "/v1/rulesets/nope@0/approve", {}),
    "rulesets.activate": ("POST", "/v1/rulesets/nope@0/activate", {}),
    "models.list": ("GET", "/v1/models", {}),
    "exports.create": ("POST", "/v1/exports", {"json": {"from": "not a time", "to": "x"}}),
    "exports.list": ("GET", "/v1/exports", {}),
    "exports.get": ("GET", "/v1/exports/00000000-0000-7000-8000-000000000000", {}),
    "alerts.list": ("GET", "/v1/alerts?limit=1", {}),
    "alerts.get": ("GET", "/v1/alerts/00001", {}),
    "alerts.act": ("POST", "/v1/alerts/00001/actions", {"json": {"action": "comment", "rationale": "x"}}),
    "cases.list": ("GET", "/v1/cases?limit=1", {}),
    "cases.get": ("GET", "/v1/cases/00001", {}),
    "cases.act": ("POST", "/v1/cases/00001/actions", {"json": {"action": "comment", "rationale": "x"}}),
    "outcomes.list": ("GET", "/v1/outcomes", {}),
    "cases.reads": ("GET", "/v1/case-reads?limit=1", {}),
    "performance.read": ("GET", "/v1/performance/rules", {}),
    "lists.read": ("GET", "/v1/lists", {}),
    "lists.load": ("POST", "/v1/lists?name=x&format=internal-csv&rationale=r",
                   {"content": b"not,a,list\n", "headers": {"content-type": "text/csv"}}),
    "lists.withdraw": ("POST", "/v1/lists/nope@0/withdraw", {"json": {"rationale": "x"}}),
    "clearances.read": ("GET", "/v1/clearances", {}),
    "clearances.propose": ("POST", "/v1/clearances", {"json": {"trace_id": "x"}}),
    "clearances.approve": ("POST", "/v1/clearances/00001/approve", {"json": {"rationale": "x"}}),
    "clearances.revoke": ("POST", "/v1/clearances/00001/revoke", {"json": {"rationale": "x"}}),
    "metrics": ("GET", "/metrics", {}),
    "healthz": ("GET", "/healthz", {}),
}


def test_the_matrix_names_every_route_of_the_app(tmp_path: Path) -> None:
    assert set(OPERATIONS) == set(ACCESS)
    app = create_app(Settings(db=f"sqlite:///{tmp_path / 'x.db'}"))
    routes = {(m.upper(), path) for path, ops in app.openapi()["paths"].items() for m in ops}
    tested = {(m, re.sub(r"/[^/]*@0|/0000[0-9a-f-]+", "/{x}", p.split("?")[0]))
              for m, p, _ in OPERATIONS.values()}
    normalised = {(m, re.sub(r"\{[a-z_0-9]+\}", "{x}", p)) for m, p in routes}
    same_operation = {("GET", "/v1/rulesets/{x}"),  # rulesets.list
                      ("GET", "/v1/traces/refusals"),  # traces.query
                      ("POST", "/v1/alerts/actions"),  # alerts.act (bulk)
                      ("POST", "/v1/cases/{x}/reports/draft"), ("POST", "/v1/cases/{x}/reports"),  # cases.act
                      ("GET", "/v1/cases/{x}/reports"), ("GET", "/v1/cases/{x}/reports/{x}"),  # cases.get
                      ("GET", "/v1/performance/models"),  # performance.read
                      ("GET", "/v1/lists/{x}/history"), ("GET", "/v1/lists/{x}/diff")}  # lists.read
    untested = normalised - tested - same_operation
    assert not untested, f"routes missing from the role matrix test: {sorted(untested)}"


@pytest.mark.parametrize("role", ROLES)
def test_each_role_reaches_exactly_its_operations(server: Server, role: str) -> None:
    with server.client(role) as c:
        for op, (method, path, kw) in OPERATIONS.items():
            r = c.request(method, path, **kw)
            allowed = not ACCESS[op] or role in ACCESS[op]
            if allowed:
                assert r.status_code not in (401, 403), (role, op, r.status_code, r.text)
            else:
                assert r.status_code == 403, (role, op, r.status_code, r.text)
                body = r.json()
                assert r.headers["content-type"] == "application/problem+json"
                assert body["type"] == "urn:sealtrail:problem:forbidden" and op in body["detail"]


# -- decisions over TLS -----------------------------------------------------------------------


def test_a_decision_records_the_callers_certificate(server: Server) -> None:
    tx = transactions(1, seed=11)[0]
    with server.client("scorer") as c:
        r = c.post("/v1/decisions", content=tx, headers={**JSON, "X-Priority": "P0"})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["decision"] in ("ALLOW", "REVIEW", "HOLD", "BLOCK")
    with server.client("officer") as c:
        t = c.get(f"/v1/traces/{d['trace_id']}").json()
    principal = t["record"]["record"]["principal"]
    assert principal["fingerprint_sha256"] == fingerprint(server.certs / "scorer.pem")
    assert principal["subject"] == "CN=sealtrail-scorer,O=sealtrail dev"
    assert t["seq"] == d["ledger"]["seq"] and t["leaf_hash"] == d["ledger"]["leaf_hash"]
    # the sealed bytes hash to the leaf the caller was given, and the payload is the body sent
    import base64
    raw = base64.b64decode(t["record_bytes"])
    assert hashlib.sha256(b"\x00" + raw).hexdigest() == d["ledger"]["leaf_hash"]
    assert t["payload"]["state"] == "present" and t["payload"]["data"].encode() == tx
    assert t["proof"]["index"] == d["ledger"]["seq"] and t["proof"]["checkpoint"].count("\n") >= 4


def test_admin_sees_the_record_but_not_the_payment_data(server: Server) -> None:
    with server.client("scorer") as c:
        d = c.post("/v1/decisions", content=transactions(1, seed=12)[0],
                   headers=JSON).json()
    with server.client("admin") as c:
        t = c.get(f"/v1/traces/{d['trace_id']}").json()
    assert t["payload"]["state"] == "withheld" and "data" not in t["payload"]


def test_batch_endpoint_decides_each_and_seals_each_payload_apart(server: Server) -> None:
    txs = transactions(25, seed=13)
    body = b"[" + b",".join(txs) + b"]"
    with server.client("scorer") as c:
        r = c.post("/v1/decisions/batch", content=body, headers=JSON)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["count"] == 25 and len({d["trace_id"] for d in out["decisions"]}) == 25
    seqs = [d["ledger"]["seq"] for d in out["decisions"]]
    assert seqs == sorted(seqs)


# -- bad input: refused whole, nothing decided -----------------------------------------------------


def _size(server: Server) -> int:
    with server.client("admin") as c:
        return int(c.get("/healthz").json()["ledger_size"])


@pytest.mark.parametrize(("content", "ctype", "headers", "status", "field"), [
    (b'{"amount": "1"}', "application/json", {}, 422, None),
    (b"{not json", "application/json", {}, 422, None),
    (b"{1:F01BANKDEFFAXXX0000000000}{4:\r\n:20:X\r\n-}", "application/x-swift-fin", {}, 422, None),
    (b"<Document/>", "application/xml", {}, 422, None),
    (b"", "application/json", {}, 422, "body"),
    (b"{}", "text/csv", {}, 415, "Content-Type"),
    (None, "application/json", {"X-Priority": "P9"}, 422, "X-Priority"),
])
def test_bad_decision_requests_are_refused_naming_the_problem(
        server: Server, content: bytes | None, ctype: str, headers: dict[str, str], status: int,
        field: str | None) -> None:
    before = _size(server)
    body = transactions(1, seed=14)[0] if content is None else content
    with server.client("scorer") as c:
        r = c.post("/v1/decisions", content=body, headers={"content-type": ctype, **headers})
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["status"] == status and problem["detail"]
    if field is not None:
        assert any(e["field"] == field for e in problem["errors"]), problem
    # nothing decided; every refusal of a scorer is sealed (its refusal record and the summary that
    # speaks for it, one commit) and named in the answer
    assert "trace_id" in problem, problem
    assert _size(server) == before + 2


def test_a_batch_with_one_bad_transaction_is_refused_whole(server: Server) -> None:
    txs = transactions(5, seed=15)
    bad = orjson.loads(txs[3])
    bad["currency"] = "XXZ"
    body = orjson.dumps([*map(orjson.loads, txs[:3]), bad, orjson.loads(txs[4])])
    before = _size(server)
    with server.client("scorer") as c:
        r = c.post("/v1/decisions/batch", content=body, headers=JSON)
    assert r.status_code == 422, r.text
    fields = [e["field"] for e in r.json()["errors"]]
    assert len(fields) == 1 and fields[0].startswith("[3]"), fields
    assert _size(server) == before + 2 and r.json()["trace_id"]  # the refusal and its summary alone


def test_more_than_ten_thousand_in_a_batch_is_refused(server: Server) -> None:
    one = orjson.loads(transactions(1, seed=16)[0])
    with server.client("scorer") as c:
        r = c.post("/v1/decisions/batch", content=orjson.dumps([one] * 10_001),
                   headers=JSON)
    assert r.status_code == 413 and r.json()["type"].endswith("batch_too_large")


def test_bad_trace_queries_name_the_field(server: Server) -> None:
    with server.client("officer") as c:
        assert c.get("/v1/traces?decision=MAYBE").json()["errors"][0]["field"] == "decision"
        assert c.get("/v1/traces?cursor=garbage").json()["errors"][0]["field"] == "cursor"
        r = c.get("/v1/traces?score_min=2")
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "score_min"
        assert c.get("/v1/traces/not-a-uuid").json()["errors"][0]["field"] == "trace_id"
        assert c.get("/v1/traces/00000000-0000-7000-8000-000000000000").status_code == 404


# -- governance: four eyes, atomic switch --------------------------------------------------------


def test_propose_approve_activate_with_two_principals_and_scoring_switches(server: Server) -> None:
    source = PACK.read_text().replace(f'version = "{SHIPPED_VERSION}"', 'version = "2026.12.99-test"')
    with server.client("officer") as officer, server.client("approver") as approver, \
            server.client("admin") as admin, server.client("dual") as dual, server.client("scorer") as scorer:
        r = officer.post("/v1/rulesets", content=source.encode(), headers=TOML)
        assert r.status_code == 201, r.text
        proposed = r.json()
        rid, sha = proposed["id"], proposed["module_sha256"]
        assert rid == "aml_core@2026.12.99-test" and proposed["status"] == "proposed"
        # not approved yet: activation refused, scoring unchanged
        assert admin.post(f"/v1/rulesets/{rid}/activate").status_code == 409
        r = approver.post(f"/v1/rulesets/{rid}/approve", json={"module_sha256": sha})
        assert r.status_code == 200 and r.json()["status"] == "approved"
        assert approver.post(f"/v1/rulesets/{rid}/approve").status_code == 409  # only once
        r = admin.post(f"/v1/rulesets/{rid}/activate")
        assert r.status_code == 200 and r.json()["status"] == "active"
        d = scorer.post("/v1/decisions", content=transactions(1, seed=17)[0],
                        headers=JSON).json()
        t = officer.get(f"/v1/traces/{d['trace_id']}").json()
        assert t["record"]["record"]["rules"]["module_sha256"] == sha
        listed = {v["id"]: v for v in officer.get("/v1/rulesets").json()["rulesets"]}
        assert listed[rid]["status"] == "active"
        assert listed[f"aml_core@{SHIPPED_VERSION}"]["status"] == "retired"
        # four eyes: a principal holding both roles still cannot approve its own proposal
        own = source.replace("2026.12.99-test", "2026.12.98-test")
        assert dual.post("/v1/rulesets", content=own.encode(),
                         headers=TOML).status_code == 201
        r = dual.post("/v1/rulesets/aml_core@2026.12.98-test/approve")
        assert r.status_code == 403 and r.json()["type"].endswith("four_eyes"), r.text


def test_a_ruleset_that_does_not_compile_is_refused_and_nothing_is_recorded(server: Server) -> None:
    before = _size(server)
    bad = PACK.read_text().replace(f'version = "{SHIPPED_VERSION}"', 'version = "2026.12.97-test"').replace(
        "amount_usd >=", "amount_usd >>=", 1)
    with server.client("officer") as c:
        r = c.post("/v1/rulesets", content=bad.encode(), headers=TOML)
    assert r.status_code == 422, r.text
    problem = r.json()
    assert problem["type"].endswith("ruleset_refused") and problem["errors"][0]["field"].startswith("source")
    assert _size(server) == before


# -- the ledger endpoints ---------------------------------------------------------------------------


def test_checkpoint_and_consistency_and_verify(server: Server) -> None:
    with server.client("regulator") as c:
        note = c.get("/v1/ledger/checkpoint")
        assert note.status_code == 200 and note.headers["content-type"].startswith("text/plain")
        size = int(note.text.split("\n")[1])
        cons = c.get(f"/v1/ledger/consistency?old=1&new={size}")
        assert cons.status_code == 200 and cons.json()["new_size"] == size
        assert c.get(f"/v1/ledger/consistency?old={size}&new=1").status_code == 422
    with server.client("officer") as c:
        v = c.post("/v1/ledger/verify").json()
    assert v["verified"] is True and v["size"] >= size


def test_openapi_documents_every_operation(server: Server) -> None:
    with server.client("officer") as c:
        spec = c.get("/openapi.json").json()
    assert {"/v1/decisions", "/v1/decisions/batch", "/v1/traces", "/v1/traces/{trace_id}",
            "/v1/traces/{trace_id}/annotations", "/v1/ledger/checkpoint", "/v1/ledger/consistency",
            "/v1/ledger/verify", "/v1/rulesets", "/v1/rulesets/{ruleset}/approve",
            "/v1/rulesets/{ruleset}/activate", "/v1/models", "/healthz", "/metrics"} <= set(spec["paths"])
    post = spec["paths"]["/v1/decisions"]["post"]
    types = set(post["requestBody"]["content"])
    assert {"application/json", "application/x-swift-fin", "application/xml"} <= types
