"""The alert queue: its tabs are the officer's views of the alerts, pages follow a cursor, each row
lays the payment out from its sealed payload (or says it is purged), overdue rows stand out by the
runtime's clock, bulk "assign to me" seals one event per alert, and only officers act."""

from __future__ import annotations

import html
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import func, select

from api.console import alerts as queue_page
from audit.cases.query import AlertFilter, alert_page
from audit.cases.reads import list_reads
from audit.cases.service import act
from audit.cases.state import AlertState
from audit.cases.tables import case_events
from audit.decide.principal import Principal
from audit.query.traces import get_trace
from ledger import store
from ledger.retention import purge_payloads
from tests.api.console.conftest import Console
from tests.api.console.dom import Node, dom
from tests.api.test_fail_closed import txs

BOB = Principal(subject="CN=Bob Second,O=sealtrail dev", sans=("URI:spiffe://sealtrail.dev/role/officer",),
                issuer="CN=sealtrail dev CA,O=sealtrail dev", fingerprint_sha256="b2" * 32, serial="2b",
                not_before="2026-01-01T00:00:00Z", not_after="2028-01-01T00:00:00Z")


def decide(console: Console, n: int = 200, seed: int = 21) -> list[dict[str, Any]]:
    """Score ``n`` simulated payments in one batch (200 at seed 21: 19 alerts in 14 cases, of
    every alerting outcome); the decisions as answered."""
    body = b"[" + b",".join(txs(n, seed)) + b"]"
    r = console.client.post("/v1/decisions/batch", content=body,
                            headers={"content-type": "application/json", "x-test-role": "scorer"})
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["decisions"]
    return out


def all_alerts(console: Console, view: str = "all", **kw: Any) -> list[AlertState]:
    return alert_page(console.runtime.engine, AlertFilter(view=view, limit=500, **kw),
                      today=datetime.now(UTC).date()).items


def officer_fp(console: Console) -> str:
    r = console.client.get("/console/alerts", headers={"x-test-role": "officer"})
    who = dom(r.text).one("p", class_="who")
    return who.attrs["title"]


def size(console: Console) -> int:
    with console.runtime.engine.connect() as conn:
        return int(store.tail(conn)[0])


def sealed(console: Console, kind: str = "case_event") -> int:
    """Records of ``kind`` in the ledger (a page view seals a ``case_read``; an action a ``case_event``)."""
    e = store.entries
    with console.runtime.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(e).where(e.c.kind == kind)).scalar_one())


def page(console: Console, role: str = "officer", **params: str) -> tuple[int, Node, str]:
    r = console.get("/console/alerts", role=role, params=params)
    return r.status_code, dom(r.text), r.text


def shown(doc: Node) -> list[int]:
    return [int(tr.attrs["data-alert"]) for tr in doc.all("tr") if "data-alert" in tr.attrs]


def tab_hrefs(doc: Node) -> dict[str, str]:
    nav = doc.one("nav", class_="tabs")
    return {a.attrs["data-view"]: a.attrs["href"] for a in nav.all("a")}


@pytest.fixture
def decided(console: Console) -> list[dict[str, Any]]:
    return decide(console)


