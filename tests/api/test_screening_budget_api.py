"""POST /v1/decisions with a sanctions list in force and a remittance written from the list's own
words: the service answers at once with a HOLD (SANCTIONS_SCREENING_INCOMPLETE), the trace shows a
``sealtrail.decision/7`` record naming where screening stopped and the budget set by
``screening_budget``, and so does the console's decision page; an ordinary payment of the same
service is screened in full; a budget that is not a positive number of units is refused when the
settings are read."""

from __future__ import annotations

import html
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from pydantic import ValidationError

from api.config import Settings
from tests.api.test_fail_closed import Served, in_process
from tests.audit.screening.test_screening_decisions import LIST, message
from tests.conftest import Db

WORDS = ("aleksandr", "kovalev", "alexander", "kovalyov", "tehran", "imports", "company", "sevmorneftegaz",
         "trading", "llc")


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Served]:
    with in_process(db, tmp_path, screening_budget=760) as (client, rt, s):
        query = urlencode({"name": "bank-exits", "format": "internal-csv", "published": "2026-11-30",
                           "rationale": "quarterly exit list"})
        r = client.post(f"/v1/lists?{query}", content=LIST, headers={"content-type": "text/csv",
                                                                     "x-test-role": "admin"})
        assert r.status_code == 201, r.text
        assert rt.screener is not None
        rt.screener.refresh(wait=True)
        yield Served(client, rt, s)


def payment(n: int, remittance: str | None = None) -> bytes:
    tx = message(n).transaction
    return (tx if remittance is None else replace(tx, remittance=remittance)).canonical_bytes()


def trace(d: Served, trace_id: str) -> dict[str, Any]:
    got = d.client.get(f"/v1/traces/{trace_id}", headers={"x-test-role": "officer"}).json()
    body = got["record"]["record"]
    assert isinstance(body, dict)
    return body


def test_a_flooded_remittance_is_held_as_not_screened_in_full_and_the_trace_says_where(desk: Served) -> None:
    rng = random.Random(2)
    r = desk.post(payment(2, " ".join(rng.choice(WORDS) for _ in range(200))))
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["decision"] == "HOLD" and "SANCTIONS_SCREENING_INCOMPLETE" in [f["id"] for f in doc["fired"]]
    body = trace(desk, doc["trace_id"])
    assert body["schema"] == "sealtrail.decision/7"
    assert (body["screening"]["stopped"], body["screening"]["budget"]) == ("remittance", 760)
    plain = desk.post(payment(1))
    assert plain.status_code == 200 and plain.json()["decision"] == "ALLOW", plain.text
    assert trace(desk, plain.json()["trace_id"])["schema"] == "sealtrail.decision/6"


@pytest.mark.parametrize("bad", [0, -1, "many"])
def test_a_budget_that_is_not_a_positive_number_of_units_is_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValidationError, match="screening_budget"):
        Settings.model_validate({"db": "sqlite:///x.db", "keys": tmp_path / "keys", "screening_budget": bad})


def test_the_console_shows_where_screening_stopped_and_the_hits_found_before(desk: Served) -> None:
    rng = random.Random(2)
    doc = desk.post(payment(2, " ".join(rng.choice(WORDS) for _ in range(200)))).json()
    page = desk.client.get(f"/console/decisions/{doc['trace_id']}", headers={"x-test-role": "officer"})
    assert page.status_code == 200
    panel = html.unescape(page.text.split('id="screening"')[1].split("</section>")[0])
    assert "Not screened in full: screening stopped in" in panel and "remittance" in panel
    assert "at its budget of 760 units" in panel and "bank-exits" in panel
    for hit in trace(desk, doc["trace_id"])["screening"]["hits"]:
        assert hit["entry_id"] in panel and hit["matched"] in panel
    plain = desk.post(payment(1)).json()
    page = desk.client.get(f"/console/decisions/{plain['trace_id']}", headers={"x-test-role": "officer"})
    panel = html.unescape(page.text.split('id="screening"')[1].split("</section>")[0])
    assert "Not screened in full" not in panel and "No listed entry found." in panel
