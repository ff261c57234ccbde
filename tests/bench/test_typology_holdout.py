"""``bench.typology_holdout``: its accounts' labels and figures against a brute-force count, and the
``inference.train.fit`` it trains with."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from bench.typology_holdout import Evaluation, figures, main
from inference.model import forward
from inference.simulate import ALL_TYPOLOGIES, SimConfig, SimTx, simulate
from inference.train import TrainConfig, fit, roc_auc, train

SMALL = TrainConfig(seed=8, n_normal=3000, n_accounts=300, days=7, epochs=2, populations=0,
                    heldout_populations=0, typologies=ALL_TYPOLOGIES)


@pytest.fixture(scope="module")
def sims() -> list[SimTx]:
    return simulate(SimConfig(seed=4, days=14, n_accounts=600, n_normal=6000, typology_share=0.08,
                              typologies=ALL_TYPOLOGIES))


def test_fit_is_the_model_train_ships() -> None:
    model, rows, labels = fit(SMALL)
    shipped = train(SMALL).model
    assert all(np.array_equal(a, b) for la, lb in zip(model.layers, shipped.layers, strict=True)
               for a, b in zip(la, lb, strict=True))
    assert len(rows) == len(labels) > 3000 and 0 < labels.sum() < len(labels)


def test_accounts_take_the_typology_of_the_laundering_they_touch(sims: list[SimTx]) -> None:
    ev = Evaluation.of(sims)
    kinds: dict[str, set[str]] = defaultdict(set)
    for s in sims:
        for account in (s.transaction.originator.account, s.transaction.beneficiary.account):
            assert account is not None
            kinds[account]  # every account touched, laundering or not
            if s.label:
                kinds[account].add(s.typology)
    want = sorted("normal" if not k else next(iter(k)) if len(k) == 1 else "mixed" for k in kinds.values())
    assert sorted(ev.account_typology.tolist()) == want
    assert "mixed" in want or len({k for k in want if k != "normal"}) == len(ALL_TYPOLOGIES)


def test_figures_count_the_typologys_accounts_and_stay_in_range(sims: list[SimTx]) -> None:
    ev = Evaluation.of(sims)
    model, _, _ = fit(dataclasses.replace(SMALL, seed=9))
    scores = forward(model, ev.rows)
    for typology in ("dormant_burst", "structuring"):
        got = figures(model, ev, typology)
        assert got["accounts"] == int((ev.account_typology == typology).sum()) > 0
        assert 0.0 <= got["payment_recall"] <= 1.0 and 0.0 <= got["account_recall"] <= 1.0
        assert 0.0 <= got["account_roc_auc"] <= 1.0
        # an account's score is its highest payment's, sent or received: by hand, from the payments
        best: dict[str, float] = defaultdict(lambda: -np.inf)
        kind: dict[str, set[str]] = defaultdict(set)
        for s, score in zip(sims, scores.tolist(), strict=True):
            for account in (s.transaction.originator.account or "", s.transaction.beneficiary.account or ""):
                best[account] = max(best[account], score)
                if s.label:
                    kind[account].add(s.typology)
        kept = [a for a in best if kind[a] in (set(), {typology})]
        want = roc_auc(np.array([best[a] for a in kept]), np.array([kind[a] == {typology} for a in kept]))
        assert got["account_roc_auc"] == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize(("setting", "message"), [
    ("hidden=16", "hidden takes a tuple"),
    ("fpr=0.1", "no training setting 'fpr'"),
    ("typologies=('fan_in',)", "no training setting 'typologies'"),
    ("epochs=ten", "is not a Python literal"),
])
def test_a_bad_setting_is_refused_before_anything_is_fitted(
        setting: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--set", setting])
    assert exc.value.code == 2 and message in capsys.readouterr().err
