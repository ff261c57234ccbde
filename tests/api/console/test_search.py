"""The search page: filters give exactly the matching decisions, pages walk them all once,
refused values come back inline with 422, and only roles that may query see it."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from audit.query.traces import TraceFilter, query_traces
from tests.api.console.conftest import Console
from tests.api.test_fail_closed import txs

ROW = re.compile(r'<tr data-trace-id="([0-9a-f-]{36})">')
Scored = list[dict[str, Any]]
NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)">')


def rows(page: str) -> list[str]:
    """The trace ids of the results table, in page order."""
    return ROW.findall(page)


def field_error(page: str, name: str) -> str | None:
    """The inline error shown under form field ``name`` (None when the field is not marked)."""
    m = re.search(r'<div class="field invalid">\s*<label for="f-' + name + r'">.*?'
                  r'<p class="field-error" id="e-' + name + r'">(.*?)</p>', page, re.S)
    return html.unescape(m.group(1)) if m else None


@pytest.fixture
def scored(console: Console) -> list[dict[str, Any]]:
    """60 decisions with their payments, as the scoring path was answered."""
    out = console.score(60)
    for d, tx in zip(out, txs(60), strict=True):
        d["tx"] = json.loads(tx)
    return out


def expected(scored: Scored, keep: Any) -> list[str]:
    """Trace ids of the decisions ``keep`` selects, newest first (as the page lists them)."""
    return [d["trace_id"] for d in reversed(scored) if keep(d)]


def test_decision_filter_lists_exactly_those_decisions(console: Console, scored: Scored) -> None:
    counts = Counter(d["decision"] for d in scored)
    assert len(counts) >= 3  # the sample has several outcomes, so the filter has something to leave out
    for outcome in counts:
        r = console.get(f"/console/search?decision={outcome}&limit=1000")
        assert r.status_code == 200
        assert rows(r.text) == expected(scored, lambda d, o=outcome: d["decision"] == o)
        assert f'<option value="{outcome}" selected>' in r.text  # the form keeps the choice


def test_rule_filter_matches_the_decisions_it_fired_in(console: Console, scored: Scored) -> None:
    fired = Counter(h["id"] for d in scored for h in d["fired"])
    rule, _ = fired.most_common(1)[0]
    r = console.get(f"/console/search?rule={rule}&limit=1000")
    want = expected(scored, lambda d: rule in {h["id"] for h in d["fired"]})
    assert rows(r.text) == want and len(want) >= 2
    assert rule in r.text.split('id="results"')[1]  # the fired rules column names it


def test_account_filter_matches_originator_or_beneficiary(console: Console, scored: Scored) -> None:
    accounts = Counter(a for d in scored for a in (d["tx"]["originator"]["account"],
                                                   d["tx"]["beneficiary"]["account"]) if a)
    account, n = accounts.most_common(1)[0]
    assert n >= 2
    r = console.get("/console/search", params={"account": account, "limit": "1000"})
    want = expected(scored, lambda d: account in (d["tx"]["originator"]["account"],
                                                  d["tx"]["beneficiary"]["account"]))
    assert rows(r.text) == want
    page = query_traces(console.runtime.engine, TraceFilter(account=account, limit=1000))
    assert [t.trace_id for t in page.items] == want


def test_time_range_reads_a_time_without_offset_as_utc(console: Console, scored: Scored) -> None:
    since = scored[10]["recorded_at"].removesuffix("Z")  # as a datetime-local input sends it
    until = scored[20]["recorded_at"]
    r = console.get("/console/search", params={"since": since, "until": until, "limit": "1000"})
    assert r.status_code == 200
    assert rows(r.text) == [d["trace_id"] for d in reversed(scored[10:20])]
    assert f'value="{since}"' in r.text  # kept as typed
    assert "read as UTC" in r.text  # the hint says so


def test_principal_and_score_filters(console: Console, scored: Scored) -> None:
    r = console.get("/console/search", params={"score_min": "0.5", "score_max": "1", "limit": "1000"})
    assert rows(r.text) == expected(scored, lambda d: d["score"] is not None and d["score"] >= 0.5)
    fp = query_traces(console.runtime.engine, TraceFilter(limit=1)).items[0].principal_fp
    assert len(rows(console.get(f"/console/search?principal={fp.upper()}&limit=1000").text)) == 60
    assert rows(console.get(f"/console/search?principal={'0' * 64}").text) == []


def test_next_link_walks_every_row_once_keeping_the_filters(console: Console,
                                                             scored: Scored) -> None:
    want = expected(scored, lambda d: True)
    seen: list[str] = []
    href: str | None = "/console/search?limit=7"
    pages = 0
    while href is not None:
        r = console.get(href)
        assert r.status_code == 200, r.text
        page = rows(r.text)
        assert 0 < len(page) <= 7
        seen += page
        pages += 1
        m = NEXT.search(r.text)
        href = html.unescape(m.group(1)) if m else None
    assert seen == want and len(set(seen)) == len(seen)
    assert pages == 9  # 60 rows, 7 a page

    outcome = Counter(d["decision"] for d in scored).most_common(1)[0][0]
    r = console.get(f"/console/search?decision={outcome}&limit=5&account=")
    href = html.unescape(NEXT.search(r.text).group(1))  # type: ignore[union-attr]
    q = parse_qs(urlsplit(href).query)
    assert q["decision"] == [outcome] and q["limit"] == ["5"] and "cursor" in q and "account" not in q
    assert set(rows(console.get(href).text)) <= set(expected(scored, lambda d: d["decision"] == outcome))


def test_last_page_has_no_next_link(console: Console, scored: Scored) -> None:
    r = console.get("/console/search?limit=60")
    assert len(rows(r.text)) == 60
    assert NEXT.search(r.text) is None


def test_bad_filters_are_refused_inline_keeping_what_was_typed(console: Console,
                                                                scored: Scored) -> None:
    r = console.get("/console/search", params={"since": "yesterday", "score_min": "high", "score_max": "2",
                                               "rule": "not a rule", "limit": "0", "account": "DE89"})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/html")
    assert "ISO 8601" in (field_error(r.text, "since") or "")
    assert "number" in (field_error(r.text, "score_min") or "")
    assert "[0, 1]" in (field_error(r.text, "score_max") or "")
    assert "rule id" in (field_error(r.text, "rule") or "")
    assert "1..1000" in (field_error(r.text, "limit") or "")
    assert field_error(r.text, "account") is None  # a good value is not marked
    for typed in ('value="yesterday"', 'value="high"', 'value="not a rule"', 'value="DE89"'):
        assert typed in r.text
    assert 'id="results"' not in r.text


def test_filters_that_contradict_each_other_are_refused(console: Console) -> None:
    r = console.get("/console/search?since=2026-12-03T10:00Z&until=2026-12-03T09:00Z")
    assert r.status_code == 422
    assert "later than since" in (field_error(r.text, "until") or "")
    r = console.get("/console/search?score_min=0.8&score_max=0.2")
    assert "below score_min" in (field_error(r.text, "score_max") or "")


def test_a_forged_cursor_is_refused_with_a_way_back(console: Console, scored: Scored) -> None:
    r = console.get("/console/search?decision=ALLOW&cursor=dDEuOTk5LmRlYWRiZWVm")
    assert r.status_code == 422
    assert "different filter" in html.unescape(r.text)
    assert 'href="/console/search?decision=ALLOW&amp;limit=50">Start from the first page' in r.text


def test_an_empty_result_says_so(console: Console, scored: Scored) -> None:
    r = console.get("/console/search?since=2099-01-01T00:00")
    assert r.status_code == 200
    assert 'id="no-results"' in r.text and "No decisions match" in r.text
    assert rows(r.text) == []


def test_each_row_shows_the_decision_and_links_to_its_page(console: Console,
                                                            scored: Scored) -> None:
    d = next(d for d in scored if d["fired"])
    r = console.get(f"/console/search?until={d['recorded_at']}&limit=1000")  # d is just past this page
    assert d["trace_id"] not in rows(r.text)
    r = console.get("/console/search?limit=1000")
    row = r.text.split(f'<tr data-trace-id="{d["trace_id"]}">')[1].split("</tr>")[0]
    assert f'href="/console/decisions/{d["trace_id"]}"' in row
    assert f'badge {d["decision"]}' in row
    assert f'{d["score"]:.4f}' in row
    assert all(h["id"] in row for h in d["fired"])
    assert "CN=sealtrail-scorer" in row and "aml_core@" in row
    assert d["recorded_at"] in row


def test_hostile_filter_values_are_rendered_escaped(console: Console) -> None:
    r = console.get("/console/search", params={"account": '"><script>alert(1)</script>',
                                               "principal": "<b>x</b>"})
    assert "<script>alert(1)" not in r.text and "<b>x</b>" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text


@pytest.mark.parametrize("role", ["scorer", "approver"])
def test_roles_that_may_not_query_get_a_403_page(console: Console, role: str) -> None:
    r = console.get("/console/search", role=role)
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("text/html")
    assert "traces.query" in r.text


@pytest.mark.parametrize("role", ["officer", "regulator", "admin"])
def test_roles_that_may_query_see_the_form(console: Console, role: str) -> None:
    r = console.get("/console/search", role=role)
    assert r.status_code == 200
    assert '<form class="filters" method="get" action="/console/search">' in r.text


def test_each_row_shows_its_account_risk_and_alert(console: Console, scored: Scored) -> None:
    page = console.get("/console/search?limit=1000").text
    body = page.split('id="results"')[1]
    for d in scored:
        risk = d["account_risk"]
        row = body.split(f'<tr data-trace-id="{d["trace_id"]}">')[1].split("</tr>")[0]
        assert f'{risk["max_milli"] / 1000:.3f}' in row
        assert (">alert</span>" in row) is bool(risk["alerts"])