def test_the_tabs_are_the_views_of_the_queue(console: Console, decided: list[dict[str, Any]]) -> None:
    everything = all_alerts(console)
    assert len(everything) == 19 and {a.outcome for a in everything} >= {"REVIEW", "HOLD", "BLOCK"}
    assert all(a.account_alert for a in everything if a.outcome == "ALLOW")  # an account alert alone
    status, doc, _ = page(console)
    assert status == 200
    assert list(tab_hrefs(doc)) == ["mine", "unassigned", "overdue", "open", "closed", "qa"]
    current = doc.one("nav", class_="tabs").one("a", aria_current="page")
    assert current.attrs["data-view"] == "mine"  # an officer's home: their own alerts
    assert shown(doc) == [] and "Take some from" in doc.one("p", id="no-alerts").text()
    _, doc, _ = page(console, view="unassigned")
    assert shown(doc) == sorted((a.seq for a in everything), reverse=True)  # newest first
    # one alert taken by this officer, one by another, one closed
    me_fp = officer_fp(console)
    review = [a for a in everything if a.outcome == "REVIEW"]
    mine, bobs, closed = review[0], review[1], review[2]
    me = {"subject": "CN=sealtrail-officer,O=sealtrail dev", "sans": ["URI:spiffe://sealtrail.dev/role/officer"],
          "issuer": "CN=sealtrail dev CA,O=sealtrail dev", "fingerprint_sha256": me_fp, "serial": "1"}
    act(console.runtime.ledger, BOB, "assign", alert=mine.seq, assignee=me)
    act(console.runtime.ledger, BOB, "assign", alert=bobs.seq, assignee=BOB)
    act(console.runtime.ledger, BOB, "close", alert=closed.seq, disposition="NO_FURTHER_ACTION",
        rationale="customer documented the source")
    _, doc, _ = page(console)
    assert shown(doc) == [mine.seq]
    row = doc.one("tr", data_alert=str(mine.seq))
    assert row.one("td", data_label="Assignee").text() == "you"
    assert not row.has("input")  # already mine: nothing to tick
    _, doc, _ = page(console, view="unassigned")
    assert set(shown(doc)) == {a.seq for a in everything} - {mine.seq, bobs.seq, closed.seq}
    _, doc, _ = page(console, view="open")
    assert set(shown(doc)) == {a.seq for a in everything} - {closed.seq}
    bob_row = doc.one("tr", data_alert=str(bobs.seq))
    assert bob_row.one("td", data_label="Assignee").text() == BOB.subject
    _, doc, _ = page(console, view="closed")
    assert shown(doc) == [closed.seq]
    assert "closed (NO_FURTHER_ACTION)" in doc.one("tr", data_alert=str(closed.seq)).one(
        "td", data_label="State").text()
    case_link = doc.one("tr", data_alert=str(closed.seq)).one("td", data_label="Case").one("a")
    assert case_link.attrs["href"] == f"/console/cases/{closed.case_id}#alert-{closed.seq}"


def test_filters_by_outcome_and_rule_keep_the_tab(console: Console, decided: list[dict[str, Any]]) -> None:
    everything = all_alerts(console, view="open")
    _, doc, text = page(console, view="open", outcome="BLOCK")
    assert set(shown(doc)) == {a.seq for a in everything if a.outcome == "BLOCK"}
    assert '<option value="BLOCK" selected>' in text
    assert "outcome=BLOCK" in tab_hrefs(doc)["closed"]  # a tab keeps the filters
    rule = everything[0].fired.split(",")[0]
    _, doc, _ = page(console, view="open", rule=rule)
    assert set(shown(doc)) == {a.seq for a in everything if rule in a.fired.split(",")}
    status, doc, text = page(console, view="open", outcome="MAYBE")
    assert status == 422 and "is not one of" in doc.one("p", id="e-outcome").text()
    status, doc, _ = page(console, view="sideways")
    assert status == 422 and "is not one of" in doc.one("p", id="e-view").text()


