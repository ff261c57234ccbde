"""What the rule benchmark evaluates: two packs, seeded feature rows, and the engines compared.

Engines, all deciding ``max(outcome of fired rules)`` per row (ALLOW when none fires):
the wasm sandbox (numpy rows), our pure-Python reference evaluator (numpy rows), plain Python
closures generated from each rule's ``when`` over dict rows, and the ``rule-engine`` package
from PyPI with each rule translated to its syntax (dict rows).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import wasm_rules
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
from wasm_rules.reference import evaluate_rows

Rows = npt.NDArray[np.float64]
DictRow = dict[str, float]
Predicate = Callable[[DictRow], bool]
DictEngine = Callable[[Sequence[DictRow]], list[int]]

SEED = 20261216
FULL_PACK = Path(wasm_rules.__file__).parent / "packs" / "aml_core.toml"

# Six representative rules of aml_core, ``when`` copied verbatim: one per outcome band and
# per kind of expression (threshold, and/or of comparisons, fail-closed not, chained range).
SIX_RULES_TOML = """
[ruleset]
id = "aml_bench6"
version = "bench"
description = "Six rules of aml_core for the rule benchmark."
features = [
  "amount_usd", "round_amount", "cross_border", "orig_country_risk", "bene_country_risk",
  "orig_name_present", "orig_account_present", "orig_address_or_id_present",
  "orig_sum_usd_24h", "bene_sum_usd_24h", "orig_near_threshold_count_24h",
  "orig_in_out_24h", "bene_in_out_24h", "model_score",
]

[[rules]]
id = "STRUCTURING_ORIG_24H"
when = "orig_near_threshold_count_24h >= 3"
outcome = "HOLD"
reason = "Possible structuring: three or more USD 8,000-9,999 transfers sent within 24 hours."
severity = "high"

[[rules]]
id = "RAPID_MOVEMENT_24H"
when = "(orig_in_out_24h == 1 and orig_sum_usd_24h >= 10000) or (bene_in_out_24h == 1 and bene_sum_usd_24h >= 10000)"
outcome = "REVIEW"
reason = "Rapid movement: an account received and sent USD 10,000 or more within 24 hours."
severity = "medium"

[[rules]]
id = "JURISDICTION_CALL_FOR_ACTION"
when = "orig_country_risk == 2 or bene_country_risk == 2"
outcome = "BLOCK"
reason = "Originator or beneficiary in a jurisdiction subject to a FATF call for action."
severity = "critical"

[[rules]]
id = "R16_ORIGINATOR_INCOMPLETE"
when = "cross_border == 1 and not (amount_usd < 1000) and not (orig_name_present == 1 and orig_account_present == 1 and orig_address_or_id_present == 1)"
outcome = "HOLD"
reason = "Incomplete originator information on a cross-border wire of USD 1,000 or more (R.16)."
severity = "high"

[[rules]]
id = "LARGE_ROUND_AMOUNT"
when = "round_amount == 1 and amount_usd >= 50000"
outcome = "REVIEW"
reason = "Large round-sum payment of USD 50,000 or more."
severity = "low"

