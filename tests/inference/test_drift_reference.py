"""``inference.drift_reference``: the main features' distribution on the normal training payments."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from inference.drift_reference import (
    MAIN_FEATURES,
    REFERENCE,
    build,
    decile_bins,
    main_features,
    reference_for,
)
from inference.model import MlpModel, ModelFiles, load_npz
from inference.schema import MODEL_SCHEMA, feature_names
from inference.train import same_drift_reference


def test_the_reference_is_the_shipped_model_s_and_another_model_gets_none() -> None:
    files = ModelFiles.open()
    assert reference_for(files.model_sha256) is REFERENCE
    assert reference_for("00" * 32) is None
    assert REFERENCE["payments"] == files.card["drift_reference"]["score"]["payments"]  # one population


def test_every_main_feature_is_read_by_the_model_and_its_bins_are_whole() -> None:
    model = load_npz(ModelFiles.open().weights_path)
    names = feature_names(MODEL_SCHEMA)
    assert len(MAIN_FEATURES) == 10
    for name in MAIN_FEATURES:
        ref = REFERENCE["features"][name]
        assert model.scale[names.index(name)] > 0, name  # not a column the model ignores
        assert ref["edges"] == sorted(set(ref["edges"]))
        assert len(ref["shares"]) == len(ref["edges"]) + 1
        assert math.isclose(sum(ref["shares"]) + ref["missing"], 1.0, abs_tol=1e-5)
    carried = [REFERENCE["features"][n]["first_layer_input"] for n in MAIN_FEATURES]
    assert carried == sorted(carried, reverse=True)


def test_decile_bins_of_known_values() -> None:
    b = decile_bins(np.arange(1000.0))
    assert b["edges"] == [99.9, 199.8, 299.7, 399.6, 499.5, 599.4, 699.3, 799.2, 899.1]
    assert b["shares"] == [0.1] * 10 and b["missing"] == 0.0
    ties = decile_bins(np.r_[np.zeros(75), np.ones(25), np.full(25, np.nan)])  # a flag, a fifth missing
    assert ties["edges"] == [0.0, 1.0]  # the deciles, distinct
    assert ties["shares"] == [0.0, 0.6, 0.2] and ties["missing"] == 0.2
    assert decile_bins(np.full(3, np.nan)) == {"edges": [], "shares": [0.0], "missing": 1.0}


def test_main_features_rank_by_what_the_first_layer_receives() -> None:
    names = ("a", "b", "c")
    w1 = np.array([[1.0], [3.0], [0.5]], np.float32)
    model = MlpModel("s", names, np.zeros(3, bool), np.zeros(3, np.float32), np.array([1, 1, 0], np.float32),
                     ((w1, np.zeros(1, np.float32)),))
    rows = np.array([[2.0, 0.5, 100.0], [-2.0, -0.5, 100.0]])
    # a: |z| 2 x 1 = 2; b: 0.5 x 3 = 1.5; c: scale 0, never read
    assert main_features(model, rows, 3) == [("a", 2.0), ("b", 1.5), ("c", 0.0)]


@pytest.mark.slow
def test_the_reference_rebuilds_from_the_training_simulation() -> None:
    assert build() == REFERENCE  # about two minutes: 26 simulated sets, checked against the card's score


def test_score_references_agree_within_a_few_payments_at_an_edge_and_nowhere_else() -> None:
    want = ModelFiles.open().card["drift_reference"]
    moved = copy.deepcopy(want)
    moved["score"]["shares"][1] += 2e-6  # one payment at an edge on the other side (another CPU's kernels)
    moved["score"]["shares"][2] -= 2e-6
    assert same_drift_reference(moved, want)
    far = copy.deepcopy(want)
    far["score"]["shares"][1] += 1e-4  # some 66 payments: other payments or another model
    edge = copy.deepcopy(want)
    edge["score"]["edges"][1] += 1e-6
    fewer = copy.deepcopy(want)
    fewer["score"]["payments"] -= 1
    for bad in (far, edge, fewer, {"score": {**want["score"], "shares": "0.3"}}, {}, None):
        assert not same_drift_reference(bad, want)
