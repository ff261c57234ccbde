"""The rules pages: rulesets and their status, propose with compile errors inline (nothing
written), four-eyes (no Approve button for the proposer, and the server refuses it anyway),
approve, activate (the previous one retires, the pipeline switches), cases re-run with
pass/fail and nothing recorded; each rule's performance once its alerts are worked (the values
``audit.cases.performance`` gives, and its CSV), for the roles that may read it; callers without
the role get 403 pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from api.certs import role_uri
from api.roles import ROLES, role_map_toml
from audit.cases.performance import Performance, model_performance, rule_performance, to_csv
from audit.governance import service as gov
from ledger import store
from tests.api.console.conftest import Console
from tests.api.console.dom import Node, dom, textarea
from tests.api.test_fail_closed import in_process
from tests.api.test_performance_api import work
from tests.conftest import Db

PACK = gov.DEFAULT_PACK.read_text(encoding="utf-8")
SHIPPED_VERSION = re.search(r'^version = "([^"]+)"', PACK, re.M).group(1)  # type: ignore[union-attr]
CASES = gov.DEFAULT_PACK.with_name("aml_core_cases.jsonl").read_text(encoding="utf-8")
BOOT = f"aml_core@{SHIPPED_VERSION}"
NEXT_VERSION = f"{SHIPPED_VERSION}.1"  # a version the shipped pack never had
NEXT = f"aml_core@{NEXT_VERSION}"
def size(c: Console) -> int:
    with c.runtime.engine.connect() as conn:
        return store.tail(conn)[0]


def page_url(ruleset: str) -> str:
    return f"/console/rules/{quote(ruleset, safe='')}"


def modified(version: str = NEXT_VERSION, threshold: str = "3") -> str:
    """The shipped pack under another version, the structuring threshold changed."""
    src = PACK.replace(f'version = "{SHIPPED_VERSION}"', f'version = "{version}"')
    return src.replace('when = "orig_near_threshold_count_24h >= 3 and ',
                       f'when = "orig_near_threshold_count_24h >= {threshold} and ')


def propose(c: Console, source: str, role: str = "officer", **extra: str) -> object:
    return c.post_form("/console/rules", {"source": source, **extra}, role=role)


def row(page: Node, ruleset: str) -> Node:
    return page.one("table", id="rulesets").one("tr", data_ruleset=ruleset)


# -- the list and the propose form ---------------------------------------------------------------


def test_list_shows_the_bootstrapped_active_ruleset_with_its_page_link(console: Console) -> None:
    r = console.get("/console/rules")
    assert r.status_code == 200
    tr = row(dom(r.text), BOOT)
    badge = tr.one("span", data_status="active")
    assert "badge" in badge.attrs["class"] and "active" in badge.attrs["class"]
    assert tr.one("a").attrs["href"] == f"/console/rules/aml_core%40{SHIPPED_VERSION}"
    sha = console.runtime.governance.get(BOOT).module_sha256
    assert tr.one("code").attrs["title"] == sha and sha[:12] in tr.text()
    n = len(gov.DEFAULT_PACK.with_name("aml_core_cases.jsonl").read_text(encoding="utf-8").splitlines())
    assert f"{n}/{n} passed" in tr.text()
    assert dom(r.text).has("a", href="/console/rules/new")  # the officer may propose


def test_the_propose_link_is_only_for_proposers(console: Console) -> None:
    for role in ("approver", "regulator", "admin"):
        r = console.get("/console/rules", role=role)
        assert r.status_code == 200 and not dom(r.text).has("a", href="/console/rules/new")


def test_propose_form_is_prefilled_with_the_active_source_from_the_ledger(console: Console) -> None:
    page = dom(console.get("/console/rules/new").text)
    assert textarea(page, "source") == PACK
    assert "recorded in the ledger" in page.one(id="source-origin").text()
    assert page.one("form", id="propose-form").attrs["action"] == "/console/rules"
    assert page.one("input", id="source-file").attrs["data-load-into"] == "source"
    assert page.one("label", for_="source-file").text().startswith("Load a TOML file")


def test_the_recorded_source_is_read_back_on_each_dialect(console_any: Console) -> None:
    assert textarea(dom(console_any.get("/console/rules/new").text), "source") == PACK
    assert propose(console_any, modified()).status_code == 303
    shown = dom(console_any.get(page_url(NEXT)).text)
    assert shown.one("pre", id="ruleset-source").text() == " ".join(modified().split())


def test_officer_proposes_a_modified_pack_and_it_is_listed_as_proposed(console: Console) -> None:
    r = propose(console, modified(), comment="structuring at 4")
    assert r.status_code == 303, r.text
    assert r.headers["location"] == page_url(NEXT)
    view = console.runtime.governance.get(NEXT)
    assert view.status == "proposed" and view.proposed.subject == "CN=sealtrail-officer,O=sealtrail dev"
    listed = dom(console.get("/console/rules").text)
    assert row(listed, NEXT).has("span", data_status="proposed")
    assert row(listed, BOOT).has("span", data_status="active")
    shown = dom(console.get(r.headers["location"]).text)
    assert shown.one(id="ruleset-status").attrs["data-status"] == "proposed"
    assert "structuring at 4" in shown.one("table", id="steps").text()


def test_a_compile_error_is_shown_inline_naming_rule_and_line_and_nothing_written(console: Console) -> None:
    bad = modified(threshold="")  # "orig_near_threshold_count_24h >=  and ..." does not parse
    line = next(i for i, text in enumerate(bad.splitlines(), 1)
                if text.startswith('when = "orig_near_threshold_count_24h >=  and '))
    before = size(console)
    r = propose(console, bad)
    assert r.status_code == 422
    page = dom(r.text)
    errors = page.one(id="compile-errors")
    assert errors.attrs["role"] == "alert"
    item = errors.one("li")
    assert item.attrs["data-rule"] == "STRUCTURING_ORIG_24H" and item.attrs["data-line"] == str(line)
    assert "STRUCTURING_ORIG_24H" in item.text() and f"line {line}" in item.text()
    assert textarea(page, "source") == bad  # what the user typed is kept
    assert size(console) == before
    assert [v.id for v in console.runtime.governance.list()] == [BOOT]


def test_failing_cases_refuse_the_proposal_naming_each_case(console: Console) -> None:
    before = size(console)
    r = propose(console, modified(threshold="4"), cases=CASES)
    assert r.status_code == 422
    errors = dom(r.text).one(id="compile-errors")
    assert "test case" in errors.text() and "STRUCTURING_ORIG_24H" in errors.text()
    assert errors.all("li") and all(li.attrs["data-line"] for li in errors.all("li"))
    assert textarea(dom(r.text), "cases") == CASES
    assert size(console) == before


@pytest.mark.parametrize(("source", "status", "says"), [
    (PACK, 409, "proposed before"),
    ("", 422, "empty"),
    ("[ruleset\nid = 1", 422, "TOML"),
])
def test_refused_sources_rerender_the_form(console: Console, source: str, status: int, says: str) -> None:
    before = size(console)
    r = propose(console, source)
    assert r.status_code == status
    assert says in dom(r.text).one(id="compile-errors").text()
    assert size(console) == before


# -- four-eyes, approve, activate ----------------------------------------------------------------


def test_approve_button_is_absent_for_the_proposer_and_present_for_an_approver(console: Console) -> None:
    propose(console, modified())
    officer = dom(console.get(page_url(NEXT)).text)
    assert not officer.has(id="approve") and not officer.has(id="activate")
    assert "another approver must approve it" in officer.one(id="own-proposal").text()
    approver = dom(console.get(page_url(NEXT), role="approver").text)
    form = approver.one("form", id="approve-form")
    assert form.attrs["action"] == page_url(NEXT) + "/approve"
    sha = console.runtime.governance.get(NEXT).module_sha256
    assert form.one("input", name="module_sha256").attrs["value"] == sha
    assert form.has("button", id="approve") and not approver.has(id="own-proposal")


def test_approve_then_activate_retires_the_bootstrapped_ruleset(console: Console) -> None:
    propose(console, modified())
    sha = console.runtime.governance.get(NEXT).module_sha256
    r = console.post_form(page_url(NEXT) + "/approve", {"module_sha256": sha, "comment": "reviewed"},
                          role="approver")
    assert r.status_code == 303 and r.headers["location"] == page_url(NEXT)
    view = console.runtime.governance.get(NEXT)
    assert view.status == "approved" and view.approved is not None and view.approved.comment == "reviewed"
    page = dom(console.get(page_url(NEXT), role="approver").text)
    assert not page.has(id="approve") and page.has("button", id="activate")
    r = console.post_form(page_url(NEXT) + "/activate", {"module_sha256": sha}, role="admin")
    assert r.status_code == 303 and r.headers["location"] == page_url(NEXT)
    gv = console.runtime.governance
    assert gv.get(NEXT).status == "active" and gv.get(BOOT).status == "retired"
    assert console.runtime.pipeline.rules.module.manifest.version == NEXT_VERSION  # the next batch uses it
    listed = dom(console.get("/console/rules").text)
    assert row(listed, NEXT).has("span", data_status="active")
    assert row(listed, BOOT).has("span", data_status="retired")
    assert console.score(1)[0]["decision"]  # scoring goes on with the new module
    back = dom(console.get(page_url(BOOT), role="approver").text)
    assert back.has("button", id="activate")  # a retired, once-active ruleset may return


def test_a_version_with_every_allowed_character_reaches_its_own_page_and_actions(console: Console) -> None:
    odd = "2026.12.2-rc_1.X"  # a version is [A-Za-z0-9][A-Za-z0-9._-]{0,63}: '/', '?', '#', '%' are refused
    r = propose(console, modified(version=odd))
    assert r.status_code == 303
    rid = f"aml_core@{odd}"
    assert r.headers["location"] == "/console/rules/aml_core%402026.12.2-rc_1.X"
    page = dom(console.get(r.headers["location"], role="approver").text)
    assert page.one("h1").one("code").text() == rid
    action = page.one("form", id="approve-form").attrs["action"]
    assert console.post_form(action, {}, role="approver").status_code == 303
    assert console.runtime.governance.get(rid).status == "approved"


def test_approving_a_module_other_than_the_one_shown_is_refused(console: Console) -> None:
    propose(console, modified())
    r = console.post_form(page_url(NEXT) + "/approve", {"module_sha256": "0" * 64}, role="approver")
    assert r.status_code == 409 and r.headers["content-type"].startswith("text/html")
    assert console.runtime.governance.get(NEXT).status == "proposed"


def test_activating_a_proposed_ruleset_is_refused(console: Console) -> None:
    propose(console, modified())
    before = size(console)
    r = console.post_form(page_url(NEXT) + "/activate", {}, role="admin")
    assert r.status_code == 409
    assert size(console) == before and console.runtime.governance.get(NEXT).status == "proposed"


@pytest.fixture
def two_hats(sqlite_db: Db, tmp_path: Path) -> Iterator[Console]:
    """The console where the officer's certificate also holds the approver role."""
    roles = tmp_path / "roles-two-hats.toml"
    roles.write_text(role_map_toml([*(("san_uri", role_uri(r), [r]) for r in ROLES),
                                    ("san_uri", role_uri("officer"), ["approver"])]), encoding="utf-8")
    with in_process(sqlite_db, tmp_path, roles_file=roles) as (client, rt, s):
        yield Console(client, rt, s)


