"""A payment whose free text would take the screening past its budget: screened until then, held by
the shipped pack (SANCTIONS_SCREENING_INCOMPLETE), sealed as ``sealtrail.decision/7`` naming where it
stopped and the budget, while the other payments of its batch are decided and sealed as ever; the
bundle verifier screens it again under the stated budget and finds the same stop, and catches a
pipeline that claims a stop the payment does not reach; a list load screens the held payment again
under a wider budget and annotates what its record lacks, or says it screened it in part."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from audit.bundle.verify import verify_bundle
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.record import DECISION_SCHEMA_V6, DECISION_SCHEMA_V7
from audit.decide.types import Submission
from audit.errors import BundleFailed
from audit.screening.held import HELD_BUDGET_FACTOR, rescreen_held
from audit.screening.screener import Screener
from inference.screening import screen as screen_module
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.screening import test_screening_bundle as bundle_tests
from tests.audit.screening.test_screening_bundle import export
from tests.audit.screening.test_screening_decisions import AT, PRINCIPAL, column, fired, message, record, seal
from wasm_rules import Sandbox

LISTED_WORDS = ("aleksandr", "kovalev", "alexander", "kovalyov", "tehran", "imports", "company",
                "sevmorneftegaz", "trading", "llc")


def flooded(n: int, words: int = 200) -> Submission:
    """A JSON payment whose remittance is ``words`` words drawn from the list's own names."""
    rng = random.Random(n)
    tx = replace(message(n).transaction, remittance=" ".join(rng.choice(LISTED_WORDS) for _ in range(words)))
    (sub,) = Submission.parse(tx.canonical_bytes(), "json", PRINCIPAL, AT)
    assert isinstance(sub, Submission), sub
    return sub


def governed(ledger: Ledger, sandbox: Sandbox, budget: int) -> Pipeline:
    """The exit list sealed, and a governed pipeline screening against it under ``budget``."""
    seal(ledger)
    screener = Screener(ledger.engine, budget=budget)
    screener.refresh()
    return bundle_tests.governed(ledger, sandbox, screener)


@pytest.mark.requirement("FATF-R16-sanctions")
def test_a_payment_not_screened_in_full_is_held_and_sealed_as_version_7_and_the_bundle_verifies(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    pipe = governed(ledger, sandbox, budget=760)
    ds = pipe.decide([message(1), flooded(2), message(3, text="/RFB/goods for SEVMORNEFTEGAZ TRADING")])
    plain, flood, named = ds
    bodies = [record(ledger, d) for d in ds]
    # the flooded payment: held as not screened in full, its record says where and under which budget
    assert flood.decision == "HOLD" and "SANCTIONS_SCREENING_INCOMPLETE" in fired(flood)
    body = bodies[1]
    assert body["schema"] == DECISION_SCHEMA_V7 == "sealtrail.decision/7"
    scr = body["screening"]
    assert (scr["stopped"], scr["budget"]) == ("remittance", 760)
    assert any("not screened in full" in f and "remittance" in f for f in scr["findings"])
    assert column(body, "screen_lists") == 1 and column(body, "screen_best_score") is None
    assert column(body, "screen_hits") is None and column(body, "screen_identifier_match") == 0
    assert body["model"]["precision"] == "fp32"
    # the others in the same batch: version 6, decided on their own screening
    for b in (bodies[0], bodies[2]):
        assert b["schema"] == DECISION_SCHEMA_V6 and "stopped" not in b["screening"]
    assert plain.decision == "ALLOW" and fired(plain) == []
    assert "SANCTIONS_NAME_STRONG" in fired(named) and "SANCTIONS_SCREENING_INCOMPLETE" not in fired(named)
    # screened again offline under the budget the record states: the same stop and hits
    report = verify_bundle(export(ledger, signer, tmp_path / "b.zip"), [signer.verifier], sandbox=sandbox)
    assert (report.rescreened, report.not_rescreened, report.decisions) == (3, 0, 3)


def test_under_the_default_budget_the_same_payment_is_screened_in_full(
        ledger: Ledger, sandbox: Sandbox) -> None:
    pipe = governed(ledger, sandbox, budget=screen_module.DEFAULT_BUDGET)
    (d,) = pipe.decide([flooded(2)])
    body = record(ledger, d)
    assert body["schema"] == DECISION_SCHEMA_V6 and "stopped" not in body["screening"]
    assert "SANCTIONS_SCREENING_INCOMPLETE" not in fired(d) and body["screening"]["hits"]


def test_a_pipeline_claiming_a_stop_the_payment_does_not_reach_is_caught(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = governed(ledger, sandbox, budget=760)
    real = screen_module.screen

    def lazy(tx: Any, index: Any, floor: int = screen_module.DEFAULT_FLOOR,
             budget: int | None = None) -> screen_module.Screening:
        got = real(tx, index, floor, budget)  # screened in full, then said to have stopped
        return replace(got, hits=(), stopped="remittance", budget=budget)

    monkeypatch.setattr("audit.decide.pipeline.screen", lazy)
    (d,) = pipe.decide([message(3, text="/RFB/goods for SEVMORNEFTEGAZ TRADING")])
    monkeypatch.undo()
    assert d.decision == "HOLD" and record(ledger, d)["schema"] == DECISION_SCHEMA_V7
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(export(ledger, signer, tmp_path / "b.zip"), [signer.verifier], sandbox=sandbox)
    (err,) = caught.value.failures
    assert err.kind == "replay.screening" and "under the record's budget (760)" in str(err)
    assert "in full" in str(err) and "stopped at remittance" in str(err)


@pytest.mark.parametrize("bad", [0, -5, 2.5, "16384"])
def test_a_bad_screening_budget_is_refused(ledger: Ledger, bad: object) -> None:
    with pytest.raises(ValueError, match="screening budget is a positive number of units"):
        Screener(ledger.engine, budget=bad)  # type: ignore[arg-type]


def test_a_payment_held_as_not_screened_in_full_is_screened_further_when_a_list_is_loaded(
        ledger: Ledger, sandbox: Sandbox) -> None:
    pipe = governed(ledger, sandbox, budget=760)
    (d,) = pipe.decide([flooded(2)])
    stated = {h["entry_id"] for h in record(ledger, d)["screening"]["hits"]}
    admin = Principal.local("list-admin")
    # a list load's own screening of held payments gets HELD_BUDGET_FACTOR times the budget: this one
    # (782 units in full) is screened in full there, and the hits its record lacks are annotated
    wide = rescreen_held(ledger, admin, screener=Screener(ledger.engine, budget=760))
    assert wide.in_part == [] and [a["seq"] for a in wide.annotated] == [d.seq]
    found = {h["entry_id"] for h in wide.annotated[0]["hits"]}
    assert found and not found & stated
    # under a budget too small even so, it is listed as screened in part and annotated once saying where
    narrow = Screener(ledger.engine, budget=40)
    assert 40 * HELD_BUDGET_FACTOR < 782
    part = rescreen_held(ledger, admin, screener=narrow)
    assert part.in_part == [{"seq": d.seq, "trace_id": d.trace_id, "stopped": "remittance",
                             "budget": 40 * HELD_BUDGET_FACTOR}]
    assert [a["seq"] for a in part.annotated] == [d.seq] and part.annotated[0]["hits"] == []
    again = rescreen_held(ledger, admin, screener=narrow)
    assert again.in_part == part.in_part and again.annotated == []  # said once
