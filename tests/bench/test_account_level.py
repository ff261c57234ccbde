"""``bench.account_level``: its account aggregates and scores against brute-force counts over the
payments, and the figures it prints."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from bench.account_level import (
    AGGREGATES,
    MODEL_COLUMNS,
    account_matrix,
    active,
    aggregates,
    fit_logistic,
    main,
    peer_tail,
    per_typology,
)
from bench.typology_holdout import Evaluation
from inference.simulate import ALL_TYPOLOGIES, SimConfig, simulate
from inference.train import FEATURE_NAMES


@pytest.fixture(scope="module")
def ev() -> Evaluation:
    return Evaluation.of(simulate(SimConfig(seed=5, days=14, n_accounts=400, n_normal=3000,
                                            typology_share=0.08, typologies=ALL_TYPOLOGIES)))


def per_account(ev: Evaluation) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Payment indexes each account sends and receives."""
    n_pay = len(ev.rows)
    sent: dict[int, list[int]] = defaultdict(list)
    got: dict[int, list[int]] = defaultdict(list)
    for i in range(n_pay):
        sent[int(ev.ends[i])].append(i)
        got[int(ev.ends[n_pay + i])].append(i)
    return sent, got


def test_aggregates_are_each_accounts_highest_value_or_share_by_hand(ev: Evaluation) -> None:
    sent, got = per_account(ev)
    agg = aggregates(ev)
    assert len(agg) == len(AGGREGATES)
    column = {n: i for i, n in enumerate(FEATURE_NAMES)}
    for account in range(0, len(ev.account_typology), 7):
        for name, role in AGGREGATES:
            pays = sent[account] if role == "o" else got[account]
            if name.startswith("share:"):
                want = sum(ev.rows[i, column[name[6:]]] for i in pays) / max(1, len(pays))
            else:
                want = max((ev.rows[i, column[name]] for i in pays), default=0.0)
            assert agg[f"{role}:{name}"][account] == pytest.approx(want), (account, name, role)


def test_peer_tail_sums_minus_log_of_the_share_of_peers_at_or_above_by_hand(ev: Evaluation) -> None:
    agg = aggregates(ev)
    live = np.flatnonzero(active(ev))
    got = peer_tail(ev)
    for account in live[::25]:
        want = 0.0
        for values in agg.values():
            share = sum(1 for j in live if values[j] >= values[account]) / len(live)
            want -= math.log(share)
        assert got[account] == pytest.approx(want)
    assert got[live].min() >= 0.0 and got[live].max() > 0.0  # shares are at most 1


def test_account_matrix_holds_each_columns_max_and_mean_per_side(ev: Evaluation) -> None:
    sent, got = per_account(ev)
    x = account_matrix(ev)
    k = len(MODEL_COLUMNS)
    assert x.shape == (len(ev.account_typology), 2 * (2 * k + 1))
    signed = np.nan_to_num(np.sign(ev.rows[:, MODEL_COLUMNS]) * np.log1p(np.abs(ev.rows[:, MODEL_COLUMNS])))
    for account in range(0, len(ev.account_typology), 11):
        for offset, pays in ((0, sent[account]), (2 * k + 1, got[account])):
            if pays:
                assert np.allclose(x[account, offset:offset + k], signed[pays].max(axis=0))
                assert np.allclose(x[account, offset + k:offset + 2 * k], signed[pays].mean(axis=0))
            else:
                assert not x[account, offset:offset + 2 * k].any()
            assert x[account, offset + 2 * k] == pytest.approx(math.log1p(len(pays)))


def test_the_logistic_regression_ranks_a_separable_set_perfectly_and_is_deterministic() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 5))
    y = (x[:, 2] - 0.5 * x[:, 0] > 1.0).astype(np.float64)  # a few positives, a linear rule
    score = fit_logistic(x, y)(x)
    assert score[y == 1].min() > np.quantile(score[y == 0], 0.95)
    assert np.array_equal(score, fit_logistic(x, y)(x))


def test_per_typology_counts_the_typologys_accounts_against_normal_ones(ev: Evaluation) -> None:
    live = active(ev)
    score = np.where(ev.account_typology == "structuring", 1.0, 0.0)
    got = per_typology(ev, score, "structuring")
    assert got == {"roc_auc": 1.0, "recall": 1.0,
                   "accounts": int((live & (ev.account_typology == "structuring")).sum())}
    assert got["accounts"] > 0
    assert per_typology(ev, -score, "structuring")["roc_auc"] == 0.0


def test_main_prints_every_typology_and_writes_the_figures(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "account_level.json"
    assert main(["--quick", "--populations", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for typology in ALL_TYPOLOGIES:
        assert typology in printed
    doc = json.loads(out.read_text())
    assert set(doc["typologies"]) == {"payment_model_max", "peer_tail", "account_model_seen",
                                      "account_model_unseen"}
    for per in doc["typologies"].values():
        assert set(per) == set(ALL_TYPOLOGIES)
        assert all(0.0 <= v["roc_auc"] <= 1.0 and 0.0 <= v["recall"] <= 1.0 and v["accounts"] > 0
                   for v in per.values())


def test_main_refuses_no_training_population(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--populations", "0"])
    assert exc.value.code == 2 and "--populations must be at least 1" in capsys.readouterr().err
