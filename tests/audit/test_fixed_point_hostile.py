"""Hostile tests of ``sealtrail.decision/4`` (numbers in fixed units) and of the encoder that now
trusts orjson for every float-free value: what must hold, and where a forged, malformed or odd
value is accepted, misread or hangs instead of being refused or named."""

from __future__ import annotations

import copy
import enum
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.console.decision import _features, _score
from audit.bundle.replay import Replayer
from audit.decide.account_risk import AccountRiskError, check_account_risk
from audit.decide.fixed_point import (
    LIMIT,
    decode,
    decode_score,
    quantise_rows,
    quantise_scores,
    scaled_row,
    scaled_score,
)
from audit.decide.record import DECISION_SCHEMA, body_score, features_from_body
from inference.backends.numpy_backend import NumpyBackend
from inference.model import ModelFiles, load_npz
from inference.schema import FEATURE_SCHEMA, feature_digits
from ledger.jcs import CanonicalError, _fast_path_taken, canonical_bytes, jcs_int_rows
from tests.audit.test_pipeline import bodies, submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

ROOT = Path(__file__).parents[2]
V4 = ROOT / "tests" / "vectors" / "decision-v4"
DIGITS = feature_digits(FEATURE_SCHEMA)


# --- ledger.jcs: canonical_bytes against the rfc8785 reference ----------------------------------

def _reference(value: Any) -> bytes | None:
    try:
        return rfc8785.dumps(value)
    except Exception:  # any refusal of the reference
        return None


def _ours(value: Any) -> bytes | None:
    try:
        return canonical_bytes(value)
    except CanonicalError:
        return None


_chars = st.sampled_from(["a", "B", "\x00", "\x1f", "\x7f", '"', "\\", "/", "\u2028", "\ufeff", "é",
                          "\ue000", "\uff61", "\uffff", "\U00010000", "\U0001f600", "\ud800", "\udfff"])
_text = st.lists(_chars, max_size=4).map("".join)
_ints = st.one_of(st.integers(-(2**53) - 3, 2**53 + 3), st.integers(-(2**70), 2**70),
                  st.sampled_from([2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**63, 2**64]))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), _ints, _text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
                            st.dictionaries(_text, inner, max_size=4)),
    max_leaves=24)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_canonical_bytes_equals_rfc8785_or_both_refuse(value: Any) -> None:
    """Keys mixing astral and U+E000..U+FFFF characters, integers either side of 2**53, tuples,
    lone surrogates in keys and strings: byte for byte the reference, or CanonicalError where it
    refuses."""
    assert _ours(value) == _reference(value)


def test_utf16_key_order_is_kept_where_orjson_sorts_by_code_point() -> None:
    value = {"\ue000": 1, "\U0001f600": 2, "z": {"\uffff": [], "\U00010000": None}}
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert list(orjson.loads(canonical_bytes(value))) == ["z", "\U0001f600", "\ue000"]  # UTF-16 order


@pytest.mark.parametrize("depth", [253, 254, 255, 256, 300])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_either_side_of_orjsons_limit_is_the_reference(depth: int, kind: str) -> None:
    value: Any = 0
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_far_deeper_nesting_is_refused_as_the_reference_refuses_it() -> None:
    value: Any = 0
    for _ in range(20_000):
        value = [value]
    with pytest.raises(CanonicalError):
        canonical_bytes(value)


class _Code(enum.IntEnum):
    A = 7


class _Word(enum.StrEnum):
    B = "b"


class _Int(int):
    def __str__(self) -> str:  # orjson and rfc8785 must both ignore this
        return "forty-two"


@pytest.mark.parametrize("value", [
    [_Code.A], {"k": _Int(42)}, [np.int64(3)], [np.float64(0.5)], [1.0], {"k": -0.0},
    [_Word.B], [float("nan")], [{1: 2}], [b"x"], [{"k"}], [orjson.Fragment(b"1")],
])
def test_values_that_are_not_exact_json_types_take_the_reference_path(value: Any) -> None:
    assert not _fast_path_taken(value)
    assert _ours(value) == _reference(value)


