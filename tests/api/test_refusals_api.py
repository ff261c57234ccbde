"""A screening request refused as unreadable leaves a sealed ``refusal`` record: the 422 (or 413)
names its ``trace_id``, the record holds the principal, the faults and the payload's hash, and the
refusal can be found again (``GET /v1/traces/refusals``, ``GET /v1/traces/{trace_id}``). Requests
refused before authentication or for their rate leave nothing. Both dialects."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from api.app import create_app
from audit.decide.refusal import REFUSAL_SCHEMA
from ledger.keys import load_signer
from ledger.verify import verify_ledger
from tests.api.test_fail_closed import JSON, Served, in_process, txs
from tests.conftest import Db

FIN = {"content-type": "application/x-swift-fin"}
XML = {"content-type": "application/xml"}
MT940 = (b"{1:F01BANKDEFFAXXX0000000000}{2:I940BANKGB2LXXXXN}{4:\r\n:20:STATEMENT1\r\n"
         b":25:12345678\r\n:28C:1/1\r\n:60F:C250101EUR1000,00\r\n:62F:C250101EUR1000,00\r\n-}")
NOT_WELL_FORMED = b"<Document xmlns='urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08'><FIToFICstmrCdtTrf>"



def entry(served: Served, trace_id: str) -> tuple[str, dict[str, Any]]:
    with served.runtime.engine.connect() as conn:
        kind, rec = conn.exec_driver_sql("SELECT kind, record FROM ledger_entries WHERE trace_id = "
                                         f"'{trace_id}'").one()
    return str(kind), orjson.loads(bytes(rec))


def unknown_currency() -> bytes:
    doc = orjson.loads(txs(1, seed=71)[0])
    doc["currency"] = "XYZ"
    return orjson.dumps(doc)


@pytest.mark.requirement("FATF-R20-str")
def test_a_refused_message_answers_422_with_the_trace_id_of_its_sealed_refusal(served: Served) -> None:
    bad = unknown_currency()
    size = served.size()
    r = served.post(bad)
    assert r.status_code == 422 and r.json()["type"].endswith("message_refused"), r.text
    tid = r.json()["trace_id"]
    assert served.size() == size + 2  # the refusal and the summary that speaks for it: nothing decided
    kind, env = entry(served, tid)
    body = env["record"]
    assert kind == "refusal" and body["schema"] == REFUSAL_SCHEMA
    assert env["payload_sha256"] == body["payload"]["sha256"] == hashlib.sha256(bad).hexdigest()
    assert body["principal"]["subject"].startswith("CN=") and body["principal"]["fingerprint_sha256"]
    assert body["request"] == {"via": "POST /v1/decisions", "format": "json", "batch": False,
                               "max_items": 10000, "idempotency_key": False}
    faults = body["refusal"]["faults"]
    assert body["refusal"]["fault_count"] == len(faults) == len(r.json()["errors"]) >= 1
    assert any("currency" in (f["field"] or "") for f in faults)
    assert "XYZ" not in orjson.dumps(body).decode()  # the quoted value is withheld from the body
    shown = served.client.get(f"/v1/traces/{tid}", headers={"x-test-role": "officer"}).json()
    assert shown["kind"] == "refusal" and shown["payload"]["state"] in ("present", "withheld")


def test_a_refused_batch_of_fin_messages_seals_one_refusal_naming_each(served: Served) -> None:
    mt103 = b"$".join([MT940, MT940, MT940])
    r = served.client.post("/v1/decisions/batch", content=mt103, headers={**FIN, "x-test-role": "scorer"})
    assert r.status_code == 422, r.text
    _, env = entry(served, r.json()["trace_id"])
    body = env["record"]
    assert body["request"]["batch"] is True and body["request"]["format"] == "mt"
    assert [f["index"] for f in body["refusal"]["faults"]] == [0, 1, 2]
    assert body["refusal"]["fault_count"] == 3


def test_an_empty_json_batch_and_bad_xml_are_sealed_too(served: Served) -> None:
    for content, headers in ((b"[]", JSON), (NOT_WELL_FORMED, XML)):
        r = served.client.post("/v1/decisions/batch", content=content,
                               headers={**headers, "x-test-role": "scorer"})
        assert r.status_code == 422 and "trace_id" in r.json(), r.text
        kind, env = entry(served, r.json()["trace_id"])
        assert kind == "refusal" and env["record"]["payload"]["bytes"] == len(content)


def test_unauthenticated_and_unauthorised_requests_leave_nothing(served: Served) -> None:
    size = served.size()
    app = create_app(served.settings, runtime=served.runtime)
    from starlette.testclient import TestClient

    with TestClient(app) as bare:
        r = bare.post("/v1/decisions", content=unknown_currency(), headers=JSON)
    assert r.status_code == 401 and "trace_id" not in r.json()
    r = served.post(unknown_currency(), role="officer")  # authenticated, but may not score
    assert r.status_code == 403 and "trace_id" not in r.json()
    assert served.size() == size


def test_rate_limited_requests_leave_nothing(db: Db, tmp_path: Path) -> None:
    limits = {"scorer": {"per_second": 0.001, "burst": 1}}
    with in_process(db, tmp_path, rate_limits=limits) as (client, rt, s):
        served = Served(client, rt, s)
        first = served.post(unknown_currency())
        assert first.status_code == 422 and "trace_id" in first.json()
        size = served.size()
        for _ in range(3):
            r = served.post(unknown_currency())
            assert r.status_code == 429 and "trace_id" not in r.json()
        assert served.size() == size


def test_a_refusal_that_cannot_be_sealed_is_still_a_422_logged_and_counted(served: Served) -> None:
    def refuse_inserts(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            raise OperationalError(statement[:40], None, Exception("injected: the database is unreachable"))

    event.listen(served.runtime.engine, "before_cursor_execute", refuse_inserts)
    try:
        r = served.post(unknown_currency())
    finally:
        event.remove(served.runtime.engine, "before_cursor_execute", refuse_inserts)
    assert r.status_code == 422 and "trace_id" not in r.json(), r.text
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert "sealtrail_refusal_seal_failures_total 1.0" in metrics
    ok = served.post(unknown_currency())
    assert ok.status_code == 422 and "trace_id" in ok.json()
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert 'sealtrail_refusals_total{kind="message_refused"} 1.0' in metrics
    verify_ledger(served.runtime.engine, [load_signer(served.settings.key_file).verifier])


# -- every refusal of a caller allowed to score is sealed, whatever refused it -----------------


def _refusal(served: Served, r: Any, status: int, kind: str) -> dict[str, Any]:
    """The sealed refusal body the problem ``r`` names (after checking the problem is ``kind``)."""
    assert r.status_code == status and r.json()["type"].endswith(kind), r.text
    entry_kind, env = entry(served, r.json()["trace_id"])
    assert entry_kind == "refusal"
    body: dict[str, Any] = env["record"]
    assert body["schema"] == REFUSAL_SCHEMA and body["refusal"]["kind"] == kind
    assert body["principal"]["subject"].startswith("CN=")
    assert env.get("payload_sha256") == (body["payload"]["sha256"] if body["payload"]["kept"] else None)
    return body


def _verified(served: Served) -> dict[str, Any]:
    """``ledger verify`` of the served ledger, derived views included: every refusal spoken for."""
    from audit.query.verify import verify_index

    verify_ledger(served.runtime.engine, [load_signer(served.settings.key_file).verifier])
    return verify_index(served.runtime.engine, workers=1).to_json()


def test_an_empty_body_is_sealed_with_its_bytes(served: Served) -> None:
    size = served.size()
    for path, raw in (("/v1/decisions", b""), ("/v1/decisions/batch", b" \r\n\t ")):
        r = served.client.post(path, content=raw, headers={**JSON, "x-test-role": "scorer"})
        body = _refusal(served, r, 422, "empty_body")
        assert body["payload"] == {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw), "kept": True,
                                   "withheld": None}
        assert body["request"]["batch"] == path.endswith("batch") and body["request"]["format"] == "json"
    assert served.size() == size + 4
    assert _verified(served)["refusals"] == 2


@pytest.mark.parametrize(("headers", "kind", "status", "field", "fmt"), [
    ({"content-type": "application/pdf"}, "unsupported_media_type", 415, "Content-Type", "auto"),
    ({**JSON, "x-priority": "P9"}, "invalid_priority", 422, "X-Priority", "json"),
    ({**FIN, "idempotency-key": "tab\tin it"}, "invalid_idempotency_key", 422, "Idempotency-Key", "mt")])
def test_a_request_refused_for_a_header_is_sealed_unread(served: Served, headers: dict[str, str], kind: str,
                                                         status: int, field: str, fmt: str) -> None:
    size = served.size()
    raw = unknown_currency()
    r = served.client.post("/v1/decisions", content=raw, headers={**headers, "x-test-role": "scorer"})
    body = _refusal(served, r, status, kind)
    assert body["payload"]["kept"] is False and body["payload"]["sha256"] is None
    assert body["payload"]["bytes"] == len(raw) and "before the body was read" in body["payload"]["withheld"]
    assert body["request"]["format"] == fmt and body["refusal"]["faults"][0]["field"] == field
    assert body["request"]["idempotency_key"] == ("idempotency-key" in headers)
    assert served.size() == size + 2
    assert _verified(served)["refusals"] == 1


def test_a_body_over_the_cap_refused_before_routing_is_sealed_unread(served: Served) -> None:
    size = served.size()
    cap = 64 << 20
    for path in ("/v1/decisions", "/v1/decisions/batch"):
        r = served.client.post(path, content=b"[]", headers={**XML, "content-length": str(cap + 1),
                                                             "x-test-role": "scorer"})
        body = _refusal(served, r, 413, "too_large")
        assert r.json()["limit_bytes"] == cap and r.json()["trace_id"] in r.json()["detail"]
        assert body["payload"] == {"sha256": None, "bytes": cap + 1, "kept": False,
                                   "withheld": "over the size cap: refused before it was read"}
        assert body["request"]["format"] == "iso20022" and body["request"]["via"] == f"POST {path}"
    r = served.client.post("/v1/decisions", content=b"[]", headers={**JSON, "content-length": str(cap + 1),
                                                                    "x-test-role": "officer"})
    assert r.status_code == 413 and "trace_id" not in r.json()  # not allowed to score: no record
    assert served.size() == size + 4
    assert _verified(served)["refusals"] == 2


def test_a_header_refusal_that_cannot_be_sealed_is_still_refused_and_counted(served: Served) -> None:
    def refuse_inserts(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT"):
            raise OperationalError(statement[:40], None, Exception("injected: the database is unreachable"))

    event.listen(served.runtime.engine, "before_cursor_execute", refuse_inserts)
    try:
        header = served.client.post("/v1/decisions", content=b"{}",
                                    headers={"content-type": "text/plain", "x-test-role": "scorer"})
        over = {**JSON, "content-length": str((64 << 20) + 1), "x-test-role": "scorer"}
        gate = served.client.post("/v1/decisions", content=b"[]", headers=over)
    finally:
        event.remove(served.runtime.engine, "before_cursor_execute", refuse_inserts)
    assert header.status_code == 415 and "trace_id" not in header.json()
    assert gate.status_code == 413 and "trace_id" not in gate.json()
    assert "nothing was decided or recorded" in gate.json()["detail"]
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert "sealtrail_refusal_seal_failures_total 2.0" in metrics
