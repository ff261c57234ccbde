"""Alert rates of the ``aml_core`` rule pack on normal traffic, and what it still catches, by size.

Generates training-simulator traffic (``inference.simulate``) at 10,000, 200,000 and 1,000,000
payments over 1,000, 20,000 and 200,000 accounts (30 days, 2 % of payments laundering), runs the
shipped scoring path on it in time order (features in batches of 4,096, the numpy backend of the
shipped model, the rule pack in the WASM sandbox with ``model_score`` appended, as
``bench.heldout_eval`` does) and prints, per size:

- the share of normal payments and of normal accounts that end REVIEW or worse (the target is
  at most 3 % of each), with the model-score band rules alone beside it;
- each rule's firing rate on normal payments;
- per typology, the share of laundering accounts the pack alerts (an account is laundering when
  it sends or receives a laundering payment);
- the model-score band thresholds the normal traffic suggests: REVIEW from the score that 1 % of
  normal payments and 0.5 % of normal accounts reach, HOLD 0.2 % / 0.2 %, BLOCK 0.05 % / 0.1 %
  (the largest over the sizes, rounded up to two decimals), so the bands alone review at most
  about 1 % of normal payments and 0.5 % of normal accounts;
- the share of normal accounts the law-set and data-quality rules alert alone (a floor no
  threshold of the other rules lowers) and the share every other rule alerts alone.

``--heldout`` runs the same figures on the independent held-out generator (``inference.heldout``)
for reporting only: the pack's thresholds are chosen on the training simulator alone.

Run from the repository root: ``python -m bench.alert_rates [--quick] [--lookalikes] [--heldout]
[--json PATH]`` (``--quick`` leaves out the 1,000,000-payment run, which takes 5-8 minutes and
3.6 GiB of memory on a 2-core machine, most of it generating the traffic and its features).
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.alert_rates")

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.heldout_eval import PACK, Scored, Traffic
from bench.heldout_eval import score as heldout_score
from bench.machine import host_info
from bench.report import write_json
from inference.backends import load_backend
from inference.heldout import TYPOLOGIES as HELDOUT_TYPOLOGIES
from inference.heldout import HeldoutConfig, run
from inference.model import ModelFiles
from inference.schema import RULE_FEATURE_NAMES
from inference.simulate import TYPOLOGIES as SIM_TYPOLOGIES
from inference.simulate import SimConfig, simulate
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

DAYS = 30
SHARE = 0.02  # laundering share of payments
TARGET = 0.03  # at most this share of normal payments and of normal accounts REVIEW or worse
BAND_RULES = ("MODEL_SCORE_REVIEW", "MODEL_SCORE_HOLD", "MODEL_SCORE_BLOCK", "MODEL_SCORE_MISSING")
# Rules whose thresholds law or the message set (FATF R.16 and R.19 call for action, data quality):
# the accounts they alert alone are a floor no calibration of the others lowers.
FIXED_RULES = (
    "JURISDICTION_CALL_FOR_ACTION",
    "JURISDICTION_RISK_UNKNOWN",
    "R16_ORIGINATOR_INCOMPLETE",
    "R16_BENEFICIARY_INCOMPLETE",
    "BENEFICIARY_IBAN_INVALID",
    "ORIGINATOR_IBAN_INVALID",
    "COUNTRY_UNREADABLE",
    "SWIFT_NAK",
)
# Share of normal payments at or above each suggested band threshold.
BAND_QUANTILES = {"REVIEW": 0.01, "HOLD": 0.002, "BLOCK": 0.0005}
# Share of normal accounts (an account's score: the highest over its payments) at or above each:
# half of what the bands had before pack 2026.12.4, as the FATF R.16 holds alone take 1.4-4.2 % of
# normal accounts out of the 3 % target.
BAND_ACCOUNT_QUANTILES = {"REVIEW": 0.005, "HOLD": 0.002, "BLOCK": 0.001}


@dataclass(frozen=True)
class Size:
    """One traffic size: payments in all and the accounts they run between."""

    payments: int
    accounts: int

    @property
    def label(self) -> str:
        return f"{self.payments:,} payments / {self.accounts:,} accounts"


SIZES = (Size(10_000, 1_000), Size(200_000, 20_000), Size(1_000_000, 200_000))
QUICK_SIZES = SIZES[:2]  # the 1,000,000-payment run takes 5-8 minutes


def training_traffic(size: Size, seed: int, amount_scale: float = 1.0, lookalikes: bool = False) -> Traffic:
    """Training-simulator payments of ``size``: 30 days, 2 % laundering; with ``lookalikes`` about
    a third of the normal payments are benign traffic shaped like laundering (billers, merchants,
    payroll and supplier runs, salaries passed on), where the simulator offers them."""
    options: dict[str, Any] = {"lookalikes": True} if lookalikes else {}
    cfg = SimConfig(
        seed=seed,
        days=DAYS,
        n_accounts=size.accounts,
        n_normal=round(size.payments * (1 - SHARE)),
        typology_share=SHARE,
        amount_scale=amount_scale,
        **options,
    )
    return Traffic.of_training_simulator(simulate(cfg))


def heldout_traffic(size: Size, seed: int, amount_scale: float = 1.0) -> Traffic:
    """Held-out generator payments of about ``size`` (reporting only, never for tuning)."""
    cfg = HeldoutConfig(
        seed=seed,
        days=DAYS,
        n_accounts=size.accounts,
        density=size.payments / (size.accounts * DAYS),
        amount_scale=amount_scale,
        typology_share=SHARE,
    )
    return Traffic.of_heldout(run(cfg))


def score(traffic: Traffic, model: Any, module: Any) -> Scored:
    """The shipped scoring path over ``traffic`` (``bench.heldout_eval.score``: features in time
    order, the model, the pack over the rows with ``model_score`` appended)."""
    columns = [RULE_FEATURE_NAMES.index(f) for f in module.manifest.features]
    return heldout_score(traffic, model, module, columns)


def fired_matrix(fired: np.ndarray, n_rules: int) -> np.ndarray:
    """Fired bits as a boolean (payments, rules) matrix."""
    k = np.arange(n_rules)
    words = fired[:, k // 64]
    return ((words >> (k % 64).astype(np.uint64)) & np.uint64(1)).astype(bool)


def account_alerts(traffic: Traffic, alerted_payments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(active, alerted) per account: an account is alerted when a payment it sends or receives is."""
    n = len(traffic.account_typology)
    ends = np.concatenate([traffic.orig, traffic.bene])
    active = np.bincount(ends, minlength=n) > 0
    alerted = np.zeros(n, dtype=bool)
    alerted[ends[np.concatenate([alerted_payments, alerted_payments])]] = True
    return active, alerted


