"""The held-out evaluation's metrics (bench/heldout_eval.py), checked by hand and against references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.heldout_eval import average_precision, recall_at_fpr, roc_auc
from inference.train import roc_auc as train_roc_auc


def test_roc_auc_matches_the_training_code_and_a_pairwise_count_with_ties() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, 300).astype(np.float64)  # many ties
    labels = (rng.random(300) < 0.3).astype(np.int64)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = sum((p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)) / (len(pos) * len(neg))
    assert roc_auc(scores, labels) == pytest.approx(pairs, abs=1e-12)
    assert roc_auc(scores, labels) == pytest.approx(train_roc_auc(scores, labels), abs=1e-12)


def test_roc_auc_extremes_and_one_class() -> None:
    y = np.array([0, 0, 1, 1])
    assert roc_auc(np.array([0.1, 0.2, 0.8, 0.9]), y) == 1.0
    assert roc_auc(np.array([0.9, 0.8, 0.2, 0.1]), y) == 0.0
    assert roc_auc(np.ones(4), y) == 0.5  # a constant score knows nothing
    assert np.isnan(roc_auc(np.ones(3), np.zeros(3)))


def test_average_precision_by_hand() -> None:
    # ranked: +, -, +, -  -> precision at the positives 1/1 and 2/3
    scores = np.array([0.9, 0.8, 0.7, 0.1])
    labels = np.array([1, 0, 1, 0])
    assert average_precision(scores, labels) == pytest.approx((1 + 2 / 3) / 2)
    # ties are taken together: all four at one score -> precision 2/4 for both positives
    assert average_precision(np.ones(4), labels) == pytest.approx(0.5)
    assert np.isnan(average_precision(scores, np.zeros(4)))


def test_recall_at_one_percent_of_negatives() -> None:
    neg = np.arange(200, dtype=np.float64)  # 200 negatives scored 0..199: 1 % is two accounts
    pos = np.array([198.5, 199.5, 250.0, 10.0])
    scores = np.r_[neg, pos]
    labels = np.r_[np.zeros(200), np.ones(4)]
    recall, fpr = recall_at_fpr(scores, labels, 0.01)
    assert fpr == pytest.approx(2 / 200)  # threshold 197: only 198 and 199 of the negatives are above it
    assert recall == pytest.approx(0.75)  # 198.5, 199.5 and 250 are above it, 10 is not
