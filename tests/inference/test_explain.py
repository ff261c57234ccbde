"""Attributions and reason codes: integrated gradients that add up to the score, and reasons an
officer can read, built from hand-made rows and from the shipped model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference.explain import MAX_REASONS, REASONS, explain, reasons
from inference.features import FeatureExtractor
from inference.model import WEIGHTS_NAME, MlpModel, forward, load_npz, shipped_model_dir
from inference.schema import EXTRACTED_NAMES
from inference.simulate import SimConfig, simulate

NAMES = EXTRACTED_NAMES  # the shipped model's columns


@pytest.fixture(scope="module")
def model() -> MlpModel:
    return load_npz(shipped_model_dir() / WEIGHTS_NAME)


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    sims = simulate(SimConfig(seed=5, n_normal=1500, n_accounts=300, days=7))
    return FeatureExtractor().extract([s.transaction for s in sims], [s.at for s in sims])


def _baseline_score(model: MlpModel) -> float:
    h = np.zeros((1, model.n_features))
    for i, (w, b) in enumerate(model.layers):
        h = h @ w.astype(np.float64) + b
        if i < len(model.layers) - 1:
            h = np.maximum(h, 0)
    return float(1 / (1 + math.exp(-h[0, 0])))


def test_attributions_add_up_to_the_score_above_the_baseline(model: MlpModel, rows: np.ndarray) -> None:
    attr = explain(model, rows)
    assert attr.shape == rows.shape
    gap = forward(model, rows) - _baseline_score(model)
    off = np.abs(attr.sum(axis=1) - gap)
    assert off.max() < 0.08  # the midpoint rule over 32 steps, ReLU kinks (docs/scoring.md)
    assert np.percentile(off, 99) < 0.02
    assert np.abs(explain(model, rows, steps=256).sum(axis=1) - gap).max() < 0.012


def test_columns_the_model_does_not_read_get_nothing(model: MlpModel, rows: np.ndarray) -> None:
    attr = explain(model, rows)
    unread = model.scale == 0
    assert unread.any() and not attr[:, unread].any()


def test_attributions_are_the_same_however_the_rows_are_batched(model: MlpModel, rows: np.ndarray) -> None:
    whole = explain(model, rows[:300])
    parts = np.vstack([explain(model, rows[:300][i:i + 7]) for i in range(0, 300, 7)])
    # OpenBLAS may pick kernels that block a matrix product differently by batch size on some
    # CPUs (seen 1.6e-8 and 4.2e-7 on AMD EPYCs); contributions are sealed in thousandths of the
    # score, and replay allows half a thousandth plus 1e-4
    assert np.allclose(whole, parts, rtol=0, atol=1e-6)
    assert explain(model, rows[:0]).shape == (0, model.n_features)
    with pytest.raises(ValueError, match="steps"):
        explain(model, rows[:1], steps=0)


def _row(**values: float) -> np.ndarray:
    row = np.zeros(len(NAMES))
    for name, v in values.items():
        row[NAMES.index(name)] = v
    return row


def _attr(**contrib: float) -> np.ndarray:
    return _row(**contrib)


def test_a_3_hop_cycle_and_a_large_amount_read_as_such() -> None:
    row = _row(cycle_len=3, cycle_count=1, amount_log2_ratio_q8=256 * math.log2(3.4), amount_history_n=12)
    got = reasons(NAMES, row, _attr(cycle_len=0.25, cycle_count=0.05, amount_log2_ratio_q8=0.12,
                                    new_counterparty=0.01))
    assert [r.code for r in got] == ["TEMPORAL_CYCLE", "AMOUNT_VS_HISTORY"]  # 0.01 is under the floor
    assert got[0].contribution == pytest.approx(0.3)
    assert "returned to the sender in 3 hops" in got[0].text
    assert "3.4x this account's usual amount" in got[1].text


def test_at_most_three_reasons_largest_first_ties_in_code_order() -> None:
    codes = [code for code, _, _ in REASONS]
    firsts = {code: cols[0] for code, cols, _ in REASONS}
    attr = _attr(**{firsts[c]: 0.1 for c in codes[:5]})
    got = reasons(NAMES, _row(), attr)
    assert len(got) == MAX_REASONS and [r.code for r in got] == codes[:3]
    attr[NAMES.index(firsts[codes[4]])] = 0.5
    assert reasons(NAMES, _row(), attr)[0].code == codes[4]


def test_a_payment_lowering_the_score_gets_no_reason() -> None:
    assert reasons(NAMES, _row(), _attr(pass_through_24h_q16=-0.4, cycle_len=-0.2)) == []


def test_pass_through_and_dormancy_read_from_the_values() -> None:
    got = reasons(NAMES, _row(pass_through_24h_q16=4 << 16, pass_through_7d_q16=52429, orig_dormancy_days=-1,
                              orig_activity_24h=5),
                  _attr(pass_through_24h_q16=0.3, orig_dormancy_days=0.2))
    assert [r.code for r in got] == ["PASS_THROUGH", "DORMANT_THEN_ACTIVE"]
    assert "4x or more of what it received in 24 hours (80% over 7 days)" in got[0].text
    assert "no payment in or out in the last 30 days" in got[1].text


def test_the_shipped_model_explains_its_top_scores_in_words(model: MlpModel) -> None:
    sims = simulate(SimConfig(seed=6, n_normal=3000, n_accounts=400, days=7))
    rows = FeatureExtractor().extract([s.transaction for s in sims], [s.at for s in sims])
    scores = forward(model, rows)
    top = np.argsort(-scores)[:20]
    attr = explain(model, rows[top])
    explained = [reasons(model.feature_names, rows[i], a) for i, a in zip(top, attr, strict=True)]
    assert all(explained)  # every payment scored near 1 has at least one reason
    assert all(r.text and r.contribution >= 0.02 for rs in explained for r in rs)
