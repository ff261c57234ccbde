"""Detection on the independent held-out generator: the shipped model and rule pack beside trivial baselines.

Generates held-out traffic (``inference.heldout``, never trained on; docs/heldout.md says how its
figures have been used) at amount
scales x1, x0.01 and x100, runs the shipped scoring path on it in time order (features, the numpy
backend of the shipped model, the ``aml_core`` rule pack in the WASM sandbox with ``model_score``
appended) and reports, per scale:

- account level (an account is positive when it acts for a laundering pattern, fraud victims are
  negatives): ROC-AUC, PR-AUC (average precision) and recall at 1 % of normal accounts alerted,
  overall and per typology, for four account scores built on the payments an account sends or
  receives: ``model``, the highest model score (the headline: the model's own figure, apart from
  the pack and the account-risk policy); ``model_top3_mean``, the mean of its three highest model
  scores (of all it has, when fewer); ``model_mean``, the mean of its model scores; and
  ``account_risk``, the highest risk the product's account risk (``audit.decide.account_risk``,
  its shipped default policy) gives it when the scored decisions are replayed in event order;
  and, in the same run, for three trivial baselines: the account's number of transfers, its number
  of distinct counterparties, and a random score maxed per account;
- the product's account alerts: the share of normal and of laundering accounts whose risk reaches
  the policy's alert threshold;
- the rule pack: REVIEW-or-worse rates on normal payments and normal accounts, the share of
  laundering accounts it alerts per typology, and the rules that fire most on normal payments.

Run from the repository root: ``python -m bench.heldout_eval [--quick] [--json PATH] [--evaluation]``;
``--scales ''`` runs the training simulator's held-out seed alone, the population on which any
constant of an account score may be chosen without seeing the held-out generator.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.heldout_eval")

import argparse
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState, RiskEvent, event_hour, points_milli
from bench.machine import host_info
from bench.report import write_json
from inference.backends import load_backend
from inference.features import FeatureExtractor
from inference.heldout import TYPOLOGIES, HeldoutConfig, HeldoutRun, run
from inference.messages.transaction import Party, Transaction
from inference.model import EVALUATION_FORMAT, EVALUATION_NAME, ModelFiles
from inference.precision_bounds import train_config
from inference.schema import RULE_FEATURE_NAMES
from inference.screening.features import UNSCREENED
from inference.simulate import SimConfig, SimTx, simulate
from wasm_rules import OUTCOMES, Sandbox, compile_ruleset, parse_ruleset

PACK = Path(__file__).resolve().parents[1] / "wasm_rules" / "packs" / "aml_core.toml"
BATCH = 4_096
MODEL_SCORES = ("model", "model_top3_mean", "model_mean", "account_risk")  # "model" is the headline
BASELINES = ("transfer_count", "distinct_counterparties", "random")
SCORES = MODEL_SCORES + BASELINES
TOP_K = 3  # fixed beforehand, not chosen on any figure
RISK_KEY_ID = "0" * 16  # the replay keys accounts by their bench index: no account secret is involved


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve: the Mann-Whitney U statistic, tied scores sharing their mean rank."""
    pos = labels.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    mean_rank = upper - (counts - 1) / 2.0  # 1-based mean rank of each distinct score
    ranks = mean_rank[inverse]
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """PR-AUC as average precision: the mean over positives of the precision at their score,
    all accounts with the same score taken together."""
    pos = labels.astype(bool)
    if not pos.any():
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], pos[order]
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]  # the end of each group of ties
    tp = np.cumsum(y)[last]
    seen = last + 1
    new_tp = np.diff(np.r_[0, tp])
    return float(np.sum(new_tp * (tp / seen)) / pos.sum())


