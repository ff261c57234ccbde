"""The console in a real browser over mutual TLS: search, a decision's proof checked in the page,
a tampered database caught, four-eyes rule approval with two certificates, an export downloaded.

A real ``sealtrail serve`` (tests/api/server_proc.py) and Debian's Chromium driven by Playwright
(tests/api/console/browser.py); each role is its own browser context with its own certificate.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.bundle.verify import verify_bundle
from ledger.keys import load_signer
from tests.api import server_proc
from tests.api.console.browser import Browser, require_browser, score
from tests.api.server_proc import ServerProcess

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = require_browser()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = Browser(pw, executable)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, list[dict[str, Any]]]]:
    files = server_proc.prepare(tmp_path_factory.mktemp("console"))
    with server_proc.start(files) as srv:  # bundles go to ./exports in the server's directory
        decided = score(srv, 400)
        yield srv, decided
        srv.stop()


def open_decision(page: Any, srv: ServerProcess, trace_id: str) -> None:
    """Open a decision's page; sign a checkpoint from it first if none covers the entry yet."""
    page.goto(f"{srv.url}/console/decisions/{trace_id}")
    if page.locator("#sign-checkpoint").count():
        assert page.locator("#proof-status").get_attribute("data-state") == "uncovered"
        page.locator("#sign-checkpoint").click()
        page.wait_for_url(f"**/console/decisions/{trace_id}#proof")
    page.wait_for_selector("#proof-status:not([data-state=pending])")


def _first_with(decided: list[dict[str, Any]], outcome: str) -> dict[str, Any]:
    return next(d for d in decided if d["decision"] == outcome)


def test_search_then_open_a_decision_and_see_its_proof_verified(
        browser: Browser, server: tuple[ServerProcess, list[dict[str, Any]]]) -> None:
    srv, decided = server
    held = [d for d in decided if d["decision"] == "HOLD"]
    assert held, "the simulated traffic should hold some payments"
    with browser.as_role(srv, "officer") as page:
        page.goto(f"{srv.url}/console/search")
        page.select_option("select[name=decision]", "HOLD")
        page.locator("form.filters button[type=submit]").click()
        rows = page.locator("#results tr[data-trace-id]")
        rows.first.wait_for()
        shown = set(rows.evaluate_all("rs => rs.map(r => r.dataset.traceId)"))
        assert shown <= {d["trace_id"] for d in held}
        assert len(shown) == min(len(held), rows.count())
        target = rows.first.get_attribute("data-trace-id")
        rows.first.locator(f"a[href='/console/decisions/{target}']").click()
        page.wait_for_url(f"**/console/decisions/{target}")
        open_decision(page, srv, str(target))  # the 400 are newer than the last checkpoint: sign one
        status = page.locator("#proof-status")
        assert status.get_attribute("data-state") == "verified", status.inner_text()
        assert status.inner_text().startswith("Verified")
        assert "HOLD" in page.locator("main").inner_text()
        # an annotation is a new sealed entry on the page, with the decision's proof still intact
        page.select_option("#a-disposition", "ESCALATED")
        page.fill("#a-note", "Escalated to the FIU desk <b>not bold</b>")
        page.locator("form#annotate button[type=submit]").click()
        page.wait_for_url(f"**/console/decisions/{target}")
        entries = page.locator("#annotation-entries")
        assert "Escalated to the FIU desk <b>not bold</b>" in entries.inner_text()
        page.wait_for_selector("#proof-status:not([data-state=pending])")
        assert page.locator("#proof-status").get_attribute("data-state") == "verified"


def test_a_tampered_record_fails_in_the_page_and_in_verify_now(
        browser: Browser, tmp_path: Path) -> None:
    files = server_proc.prepare(tmp_path / "tamper")
    with server_proc.start(files) as srv:
        decided = score(srv, 60, seed=5)
        victim = _first_with(decided, "ALLOW")
        with browser.as_role(srv, "officer") as page:  # sealed, covered by a checkpoint, verified
            open_decision(page, srv, victim["trace_id"])
            assert page.locator("#proof-status").get_attribute("data-state") == "verified"
        db = sqlite3.connect(files.db.removeprefix("sqlite:///"))
        with db:  # what an insider with write access to the database file could do
            (record,) = db.execute("SELECT record FROM ledger_entries WHERE trace_id = ?",
                                   (victim["trace_id"],)).fetchone()
            forged = bytes(record).replace(b'"ALLOW"', b'"BLOCK"', 1)
            assert forged != bytes(record)
            db.execute("DROP TRIGGER ledger_entries_no_update")
            db.execute("UPDATE ledger_entries SET record = ? WHERE trace_id = ?",
                       (forged, victim["trace_id"]))
        db.close()
        with browser.as_role(srv, "officer") as page:
            open_decision(page, srv, victim["trace_id"])
            status = page.locator("#proof-status")
            assert status.get_attribute("data-state") == "failed", status.inner_text()
            assert status.inner_text().startswith("Failed")

            page.goto(f"{srv.url}/console/ledger")
            page.locator("form[action='/console/ledger/verify'] button").click()
            result = page.locator("#verify-result")
            result.wait_for()
            assert result.get_attribute("data-state") == "fail", result.inner_text()
            assert str(victim["ledger"]["seq"]) in result.inner_text()
        srv.stop()


