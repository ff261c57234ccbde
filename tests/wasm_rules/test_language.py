"""The rule language refuses everything outside its grammar, naming rule, line, column, reason."""

from __future__ import annotations

import pytest

from wasm_rules import RulesetError, RuleSyntaxError, parse_ruleset
from wasm_rules.language import (
    MAX_SOURCE,
    BoolOp,
    Compare,
    Const,
    Feature,
    InSet,
    parse_expression,
)

FEATURES = ("amount_usd", "model_score", "cross_border")


def refused(source: str) -> RuleSyntaxError:
    with pytest.raises(RuleSyntaxError) as info:
        parse_expression(source, FEATURES, "R_TEST")
    assert info.value.rule_id == "R_TEST"
    assert str(info.value).startswith("rule R_TEST, line ")
    return info.value


def test_accepted_grammar_becomes_typed_ir() -> None:
    e = parse_expression("8000 <= amount_usd < 10000", FEATURES)
    assert e == BoolOp("and", (Compare("<=", Const(8000.0), Feature("amount_usd", 0)),
                               Compare("<", Feature("amount_usd", 0), Const(10000.0))))
    assert parse_expression("cross_border in {1, -2.5}", FEATURES) == InSet(
        Feature("cross_border", 2), (1.0, -2.5))
    parse_expression("not (max(amount_usd, 1) / -abs(model_score) > 2 or +amount_usd == 1e3)",
                     FEATURES)
    parse_expression("min(amount_usd, model_score, 3) != 0\n and cross_border == 1", FEATURES)


@pytest.mark.parametrize("source, reason", [
    ("amount_usd.real > 1", "attribute access"),
    ("amount_usd[0] > 1", "subscripts"),
    ("open('x') == 1", "call to 'open'"),
    ("__import__('os') == 1", "call to '__import__'"),
    ("amount_usd.__class__ == 1", "attribute access"),
    ("'EUR' == 1", "strings are not allowed"),
    ("(lambda: 1)() == 1", "call to"),
    ("(lambda: 1) == 1", "lambdas"),
    ("unknown_feature > 1", "unknown name 'unknown_feature'"),
    ("amount_usd", "expected a condition"),
    ("amount_usd > 1 and 2", "expected a condition"),
    ("(amount_usd > 1) + 1 > 0", "expected a number"),
    ("amount_usd > True", "True are not allowed"),
    ("amount_usd > None", "None are not allowed"),
    ("amount_usd ** 2 > 1", "operator Pow"),
    ("amount_usd % 2 == 0", "operator Mod"),
    ("amount_usd // 2 == 0", "operator FloorDiv"),
    ("~amount_usd == 0", "bitwise"),
    ("amount_usd is 1", "comparison Is"),
    ("amount_usd not in {1}", "'not in'"),
    ("amount_usd in [1, 2]", "set literal"),
    ("amount_usd in {model_score}", "numeric literals"),
    ("{1, 2} == 1", "only allowed after 'in'"),
    ("max(amount_usd) > 1", "max() takes 2 to 64"),
    ("abs(amount_usd, 1) > 1", "abs() takes 1"),
    ("max(*[1, 2]) > 1", "plain positional"),
    ("max(a=1, b=2) > 1", "plain positional"),
    ("x if amount_usd else 1 > 2", "conditional"),
    ("[x for x in y] == 1", "ListComp"),
    ("(amount_usd := 1) > 0", "assignment"),
    ("amount_usd > 1e400", "not finite"),
    ("amount_usd > 9007199254740993", "not exactly representable"),
    ("amount_usd >", "syntax error"),
    ("", "empty"),
    ("amount_usd > 1)", "syntax error"),
    ("amount_usd > 1, 2", "tuples"),
])
def test_refused_expressions_name_the_reason(source: str, reason: str) -> None:
    assert reason in refused(source).reason


def test_positions_point_at_the_offending_part() -> None:
    err = refused("amount_usd > 1 and\n  foo.bar > 2")
    assert (err.line, err.column) == (2, 3)
    err = refused("amount_usd > 1 and model_score > 'x'")
    assert (err.line, err.column) == (1, 34)


def test_size_and_depth_limits() -> None:
    assert "longer than" in refused("amount_usd > " + "1 + " * MAX_SOURCE + "1").reason
    assert "nested" in refused("(" * 300 + "amount_usd" + ")" * 300 + " > 1").reason
    deep = "amount_usd > " + "abs(" * 60 + "1" + ")" * 60
    assert "deeper than" in refused(deep).reason
    wide = " or ".join("x>1" for _ in range(180))  # 1,259 characters, 541 parts
    with pytest.raises(RuleSyntaxError, match="more than 500 parts"):
        parse_expression(wide, ("x",), "R_WIDE")


GOOD = """
[ruleset]
id = "pack"
version = "1"
features = ["a", "b"]

[[rules]]
id = "R1"
when = "a > 1"
outcome = "HOLD"
reason = "because"
severity = "low"
"""


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('id = "pack"', 'id = "Pack!"'), "id 'Pack!'"),
    (lambda s: s.replace('version = "1"', 'version = " "'), "version is empty"),
    (lambda s: s.replace('["a", "b"]', '["a", "a"]'), "unique"),
    (lambda s: s.replace('["a", "b"]', '["a", "min"]'), "feature name 'min'"),
    (lambda s: s.replace('["a", "b"]', "[]"), "features must list"),
    (lambda s: s.replace('outcome = "HOLD"', 'outcome = "ESCALATE"'), "outcome 'ESCALATE'"),
    (lambda s: s.replace('severity = "low"', 'severity = "urgent"'), "severity 'urgent'"),
    (lambda s: s.replace('reason = "because"', 'reason = ""'), "reason is empty"),
    (lambda s: s.replace('id = "R1"', 'id = "r1"'), "rule id 'r1'"),
    (lambda s: s.replace('when = "a > 1"\n', ""), "missing key 'when'"),
    (lambda s: s + "\n[[rules]]\n" + s.split("[[rules]]")[1], "duplicate rule id R1"),
    (lambda s: s.replace('severity = "low"', 'severity = "low"\nweight = 3'), "unknown key"),
    (lambda s: s.split("[[rules]]")[0], "at least one"),
    (lambda s: s.replace("[ruleset]", "[ruleset"), "TOML"),
    (lambda s: s.replace('when = "a > 1"', 'when = "c > 1"'), "rule R1, line 1, column 1"),
])
def test_ruleset_errors(edit: object, message: str) -> None:
    with pytest.raises(RulesetError, match=message.replace("(", r"\(")):
        parse_ruleset(edit(GOOD))  # type: ignore[operator]


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(RulesetError, match="UTF-8"):
        parse_ruleset(b"\xff\xfe")


def test_source_hash_and_tables_are_kept() -> None:
    rs = parse_ruleset(GOOD + '\n')
    assert len(rs.source_sha256) == 64 and rs.feature_tables == ()
    rs2 = parse_ruleset(GOOD.replace('features = ["a", "b"]',
                                     'features = ["a", "b"]\nfeature_tables = {fx = "ecb-1"}'))
    assert rs2.feature_tables == (("fx", "ecb-1"),) and rs2.source_sha256 != rs.source_sha256
