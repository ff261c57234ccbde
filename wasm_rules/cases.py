"""Ruleset test cases (JSONL): each line names a case, its features and the expected result.

``{"case": "...", "features": {"amount_usd": 9500, ...}, "expect": {"decision": "HOLD",
"fired": ["RULE_ID"]}}``. Features not given are 0.0; special values may be written as the
strings "nan", "inf", "-inf", "-0.0". ``fired`` is the exact set of rules that must fire.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import orjson

from wasm_rules.errors import RulesetError
from wasm_rules.language import OUTCOMES
from wasm_rules.sandbox import BatchResult, Manifest

__all__ = ["MAX_CASES_BYTES", "Case", "CaseResult", "check_cases", "parse_cases"]

MAX_CASES_BYTES = 16 << 20  # a cases file (the HTTP API's limit too); each line's JSON nests at most
# 1,024 levels (orjson's own limit, checked without recursion)

_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0}


@dataclass(frozen=True)
class Case:
    line: int
    name: str
    features: dict[str, float]
    decision: str
    fired: frozenset[str]


@dataclass(frozen=True)
class CaseResult:
    case: Case
    decision: str
    fired: frozenset[str]

    @property
    def ok(self) -> bool:
        return self.decision == self.case.decision and self.fired == self.case.fired

    def explain(self) -> str:
        parts = []
        if self.decision != self.case.decision:
            parts.append(f"decision {self.decision}, expected {self.case.decision}")
        if self.fired != self.case.fired:
            extra, missing = self.fired - self.case.fired, self.case.fired - self.fired
            if extra:
                parts.append(f"also fired {', '.join(sorted(extra))}")
            if missing:
                parts.append(f"did not fire {', '.join(sorted(missing))}")
        return "; ".join(parts) or "ok"


def _value(v: object, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise RulesetError(f"{where}: feature values must be numbers")
    if isinstance(v, str):
        if v not in _SPECIAL:
            raise RulesetError(f"{where}: string value {v!r} is not one of {', '.join(_SPECIAL)}")
        return _SPECIAL[v]
    return float(v)


def parse_cases(text: bytes | str, features: tuple[str, ...], rule_ids: set[str]) -> list[Case]:
    """Parse a cases file against a module's features and rules; errors name the line. A file
    over ``MAX_CASES_BYTES`` is refused before parsing."""
    if len(text) > MAX_CASES_BYTES:
        raise RulesetError(f"the cases file is over {MAX_CASES_BYTES:,} bytes (the limit, MAX_CASES_BYTES)")
    try:
        raw = text.decode("utf-8") if isinstance(text, bytes) else text
    except UnicodeDecodeError as exc:
        raise RulesetError(f"the cases file is not UTF-8 (byte {exc.start})") from None
    known = set(features)
    cases: list[Case] = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            doc = orjson.loads(line)
            name = str(doc["case"])
            where = f"line {n} (case {name!r})"
            feats = doc.get("features", {})
            expect = doc["expect"]
            decision, fired = expect["decision"], frozenset(expect.get("fired", []))
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise RulesetError(f"{where}: not a case object: {exc}") from exc
        if not isinstance(feats, dict):
            raise RulesetError(f"{where}: features must be an object")
        unknown = sorted(set(feats) - known)
        if unknown:
            raise RulesetError(f"{where}: unknown feature(s) {', '.join(unknown)}")
        if decision not in OUTCOMES:
            raise RulesetError(f"{where}: decision {decision!r} is not one of {', '.join(OUTCOMES)}")
        if not fired <= rule_ids:
            raise RulesetError(f"{where}: unknown rule(s) {', '.join(sorted(fired - rule_ids))}")
        values = {k: _value(v, where) for k, v in feats.items()}
        cases.append(Case(n, name, values, decision, fired))
    if not cases:
        raise RulesetError("the cases file holds no cases")
    return cases


def rows_of(cases: list[Case], features: tuple[str, ...]) -> npt.NDArray[np.float64]:
    rows = np.zeros((len(cases), len(features)), dtype=np.float64)
    index = {f: i for i, f in enumerate(features)}
    for r, case in enumerate(cases):
        for name, v in case.features.items():
            rows[r, index[name]] = v
    return rows


def check_cases(cases: list[Case], result: BatchResult, manifest: Manifest) -> list[CaseResult]:
    """Compare a batch result (one row per case, in order) with the expectations."""
    return [
        CaseResult(case, OUTCOMES[int(result.outcomes[i])],
                   frozenset(result.fired_rules(i, manifest)))
        for i, case in enumerate(cases)
    ]
