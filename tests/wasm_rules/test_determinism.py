"""Compiled modules agree with the reference evaluator on every row, special values included,
and give the same bytes and the same answers in every process."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from wasm_rules import Sandbox, compile_ruleset, manifest_of, parse_ruleset
from wasm_rules.binary import custom_sections
from wasm_rules.compiler import MANIFEST_SECTION
from wasm_rules.reference import evaluate_rows

PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"
PACK_WIDTH = len(parse_ruleset(PACK.read_bytes()).features)

TORTURE = """
[ruleset]
id = "torture"
version = "1"
features = ["a", "b", "c"]
""" + "".join(
    f'\n[[rules]]\nid = "T{i}"\nwhen = "{when}"\noutcome = "{("ALLOW", "REVIEW", "HOLD", "BLOCK")[i % 4]}"'
    f'\nreason = "r"\nseverity = "low"\n'
    for i, when in enumerate([
        "a / b > 1", "a / b < -1", "a / b == a / b", "b / 0 > 0", "-a / 0 < 0",
        "min(a, b) == 0", "max(a, -0.0) >= 0", "min(a, b, c) < max(a, b, c)", "abs(a) > abs(b)",
        "a != b", "not (a != b)", "a == b", "a in {0, 1, -1, 5e-324}", "not (c in {0})",
        "a * b > 1e300", "a - b < -1e300", "a + b + c > 0 or c < 0 and not b >= 0",
        "-a == 0", "abs(-0.0 * a) == 0", "max(a, b) - min(a, b) <= abs(a - b)",
        "1 / a > 1 / b", "a <= b <= c", "not (a < b) and not (a >= b)",
        "1 / min(a, b) < 0", "1 / max(a, b) > 0", "1 / -a > 0", "1 / abs(b) > 0",
        "1 / (a * b) < 0", "1 / (a - b) < 0",
    ]))

SPECIALS = [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324, 1e-310,
            1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0, 1e300]
SPECIAL = st.sampled_from(SPECIALS)
VALUES = st.one_of(SPECIAL, st.floats(allow_nan=True, allow_infinity=True, width=64))


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    with Sandbox() as sb:
        yield sb  # type: ignore[misc]


def _agree(sb: Sandbox, source: str | bytes, rows: np.ndarray) -> None:
    rs = parse_ruleset(source)
    with sb.load(compile_ruleset(rs)) as mod:
        got = mod.evaluate(rows)
    want_out, want_fired = evaluate_rows(rs, rows)
    bad = np.nonzero((got.outcomes != want_out) | (got.fired != want_fired).any(axis=1))[0]
    assert bad.size == 0, f"row {rows[bad[0]].tolist()} differs from the reference"


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 40), st.just(3)), elements=VALUES))
def test_torture_rules_match_the_reference(sandbox: Sandbox, rows: np.ndarray) -> None:
    _agree(sandbox, TORTURE, rows)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 30), st.just(PACK_WIDTH)),
              elements=st.one_of(SPECIAL, st.floats(-1e6, 1e6), st.integers(0, 12).map(float))))
def test_the_aml_pack_matches_the_reference(sandbox: Sandbox, rows: np.ndarray) -> None:
    _agree(sandbox, PACK.read_bytes(), rows)


def test_every_combination_of_special_values(sandbox: Sandbox) -> None:
    """All 13**3 rows of NaN, +-inf, +-0, subnormals and extremes: random search misses pairs
    like (-0.0, +0.0), where only the sign of a zero tells min from max."""
    grid = np.array(np.meshgrid(SPECIALS, SPECIALS, SPECIALS)).T.reshape(-1, 3)
    _agree(sandbox, TORTURE, grid)


def test_more_than_64_rules(sandbox: Sandbox) -> None:
    rules = "".join(
        f'\n[[rules]]\nid = "R{i}"\nwhen = "x >= {i}"\noutcome = "{("REVIEW", "HOLD")[i % 2]}"'
        f'\nreason = "x at least {i}"\nseverity = "low"\n' for i in range(150))
    src = '[ruleset]\nid = "wide"\nversion = "1"\nfeatures = ["x"]\n' + rules
    rows = np.array([[-1.0], [0.0], [63.0], [64.0], [100.5], [149.0], [1e9], [np.nan]])
    _agree(sandbox, src, rows)
    with sandbox.load(compile_ruleset(parse_ruleset(src))) as mod:
        res = mod.evaluate(rows)
    assert res.fired.shape == (8, 3)
    assert len(res.fired_rules(6, mod.manifest)) == 150 and res.outcomes[6] == 2
    assert res.fired_rules(3, mod.manifest)[-1] == "R64"


def test_compiling_twice_gives_identical_bytes_and_the_manifest() -> None:
    rs = parse_ruleset(PACK.read_bytes())
    a, b = compile_ruleset(rs), compile_ruleset(parse_ruleset(PACK.read_bytes()))
    assert a == b
    (section,) = custom_sections(a)[MANIFEST_SECTION]
    import orjson

    manifest = orjson.loads(section)
    assert manifest == manifest_of(rs)
    assert manifest["source_sha256"] == hashlib.sha256(PACK.read_bytes()).hexdigest()
    assert [r["id"] for r in manifest["rules"]] == [r.id for r in rs.rules]


_CHILD = """
import hashlib, sys
import numpy as np
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset
rs = parse_ruleset(open(sys.argv[1], "rb").read())
module = compile_ruleset(rs)
rows = np.random.default_rng(7).normal(0, 1e4, size=(3000, len(rs.features)))
rows[::5, -1] = np.nan
with Sandbox() as sb, sb.load(module) as mod:
    res = mod.evaluate(rows)
answers = res.outcomes.tobytes() + res.fired.tobytes()
print(hashlib.sha256(module).hexdigest(), hashlib.sha256(answers).hexdigest())
"""


def test_same_module_and_answers_in_other_processes() -> None:
    runs = {
        subprocess.run([sys.executable, "-c", _CHILD, str(PACK)], capture_output=True, text=True,
                       check=True).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
    module_sha, _ = runs.pop().split()
    assert module_sha == hashlib.sha256(compile_ruleset(parse_ruleset(PACK.read_bytes()))).hexdigest()