[[rules]]
id = "MODEL_SCORE_HOLD"
when = "0.8 <= model_score < 0.95"
outcome = "HOLD"
reason = "The risk model scored this payment between 0.8 and 0.95."
severity = "high"
"""  # noqa: E501


def packs() -> dict[str, Ruleset]:
    """The benchmark packs by label: the six-rule pack and the full default pack."""
    six = wasm_rules.parse_ruleset(SIX_RULES_TOML)
    full = wasm_rules.parse_ruleset(FULL_PACK.read_bytes())
    return {f"{len(six.rules)} rules": six, f"{len(full.rules)} rules (aml_core)": full}


def feature_columns(n: int, seed: int = SEED) -> dict[str, Rows]:
    """Seeded, NaN-free columns of every aml_core feature for ``n`` payments.

    Mostly ordinary retail payments, with a few percent of structuring, pass-through, fan-out,
    listed-jurisdiction, incomplete-wire and high-score rows so that rules fire now and then.
    """
    rng = np.random.default_rng(seed)

    def flag(p: float) -> Rows:
        return (rng.random(n) < p).astype(np.float64)

    amount = rng.lognormal(6.3, 1.6, n)
    amount = np.where(rng.random(n) < 0.03, rng.lognormal(11.0, 0.6, n), amount)
    amount = np.where(rng.random(n) < 0.03, rng.uniform(8000, 10000, n), amount)
    round_amount = flag(0.08)
    amount = np.where(round_amount == 1, np.maximum(1000, np.round(amount / 1000) * 1000), amount)
    amount = np.round(amount, 2)
    cols: dict[str, Rows] = {
        "amount_usd": amount,
        "log_amount_usd": np.log1p(amount),
        "round_amount": round_amount,
        "cross_border": flag(0.25),
        "orig_country_risk": rng.choice([0.0, 1.0, 2.0], n, p=[0.94, 0.05, 0.01]),
        "bene_country_risk": rng.choice([0.0, 1.0, 2.0], n, p=[0.96, 0.035, 0.005]),
        "new_counterparty": flag(0.2),
        "hour_utc": rng.integers(0, 24, n).astype(np.float64),
        "weekend": flag(2 / 7),
    }
    for f, p in (("orig_name_present", 0.98), ("orig_account_present", 0.99),
                 ("orig_address_or_id_present", 0.92), ("bene_name_present", 0.98),
                 ("bene_account_present", 0.99)):
        cols[f] = flag(p)
    for side in ("orig", "bene"):
        c1 = rng.poisson(0.3, n)
        c24 = c1 + rng.poisson(1.5, n)
        c7 = c24 + rng.poisson(6.0, n)
        busy = rng.random(n) < 0.02  # fan-in / fan-out accounts
        distinct = np.where(busy, rng.integers(10, 30, n), np.minimum(c24, rng.poisson(1.2, n)))
        c24 = np.maximum(c24, distinct)
        per_tx = rng.lognormal(6.5, 1.5, n)
        cols[f"{side}_count_1h"] = c1.astype(np.float64)
        cols[f"{side}_count_24h"] = c24.astype(np.float64)
        cols[f"{side}_count_7d"] = np.maximum(c7, c24).astype(np.float64)
        cols[f"{side}_sum_usd_1h"] = np.round(c1 * per_tx, 2)
        cols[f"{side}_sum_usd_24h"] = np.round(c24 * per_tx * rng.uniform(1, 3, n), 2)
        cols[f"{side}_sum_usd_7d"] = np.round(cols[f"{side}_sum_usd_24h"] * rng.uniform(1, 5, n), 2)
        cols[f"{side}_distinct_counterparties_24h"] = distinct.astype(np.float64)
        near = np.where(rng.random(n) < 0.025, rng.integers(3, 7, n), rng.poisson(0.05, n))
        cols[f"{side}_near_threshold_count_24h"] = near.astype(np.float64)
        cols[f"{side}_in_out_24h"] = flag(0.10)
    cols["model_score"] = np.where(rng.random(n) < 0.08, rng.random(n), rng.beta(1.2, 12.0, n))
    return cols


def pack_rows(cols: dict[str, Rows], ruleset: Ruleset) -> Rows:
    """The pack's feature matrix (columns in its declared order), C-contiguous float64."""
    return np.ascontiguousarray(np.column_stack([cols[f] for f in ruleset.features]))


def dict_rows(rows: Rows, ruleset: Ruleset) -> list[DictRow]:
    """The same rows as dicts of feature name -> float, as a Python service would hold them."""
    names = ruleset.features
    return [dict(zip(names, r, strict=True)) for r in rows.tolist()]


def _number(v: float) -> str:
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def rule_engine_text(e: Expr) -> str:
    """A rule IR expression in rule-engine syntax (chained comparisons are already split)."""
    if isinstance(e, Const):
        return _number(e.value)
    if isinstance(e, Feature):
        return e.name
    if isinstance(e, Neg):
        return f"-({rule_engine_text(e.operand)})"
    if isinstance(e, Arith):
        return f"({rule_engine_text(e.left)} {e.op} {rule_engine_text(e.right)})"
    if isinstance(e, Compare):
        return f"{rule_engine_text(e.left)} {e.op} {rule_engine_text(e.right)}"
    if isinstance(e, InSet):
        return f"{rule_engine_text(e.operand)} in [{', '.join(_number(v) for v in e.values)}]"
    if isinstance(e, BoolOp):
        return "(" + f" {e.op} ".join(rule_engine_text(x) for x in e.operands) + ")"
    if isinstance(e, Not):
        return f"not ({rule_engine_text(e.operand)})"
    assert isinstance(e, Call)
    raise ValueError(f"{e.fn}() has no rule-engine translation in this benchmark")