def band_thresholds(normal_scores: np.ndarray, normal_account_scores: np.ndarray) -> dict[str, float]:
    """Score thresholds for the model bands: the lowest that ``BAND_QUANTILES`` of the normal
    payments and ``BAND_ACCOUNT_QUANTILES`` of the normal accounts (an account's score is the
    highest over its payments) reach, rounded up to 0.01 and at most 0.99."""
    out = {}
    for band in BAND_QUANTILES:
        q = 0.0
        for values, share in (
            (normal_scores, BAND_QUANTILES[band]),
            (normal_account_scores, BAND_ACCOUNT_QUANTILES[band]),
        ):
            finite = values[np.isfinite(values)]
            if len(finite):
                q = max(q, float(np.quantile(finite, 1 - share)))
        out[band] = min(0.99, math.ceil(q * 100 - 1e-9) / 100)
    return out


def account_max(traffic: Traffic, values: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Per account, the highest of ``values`` over the payments it sends or receives where ``where``
    holds (-inf for none)."""
    out = np.full(len(traffic.account_typology), -np.inf)
    v = np.where(where, values, -np.inf)
    np.maximum.at(out, np.concatenate([traffic.orig, traffic.bene]), np.concatenate([v, v]))
    return out


def metrics(r: Scored, typologies: tuple[str, ...]) -> dict[str, Any]:
    """Alert rates on normal payments and accounts, per rule and per typology."""
    tr = r.traffic
    normal = tr.labels == 0
    alerted = r.outcomes >= 1
    bits = fired_matrix(r.fired, len(r.rule_ids))
    band_cols = [i for i, rule in enumerate(r.rule_ids) if rule in BAND_RULES]
    bands_alert = np.asarray(bits[:, band_cols].any(axis=1))
    fixed_cols = [i for i, rule in enumerate(r.rule_ids) if rule in FIXED_RULES]
    fixed_alert = np.asarray(bits[:, fixed_cols].any(axis=1))
    active, acc_alerted = account_alerts(tr, alerted)
    _, acc_bands = account_alerts(tr, bands_alert)
    _, acc_fixed = account_alerts(tr, fixed_alert & normal)
    other_alert = np.asarray(bits[:, [i for i in range(len(r.rule_ids)) if i not in fixed_cols]].any(axis=1))
    _, acc_other = account_alerts(tr, other_alert & normal)
    typ = tr.account_typology
    normal_acc = active & (typ == "normal")
    return {
        "payments": len(tr.labels),
        "normal_payments": int(normal.sum()),
        "accounts_active": int(active.sum()),
        "normal_accounts": int(normal_acc.sum()),
        "normal_payment_alert_rate": float(alerted[normal].mean()),
        "normal_account_alert_rate": float(acc_alerted[normal_acc].mean()),
        "model_bands_normal_payment_rate": float(bands_alert[normal].mean()),
        "model_bands_normal_account_rate": float(acc_bands[normal_acc].mean()),
        "fixed_rules_normal_account_rate": float(acc_fixed[normal_acc].mean()),
        "other_rules_normal_account_rate": float(acc_other[normal_acc].mean()),
        "laundering_payment_alert_rate": float(alerted[~normal].mean()) if (~normal).any() else None,
        "rule_rates_on_normal_payments": {
            rule: float(bits[normal, i].mean()) for i, rule in enumerate(r.rule_ids)
        },
        "rule_rates_on_normal_accounts": {
            rule: float(account_alerts(tr, bits[:, i] & normal)[1][normal_acc].mean())
            for i, rule in enumerate(r.rule_ids)
        },
        "typology_account_alert_rate": {
            t: {
                "accounts": int((active & (typ == t)).sum()),
                "alerted": float(acc_alerted[active & (typ == t)].mean()),
            }
            for t in typologies
            if (active & (typ == t)).any()
        },
        "suggested_band_thresholds": band_thresholds(
            r.scores[normal], account_max(tr, r.scores, normal)[normal_acc]
        ),
        "seconds": {k: round(v, 3) for k, v in r.seconds.items()},
    }


def report(title: str, m: dict[str, Any]) -> None:
    def met(v: float) -> str:
        return "ok" if v <= TARGET else "OVER"

    print(
        f"\n=== {title}: {m['payments']:,} payments ({m['normal_payments']:,} normal), "
        f"{m['accounts_active']:,} active accounts ({m['normal_accounts']:,} normal)"
    )
    p, a = m["normal_payment_alert_rate"], m["normal_account_alert_rate"]
    print(
        f"REVIEW or worse: normal payments {p:.2%} ({met(p)}), normal accounts {a:.2%} ({met(a)}) "
        f"[target <= {TARGET:.0%}]; model bands alone {m['model_bands_normal_payment_rate']:.2%} of "
        f"payments, {m['model_bands_normal_account_rate']:.2%} of accounts; the law-set and data-quality "
        f"rules alone {m['fixed_rules_normal_account_rate']:.2%} of accounts, every other rule alone "
        f"{m['other_rules_normal_account_rate']:.2%}"
    )
    if m["fixed_rules_normal_account_rate"] > TARGET:
        print(
            "  the law-set and data-quality rules alone are over the account target: no threshold of "
            "the others can meet it on this traffic"
        )
    rates = {k: v for k, v in m["rule_rates_on_normal_payments"].items() if v > 0}
    accounts = m["rule_rates_on_normal_accounts"]
    print("rules firing on normal traffic (payments / accounts):" + ("" if rates else " none"))
    for k, v in sorted(rates.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<36}{v:>9.3%}{accounts[k]:>9.2%}")
    print(f"{'typology':<22}{'accounts':>9}{'alerted':>9}")
    for t, e in m["typology_account_alert_rate"].items():
        print(f"{t:<22}{e['accounts']:>9,}{e['alerted']:>9.1%}")
    lr = m["laundering_payment_alert_rate"]
    if lr is not None:
        print(f"laundering payments REVIEW or worse: {lr:.1%}")
    s = m["suggested_band_thresholds"]
    print(
        "model score bands this traffic suggests: "
        + ", ".join(f"{band} >= {s[band]:.2f}" for band in BAND_QUANTILES)
    )
    sec = m["seconds"]
    print(
        f"time: generate {sec.get('generate', 0):.1f} s, features {sec['features']:.1f} s, "
        f"model {sec['model']:.2f} s, rules {sec['rules']:.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="10,000 and 200,000 payments only")
    ap.add_argument(
        "--seed", type=int, help="simulator seed (default: the training seed + 1, as heldout_eval)"
    )
    ap.add_argument("--amount-scale", type=float, default=1.0, help="multiplies every amount")
    ap.add_argument("--pack", type=Path, default=PACK, help="rule pack TOML (default: the shipped aml_core)")
    ap.add_argument(
        "--lookalikes",
        action="store_true",
        help="training simulator with its benign look-alikes (billers, merchants, payroll, supplier runs)",
    )
    ap.add_argument(
        "--heldout",
        action="store_true",
        help="also report on the held-out generator (reporting only: never tune on it)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    host = host_info()
    print(
        f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
        f"{host['os']}"
    )
    files = ModelFiles.open()
    model = load_backend("numpy", files.weights_path)
    seed = args.seed if args.seed is not None else int(files.card["training"]["seed"]) + 1
    print(f"model: {files.directory} ({files.model_sha256[:16]}...), backend numpy")
    print(
        f"training simulator seed {seed}, {DAYS} days, {SHARE:.0%} laundering, amount scale "
        f"x{args.amount_scale:g}{', benign look-alikes' if args.lookalikes else ''}; sizes: "
        + "; ".join(s.label for s in sizes)
    )
    figures: dict[str, Any] = {
        "host": host,
        "model_sha256": files.model_sha256,
        "seed": seed,
        "days": DAYS,
        "amount_scale": args.amount_scale,
        "lookalikes": args.lookalikes,
        "training_simulator": {},
    }
    with Sandbox() as sandbox:
        ruleset = parse_ruleset(args.pack.read_text())
        module = sandbox.load(compile_ruleset(ruleset))
        print(
            f"rule pack {module.manifest.ruleset_id} {module.manifest.version} ({args.pack}): "
            f"{len(module.manifest.rules)} rules over {len(module.manifest.features)} features"
        )
        for size in sizes:
            t0 = time.perf_counter()
            traffic = training_traffic(size, seed, args.amount_scale, args.lookalikes)
            gen_s = time.perf_counter() - t0
            r = score(traffic, model, module)
            m = metrics(r, SIM_TYPOLOGIES)
            m["seconds"]["generate"] = round(gen_s, 3)
            report(f"training simulator, {size.label}", m)
            figures["training_simulator"][str(size.payments)] = m
            del r, traffic
        suggested = {
            band: max(
                figures["training_simulator"][str(s.payments)]["suggested_band_thresholds"][band]
                for s in sizes
            )
            for band in BAND_QUANTILES
        }
        figures["suggested_band_thresholds"] = suggested
        print(
            "\nsuggested model score bands (the highest of each over the sizes): "
            + ", ".join(f"{band} >= {v:.2f}" for band, v in suggested.items())
            + "; the pack: "
            + "; ".join(f"{r.id} when {r.when}" for r in ruleset.rules if r.id in BAND_RULES[:3])
        )
        if args.heldout:
            figures["heldout"] = {}
            print("\n--- held-out generator: reported only, never used to choose a threshold ---")
            for size in sizes:
                t0 = time.perf_counter()
                traffic = heldout_traffic(size, seed, args.amount_scale)
                gen_s = time.perf_counter() - t0
                m = metrics(score(traffic, model, module), HELDOUT_TYPOLOGIES)
                m["seconds"]["generate"] = round(gen_s, 3)
                report(f"held-out generator, {size.label}", m)
                figures["heldout"][str(size.payments)] = m
    if args.json:
        write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
