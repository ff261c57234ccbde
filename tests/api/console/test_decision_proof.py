"""The decision page's proof, server side: a page view never signs a checkpoint, an uncovered entry
offers to sign one (a POST, as GET /v1/ledger/checkpoint may), and index columns that disagree with
the sealed record are called damage."""

from __future__ import annotations

import re
from typing import Any

from tests.api.console.conftest import Console
from tests.api.console.test_decision import proof_data, url


def checkpoints(console: Console) -> int:
    with console.runtime.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM ledger_checkpoints").scalar_one())


def state(page: str) -> str:
    m = re.search(r'id="proof-status"[^>]*data-state="([a-z]+)"', page)
    assert m is not None, "no proof status on the page"
    return m.group(1)


def test_viewing_an_uncovered_entry_writes_nothing(console: Console) -> None:
    d: dict[str, Any] = console.score(3, checkpoint=False)[-1]
    before, size = checkpoints(console), console.runtime.ledger.size()
    for role in ("officer", "admin", "regulator"):
        page = console.get(url(d), role=role).text
        assert state(page) == "uncovered" and 'id="proof-data"' not in page
        assert 'id="sign-checkpoint"' in page
    assert (checkpoints(console), console.runtime.ledger.size()) == (before, size)


def test_signing_a_checkpoint_from_the_page_gives_the_proof(console: Console) -> None:
    d: dict[str, Any] = console.score(3, checkpoint=False)[-1]
    before = checkpoints(console)
    r = console.post_form(f"/console/decisions/{d['trace_id']}/checkpoint", {}, role="admin")
    assert r.status_code == 303 and r.headers["location"] == f"{url(d)}#proof"
    assert checkpoints(console) == before + 1
    page = console.get(url(d)).text
    assert state(page) == "pending"  # the browser checks it
    assert proof_data(page)["index"] == d["ledger"]["seq"]
    # once covered, asking again signs nothing more
    console.post_form(f"/console/decisions/{d['trace_id']}/checkpoint", {}, role="admin")
    assert checkpoints(console) == before + 1


def test_signing_for_an_unknown_trace_is_a_404_and_writes_nothing(console: Console) -> None:
    console.score(2, checkpoint=False)
    before = checkpoints(console)
    r = console.post_form("/console/decisions/019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11/checkpoint", {})
    assert r.status_code == 404 and checkpoints(console) == before


def test_index_columns_that_disagree_with_the_sealed_record_are_damage(console: Console) -> None:
    d: dict[str, Any] = console.score(3)[1]
    with console.runtime.engine.connect() as conn:  # an insider edits the row's time column
        conn.exec_driver_sql("DROP TRIGGER ledger_entries_no_update")
        conn.exec_driver_sql("UPDATE ledger_entries SET recorded_at = '2020-01-01T00:00:00.000000Z' "
                             f"WHERE seq = {d['ledger']['seq']}")
        conn.commit()
    page = console.get(url(d)).text
    assert 'id="index-mismatch"' in page and "recorded_at column differs" in page
    data = proof_data(page)
    assert data["shown"]["recorded_at"] == "2020-01-01T00:00:00.000000Z"  # what proof.js will refuse