def test_canonical_bytes_of_a_cyclic_value_raises_instead_of_hanging() -> None:
    """A list or dict that holds itself is refused at once (``_plain`` stops at orjson's depth,
    the reference then meets RecursionError -> CanonicalError), never walked forever."""
    code = ("from ledger.jcs import canonical_bytes, CanonicalError\n"
            "d = {}\nd['a'] = d\n"
            "try:\n    canonical_bytes(d)\nexcept CanonicalError:\n    print('refused')\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("canonical_bytes of a dict that holds itself did not return within 10 s")
    assert done.stdout.strip() == "refused", done.stderr[-2000:]


# --- ledger.jcs.jcs_int_rows ---------------------------------------------------------------------

_cell = st.one_of(st.none(), st.integers(-(2**53 - 1), 2**53 - 1))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(_cell, min_size=1, max_size=6), min_size=1, max_size=6))
def test_jcs_int_rows_are_each_rows_rfc8785_bytes(rows: list[list[int | None]]) -> None:
    assert jcs_int_rows(rows) == [rfc8785.dumps(r) for r in rows]


@pytest.mark.parametrize("rows", [
    [], [[]], [[1], []], [[True]], [[1, False]], [[1.0]], [[0.5]], [["1"]], [[2**53]], [[-(2**53)]],
    [[1, [2]]], [[[1]]], [[{"a": 1}]], [[np.int64(1)]],
])
def test_jcs_int_rows_refuses_what_is_not_rows_of_integers(rows: Any) -> None:
    with pytest.raises(TypeError):
        jcs_int_rows(rows)


@pytest.mark.parametrize("rows", [[[[1]], 2], [[[1, 2]], 3], [[[5]], -3]])
def test_jcs_int_rows_refuses_a_nested_row_beside_a_bare_integer(rows: Any) -> None:
    """A nested list in one row cannot make up for a bare integer in place of another: the byte
    alphabet and the count of ``[`` alone would accept ``[[[1]], 2]`` as ONE part, ``b'[[1]],]'``."""
    with pytest.raises(TypeError):
        got = jcs_int_rows(rows)
        pytest.fail(f"accepted {rows!r}, returned {got!r}")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_jcs_int_rows_refuses_a_non_finite_float(bad: float) -> None:
    """orjson writes NaN and +-Infinity as ``null``, which the byte alphabet allows: the count of
    ``null`` against the Nones refuses them (rfc8785 refuses them; a missing value is None)."""
    with pytest.raises(TypeError):
        got = jcs_int_rows([[1, bad]])
        pytest.fail(f"accepted {bad!r} as {got!r}")


# --- audit.decide.fixed_point: the units ---------------------------------------------------------

_edges = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 0.005, 0.015, 0.125, 2.5, -2.5, 5e-7,
                          5e-324, 1e-300, float(LIMIT), float(-LIMIT), LIMIT + 1.0, LIMIT / 100, LIMIT / 1e6,
                          float(np.nextafter(LIMIT / 1e6, 0)), 2.0**53, 1.7976931348623157e308])
_values = st.one_of(st.floats(width=64), _edges, st.floats(-LIMIT, LIMIT), st.floats(-2e9, 2e9))


@settings(max_examples=1500, deadline=None)
@given(st.lists(_values, min_size=3, max_size=3))
def test_the_integer_written_is_recovered_from_the_value_the_model_reads(row: list[float]) -> None:
    """For every float (NaN, infinities, -0.0, beyond +-2**50, halves): the integer is within
    +-2**50, ``scaled_row`` of the decoded value gives it back, and ``decode`` of it is that value."""
    digits = (0, 2, 6)
    values, scaled = quantise_rows(np.array([row], dtype=np.float64), digits)
    got, ints = values[0].tolist(), scaled[0].tolist()
    written = [None if math.isnan(v) else k for v, k in zip(got, ints, strict=True)]
    assert scaled_row(got, digits) == written
    assert all(k is None or -LIMIT <= k <= LIMIT for k in written)
    back = decode(written, digits)
    assert np.array_equal(np.array(back), values[0], equal_nan=True)
    assert all(math.copysign(1.0, v) > 0 for v in got if v == 0)  # never -0.0
    assert [math.isnan(v) for v in got] == [math.isnan(v) for v in row]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.one_of(st.floats(width=64), st.floats(0, 1)), min_size=1, max_size=5))