def recall_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr: float = 0.01) -> tuple[float, float]:
    """(recall, actual false-positive rate) when alerting on scores above the highest threshold
    that alerts at most ``fpr`` of the negatives."""
    pos = labels.astype(bool)
    neg_scores = np.sort(scores[~pos])[::-1]
    if not len(neg_scores) or not pos.any():
        return float("nan"), float("nan")
    k = int(np.floor(fpr * len(neg_scores)))
    threshold = neg_scores[k] if k < len(neg_scores) else -np.inf
    return float(np.mean(scores[pos] > threshold)), float(np.mean(neg_scores > threshold))


@dataclass(frozen=True)
class Traffic:
    """Payments in time order with what the metrics need: payer and payee account indexes, the
    payment labels and each account's typology (``normal`` for accounts acting for no pattern)."""

    transactions: list[Transaction]
    at: list[datetime]
    labels: np.ndarray
    orig: np.ndarray
    bene: np.ndarray
    account_typology: np.ndarray
    kinds: np.ndarray | None = None  # what each payment is (held-out generator only)

    @classmethod
    def of_heldout(cls, heldout: HeldoutRun) -> Traffic:
        txs = heldout.transactions
        typology = np.array(["normal"] * len(heldout.world.accounts), dtype=object)
        for a, t in heldout.suspects().items():
            typology[a] = t
        return cls(
            [x.transaction for x in txs],
            [x.at for x in txs],
            np.fromiter((x.label for x in txs), np.int64, len(txs)),
            np.fromiter((x.orig for x in txs), np.int64, len(txs)),
            np.fromiter((x.bene for x in txs), np.int64, len(txs)),
            typology,
            np.array([x.kind for x in txs], dtype=object),
        )

    @classmethod
    def of_training_simulator(cls, sim: list[SimTx]) -> Traffic:
        """The training simulator's payments; an account is labelled with the typology of the first
        laundering payment it sends or receives (it names no suspects, so victims count too)."""
        index: dict[str, int] = {}

        def key(party: Party) -> int:
            k = party.iban or party.account or party.name or "?"
            return index.setdefault(k, len(index))

        orig = np.array([key(x.transaction.originator) for x in sim], dtype=np.int64)
        bene = np.array([key(x.transaction.beneficiary) for x in sim], dtype=np.int64)
        typology = np.array(["normal"] * len(index), dtype=object)
        for x, o, b in zip(sim, orig, bene, strict=True):
            if x.label:
                for a in (o, b):
                    if typology[a] == "normal":
                        typology[a] = x.typology
        return cls(
            [x.transaction for x in sim],
            [x.at for x in sim],
            np.array([x.label for x in sim], dtype=np.int64),
            orig,
            bene,
            typology,
        )


@dataclass
class Scored:
    traffic: Traffic
    rows: np.ndarray
    scores: np.ndarray
    outcomes: np.ndarray
    fired: np.ndarray
    rule_ids: tuple[str, ...]
    seconds: dict[str, float]


def score(traffic: Traffic, model: Any, module: Any, columns: list[int]) -> Scored:
    """The shipped scoring path over the payments, in time order, batch by batch."""
    txs, at = traffic.transactions, traffic.at
    extractor = FeatureExtractor()
    t0 = time.perf_counter()
    parts = [extractor.extract(txs[i : i + BATCH], at[i : i + BATCH]) for i in range(0, len(txs), BATCH)]
    rows = np.vstack(parts)
    # screened against no list (the simulators name no listed party): the sanctions rules stay silent
    rows = np.hstack([rows, np.tile(UNSCREENED, (len(rows), 1))])
    t1 = time.perf_counter()
    scores = np.asarray(model.predict(rows), dtype=np.float64)
    t2 = time.perf_counter()
    wide = np.hstack([rows, scores[:, None]])[:, columns]
    outcomes, fired = [], []
    for i in range(0, len(wide), BATCH):
        result = module.evaluate(wide[i : i + BATCH])
        outcomes.append(result.outcomes)
        fired.append(result.fired)
    t3 = time.perf_counter()
    return Scored(
        traffic,
        rows,
        scores,
        np.concatenate(outcomes),
        np.vstack(fired),
        tuple(r.id for r in module.manifest.rules),
        {"features": t1 - t0, "model": t2 - t1, "rules": t3 - t2},
    )