def test_propose_and_approve_a_ruleset_with_two_certificates(
        browser: Browser, server: tuple[ServerProcess, list[dict[str, Any]]]) -> None:
    srv, _ = server
    with browser.as_role(srv, "officer") as officer:
        officer.goto(f"{srv.url}/console/rules/new")
        source = officer.locator("#source").input_value()
        assert "[[rules]]" in source
        # a compile error is shown inline, the text kept
        broken = source + ('\n[[rules]]\nid = "BROKEN"\nwhen = "amount_usd >>> 3"\noutcome = "HOLD"\n'
                           'reason = "never compiles"\nseverity = "low"\n')
        officer.locator("#source").fill(broken)
        officer.locator("#source").locator("xpath=ancestor::form").locator("button[type=submit]").click()
        errors = officer.locator("#compile-errors")
        errors.wait_for()
        assert "BROKEN" in errors.inner_text()
        assert officer.locator("#source").input_value() == broken
        # a good proposal: the same rules under a new version
        version = "2099.1.0"
        proposed = re.sub(r'(?m)^version\s*=\s*"[^"]*"', f'version = "{version}"', source, count=1)
        officer.locator("#source").fill(proposed)
        officer.locator("#source").locator("xpath=ancestor::form").locator("button[type=submit]").click()
        officer.wait_for_url(re.compile(r".*/console/rules/[^/]+%40" + re.escape(version) + "$"))
        ruleset_url = officer.url
        assert officer.locator(".badge[data-status]").first.get_attribute("data-status") == "proposed"
        assert officer.locator("#approve").count() == 0  # the proposer never sees the button

    with browser.as_role(srv, "approver") as approver:
        approver.goto(ruleset_url)
        approver.locator("#approve").click()
        approver.wait_for_url(ruleset_url)
        assert approver.locator(".badge[data-status]").first.get_attribute("data-status") == "approved"
        approver.locator("#activate").click()
        approver.wait_for_url(ruleset_url)
        assert approver.locator(".badge[data-status]").first.get_attribute("data-status") == "active"
        approver.goto(f"{srv.url}/console/rules")
        statuses = dict(approver.locator("#rulesets tr[data-ruleset]").evaluate_all(
            "rs => rs.map(r => [r.dataset.ruleset, r.querySelector('[data-status]').dataset.status])"))
        assert [s for r, s in statuses.items() if r.endswith("@" + version)] == ["active"]
        assert "retired" in statuses.values()

    with server_proc.ServerProcess.client(srv, "officer") as c:
        listed = c.get("/v1/rulesets").json()
    assert listed["active"].endswith("@" + version)


def test_create_and_download_an_export(browser: Browser, tmp_path: Path,
                                       server: tuple[ServerProcess, list[dict[str, Any]]]) -> None:
    srv, decided = server
    with browser.as_role(srv, "officer") as page:
        page.goto(f"{srv.url}/console/exports")
        page.locator("form[action='/console/exports'] button[type=submit]").click()
        created = page.locator("#export-created")
        created.wait_for()
        bundle_id = page.url.rsplit("created=", 1)[1]
        row = page.locator(f"#exports tr[data-bundle-id='{bundle_id}']")
        with page.expect_download() as dl:
            row.locator("a.download").click()
        path = tmp_path / "bundle.zip"
        dl.value.save_as(path)
    assert path.read_bytes()[:4] == b"PK\x03\x04"
    report = verify_bundle(path, [load_signer(srv.files.keys / "signing.key").verifier])  # raises if not
    assert report.decisions >= len(decided)
    assert report.replayed == report.decisions


def test_every_form_control_has_a_label_and_keyboard_reaches_the_search(
        browser: Browser, server: tuple[ServerProcess, list[dict[str, Any]]]) -> None:
    srv, _ = server
    unlabeled_js = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.name || e.id)"""
    with browser.as_role(srv, "officer") as page:
        for path in ("/console/overview", "/console/search", "/console/ledger", "/console/rules",
                     "/console/rules/new", "/console/exports"):
            page.goto(srv.url + path)
            assert page.evaluate(unlabeled_js) == [], path
        page.goto(f"{srv.url}/console/search")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent").strip() == "Skip to content"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"


def test_pages_fit_a_phone_screen_without_sideways_scrolling(
        browser: Browser, server: tuple[ServerProcess, list[dict[str, Any]]]) -> None:
    srv, decided = server
    with browser.as_role(srv, "officer", viewport={"width": 390, "height": 844}) as page:
        for path in ("/console/overview", "/console/search", f"/console/decisions/{decided[0]['trace_id']}",
                     "/console/ledger", "/console/rules", "/console/rules/new", "/console/exports"):
            page.goto(srv.url + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide"
