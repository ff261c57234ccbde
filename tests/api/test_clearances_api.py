"""/v1/clearances over HTTP, in process: an officer proposes a good-guy clearance from a held payment's
name hit, the same officer cannot approve it, a second officer does, the customer's next payment is
not held and its record names the clearance; a refused request is problem+json naming the field and
seals nothing; only officers act, and scorers read nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.api.problem_doc import problem
from tests.api.test_cases_api import Desk, desk_over
from tests.audit.screening.test_screening_decisions import LIST, MT103
from tests.conftest import Db

FIN = {"content-type": "application/x-swift-fin"}


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Desk]:
    with desk_over(db, tmp_path) as d:  # the dev roles and a second officer
        yield d


def decide(d: Desk, n: int, bene: str = "KOVALEV ALEKSANDR") -> dict[str, Any]:
    raw = MT103.format(n=n, bene=bene, orig_id="NIDN/DE/T22000129", bank="DEUTDEFF", text="/RFB/INV-1")
    r = d.client.post("/v1/decisions", content=raw.encode(), headers={**FIN, "x-test-role": "scorer"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert isinstance(doc, dict)
    return doc


def act(d: Desk, path: str, body: Any, role: str = "officer") -> Any:
    return d.client.post(path, json=body, headers={"x-test-role": role})


def record(d: Desk, trace_id: str) -> dict[str, Any]:
    got = d.client.get(f"/v1/traces/{trace_id}", headers={"x-test-role": "officer"}).json()
    body = got["record"]["record"]
    assert isinstance(body, dict)
    return body


@pytest.fixture
def held(desk: Desk) -> dict[str, Any]:
    return held_over(desk)


def held_over(desk: Desk) -> dict[str, Any]:
    """The exit list loaded over HTTP and a payment to the listed name held (its decision)."""
    query = urlencode({"name": "bank-exits", "format": "internal-csv", "published": "2026-11-30",
                       "rationale": "quarterly exit list"})
    r = desk.client.post(f"/v1/lists?{query}", content=LIST, headers={"content-type": "text/csv",
                                                                      "x-test-role": "admin"})
    assert r.status_code == 201, r.text
    assert desk.runtime.screener is not None
    desk.runtime.screener.refresh(wait=True)
    doc = decide(desk, 1)
    assert doc["decision"] == "HOLD", doc
    return doc


def proposal(trace: str, **change: str) -> dict[str, str]:
    until = (datetime.now(UTC).date() + timedelta(days=30)).isoformat()
    return {"trace_id": trace, "where": "beneficiary", "list": "bank-exits", "entry_id": "B-1",
            "until": until, "rationale": "born 1984 in Porto, passport seen: not the listed person"} | change


def test_four_eyes_clearance_over_http_clears_the_customer_s_next_payment(desk: Desk,
                                                                           held: dict[str, Any]) -> None:
    r = act(desk, "/v1/clearances", proposal(held["trace_id"]))
    assert r.status_code == 201, r.text
    c = r.json()
    assert c["status"] == "proposed" and c["proposer"]["subject"]
    problem(act(desk, f"/v1/clearances/{c['seq']}/approve", {"rationale": "me"}), 422, "clearance_refused",
            field="principal")
    problem(act(desk, f"/v1/clearances/{c['seq']}/approve", {"rationale": "ok"}, role="scorer"), 403,
            "forbidden")
    r = act(desk, f"/v1/clearances/{c['seq']}/approve", {"rationale": "KYC file checked"}, role="officer2")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "approved"
    desk.runtime.screener.refresh(wait=True)  # type: ignore[union-attr]
    nxt = decide(desk, 2)
    assert nxt["decision"] == "ALLOW"
    (cleared,) = record(desk, nxt["trace_id"])["screening"]["cleared"]
    assert (cleared["entry_id"], cleared["clearance_seq"]) == ("B-1", c["seq"])
    listed = desk.client.get("/v1/clearances", headers={"x-test-role": "regulator"}).json()["clearances"]
    assert [x["seq"] for x in listed] == [c["seq"]]
    problem(desk.client.get("/v1/clearances", headers={"x-test-role": "scorer"}), 403, "forbidden")
    r = act(desk, f"/v1/clearances/{c['seq']}/revoke", {"rationale": "FIU asked"})
    assert r.status_code == 200 and r.json()["status"] == "revoked"
    desk.runtime.screener.refresh(wait=True)  # type: ignore[union-attr]
    assert decide(desk, 3)["decision"] == "HOLD"


@pytest.mark.parametrize(("change", "status", "field"), [
    ({"entry_id": "B-3"}, 422, "entry_id"),
    ({"until": "2020-01-01"}, 422, "until"),
    ({"until": "soon"}, 422, "until"),
    ({"rationale": " "}, 422, "rationale"),
    ({"trace_id": "01938f2a-7c41-7d22-9a51-0c1d2e3f4a5b"}, 404, "trace_id"),
])
def test_a_refused_proposal_names_its_field_and_seals_nothing(desk: Desk, held: dict[str, Any],
                                                               change: dict[str, str], status: int,
                                                               field: str) -> None:
    before = desk.entries()
    doc = problem(act(desk, "/v1/clearances", proposal(held["trace_id"], **change)), status,
                  "not_found" if status == 404 else "clearance_refused", field=field)
    assert doc["errors"][0]["field"] == field and desk.entries() == before


def test_the_alert_shows_the_matched_entry_beside_the_party(desk: Desk, held: dict[str, Any]) -> None:
    (alert,) = [a for a in desk.alerts() if a["trace_id"] == held["trace_id"]]
    r = desk.client.get(f"/v1/alerts/{alert['seq']}", headers={"x-test-role": "officer"})
    assert r.status_code == 200, r.text
    (hit,) = r.json()["screening_hits"]
    assert (hit["list"], hit["entry_id"], hit["matched"], hit["where"]) == (
        "bank-exits", "B-1", "Aleksandr KOVALEV", "beneficiary")
    assert "text" not in hit
    page = desk.client.get("/console/alerts?view=open", headers={"x-test-role": "officer"})
    assert page.status_code == 200, page.text
    assert 'data-entry="B-1"' in page.text and "beneficiary matches bank-exits entry B-1" in page.text
