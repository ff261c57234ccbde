"""Score precision: what each backend states it computes at, the numpy maths at other precisions,
and the bounds a model card carries for them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from inference.backends import load_backend
from inference.model import CARD_NAME, ModelFiles, forward, load_npz
from inference.precision import (
    COMMAND,
    NUMPY_PRECISIONS,
    REFERENCE_PRECISION,
    SECTION,
    SECTION_FORMAT,
    MissingBoundError,
    card_bound,
    card_bounds,
    card_section,
    forward_at,
    measure,
    round_up,
)
from inference.precision_bounds import evaluation_sets, main, train_config
from inference.simulate import SimConfig, simulate
from inference.train import TrainConfig, build_rows, train


@pytest.fixture(scope="module")
def shipped() -> ModelFiles:
    return ModelFiles.open()


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    return build_rows(simulate(SimConfig(seed=99, n_normal=3000, days=7, n_accounts=400)))[0]


def test_every_cpu_backend_states_the_precision_it_computes_at(shipped: ModelFiles) -> None:
    with load_backend("numpy", shipped.weights_path) as ref:
        assert ref.precision == REFERENCE_PRECISION == "fp32"
    with load_backend("onnxruntime", shipped.weights_path, shipped.onnx_path) as ort:
        assert ort.precision == "fp32"
    for p in NUMPY_PRECISIONS:
        with load_backend("numpy", shipped.weights_path, precision=p) as b:
            assert b.precision == p
    with pytest.raises(ValueError, match="int8"):
        load_backend("numpy", shipped.weights_path, precision="int8")


def test_numpy_at_each_precision_scores_as_far_from_the_reference_as_its_arithmetic(
        shipped: ModelFiles, rows: np.ndarray) -> None:
    model = load_npz(shipped.weights_path.read_bytes())
    ref = forward(model, rows)
    assert np.array_equal(forward_at(model, rows, "fp32"), ref)  # the reference itself
    d64 = np.max(np.abs(forward_at(model, rows, "fp64") - ref))
    d16 = np.max(np.abs(forward_at(model, rows, "fp16") - ref))
    assert 0 < d64 < 1e-5  # float32 rounding is all that separates them
    assert d16 > 1e-4  # float16 lies beyond the replay's fixed tolerance: why the card carries bounds
    with load_backend("numpy", shipped.weights_path, precision="fp16") as b:
        assert np.array_equal(b.predict(rows), forward_at(model, rows, "fp16"))
    with pytest.raises(ValueError, match="bf16"):
        forward_at(model, rows, "bf16")


def test_the_shipped_card_states_measured_bounds_and_names_what_was_not_measured(shipped: ModelFiles,
                                                                                  rows: np.ndarray) -> None:
    section = shipped.card[SECTION]
    assert section["format"] == SECTION_FORMAT and section["command"] == COMMAND
    assert section["reference"] == {"backend": "numpy", "precision": REFERENCE_PRECISION}
    assert set(section["sets"]) == {"heldout", "evasion", "heldout_populations"}
    assert section["rows"] == sum(section["sets"].values()) > 200_000
    bounds = card_bounds(shipped.card)
    assert bounds["fp32"]["numpy"] == 0.0 and 0 < bounds["fp32"]["onnxruntime"] < 1e-5
    assert 1e-4 < bounds["fp16"]["numpy"] < 0.05
    assert "int8" not in bounds and "tensorrt" not in bounds.get("fp16", {})
    assert any(n.startswith("int8 on tensorrt") for n in section["not_measured"])
    assert any(n.startswith("fp16 on tensorrt") for n in section["not_measured"])
    # traffic the bound was not measured on stays within it too
    model = load_npz(shipped.weights_path.read_bytes())
    assert np.max(np.abs(forward_at(model, rows, "fp16") - forward(model, rows))) <= bounds["fp16"]["numpy"]


def test_a_bound_the_card_does_not_state_is_refused_naming_the_precision(shipped: ModelFiles) -> None:
    assert card_bound(shipped.card, "numpy", "fp16") == shipped.card[SECTION]["max_abs_diff"]["fp16"]["numpy"]
    with pytest.raises(MissingBoundError, match="precision int8 on backend tensorrt"):
        card_bound(shipped.card, "tensorrt", "int8")
    with pytest.raises(MissingBoundError, match=r"precision fp16 on backend tensorrt .*fp16 on numpy"):
        card_bound(shipped.card, "tensorrt", "fp16")
    bare = {k: v for k, v in shipped.card.items() if k != SECTION}
    assert card_bounds(bare) == {}
    with pytest.raises(MissingBoundError, match="states: none"):
        card_bound(bare, "numpy", "fp16")


def _with(section: Any) -> dict[str, Any]:
    return {"format": "sealtrail.model-card/1", SECTION: section}


@pytest.mark.parametrize(("section", "match"), [
    ("fp16", "not a sealtrail.score-precision/1 section"),
    ({"format": "sealtrail.score-precision/0", "max_abs_diff": {}}, "not a sealtrail.score-precision/1"),
    ({"format": SECTION_FORMAT}, "max_abs_diff is not an object"),
    ({"format": SECTION_FORMAT, "max_abs_diff": {"fp16": 0.1}}, "fp16 are not an object"),
    ({"format": SECTION_FORMAT, "max_abs_diff": {"fp16": {"numpy": -1e-3}}}, "not a number from 0 to 1"),
    ({"format": SECTION_FORMAT, "max_abs_diff": {"fp16": {"numpy": True}}}, "not a number from 0 to 1"),
    ({"format": SECTION_FORMAT, "max_abs_diff": {"fp16": {"numpy": "0.1"}}}, "not a number from 0 to 1"),
    ({"format": SECTION_FORMAT, "max_abs_diff": {"fp16": {"numpy": 1.5}}}, "not a number from 0 to 1"),
])
def test_a_malformed_section_is_no_bound(section: Any, match: str) -> None:
    with pytest.raises(MissingBoundError, match=match):
        card_bound(_with(section), "numpy", "fp16")


@pytest.mark.parametrize("x", [0.0, 1e-9, 2.99e-7, 0.0050099, 0.123456, 9.999e-4, 1.0])
def test_round_up_keeps_three_digits_and_never_goes_below(x: float) -> None:
    got = round_up(x)
    assert got >= x and (x == 0 or got <= x * 1.01)
    assert got == float(f"{got:.3g}")


def test_measure_states_the_largest_difference_of_each_backend(shipped: ModelFiles, rows: np.ndarray) -> None:
    model = load_npz(shipped.weights_path.read_bytes())
    with load_backend("numpy", shipped.weights_path, precision="fp16") as b16:
        got = measure(model, [b16], [("a", rows[:500]), ("b", rows[500:]), ("none", rows[:0])],
                      command="x")
        worst = float(np.max(np.abs(b16.predict(rows) - forward(model, rows))))
    assert got["max_abs_diff"] == {"fp16": {"numpy": round_up(worst)}}
    assert got["sets"] == {"a": 500, "b": len(rows) - 500, "none": 0} and got["rows"] == len(rows)


def test_the_command_writes_what_training_states(tmp_path: Path) -> None:
    """``python -m inference.precision_bounds`` on a card without the section writes the one
    ``train`` wrote, from the card's own training settings, and leaves the rest as it was."""
    small = TrainConfig(seed=8, n_normal=2000, n_accounts=300, days=7, epochs=1, populations=0,
                        heldout_populations=1, population_payments=2000)
    result = train(small, tmp_path)
    assert train_config(result.card) == small
    card_path = tmp_path / CARD_NAME
    trained = orjson.loads(card_path.read_bytes())
    assert {n: len(r) for n, r in evaluation_sets(small)} == trained[SECTION]["sets"]
    card_path.write_bytes(orjson.dumps({k: v for k, v in trained.items() if k != SECTION}))
    assert main(["--model", str(tmp_path), "--dry-run"]) == 0
    assert SECTION not in orjson.loads(card_path.read_bytes())
    assert main(["--model", str(tmp_path)]) == 0
    assert orjson.loads(card_path.read_bytes()) == trained
    assert main(["--model", str(tmp_path / "nowhere")]) == 1


def test_a_section_for_no_rows_states_zero() -> None:
    model = load_npz(ModelFiles.open().weights_path.read_bytes())
    got = card_section(model, [("empty", np.empty((0, model.n_features)))])
    assert all(v == 0.0 for by in got["max_abs_diff"].values() for v in by.values())
    assert not math.isnan(got["rows"])
