"""Screenshots of the console's main pages for the README and docs/console.md: ``make screenshots``.

Starts a real ``sealtrail serve`` over mutual TLS on a scratch ledger, scores simulated traffic,
proposes a ruleset and cuts an export, then photographs each page in Debian's Chromium (the
same harness as tests/api/console/test_browser.py) into docs/console/*.png.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.api import server_proc
from tests.api.console.browser import CHROMIUM, Browser, score
from tests.api.console.test_browser import open_decision

OUT = Path(__file__).parent / "console"
VIEW = {"width": 1280, "height": 860}


def main() -> int:
    if CHROMIUM is None:
        print("chromium is not installed: run .ci/browser (as root) first", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        files = server_proc.prepare(Path(tmp))
        browser = Browser(pw, CHROMIUM)
        with server_proc.start(files) as srv:
            decided = score(srv, 1000, seed=7) + score(srv, 1000, seed=8)
            held = next(d for d in decided if d["decision"] == "HOLD")
            with browser.as_role(srv, "officer", viewport=VIEW) as page:
                page.goto(f"{srv.url}/console")
                page.screenshot(path=OUT / "overview.png", full_page=True)
                page.goto(f"{srv.url}/console/search?decision=HOLD&limit=20")
                page.screenshot(path=OUT / "search.png", full_page=True)
                open_decision(page, srv, held["trace_id"])
                page.screenshot(path=OUT / "decision.png", full_page=True)
                page.goto(f"{srv.url}/console/ledger")
                page.locator("form[action='/console/ledger/verify'] button").click()
                page.locator("#verify-result").wait_for()
                page.screenshot(path=OUT / "ledger.png", full_page=True)
                page.goto(f"{srv.url}/console/rules/new")
                source = page.locator("#source").input_value()
                page.locator("#source").fill(re.sub(r'(?m)^version\s*=\s*"[^"]*"', 'version = "2099.1.0"',
                                                    source, count=1))
                page.locator("#source").locator("xpath=ancestor::form").locator("button[type=submit]").click()
                page.wait_for_url(re.compile(r".*/console/rules/[^/]+%402099\.1\.0$"))
                ruleset_url = page.url
                page.goto(f"{srv.url}/console/exports")
                page.locator("form[action='/console/exports'] button[type=submit]").click()
                page.locator("#export-created").wait_for()
                page.screenshot(path=OUT / "exports.png", full_page=True)
            with browser.as_role(srv, "approver", viewport=VIEW) as page:
                page.goto(ruleset_url)
                page.screenshot(path=OUT / "ruleset.png", full_page=True)
                page.goto(f"{srv.url}/console/rules")
                page.screenshot(path=OUT / "rules.png", full_page=True)
            srv.stop()
        browser.close()
    for p in sorted(OUT.glob("*.png")):
        print(f"{p}  {p.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