def top_k_mean(accounts: np.ndarray, values: np.ndarray, n: int, k: int = TOP_K) -> np.ndarray:
    """Per account of ``n``, the mean of its ``k`` highest ``values`` (of all it has when fewer;
    -inf for none)."""
    order = np.lexsort((-values, accounts))
    acc, val = accounts[order], values[order]
    starts = np.r_[0, np.flatnonzero(acc[1:] != acc[:-1]) + 1]
    rank = np.arange(len(acc)) - np.repeat(starts, np.diff(np.r_[starts, len(acc)]))
    keep = rank < k
    total = np.bincount(acc[keep], weights=val[keep], minlength=n)
    count = np.bincount(acc[keep], minlength=n)
    out = np.full(n, -np.inf)
    np.divide(total, count, out=out, where=count > 0)
    return out


def account_risk_peaks(s: Scored, policy: AccountRiskPolicy | None = None) -> np.ndarray:
    """Per account, the highest risk (milli-points) the product's account risk gives it when the
    scored payments are decided in event order (model score, pack outcome, no fail-safe), batch by
    batch as the pipeline assesses and commits them; 0 for an account no payment touches."""
    policy = policy if policy is not None else AccountRiskPolicy()
    tr = s.traffic
    n = len(tr.account_typology)
    keys = [f"{i:032x}" for i in range(n)]
    state = AccountRiskState(policy)
    peak = np.zeros(n, dtype=np.int64)
    for start in range(0, len(tr.at), BATCH):
        stop = min(start + BATCH, len(tr.at))
        events = [
            RiskEvent(
                event_hour(tr.at[i]),
                keys[tr.orig[i]],
                keys[tr.bene[i]],
                points_milli(policy, float(s.scores[i]), OUTCOMES[s.outcomes[i]], None),
            )
            for i in range(start, stop)
        ]
        pending = state.assess(events, RISK_KEY_ID)
        state.commit(pending)
        for i, result in zip(range(start, stop), pending.results, strict=True):
            for account, side in ((tr.orig[i], result.originator), (tr.bene[i], result.beneficiary)):
                if side is not None and side.after_milli > peak[account]:
                    peak[account] = side.after_milli
    return peak


def account_scores(s: Scored, seed: int) -> dict[str, Any]:
    """Per-account scores (the model's aggregates, account risk, baselines), labels, typologies,
    pack alerts and account-risk alerts."""
    tr = s.traffic
    n = len(tr.account_typology)
    orig, bene = tr.orig, tr.bene
    ends = np.concatenate([orig, bene])
    both = np.concatenate([s.scores, s.scores])
    model = np.full(n, -np.inf)
    np.maximum.at(model, ends, both)
    count = np.bincount(ends, minlength=n).astype(np.float64)
    once = np.concatenate([np.ones(len(orig), dtype=bool), orig != bene])  # a payment to oneself counts once
    score_sum = np.bincount(ends[once], weights=both[once], minlength=n)
    score_n = np.bincount(ends[once], minlength=n)
    mean = np.full(n, -np.inf)
    np.divide(score_sum, score_n, out=mean, where=score_n > 0)
    pairs = np.unique(np.stack([ends, np.concatenate([bene, orig])], axis=1), axis=0)
    distinct = np.bincount(pairs[:, 0], minlength=n).astype(np.float64)
    rand = np.full(n, -np.inf)
    rng = np.random.default_rng(seed)
    np.maximum.at(rand, ends, rng.random(len(ends)))
    alerted_pay = s.outcomes >= 1
    alerted = np.zeros(n, dtype=bool)
    alerted[ends[np.concatenate([alerted_pay, alerted_pay])]] = True
    policy = AccountRiskPolicy()
    t0 = time.perf_counter()
    risk = account_risk_peaks(s, policy)
    s.seconds["account_risk"] = time.perf_counter() - t0
    active = count > 0
    return {
        "active": active,
        "typology": tr.account_typology,
        "alerted": alerted,
        "risk_policy": policy,
        "risk_alerted": risk >= policy.threshold_milli,
        "scores": {
            "model": model,
            "model_top3_mean": top_k_mean(ends[once], both[once], n),
            "model_mean": mean,
            "account_risk": risk.astype(np.float64),
            "transfer_count": count,
            "distinct_counterparties": distinct,
            "random": rand,
        },
    }


