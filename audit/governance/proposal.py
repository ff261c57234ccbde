"""Building a ruleset proposal: TOML source -> compiled module and the body of its record.

Pure apart from the sandbox that runs the ruleset's own test cases (a short-lived one when
none is passed in). The cases must pass in the module and agree with the reference
evaluator, or the proposal is refused before anything is recorded.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.errors import CasesFailedError, RulesetRefusedError
from inference.schema import RULE_FEATURE_NAMES
from wasm_rules import RuleError, RulesetError, RuleSyntaxError, Sandbox, compile_ruleset, parse_ruleset
from wasm_rules.cases import CaseResult, check_cases, parse_cases, rows_of
from wasm_rules.reference import evaluate_rows

__all__ = ["BuiltRuleset", "build_proposal", "refused"]


@dataclass(frozen=True)
class BuiltRuleset:
    """A compiled ruleset: the record body (source, module, rules, cases run) and the module."""

    body: dict[str, Any]
    module: bytes


def refused(exc: RuleError) -> RulesetRefusedError:
    """The compiler's error as governance's refusal, keeping the rule id and position it named."""
    if isinstance(exc, RuleSyntaxError):
        return RulesetRefusedError(str(exc), rule_id=exc.rule_id, line=exc.line, column=exc.column)
    return RulesetRefusedError(str(exc), field=exc.field if isinstance(exc, RulesetError) else None)


def build_proposal(toml_text: str, cases_text: str | None, sandbox: Sandbox | None) -> BuiltRuleset:
    """Parse, check the features against the pipeline's, compile, and run ``cases_text`` if given."""
    try:
        ruleset = parse_ruleset(toml_text)
        unknown = [f for f in ruleset.features if f not in RULE_FEATURE_NAMES]
        if unknown:
            raise RulesetRefusedError(f"ruleset {ruleset.id} reads features the pipeline does not "
                                      f"produce: {', '.join(unknown)}")
        module = compile_ruleset(ruleset)
        cases = None
        if cases_text is not None:
            cases = _run_cases(ruleset, module, cases_text, sandbox)
    except RuleError as exc:
        raise refused(exc) from exc
    body = {
        "id": f"{ruleset.id}@{ruleset.version}", "ruleset_id": ruleset.id, "version": ruleset.version,
        "description": ruleset.description, "source": toml_text, "source_sha256": ruleset.source_sha256,
        "module_sha256": hashlib.sha256(module).hexdigest(),
        "module": base64.b64encode(module).decode("ascii"),
        "rules": [{"id": r.id, "outcome": r.outcome} for r in ruleset.rules], "cases": cases,
    }
    return BuiltRuleset(body, module)


def _run_cases(ruleset: Any, module: bytes, text: str, sandbox: Sandbox | None) -> dict[str, Any]:
    parsed = parse_cases(text, ruleset.features, {r.id for r in ruleset.rules})
    rows = rows_of(parsed, ruleset.features)
    own = sandbox is None
    sb = Sandbox() if sandbox is None else sandbox
    try:
        with sb.load(module) as mod:
            batch = mod.evaluate(rows)
            results: list[CaseResult] = check_cases(parsed, batch, mod.manifest)
    finally:
        if own:
            sb.close()
    ref_out, ref_fired = evaluate_rows(ruleset, rows)
    failures = [{"line": r.case.line, "case": r.case.name, "why": r.explain()} for r in results if not r.ok]
    if not (np.array_equal(ref_out, batch.outcomes) and np.array_equal(ref_fired, batch.fired)):
        failures.append({"line": None, "case": None,
                         "why": "the reference evaluator disagrees with the module"})
    if failures:
        named = "; ".join(f"line {f['line']} {f['case']!r}: {f['why']}" for f in failures[:5])
        raise CasesFailedError(f"{len(failures)} of {len(results)} cases fail: {named}", failures)
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "count": len(results),
            "passed": len(results)}