def test_a_score_is_recovered_from_its_millionths(scores: list[float]) -> None:
    values, ppm = quantise_scores(np.array(scores, dtype=np.float64))
    for raw, v, k in zip(scores, values.tolist(), ppm.tolist(), strict=True):
        if math.isnan(raw):
            assert math.isnan(v) and scaled_score(v) is None and math.isnan(decode_score(None))
            continue
        assert 0 <= k <= 1_000_000 and scaled_score(v) == k and decode_score(k) == v


def test_halves_round_to_even_and_the_extremes_clip() -> None:
    row = np.array([[0.125, 0.375, math.inf, -math.inf, math.nan, -0.001]])
    values, scaled = quantise_rows(row, (2, 2, 2, 0, 2, 2))
    assert scaled[0].tolist() == [12, 38, LIMIT, -LIMIT, 0, 0]
    assert scaled_row(values[0].tolist(), (2, 2, 2, 0, 2, 2)) == [12, 38, LIMIT, -LIMIT, None, 0]
    assert canonical_bytes(scaled_row(values[0].tolist(), (2, 2, 2, 0, 2, 2))) == \
        b"[12,38,1125899906842624,-1125899906842624,null,0]"


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", 2**50 + 1, -(2**50) - 1, [1]])
def test_decode_refuses_what_is_not_an_integer_within_range(bad: object) -> None:
    with pytest.raises(ValueError):
        decode([bad], (0,))  # type: ignore[list-item]


@pytest.mark.parametrize("bad", [True, False, 0.5, 1.0, "7", -1, 1_000_001, [1]])
def test_decode_score_refuses_what_is_not_millionths(bad: object) -> None:
    with pytest.raises(ValueError):
        decode_score(bad)


# --- replay of version 4 bodies ------------------------------------------------------------------

def _v4() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (V4 / "records.jsonl").read_bytes().splitlines()]


def _replay(sandbox: Sandbox, bodies_: list[dict[str, Any]]) -> list[str]:
    module, weights = (V4 / "pack.wasm").read_bytes(), (V4 / "weights.npz").read_bytes()
    rp = Replayer(sandbox, lambda sha: module, lambda sha: weights)
    errs = [e for i, b in enumerate(bodies_) for e in rp.add(i + 1, f"t{i}", b)] + rp.flush()
    return [e.kind for e in errs]


def test_the_version_4_vector_replays_clean(sandbox: Sandbox) -> None:
    assert _replay(sandbox, _v4()) == []


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(body: dict[str, Any]) -> None:
        at: Any = body
        for k in path[:-1]:
            at = at[k]
        at[path[-1]] = value
    return change


def _drop(path: tuple[Any, ...]) -> Any:
    def change(body: dict[str, Any]) -> None:
        at: Any = body
        for k in path[:-1]:
            at = at[k]
        del at[path[-1]]
    return change


@pytest.mark.parametrize(("i", "change", "kind"), [
    (3, _set(("score_ppm",), True), "replay.body"),  # a bool is not an integer here
    (3, _set(("score_ppm",), False), "replay.body"),
    (0, _set(("score_ppm",), 607260.0), "replay.body"),
    (0, _set(("features", "scaled", 3), True), "replay.body"),  # True == 1, but not an integer
    (0, _set(("features", "scaled", 2), False), "replay.body"),
    (0, _set(("features", "scaled", 0), 2**50 + 1), "replay.body"),
    (0, _set(("features", "scaled"), [0] * 56), "replay.body"),
    (0, _set(("features", "digits", 0), 3), "replay.body"),
    (0, _set(("features", "digits"), [2] * 57), "replay.body"),
    (0, _drop(("score_ppm",)), "replay.body"),
    (0, _drop(("features", "digits")), "replay.body"),
    (0, _drop(("features", "scaled")), "replay.body"),
    (0, _set(("schema",), "sealtrail.decision/3"), "replay.body"),  # relabelled: no values/score
    (0, _set(("explanation",), None), "replay.explanation"),  # a high score must state reasons
    (0, _set(("features", "scaled", 0), 848329), "replay.features_sha256"),
])
def test_a_forged_version_4_body_is_named(sandbox: Sandbox, i: int, change: Any, kind: str) -> None:
    body = copy.deepcopy(_v4()[i])
    change(body)
    assert kind in _replay(sandbox, [body])


