"""Above- and below-the-line testing of the ``aml_core`` rule pack's thresholds on the held-out generator.

Generates the independent held-out generator's traffic (``inference.heldout``: evaluation only,
never tuning), runs the shipped scoring path on it once (``bench.heldout_eval.score``: features
in time order, the shipped model, the shipped pack), then, for every threshold of every rule,
moves that one threshold below and above its shipped value, compiles the pack so changed in
memory (the pack file is never written) and runs it again over the same rows. Per rule, threshold
and setting it prints, beside the shipped pack's figures from the same run:

- payments alerted (REVIEW or worse), and of them normal payments;
- normal accounts alerted (an account is alerted when a payment it sends or receives is);
- laundering accounts caught, and the typologies whose accounts are caught more or less often.

A threshold is a comparison of a feature with a number (``x >= 3``, ``52429 <= x``, and inside
``not (...)``). Not thresholds: equality tests of codes and flags, country-risk codes, and the
model score's own range [0, 1] (``MODEL_SCORE_MISSING``). Settings: counts (transfers,
counterparties, payments in a history) -2, -1, +1, +2; the model score -0.05, -0.02, +0.02,
+0.05; every other value (USD amounts, Q16 pass-through, Q8 log2 ratios) x0.8, x0.9, x1.1,
x1.25. Each threshold says which way loosens it (alerts more): lowering a lower bound, raising an
upper bound, and the other way round under ``not``.

The bench reports; it picks nothing. The held-out generator must not choose a threshold (the pack
is calibrated on the training simulator with ``bench.alert_rates``).

Run from the repository root: ``python -m bench.threshold_testing [--quick] [--rules ID,...]
[--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.threshold_testing")

import argparse
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from bench.alert_rates import account_alerts
from bench.heldout_eval import BATCH, PACK, Scored, Traffic, score, traffic_arguments, traffic_size
from bench.machine import host_info
from bench.report import write_json
from inference.backends import load_backend
from inference.heldout import TYPOLOGIES, HeldoutConfig, run
from inference.model import ModelFiles
from inference.schema import RULE_FEATURE_NAMES
from wasm_rules import RuleModule, Ruleset, Sandbox, compile_ruleset, parse_ruleset
from wasm_rules.language import Arith, BoolOp, Call, Compare, Const, Expr, Feature, InSet, Neg, Not

__all__ = ["Alerts", "Setting", "Threshold", "UnknownRuleError", "alerts", "main", "thresholds", "vary",
           "with_threshold"]

Kind = Literal["count", "score", "ratio"]
STEPS: dict[Kind, tuple[float, ...]] = {
    "count": (-2, -1, 1, 2),  # added
    "score": (-0.05, -0.02, 0.02, 0.05),  # added
    "ratio": (0.8, 0.9, 1.1, 1.25),  # multiplied
}
# Comparisons that test what a value is rather than how much of it there is.
_CODES = frozenset({"orig_country_risk", "bene_country_risk"})
_RANGES = {"model_score": (0.0, 1.0)}  # a score outside it is a missing score, not a threshold
_COUNTS = ("count", "fan_", "distinct", "activity", "cycle_len")  # in the names of integer counts
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


class UnknownRuleError(ValueError):
    """A rule id the pack does not have, or a rule of it with no threshold to move."""


def _kind(feature: str) -> Kind:
    if feature == "model_score":
        return "score"
    if feature.endswith("_n") or any(p in feature for p in _COUNTS):
        return "count"
    return "ratio"


@dataclass(frozen=True)
class Setting:
    label: str  # "x0.8", "-1", "+0.02", "shipped"
    value: float


@dataclass(frozen=True)
class Threshold:
    """One comparison of a feature with a number in one rule."""

    rule: str
    position: int  # which comparison of the rule (its order in the rule's ``when``, from 0)
    feature: str
    op: str  # with the feature on the left
    value: float
    loosen: int  # +1: raising the value alerts more; -1: lowering it does

    @property
    def kind(self) -> Kind:
        return _kind(self.feature)

    @property
    def label(self) -> str:
        return f"{self.feature} {self.op} {self.value:g}"

    def settings(self) -> list[Setting]:
        """The moved values, lowest first (a count never below 0), with the shipped one among them."""
        kind = self.kind
        out = [Setting("shipped", self.value)]
        for step in STEPS[kind]:
            if kind == "ratio":
                out.append(Setting(f"x{step:g}", self.value * step))
            elif self.value + step >= 0:
                out.append(Setting(f"{step:+g}", round(self.value + step, 6)))
        return sorted(out, key=lambda s: s.value)


def _compares(expr: Expr) -> list[tuple[Compare, bool]]:
    """Every comparison of ``expr`` in source order, with whether an odd number of ``not`` holds it."""
    found: list[tuple[Compare, bool]] = []

    def walk(e: Expr, negated: bool) -> None:
        if isinstance(e, Compare):
            found.append((e, negated))
        elif isinstance(e, Not):
            walk(e.operand, not negated)
        elif isinstance(e, BoolOp):
            for o in e.operands:
                walk(o, negated)

    walk(expr, False)
    return found


def _threshold(rule: str, position: int, c: Compare, negated: bool) -> Threshold | None:
    if c.op not in _FLIP:
        return None
    op: str
    if isinstance(c.left, Feature) and isinstance(c.right, Const):
        feature, op, value = c.left.name, c.op, c.right.value
    elif isinstance(c.left, Const) and isinstance(c.right, Feature):
        feature, op, value = c.right.name, _FLIP[c.op], c.left.value
    else:
        return None
    if feature in _CODES or value in _RANGES.get(feature, ()):
        return None
    loosen = 1 if op in ("<", "<=") else -1  # an upper bound loosens upwards, a lower one downwards
    return Threshold(rule, position, feature, op, value, -loosen if negated else loosen)


def thresholds(ruleset: Ruleset, rules: Sequence[str] | None = None) -> list[Threshold]:
    """The thresholds of ``rules`` (default: every rule that has one), in pack order;
    ``UnknownRuleError`` naming a rule the pack lacks or one with no threshold."""
    out: dict[str, list[Threshold]] = {}
    for rule in ruleset.rules:
        found = [_threshold(rule.id, k, c, neg) for k, (c, neg) in enumerate(_compares(rule.expr))]
        out[rule.id] = [t for t in found if t is not None]
    if rules is None:
        return [t for ts in out.values() for t in ts]
    with_thresholds = [r for r, ts in out.items() if ts]
    pack = f"{ruleset.id} {ruleset.version}"
    for r in rules:
        if r not in out:
            raise UnknownRuleError(f"rule {r!r} is not in pack {pack}; its rules with thresholds: "
                                   f"{', '.join(with_thresholds)}")
        if not out[r]:
            raise UnknownRuleError(f"rule {r} of pack {pack} has no threshold to move (it tests codes or "
                                   f"flags); rules with thresholds: {', '.join(with_thresholds)}")
    return [t for r in rules for t in out[r]]


def _moved(expr: Expr, position: int, value: float) -> Expr:
    """``expr`` with the number of its ``position``-th comparison set to ``value``."""
    seen = -1

    def walk(e: Expr) -> Expr:
        nonlocal seen
        if isinstance(e, Compare):
            seen += 1
            if seen != position:
                return e
            if isinstance(e.right, Const):
                return dataclasses.replace(e, right=Const(value))
            return dataclasses.replace(e, left=Const(value))
        if isinstance(e, Not):
            return Not(walk(e.operand))
        if isinstance(e, BoolOp):
            return BoolOp(e.op, tuple(walk(o) for o in e.operands))
        if isinstance(e, (Arith, Call, Const, Feature, InSet, Neg)):
            return e  # no comparison inside a number or a set test
        raise TypeError(f"unexpected expression node {type(e).__name__}")

    return walk(expr)


def with_threshold(ruleset: Ruleset, t: Threshold, value: float) -> Ruleset:
    """The pack with threshold ``t`` set to ``value`` (in memory; its ``when`` text says so)."""
    rules = tuple(
        dataclasses.replace(r, expr=_moved(r.expr, t.position, value),
                            when=f"{r.when}  # threshold test: {t.label} -> {value:g}")
        if r.id == t.rule else r
        for r in ruleset.rules)
    return dataclasses.replace(ruleset, rules=rules)


@dataclass(frozen=True)
class Alerts:
    """What one pack alerts on the scored traffic."""

    payments: int  # REVIEW or worse
    normal_payments: int
    normal_accounts: int
    laundering_accounts: int
    by_typology: dict[str, int]  # laundering accounts caught, per typology
    rule_hits: int  # payments on which the tested rule fired (0 for the shipped pack's summary)


def alerts(scored: Scored, module: RuleModule, rule: str | None = None) -> Alerts:
    """Run ``module`` over the scored rows (with ``model_score``) and count what it alerts."""
    columns = [RULE_FEATURE_NAMES.index(f) for f in module.manifest.features]
    wide = np.hstack([scored.rows, scored.scores[:, None]])[:, columns]
    outcomes, fired = [], []
    for i in range(0, len(wide), BATCH):
        result = module.evaluate(wide[i:i + BATCH])
        outcomes.append(result.outcomes)
        fired.append(result.fired)
    alerted_pay = np.concatenate(outcomes) >= 1
    hits = 0
    if rule is not None:
        k = [r.id for r in module.manifest.rules].index(rule)
        bits = np.vstack(fired)[:, k // 64] >> np.uint64(k % 64)
        hits = int(np.count_nonzero(bits & np.uint64(1)))
    tr = scored.traffic
    active, alerted = account_alerts(tr, alerted_pay)
    typ = tr.account_typology
    normal = active & (typ == "normal")
    laundering = active & (typ != "normal")
    caught = alerted & laundering
    return Alerts(
        int(alerted_pay.sum()), int(alerted_pay[tr.labels == 0].sum()), int((alerted & normal).sum()),
        int(caught.sum()), {t: int((caught & (typ == t)).sum()) for t in TYPOLOGIES}, hits)


def vary(scored: Scored, sandbox: Sandbox, ruleset: Ruleset,
                   t: Threshold) -> list[tuple[Setting, Alerts]]:
    """Every setting of ``t`` (the shipped value among them), lowest first, with what the pack so
    changed alerts on ``scored``."""
    out = []
    for s in t.settings():
        with sandbox.load(compile_ruleset(with_threshold(ruleset, t, s.value))) as module:
            out.append((s, alerts(scored, module, t.rule)))
    return out


def _delta(v: int, base: int) -> str:
    return f"{v:,} ({v - base:+,})" if v != base else f"{v:,}"


def _typologies(a: Alerts, base: Alerts) -> str:
    gained = [f"{t} +{a.by_typology[t] - base.by_typology[t]}" for t in TYPOLOGIES
              if a.by_typology[t] > base.by_typology[t]]
    lost = [f"{t} {a.by_typology[t] - base.by_typology[t]}" for t in TYPOLOGIES
            if a.by_typology[t] < base.by_typology[t]]
    return "; ".join(x for x in (("gained " + ", ".join(gained)) if gained else "",
                                 ("lost " + ", ".join(lost)) if lost else "") if x) or "-"


def report(t: Threshold, rows: list[tuple[Setting, Alerts]], base: Alerts) -> None:
    way = "raising" if t.loosen > 0 else "lowering"
    print(f"\n  {t.label}   ({way} it alerts more)")
    print(f"  {'setting':<9}{'value':>10}{'rule hits':>11}{'payments':>16}{'normal pay.':>16}"
          f"{'normal accts':>16}{'laundering accts':>19}  typologies")
    for s, a in rows:
        print(f"  {s.label:<9}{s.value:>10g}{a.rule_hits:>11,}{_delta(a.payments, base.payments):>16}"
              f"{_delta(a.normal_payments, base.normal_payments):>16}"
              f"{_delta(a.normal_accounts, base.normal_accounts):>16}"
              f"{_delta(a.laundering_accounts, base.laundering_accounts):>19}  {_typologies(a, base)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    traffic_arguments(ap)
    ap.add_argument("--scale", type=float, default=1.0, help="amount scale of the held-out traffic")
    ap.add_argument("--rules", help="comma-separated rule ids (default: every rule with a threshold)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    traffic_size(args)
    command = "python -m bench.threshold_testing " + " ".join(argv if argv is not None else sys.argv[1:])
    ruleset = parse_ruleset(PACK.read_text())
    try:
        tested = thresholds(ruleset, args.rules.split(",") if args.rules else None)
    except UnknownRuleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
          f"{host['os']}")
    print(f"command: {command.strip()}")
    print(f"date: {datetime.now(UTC).date().isoformat()}")
    files = ModelFiles.open()
    model = load_backend("numpy", files.weights_path)
    density = args.payments / (args.accounts * args.days)
    print(f"model {files.model_sha256[:16]}... (numpy); rule pack {ruleset.id} {ruleset.version} "
          f"({PACK.name}, never written: every variant is compiled in memory)")
    print(f"held-out generator (evaluation only, never tuning): seed {args.seed}, {args.accounts:,} "
          f"accounts, {args.days} days, density {density:.3f} payments/account-day, typology share "
          f"{args.share}, amount scale x{args.scale:g}")
    t0 = time.perf_counter()
    cfg = HeldoutConfig(seed=args.seed, days=args.days, n_accounts=args.accounts, density=density,
                        amount_scale=args.scale, typology_share=args.share)
    traffic = Traffic.of_heldout(run(cfg))
    figures: dict[str, Any] = {
        "host": host, "command": command.strip(), "model_sha256": files.model_sha256,
        "pack": f"{ruleset.id} {ruleset.version}", "generator": dataclasses.asdict(cfg), "thresholds": []}
    figures["generator"]["start"] = cfg.start.isoformat()
    with Sandbox() as sandbox:
        with sandbox.load(compile_ruleset(ruleset)) as shipped:
            columns = [RULE_FEATURE_NAMES.index(f) for f in shipped.manifest.features]
            scored = score(traffic, model, shipped, columns)
            base = alerts(scored, shipped)
        tr = scored.traffic
        active, _ = account_alerts(tr, np.zeros(len(tr.labels), dtype=bool))
        normal_accounts = int(np.count_nonzero(active & (tr.account_typology == "normal")))
        laundering = int(np.count_nonzero(active & (tr.account_typology != "normal")))
        print(f"\n{len(tr.labels):,} payments ({int(tr.labels.sum()):,} laundering), {normal_accounts:,} "
              f"active normal accounts, {laundering:,} laundering accounts; generated and scored in "
              f"{time.perf_counter() - t0:.1f} s")
        n_normal_pay = int(np.count_nonzero(tr.labels == 0))
        print(f"shipped pack: {base.payments:,} payments alerted ({base.normal_payments:,} normal, "
              f"{base.normal_payments / max(n_normal_pay, 1):.2%} of normal payments), "
              f"{base.normal_accounts:,} normal accounts alerted "
              f"({base.normal_accounts / max(normal_accounts, 1):.1%}), "
              f"{base.laundering_accounts:,} laundering accounts caught "
              f"({base.laundering_accounts / max(laundering, 1):.1%}: "
              + ", ".join(f"{t} {base.by_typology[t]}" for t in TYPOLOGIES) + ")")
        print("figures in brackets: the change against the shipped pack in this run")
        figures["shipped"] = dataclasses.asdict(base)
        t1 = time.perf_counter()
        rule = None
        for t in tested:
            if t.rule != rule:
                rule = t.rule
                print(f"\n{rule}: {next(r.when for r in ruleset.rules if r.id == rule)}")
            rows = vary(scored, sandbox, ruleset, t)
            report(t, rows, base)
            figures["thresholds"].append({**dataclasses.asdict(t), "settings": [
                {"label": s.label, "value": s.value, **dataclasses.asdict(a)} for s, a in rows]})
        print(f"\n{len(tested)} thresholds, {sum(len(x['settings']) for x in figures['thresholds'])} packs "
              f"compiled and run in {time.perf_counter() - t1:.1f} s")
    if args.json:
        write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
