"""``ledger verify`` checks the decision summaries against the decisions they speak for: a
summary sealed with a wrong outcome, a broken chain, or a decision sealed without a summary
fails naming the seq; a ledger whose early decisions predate summaries verifies, counting them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from audit.decide import pipeline as pipeline_module
from audit.decide.pipeline import Pipeline
from audit.decide.record import DECISION_KIND
from audit.errors import DerivedRowError
from audit.query.summary_check import TABLE
from audit.query.verify import verify_index
from ledger import Record
from ledger.append import Ledger
from ledger.jcs import Jcs
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from wasm_rules import Sandbox


@pytest.fixture
def pipe(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> Iterator[Pipeline]:
    yield indexed_pipeline(ledger, sandbox, pack_wasm)


def _summary_findings(exc: DerivedRowError) -> list[tuple[int, str]]:
    return [(seq, detail) for table, seq, detail in exc.findings if table == TABLE]


def test_summaries_of_honest_batches_verify(pipe: Pipeline) -> None:
    subs = mixed_submissions(50, seed=3)
    for i in range(0, 50, 10):
        pipe.decide(subs[i:i + 10])
    report = verify_index(pipe.ledger.engine, page=16)
    assert (report.decisions, report.summaries, report.unsummarised) == (50, 5, 0)


def test_a_summary_that_misstates_an_outcome_fails_naming_it(pipe: Pipeline,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    subs = mixed_submissions(20, seed=3)
    pipe.decide(subs[:10])
    real = pipeline_module.entries_jcs

    def lying(decisions: list[str], *a: Any) -> Jcs:
        flipped = ["BLOCK" if d == "ALLOW" else "ALLOW" for d in decisions[:1]] + list(decisions[1:])
        return real(flipped, *a)

    monkeypatch.setattr(pipeline_module, "entries_jcs", lying)
    got = pipe.decide(subs[10:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(pipe.ledger.engine)
    ((seq, detail),) = _summary_findings(err.value)
    assert seq == got[-1].seq + 1  # the summary sealed right after the batch
    assert f"seq {got[0].seq} is {got[0].decision}" in detail


def test_a_summary_that_breaks_the_chain_fails(pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    subs = mixed_submissions(20, seed=3)
    pipe.decide(subs[:10])
    real = pipeline_module.fence  # the commit's checks, but it forgets the summary before

    def forgetful(*args: Any) -> None:
        real(*args)
    monkeypatch.setattr(pipeline_module, "fence", forgetful)
    got = pipe.decide(subs[10:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(pipe.ledger.engine)
    ((seq, detail),) = _summary_findings(err.value)
    assert seq == got[-1].seq + 1 and "links to None" in detail


def test_a_decision_sealed_without_a_summary_fails_naming_it(pipe: Pipeline) -> None:
    subs = mixed_submissions(20, seed=3)
    pipe.decide(subs[:10])
    with pipe.ledger.engine.connect() as conn:
        body = conn.exec_driver_sql(f"SELECT record FROM ledger_entries WHERE kind = '{DECISION_KIND}' "
                                    "ORDER BY seq DESC LIMIT 1").scalar_one()
    (stray,) = pipe.ledger.append_many([Record(DECISION_KIND, orjson.loads(bytes(body))["record"])])
    pipe.decide(subs[10:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(pipe.ledger.engine)
    assert (stray.seq, "a decision no summary speaks for") in _summary_findings(err.value)


def test_decisions_sealed_before_summaries_began_are_counted_not_failed(ledger: Ledger, sandbox: Sandbox,
                                                                        pack_wasm: bytes) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(20, seed=3)
    real = ledger.append_many

    def without_tail(records: Any, **k: Any) -> Any:  # a version that sealed no summaries
        k.pop("tail", None)
        return real(records, **k)

    old = type("Old", (), {"append_many": staticmethod(without_tail), "engine": ledger.engine})()
    pipe.ledger = old
    pipe.decide(subs[:10])
    pipe.ledger = ledger
    pipe.decide(subs[10:])
    report = verify_index(ledger.engine)
    assert (report.decisions, report.summaries, report.unsummarised) == (len(subs), 1, 10)
