"""The case list (``case_page``) and one alert (``get_alert``): keyset pages bound to their filter,
each view, and bad filters refused naming the field."""

from __future__ import annotations

from dataclasses import replace

import pytest

from audit.cases.query import CaseFilter, case_page, get_alert
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases
from audit.errors import CaseError, CaseNotFoundError
from ledger.append import Ledger
from tests.audit.cases.test_cases import ALICE, BOB, decided, rows  # noqa: F401  (a fixture)


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
