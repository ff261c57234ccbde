"""report.html in a real browser: headless Chromium renders the bundle's report, and the numbers
a person would read there are the ones the sealed records give.

Chromium is installed by the test set-up (``make test`` runs ``.ci/browser``). In CI a missing
browser fails this test; elsewhere it is skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from ledger import NoteSigner
from tests.audit.test_export import build, export
from tests.conftest import Db
from wasm_rules import Sandbox

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Cells(HTMLParser):
    """The rendered page's data-* cells: {attribute: {value: text}}, and the decision rows."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, dict[str, str]] = {}
        self.rows: list[list[str]] = []
        self._open: tuple[str, str] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("data-count", "data-outcome", "data-rule", "data-rows-shown", "data-fact"):
            if key in a:
                self._open = (key, a[key] or "")
        if tag == "tr" and "data-seq" in a:
            self._row = []
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            key, value = self._open
            self.cells.setdefault(key, {})[value] = self.cells.get(key, {}).get(value, "") + data
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "p"):
            self._open = None
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None


def rendered(html: Path, profile: Path) -> str:
    """The DOM Chromium built from the page (the page needs no script; this is what a person sees)."""
    assert CHROMIUM is not None
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.requirement("SEC-17a4f-download")
@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium is not installed (make test installs it; CI requires it)")
def test_the_report_shows_the_numbers_the_records_give(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                       tmp_path: Path) -> None:
    assert CHROMIUM is not None, "chromium is required in CI (see .ci/browser)"
    w = build(db, signer, sandbox, n=120)
    try:
        bundle = export(w, tmp_path / "b.zip")
    finally:
        w.ledger.engine.dispose()
    with zipfile.ZipFile(bundle.path) as z:
        (tmp_path / "report.html").write_bytes(z.read("report.html"))
        records = [orjson.loads(line) for line in z.read("records.jsonl").splitlines()]
        facts = orjson.loads(z.read("compliance.json"))["facts"]
    decisions = [r["record"] for r in records if r["kind"] == "decision"]
    page = _Cells()
    dom = rendered(tmp_path / "report.html", tmp_path / "profile")
    page.feed(dom)

    outcomes = Counter(d["decision"] for d in decisions)
    shown_outcomes = {k: int(v) for k, v in page.cells["data-outcome"].items()}
    assert shown_outcomes == {k: outcomes.get(k, 0) for k in ("ALLOW", "REVIEW", "HOLD", "BLOCK")}
    rules = Counter(h["id"] for d in decisions for h in d["fired"])
    assert {k: int(v) for k, v in page.cells["data-rule"].items()} == dict(rules)
    counts = {k: int(v) for k, v in page.cells["data-count"].items()}
    assert counts["decisions"] == len(decisions) > 100
    assert counts["annotations"] == sum(r["kind"] == "annotation" for r in records)
    assert counts["payloads_purged"] == 1
    # one row per decision, in seq order, each with the outcome its record states
    assert len(page.rows) == len(decisions)
    by_trace = {r["trace_id"]: r["record"] for r in records if r["kind"] == "decision"}
    for row in page.rows:
        seq, trace_id, _at, decision = row[:4]
        assert by_trace[trace_id]["decision"] == decision, (seq, trace_id)
    # the compliance section (format 9): the facts the verifier recomputes, as a person reads them
    assert "Compliance facts" in dom and "Stated, not proven" in dom
    shown = page.cells["data-fact"]
    assert shown["decisions.total"] == str(len(decisions)) == str(facts["decisions"]["total"])
    assert shown["decisions.fail_safe.total"] == str(sum(d["fail_safe"] is not None for d in decisions))
    assert shown["purges.records"] == "1" == str(facts["purges"]["records"])
    assert shown["keys.history[0].vkey"] == signer.verifier.vkey
    assert shown["rulesets[0].id"] == facts["rulesets"][0]["id"]