def metrics(s: Scored, seed: int, typologies: tuple[str, ...] = TYPOLOGIES) -> dict[str, Any]:
    """Account-level ranking metrics of the model and the baselines, and the rule pack's alert rates."""
    acc = account_scores(s, seed)
    active = acc["active"]
    typ = acc["typology"][active]
    labels = typ != "normal"
    out: dict[str, Any] = {
        "payments": len(s.traffic.transactions),
        "laundering_payments": int(s.traffic.labels.sum()),
        "accounts_active": int(active.sum()),
        "accounts_laundering": int(labels.sum()),
        "seconds": {k: round(v, 3) for k, v in s.seconds.items()},
    }
    for name in SCORES:
        sc = acc["scores"][name][active]
        entry: dict[str, Any] = {"roc_auc": roc_auc(sc, labels), "pr_auc": average_precision(sc, labels)}
        entry["recall_at_1pct"], entry["fpr_at_1pct"] = recall_at_fpr(sc, labels)
        top = np.max(
            sc[~labels]
        )  # a ceiling shared by more than 1 % of normal accounts leaves no recall there
        entry["normal_accounts_at_top_score"] = int(np.count_nonzero(sc[~labels] == top))
        per: dict[str, Any] = {}
        for t in typologies:
            keep = (typ == t) | ~labels
            y = typ[keep] == t
            if y.any():
                per[t] = {
                    "accounts": int(y.sum()),
                    "roc_auc": roc_auc(sc[keep], y),
                    "pr_auc": average_precision(sc[keep], y),
                    "recall_at_1pct": recall_at_fpr(sc[keep], y)[0],
                }
        entry["per_typology"] = per
        out[name] = entry
    normal_pay = s.traffic.labels == 0
    alerted_pay = s.outcomes >= 1
    alerted = acc["alerted"][active]
    fired_normal = Counter[str]()
    bits = s.fired[normal_pay]
    for k, rule in enumerate(s.rule_ids):
        hits = int(np.count_nonzero((bits[:, k // 64] >> np.uint64(k % 64)) & np.uint64(1)))
        if hits:
            fired_normal[rule] = hits
    out["rules"] = {
        "normal_payment_alert_rate": float(alerted_pay[normal_pay].mean()),
        "laundering_payment_alert_rate": float(alerted_pay[~normal_pay].mean())
        if (~normal_pay).any()
        else None,
        "normal_account_alert_rate": float(alerted[~labels].mean()),
        "laundering_account_alert_rate": float(alerted[labels].mean()),
        "per_typology_account_alert_rate": {
            t: float(alerted[typ == t].mean()) for t in typologies if (typ == t).any()
        },
        "top_rules_on_normal_payments": {
            r: round(c / int(normal_pay.sum()), 4) for r, c in fired_normal.most_common(6)
        },
    }
    risk_alerted = acc["risk_alerted"][active]
    out["account_alerts"] = {
        "policy": acc["risk_policy"].to_json(),
        "normal_account_alert_rate": float(risk_alerted[~labels].mean()),
        "laundering_account_alert_rate": float(risk_alerted[labels].mean()),
        "per_typology_account_alert_rate": {
            t: float(risk_alerted[typ == t].mean()) for t in typologies if (typ == t).any()
        },
    }
    kinds = s.traffic.kinds
    if kinds is not None:  # the benign look-alikes among the rest of normal traffic
        out["rules"]["normal_payment_alert_rate_by_kind"] = {
            str(k): float(alerted_pay[kinds == k].mean()) for k in sorted(set(kinds[normal_pay].tolist()))
        }
        out["model_score_above_half_by_kind"] = {
            str(k): float((s.scores[kinds == k] > 0.5).mean())
            for k in sorted(set(kinds[normal_pay].tolist()))
        }
    return out


def _f(v: float | None) -> str:
    return "  n/a" if v is None or v != v else f"{v:.3f}"


def report(title: str, m: dict[str, Any], typologies: tuple[str, ...] = TYPOLOGIES) -> None:
    print(
        f"\n=== {title}: {m['payments']:,} payments ({m['laundering_payments']:,} laundering), "
        f"{m['accounts_active']:,} active accounts ({m['accounts_laundering']:,} laundering)"
    )
    print(f"{'account-level score':<26}{'ROC-AUC':>9}{'PR-AUC':>9}{'recall@1%':>11}{'normal at top':>15}")
    for name in SCORES:
        e = m[name]
        print(
            f"{name:<26}{_f(e['roc_auc']):>9}{_f(e['pr_auc']):>9}{_f(e['recall_at_1pct']):>11}"
            f"{e['normal_accounts_at_top_score']:>15,}"
        )
    best = max(m[b]["roc_auc"] for b in BASELINES)
    print(
        "ROC-AUC minus the best trivial baseline: "
        + ", ".join(f"{n} {m[n]['roc_auc'] - best:+.3f}" for n in MODEL_SCORES)
    )
    print(
        f"\n{'per typology (ROC-AUC / recall@1%)':<26}{'accts':>7}"
        + "".join(f"{n[:14]:>16}" for n in SCORES)
        + f"{'pack alerts':>13}{'risk alerts':>13}"
    )
    for t in typologies:
        if t not in m["model"]["per_typology"]:
            continue
        cells = "".join(
            f"{_f(m[n]['per_typology'][t]['roc_auc']):>8}/{_f(m[n]['per_typology'][t]['recall_at_1pct'])}".rjust(
                16
            )
            for n in SCORES
        )
        print(
            f"{t:<26}{m['model']['per_typology'][t]['accounts']:>7}{cells}"
            f"{_f(m['rules']['per_typology_account_alert_rate'].get(t)):>13}"
            f"{_f(m['account_alerts']['per_typology_account_alert_rate'].get(t)):>13}"
        )
    r = m["rules"]
    print(
        f"\nrule pack (REVIEW or worse): normal payments {r['normal_payment_alert_rate']:.2%}, "
        f"normal accounts {r['normal_account_alert_rate']:.2%}; laundering payments "
        f"{(r['laundering_payment_alert_rate'] or 0):.2%}, "
        f"laundering accounts {r['laundering_account_alert_rate']:.2%}"
    )
    a = m["account_alerts"]
    print(
        f"account risk alerts (risk reaching {a['policy']['threshold_milli']:,} milli-points, half-life "
        f"{a['policy']['half_life_hours']} h): normal accounts {a['normal_account_alert_rate']:.2%}, "
        f"laundering accounts {a['laundering_account_alert_rate']:.2%}"
    )
    print(
        "rules firing most on normal payments: "
        + (", ".join(f"{k} {v:.2%}" for k, v in r["top_rules_on_normal_payments"].items()) or "none")
    )
    if "normal_payment_alert_rate_by_kind" in r:
        print(
            "normal payments by kind, REVIEW or worse / model score > 0.5: "
            + ", ".join(
                f"{k} {v:.1%}/{m['model_score_above_half_by_kind'][k]:.1%}"
                for k, v in r["normal_payment_alert_rate_by_kind"].items()
            )
        )
    print(
        f"time: features {m['seconds']['features']:.1f} s, model {m['seconds']['model']:.2f} s, "
        f"rules {m['seconds']['rules']:.2f} s, account risk {m['seconds']['account_risk']:.2f} s"
    )


def traffic_arguments(ap: argparse.ArgumentParser) -> None:
    """The held-out traffic's options (``--quick``, ``--seed``, ``--payments``, ``--accounts``,
    ``--days``, ``--share``), shared by the benches that run on it; ``traffic_size`` applies
    ``--quick``."""
    ap.add_argument("--quick", action="store_true", help="10,000 payments over 1,000 accounts and 14 days")
    ap.add_argument("--seed", type=int, default=20261204, help="held-out generator seed")
    ap.add_argument("--payments", type=int, default=50_000)
    ap.add_argument("--accounts", type=int, default=5_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--share", type=float, default=0.02, help="typology share of payments")


def traffic_size(args: argparse.Namespace) -> None:
    if args.quick:
        args.payments, args.accounts, args.days = 10_000, 1_000, 14


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    traffic_arguments(ap)
    ap.add_argument(
        "--scales",
        default="1,0.01,100",
        help="amount scales, comma-separated; '' for none (the training simulator alone)",
    )
    ap.add_argument(
        "--no-training-sim",
        action="store_true",
        help="skip the same metrics on the training simulator's held-out seed",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--model", type=Path, help="a model directory (weights.npz, model.onnx, card.json) "
                                               "instead of the shipped model")
    ap.add_argument("--evaluation", action="store_true",
                    help=f"write the figures in short as {EVALUATION_NAME} beside the model's card, "
                         "which 'sealtrail model card' shows")
    args = ap.parse_args(argv)
    traffic_size(args)
    scales = [float(x) for x in args.scales.split(",") if x.strip()]
    host = host_info()
    print(
        f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
        f"{host['os']}"
    )
    files = ModelFiles.open(args.model)
    model = load_backend("numpy", files.weights_path)
    print(f"model: {files.directory} ({files.model_sha256[:16]}...), backend numpy; rule pack {PACK.name}")
    density = args.payments / (args.accounts * args.days)
    print(
        f"held-out generator: seed {args.seed}, {args.accounts:,} accounts, {args.days} days, "
        f"density {density:.3f} payments/account-day, typology share {args.share}"
    )
    figures: dict[str, Any] = {
        "host": host,
        "model_sha256": files.model_sha256,
        "seed": args.seed,
        "accounts": args.accounts,
        "days": args.days,
        "density": density,
        "scales": {},
        "account_risk_policy": AccountRiskPolicy().to_json(),
    }
    with Sandbox() as sandbox:
        ruleset = parse_ruleset(PACK.read_text())
        module = sandbox.load(compile_ruleset(ruleset))
        columns = [RULE_FEATURE_NAMES.index(f) for f in module.manifest.features]
        print(
            f"rule pack {module.manifest.ruleset_id} {module.manifest.version}: "
            f"{len(module.manifest.rules)} rules over {len(columns)} features"
        )
        for scale in scales:
            t0 = time.perf_counter()
            cfg = HeldoutConfig(
                seed=args.seed,
                days=args.days,
                n_accounts=args.accounts,
                density=density,
                amount_scale=scale,
                typology_share=args.share,
            )
            traffic = Traffic.of_heldout(run(cfg))
            gen_s = time.perf_counter() - t0
            m = metrics(score(traffic, model, module, columns), args.seed)
            m["seconds"]["generate"] = round(gen_s, 3)
            report(f"held-out generator, amount scale x{scale:g}", m)
            figures["scales"][f"x{scale:g}"] = m
        if not args.no_training_sim:
            seed = int(files.card["training"]["seed"]) + 1  # the training simulator's own held-out seed
            typologies = train_config(files.card).typologies  # the ones the model was trained on
            sim = simulate(
                SimConfig(
                    seed=seed,
                    days=args.days,
                    n_accounts=args.accounts,
                    n_normal=round(args.payments * (1 - args.share)),
                    typology_share=args.share,
                    typologies=typologies,
                )
            )
            scored = score(Traffic.of_training_simulator(sim), model, module, columns)
            m = metrics(scored, args.seed, typologies)
            report(
                f"training simulator, its held-out seed {seed} (same sizes; accounts labelled by any "
                "laundering payment)",
                m,
                typologies,
            )
            figures["training_simulator"] = {"seed": seed, **m}
    if args.json:
        write_json(args.json, figures)
    if args.evaluation:
        path = files.directory / EVALUATION_NAME
        path.write_bytes(evaluation_json(figures, f"{module.manifest.ruleset_id} {module.manifest.version}",
                                         "python -m bench.heldout_eval " + " ".join(argv or sys.argv[1:])))
        print(f"evaluation written to {path}")
    return 0


def _r(v: float | None) -> float | None:
    return None if v is None or v != v else round(float(v), 4)


def _level(e: dict[str, Any]) -> dict[str, float | None]:
    return {"roc_auc": _r(e["roc_auc"]), "pr_auc": _r(e["pr_auc"]), "recall_at_1pct": _r(e["recall_at_1pct"])}


def _short(m: dict[str, Any]) -> dict[str, Any]:
    """One population's figures as the card shows them."""
    return {
        "payments": m["payments"], "accounts_active": m["accounts_active"],
        "accounts_laundering": m["accounts_laundering"],
        "account_level": {name: _level(m[name]) for name in ("model", *BASELINES)},
        "other_account_scores": {name: _level(m[name]) for name in MODEL_SCORES[1:]},
        "account_alerts": {"normal_accounts_alerted": _r(m["account_alerts"]["normal_account_alert_rate"]),
                           "laundering_accounts_alerted": _r(
                               m["account_alerts"]["laundering_account_alert_rate"])},
        "model_per_typology": {t: {"accounts": v["accounts"], "roc_auc": _r(v["roc_auc"]),
                                   "recall_at_1pct": _r(v["recall_at_1pct"])}
                               for t, v in m["model"]["per_typology"].items()},
        "rule_pack": {"normal_payments_alerted": _r(m["rules"]["normal_payment_alert_rate"]),
                      "normal_accounts_alerted": _r(m["rules"]["normal_account_alert_rate"]),
                      "laundering_accounts_alerted": _r(m["rules"]["laundering_account_alert_rate"])},
    }


def evaluation_json(figures: dict[str, Any], pack: str, command: str) -> bytes:
    """``sealtrail.model-evaluation/1``: the model's SHA-256, how and when it was measured, and per
    population the account-level figures of the model and the baselines and the pack's alert rates.

    ``account_level`` holds the headline account score (``model``: an account's highest payment
    score) and the trivial baselines only; the other account scores (``other_account_scores``)
    and the account-risk alert rates (``account_alerts``) are fields added beside them."""
    doc = {
        "format": EVALUATION_FORMAT, "model_sha256": figures["model_sha256"],
        "date": datetime.now(UTC).date().isoformat(), "command": command.strip(), "rule_pack": pack,
        "machine": f"{figures['host']['cpu']} ({figures['host']['cores']} cores)",
        "generator": {"name": "inference.heldout", "seed": figures["seed"], "accounts": figures["accounts"],
                      "days": figures["days"], "density": round(figures["density"], 4)},
        "account_score": "model: the highest model score over the payments an account sends or receives",
        "account_risk_policy": figures["account_risk_policy"],
        "populations": {f"held-out {k}": _short(v) for k, v in figures["scales"].items()},
    }
    if "training_simulator" in figures:
        doc["populations"][f"training simulator, seed {figures['training_simulator']['seed']}"] = _short(
            figures["training_simulator"])
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


if __name__ == "__main__":
    raise SystemExit(main())