def test_a_proposer_who_is_also_an_approver_sees_no_button_and_is_refused(two_hats: Console) -> None:
    propose(two_hats, modified())
    page = dom(two_hats.get(page_url(NEXT)).text)
    assert "approver" in page.one("p", class_="who").text()  # the officer does hold both roles
    assert not page.has(id="approve")
    assert "another approver must approve it" in page.one(id="own-proposal").text()
    before = size(two_hats)
    sha = two_hats.runtime.governance.get(NEXT).module_sha256
    r = two_hats.post_form(page_url(NEXT) + "/approve", {"module_sha256": sha})  # as the proposer
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    assert "four-eyes" in r.text
    assert size(two_hats) == before and two_hats.runtime.governance.get(NEXT).status == "proposed"


def test_an_officer_without_the_approver_role_is_refused_approval(console: Console) -> None:
    propose(console, modified())
    r = console.post_form(page_url(NEXT) + "/approve", {})
    assert r.status_code == 403
    assert console.runtime.governance.get(NEXT).status == "proposed"


# -- test cases ----------------------------------------------------------------------------------


def test_the_shipped_cases_are_offered_and_pass_on_the_recorded_module(console: Console) -> None:
    page = dom(console.get(page_url(BOOT)).text)
    assert textarea(page, "cases") == CASES
    assert "aml_core_cases.jsonl" in page.one(id="cases-origin").text()
    before = size(console)
    r = console.post_form(page_url(BOOT) + "/cases", {"cases": CASES})
    assert r.status_code == 200
    results = dom(r.text).one("table", id="case-results")
    rows = results.one("tbody").all("tr")
    assert len(rows) == CASES.count("\n") and all(tr.attrs["data-result"] == "pass" for tr in rows)
    assert all(tr.has("span", class_="badge pass") for tr in rows)
    assert results.attrs["data-same-file"] == "true"
    assert "equals the one recorded at proposal" in dom(r.text).one(id="case-outcome").text()
    assert size(console) == before  # running cases records nothing


