"""Findings of a review, each pinned by a test: bad rows, closed sandboxes, compile-time
limits, scratch-local reuse, ASCII-only expressions, and cases files that are not UTF-8."""

from __future__ import annotations

import numpy as np
import pytest

from tests.wasm_rules.guests import guest
from wasm_rules import (
    RuleError,
    RulesetError,
    RuleSyntaxError,
    Sandbox,
    SandboxLimits,
    compile_ruleset,
    parse_ruleset,
)
from wasm_rules.cases import parse_cases
from wasm_rules.language import parse_expression


def pack(rules: list[str]) -> str:
    body = "".join(f'\n[[rules]]\nid = "R{i}"\nwhen = "{w}"\noutcome = "HOLD"\nreason = "r"'
                   f'\nseverity = "low"\n' for i, w in enumerate(rules))
    return '[ruleset]\nid = "p"\nversion = "1"\nfeatures = ["x", "y"]\n' + body


@pytest.mark.parametrize("rows", [
    [["abc", 1.0]], [[1.0, 2.0], [3.0]], np.array([[1 + 2j, 0]]),
    np.ma.masked_array([[1.0, 2.0]], mask=[[True, False]]), np.array([["1e5", "2"]]),
])
def test_rows_that_are_not_real_numbers_are_refused(rows: object) -> None:
    with Sandbox() as sb, sb.load(compile_ruleset(parse_ruleset(pack(["x > 0"])))) as mod:
        with pytest.raises(RuleError, match=r"rows|masked"):
            mod.evaluate(rows)  # type: ignore[arg-type]
        assert mod.evaluate(np.array([[1, 0]], dtype=np.int32)).outcomes.tolist() == [2]


def test_a_closed_sandbox_refuses_to_run_what_it_loaded() -> None:
    sb = Sandbox(SandboxLimits(fuel_base=10**10))
    mod = sb.load(guest())
    sb.close()
    with pytest.raises(RuleError, match="closed"):
        mod.evaluate(np.ones((1, 1)))


def test_scratch_locals_are_reused_across_rules() -> None:
    from wasm_rules.compiler import _wat

    many = [" and ".join(f"x != {k}" for k in range(12)) for _ in range(60)]
    rs = parse_ruleset(pack(many))
    assert _wat(rs, b"{}").count("(local $t") == 24  # one rule's worth, not 60 rules' worth
    with Sandbox() as sb, sb.load(compile_ruleset(rs)) as mod:
        assert mod.evaluate(np.array([[50.0, 0.0], [3.0, 0.0]])).outcomes.tolist() == [2, 0]


def test_a_pack_too_costly_per_row_is_refused_at_compile_time() -> None:
    rule = " or ".join(f"(x + {k}) * (y - {k}) / (x + y + {k}) > {k}" for k in range(30))
    with pytest.raises(RulesetError, match="instructions a row"):
        compile_ruleset(parse_ruleset(pack([rule] * 40)))


@pytest.mark.parametrize("source, reason", [
    ("\uff58 > 0", "ASCII"), ("x > 0 # and y > 1", "comments"),
    ("x in {" + ", ".join(["1"] * 600) + "}", "more than 500 parts"),
])
def test_expressions_that_could_mislead_a_reader_are_refused(source: str, reason: str) -> None:
    with pytest.raises(RuleSyntaxError, match=reason):
        parse_expression(source, ("x", "y"), "R")


def test_a_cases_file_that_is_not_utf8_is_a_ruleset_error() -> None:
    with pytest.raises(RulesetError, match="not UTF-8"):
        parse_cases(b'{"case": "\xff"}', ("x",), {"R0"})
