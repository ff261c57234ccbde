"""The ledger health page: size and the newest checkpoint as stored, its age by the page's clock,
"verify now" passing on an intact ledger and naming the seq of a record changed behind the
ledger's back, and the button (and the action) only for roles that may verify."""

from __future__ import annotations

import html
import re
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from api.console import ledger_page
from ledger import NoteSigner
from tests.api.console.conftest import Console


def attr(text: str, element_id: str, name: str) -> str:
    m = re.search(rf'<[^>]*\bid="{element_id}"[^>]*\b{name}="([^"]*)"', text)
    assert m is not None, (element_id, name)
    return m.group(1)


def verify_result(text: str) -> tuple[str, str]:
    m = re.search(r'<div id="verify-result" class="status (\w+)" data-state="(\w+)" role="status">'
                  r'(.*?)</div>', text, re.S)
    assert m is not None, text
    assert m.group(1) == m.group(2)
    return m.group(2), re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", m.group(3)))


def signed_at(console: Console) -> datetime:
    _, us = console.runtime.ledger_state()
    assert us is not None
    return datetime.fromtimestamp(us / 1e6, UTC)


def test_size_and_the_latest_checkpoint_are_shown(console: Console) -> None:
    console.score(5)
    rt = console.runtime
    latest = rt.ledger.latest_checkpoint()
    assert latest is not None
    r = console.get("/console/ledger")
    assert r.status_code == 200
    size = rt.ledger.size()
    assert attr(r.text, "ledger-size", "data-size") == str(size) and f"{size} entries" in r.text
    assert attr(r.text, "checkpoint-size", "data-size") == str(latest.checkpoint.size)
    assert attr(r.text, "unsealed", "data-count") == str(size - latest.checkpoint.size)
    m = re.search(r'<pre class="code" id="checkpoint-note">(.*?)</pre>', r.text, re.S)
    assert m is not None and html.unescape(m.group(1)) == latest.note
    assert rt.ledger.active_vkey in r.text and rt.ledger.origin in r.text
    assert "this server's own key file" in r.text  # nothing pinned in the settings


def test_time_since_the_last_checkpoint_uses_the_page_clock(console: Console,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    console.score(3, checkpoint=False)
    at = signed_at(console)
    monkeypatch.setattr(ledger_page, "clock", lambda: at + timedelta(minutes=5, seconds=3))
    r = console.get("/console/ledger")
    assert attr(r.text, "checkpoint-age", "data-seconds") == "303" and "5 min 3 s ago" in r.text
    unsealed = int(attr(r.text, "unsealed", "data-count"))
    assert unsealed > 0  # three decisions after the genesis checkpoint, under the 1,000-entry policy
    assert 'class="status warn" id="seal-status"' in r.text  # older than the 60 s policy: overdue
    monkeypatch.setattr(ledger_page, "clock", lambda: at + timedelta(seconds=20))
    r = console.get("/console/ledger")
    assert "20 s ago" in r.text and 'class="status pending" id="seal-status"' in r.text
    monkeypatch.setattr(ledger_page, "clock", lambda: at + timedelta(days=2, hours=3, minutes=9))
    assert "2 d 3 h ago" in console.get("/console/ledger").text


def test_verify_now_reports_what_it_checked(console: Console) -> None:
    console.score(4)
    r = console.get("/console/ledger")
    assert '<form method="post" action="/console/ledger/verify"' in r.text and "verify-result" not in r.text
    r = console.post_form("/console/ledger/verify", {})
    assert r.status_code == 200, r.text
    state, text = verify_result(r.text)
    size = console.runtime.ledger.size()
    assert state == "ok" and f"All {size} entries" in text
    assert "signed checkpoint" in text and "4 present and matching their hashes, 0 purged" in text


def test_a_record_changed_in_the_database_fails_verify_now_naming_its_seq(console: Console) -> None:
    decided = console.score(6)
    victim = decided[2]
    seq = victim["ledger"]["seq"]
    db = sqlite3.connect(console.settings.db.removeprefix("sqlite:///"))
    with db:  # an insider with write access to the database file: drop the trigger, edit the bytes
        (record,) = db.execute("SELECT record FROM ledger_entries WHERE seq = ?", (seq,)).fetchone()
        other = "ALLOW" if victim["decision"] != "ALLOW" else "BLOCK"
        forged = bytes(record).replace(f'"decision":"{victim["decision"]}"'.encode(),
                                       f'"decision":"{other}"'.encode(), 1)
        assert forged != bytes(record)
        db.execute("DROP TRIGGER ledger_entries_no_update")
        db.execute("UPDATE ledger_entries SET record = ? WHERE seq = ?", (forged, seq))
    db.close()
    r = console.post_form("/console/ledger/verify", {}, role="admin")
    assert r.status_code == 200
    state, text = verify_result(r.text)
    assert state == "fail" and f"altered record at seq {seq}." in text and f"Entry {seq} is the first" in text
    assert "record bytes do not match the leaf hash" in text
    assert 'id="verify-seq">' + str(seq) in r.text


def test_a_pinned_key_is_what_verify_now_checks_against(console: Console) -> None:
    console.score(2)
    stranger = NoteSigner.generate(console.runtime.ledger.origin).verifier.vkey
    console.runtime.settings = console.runtime.settings.model_copy(update={"trusted_key": stranger})
    r = console.get("/console/ledger")
    assert f'<span class="hash" id="trusted-key">{stranger}</span>' in r.text
    state, text = verify_result(console.post_form("/console/ledger/verify", {}).text)
    assert state == "fail", text  # the checkpoints carry no signature by the pinned key


@pytest.mark.parametrize("role", ["regulator", "approver", "scorer"])
def test_roles_that_may_not_verify_see_no_button_and_are_refused(console: Console, role: str) -> None:
    r = console.get("/console/ledger", role=role)
    assert r.status_code == 200 and 'id="ledger-size"' in r.text
    assert "/console/ledger/verify" not in r.text and 'id="verify-not-allowed"' in r.text
    r = console.post_form("/console/ledger/verify", {}, role=role)
    assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
    assert "ledger.verify" in r.text and "verify-result" not in r.text


def test_since_text_reads_like_a_person_would_say_it() -> None:
    say = ledger_page.since_text
    assert [say(timedelta(seconds=s)) for s in (0, 59, 60, 3599, 3600, 86399, 86400 * 3 + 7200)] == [
        "0 s", "59 s", "1 min 0 s", "59 min 59 s", "1 h 0 min", "23 h 59 min", "3 d 2 h"]
    assert say(timedelta(seconds=-5)).startswith("in the future")


def test_a_second_verify_while_one_runs_is_refused(console: Console) -> None:
    console.score(2)
    assert ledger_page._verifying.acquire(blocking=False)  # as a verification in progress holds it
    try:
        r = console.post_form("/console/ledger/verify", {})
        assert r.status_code == 409 and "already running" in r.text
    finally:
        ledger_page._verifying.release()
    r = console.post_form("/console/ledger/verify", {})
    assert r.status_code == 200 and 'data-state="ok"' in r.text
