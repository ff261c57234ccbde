"""``bench.heldout_eval``'s account scores beside the model maximum: the top-3 mean of payment
scores and the product's account risk replayed over scored traffic (checked by hand)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from audit.decide.account_risk import AccountRiskError, AccountRiskPolicy
from bench.heldout_eval import Scored, Traffic, account_risk_peaks, account_scores, top_k_mean

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def scored(orig: list[int], bene: list[int], scores: list[float], outcomes: list[int],
           at: list[datetime], typology: list[str]) -> Scored:
    n = len(orig)
    traffic = Traffic([], at, np.zeros(n, dtype=np.int64), np.array(orig), np.array(bene),
                      np.array(typology, dtype=object))
    return Scored(traffic, np.zeros((n, 1)), np.array(scores, dtype=np.float64),
                  np.array(outcomes, dtype=np.int64), np.zeros((n, 1), dtype=np.uint64), (), {})


def test_top_k_mean_takes_the_highest_three_or_all_an_account_has() -> None:
    accounts = np.array([0, 0, 0, 0, 1, 2, 2])
    values = np.array([0.1, 0.9, 0.5, 0.7, 0.4, 0.2, 0.6])
    got = top_k_mean(accounts, values, 4)
    assert got[0] == pytest.approx((0.9 + 0.7 + 0.5) / 3)  # the 0.1 is left out
    assert got[1] == pytest.approx(0.4)  # one payment: its score
    assert got[2] == pytest.approx(0.4)  # two: their mean
    assert got[3] == -np.inf  # no payment


def test_account_risk_sums_score_and_outcome_points_and_halves_each_half_life() -> None:
    policy = AccountRiskPolicy()
    hl = timedelta(hours=policy.half_life_hours)
    # account 1 receives a BLOCK scored 1.0, then (one half-life later) an ALLOW scored 0.5;
    # account 2 pays an ALLOW scored 0.2; account 3 touches nothing.
    s = scored([0, 2, 0], [1, 4, 1], [1.0, 0.2, 0.5], [3, 0, 0], [T0, T0, T0 + hl],
               ["normal"] * 5)
    peak = account_risk_peaks(s, policy)
    first = policy.score_milli + policy.block_milli  # 10,000 + 50,000
    assert peak[1] == first  # the decayed 30,000 + 5,000 later is lower than the first peak
    assert peak[0] == first
    assert peak[2] == peak[4] == 2_000
    assert peak[3] == 0


def test_account_risk_alerts_an_account_whose_risk_reaches_the_threshold() -> None:
    assert AccountRiskPolicy().threshold_milli == 50_000
    # five REVIEWs scored 0.0 in one hour: 10,000 each, the threshold on the fifth
    s = scored([0] * 5, [1] * 5, [0.0] * 5, [1] * 5, [T0] * 5, ["normal", "structuring"])
    acc = account_scores(s, seed=1)
    assert list(acc["scores"]["account_risk"]) == [50_000.0, 50_000.0]
    assert list(acc["risk_alerted"]) == [True, True]
    four = scored([0] * 4, [1] * 4, [0.0] * 4, [1] * 4, [T0] * 4, ["normal", "structuring"])
    assert not account_scores(four, seed=1)["risk_alerted"].any()


def test_account_risk_counts_a_missing_score_and_a_payment_to_oneself_once() -> None:
    policy = AccountRiskPolicy()
    s = scored([0], [0], [float("nan")], [1], [T0], ["normal"])  # MODEL_SCORE_MISSING reviews it
    assert account_risk_peaks(s, policy)[0] == policy.missing_score_milli + policy.review_milli
    acc = account_scores(scored([0, 0], [0, 1], [0.9, 0.3], [0, 0], [T0, T0], ["normal"] * 2), seed=1)
    assert acc["scores"]["model_mean"][0] == pytest.approx(0.6)  # 0.9 once, not twice, and 0.3
    assert acc["scores"]["model_top3_mean"][0] == pytest.approx(0.6)


def test_account_risk_refuses_an_event_time_without_a_time_zone() -> None:
    s = scored([0], [1], [0.5], [0], [datetime(2026, 3, 2, 9)], ["normal"] * 2)
    with pytest.raises(AccountRiskError, match="time zone"):
        account_risk_peaks(s)
