"""bench.http's feed of payments: a ledger is never sent the same payment twice.

A payment sent again is answered from the idempotency store, not decided; a benchmark that reused
payments would time those answers as decisions."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench import http


def _uetrs(path: Path) -> list[str]:
    out: list[str] = []
    for line in path.read_bytes().split(b"\n"):
        if not line:
            continue
        doc = orjson.loads(line)
        for tx in doc if isinstance(doc, list) else [doc]:
            out.append(tx["uetr"])
    return out


def test_a_ledgers_files_never_repeat_a_payment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "FEED_CHUNK", 40)  # several chunks (seeds) in a small test
    feed = http.Feed(tmp_path)
    cursor = feed.ledger()
    sent = _uetrs(cursor.singles(30)) + _uetrs(cursor.batches(25, 3)) + _uetrs(cursor.singles(17))
    assert len(sent) == 30 + 75 + 17
    assert len(set(sent)) == len(sent)  # across files and across the chunks' seeds


def test_a_fresh_ledger_starts_again_from_the_first_payment(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "FEED_CHUNK", 40)
    feed = http.Feed(tmp_path)
    first = _uetrs(feed.ledger().singles(50))
    again = _uetrs(feed.ledger().singles(50))
    assert first == again  # the same seeded payments: runs on fresh ledgers compare like with like


def test_a_batch_run_gets_enough_payments_for_its_seconds(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "FEED_CHUNK", 500)
    monkeypatch.setattr(http, "BATCH_FEED_PER_S", 300)
    lines = [b for b in http.Feed(tmp_path).ledger().batch_run(100, 2.0).read_bytes().split(b"\n") if b]
    assert len(lines) == 6  # 2 s x 300/s in calls of 100
    assert all(len(orjson.loads(line)) == 100 for line in lines)
