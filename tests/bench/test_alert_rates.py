"""``bench.alert_rates``: its band suggestions and account counts, and the shipped pack's alert
rates on a small training-simulator run (the figures docs/rules.md quotes come from the same code)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from bench.alert_rates import (
    BAND_RULES,
    Size,
    account_alerts,
    account_max,
    band_thresholds,
    metrics,
    score,
    training_traffic,
)
from bench.heldout_eval import PACK, Traffic
from inference.backends import load_backend
from inference.model import ModelFiles
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset


def traffic(orig: list[int], bene: list[int], labels: list[int], typology: list[str]) -> Traffic:
    n = len(orig)
    return Traffic([], [datetime(2026, 1, 5, tzinfo=UTC)] * n, np.array(labels), np.array(orig),
                   np.array(bene), np.array(typology, dtype=object))


def test_an_alert_marks_both_accounts_and_idle_accounts_are_not_active() -> None:
    tr = traffic([0, 1, 2], [1, 2, 0], [0, 0, 0], ["normal"] * 4)
    active, alerted = account_alerts(tr, np.array([False, True, False]))
    assert active.tolist() == [True, True, True, False]
    assert alerted.tolist() == [False, True, True, False]


def test_account_max_takes_the_highest_score_on_either_side_where_asked() -> None:
    tr = traffic([0, 1], [1, 2], [0, 1], ["normal"] * 3)
    top = account_max(tr, np.array([0.2, 0.9]), np.array([True, False]))
    assert top.tolist() == [0.2, 0.2, -np.inf]


def test_band_thresholds_are_the_quantiles_rounded_up() -> None:
    payments = np.linspace(0.0, 1.0, 100_001)  # 1 % of them at or above 0.99
    accounts = np.zeros(10)
    bands = band_thresholds(payments, accounts)
    assert bands == {"REVIEW": 0.99, "HOLD": 0.99, "BLOCK": 0.99}  # capped at 0.99
    bands = band_thresholds(payments * 0.5, accounts)  # 1 % at or above 0.495 -> 0.50
    assert bands["REVIEW"] == 0.5 and bands["HOLD"] == 0.5 and bands["BLOCK"] == 0.5


def test_band_thresholds_follow_the_accounts_when_they_are_stricter() -> None:
    payments = np.zeros(1_000)
    accounts = np.r_[np.zeros(198), 0.7, 0.8]
    # REVIEW takes 0.5 % of normal accounts: the 99.5th percentile lies between 0.7 and 0.8
    # (0.7005), rounded up: only the 0.8 account, 0.5 %
    assert band_thresholds(payments, accounts)["REVIEW"] == pytest.approx(0.71)
    # HOLD takes 0.2 % (the 99.8th percentile, 0.7602, rounded up) and BLOCK 0.1 % (0.7801)
    assert band_thresholds(payments, accounts)["HOLD"] == pytest.approx(0.77)
    assert band_thresholds(payments, accounts)["BLOCK"] == pytest.approx(0.79)


def test_band_thresholds_ignore_missing_scores() -> None:
    payments = np.r_[np.full(99, 0.1), np.nan, np.inf]
    assert band_thresholds(payments, np.array([np.nan]))["REVIEW"] == pytest.approx(0.1)


@pytest.fixture(scope="module")
def small_run() -> dict[str, object]:
    files = ModelFiles.open()
    model = load_backend("numpy", files.weights_path)
    with Sandbox() as sandbox:
        module = sandbox.load(compile_ruleset(parse_ruleset(PACK.read_text())))
        seed = int(files.card["training"]["seed"]) + 1
        return metrics(score(training_traffic(Size(10_000, 1_000), seed), model, module),
                       ("structuring", "layering", "fan_in", "fan_out", "high_risk_corridor",
                        "round_tripping"))


def test_the_pack_reviews_few_normal_payments_and_catches_every_typology(
        small_run: dict[str, object]) -> None:
    m = small_run
    assert m["normal_payment_alert_rate"] <= 0.03  # type: ignore[operator]
    per = m["typology_account_alert_rate"]
    assert isinstance(per, dict) and len(per) == 6
    assert all(e["alerted"] >= 0.5 for e in per.values()), per


def test_the_model_bands_alone_review_at_most_about_one_percent_of_normal_payments(
        small_run: dict[str, object]) -> None:
    assert small_run["model_bands_normal_payment_rate"] <= 0.01  # type: ignore[operator]
    rates = small_run["rule_rates_on_normal_payments"]
    assert isinstance(rates, dict) and set(BAND_RULES) <= set(rates)
