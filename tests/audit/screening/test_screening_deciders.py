"""Screening beside other deciders: a batch is screened before it takes any lock, so a decider
screening a batch never keeps another from committing, and a batch another decider got ahead of is
prepared again on the screening it already has, with the hits one process would have sealed."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from audit.decide import pipeline as pipeline_module
from audit.decide.pipeline import Pipeline
from audit.decide.types import Decision, Submission
from audit.screening.screener import Screener
from inference.screening.screen import Screening
from ledger import NoteSigner
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.audit.screening.test_screening_decisions import fired, message, pipeline, record, seal
from tests.conftest import Db
from wasm_rules import Sandbox

LISTED = "KOVALEV ALEKSANDR"


def _decider(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> Pipeline:
    screener = Screener(ledger.engine, background=False)
    screener.refresh()
    return pipeline(ledger, sandbox, pack_wasm, screener)


def _batch(start: int, listed: int) -> list[Submission]:
    """Four payments numbered from ``start``; the ``listed``-th pays the listed name."""
    return [message(start + i, LISTED if i == listed else "ACME TRADING GMBH") for i in range(4)]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each transaction the pipeline screens, by its end-to-end id, in the order screened."""
    screened: list[str] = []
    real = pipeline_module.screen  # type: ignore[attr-defined]

    def counted(tx: Any, *args: Any, **kw: Any) -> Screening:
        screened.append(str(tx.reference))
        return real(tx, *args, **kw)
    monkeypatch.setattr(pipeline_module, "screen", counted)
    return screened


def _names_hit(ledger: Ledger, ds: list[Decision]) -> list[list[str]]:
    return [[h["entry_id"] for h in record(ledger, d)["screening"]["hits"]] for d in ds]


def test_a_batch_another_decider_got_ahead_of_is_not_screened_again(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    seal(ledger)
    second = Ledger(db.engine(), signer)
    a, b = _decider(ledger, sandbox, pack_wasm), _decider(second, sandbox, pack_wasm)
    a.decide(_batch(0, 1))
    screened = _counting(monkeypatch)
    real = a._prepare
    overtaken = threading.Event()

    def prepared_then_overtaken(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if not overtaken.is_set():  # after a's prepare, before its commit: b commits a batch of its own
            overtaken.set()
            b.decide(_batch(10, 3))
        return out
    monkeypatch.setattr(a, "_prepare", prepared_then_overtaken)
    got = a.decide(_batch(20, 2))
    assert (a.superseded, a.locked) == (1, 1)  # refused, then prepared again under the lock
    ids = [str(s.transaction.reference) for s in _batch(20, 2)]
    theirs = [str(s.transaction.reference) for s in _batch(10, 3)]
    assert screened == ids + theirs  # a's batch once (before b's), never again when prepared again
    assert _names_hit(ledger, got) == [[], [], ["B-1"], []]
    assert "SANCTIONS_NAME_STRONG" in fired(got[2]) and got[2].decision in ("HOLD", "BLOCK")
    assert all(d.latency_us["screening"] >= 0 for d in got)
    verify_ledger(ledger.engine, [signer.verifier])
    second.engine.dispose()


def test_a_decider_screening_keeps_no_other_decider_from_committing(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Even while its batches are prepared under the sequencer lock (another decider got ahead
    of it a moment ago), a decider screens before it takes the lock."""
    seal(ledger)
    second = Ledger(db.engine(), signer)
    a, b = _decider(ledger, sandbox, pack_wasm), _decider(second, sandbox, pack_wasm)
    a.decide(_batch(0, 0))
    b.decide(_batch(10, 0))
    real_prepare = a._prepare
    once = threading.Event()

    def overtaken(*args: Any, **kw: Any) -> Any:
        out = real_prepare(*args, **kw)
        if not once.is_set():
            once.set()
            b.decide(_batch(20, 0))
        return out
    monkeypatch.setattr(a, "_prepare", overtaken)
    a.decide(_batch(30, 0))
    assert a.superseded == 1 and a.locked == 1  # a now prepares its batches under the lock for a while
    real_screen = pipeline_module.screen  # type: ignore[attr-defined]
    during: list[list[Decision]] = []
    finished = threading.Event()

    def b_commits_meanwhile() -> None:
        during.append(b.decide(_batch(40, 1)))
        finished.set()

    def screen_while_b_commits(tx: Any, *args: Any, **kw: Any) -> Screening:
        if threading.current_thread() is main and not finished.is_set() and not started:
            started.append(True)
            t = threading.Thread(target=b_commits_meanwhile)
            t.start()
            finished.wait(30)  # a lock held while screening would keep b waiting here
        return real_screen(tx, *args, **kw)
    main, started = threading.current_thread(), list[bool]()
    monkeypatch.setattr(pipeline_module, "screen", screen_while_b_commits)
    got = a.decide(_batch(50, 3))
    assert finished.is_set(), "another decider could not commit while this one screened"
    assert a.locked == 2  # prepared under the lock, after the screening
    (theirs,) = during
    assert theirs[-1].seq < got[0].seq  # b's batch first in the log; a caught up with it
    assert _names_hit(ledger, theirs) == [[], ["B-1"], [], []]
    assert _names_hit(ledger, got) == [[], [], [], ["B-1"]]
    verify_ledger(ledger.engine, [signer.verifier])
    second.engine.dispose()
