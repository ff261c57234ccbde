"""The case page: a timeline of decisions and sealed events in seq order, the payment and the rules
as a person reads them, actions sealed through the same service the API calls, refusals shown
where they happened with the API's status (422, 409, 403 four-eyes), and forms only for officers."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import select

from audit.annotations import annotate
from audit.cases.reads import list_reads
from audit.cases.service import act
from audit.cases.state import AlertState
from audit.cases.store import catch_up
from audit.cases.tables import alerts as alert_table
from audit.cases.tables import cases, payment_outcomes
from audit.decide.fixed_point import body_score
from audit.query.traces import get_trace
from ledger.retention import current_holds, purge_payloads
from tests.api.console.conftest import Console
from tests.api.console.dom import Node, dom, textarea
from tests.api.console.test_alerts_page import BOB, all_alerts, decide, sealed, size
from tests.api.test_fail_closed import in_process
from tests.conftest import Db

FEATURE = r"[a-z_][a-z0-9_]*"


@pytest.fixture
def decided(console: Console) -> list[AlertState]:
    decide(console)
    return all_alerts(console)


def case_page(console: Console, case_id: int, role: str = "officer") -> tuple[int, Node, str]:
    r = console.get(f"/console/cases/{case_id}", role=role)
    return r.status_code, dom(r.text), r.text


def post(console: Console, case_id: int, action: str, alert: int | None = None, role: str = "officer",
         form: str = "test", **fields: str) -> Any:
    data = {"form": form, "action": action, **fields}
    if alert is not None:
        data["alert"] = str(alert)
    return console.post_form(f"/console/cases/{case_id}/act", data, role=role)


def alert_now(console: Console, seq: int) -> Any:
    with console.runtime.engine.connect() as conn:
        return conn.execute(select(alert_table).where(alert_table.c.seq == seq)).one()


def timeline(doc: Node) -> list[Node]:
    return [li for li in doc.one("ol", id="timeline").all("li") if "data-seq" in li.attrs]


def biggest(alerts: list[AlertState]) -> int:
    return Counter(a.case_id for a in alerts).most_common(1)[0][0]


def test_the_timeline_mixes_decisions_and_events_in_seq_order(console: Console,
                                                              decided: list[AlertState]) -> None:
    case_id = biggest(decided)
    members = [a for a in decided if a.case_id == case_id]
    assert len(members) >= 3
    first, second = members[0], members[1]
    act(console.runtime.ledger, BOB, "comment", case=case_id, rationale="looks like a payroll run")
    assert post(console, case_id, "assign", first.seq).status_code == 303
    assert post(console, case_id, "start_review", first.seq).status_code == 303
    r = post(console, case_id, "escalate", first.seq, rationale="three accounts, one address")
    assert r.status_code == 303
    act(console.runtime.ledger, BOB, "assign", alert=second.seq, assignee=BOB)
    status, doc, _ = case_page(console, case_id)
    assert status == 200
    items = timeline(doc)
    seqs = [int(li.attrs["data-seq"]) for li in items]
    assert seqs == sorted(seqs)
    kinds = {int(li.attrs["data-seq"]): li.attrs["data-kind"] for li in items}
    assert {s for s, k in kinds.items() if k == "decision"} == {a.seq for a in members}
    events = [li for li in items if li.attrs["data-kind"] == "event"]
    assert [li.attrs["data-action"] for li in events] == [
        "comment", "assign", "start_review", "escalate", "assign"]
    assert all(li.attrs["data-applied"] == "true" for li in events)
    escalated = events[3]
    assert "CN=sealtrail-officer,O=sealtrail dev" in escalated.one("h3").text()
    assert "escalated" in escalated.one("h3").text() and f"alert {first.seq}" in escalated.one("h3").text()
    assert escalated.one("dd", class_="note").text() == "three accounts, one address"
    assert "looks like a payroll run" in events[0].text() and "the case" in events[0].one("h3").text()
    assert events[4].one("h3").text().startswith(f"{BOB.subject} assigned to themselves alert {second.seq}")
    # a decision as a person reads it: the payment, the rules with what they compared, the alert
    for a in members:
        li = doc.one("li", id=f"alert-{a.seq}")
        detail = get_trace(console.runtime.engine, a.trace_id)
        assert detail is not None and detail.payload is not None
        tx = json.loads(detail.payload)
        headline = li.one("p", class_="headline").text()
        assert f"{tx['currency']} {Decimal(tx['amount']):,}" in headline
        assert f"{tx['originator']['name']} ({tx['originator']['country']}) → {tx['beneficiary']['name']}" \
            in headline
        for agent in tx["agents"]:
            assert agent["bic"] in li.text()
        assert "No data-quality findings." in li.text() or tx["findings"]
        for hit in detail.body["fired"]:
            row = li.one("tr", data_rule=hit["id"])
            compared = row.all("td")[2]
            assert compared.one("code", class_="when").text()  # the sealed rule source's condition
            names = [s.text() for s in compared.all("span", class_="mono")]
            assert names and all(n in compared.one("code").text() for n in names)
            if "model_score" in compared.one("code").text():  # the bands: the score they compared
                assert f"model_score = {body_score(detail.body):g}" in compared.text()
            assert " = " in compared.text()
            assert row.all("td")[3].text() == " ".join(hit["reason"].split())
        state = li.one("dl", class_="kv alert-state").text()
        assert a.review_due in state and a.filing_due in state
        assert li.one("p", class_="evidence").one("a").attrs["href"] == f"/console/decisions/{a.trace_id}"
    assert "escalated" in doc.one("li", id=f"alert-{first.seq}").one("dl", class_="kv alert-state").text()


def test_annotations_of_the_cases_decisions_are_in_the_timeline_escaped(console: Console,
                                                                          decided: list[AlertState]) -> None:
    case_id = biggest(decided)
    members = [a for a in decided if a.case_id == case_id]
    elsewhere = next(a for a in decided if a.case_id != case_id)
    ledger = console.runtime.ledger
    act(ledger, BOB, "comment", case=case_id, rationale="before the notes")
    text = '<script>alert("x")</script> <b>same address</b> & co'
    mine = annotate(ledger, members[1].trace_id, BOB, "ESCALATED", text)
    fix = annotate(ledger, members[0].trace_id, BOB, "CORRECTION", "the amounts sit under the threshold",
                   {"decision": "HOLD", "reason": "structuring"})
    theirs = annotate(ledger, elsewhere.trace_id, BOB, "NOTE", "a note on another case")
    for role in ("officer", "regulator"):
        status, doc, html = case_page(console, case_id, role=role)
        assert status == 200
        items = timeline(doc)
        seqs = [int(li.attrs["data-seq"]) for li in items]
        assert seqs == sorted(seqs) and theirs.seq not in seqs
        assert "a note on another case" not in html
        notes = [li for li in items if li.attrs["data-kind"] == "annotation"]
        assert [int(li.attrs["data-seq"]) for li in notes] == [mine.seq, fix.seq]
        escalated, corrected = notes
        assert escalated.attrs["data-alert"] == str(members[1].seq)
        assert escalated.one("h3").text().startswith(
            f"{BOB.subject} annotated the decision of alert {members[1].seq} · seq {mine.seq}")
        assert escalated.one("span", class_="who").attrs["title"] == BOB.fingerprint_sha256
        assert "ESCALATED" in escalated.text()
        # the officer's words are shown as typed, never as markup
        assert escalated.one("dd", class_="note").text() == " ".join(text.split())
        assert not escalated.has("script") and not escalated.has("b")
        assert "&lt;script&gt;alert(" in html and '<script>alert("x")' not in html
        said = corrected.text()
        assert "CORRECTION" in said and corrected.one("span", class_="badge HOLD").text() == "HOLD"
        assert "structuring" in said and "the amounts sit under the threshold" in said
        record = corrected.one("p", class_="evidence").one("a")
        assert record.attrs["href"] == f"/console/decisions/{fix.trace_id}"
        # the decision points at its annotations below it
        decision = doc.one("li", id=f"alert-{members[1].seq}")
        assert [a.attrs["href"] for a in decision.one("dl", class_="kv alert-state").all("a")] == [
            f"#annotation-{mine.seq}"]
        assert not doc.one("li", id=f"alert-{members[2].seq}").one("dl", class_="kv alert-state").has("a")


def test_the_header_and_the_report_in_force(console: Console, decided: list[AlertState]) -> None:
    case_id = biggest(decided)
    members = [a for a in decided if a.case_id == case_id]
    other = next(a.case_id for a in decided if a.case_id != case_id)
    _, doc, _ = case_page(console, case_id)
    key = members[0].subject.split(":", 1)[1]
    assert doc.one("h1").text() == f"Case {case_id} account ••••{key[-6:]}"
    assert doc.one("dd", id="case-subject").text().startswith(f"account ••••{key[-6:]}")
    assert key not in doc.one("main").text()  # never the whole keyed account
    assert doc.one("dd", id="case-alerts").text() == f"{len(members)} open of {len(members)}"
    assert doc.one("dd", id="case-state").text() == "open"
    assert doc.one("p", id="report-in-force").text() == "No report filed on this case."
    # link by the form (a bad number first), then file a report by the service
    r = post(console, case_id, "link", form="case-link", link="the other one", rationale="same network")
    assert r.status_code == 422
    err = dom(r.text).one("p", id="e-case-link-link").text()
    assert "number of the case" in err
    assert dom(r.text).one("textarea", id="case-link-rationale").text() == "same network"  # kept
    assert post(console, case_id, "link", form="case-link", link=str(other), rationale="same network"
                ).status_code == 303
    report = b"<report>draft</report>"
    act(console.runtime.ledger, BOB, "file_report", case=case_id, report=report, rationale="STR to the FIU")
    _, doc, _ = case_page(console, case_id)
    assert [a.attrs["href"] for a in doc.one("dd", id="case-links").all("a")] == [f"/console/cases/{other}"]
    got = doc.one("p", id="report-in-force").text()
    assert hashlib.sha256(report).hexdigest() in got and "(1 filed on this case" in got
    report_section = doc.one("section", id="report")
    assert not report_section.all("form")  # no reporting-entity file here: nothing to draft with
    assert "SEALTRAIL_REPORTING_ENTITY" in report_section.one("p", id="report-unconfigured").text()
    (row,) = report_section.one("table", id="report-versions").one("tbody").all("tr")
    assert row.attrs["data-sha256"] == hashlib.sha256(report).hexdigest()
    _, back, _ = case_page(console, other)
    assert [a.attrs["href"] for a in back.one("dd", id="case-links").all("a")] == [
        f"/console/cases/{case_id}"]


def test_triage_by_the_forms_to_a_closed_alert(console: Console, decided: list[AlertState]) -> None:
    review = next(a for a in decided if a.outcome == "REVIEW")
    before = size(console)
    for action in ("assign", "start_review"):
        r = post(console, review.case_id, action, review.seq, form=f"alert-{review.seq}-quick")
        assert r.status_code == 303, r.text
        where = urlsplit(r.headers["location"])
        assert where.path == f"/console/cases/{review.case_id}" and where.fragment == f"alert-{review.seq}"
    r = post(console, review.case_id, "close", review.seq, form=f"alert-{review.seq}-close",
             disposition="NO_FURTHER_ACTION", rationale="The customer documented the source of funds.")
    assert r.status_code == 303
    assert size(console) == before + 3
    sealed = int(parse_qs(urlsplit(r.headers["location"]).query)["sealed"][0])
    doc = dom(console.get(r.headers["location"]).text)
    assert doc.one("p", id="sealed-notice").text() == (
        f"Sealed as ledger entry {sealed}: close on alert {review.seq}.")
    now = alert_now(console, review.seq)
    assert (now.state, now.disposition, now.last_event_seq) == ("closed", "NO_FURTHER_ACTION", sealed)
    li = doc.one("li", id=f"alert-{review.seq}")
    assert li.one("dd", data_state="closed").text().startswith("closed as No further action")
    assert li.has("form", id=f"alert-{review.seq}-reopen")
    assert not li.has("form", id=f"alert-{review.seq}-close")


def test_no_disposition_is_chosen_for_the_officer(console: Console, decided: list[AlertState]) -> None:
    review = next(a for a in decided if a.outcome == "REVIEW")
    _, doc, _ = case_page(console, review.case_id)
    radios = doc.all("input", type="radio", name="disposition")
    assert len(radios) >= 6  # the alert's close form and the case's
    assert not [r for r in radios if "checked" in r.attrs]
    assert all("required" in r.attrs for r in radios)
    for r in radios:
        assert doc.one("label", for_=r.attrs["id"]).text()
    # the decision page's annotation form too: the empty first option is the only one selected
    page = dom(console.get(f"/console/decisions/{review.trace_id}").text)
    select_ = page.one("select", id="a-disposition")
    assert "required" in select_.attrs
    chosen = [o for o in select_.all("option") if "selected" in o.attrs]
    assert [(o.attrs["value"], o.text()) for o in chosen] == [("", "Choose a disposition")]
    before, notes = sealed(console), sealed(console, "annotation")
    r = console.post_form(f"/console/decisions/{review.trace_id}/annotations",
                          {"disposition": "", "note": "looked at it", "correction_decision": "",
                           "correction_reason": ""})
    assert r.status_code == 422 and sealed(console, "annotation") == notes
    assert "choose a disposition" in dom(r.text).one("p", id="e-disposition").text()
    # closing without a disposition, or without a rationale, is refused at its form, text kept
    form = f"alert-{review.seq}-close"
    r = post(console, review.case_id, "close", review.seq, form=form, rationale="payroll, documented")
    assert r.status_code == 422
    doc = dom(r.text)
    assert "choose a disposition" in doc.one("p", id=f"e-{form}-disposition").text()
    assert doc.one("textarea", id=f"{form}-rationale").text() == "payroll, documented"
    assert doc.one("div", id="action-refused").attrs["data-field"] == "disposition"
    r = post(console, review.case_id, "close", review.seq, form=form, disposition="FALSE_POSITIVE",
             rationale=" ")
    assert r.status_code == 422
    doc = dom(r.text)
    assert "non-empty" in doc.one("p", id=f"e-{form}-rationale").text()
    assert "checked" in doc.one("input", id=f"{form}-d-FALSE_POSITIVE").attrs  # the officer's choice, kept
    assert sealed(console) == before


def test_a_hold_is_released_by_one_officer(console: Console, decided: list[AlertState]) -> None:
    hold = next(a for a in decided if a.outcome == "HOLD")
    _, doc, _ = case_page(console, hold.case_id)
    li = doc.one("li", id=f"alert-{hold.seq}")
    assert li.one("button", id=f"alert-{hold.seq}-release").text() == "Release payment"
    assert not li.has("form", id=f"alert-{hold.seq}-close")  # the held payment is decided first
    r = post(console, hold.case_id, "release", hold.seq, form=f"alert-{hold.seq}-decide",
             rationale="Beneficiary verified by phone.")
    assert r.status_code == 303
    with console.runtime.engine.connect() as conn:
        outcomes = conn.execute(select(payment_outcomes)).all()
    assert [(o.alert_seq, o.outcome) for o in outcomes] == [(hold.seq, "RELEASED")]
    doc = dom(console.get(r.headers["location"]).text)
    li = doc.one("li", id=f"alert-{hold.seq}")
    assert li.one("dd", data_payment="RELEASED").text() == "RELEASED"
    assert li.has("form", id=f"alert-{hold.seq}-close")  # now it can be closed


def test_releasing_a_block_needs_a_second_officer(console: Console, decided: list[AlertState]) -> None:
    block, other = [a for a in decided if a.outcome == "BLOCK"][:2]
    _, doc, _ = case_page(console, block.case_id)
    button = doc.one("button", id=f"alert-{block.seq}-release")
    assert button.text() == "Propose release (second officer approves)"
    assert "needs a second officer" in doc.one("p", id=f"alert-{block.seq}-decide-hint").text()
    assert post(console, block.case_id, "release", block.seq, rationale="The list hit is a namesake."
                ).status_code == 303
    _, doc, _ = case_page(console, block.case_id)
    assert "You proposed releasing the held payment" in doc.one("p", id=f"alert-{block.seq}-pending").text()
    assert not doc.has("button", id=f"alert-{block.seq}-approve")  # the proposer gets no Approve button
    before = sealed(console)
    r = post(console, block.case_id, "approve", block.seq, form=f"alert-{block.seq}-second")
    assert r.status_code == 403 and sealed(console) == before
    refused = dom(r.text).one("div", id="action-refused")
    assert refused.attrs["data-status"] == "403" and "four-eyes" in refused.text()
    assert "cannot approve it too" in refused.text()
    assert alert_now(console, block.seq).payment == "HELD"
    act(console.runtime.ledger, BOB, "approve", alert=block.seq)
    assert alert_now(console, block.seq).payment == "RELEASED"
    # proposed by another officer: this one sees Approve and Refuse, and approves
    act(console.runtime.ledger, BOB, "release", alert=other.seq, rationale="cleared by the sanctions desk")
    _, doc, _ = case_page(console, other.case_id)
    assert f"{BOB.subject} proposed releasing" in doc.one("p", id=f"alert-{other.seq}-pending").text()
    assert doc.has("button", id=f"alert-{other.seq}-approve")
    assert doc.has("button", id=f"alert-{other.seq}-refuse")
    assert post(console, other.case_id, "approve", other.seq).status_code == 303
    assert alert_now(console, other.seq).payment == "RELEASED"


def test_a_conflict_is_explained_and_seals_nothing(console: Console, decided: list[AlertState]) -> None:
    review = next(a for a in decided if a.outcome == "REVIEW")
    before = sealed(console)
    r = post(console, review.case_id, "escalate", review.seq, form=f"alert-{review.seq}-escalate",
             rationale="too early")
    assert r.status_code == 409
    doc = dom(r.text)
    refused = doc.one("div", id="action-refused")
    assert refused.attrs["data-status"] == "409"
    assert "cannot escalate alert" in refused.text()
    assert "another officer may have acted first" in refused.text()
    assert "Nothing was sealed." in refused.text() and sealed(console) == before
    r = post(console, review.case_id, "fly", review.seq)
    assert r.status_code == 422 and "is not one of" in dom(r.text).one("div", id="action-refused").text()
    r = post(console, review.case_id, "comment", review.seq)  # comments belong to the case
    assert r.status_code == 422
    other = next(a for a in decided if a.case_id != review.case_id)
    assert post(console, review.case_id, "assign", other.seq).status_code == 404  # not this case's alert
    assert sealed(console) == before


def test_closing_the_case_closes_its_alerts(console: Console, decided: list[AlertState]) -> None:
    case_id = next(c for c, n in Counter(a.case_id for a in decided).items() if n >= 2)
    for a in decided:  # a case closes once no payment of it is held
        if a.case_id == case_id and a.payment == "HELD":
            act(console.runtime.ledger, BOB, "release", alert=a.seq, rationale="documented source of funds")
    _, doc, _ = case_page(console, case_id)
    assert doc.has("form", id="case-close")
    assert post(console, case_id, "assign", form="case-quick").status_code == 303
    r = post(console, case_id, "close", form="case-close", disposition="FALSE_POSITIVE",
             rationale="A payroll batch, known to the relationship manager.")
    assert r.status_code == 303
    doc = dom(console.get(r.headers["location"]).text)
    assert doc.one("dd", id="case-state").text().startswith("closed as False positive")
    assert doc.one("dd", id="case-assignee").text() == "you"
    assert not doc.has("form", id="case-close")


def test_a_purged_payload_is_said_so(console: Console, decided: list[AlertState]) -> None:
    a = decided[0]
    detail = get_trace(console.runtime.engine, a.trace_id)
    assert detail is not None
    purge_payloads(console.runtime.ledger, [str(detail.payload_sha256)], "retention")
    _, doc, _ = case_page(console, a.case_id)
    view = doc.one("li", id=f"alert-{a.seq}").one("div", class_="payment-view")
    assert view.attrs["data-payload"] == "purged" and "Payload purged" in view.text()


def test_a_regulator_reads_the_case_without_action_forms(console: Console, decided: list[AlertState]) -> None:
    block = next(a for a in decided if a.outcome == "BLOCK")
    act(console.runtime.ledger, BOB, "release", alert=block.seq, rationale="namesake")
    status, doc, _ = case_page(console, block.case_id, role="regulator")
    assert status == 200 and doc.has("ol", id="timeline")
    assert not doc.all("form") and not doc.all("button") and not doc.all("textarea")
    assert not doc.has("section", id="case-actions")
    before = sealed(console)
    r = post(console, block.case_id, "approve", block.seq, role="regulator")
    assert r.status_code == 403 and sealed(console) == before


@pytest.mark.parametrize("role", ["scorer", "admin"])
def test_scorers_and_admins_may_not_read_a_case(console: Console, decided: list[AlertState],
                                                 role: str) -> None:
    r = console.get(f"/console/cases/{decided[0].case_id}", role=role)
    assert r.status_code == 403 and "may not cases.get" in r.text
    r = post(console, decided[0].case_id, "comment", role=role, rationale="x")
    assert r.status_code == 403


def test_no_such_case(console: Console, decided: list[AlertState]) -> None:
    r = console.get("/console/cases/999999")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html") and "no case" in r.text
    assert console.get("/console/cases/first").status_code == 422
    assert post(console, 999999, "comment", rationale="x").status_code == 404


def test_each_view_of_a_case_is_a_sealed_read(console: Console, decided: list[AlertState]) -> None:
    a = decided[0]
    before = sealed(console, "case_read")
    assert case_page(console, a.case_id)[0] == 200
    assert case_page(console, a.case_id, role="regulator")[0] == 200
    assert console.get("/console/cases/999999").status_code == 404  # nothing read, nothing sealed
    r = post(console, a.case_id, "fly", a.seq)  # a refusal shows the case: a read too
    assert r.status_code == 422
    assert sealed(console, "case_read") == before + 3
    reads = list_reads(console.runtime.engine, case_id=a.case_id).items
    assert [(x.principal["subject"], x.reads) for x in reads] == [
        ("CN=sealtrail-officer,O=sealtrail dev", [{"case": a.case_id, "what": "case"}]),
        ("CN=sealtrail-regulator,O=sealtrail dev", [{"case": a.case_id, "what": "case"}]),
        ("CN=sealtrail-officer,O=sealtrail dev", [{"case": a.case_id, "what": "case"}])]


def test_a_closure_drawn_for_quality_review_gets_a_verdict_from_another_officer(
        console: Console, decided: list[AlertState]) -> None:
    from audit.cases.policy import DeadlinePolicy
    from audit.cases.service import set_policy
    set_policy(console.runtime.ledger, DeadlinePolicy(version="qa-all", qa_sample_permille=1000), BOB,
               "review every closure")
    decide(console, seed=33)  # alerts opened under the new policy
    fresh = [a for a in all_alerts(console) if a.payment is None and a.policy_seq > 0]
    target = fresh[0]
    act(console.runtime.ledger, BOB, "close", alert=target.seq, disposition="NO_FURTHER_ACTION",
        rationale="explained by the customer")
    _, doc, _ = case_page(console, target.case_id)
    form = doc.one("form", id=f"alert-{target.seq}-qa")
    assert [i.attrs.get("checked") for i in form.all("input", type="radio")] == [None, None]  # none chosen
    before = sealed(console)
    r = post(console, target.case_id, "qa_review", target.seq, form=f"alert-{target.seq}-qa", rationale="ok")
    assert r.status_code == 422 and sealed(console) == before and "choose a verdict" in r.text
    queue = dom(console.get("/console/alerts", params={"view": "qa"}).text)
    assert f"/console/cases/{target.case_id}" in str(queue)
    r = post(console, target.case_id, "qa_review", target.seq, form=f"alert-{target.seq}-qa",
             verdict="DISAGREE", rationale="source of funds not evidenced")
    assert r.status_code == 303 and alert_now(console, target.seq).qa == "disagreed"
    _, doc, _ = case_page(console, target.case_id)
    assert "disagreed" in doc.one("p", id=f"alert-{target.seq}-qa-done").text()


# -- the report: drafted on the page, filed under legal hold ------------------------------------------

EXAMPLE = Path(__file__).parents[3] / "docs" / "reporting-entity.example.toml"
RATES = "USD=0.9215\nGBP=1.1702\nCHF=1.0480\nJPY=0.0061"
REASON = "Transfers to a jurisdiction under a call for action, just under the threshold."
OFFICER = "CN=sealtrail-officer,O=sealtrail dev"


@pytest.fixture
def desk(sqlite_db: Db, tmp_path: Path) -> Iterator[tuple[Console, int]]:
    """The console with the example reporting-entity file, 200 payments decided, and a case of two
    or more alerts (the one tests/api/test_reports_api.py reports on)."""
    with in_process(sqlite_db, tmp_path, exports_dir=tmp_path / "exports", reporting_entity=EXAMPLE) as (
            client, rt, s):
        console = Console(client, rt, s)
        decide(console)
        catch_up(rt.engine)
        with rt.engine.connect() as conn:
            case_id = int(conn.execute(select(cases.c.case_id).where(cases.c.alerts >= 2)
                                       .order_by(cases.c.case_id).limit(1)).scalar_one())
        yield console, case_id


def draft(console: Console, case_id: int, role: str = "officer", **fields: str) -> Any:
    data = {"reason": REASON, "indicators": "HRJUR, STRUC", "action": "Payments held.", "rates": RATES,
            **fields}
    return console.post_form(f"/console/cases/{case_id}/reports/draft", data, role=role)


def file_shown(console: Console, page: Node, rationale: str, **change: str) -> Any:
    """Post the page's "File this report" form as a browser would (its hidden fields, the rationale)."""
    form = page.one("form", id="report-file")
    data = {i.attrs["name"]: i.attrs.get("value", "") for i in form.all("input", type="hidden")}
    return console.post_form(form.attrs["action"], {**data, "rationale": rationale, **change})