def test_a_changed_case_fails_and_the_file_is_not_the_recorded_one(console: Console) -> None:
    lines = CASES.splitlines(keepends=True)
    assert '"decision": "HOLD"' in lines[2]
    lines[2] = lines[2].replace('"decision": "HOLD"', '"decision": "ALLOW"')
    r = console.post_form(page_url(BOOT) + "/cases", {"cases": "".join(lines)}, role="regulator")
    assert r.status_code == 200
    page = dom(r.text)
    failed = page.one("table", id="case-results").all("tr", data_result="fail")
    assert [tr.attrs["data-case-line"] for tr in failed] == ["3"]
    assert failed[0].has("span", class_="badge fail") and "decision HOLD, expected ALLOW" in failed[0].text()
    assert page.one("table", id="case-results").attrs["data-same-file"] == "false"
    assert "differs" in page.one(id="case-outcome").text()


def test_a_cases_file_that_does_not_parse_is_refused_inline(console: Console) -> None:
    before = size(console)
    r = console.post_form(page_url(BOOT) + "/cases", {"cases": '{"case": "x", "features": {"nope": 1}, '
                                                                '"expect": {"decision": "ALLOW"}}\n'})
    assert r.status_code == 422
    page = dom(r.text)
    assert "unknown feature" in page.one(id="cases-error").text() and not page.has(id="case-results")
    assert textarea(page, "cases").startswith('{"case": "x"')
    assert page.one("textarea", id="cases").attrs["aria-invalid"] == "true"
    assert size(console) == before


