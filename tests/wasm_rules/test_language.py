"""The rule language refuses everything outside its grammar, naming rule, line, column, reason."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wasm_rules import RulesetError, RuleSyntaxError, parse_ruleset
from wasm_rules.cases import MAX_CASES_BYTES, parse_cases
from wasm_rules.language import (
    MAX_RULESET_BYTES,
    MAX_SOURCE,
    MAX_TOML_NESTING,
    BoolOp,
    Compare,
    Const,
    Feature,
    InSet,
    parse_expression,
    toml_nesting,
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


# --- document limits, checked before the TOML parser runs -------------------------------------


def test_a_deeply_nested_document_is_refused_before_parsing_naming_the_limit() -> None:
    deep = "junk = " + "[" * 500 + "]" * 500  # about 1 KB; tomllib alone exhausts the stack
    with pytest.raises(RecursionError):
        tomllib.loads(deep)
    with pytest.raises(RulesetError, match=f"more than {MAX_TOML_NESTING} levels.*MAX_TOML_NESTING"):
        parse_ruleset(deep)
    inline = "junk = " + "{a = " * 200 + "1" + "}" * 200
    with pytest.raises(RulesetError, match="MAX_TOML_NESTING"):
        parse_ruleset(inline)


def test_the_limit_is_exact_and_a_real_pack_is_far_below_it() -> None:
    nested = "[" * MAX_TOML_NESTING + "]" * MAX_TOML_NESTING
    at_limit = GOOD.replace('version = "1"', f'version = "1"\nx = {nested}')
    with pytest.raises(RulesetError, match="unknown key"):  # parsed: only the extra key is wrong
        parse_ruleset(at_limit)
    with pytest.raises(RulesetError, match="MAX_TOML_NESTING"):
        parse_ruleset(at_limit.replace("x = [", "x = [["))
    assert toml_nesting(GOOD) == 2  # [[rules]]


def test_a_document_over_the_size_limit_is_refused_naming_it() -> None:
    big = GOOD + "#" * MAX_RULESET_BYTES
    with pytest.raises(RulesetError, match="MAX_RULESET_BYTES"):
        parse_ruleset(big)


@pytest.mark.parametrize("text, depth", [
    ('a = "[[[[{{{{"', 0),
    ("a = '[[[[{{{{'", 0),
    (r'a = "\"[[["', 0),  # an escaped quote does not end the string
    (r'a = """ \""" [[[ """', 0),
    ("a = '''x'''' , [[ ]]", 2),  # a multi-line string may end with one or two extra quotes
    ('a = [ """x"""", [[[ 1 ]]] ]', 4),
    ('a = [ "]", [ "]", [ "]" ] ] ]', 3),  # closing brackets inside strings close nothing
    ("# [[[[ a comment\nb = {c = [1]}", 2),
    ('"quoted [key]" = [[1]]', 2),
])
def test_nesting_reads_strings_and_comments_as_toml_does(text: str, depth: int) -> None:
    assert toml_nesting(text) == depth


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _basic(text: str, quotes: str) -> str:
    return quotes + text.replace("\\", "\\\\").replace('"', '\\"') + quotes


_TRICKY = st.lists(st.sampled_from(["[", "]", "{", "}", '"', "'", "\\", "#", "a", " ,", '"""', "'''"]),
                   max_size=8).map("".join)
_STRINGS = st.one_of(
    _TRICKY.map(lambda t: _basic(t, '"')),
    _TRICKY.map(lambda t: _basic(t, '"""')),
    _TRICKY.filter(lambda t: "'" not in t).map(lambda t: f"'{t}'"),
    _TRICKY.filter(lambda t: "'''" not in t and not t.endswith("'")).map(lambda t: f"'''{t}'''"),
)
_VALUES = st.recursive(
    st.one_of(st.integers(0, 9).map(str), _STRINGS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(inner, max_size=3).map(
            lambda xs: "{" + ", ".join(f"k{i} = {x}" for i, x in enumerate(xs)) + "}"),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.booleans())
def test_nesting_matches_what_tomllib_builds(value: str, comment: bool) -> None:
    """Cross-checked with the parser itself: strings full of brackets, quotes and escapes never
    hide a level or invent one."""
    text = f"v = {value}" + ("  # ]]]] [[[[ '''" if comment else "") + "\n"
    assert toml_nesting(text) == _depth(tomllib.loads(text)["v"])


def test_a_cases_file_over_the_size_limit_is_refused_naming_it() -> None:
    line = b'{"case": "x", "features": {}, "expect": {"decision": "ALLOW"}}\n'
    with pytest.raises(RulesetError, match="MAX_CASES_BYTES"):
        parse_cases(line * (MAX_CASES_BYTES // len(line) + 1), ("a",), set())
