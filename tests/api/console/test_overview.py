"""The overview page: its counts are the decisions scored, the window selector narrows them, a
large window says it is cut, callers who may not query traces go to the ledger page, and a bad
window is a 422 naming its field with what was typed kept."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.certs import role_uri
from api.console import overview
from api.roles import ROLES, role_map_toml
from tests.api.console.conftest import Console
from tests.api.test_fail_closed import in_process
from tests.conftest import Db
from wasm_rules import OUTCOMES

CHARTS = ("chart-outcomes", "chart-rules", "chart-scores", "chart-latency")


def counts(html: str) -> dict[str, int]:
    return {o: int(n) for o, n in re.findall(r'data-outcome="(\w+)" data-count="(\d+)"', html)}


def test_the_counts_are_the_decisions_scored_and_every_chart_is_there(console: Console) -> None:
    decided = console.score(30, seed=22)  # a stretch of simulated traffic where some rule fires
    r = console.get("/console/overview")
    assert r.status_code == 200, r.text
    want = Counter(d["decision"] for d in decided)
    assert counts(r.text) == {**{o: want.get(o, 0) for o in OUTCOMES}, "total": 30}
    for chart in CHARTS:
        m = re.search(rf'<figure class="chart" id="{chart}">(.*?)</figure>', r.text, re.S)
        assert m is not None, chart
        assert "<details>" in m.group(1) and "Show the numbers" in m.group(1)
    fired = Counter(rule for d in decided for rule in {h["id"] for h in d["fired"]})
    assert fired  # the simulated payments make some rule fire
    assert r.text.count('role="img"') == 4
    table = re.findall(r'<th scope="row"><a href="/console/search\?rule=(\w+)&amp;[^"]*">\1</a></th>'
                       r'<td class="num">(\d+)</td>', r.text)
    assert sorted(table, key=lambda t: (-int(t[1]), t[0])) == table
    assert [(rule, int(n)) for rule, n in table] == sorted(fired.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert "The window ends at the newest decision." in r.text
    assert "the newest 30 decisions of the window" in r.text
    assert 'style="' not in r.text and "<script" not in r.text  # the CSP allows neither


def test_the_window_selector_narrows_the_counts(console: Console) -> None:
    decided = console.score(12)
    r = console.get("/console/overview")
    assert '<form class="filters" method="get" action="/console/overview" id="window-form">' in r.text
    assert all(f'<option value="{k}"' in r.text for k in ("1h", "24h", "7d", "30d"))
    assert '<option value="24h" selected>' in r.text
    fifth = decided[4]["recorded_at"]
    r = console.get("/console/overview", params={"since": fifth, "span": "7d"})
    assert r.status_code == 200 and counts(r.text)["total"] == 8
    assert '<option value="7d" selected>' in r.text and f'value="{fifth}"' in r.text
    r = console.get("/console/overview", params={"until": fifth, "span": "1h"})
    assert counts(r.text)["total"] == 4
    naive = fifth.rstrip("Z")  # a datetime-local value: read as UTC
    r = console.get("/console/overview", params={"since": naive, "until": decided[-1]["recorded_at"]})
    assert counts(r.text)["total"] == 7
    r = console.get("/console/overview", params={"until": decided[0]["recorded_at"]})
    assert counts(r.text)["total"] == 0 and r.text.count("No decisions in this window.") >= 4


def test_a_window_over_the_cap_says_it_shows_the_newest(console: Console,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    decided = console.score(9)
    monkeypatch.setattr(overview, "CAP", 5)
    monkeypatch.setattr(overview, "LATENCY_SAMPLE", 3)
    r = console.get("/console/overview")
    assert counts(r.text)["total"] == 5
    assert 'id="window-truncated"' in r.text and "holds more than 5 decisions" in r.text
    assert f"recorded from {decided[3]['recorded_at']}" in r.text  # the newest 5 are after the 4th
    assert "the newest 3 decisions of the window (at most 3 are read)" in r.text


def test_an_empty_ledger_shows_a_window_ending_at_the_clock(console: Console,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overview, "clock", lambda: datetime(2026, 12, 3, 10, 0, tzinfo=UTC))
    r = console.get("/console/overview", params={"span": "1h"})
    assert r.status_code == 200
    assert counts(r.text)["total"] == 0 and "The window ends now." in r.text
    assert '<time datetime="2026-12-03T09:00:00.000000Z">' in r.text
    assert "<svg" not in r.text and r.text.count("No decisions in this window.") >= 4


@pytest.mark.parametrize("role", ["approver", "scorer"])
def test_callers_who_may_not_query_traces_go_to_the_ledger_page(console: Console, role: str) -> None:
    r = console.get("/console/overview", role=role, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/console/ledger"


@pytest.mark.parametrize("role", ["regulator", "admin"])
def test_readers_of_traces_see_the_overview(console: Console, role: str) -> None:
    assert console.get("/console/overview", role=role).status_code == 200


@pytest.mark.parametrize(("params", "field", "message"), [
    ({"since": "yesterday"}, "since", "is not an ISO 8601 time"),
    ({"until": "2026-13-01T00:00Z"}, "until", "is not an ISO 8601 time"),
    ({"since": "2026-12-03T10:00Z", "until": "2026-12-03T09:00Z"}, "until", "must be later than since"),
    ({"span": "1y"}, "span", "is not one of 1h, 24h, 7d, 30d"),
    ({"since": (datetime.now(UTC) + timedelta(days=400)).isoformat()}, "since", "must be earlier than now"),
])
def test_a_bad_window_is_refused_naming_its_field(console: Console, params: dict[str, str], field: str,
                                                 message: str) -> None:
    r = console.get("/console/overview", params=params)
    assert r.status_code == 422
    m = re.search(rf'<p class="field-error" id="we-{field}">([^<]*)</p>', r.text)
    assert m is not None and message in m.group(1), r.text
    assert f'id="w-{field}"' in r.text and 'aria-invalid="true"' in r.text
    if field != "span":
        assert f'value="{params[field]}"' in r.text  # what was typed is kept
    assert "chart-outcomes" not in r.text


def test_a_certificate_with_no_role_gets_the_403_page_not_a_redirect(sqlite_db: Db, tmp_path: Path) -> None:
    roles = tmp_path / "roles-without-regulator.toml"  # the regulator's certificate maps to no role
    roles.write_text(role_map_toml([("san_uri", role_uri(r), [r]) for r in ROLES if r != "regulator"]),
                     encoding="utf-8")
    with in_process(sqlite_db, tmp_path, roles_file=roles) as (client, _, _s):
        r = client.get("/console", headers={"x-test-role": "regulator"}, follow_redirects=False)
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        assert "roles: none" in r.text
        assert client.get("/console", headers={"x-test-role": "approver"},
                          follow_redirects=False).headers["location"] == "/console/ledger"
