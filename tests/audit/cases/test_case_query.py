"""The case list (``case_page``), one alert (``get_alert``) and the quality-assurance queue (the
alert view ``qa``): keyset pages bound to their filter, each view, and bad filters refused naming
the field."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from datetime import date

import pytest

from audit.annotations import annotate
from audit.cases.policy import DeadlinePolicy
from audit.cases.query import (
    AlertFilter,
    CaseFilter,
    _alert_query,
    alert_page,
    case_detail,
    case_page,
    get_alert,
)
from audit.cases.service import act, set_policy
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases
from audit.errors import CaseError, CaseNotFoundError
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.cases.test_cases import ALICE, BOB, decided, rows  # noqa: F401  (a fixture)
from tests.audit.test_hostile_index import drop_index_guards, sql
from tests.audit.test_query_plans import statements
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


def walk(ledger: Ledger, f: CaseFilter) -> list[int]:
    out: list[int] = []
    cursor = None
    while True:
        page = case_page(ledger.engine, replace(f, cursor=cursor))
        assert len(page.items) <= f.limit
        out += [c.case_id for c in page.items]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def test_cases_page_newest_first_in_each_view(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    every = sorted((c.case_id for c in rows(decided.engine, cases)), reverse=True)
    assert len(every) >= 5
    assert walk(decided, CaseFilter(limit=2)) == every  # all open at first
    assert walk(decided, CaseFilter(view="all", limit=3)) == every
    assert walk(decided, CaseFilter(view="closed")) == []
    mine, closing = every[1], every[-1]
    act(decided, ALICE, "assign", case=mine, assignee=BOB)
    for a in rows(decided.engine, alerts, alerts.c.case_id == closing):
        if a.payment == "HELD":
            act(decided, ALICE, "reject", alert=a.seq, rationale="held pending KYC refresh")
    act(decided, ALICE, "close", case=closing, disposition="NO_FURTHER_ACTION", rationale="explained")
    assert walk(decided, CaseFilter(view="mine", me=BOB.fingerprint_sha256, limit=1)) == [mine]
    assert walk(decided, CaseFilter(view="mine", me=ALICE.fingerprint_sha256)) == []
    nobodys = [c for c in every if c not in (mine, closing)]
    assert walk(decided, CaseFilter(view="unassigned", limit=2)) == nobodys
    assert walk(decided, CaseFilter(limit=2)) == every[:-1]
    assert walk(decided, CaseFilter(view="closed", limit=1)) == [closing]
    assert walk(decided, CaseFilter(view="all", limit=4)) == every


def test_bad_case_filters_and_cursors_are_refused_naming_the_field(decided: Ledger) -> None:  # noqa: F811
    for kwargs, field in [({"view": "overdue"}, "view"), ({"view": "mine"}, "view"), ({"limit": 0}, "limit"),
                          ({"limit": 501}, "limit"), ({"cursor": "bm9wZQ"}, "cursor"),
                          ({"cursor": "%%%"}, "cursor")]:
        with pytest.raises(CaseError) as info:
            CaseFilter(**kwargs)  # type: ignore[arg-type]
        assert info.value.field == field, kwargs
    page = case_page(decided.engine, CaseFilter(limit=1))
    assert page.next_cursor is not None
    with pytest.raises(CaseError, match="different filter"):
        CaseFilter(view="all", cursor=page.next_cursor)
    with pytest.raises(CaseError, match="different filter"):  # a cursor of someone's "mine" is theirs
        alices = CaseFilter(view="mine", me=ALICE.fingerprint_sha256).cursor_after(page.items[0])
        CaseFilter(view="mine", me=BOB.fingerprint_sha256, cursor=alices)
    assert CaseFilter(cursor=page.next_cursor).position() == page.items[0].case_id


def test_one_alert_by_its_seq(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    first = rows(decided.engine, alerts)[0]
    got = get_alert(decided.engine, first.seq)
    assert (got.seq, got.trace_id, got.case_id, got.state) == (
        first.seq, first.trace_id, first.case_id, "new")
    with pytest.raises(CaseNotFoundError) as info:
        get_alert(decided.engine, 10**9)
    assert info.value.field == "seq"
    with pytest.raises(CaseError) as bad:
        get_alert(decided.engine, -1)
    assert bad.value.field == "seq"


def test_a_case_shows_the_annotations_of_its_decisions_and_no_others(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    everything = rows(decided.engine, alerts)
    sizes = Counter(a.case_id for a in everything)
    case_id, lone = sizes.most_common()[0][0], sizes.most_common()[-1][0]
    members = [a for a in everything if a.case_id == case_id]
    assert len(members) >= 3 and sizes[lone] == 1
    elsewhere = next(a for a in everything if a.case_id == lone)
    first = annotate(decided, members[0].trace_id, ALICE, "NOTE", "called the branch")
    second = annotate(decided, members[0].trace_id, BOB, "CORRECTION", "should have held",
                      {"decision": "HOLD", "reason": "structuring"})
    third = annotate(decided, members[2].trace_id, BOB, "FALSE_POSITIVE", "payroll")
    theirs = annotate(decided, elsewhere.trace_id, ALICE, "NOTE", "another case")

    def notes(case: int) -> dict[int, list[tuple[int, str, str, str]]]:
        d = case_detail(decided.engine, case)
        return {a.seq: [(n.seq, n.body["principal"]["subject"], n.body["disposition"], n.body["note"])
                        for n in d.annotations_of(a)] for a in d.alerts}

    assert notes(case_id) == {
        **{a.seq: [] for a in members},
        members[0].seq: [(first.seq, ALICE.subject, "NOTE", "called the branch"),
                         (second.seq, BOB.subject, "CORRECTION", "should have held")],
        members[2].seq: [(third.seq, BOB.subject, "FALSE_POSITIVE", "payroll")]}
    assert notes(lone) == {elsewhere.seq: [(theirs.seq, ALICE.subject, "NOTE", "another case")]}
    d = case_detail(decided.engine, case_id)
    assert d.annotations_of(d.alerts[0])[1].body["correction"] == {"decision": "HOLD",
                                                                    "reason": "structuring"}
    assert d.annotations_of(get_alert(decided.engine, members[0].seq)) == ()  # an alert read alone has none
    # one query of the annotations' index for the whole case, however many alerts it holds
    for case in (case_id, lone):
        with statements(decided.engine, "audit_annotations") as seen:
            case_detail(decided.engine, case)
        assert len(seen) == 1, seen
    # an index row retargeted onto this case's decision (damage) shows no annotation under it
    drop_index_guards(decided.engine)
    sql(decided.engine, "UPDATE audit_annotations SET target_seq = ? WHERE seq = ?",
        members[1].seq, theirs.seq)
    assert notes(case_id)[members[1].seq] == []


@pytest.fixture
def sampled(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> Ledger:
    """Decisions opened under a sealed policy that draws every closed alert for quality assurance."""
    ledger = make_ledger(db, signer)
    set_policy(ledger, DeadlinePolicy(version="qa-all", qa_sample_permille=1000), ALICE, "QA every closure")
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(200))
    return ledger


def test_the_qa_view_lists_closed_alerts_awaiting_review_newest_first(sampled: Ledger, db: Db) -> None:
    catch_up(sampled.engine)
    quiet = [a.seq for a in rows(sampled.engine, alerts) if a.payment is None]
    assert len(quiet) >= 5
    for seq in quiet[:5]:
        act(sampled, ALICE, "close", alert=seq, disposition="NO_FURTHER_ACTION", rationale="explained")
    act(sampled, BOB, "qa_review", alert=quiet[1], verdict="AGREE", rationale="sound")  # reviewed: out
    act(sampled, BOB, "reopen", alert=quiet[3], rationale="new information")  # open again: out
    due = sorted((quiet[0], quiet[2], quiet[4]), reverse=True)
    today = date(2026, 12, 5)

    def walk(f: AlertFilter) -> list[int]:
        out: list[int] = []
        cursor = None
        while True:
            page = alert_page(sampled.engine, replace(f, cursor=cursor), today=today)
            assert len(page.items) <= f.limit and all(a.qa == "due" and not a.open for a in page.items)
            out += [a.seq for a in page.items]
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    assert walk(AlertFilter(view="qa", limit=2)) == due
    assert walk(AlertFilter(view="qa", limit=1, order="oldest")) == sorted(due)
    assert {a.seq for a in rows(sampled.engine, alerts, alerts.c.qa == "agreed")} == {quiet[1]}
    first = alert_page(sampled.engine, AlertFilter(view="qa", limit=1), today=today)
    with pytest.raises(CaseError, match="different filter"):  # a cursor of the qa view is bound to it
        AlertFilter(view="closed", limit=1, cursor=first.next_cursor)
    # one range of ix_audit_alerts_qa_seq, newest first: no scan of the closed alerts, no sort
    sql = str(_alert_query(AlertFilter(view="qa", limit=2, cursor=first.next_cursor), today.isoformat())
              .compile(sampled.engine, compile_kwargs={"literal_binds": True}))
    with sampled.engine.connect() as conn:
        if db.dialect == "postgresql":
            for knob in ("seqscan", "sort", "bitmapscan"):  # a tiny table: can an index serve it?
                conn.exec_driver_sql(f"SET enable_{knob} = off")
            plan = "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {sql}"))
            assert "ix_audit_alerts_qa_seq" in plan and "Seq Scan" not in plan, plan
            assert not re.search(r"Sort  \(", plan), plan
        else:
            plan = "\n".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
            assert "ix_audit_alerts_qa_seq" in plan and "TEMP B-TREE" not in plan, plan
            assert not re.search(r"^SCAN ", plan, re.M), plan