def test_digits_and_scaled_changed_together_are_still_named(sandbox: Sandbox) -> None:
    """Amounts in tenths of cents: the very same decoded float, but digits not the schema's."""
    body = copy.deepcopy(_v4()[0])
    f = body["features"]
    f["digits"][0], f["scaled"][0] = 3, f["scaled"][0] * 10
    assert decode(f["scaled"][:1], [3]) == features_from_body(_v4()[0])[0][:1]
    assert "replay.body" in _replay(sandbox, [body])


def test_a_version_4_body_stripped_of_its_explanation_after_one_with_it_is_named(sandbox: Sandbox) -> None:
    bs = _v4()
    del bs[1]["explanation"]
    assert _replay(sandbox, bs[:2]) == ["replay.explanation"]


def test_a_version_4_body_stripped_of_its_explanation_before_one_with_it_is_named(sandbox: Sandbox) -> None:
    """Within version 4, whether a body has ``explanation`` is fixed by the backend and model
    (``Pipeline``: ``scorer.model`` is an ``MlpModel`` or not), so a version 4 body without the
    field and one with it from the same backend and model cannot both be genuine, whatever their
    order: stripping the reasons of the FIRST record of a model in a bundle is named too."""
    bs = _v4()
    del bs[0]["explanation"]
    assert "replay.explanation" in _replay(sandbox, bs[:2])


@pytest.mark.parametrize(("where", "value"), [
    ((), ("score", 0.01)),  # a float score beside score_ppm, contradicting it
    (("features",), ("values", [0.0] * 57)),  # float values beside scaled
])
def test_a_version_4_body_also_stating_the_version_3_numbers_is_named(
        sandbox: Sandbox, where: tuple[str, ...], value: tuple[str, Any]) -> None:
    """``scaled`` and ``score_ppm`` stand *in place of* ``values`` and ``score`` (docs/formats.md): a
    version 4 body carrying both holds numbers nothing checks, shown to an examiner in the record
    JSON, and is named, as a version 1/2 body stating an (unchecked) explanation is."""
    body = copy.deepcopy(_v4()[0])
    at: Any = body
    for k in where:
        at = at[k]
    at[value[0]] = value[1]
    assert _replay(sandbox, [body]) != []


def test_a_version_4_body_with_false_for_a_zero_digit_is_named(sandbox: Sandbox) -> None:
    """``False == 0``: a sealed body whose ``digits`` hold ``false`` (different bytes, a different
    record) must not pass as the schema's digits."""
    body = copy.deepcopy(_v4()[0])
    assert body["features"]["digits"][2] == 0
    body["features"]["digits"][2] = False
    assert b"false" in canonical_bytes(body)
    assert "replay.body" in _replay(sandbox, [body])


@pytest.mark.parametrize("ppm", [True, False, 0.5, "600000", -1, 1_000_001])
def test_account_risk_refuses_a_score_ppm_that_is_not_millionths(ppm: object) -> None:
    body = copy.deepcopy(_v4()[3])
    body["score_ppm"] = ppm
    with pytest.raises(AccountRiskError):
        check_account_risk(body)


def test_every_vector_body_reads_its_score_as_its_millionths() -> None:
    for body in _v4():
        assert body_score(body) == body["score_ppm"] / 1_000_000
        check_account_risk(body)


# --- readers of version 4 bodies ------------------------------------------------------------------

