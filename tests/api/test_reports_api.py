"""/v1/cases/{case_id}/reports over HTTP, in process, both databases: an officer drafts a case's goAML
STR and files it (sealed, under legal hold), amends the report in force and nothing else; a
regulator lists and downloads filed reports but neither drafts nor files; scorers and admins see
nothing; refused requests are problem+json naming the field and seal nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from api.routes.reports import DRAFT_EXAMPLE, FILE_EXAMPLE, DraftIn, FileIn
from audit.cases.store import catch_up
from audit.cases.tables import cases
from ledger import store
from ledger.retention import current_holds, purge_payloads, release_hold
from tests.api.problem_doc import problem
from tests.api.test_fail_closed import Served, in_process, txs
from tests.conftest import Db

EXAMPLE = Path(__file__).parents[2] / "docs" / "reporting-entity.example.toml"
RATES = {"USD": "0.9215", "GBP": "1.1702", "CHF": "1.0480", "JPY": "0.0061"}
BODY = {"reason": "Transfers to a jurisdiction under a call for action.", "indicators": ["HRJUR"],
        "action": "Payments held.", "rates": RATES}


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Served]:
    with in_process(db, tmp_path, reporting_entity=EXAMPLE) as (client, rt, s):
        served = Served(client, rt, s)
        served.batches(txs(300, seed=21))
        yield served


def call(d: Served, method: str, role: str, path: str, body: Any = None) -> Any:
    return d.client.request(method, path, json=body, headers={"x-test-role": role})


def a_case(d: Served) -> int:
    catch_up(d.runtime.engine)
    with d.runtime.engine.connect() as conn:
        return int(conn.execute(select(cases.c.case_id).where(cases.c.alerts >= 2).order_by(cases.c.case_id)
                                .limit(1)).scalar_one())


def reads(d: Served) -> int:
    with d.runtime.engine.connect() as conn:
        e = store.entries
        q = select(func.count()).select_from(e).where(e.c.kind == "case_read")
        return int(conn.execute(q).scalar_one())


def holds(d: Served) -> set[str]:
    return {h.hold_id for h in current_holds(d.runtime.engine)}


def test_an_officer_drafts_files_and_amends_a_report_and_a_regulator_reads_it(desk: Served) -> None:
    case = a_case(desk)
    base = f"/v1/cases/{case}/reports"
    r = call(desk, "POST", "officer", f"{base}/draft", BODY)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/xml"
    xml = r.content
    sha = hashlib.sha256(xml).hexdigest()
    assert r.headers["x-report-sha256"] == sha and b"<entity_reference>case-" in xml
    assert reads(desk) == 1  # drafting shows the case's payments: a sealed read of it
    size = desk.size()
    r = call(desk, "POST", "officer", base, {"xml": xml.decode(), "rationale": "Approved by the MLRO."})
    assert r.status_code == 201, r.text
    filed = r.json()
    assert r.headers["location"] == f"{base}/{sha}"
    assert (filed["report_sha256"], filed["amends"], filed["hold_id"], filed["seq"]) == (
        sha, None, f"case-{case}-{sha[:8]}", size + 1)
    assert holds(desk) == {filed["hold_id"], filed["report_hold_id"]}
    # a new version amends the one in force; one amending an older report is refused, sealing nothing
    amend = {**BODY, "amends": sha}
    v2 = call(desk, "POST", "officer", f"{base}/draft", {**amend, "reason": "Corrected narrative."}).content
    stale = call(desk, "POST", "officer", f"{base}/draft", {**amend, "reason": "Another view."}).content
    r = call(desk, "POST", "officer", base, {"xml_base64": base64.b64encode(v2).decode(), "amends": sha,
                                              "rationale": "Corrected."})
    assert r.status_code == 201, r.text
    sha2 = r.json()["report_sha256"]
    before, held = desk.size(), holds(desk)
    r = call(desk, "POST", "officer", base, {"xml": stale.decode(), "amends": sha, "rationale": "Late."})
    problem(r, 409, "case_conflict", "amends")
    problem(call(desk, "POST", "officer", f"{base}/draft", amend), 409, "case_conflict", "amends")
    assert desk.size() == before + 1 and holds(desk) == held  # the refused draft's read, and nothing else
    # both roles that read cases list and download; each read is sealed
    sealed = reads(desk)
    for role in ("officer", "regulator"):
        r = call(desk, "GET", role, base)
        assert r.status_code == 200, r.text
        items = r.json()["items"]
        assert [(i["sha256"], i["amends"], i["in_force"], i["held"]) for i in items] == [
            (sha, None, False, True), (sha2, sha, True, True)]
        assert items[0]["principal"]["subject"] and items[0]["rationale"] == "Approved by the MLRO."
        r = call(desk, "GET", role, f"{base}/{sha}")
        assert r.status_code == 200 and r.content == xml and r.headers["x-report-sha256"] == sha
        assert r.headers["content-type"] == "application/xml"
    assert reads(desk) == sealed + 4
    # once the holds are released and the bytes erased, the download is gone (410), the list stays
    for hold in (filed["report_hold_id"], filed["hold_id"]):
        release_hold(desk.runtime.ledger, hold, "court order 2031-4")
    purge_payloads(desk.runtime.ledger, [sha], "erasure order 2031-5")
    problem(call(desk, "GET", "regulator", f"{base}/{sha}"), 410, "report_purged")
    assert [i["held"] for i in call(desk, "GET", "regulator", base).json()["items"]] == [False, True]


@pytest.mark.requirement("BSA-1020.320-confidential")
def test_roles_scorers_and_admins_see_nothing_regulators_file_nothing(desk: Served) -> None:
    case = a_case(desk)
    base = f"/v1/cases/{case}/reports"
    xml = call(desk, "POST", "officer", f"{base}/draft", BODY).content
    file_body = {"xml": xml.decode(), "rationale": "Filed."}
    size = desk.size()
    for role in ("scorer", "admin", "regulator"):
        problem(call(desk, "POST", role, f"{base}/draft", BODY), 403, "forbidden")
        problem(call(desk, "POST", role, base, file_body), 403, "forbidden")
    assert desk.size() == size
    sha = call(desk, "POST", "officer", base, file_body).json()["report_sha256"]
    for role in ("scorer", "admin"):
        problem(call(desk, "GET", role, base), 403, "forbidden")
        problem(call(desk, "GET", role, f"{base}/{sha}"), 403, "forbidden")
    assert call(desk, "GET", "regulator", f"{base}/{sha}").content == xml


def test_refused_requests_are_problems_naming_the_field_and_seal_nothing(desk: Served) -> None:
    case = a_case(desk)
    base = f"/v1/cases/{case}/reports"
    xml = call(desk, "POST", "officer", f"{base}/draft", BODY).content
    size = desk.size() - reads(desk)  # what is sealed besides the reads a draft attempt records
    refusals: list[tuple[str, str, Any, int, str, str]] = [
        ("POST", f"{base}/draft", {**BODY, "reason": None}, 422, "invalid_request", "reason"),
        ("POST", f"{base}/draft", {**BODY, "indicators": []}, 422, "invalid_request", "indicators"),
        ("POST", f"{base}/draft", {**BODY, "colour": "red"}, 422, "invalid_request", "colour"),
        ("POST", f"{base}/draft", {**BODY, "rates": {"USD": "0.92e1"}}, 422, "invalid_request", "rates.USD"),
        ("POST", f"{base}/draft", {**BODY, "indicators": ["not a code"]}, 422, "report_invalid",
         "indicators[0]"),
        ("POST", "/v1/cases/999999999/reports/draft", BODY, 404, "not_found", "case_id"),
        ("POST", base, {"rationale": "x"}, 422, "invalid_request", "xml"),
        ("POST", base, {"xml": "<a/>", "xml_base64": "PGEvPg==", "rationale": "x"}, 422, "invalid_request",
         "xml"),
        ("POST", base, {"xml_base64": "not base64!", "rationale": "x"}, 422, "invalid_request", "xml_base64"),
        ("POST", base, {"xml": "<report>", "rationale": "x"}, 422, "report_invalid", "xml"),
        ("POST", base, {"xml": xml.decode().replace("<rentity_id>1234</rentity_id>", ""), "rationale": "x"},
         422, "report_invalid", "report/rentity_id"),
        ("POST", base, {"xml": xml.decode(), "rationale": ""}, 422, "invalid_request", "rationale"),
        ("POST", "/v1/cases/999999999/reports", {"xml": xml.decode(), "rationale": "x"}, 422,
         "report_invalid", "report/entity_reference"),
        ("GET", f"{base}/{'ab' * 32}", None, 404, "not_found", "report"),
        ("GET", f"{base}/NOT-A-SHA", None, 404, "not_found", "sha256"),
        ("GET", "/v1/cases/999999999/reports", None, 404, "not_found", "case_id"),
        ("GET", f"/v1/cases/{2**64}/reports", None, 422, "invalid_request", "case_id"),
        ("POST", "/v1/cases/-1/reports/draft", BODY, 422, "invalid_request", "case_id"),
    ]
    for method, path, body, status, kind, field in refusals:
        problem(call(desk, method, "officer", path, body), status, kind, field)
    assert desk.size() - reads(desk) == size and holds(desk) == set()
    # a foreign amount without a rate names the transaction
    r = call(desk, "POST", "officer", f"{base}/draft", {**BODY, "rates": {}})
    body = problem(r, 422, "report_invalid")
    assert body["errors"][0]["field"].endswith(".amount_local") and "invents none" in body["detail"]


def test_without_a_reporting_entity_drafting_names_the_setting(db: Db, tmp_path: Path) -> None:
    with in_process(db, tmp_path) as (client, rt, _):
        r = client.post("/v1/cases/0/reports/draft", json=BODY, headers={"x-test-role": "officer"})
        body = problem(r, 409, "reporting_entity_unconfigured", "SEALTRAIL_REPORTING_ENTITY")
        assert "SEALTRAIL_REPORTING_ENTITY" in body["detail"]
        bad = tmp_path / "entity.toml"
        bad.write_text(EXAMPLE.read_text("utf-8").replace('funds_code = "K"', ""), "utf-8")
        rt.settings.reporting_entity = bad  # the file is read per request: a fix needs no restart
        r = client.post("/v1/cases/0/reports/draft", json=BODY, headers={"x-test-role": "officer"})
        problem(r, 409, "reporting_entity_invalid", "SEALTRAIL_REPORTING_ENTITY:sealtrail.funds_code")


def test_the_documented_examples_are_accepted_by_their_models() -> None:
    DraftIn.model_validate(DRAFT_EXAMPLE)
    FileIn.model_validate(FILE_EXAMPLE)


# -- the command line -----------------------------------------------------------------------------


def test_the_cli_drafts_files_and_lists_a_cases_reports(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from api.cli import app

    runner = CliRunner()

    def run(*args: str, code: int = 0) -> dict[str, Any]:
        res = runner.invoke(app, [*args, "--json"])
        assert res.exit_code == code, (args, res.stdout, res.stderr)
        doc: dict[str, Any] = json.loads(res.stdout)
        assert doc["ok"] is (code == 0), doc
        return doc

    db = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    run("init", *db)
    payments = tmp_path / "payments.json"
    payments.write_bytes(b"[" + b",".join(txs(300, seed=21)) + b"]")
    run("score", str(payments), *db)
    engine = store.connect(db[1])
    try:
        catch_up(engine)
        with engine.connect() as conn:
            case = str(conn.execute(select(cases.c.case_id).where(cases.c.alerts >= 2)
                                    .order_by(cases.c.case_id).limit(1)).scalar_one())
    finally:
        engine.dispose()
    draft = ["reports", "draft", case, "--reason", "Transfers to a high-risk jurisdiction.", "--indicator",
             "HRJUR", *db]
    rates = [a for ccy, rate in RATES.items() for a in ("--rate", f"{ccy}={rate}")]
    doc = run(*draft, code=2)  # no reporting-entity file
    assert doc["error"] == "configuration" and doc["field"] == "SEALTRAIL_REPORTING_ENTITY"
    entity = ["--reporting-entity", str(EXAMPLE)]
    doc = run(*draft, *entity, code=1)  # a foreign amount and no --rate
    assert doc["error"] == "ReportError" and doc["field"].endswith(".amount_local")
    assert run(*draft, *entity, "--rate", "USD=ninety", code=2)["field"] == "--rate"
    out_file = tmp_path / "str.xml"
    doc = run(*draft, *entity, *rates, "--out", str(out_file))
    xml = out_file.read_bytes()
    assert doc["sha256"] == hashlib.sha256(xml).hexdigest() and len(doc["transactions"]) >= 2
    again_xml = run(*draft, *entity, *rates)["xml"].encode()  # with --json and no --out: in the object

    def undated(doc: bytes) -> bytes:
        return re.sub(rb"<submission_date>[^<]*</submission_date>", b"", doc)

    assert undated(again_xml) == undated(xml)  # the same draft but for the time it was made
    filed = run("reports", "file", case, str(out_file), "--rationale", "Approved by the MLRO.", *db)
    assert filed["report_sha256"] == doc["sha256"] and filed["hold_id"] == f"case-{case}-{doc['sha256'][:8]}"
    again = run("reports", "file", case, str(out_file), "--rationale", "Again.", *db, code=1)
    assert again["error"] == "CaseConflictError" and again["field"] == "--amends"
    (item,) = run("reports", "list", case, *db)["items"]
    assert (item["sha256"], item["in_force"], item["held"]) == (doc["sha256"], True, True)
    assert item["principal"]["subject"].startswith("CN=local:")
    assert run("reports", "list", "999999999", *db, code=1)["error"] == "CaseNotFoundError"