def test_pages_follow_the_cursor_in_either_order(console: Console, decided: list[dict[str, Any]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue_page, "PAGE", 4)
    want = sorted(a.seq for a in all_alerts(console, view="open"))
    for order, expect in (("newest", want[::-1]), ("oldest", want)):
        seen: list[int] = []
        r = console.get("/console/alerts", params={"view": "open", "order": order})
        pages = 0
        while True:
            doc = dom(r.text)
            got = shown(doc)
            assert 0 < len(got) <= 4
            seen += got
            pages += 1
            nxt = doc.all("a", rel="next")
            if not nxt:
                break
            href = html.unescape(nxt[0].attrs["href"])
            assert parse_qs(urlsplit(href).query)["order"] == [order]
            r = console.get(href)
        assert seen == expect and pages == 5, order
    # a cursor issued for another filter is refused, with a way back to the first page
    r = console.get("/console/alerts", params={"view": "open"})
    href = html.unescape(dom(r.text).one("a", rel="next").attrs["href"])
    cursor = parse_qs(urlsplit(href).query)["cursor"][0]
    status, doc, _ = page(console, view="open", outcome="HOLD", cursor=cursor)
    assert status == 422
    assert "different filter" in doc.one("p", id="search-errors").text()
    assert "Start from the first page" in doc.one("p", id="search-errors").text()


def test_a_row_lays_the_payment_out_from_its_payload(console: Console, decided: list[dict[str, Any]]) -> None:
    hold = next(a for a in all_alerts(console) if a.outcome == "HOLD")
    detail = get_trace(console.runtime.engine, hold.trace_id)
    assert detail is not None and detail.payload is not None
    tx = json.loads(detail.payload)
    _, doc, _ = page(console, view="open")
    row = doc.one("tr", data_alert=str(hold.seq))
    cell = row.one("td", data_label="Payment")
    amount = f"{tx['currency']} {Decimal(tx['amount']):,}"
    parties = (f"{tx['originator']['name']} ({tx['originator']['country']}) → "
               f"{tx['beneficiary']['name']} ({tx['beneficiary']['country']})")
    assert cell.one("span", class_="amount").text() == amount
    assert cell.one("span", class_="parties").text() == parties
    assert row.one("td", data_label="Outcome").one("span", class_="badge HOLD").text() == "HOLD"
    assert row.one("td", data_label="Payment state").text() == "HELD"
    assert row.one("td", data_label="Rules fired").text() == ", ".join(hold.fired.split(","))
    assert row.one("td", data_label="Review due").text() == hold.review_due  # not overdue today
    assert row.one("td", data_label="Opened").text().endswith("(today)")
    purge_payloads(console.runtime.ledger, [str(detail.payload_sha256)], "erasure order 2026-17")
    _, doc, _ = page(console, view="open")
    assert doc.one("tr", data_alert=str(hold.seq)).one("td", data_label="Payment").text() == "payload purged"


def test_overdue_rows_stand_out_by_the_runtime_clock(console: Console, decided: list[dict[str, Any]]) -> None:
    _, doc, _ = page(console, view="overdue")
    assert shown(doc) == []
    _, doc, _ = page(console, view="open")
    assert not doc.all("tr", data_overdue="true")
    later = datetime.now(UTC) + timedelta(days=30)  # the runtime's clock moves on a month
    console.runtime.ledger.clock = lambda: later
    everything = all_alerts(console, view="open")
    _, doc, text = page(console, view="open")
    rows = doc.all("tr", data_overdue="true")
    assert {int(r.attrs["data-alert"]) for r in rows} == {a.seq for a in everything}
    assert all(r.attrs["class"] == "overdue" and r.one("strong", class_="overdue-flag").text() == "overdue"
               for r in rows)
    assert f"Today is {later.date().isoformat()} (UTC)" in text
    assert {r.one("td", data_label="Opened").one("span").text() for r in rows} == {"(30 days)"}
    _, doc, _ = page(console, view="overdue")
    assert set(shown(doc)) == {a.seq for a in everything}
    dues = [doc.one("tr", data_alert=str(s)).one("td", data_label="Review due").one("time").attrs["datetime"]
            for s in shown(doc)]
    assert dues == sorted(dues)  # most overdue first
    # a closed alert is never overdue
    review = next(a for a in everything if a.payment is None)
    act(console.runtime.ledger, BOB, "close", alert=review.seq, disposition="FALSE_POSITIVE",
        rationale="payroll")
    _, doc, _ = page(console, view="closed")
    assert "data-overdue" not in doc.one("tr", data_alert=str(review.seq)).attrs
    _, doc, _ = page(console, view="overdue")
    assert review.seq not in shown(doc)


def test_bulk_assign_to_me_seals_one_event_per_alert(console: Console, decided: list[dict[str, Any]]) -> None:
    _, doc, _ = page(console, view="unassigned", outcome="REVIEW")
    form = doc.one("form", id="bulk")
    boxes = form.all("input", type="checkbox")
    assert len(boxes) == len(shown(doc)) >= 3
    for box in boxes:  # every checkbox is labelled
        assert doc.one("label", for_=box.attrs["id"]).text().startswith("Select alert ")
    picked = [int(b.attrs["name"].removeprefix("alert-")) for b in boxes[:3]]
    back = form.one("input", name="back").attrs["value"]
    before = size(console)
    r = console.post_form("/console/alerts/assign", {"back": back, **{f"alert-{s}": "1" for s in picked}})
    assert r.status_code == 303, r.text
    assert parse_qs(urlsplit(r.headers["location"]).query) == {
        "view": ["unassigned"], "outcome": ["REVIEW"], "order": ["newest"], "assigned": ["3"]}
    assert size(console) == before + 3
    with console.runtime.engine.connect() as conn:
        evs = conn.execute(select(case_events).order_by(case_events.c.seq)).all()
    assert [(e.alert_seq, e.action, e.applied) for e in evs] == [(s, "assign", 1) for s in sorted(picked)]
    assert {e.actor_fp for e in evs} == {officer_fp(console)}
    done = console.get(r.headers["location"])
    assert "Assigned 3 alerts to you" in dom(done.text).one("p", id="queue-notice").text()
    assert not set(picked) & set(shown(dom(done.text)))  # no longer unassigned
    _, doc, _ = page(console)
    assert set(shown(doc)) == set(picked)


def test_bulk_assign_refusals_seal_nothing_or_say_which(console: Console,
                                                       decided: list[dict[str, Any]]) -> None:
    alerts = all_alerts(console, view="open")
    before = sealed(console)
    r = console.post_form("/console/alerts/assign", {"back": "view=unassigned"})
    assert r.status_code == 422 and "no alert was ticked" in r.text and sealed(console) == before
    # another site's page cannot make an officer's browser assign
    r = console.post_form("/console/alerts/assign", {f"alert-{alerts[0].seq}": "1"},
                          **{"sec-fetch-site": "cross-site"})
    assert r.status_code == 403 and sealed(console) == before
    # one closed meanwhile: the others are assigned, that one is named with why (409)
    gone = next(a for a in alerts if a.payment is None)
    act(console.runtime.ledger, BOB, "close", alert=gone.seq, disposition="NO_FURTHER_ACTION",
        rationale="done")
    other = next(a for a in alerts if a.seq != gone.seq)
    r = console.post_form("/console/alerts/assign", {f"alert-{gone.seq}": "1", f"alert-{other.seq}": "1",
                                                     "back": "view=open&evil=https://x.example"})
    assert r.status_code == 409
    doc = dom(r.text)
    failed = doc.one("div", id="queue-failures").text()
    assert f"Alert {gone.seq}: action: cannot assign alert {gone.seq}" in failed
    assert "Assigned 1 of 2 alerts to you." in doc.one("p", id="queue-notice").text()
    assert "x.example" not in r.text  # only the queue's own filters travel back


@pytest.mark.parametrize("role", ["regulator"])
def test_a_regulator_reads_the_queue_without_acting(console: Console, decided: list[dict[str, Any]],
                                                    role: str) -> None:
    status, doc, _ = page(console, role=role)
    assert status == 200
    assert list(tab_hrefs(doc)) == ["unassigned", "overdue", "open", "closed", "qa"]  # no "mine"
    assert doc.one("nav", class_="tabs").one("a", aria_current="page").attrs["data-view"] == "open"
    assert len(shown(doc)) == 19
    assert not doc.all("form", method="post") and not doc.all("input", type="checkbox")
    assert doc.one("a", class_="brand").attrs["href"] == "/console"
    before = size(console)
    r = console.post_form("/console/alerts/assign", {f"alert-{shown(doc)[0]}": "1"}, role=role)
    assert r.status_code == 403 and "may not alerts.act" in r.text and size(console) == before


@pytest.mark.parametrize("role", ["scorer", "admin", "approver"])
def test_scorers_admins_and_approvers_may_not_see_alerts(console: Console, decided: list[dict[str, Any]],
                                                         role: str) -> None:
    r = console.get("/console/alerts", role=role)
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    assert "may not alerts.list" in r.text
    assert not dom(r.text).all("a", href="/console/alerts")  # nor a link to them


def test_the_officer_is_led_to_the_queue(console: Console) -> None:
    home = console.get("/console", follow_redirects=False)
    assert (home.status_code, home.headers["location"]) == (303, "/console/alerts")  # an officer's home
    assert console.get("/console", role="regulator", follow_redirects=False).status_code == 200
    assert console.get("/console", params={"span": "7d"}, follow_redirects=False).status_code == 200
    doc = dom(console.get("/console/overview").text)
    assert doc.one("a", class_="brand").attrs["href"] == "/console/alerts"
    nav = doc.all("nav")[0]
    labels = [a.text() for a in nav.all("a")]
    assert labels[:2] == ["Alerts", "Overview"]  # the queue first, the overview kept
    assert doc.one("p", id="queue-lead").one("a").attrs["href"] == "/console/alerts"
    assert not dom(console.get("/console/overview", role="regulator").text).has("p", id="queue-lead")
    queue_doc = dom(console.get("/console/alerts").text)
    assert queue_doc.all("nav")[0].one("a", aria_current="page").text() == "Alerts"
    assert not queue_doc.has("p", id="queue-lead")
    assert date.fromisoformat(queue_doc.one("p", class_="hint").text().split()[2]) == datetime.now(UTC).date()


def test_a_page_of_the_queue_is_a_sealed_read_of_the_cases_it_shows(console: Console,
                                                                    decided: list[dict[str, Any]]) -> None:
    before = sealed(console, "case_read")
    _, doc, _ = page(console)  # nothing is assigned to the officer yet: nothing shown, nothing read
    assert shown(doc) == [] and sealed(console, "case_read") == before
    _, doc, _ = page(console, role="regulator", view="open", outcome="BLOCK")
    assert sealed(console, "case_read") == before + 1
    (last, *_) = list_reads(console.runtime.engine).items
    cases = list(dict.fromkeys(int(tr.attrs["data-case"]) for tr in doc.all("tr") if "data-case" in tr.attrs))
    assert last.principal["subject"] == "CN=sealtrail-regulator,O=sealtrail dev"
    assert last.reads == [{"case": c, "what": "queue"} for c in cases] and cases
