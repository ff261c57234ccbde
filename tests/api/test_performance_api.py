"""/v1/performance/rules and /v1/performance/models over HTTP, both databases: after officers close
alerts with each disposition, hours apart, the API answers exactly ``audit.cases.performance``'s
rows, as JSON or as a CSV attachment (by ``format`` or ``Accept``); officers, approvers and
regulators read them, scorers and admins do not; reading them seals nothing."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from api.routes.performance import wants_csv
from audit.cases.performance import model_performance, rule_performance, to_csv
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts
from audit.decide.runtime import Runtime
from tests.api.test_cases_api import Desk, desk_over, problem
from tests.audit.cases.test_cases import ALICE
from tests.conftest import Db

CYCLE = ("FALSE_POSITIVE", "NO_FURTHER_ACTION", "FALSE_POSITIVE", "REPORT_FILED")


def work(rt: Runtime[Any], leave_open: int = 2) -> Counter[str]:
    """Close every alert but the last ``leave_open`` through ``audit.cases.service.act``, each
    three hours after the one before (the ledger's clock moves on), cycling through the
    dispositions (a REPORT_FILED after a report filed on its case); held payments are decided first.
    The dispositions given, counted."""
    catch_up(rt.engine)
    with rt.engine.connect() as conn:
        todo = conn.execute(select(alerts.c.seq, alerts.c.outcome, alerts.c.payment, alerts.c.case_id)
                            .order_by(alerts.c.seq)).all()
    assert len(todo) > leave_open + len(CYCLE), "too few alerts to work"
    real, filed, given = rt.ledger.clock, set(), Counter[str]()
    for i, a in enumerate(todo[:-leave_open]):
        rt.ledger.clock = lambda k=i: real() + timedelta(hours=3 * (k + 1))  # type: ignore[misc]
        if a.payment == "HELD":
            act(rt.ledger, ALICE, "reject" if a.outcome == "BLOCK" else "release", alert=a.seq,
                rationale="decided on the documents")
        disposition = CYCLE[i % len(CYCLE)]
        if disposition == "REPORT_FILED" and a.case_id not in filed:
            act(rt.ledger, ALICE, "file_report", case=a.case_id, rationale="STR to the FIU",
                report=f"<report>{a.case_id}</report>".encode())
            filed.add(a.case_id)
        act(rt.ledger, ALICE, "close", alert=a.seq, disposition=disposition, rationale="worked")
        given[disposition] += 1
    return given


@pytest.fixture
def worked(db: Db, tmp_path: Path) -> Iterator[tuple[Desk, Counter[str]]]:
    with desk_over(db, tmp_path) as d:
        d.decide("scorer", 150, seed=21)
        yield d, work(d.runtime)


def test_the_tables_are_the_performance_rows_of_the_worked_alerts(worked: tuple[Desk, Counter[str]]) -> None:
    desk, given = worked
    before = desk.entries()
    rules = desk.get("officer", "/v1/performance/rules")
    models = desk.get("regulator", "/v1/performance/models")
    assert rules.status_code == models.status_code == 200, (rules.text, models.text)
    assert rules.headers["content-type"] == "application/json"
    engine = desk.runtime.engine
    want_rules = [p.to_json() for p in rule_performance(engine)]
    want_models = [p.to_json() for p in model_performance(engine)]
    assert rules.json() == {"items": want_rules} and models.json() == {"items": want_models}
    # the work shows: every disposition given is counted, some rule has each rate, the times are hours
    items = models.json()["items"]
    assert sum(p["closed"] for p in items) == sum(given.values())
    assert (sum(p["false_positive"] for p in items), sum(p["no_further_action"] for p in items),
            sum(p["report_filed"] for p in items)) == (
        given["FALSE_POSITIVE"], given["NO_FURTHER_ACTION"], given["REPORT_FILED"])
    assert sum(p["open"] for p in items) == 2
    assert any(0 < (p["false_positive_rate"] or 0) < 1 for p in want_rules)
    assert any(p["report_conversion"] for p in want_rules)
    assert all(p["median_hours_to_close"] is None or p["median_hours_to_close"] >= 3 for p in want_rules)
    assert all(p["hits"] >= p["alerts"] for p in want_rules)  # an alert is one decision the rule fired on
    assert desk.entries() == before  # counts, no case shown: nothing is sealed


def test_csv_by_format_or_accept_as_an_attachment(worked: tuple[Desk, Counter[str]]) -> None:
    desk, _ = worked
    engine = desk.runtime.engine
    for table, rows in (("rule", rule_performance(engine)), ("model", model_performance(engine))):
        path = f"/v1/performance/{table}s"
        by_format = desk.get("approver", path, format="csv")
        by_accept = desk.client.get(path, headers={"x-test-role": "officer", "accept": "text/csv"})
        for r in (by_format, by_accept):
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "text/csv; charset=utf-8; header=present"
            name = rf"sealtrail-{table}-performance-\d{{4}}-\d{{2}}-\d{{2}}\.csv"
            disposition = r.headers["content-disposition"]
            assert re.fullmatch(f'attachment; filename="{name}"', disposition), disposition
            assert r.text == to_csv(rows)
        table_rows = list(csv.DictReader(io.StringIO(by_format.text)))
        as_json = desk.get("officer", path).json()["items"]
        assert [{k: "" if v is None else str(v) for k, v in p.items()} for p in as_json] == table_rows
    for accept in ("application/json, text/csv;q=0.5", "text/csv;q=0", "application/xml", "*/*"):
        r = desk.client.get("/v1/performance/rules", headers={"x-test-role": "officer", "accept": accept})
        assert r.headers["content-type"] == "application/json", accept
    r = desk.client.get("/v1/performance/rules", params={"format": "json"},
                        headers={"x-test-role": "officer", "accept": "text/csv"})
    assert r.headers["content-type"] == "application/json"  # format decides when given
    problem(desk.get("officer", "/v1/performance/rules", format="xlsx"), 422, "invalid_request", "format")


def test_officers_approvers_and_regulators_read_them_scorers_and_admins_do_not(sqlite_db: Db,
                                                                                   tmp_path: Path) -> None:
    with desk_over(sqlite_db, tmp_path) as desk:
        for path in ("/v1/performance/rules", "/v1/performance/models"):
            for role in ("officer", "approver", "regulator"):
                r = desk.get(role, path)
                assert r.status_code == 200 and r.json() == {"items": []}, (role, path)
            for role in ("scorer", "scorer2", "admin"):
                problem(desk.get(role, path), 403, "forbidden")


@pytest.mark.parametrize(("format", "accept", "csv_wanted"), [
    (None, None, False), (None, "text/csv", True), (None, "text/*", True), (None, "*/*", False),
    (None, "text/csv, application/json", True), (None, "application/json, text/csv", False),
    (None, "application/json;q=0.4, text/csv;q=0.9", True), (None, "text/csv;q=0, */*", False),
    (None, "text/csv;q=nope", False), (None, "application/xml", False), (None, ",,;", False),
    ("csv", "application/json", True), ("json", "text/csv", False)])
def test_which_answers_csv(format: str | None, accept: str | None, csv_wanted: bool) -> None:
    assert wants_csv(format, accept) is csv_wanted