def shown_xml(page: Node) -> str:
    return "".join(c for c in page.one("pre", id="report-xml").children if isinstance(c, str))


def holds(console: Console) -> dict[str, tuple[int, int]]:
    return {h.hold_id: (h.seq_from, h.seq_to) for h in current_holds(console.runtime.engine)}


def test_a_draft_shows_the_document_and_seals_nothing(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    members = sorted((a for a in all_alerts(console) if a.case_id == case_id), key=lambda a: a.seq)
    _, page, _ = case_page(console, case_id)
    assert page.has("form", id="report-draft") and not page.has("p", id="report-unconfigured")
    before, reads = sealed(console), sealed(console, "case_read")
    r = draft(console, case_id)
    assert r.status_code == 200, r.text
    page = dom(r.text)
    xml = shown_xml(page)
    sha = hashlib.sha256(xml.encode()).hexdigest()
    assert page.one("dd", id="report-draft-sha256").text() == sha
    assert page.one("section", id="report-drafted").attrs["data-sha256"] == sha
    assert "&lt;entity_reference&gt;case-" in r.text and "<entity_reference>" not in r.text  # escaped
    assert f"<entity_reference>case-{case_id}</entity_reference>" in xml and REASON in xml
    assert "<indicator>HRJUR</indicator>" in xml and "<indicator>STRUC</indicator>" in xml
    rows = page.one("table", id="report-draft-transactions").one("tbody").all("tr")
    assert [row.all("td")[0].text() for row in rows] == [a.trace_id for a in members]
    assert [row.one("a").attrs["href"] for row in rows] == [f"#alert-{a.seq}" for a in members]
    assert "nothing: the first report" in page.one("dd", id="report-draft-amends").text()
    form = page.one("form", id="report-file")
    assert form.one("input", name="xml").attrs["value"] == xml  # the exact text shown, to be filed
    assert form.one("input", name="sha256").attrs["value"] == sha
    assert form.one("input", name="amends").attrs["value"] == ""
    assert "required" in form.one("textarea", id="report-file-rationale").attrs
    assert textarea(page, "report-draft-reason") == REASON  # the typed form stays, to draft again
    assert textarea(page, "report-draft-rates") == RATES
    # nothing sealed but the read of the page; no hold
    assert sealed(console) == before and sealed(console, "case_read") == reads + 1
    assert holds(console) == {}


def test_filing_seals_the_event_after_the_hold_and_the_page_lists_both(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    page = dom(draft(console, case_id).text)
    xml, sha = shown_xml(page), page.one("dd", id="report-draft-sha256").text()
    r = file_shown(console, page, "Approved by the MLRO.")
    assert r.status_code == 303, r.text
    where = urlsplit(r.headers["location"])
    assert where.path == f"/console/cases/{case_id}" and where.fragment == "report"
    seq = int(parse_qs(where.query)["sealed"][0])
    hold_id = f"case-{case_id}-{sha[:8]}"
    held = holds(console)
    assert set(held) == {hold_id, f"{hold_id}.report"}
    assert held[hold_id][1] < seq and held[f"{hold_id}.report"] == (seq, seq)  # the evidence; the document
    placed = {h.hold_id: h.placed_seq for h in current_holds(console.runtime.engine)}
    assert placed[hold_id] < seq < placed[f"{hold_id}.report"]  # the evidence hold first, then the event
    page = dom(console.get(r.headers["location"]).text)
    notice = page.one("p", id="sealed-notice").text()
    assert notice == f"Sealed as ledger entry {seq}: file report on the case."
    assert sha in page.one("p", id="report-in-force").text()
    (row,) = page.one("table", id="report-versions").one("tbody").all("tr")
    assert (row.attrs["data-seq"], row.attrs["data-sha256"], row.attrs["data-in-force"]) == (
        str(seq), sha, "true")
    cells = row.all("td")
    assert OFFICER in cells[2].text() and "Approved by the MLRO." in cells[2].text()
    assert "none" in cells[4].text()
    shown = {li.attrs["data-hold"]: li for li in cells[5].all("li")}
    assert set(shown) == set(held) and all(li.attrs["data-active"] == "true" for li in shown.values())
    lo, hi = held[hold_id]
    assert f"seqs {lo}–{hi}, active" in shown[hold_id].text()
    link = row.one("a")
    assert link.attrs["href"] == f"/v1/cases/{case_id}/reports/{sha}"
    got = console.get(link.attrs["href"])
    assert got.status_code == 200 and got.content == xml.encode()  # the bytes shown are the bytes filed
    report_filed = page.all("input", name="disposition", value="REPORT_FILED")
    assert report_filed and not [i for i in report_filed if "disabled" in i.attrs]  # closing may say so now


def test_a_second_filing_must_amend_the_report_in_force(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    first = dom(draft(console, case_id).text)
    sha = first.one("dd", id="report-draft-sha256").text()
    assert file_shown(console, first, "First version.").status_code == 303
    # the first draft again (a stale tab): it amends nothing while a report is in force, so it is refused
    before, held = sealed(console), holds(console)
    r = file_shown(console, first, "Filed twice by mistake.")
    assert r.status_code == 409
    page = dom(r.text)
    refused = page.one("div", id="action-refused")
    assert refused.attrs["data-field"] == "amends" and "Nothing was sealed." in refused.text()
    assert textarea(page, "report-file-rationale") == "Filed twice by mistake."  # kept, draft shown again
    assert shown_xml(page) == shown_xml(first)
    assert sealed(console) == before and holds(console) == held
    # the page drafts an amendment of the report in force, and files it as one
    _, page, _ = case_page(console, case_id)
    assert page.one("h3", id="report-act-title").text() == "Amend the report"
    assert sha in page.one("p", id="report-draft-hint").text()
    second = dom(draft(console, case_id, reason="Corrected narrative: the third transfer was returned.").text)
    assert sha in second.one("dd", id="report-draft-amends").text()
    assert second.one("form", id="report-file").one("input", name="amends").attrs["value"] == sha
    assert "Amends the earlier report" in shown_xml(second)
    sha2 = second.one("dd", id="report-draft-sha256").text()
    assert file_shown(console, second, "Corrected.").status_code == 303
    _, page, _ = case_page(console, case_id)
    rows = page.one("table", id="report-versions").one("tbody").all("tr")
    assert [(r.attrs["data-sha256"], r.attrs.get("data-in-force")) for r in rows] == [
        (sha, None), (sha2, "true")]
    assert rows[1].all("td")[4].text() == sha
    assert {f"case-{case_id}-{sha2[:8]}", f"case-{case_id}-{sha2[:8]}.report"} <= set(holds(console))


def test_the_document_filed_is_the_one_shown(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    page = dom(draft(console, case_id).text)
    xml = shown_xml(page)
    before = sealed(console)
    r = file_shown(console, page, "Approved.", xml=xml.replace("HRJUR", "TERRF"))
    assert r.status_code == 422
    refused = dom(r.text).one("p", id="e-report-draft")
    assert "not the one shown" in refused.text() and "nothing was filed" in refused.text()
    r = file_shown(console, page, "  ")  # the rationale is required: refused at it, the draft shown again
    assert r.status_code == 422
    again = dom(r.text)
    assert again.one("textarea", id="report-file-rationale").attrs["aria-invalid"] == "true"
    assert again.has("p", id="e-report-file-rationale") and shown_xml(again) == xml
    assert sealed(console) == before and holds(console) == {}


def test_a_regulator_sees_the_filed_reports_but_no_forms(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    page = dom(draft(console, case_id).text)
    sha = page.one("dd", id="report-draft-sha256").text()
    assert file_shown(console, page, "Approved by the MLRO.").status_code == 303
    status, doc, _ = case_page(console, case_id, role="regulator")
    assert status == 200
    (row,) = doc.one("table", id="report-versions").one("tbody").all("tr")
    assert row.attrs["data-sha256"] == sha and len(row.all("td")[5].all("li")) == 2
    assert console.get(row.one("a").attrs["href"], role="regulator").status_code == 200
    assert not doc.all("form") and not doc.all("textarea") and not doc.has("p", id="report-unconfigured")
    before = sealed(console)
    assert draft(console, case_id, role="regulator").status_code == 403
    r = console.post_form(f"/console/cases/{case_id}/reports", {"xml": "<report/>", "sha256": "0" * 64,
                                                                 "rationale": "x"}, role="regulator")
    assert r.status_code == 403 and sealed(console) == before


def test_without_the_reporting_entity_the_page_names_the_setting(console: Console,
                                                                decided: list[AlertState]) -> None:
    case_id = biggest(decided)
    _, page, _ = case_page(console, case_id)
    note = page.one("p", id="report-unconfigured").text()
    assert "SEALTRAIL_REPORTING_ENTITY" in note and "409" in note
    assert not page.has("form", id="report-draft")
    before = sealed(console)
    r = draft(console, case_id)  # a form posted anyway (an old tab): refused as the API refuses it
    assert r.status_code == 409
    refused = dom(r.text).one("div", id="action-refused")
    assert refused.attrs["data-field"] == "SEALTRAIL_REPORTING_ENTITY"
    assert "Nothing was sealed." in refused.text() and sealed(console) == before


def test_a_refused_draft_is_shown_at_its_field_with_what_was_typed(desk: tuple[Console, int]) -> None:
    console, case_id = desk
    before = sealed(console)
    r = draft(console, case_id, rates="")  # foreign amounts and no rate: sealtrail invents none
    assert r.status_code == 422
    page = dom(r.text)
    assert "invents none" in page.one("p", id="e-report-draft-rates").text()
    assert page.one("div", id="action-refused").attrs["data-field"].endswith(".amount_local")
    assert textarea(page, "report-draft-reason") == REASON
    assert textarea(page, "report-draft-indicators") == "HRJUR, STRUC"
    assert not page.has("form", id="report-file")
    r = draft(console, case_id, indicators="HRJUR\nnot a code")
    assert r.status_code == 422
    assert dom(r.text).one("textarea", id="report-draft-indicators").attrs["aria-invalid"] == "true"
    assert dom(r.text).one("div", id="action-refused").attrs["data-field"] == "indicators[1]"
    for fields, at, words in [({"reason": "  "}, "reason", "write the reason"),
                              ({"indicators": " , "}, "indicators", "at least one"),
                              ({"rates": "USD 0.92"}, "rates", "is not CCY=RATE")]:
        r = draft(console, case_id, **fields)
        assert r.status_code == 422, fields
        assert words in dom(r.text).one("p", id=f"e-report-draft-{at}").text()
    # a payment message purged already: a report is never rebuilt from hashes
    first = min((a for a in all_alerts(console) if a.case_id == case_id), key=lambda a: a.seq)
    detail = get_trace(console.runtime.engine, first.trace_id)
    assert detail is not None
    purge_payloads(console.runtime.ledger, [str(detail.payload_sha256)], "erasure order")
    r = draft(console, case_id)
    assert r.status_code == 422
    page = dom(r.text)
    assert "purge" in page.one("p", id="e-report-draft").text()
    assert page.one("div", id="action-refused").attrs["data-field"].startswith("seq ")
    assert textarea(page, "report-draft-reason") == REASON
    assert sealed(console) == before and holds(console) == {}


# -- the timeline's pages, and the counterparties' cases -------------------------------------------


def test_the_timeline_is_paged_newest_first_by_seq_and_reads_only_the_decisions_shown(
        console: Console, decided: list[AlertState], monkeypatch: pytest.MonkeyPatch) -> None:
    from api.console import case_page as module

    case_id = biggest(decided)
    members = [a for a in decided if a.case_id == case_id]
    for n in range(4):
        act(console.runtime.ledger, BOB, "comment", case=case_id, rationale=f"note {n}")
    annotate(console.runtime.ledger, members[0].trace_id, BOB, "NOTE", "seen")
    everything = [int(li.attrs["data-seq"]) for li in timeline(case_page(console, case_id)[1])]
    assert len(everything) == len(members) + 5
    monkeypatch.setattr(module, "TIMELINE_PAGE", 3)
    asked: list[list[str]] = []
    real = module.get_traces

    def spy(engine: Any, ids: Any) -> Any:
        asked.append(list(ids))
        return real(engine, ids)

    monkeypatch.setattr(module, "get_traces", spy)

    def reports(*args: Any) -> Any:
        raise AssertionError("a case with no report reads no report")

    monkeypatch.setattr(module, "list_case_reports", reports)
    url: str | None = f"/console/cases/{case_id}"
    pages: list[list[int]] = []
    newer: list[str | None] = []
    reads = sealed(console, "case_read")
    while url is not None:
        r = console.get(url)
        assert r.status_code == 200, r.text
        doc = dom(r.text)
        seqs = [int(li.attrs["data-seq"]) for li in timeline(doc)]
        pages.append(seqs)
        # only the decisions on the page are read, payloads and rules included
        shown = {li.attrs["data-trace-id"] for li in timeline(doc) if li.attrs["data-kind"] == "decision"}
        assert set(asked.pop()) == shown
        count = doc.one("p", id="timeline-count")
        assert count.attrs["data-total"] == str(len(everything))
        assert count.attrs["data-shown"] == str(len(seqs))
        assert f"{len(members)} decisions, 4 events, 1 annotation in all" in count.text()
        assert doc.one("dd", id="case-alerts").text() == f"{len(members)} open of {len(members)}"  # unchanged
        older = doc.all("a", id="timeline-older")
        newer.append(doc.one("a", id="timeline-newer").attrs["href"] if doc.has("a", id="timeline-newer")
                     else None)
        url = older[0].attrs["href"].split("#")[0] if older else None
        if url is not None:
            assert url == f"/console/cases/{case_id}?before={seqs[0]}"
    assert sealed(console, "case_read") == reads + len(pages)  # one sealed read a view
    assert [s for p in reversed(pages) for s in p] == everything
    assert all(len(p) == 3 for p in pages[:-1]) and 1 <= len(pages[-1]) <= 3
    assert newer[0] is None and newer[1] is not None and newer[1].split("#")[0] == f"/console/cases/{case_id}"
    if len(pages) > 2:  # a newer link goes back to the very page that linked to this one
        back = console.get(newer[2].split("#")[0])
        assert [int(li.attrs["data-seq"]) for li in timeline(dom(back.text))] == pages[1]
    # a link to an entry on another page leads to the page that ends with it
    first = members[0]
    doc = dom(console.get(f"/console/cases/{case_id}").text)
    note = doc.one("li", data_kind="annotation")
    assert note.one("h3").one("a").attrs["href"] == \
        f"/console/cases/{case_id}?before={first.seq + 1}#alert-{first.seq}"
    assert not doc.has("li", id=f"alert-{first.seq}")


@pytest.mark.parametrize("cursor", ["x", "-1", "1e3", "12 ", "٣", "1" * 20])
def test_a_timeline_cursor_that_is_not_a_seq_is_refused_before_anything_is_read(
        console: Console, decided: list[AlertState], cursor: str) -> None:
    reads = sealed(console, "case_read")
    r = console.get(f"/console/cases/{decided[0].case_id}", params={"before": cursor})
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert "is not a seq" in r.text and "before" in r.text
    assert sealed(console, "case_read") == reads


def test_an_action_on_an_older_page_comes_back_to_that_page(console: Console, decided: list[AlertState],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from api.console import case_page as module

    case_id = biggest(decided)
    members = [a for a in decided if a.case_id == case_id]
    for n in range(3):
        act(console.runtime.ledger, BOB, "comment", case=case_id, rationale=f"note {n}")
    monkeypatch.setattr(module, "TIMELINE_PAGE", 2)
    a = members[0]
    before = a.seq + 1
    doc = dom(console.get(f"/console/cases/{case_id}", params={"before": str(before)}).text)
    form = doc.one("form", id=f"alert-{a.seq}-quick")
    assert form.one("input", name="before").attrs["value"] == str(before)
    r = post(console, case_id, "assign", a.seq, before=str(before))
    assert r.status_code == 303
    where = urlsplit(r.headers["location"])
    assert parse_qs(where.query)["before"] == [str(before)] and where.fragment == f"alert-{a.seq}"
    r = post(console, case_id, "comment", rationale="on the case", before=str(before))
    assert r.status_code == 303 and "before" not in r.headers["location"]  # the newest page shows it


@pytest.fixture
def networked(console: Console) -> tuple[Console, int, list[Any]]:
    """Traffic in which some case has counterparties' cases (as tests/api/test_cases_api.py's)."""
    from audit.cases.counterparties import counterparty_cases

    decide(console, 300, seed=21)
    decide(console, 100, seed=5)
    engine = console.runtime.engine
    catch_up(engine)
    with engine.connect() as conn:
        ids = list(conn.execute(select(cases.c.case_id).order_by(cases.c.case_id)).scalars())
    for case_id in ids:
        others = counterparty_cases(engine, case_id)
        if others:
            return console, case_id, others
    raise AssertionError("no case in the traffic has a counterparty with a case of its own")


def test_the_counterparties_cases_are_shown_linkable_and_sealed_as_queue_reads(
        networked: tuple[Console, int, list[Any]]) -> None:
    console, case_id, others = networked
    status, doc, _ = case_page(console, case_id)
    assert status == 200
    rows = doc.one("table", id="counterparty-cases").one("tbody").all("tr")
    assert [int(tr.attrs["data-case"]) for tr in rows] == [o.case_id for o in others]
    for tr, o in zip(rows, others, strict=True):
        cells = tr.all("td")
        assert cells[0].one("a").attrs["href"] == f"/console/cases/{o.case_id}"
        assert cells[1].text() == f"account ••••{o.subject.removeprefix('account:')[-6:]}"
        assert cells[2].text() == ("open" if o.open else "closed")
        assert cells[3].text() == f"{o.open_alerts} open of {o.alerts}"
        assert tr.attrs["data-linked"] == "false"
        assert cells[4].one("a").attrs["href"] == f"/console/cases/{case_id}?link_to={o.case_id}#case-link"
    # the read of the page is one sealed record: the case, and each counterparty's case as a queue read
    last = list_reads(console.runtime.engine).items[0]  # newest first: the page's read, whole
    assert last.reads == [{"case": case_id, "what": "case"}] + [{"case": o.case_id, "what": "queue"}
                                                                 for o in others]
    assert last.principal["subject"] == "CN=sealtrail-officer,O=sealtrail dev"
    # "Link" types the case number into the link form; the officer still writes why and submits
    other = others[0]
    href = rows[0].all("td")[4].one("a").attrs["href"]
    before = sealed(console)
    r = console.get(href.split("#")[0])
    assert r.status_code == 200 and sealed(console) == before  # nothing sealed but the read
    form = dom(r.text).one("form", id="case-link")
    assert form.one("input", id="case-link-link").attrs["value"] == str(other.case_id)
    assert textarea(dom(r.text), "case-link-rationale") == ""
    assert not [i for i in dom(r.text).all("input") if "checked" in i.attrs]  # nothing chosen for them
    assert dom(console.get(f"/console/cases/{case_id}").text).one(
        "input", id="case-link-link").attrs["value"] == ""
    for junk in ("<script>1</script>", "12a", "-3"):  # only a case number is typed in
        page = console.get(f"/console/cases/{case_id}", params={"link_to": junk})
        assert page.status_code == 200 and "<script>1" not in page.text
        assert dom(page.text).one("input", id="case-link-link").attrs["value"] == ""
    assert post(console, case_id, "link", form="case-link", link=str(other.case_id),
                rationale="pays the subject every week").status_code == 303
    doc = case_page(console, case_id)[1]
    linked = doc.one("tr", data_case=str(other.case_id))
    assert linked.attrs["data-linked"] == "true" and not linked.all("a", href=href)
    assert linked.all("td")[4].text() == "linked"


def test_the_counterparties_cases_are_escaped_and_read_only_for_a_regulator(
        networked: tuple[Console, int, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from api.console import case_page as module

    console, case_id, others = networked
    evil = dataclasses.replace(others[0], subject='decision:<img src=x onerror="alert(1)">')
    monkeypatch.setattr(module, "counterparty_cases", lambda engine, cid: [evil])
    status, doc, html = case_page(console, case_id, role="regulator")
    assert status == 200
    assert "<img src=x" not in html and "&lt;img src=x onerror=" in html
    row = doc.one("tr", data_case=str(evil.case_id))
    assert row.all("td")[1].text() == 'decision <img src=x onerror="alert(1)">'
    assert not row.all("td")[4].all("a") and row.all("td")[4].text() == "not linked"  # no form: no Link
    for role in ("scorer", "admin"):
        r = console.get(f"/console/cases/{case_id}", role=role)
        assert r.status_code == 403 and "counterpart" not in r.text.lower() and "&lt;img" not in r.text