def test_features_from_body_refuses_an_unknown_feature_schema_with_value_error() -> None:
    """An unknown feature schema is a ValueError, as the docstring promises (``feature_digits``
    itself raises ``UnknownFeatureSchemaError``, an ``InferenceError``)."""
    body = copy.deepcopy(_v4()[0])
    body["features"]["schema"] = "sealtrail.features/99"
    with pytest.raises((ValueError, KeyError, TypeError)):
        features_from_body(body)


@pytest.mark.parametrize("schema", ["sealtrail.features/99", None, ["x"], 3])
def test_the_console_shows_a_version_4_body_of_an_unknown_feature_schema(schema: object) -> None:
    """The decision page of a version 4 record whose feature schema this build does not know (a
    newer decider's, in a rolling upgrade) shows its values by the record's own digits, as a
    version 3 body of that schema is shown with ``feature[i]`` names."""
    body = copy.deepcopy(_v4()[0])
    body["features"]["schema"] = schema
    got = _features(body)
    assert len(got) == len(body["features"]["scaled"])
    assert _score(body) == body["score_ppm"] / 1_000_000


def test_the_console_shows_the_values_a_version_4_body_stands_for() -> None:
    body = _v4()[0]
    named = dict(_features(body))
    assert named["amount_usd"] == body["features"]["scaled"][0] / 100
    assert named["log_amount_usd"] == body["features"]["scaled"][1] / 10**6


# --- the pipeline: what the model, the record and the replay see are the same numbers --------------

class _Recording(NumpyBackend):
    """The numpy backend, keeping each batch it was given and the scores it gave."""

    seen: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]

    def _predict(self, rows: np.ndarray[Any, Any]) -> npt.NDArray[np.float64]:
        got = super()._predict(rows)
        self.seen.append((np.array(rows, dtype=np.float64), np.array(got, dtype=np.float64)))
        return got


def test_the_model_reads_exactly_the_recorded_values_and_the_record_its_rounded_score(
        sqlite_db: Db, signer: Any, sandbox: Sandbox, pack_wasm: bytes) -> None:
    from audit.decide.pipeline import Pipeline
    from audit.decide.types import ActiveRules

    files = ModelFiles.open()
    scorer = _Recording(load_npz(files.weights_path.read_bytes()))
    scorer.seen = []
    ledger = make_ledger(sqlite_db, signer)
    pipe = Pipeline(ledger, scorer, ActiveRules.of(sandbox.load(pack_wasm)))
    subs = submissions(60)
    decisions = pipe.decide(subs)
    sealed = [env["record"] for _, env, _ in bodies(ledger.engine)]
    assert len(sealed) == len(decisions) == len(subs) and all(b["schema"] == DECISION_SCHEMA for b in sealed)
    rows = np.vstack([r for r, _ in scorer.seen])
    raw = np.concatenate([s for _, s in scorer.seen])
    n = rows.shape[1]
    recorded = np.array([features_from_body(b)[0] for b in sealed])
    assert np.array_equal(rows, recorded[:, :n], equal_nan=True)  # the very floats the record states
    for b, d, s in zip(sealed, decisions, raw.tolist(), strict=True):
        assert b["score_ppm"] == round(min(max(s, 0.0), 1.0) * 1_000_000)
        assert d.score == body_score(b) == b["score_ppm"] / 1_000_000  # the caller got the record's score
        assert canonical_bytes(b) == rfc8785.dumps(b)
    module, weights = pack_wasm, files.weights_path.read_bytes()
    rp = Replayer(sandbox, lambda sha: module, lambda sha: weights)
    errs = [e for seq, env, _ in bodies(ledger.engine) for e in rp.add(seq, env["trace_id"], env["record"])]
    assert errs + rp.flush() == [] and rp.replayed == len(subs) and rp.explained > 0


def test_digits_a_record_states_beyond_float64_are_refused_not_computed() -> None:
    """A record of an unknown feature schema is read by its own digits on the console; a digit
    such as 10**9 (10**(10**9) would take minutes and gigabytes) is refused at once."""
    body = copy.deepcopy(_v4()[0])
    body["features"]["schema"] = "sealtrail.features/99"
    body["features"]["digits"][0] = 10**9
    assert _features(body) == []
    with pytest.raises(ValueError, match="digits 0"):
        decode([1], [10**9])
