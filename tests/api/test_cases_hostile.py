"""A hostile look at the alert, case and report surfaces (in process, SQLite): tipping-off (FATF R.21),
sealed reads, four-eyes, reports and their legal holds, and input handling.

Most tests here once proved a hole (each was fixed with its test); the others pin what held when it
was attacked.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from sqlalchemy import select
from starlette.testclient import TestClient

from api import ops
from api.app import create_app
from api.certs import ORGANISATION, DevPki, create_dev_pki, role_uri
from api.config import Settings
from audit.annotations import annotate
from audit.cases.policy import DeadlinePolicy
from audit.cases.service import set_policy
from audit.decide.principal import Principal
from audit.decide.runtime import Runtime
from ledger import store
from ledger.retention import current_holds
from tests.api.problem_doc import problem
from tests.api.test_fail_closed import JSON, _with_peer, txs
from tests.conftest import Db

EXAMPLE = Path(__file__).parents[2] / "docs" / "reporting-entity.example.toml"
FORM = {"content-type": "application/x-www-form-urlencoded"}
RATES = {"USD": "0.9215", "GBP": "1.1702", "CHF": "1.0480", "JPY": "0.0061"}
DRAFT = {"reason": "Transfers to a jurisdiction under a call for action.", "indicators": ["HRJUR"],
         "action": "Payments held.", "rates": RATES}
LOCAL = Principal(subject="CN=local:mlro", sans=(), issuer="", fingerprint_sha256="", serial="",
                  not_before="", not_after="")


# -- the desk: a fresh ledger behind the app, with hostile certificates beside the dev ones -----------


def _cert(pki: DevPki, names: list[tuple[x509.ObjectIdentifier, str]], role: str,
          key: ec.EllipticCurvePrivateKey | None = None) -> x509.Certificate:
    """A client certificate from the dev CA with the subject ``names`` (in this order), for ``role``,
    over ``key`` (a fresh one if none)."""
    ca_key = serialization.load_pem_private_key(pki.ca.key_path.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca = x509.load_pem_x509_certificate(pki.ca.cert_path.read_bytes())
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(o, v) for o, v in names]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(role_uri(role))]),
                           False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(ca_key, hashes.SHA256()))


@dataclass
class Desk:
    client: TestClient
    runtime: Runtime[Any]
    who: dict[str, dict[str, str]]  # caller -> {subject, fingerprint_sha256}

    def get(self, caller: str, path: str, headers: dict[str, str] | None = None, **params: Any) -> Any:
        return self.client.get(path, params=params, headers={"x-test-role": caller, **(headers or {})},
                               follow_redirects=False)

    def post(self, caller: str, path: str, body: Any, **headers: str) -> Any:
        return self.client.post(path, json=body, headers={"x-test-role": caller, **headers})

    def form(self, caller: str, path: str, data: dict[str, str], **headers: str) -> Any:
        return self.client.post(path, content=urlencode(data), follow_redirects=False,
                                headers={**FORM, "x-test-role": caller, **headers})

    def act(self, caller: str, seq: int, **body: Any) -> Any:
        return self.post(caller, f"/v1/alerts/{seq}/actions", body)

    def entries(self) -> int:
        with self.runtime.engine.connect() as conn:
            return store.tail(conn)[0]

    def kinds_since(self, seq: int) -> list[str]:
        e = store.entries
        with self.runtime.engine.connect() as conn:
            return [str(k) for k in conn.execute(select(e.c.kind).where(e.c.seq >= seq).order_by(e.c.seq))
                    .scalars()]

    def reads_of(self, case_id: int) -> int:
        """How many sealed ``case_read`` records name ``case_id``."""
        e = store.entries
        n = 0
        with self.runtime.engine.connect() as conn:
            for rec in conn.execute(select(e.c.record).where(e.c.kind == "case_read")).scalars():
                n += any(r.get("case") == case_id for r in orjson.loads(rec)["record"]["reads"])
        return n

    def trace_ids(self, kind: str) -> list[str]:
        e = store.entries
        with self.runtime.engine.connect() as conn:
            return [str(t) for t in conn.execute(select(e.c.trace_id).where(e.c.kind == kind)
                                                 .order_by(e.c.seq)).scalars()]

    def alerts(self) -> list[dict[str, Any]]:
        r = self.get("officer", "/v1/alerts", view="all", limit=500)
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items

    def quiet_case(self) -> int:
        """A case none of whose alerts holds a payment (it can be closed whole)."""
        every = self.alerts()
        return next(int(c) for c in sorted({a["case_id"] for a in every})
                    if all(a["payment"] is None for a in every if a["case_id"] == c))


@contextmanager
def desk_over(tmp_path: Path, *, policy: DeadlinePolicy | None = None, n: int = 300) -> Iterator[Desk]:
    db = Db(f"sqlite:///{tmp_path / 'ledger.db'}", "sqlite")
    pki = create_dev_pki(tmp_path / "certs")
    s = Settings.model_validate({"db": db.url, "keys": tmp_path / "keys", "roles_file": pki.roles_file,
                                 "decision_timeout_ms": 2000, "reporting_entity": EXAMPLE,
                                 "exports_dir": tmp_path / "exports"})
    store.connect(db.url, create_file=True).dispose()
    ops.initialise(s)
    rt = Runtime.open(s)
    certs = {r: x509.load_pem_x509_certificate(c.cert_path.read_bytes()) for r, c in pki.clients.items()}
    cn, o = NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME
    certs["officer2"] = _cert(pki, [(o, ORGANISATION), (cn, "sealtrail-officer-2")], "officer")
    # the officer again under another certificate: its subject DN in other case, spacing and order
    certs["twin"] = _cert(pki, [(cn, "SEALTRAIL-OFFICER"), (o, "Sealtrail  Dev ")], "officer")
    # the officer's own key under another name
    officer_key = serialization.load_pem_private_key(pki.clients["officer"].key_path.read_bytes(), None)
    assert isinstance(officer_key, ec.EllipticCurvePrivateKey)
    certs["samekey"] = _cert(pki, [(o, ORGANISATION), (cn, "someone else")], "officer", officer_key)
    certs["scorer2"] = _cert(pki, [(o, ORGANISATION), (cn, "sealtrail-scorer-2")], "scorer")
    ders = {k: c.public_bytes(Encoding.DER) for k, c in certs.items()}
    who = {k: {"subject": c.subject.rfc4514_string(),
               "fingerprint_sha256": c.fingerprint(hashes.SHA256()).hex()} for k, c in certs.items()}
    try:
        with TestClient(_with_peer(create_app(s, runtime=rt), ders)) as client:
            d = Desk(client, rt, who)
            if policy is not None:
                set_policy(rt.ledger, policy, LOCAL, "hostile test policy")
            r = client.post("/v1/decisions/batch", content=b"[" + b",".join(txs(n, seed=21)) + b"]",
                            headers={**JSON, "x-test-role": "scorer"})
            assert r.status_code == 200, r.text
            yield d
    finally:
        rt.close()


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    with desk_over(tmp_path) as d:
        yield d


def _file_report(d: Desk, case: int) -> tuple[bytes, str]:
    r = d.post("officer", f"/v1/cases/{case}/reports/draft", DRAFT)
    assert r.status_code == 200, r.text
    filed = d.post("officer", f"/v1/cases/{case}/reports", {"xml": r.content.decode(),
                                                             "rationale": "MLRO ok."})
    assert filed.status_code == 201, filed.text
    return r.content, str(filed.json()["report_sha256"])


# -- sealed reads: every answer that shows case content is a sealed case_read first -----------------


def test_drafting_a_report_is_a_sealed_read_of_the_case(desk: Desk) -> None:
    case = desk.quiet_case()
    before = desk.reads_of(case)
    r = desk.post("officer2", f"/v1/cases/{case}/reports/draft", DRAFT)
    assert r.status_code == 200, r.text
    assert b"<transactionnumber>" in r.content  # the case's payments, laid out for the FIU
    assert desk.reads_of(case) == before + 1


def test_a_refused_draft_does_not_name_the_report_in_force_unrecorded(desk: Desk) -> None:
    case = desk.quiet_case()
    _, sha = _file_report(desk, case)
    before = desk.reads_of(case)
    body = problem(desk.post("officer2", f"/v1/cases/{case}/reports/draft", DRAFT), 409, "case_conflict",
                   "amends")
    assert sha not in body["detail"] or desk.reads_of(case) == before + 1


def test_downloading_a_case_bundle_is_a_sealed_read_of_the_case(desk: Desk) -> None:
    case = desk.quiet_case()
    _file_report(desk, case)
    a = next(x for x in desk.alerts() if x["case_id"] == case)
    assert desk.act("officer", a["seq"], action="comment", rationale="the customer's brother is a PEP")\
        .status_code == 201
    cut = desk.post("officer", "/v1/exports", {"case_id": case})
    assert cut.status_code == 201, cut.text
    before = desk.reads_of(case)
    r = desk.get("officer2", f"/v1/exports/{cut.json()['bundle_id']}")  # another officer, from the list
    assert r.status_code == 200
    bundle = zipfile.ZipFile(io.BytesIO(r.content))
    blob = b"".join(bundle.read(n) for n in bundle.namelist())
    assert b"the customer's brother is a PEP" in blob and b"<entity_reference>case-" in blob
    assert desk.reads_of(case) == before + 1


def test_reading_a_filed_report_through_its_trace_is_a_sealed_read(desk: Desk) -> None:
    case = desk.quiet_case()
    r = desk.post("officer", f"/v1/cases/{case}/reports/draft", DRAFT)
    filed = desk.post("officer", f"/v1/cases/{case}/reports", {"xml": r.content.decode(), "rationale": "ok"})
    assert filed.status_code == 201, filed.text
    before = desk.reads_of(case)
    t = desk.get("officer2", f"/v1/traces/{filed.json()['trace_id']}")  # the id is in the receipt, a bundle
    assert t.status_code == 200 and t.json()["payload"]["data"] == r.content.decode()
    assert desk.reads_of(case) == before + 1


def test_an_action_answer_showing_the_case_is_a_sealed_read(desk: Desk) -> None:
    a = desk.alerts()[0]
    case = a["case_id"]
    before = desk.reads_of(case)
    r = desk.act("officer2", a["seq"], action="comment", rationale="looking")
    assert r.status_code == 201 and r.json()["alert"]["case_id"] == case
    r = desk.post("officer2", f"/v1/cases/{case}/actions", {"action": "comment", "rationale": "looking"})
    assert r.status_code == 201 and "last_report_sha256" in r.json()["case"]
    assert desk.reads_of(case) == before + 2


@pytest.mark.parametrize("path", ["/v1/cases/{case}", "/console/cases/{case}"])
def test_a_cross_site_read_is_not_sealed_in_the_officers_name(desk: Desk, path: str) -> None:
    case = desk.alerts()[0]["case_id"]
    before = desk.reads_of(case)
    r = desk.get("officer", path.format(case=case), headers={
        "sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image",
        "origin": "https://evil.example"})
    assert r.status_code == 403
    assert desk.reads_of(case) == before


def test_refused_reads_seal_nothing_and_scorers_and_admins_read_no_report_or_bundle(desk: Desk) -> None:
    case = desk.quiet_case()
    _, sha = _file_report(desk, case)
    cut = desk.post("officer", "/v1/exports", {"case_id": case}).json()["bundle_id"]
    size = desk.entries()
    for role in ("scorer", "scorer2", "admin", "approver"):
        for path in (f"/v1/cases/{case}/reports", f"/v1/cases/{case}/reports/{sha}", "/v1/exports",
                     f"/v1/exports/{cut}", f"/v1/cases/{case}", "/v1/case-reads"):
            body = problem(desk.get(role, path), 403, "forbidden")
            assert sha not in body["detail"] and f"case {case}" not in body["detail"]
    for path in (f"/v1/cases/{case}/reports/{'ab' * 32}", f"/v1/cases/{case}/reports/..%2f..%2fetc%2fpasswd",
                 f"/v1/cases/{case}/reports/{sha.upper()}", "/v1/cases/999999999/reports",
                 f"/v1/cases/{2**64}", "/v1/alerts/999999999", f"/v1/alerts/{2**63}", "/v1/alerts/-1",
                 "/v1/alerts/%EF%BC%91", f"/v1/cases/{case}/reports/{sha}%00"):
        r = desk.get("officer", path)
        assert r.status_code in (404, 422), (path, r.status_code, r.text)
    assert desk.entries() == size


# -- tipping-off: what an admin or a scorer may infer ------------------------------------------------


@pytest.mark.parametrize("kind", ["ledger.legal_hold", "export.created"])
def test_an_admin_does_not_read_records_that_state_case_work(desk: Desk, kind: str) -> None:
    case = desk.quiet_case()
    _file_report(desk, case)
    assert desk.post("officer", "/v1/exports", {"case_id": case}).status_code == 201
    tids = desk.trace_ids(kind)
    assert tids
    for tid in tids:
        said = desk.get("officer", f"/v1/traces/{tid}").json()["record"]["record"]
        assert f"case {case}" in str(said.get("reason")) or said.get("case", {}).get("case_id") == case
        for path in (f"/v1/traces/{tid}", f"/console/decisions/{tid}"):
            r = desk.get("admin", path)
            assert r.status_code == 403, (path, r.status_code)  # as for a case_event: case state


def test_an_admin_cannot_tell_an_annotated_decision_from_another(desk: Desk) -> None:
    a, b = desk.alerts()[:2]
    officer = Principal(subject="CN=Officer,O=Example Bank", sans=(), issuer="CN=CA",
                        fingerprint_sha256="a1" * 32, serial="1", not_before="2026-01-01T00:00:00Z",
                        not_after="2027-01-01T00:00:00Z")
    annotate(desk.runtime.ledger, a["trace_id"], officer, "STR_FILED", "report sent to the FIU")
    worked = desk.get("admin", f"/v1/traces/{a['trace_id']}").json()
    untouched = desk.get("admin", f"/v1/traces/{b['trace_id']}").json()
    assert worked["annotations"] == untouched["annotations"] == []
    assert worked["annotations_withheld"] == untouched["annotations_withheld"]
    pages = [desk.get("admin", f"/console/decisions/{x['trace_id']}").text for x in (a, b)]
    assert ('id="annotations-withheld"' in pages[0]) == ('id="annotations-withheld"' in pages[1])


# -- four-eyes -------------------------------------------------------------------------------------


def test_the_proposer_of_a_case_false_positive_does_not_review_it(tmp_path: Path) -> None:
    with desk_over(tmp_path, policy=DeadlinePolicy(version="qa-and-four-eyes", qa_sample_permille=1000,
                                                   four_eyes_false_positive=True)) as d:
        case = d.quiet_case()
        r = d.post("officer", f"/v1/cases/{case}/actions",
                   {"action": "close", "disposition": "FALSE_POSITIVE", "rationale": "payroll run"})
        assert r.status_code == 201 and r.json()["case"]["pending"] == "close:FALSE_POSITIVE", r.text
        problem(d.post("officer", f"/v1/cases/{case}/actions", {"action": "approve"}), 403, "four_eyes")
        assert d.post("officer2", f"/v1/cases/{case}/actions", {"action": "approve"}).status_code == 201
        alert = d.get("officer", f"/v1/cases/{case}").json()["alerts"][0]
        assert (alert["state"], alert["qa"]) == ("closed", "due")
        size = d.entries()
        r = d.act("officer", alert["seq"], action="qa_review", verdict="AGREE", rationale="looks right to me")
        assert d.entries() == size, "the proposer reviewed its own false positive"
        problem(r, 403, "four_eyes", "principal")
        assert {x["fingerprint_sha256"] for x in alert["closed_by"]} == {
            d.who["officer"]["fingerprint_sha256"], d.who["officer2"]["fingerprint_sha256"]}


def test_the_proposer_under_another_certificate_cannot_approve_a_block_release(desk: Desk) -> None:
    block = next(a for a in desk.alerts() if a["outcome"] == "BLOCK")
    assert desk.act("officer", block["seq"], action="release", rationale="namesake").status_code == 201
    size = desk.entries()
    for other in ("officer", "twin", "samekey"):  # the same certificate, subject DN, or public key
        problem(desk.act(other, block["seq"], action="approve"), 403, "four_eyes", "principal")
        problem(desk.post(other, f"/v1/cases/{block['case_id']}/actions", {"action": "approve"}), 409,
                "case_conflict")  # the case holds no proposal: the alert's is not approved there
        problem(desk.post(other, "/v1/alerts/actions", {"alerts": [block["seq"]], "action": "approve"}), 422,
                "invalid_request", "action")
    assert desk.entries() == size
    for other in ("twin", "samekey"):  # nor through the console's form (its refusal page is a read)
        r = desk.form(other, f"/console/cases/{block['case_id']}/act",
                      {"alert": str(block["seq"]), "action": "approve", "form": "x"})
        assert r.status_code == 403, r.text
    assert set(desk.kinds_since(size)) == {"case_read"}
    assert desk.get("scorer", "/v1/outcomes").json()["items"] == []
    r = desk.act("officer2", block["seq"], action="approve")
    assert r.status_code == 201 and r.json()["alert"]["payment"] == "RELEASED", r.text
    assert [o["alert_seq"] for o in desk.get("scorer", "/v1/outcomes").json()["items"]] == [block["seq"]]
    assert desk.get("scorer2", "/v1/outcomes", after=0, limit=500).json()["items"] == []


def test_the_closer_under_another_certificate_reviews_no_closure_nor_approves_a_case(tmp_path: Path) -> None:
    with desk_over(tmp_path, policy=DeadlinePolicy(version="qa-and-four-eyes", qa_sample_permille=1000,
                                                   four_eyes_false_positive=True)) as d:
        every = d.alerts()
        quiet = [a for a in every if a["payment"] is None]
        one = quiet[0]
        r = d.act("officer", one["seq"], action="close", disposition="NO_FURTHER_ACTION",
                  rationale="explained")
        assert r.status_code == 201 and r.json()["alert"]["qa"] == "due", r.text
        case = next(c for c in sorted({a["case_id"] for a in every}) if c != one["case_id"] and all(
            a["payment"] is None for a in every if a["case_id"] == c))
        assert d.post("officer", f"/v1/cases/{case}/actions",
                      {"action": "close", "disposition": "FALSE_POSITIVE", "rationale": "payroll"}
                      ).status_code == 201
        size = d.entries()
        for other in ("officer", "twin", "samekey"):
            problem(d.act(other, one["seq"], action="qa_review", verdict="AGREE", rationale="fine"), 403,
                    "four_eyes", "principal")
            problem(d.post(other, f"/v1/cases/{case}/actions", {"action": "approve"}), 403, "four_eyes",
                    "principal")
        assert d.entries() == size
        assert d.act("officer2", one["seq"], action="qa_review", verdict="DISAGREE",
                     rationale="source of funds unverified").status_code == 201


# -- reports ---------------------------------------------------------------------------------------


def test_a_report_carries_only_its_own_cases_transactions(desk: Desk) -> None:
    every = desk.alerts()
    mine, other = sorted({a["case_id"] for a in every})[:2]
    drafted = desk.post("officer", f"/v1/cases/{other}/reports/draft", DRAFT).content
    theirs = re.findall(rb"<transactionnumber>(.*?)</transactionnumber>", drafted)
    assert theirs and {t.decode() for t in theirs} <= {a["trace_id"] for a in every if a["case_id"] == other}
    forged = drafted.replace(f"<entity_reference>case-{other}</entity_reference>".encode(),
                             f"<entity_reference>case-{mine}</entity_reference>".encode())
    size = desk.entries()
    r = desk.post("officer", f"/v1/cases/{mine}/reports", {"xml": forged.decode(), "rationale": "filed"})
    assert desk.entries() == size, f"filed on case {mine}: {r.text}"
    problem(r, 422, "report_invalid")


def test_hostile_documents_are_refused_before_anything_is_sealed(desk: Desk) -> None:
    case = desk.quiet_case()
    drafted = desk.post("officer", f"/v1/cases/{case}/reports/draft", DRAFT).content.decode()
    body = drafted.split("?>", 1)[1]
    bombs = {
        "entities": '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;'
                    '&a;&a;&a;">]>' + body.replace("Payments held.", "&b;"),
        "external": '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                    + body.replace("Payments held.", "&x;"),
        "xinclude": body.replace("<action>", '<action><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" '
                                             'href="file:///etc/passwd"/>'),
        "utf16": '<?xml version="1.0" encoding="UTF-16"?>' + body,
        "other case": drafted.replace(f"case-{case}<", "case-1<"),
        "amends nothing": drafted,  # filed below with amends naming a report that is not in force
    }
    size = desk.entries()
    for name, xml in bombs.items():
        extra = {"amends": "ab" * 32} if name == "amends nothing" else {}
        r = desk.post("officer", f"/v1/cases/{case}/reports", {"xml": xml, "rationale": "x", **extra})
        assert r.status_code in (409, 422), (name, r.status_code, r.text)
        assert "root:" not in r.text, name
    r = desk.post("officer", f"/v1/cases/{case}/reports", {"xml": "<r>" + "a" * 300_000 + "</r>",
                                                            "rationale": "x"})
    problem(r, 413, "too_large")
    assert desk.entries() == size and current_holds(desk.runtime.engine) == []


# -- input handling --------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["alert", "link", "bulk"])
def test_the_consoles_forms_refuse_a_digit_int_cannot_read(desk: Desk, form: str) -> None:
    a = desk.alerts()[0]
    size = desk.entries()
    if form == "alert":
        r = desk.form("officer", f"/console/cases/{a['case_id']}/act", {"alert": "²", "action": "assign"})
    elif form == "link":
        r = desk.form("officer", f"/console/cases/{a['case_id']}/act",
                      {"action": "link", "link": "²", "rationale": "same network"})
    else:
        r = desk.form("officer", "/console/alerts/assign", {"alert-²": "on"})
    assert r.status_code == 422, r.status_code
    assert "case_event" not in desk.kinds_since(size)


@pytest.mark.parametrize("subject", ["CN=\u202eSEALTRAIL-OFFICER-2,O=sealtrail dev", "CN=a\\00b",
                                     "CN=officer\nO=sealtrail dev"])
def test_an_assignee_subject_holds_no_control_or_bidi_character(desk: Desk, subject: str) -> None:
    a = desk.alerts()[0]
    size = desk.entries()
    r = desk.act("officer", a["seq"], action="assign",
                 assignee={"subject": subject, "fingerprint_sha256": "ab" * 32})
    assert desk.entries() == size, f"sealed as assignee: {r.json()['alert']['assignee']!r}"
    problem(r, 422, "invalid_request", "assignee")


@pytest.mark.parametrize("rationale", ["\u200b", "\ufeff\u200b\u2060"])
def test_a_rationale_says_something(desk: Desk, rationale: str) -> None:
    held = next(a for a in desk.alerts() if a["outcome"] == "HOLD")
    size = desk.entries()
    r = desk.act("officer", held["seq"], action="release", rationale=rationale)
    assert desk.entries() == size, "a HOLD was released with an invisible rationale"
    problem(r, 422, "invalid_request", "rationale")


def test_cross_site_state_changes_are_refused_and_seal_nothing(desk: Desk) -> None:
    a = next(x for x in desk.alerts() if x["outcome"] == "HOLD")
    size = desk.entries()
    hostile = [{"origin": "https://evil.example"}, {"origin": "null"}, {"sec-fetch-site": "same-site"},
               {"sec-fetch-site": "cross-site", "origin": "https://testserver"}]
    for headers in hostile:
        r = desk.client.post(f"/v1/alerts/{a['seq']}/actions",
                             content=b'{"action": "release", "rationale": "x"}',
                             headers={"content-type": "text/plain", "x-test-role": "officer", **headers})
        problem(r, 403, "cross_site")
        r = desk.form("officer", f"/console/cases/{a['case_id']}/act",
                      {"alert": str(a["seq"]), "action": "release", "rationale": "x"}, **headers)
        assert r.status_code == 403, r.text
        r = desk.form("officer", "/console/alerts/assign", {f"alert-{a['seq']}": "on"}, **headers)
        assert r.status_code == 403, r.text
    assert desk.entries() == size


def test_bodies_that_bend_the_schema_are_refused_and_seal_nothing(desk: Desk) -> None:
    a = desk.alerts()[0]
    seqs = [x["seq"] for x in desk.alerts()]
    size = desk.entries()
    on_alert, on_case, bulk = f"/v1/alerts/{a['seq']}/actions", f"/v1/cases/{a['case_id']}/actions", \
        "/v1/alerts/actions"
    raw: list[tuple[str, bytes]] = [
        (on_alert, b'{"action": "comment", "rationale": "x", "principal": {}}'),
        (on_alert, b'{"action": "comment", "rationale": "\\ud800"}'),
        (on_alert, b'{"action": "assign", "assignee": "me", "assignee": "you"}'),
        (on_alert, b'{"action": "comment", "rationale": "' + b"x" * 10_001 + b'"}'),
        (on_alert, b'[{"action": "comment", "rationale": "x"}]'),
        (on_case, b'{"action": "link", "link": 9223372036854775808, "rationale": "x"}'),
        (on_case, b'{"action": "link", "link": "1", "rationale": "x"}'),
        (on_case, b'{"action": "link", "link": 1.0, "rationale": "x"}'),
        (bulk, orjson.dumps({"alerts": seqs[:1] * 2, "action": "assign", "assignee": "me"})),
        (bulk, orjson.dumps({"alerts": list(range(201)), "action": "assign", "assignee": "me"})),
        (bulk, orjson.dumps({"alerts": [True], "action": "assign", "assignee": "me"})),
        (bulk, b'{"alerts": [18446744073709551616], "action": "assign", "assignee": "me"}'),
        (bulk, orjson.dumps({"alerts": [a["seq"]], "action": "close", "assignee": "me",
                             "disposition": "NO_FURTHER_ACTION"})),
        (f"/v1/cases/{a['case_id']}/reports", b'{"xml": "<r/>", "rationale": "x", "xml": null}'),
    ]
    for path, body in raw:
        r = desk.client.post(path, content=body, headers={**JSON, "x-test-role": "officer"})
        assert r.status_code == 422, (path, body[:80], r.status_code, r.text)
    for method in ("PUT", "PATCH", "DELETE"):
        r = desk.client.request(method, f"/v1/alerts/{a['seq']}/actions", content=b"{}",
                                headers={**JSON, "x-test-role": "officer"})
        assert r.status_code == 405, (method, r.status_code)
    r = desk.client.post(f"/v1/alerts/{a['seq']}", content=b"{}", headers={
        **JSON, "x-test-role": "officer", "x-http-method-override": "GET"})
    assert r.status_code == 405
    assert desk.entries() == size
