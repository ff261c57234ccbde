"""Pure-Python reference evaluator of the rule IR: the semantics the compiled module must match.

IEEE-754 binary64 throughout, as WebAssembly's f64 instructions define it: x/0 is +-inf or
NaN, ``min``/``max`` return NaN if any argument is NaN and order -0.0 below +0.0, ``abs``
clears the sign. Every comparison (including ``!=`` and ``in``) with a NaN operand is false.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from wasm_rules.language import (
    Arith,
    BoolOp,
    Call,
    Compare,
    Const,
    Expr,
    Feature,
    InSet,
    Neg,
    Not,
    Ruleset,
)

__all__ = ["evaluate_expr", "evaluate_rows", "f64_div", "f64_max", "f64_min"]


def f64_div(a: float, b: float) -> float:
    if b != 0.0 or math.isnan(b):
        return a / b
    if math.isnan(a) or a == 0.0:
        return math.nan
    negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    return -math.inf if negative else math.inf


def f64_min(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def f64_max(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def _num(e: Expr, row: Sequence[float]) -> float:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Feature):
        return float(row[e.index])
    if isinstance(e, Neg):
        return -_num(e.operand, row)
    if isinstance(e, Arith):
        a, b = _num(e.left, row), _num(e.right, row)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        return f64_div(a, b)
    if isinstance(e, Call):
        vals = [_num(x, row) for x in e.args]
        if e.fn == "abs":
            return math.fabs(vals[0])
        acc = vals[0]
        for v in vals[1:]:
            acc = f64_min(acc, v) if e.fn == "min" else f64_max(acc, v)
        return acc
    raise TypeError(f"not a number expression: {e!r}")


def evaluate_expr(e: Expr, row: Sequence[float]) -> bool:
    """Value of a condition on one row of features."""
    if isinstance(e, Compare):
        a, b = _num(e.left, row), _num(e.right, row)
        if math.isnan(a) or math.isnan(b):
            return False
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                "!=": a != b}[e.op]
    if isinstance(e, InSet):
        x = _num(e.operand, row)
        return any(x == v for v in e.values)
    if isinstance(e, BoolOp):
        if e.op == "and":
            return all(evaluate_expr(x, row) for x in e.operands)
        return any(evaluate_expr(x, row) for x in e.operands)
    if isinstance(e, Not):
        return not evaluate_expr(e.operand, row)
    raise TypeError(f"not a condition: {e!r}")


def evaluate_rows(
    ruleset: Ruleset, rows: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]:
    """(outcome code per row, fired-rule bitset words per row), as the module returns them."""
    n = rows.shape[0]
    words = (len(ruleset.rules) + 63) // 64
    outcomes = np.zeros(n, dtype=np.uint8)
    fired = np.zeros((n, words), dtype=np.uint64)
    for i in range(n):
        row = rows[i].tolist()
        best = 0
        bits = [0] * words
        for k, rule in enumerate(ruleset.rules):
            if evaluate_expr(rule.expr, row):
                bits[k // 64] |= 1 << (k % 64)
                best = max(best, rule.outcome_code)
        outcomes[i] = best
        fired[i] = bits
    return outcomes, fired