def have_rule_engine() -> bool:
    """Whether ``import rule_engine`` works."""
    try:
        import rule_engine  # noqa: F401
    except ImportError:
        return False
    return True


def rule_engine_predicates(ruleset: Ruleset) -> list[tuple[Predicate, int]] | None:
    """Each rule compiled by rule-engine, with its outcome code; None if it is not installed."""
    try:
        import rule_engine
    except ImportError:
        return None
    return [(rule_engine.Rule(rule_engine_text(r.expr)).matches, r.outcome_code)
            for r in ruleset.rules]


class _RowLookup(ast.NodeTransformer):
    """Rewrite feature names ``x`` into ``r["x"]``."""

    def __init__(self, features: Sequence[str]) -> None:
        self.features = set(features)

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id not in self.features:
            return node
        sub = ast.Subscript(ast.Name("r", ast.Load()), ast.Constant(node.id), ast.Load())
        return ast.copy_location(sub, node)


def closure_predicates(ruleset: Ruleset) -> list[tuple[Predicate, int]]:
    """One plain ``lambda r: ...`` per rule, its ``when`` text over a dict row: no sandbox.

    Python compares NaN as the rule language does (every comparison false), so no guard.
    """
    preds: list[tuple[Predicate, int]] = []
    for r in ruleset.rules:
        body = _RowLookup(ruleset.features).visit(ast.parse(r.when.strip(), mode="eval").body)
        args = ast.arguments(posonlyargs=[], args=[ast.arg("r")], kwonlyargs=[], kw_defaults=[],
                             defaults=[])
        tree = ast.fix_missing_locations(ast.Expression(ast.Lambda(args, body)))
        fn = eval(compile(tree, f"<rule {r.id}>", "eval"), {"__builtins__": {}}, {})
        preds.append((fn, r.outcome_code))
    return preds


def dict_engine(preds: Sequence[tuple[Predicate, int]]) -> DictEngine:
    """Decide a batch of dict rows: every rule evaluated per row, highest outcome kept."""
    table = tuple(preds)

    def decide(batch: Sequence[DictRow]) -> list[int]:
        out = []
        for row in batch:
            best = 0
            for pred, code in table:
                if pred(row) and code > best:
                    best = code
            out.append(best)
        return out

    return decide


def agreement(
    ruleset: Ruleset, rows: Rows, dicts: Sequence[DictRow], module: wasm_rules.RuleModule,
    engines: dict[str, list[tuple[Predicate, int]]],
) -> dict[str, Any]:
    """How each engine agrees with the reference on ``rows``: outcomes, and fired rules."""
    ref_out, ref_fired = evaluate_rows(ruleset, rows)
    bits = np.unpackbits(ref_fired.view(np.uint8), axis=1, bitorder="little")
    res = module.evaluate(rows)
    n = len(rows)
    report: dict[str, Any] = {
        "rows": n,
        "rows_any_rule_fired": int(bits.any(axis=1).sum()),
        "outcomes": {name: int((ref_out == k).sum()) for k, name in enumerate(wasm_rules.OUTCOMES)},
        "sandbox": {"outcomes_equal": int((res.outcomes == ref_out).sum()),
                    "fired_equal": int((res.fired == ref_fired).all(axis=1).sum())},
    }
    for name, preds in engines.items():
        fired = np.array([[pred(d) for pred, _ in preds] for d in dicts], dtype=np.uint8)
        out = np.asarray(dict_engine(preds)(dicts), dtype=np.uint8)
        wrong = [r.id for k, r in enumerate(ruleset.rules)
                 if not np.array_equal(fired[:, k], bits[:, k])]
        report[name] = {"outcomes_equal": int((out == ref_out).sum()),
                        "rules_agree": len(ruleset.rules) - len(wrong), "rules_disagree": wrong}
    return report


def batches_of(items: Sequence[Any] | Rows, size: int) -> list[Any]:
    """Consecutive batches of ``size`` (numpy batches copied to contiguous arrays)."""
    n = len(items) - len(items) % size
    if isinstance(items, np.ndarray):
        return [np.ascontiguousarray(items[i : i + size]) for i in range(0, n, size)]
    return [list(items[i : i + size]) for i in range(0, n, size)]

