"""The default AML pack: every case passes in the sandbox, every rule is exercised both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_rules import Sandbox, compile_ruleset, parse_ruleset
from wasm_rules.cases import check_cases, parse_cases, rows_of
from wasm_rules.errors import RulesetError

PACKS = Path(__file__).parents[2] / "wasm_rules" / "packs"
PACK = parse_ruleset((PACKS / "aml_core.toml").read_bytes())
CASES = parse_cases((PACKS / "aml_core_cases.jsonl").read_bytes(), PACK.features,
                    {r.id for r in PACK.rules})


@pytest.mark.requirement("FATF-R16-originator", "EU-TFR-7-8-missing-info")
def test_every_case_passes_in_the_sandbox() -> None:
    with Sandbox() as sb, sb.load(compile_ruleset(PACK)) as mod:
        results = check_cases(CASES, mod.evaluate(rows_of(CASES, PACK.features)), mod.manifest)
    failures = [f"line {r.case.line} {r.case.name}: {r.explain()}" for r in results if not r.ok]
    assert failures == []


def test_every_rule_has_a_case_that_fires_it_and_one_that_does_not() -> None:
    for rule in PACK.rules:
        assert any(rule.id in c.fired for c in CASES), f"no case fires {rule.id}"
        assert any(rule.id not in c.fired and any(f in c.features for f in _features(rule.when))
                   for c in CASES), f"no near-miss case for {rule.id}"


def _features(when: str) -> set[str]:
    return {f for f in PACK.features if f in when}


def test_the_pack_covers_the_typologies_the_issue_names() -> None:
    ids = " ".join(r.id for r in PACK.rules)
    for word in ("STRUCTURING", "RAPID_MOVEMENT", "FAN_IN", "FAN_OUT", "CALL_FOR_ACTION",
                 "INCREASED_MONITORING", "R16", "ROUND", "SCORE_REVIEW", "SCORE_HOLD",
                 "SCORE_BLOCK"):
        assert word in ids
    assert "model_score" in PACK.features
    assert dict(PACK.feature_tables)["jurisdiction_risk"].startswith("fatf-")


@pytest.mark.parametrize("line, message", [
    ('{"case": "x", "features": {"nope": 1}, "expect": {"decision": "ALLOW"}}', "unknown feature"),
    ('{"case": "x", "features": {}, "expect": {"decision": "MAYBE"}}', "decision 'MAYBE'"),
    ('{"case": "x", "expect": {"decision": "ALLOW", "fired": ["NOPE"]}}', "unknown rule"),
    ('{"case": "x", "features": {"amount_usd": "lots"}, "expect": {"decision": "ALLOW"}}',
     "string value 'lots'"),
    ('{"case": "x", "features": {"amount_usd": true}, "expect": {"decision": "ALLOW"}}', "numbers"),
    ('{"case": "x"}', "not a case object"),
    ("not json", "line 1"),
    ("", "no cases"),
])
def test_bad_case_files_are_refused(line: str, message: str) -> None:
    with pytest.raises(RulesetError, match=message):
        parse_cases(line, PACK.features, {r.id for r in PACK.rules})
