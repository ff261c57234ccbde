"""The shipped model: reproducible from its seed, its card honest, its files bound together."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.backends import load_backend
from inference.errors import ModelError
from inference.features import FeatureExtractor
from inference.model import (
    CARD_NAME,
    ONNX_NAME,
    WEIGHTS_NAME,
    ModelFiles,
    forward,
    load_npz,
    shipped_model_dir,
)
from inference.schema import MODEL_SCHEMA, feature_names
from inference.simulate import ALL_TYPOLOGIES, SimConfig, simulate
from inference.train import (
    GOVERNANCE,
    TrainConfig,
    build_rows,
    by_place,
    draw_populations,
    governance,
    pattern_places,
    recall_at_fpr,
    roc_auc,
    train,
)


def test_shipped_model_files_match_their_card() -> None:
    files = ModelFiles.open()
    card = files.card
    assert files.directory == shipped_model_dir()
    # the model reads the columns of the schema it was trained on, the leading columns of every row
    assert card["feature_schema"] == MODEL_SCHEMA and card["features"] == list(feature_names(MODEL_SCHEMA))
    held, ev = card["metrics"]["heldout"], card["metrics"]["evasion"]
    # the card shows what the model is worth: a useful ranking, and the evasion figure as measured
    assert held["roc_auc"] >= 0.95 and held["recall_at_1pct_fpr"] >= 0.6
    assert 0 < ev["detection_rate_at_1pct_fpr"] <= 1 and ev["rows"] > ev["positives"] > 0
    for part in (held, ev):  # every laundering payment is a first or a later one; a pattern has one first
        place = part["by_place_at_1pct_fpr"]
        assert place["first_payment"]["n"] + place["later_payments"]["n"] == part["positives"]
        assert place["patterns"]["n"] == place["first_payment"]["n"] == sum(
            v["n"] for v in place["patterns"]["per_typology"].values())
    # what the card says of evasion: a pattern's first payment is where most detection is lost, and
    # more patterns are seen than payments
    place = ev["by_place_at_1pct_fpr"]
    assert (place["first_payment"]["detected"] < ev["detection_rate_at_1pct_fpr"]
            < place["later_payments"]["detected"] < place["patterns"]["detected"])


def test_payments_are_placed_in_their_patterns_by_first_payment() -> None:
    base = simulate(SimConfig(seed=5, n_normal=200, n_accounts=100, days=7))[0]
    seq = [replace(base, label=0, typology="normal", pattern=0),
           replace(base, label=1, typology="layering", pattern=1),
           replace(base, label=1, typology="fan_in", pattern=1),  # the same number, another typology
           replace(base, label=1, typology="layering", pattern=1),
           replace(base, label=1, typology="layering", pattern=2),
           replace(base, label=0, typology="normal", pattern=0)]
    places, patterns = pattern_places(seq)
    assert places.tolist() == [-1, 0, 0, 1, 0, -1] and patterns.tolist() == [-1, 0, 1, 0, 2, -1]
    got = by_place(np.array([0.9, 0.1, 0.8, 0.7, 0.2, 0.95]), seq, 0.5)
    assert got == {"first_payment": {"n": 3, "detected": round(1 / 3, 6)},
                   "later_payments": {"n": 1, "detected": 1.0},
                   "patterns": {"n": 3, "detected": round(2 / 3, 6),
                                "per_typology": {"fan_in": {"n": 1, "detected": 1.0},
                                                 "layering": {"n": 2, "detected": 0.5}}}}
    # at the threshold is not above it; normal payments above it count for nothing
    assert by_place(np.array([0.9, 0.5, 0.5, 0.5, 0.5, 0.95]), seq, 0.5)["patterns"]["detected"] == 0.0
    none = by_place(np.array([0.9]), seq[:1], 0.5)  # no laundering at all: nothing to share out
    assert none == {"first_payment": {"n": 0, "detected": None}, "later_payments": {"n": 0, "detected": None},
                    "patterns": {"n": 0, "detected": None, "per_typology": {}}}


def test_a_different_seed_gives_a_different_model(tmp_path: Path) -> None:
    small = TrainConfig(seed=8, n_normal=3000, n_accounts=300, days=7, epochs=2, populations=0,
                        heldout_populations=0)
    a, b = train(small), train(TrainConfig(**{**small.__dict__, "seed": 9}))
    assert a.card["model_sha256"] != b.card["model_sha256"]
    assert train(small).card["model_sha256"] == a.card["model_sha256"]


def test_shipped_model_scores_alike_on_every_cpu_backend() -> None:
    files = ModelFiles.open()
    sims = simulate(SimConfig(seed=99, n_normal=3000, days=7, n_accounts=400))
    rows, labels, _ = build_rows(sims)
    ref = load_backend("numpy", files.weights_path).predict(rows)
    ort = load_backend("onnxruntime", files.weights_path, files.onnx_path).predict(rows)
    assert np.max(np.abs(ref - ort)) <= 1e-5
    assert roc_auc(ref, labels) > 0.9  # and it still ranks unseen traffic


def _append_zero(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\0")


Damage = Callable[[Path], object]


@pytest.mark.parametrize("damage, reason", [
    (lambda d: _append_zero(d / WEIGHTS_NAME), "weights.npz has SHA-256"),
    (lambda d: (d / ONNX_NAME).unlink(), "model.onnx is missing"),
    (lambda d: (d / CARD_NAME).write_text("{}"), "is not a sealtrail.model-card/1 card"),
    (lambda d: (d / CARD_NAME).write_text("nope"), "is not JSON"),
    (lambda d: (d / CARD_NAME).unlink(), "no model card"),
])
def test_a_model_directory_that_does_not_match_its_card_is_refused(tmp_path: Path, damage: Damage,
                                                                   reason: str) -> None:
    d = tmp_path / "m"
    shutil.copytree(shipped_model_dir(), d)
    damage(d)
    with pytest.raises(ModelError, match=reason):
        ModelFiles.open(d)


def _pairwise_auc(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1)), min_size=2, max_size=40)
       .filter(lambda xs: 0 < sum(y for _, y in xs) < len(xs)))
def test_roc_auc_equals_the_pairwise_definition_with_ties(pairs: list[tuple[int, int]]) -> None:
    scores = [float(s) for s, _ in pairs]
    labels = [y for _, y in pairs]
    assert roc_auc(np.array(scores), np.array(labels, float)) == pytest.approx(_pairwise_auc(scores, labels))


def test_recall_at_fpr_known_answer() -> None:
    neg = np.arange(100, dtype=float) / 100  # 0.00 .. 0.99
    pos = np.array([0.985, 0.995, 0.5, 2.0])
    scores, labels = np.concatenate([neg, pos]), np.concatenate([np.zeros(100), np.ones(4)])
    recall, thr = recall_at_fpr(scores, labels, 0.01)
    assert thr == 0.98  # one negative (0.99) above it: FPR 1 %
    assert recall == 0.75
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(np.array([0.1, 0.2]), np.array([1.0, 1.0]))


def test_drawn_populations_are_unlike_each_other_and_reproducible() -> None:
    drawn = draw_populations(7, 12)
    assert drawn == draw_populations(7, 12) and drawn != draw_populations(8, 12)
    scales = [p.amount_scale for p in drawn]
    assert min(scales) < 0.1 and max(scales) > 10  # orders of magnitude apart
    assert all(7 <= p.days <= 45 and 1_000 <= p.n_accounts <= 20_000 and p.lookalikes for p in drawn)
    assert {p.evasion for p in drawn} == {True, False}
    assert max(p.cycle_hops[1] for p in drawn) > 5 and max(p.fan_mules[1] for p in drawn) > 40


def test_the_model_does_not_read_absolute_amounts_or_the_clock() -> None:
    model = load_npz(shipped_model_dir() / WEIGHTS_NAME)
    sims = simulate(SimConfig(seed=3, n_normal=2000, n_accounts=300, days=7))
    rows = FeatureExtractor().extract([s.transaction for s in sims], [s.at for s in sims])
    moved = rows.copy()
    for name in ("amount_usd", "orig_sum_usd_24h", "hour_utc"):
        moved[:, model.feature_names.index(name)] *= 1000
    assert np.array_equal(forward(model, rows), forward(model, moved))
    assert not np.array_equal(forward(model, rows), forward(model, rows * 1.5))  # it reads the others


def test_a_card_names_the_typologies_it_was_trained_on_when_they_are_not_the_default() -> None:
    assert governance(TrainConfig()) is GOVERNANCE  # the shipped card's words, unchanged
    wide = governance(TrainConfig(typologies=ALL_TYPOLOGIES, payroll_salaries=True))
    assert "9 typologies" in wide["training_data"] and "dormant burst" in wide["training_data"]
    assert "payroll runs" in wide["training_data"]
    assert {k: v for k, v in wide.items() if k != "training_data"} == {
        k: v for k, v in GOVERNANCE.items() if k != "training_data"}