def test_too_many_cases_at_once_are_refused_inline(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    from api.console import rules_data
    lines = [line for line in CASES.splitlines() if line.strip()]
    monkeypatch.setattr(rules_data, "MAX_CASES", len(lines) - 1)
    r = console.post_form(page_url(BOOT) + "/cases", {"cases": CASES})
    assert r.status_code == 422
    assert f"at most {len(lines) - 1:,}" in dom(r.text).one(id="cases-error").text()


# -- roles and unknown rulesets ------------------------------------------------------------------


def test_scorer_gets_403_pages_everywhere(console: Console) -> None:
    sha = console.runtime.governance.get(BOOT).module_sha256
    for path in ("/console/rules", "/console/rules/new", page_url(BOOT)):
        r = console.get(path, role="scorer")
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html"), path
    before = size(console)
    for path, data in (("/console/rules", {"source": modified()}),
                       (page_url(BOOT) + "/approve", {"module_sha256": sha}),
                       (page_url(BOOT) + "/activate", {}), (page_url(BOOT) + "/cases", {"cases": CASES})):
        assert console.post_form(path, data, role="scorer").status_code == 403, path
    assert size(console) == before


def test_only_officers_may_propose(console: Console) -> None:
    for role in ("approver", "regulator", "admin"):
        assert console.get("/console/rules/new", role=role).status_code == 403
        assert propose(console, modified(), role=role).status_code == 403
    assert [v.id for v in console.runtime.governance.list()] == [BOOT]


def test_an_unknown_ruleset_is_a_404_page(console: Console) -> None:
    r = console.get(page_url("nope@1"))
    assert r.status_code == 404 and "nope@1" in r.text


# -- how the rules perform -----------------------------------------------------------------------

COLUMNS = ("hits", "alerts", "open", "closed", "false_positive_rate", "report_conversion",
           "median_hours_to_close")
COUNTS = COLUMNS[:4]


def shown(tr: Node) -> dict[str, Any]:
    """A performance row's exact values, from its cells' data-value (empty: none)."""
    out: dict[str, Any] = {}
    for col in COLUMNS:
        raw = tr.one("td", data_col=col).attrs["data-value"]
        out[col] = None if raw == "" else (int(raw) if col in COUNTS else float(raw))
    return out


def expected(p: Performance | None) -> dict[str, Any]:
    if p is None:  # never fired on this ruleset's decisions
        return {"hits": 0, "alerts": 0, "open": 0, "closed": 0, "false_positive_rate": None,
                "report_conversion": None, "median_hours_to_close": None}
    return {col: getattr(p, col) for col in COLUMNS}


@pytest.fixture
def worked(console: Console) -> Console:
    """The console after 150 payments and officers' work on their alerts (every disposition)."""
    console.score(150, checkpoint=False)
    work(console.runtime)
    return console


def test_the_list_shows_every_rules_performance_with_csv_links(worked: Console) -> None:
    rows = rule_performance(worked.runtime.engine)
    assert any(p.closed and p.false_positive_rate not in (0.0, 1.0) for p in rows)  # something to show
    page = dom(worked.get("/console/rules").text)
    table = page.one("table", id="rule-performance")
    trs = table.one("tbody").all("tr")
    assert [(tr.attrs["data-rule"], tr.attrs["data-ruleset"]) for tr in trs] == [
        (p.key, p.group) for p in rows]
    for tr, p in zip(trs, rows, strict=True):
        assert shown(tr) == expected(p), p.key
        assert tr.one("a").attrs["href"] == page_url(p.group)
    rate = next(p for p in rows if p.false_positive_rate not in (None, 0.0, 1.0))
    tr = table.one("tr", data_rule=rate.key, data_ruleset=rate.group)
    cell = tr.one("td", data_col="false_positive_rate")
    assert cell.text() == f"{rate.false_positive_rate * 100:.1f}%"  # type: ignore[operator]
    assert cell.attrs["title"] == f"{rate.false_positive} of {rate.closed} closed"
    for ident, path, want in (("rule-performance-csv", "/v1/performance/rules", rows),
                              ("model-performance-csv", "/v1/performance/models",
                               model_performance(worked.runtime.engine))):
        link = page.one("a", id=ident)
        assert link.attrs["href"] == f"{path}?format=csv" and "download" in link.attrs
        r = worked.get(link.attrs["href"])  # the browser's certificate downloads it
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        assert r.text == to_csv(want)


def test_the_ruleset_page_shows_each_of_its_rules_performance(worked: Console) -> None:
    mine = {p.key: p for p in rule_performance(worked.runtime.engine) if p.group == BOOT}
    assert mine and any(p.closed for p in mine.values())
    for role in ("officer", "approver", "regulator"):
        page = dom(worked.get(page_url(BOOT), role=role).text)
        rules = page.one("table", id="rules")
        assert [th.text() for th in rules.one("thead").all("th")][2:] == [
            "Hits", "Alerts", "Open", "Closed", "False-positive rate", "Report conversion",
            "Median hours to close"]
        view = worked.runtime.governance.get(BOOT)
        assert len(view.rules) > len(mine)  # some rules never fired: shown as zeros
        for rule_id, _ in view.rules:
            assert shown(rules.one("tr", data_rule=rule_id)) == expected(mine.get(rule_id)), (role, rule_id)
        assert page.has("a", id="rule-performance-csv")


def test_an_admin_sees_the_rulesets_but_not_how_their_alerts_were_closed(worked: Console) -> None:
    listed = dom(worked.get("/console/rules", role="admin").text)
    assert listed.has("table", id="rulesets") and not listed.has("table", id="rule-performance")
    assert not listed.has("a", id="rule-performance-csv")
    page = dom(worked.get(page_url(BOOT), role="admin").text)
    assert [th.text() for th in page.one("table", id="rules").one("thead").all("th")] == ["Rule", "Outcome"]
    assert not page.has("td", data_col="hits") and not page.has("a", id="rule-performance-csv")
    assert worked.get("/v1/performance/rules?format=csv", role="admin").status_code == 403


def test_before_any_decision_the_tables_say_so(console: Console) -> None:
    page = dom(console.get("/console/rules", role="regulator").text)
    assert "No rule has fired" in page.one("table", id="rule-performance").text()
    rules = dom(console.get(page_url(BOOT), role="regulator").text).one("table", id="rules")
    assert all(shown(tr)["hits"] == 0 for tr in rules.one("tbody").all("tr"))
