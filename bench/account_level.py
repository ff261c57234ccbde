"""Account-level scores beside the payment model's, on typologies seen and unseen in training.

The shipped risk model scores payments; an account is then judged by its highest payment score.
``bench.typology_holdout`` shows that this ranks a typology the model never saw far worse than
one it was trained on. This benchmark measures two account-level alternatives on the same
footing, from the training simulator alone (the independent generator is kept for adopted
models), so that the choice between them rests on a figure:

- ``peer tail``: no training at all. Each account is summarised by a few aggregates of its
  payments' feature rows (its highest forwarded share, fan-out and fan-in, pass-through, amount
  against its own history, cross-border share, country risk, ... as a sender and as a receiver,
  ``AGGREGATES``), and scored by how far out in its peers' tails it sits: the sum over aggregates
  of ``-log(share of active accounts at or above its value)``. It is scale-free (ranks only) and a
  deterministic function of the population, as a bank would compute it over its own accounts;
- ``account model``: a logistic regression over every model column's highest and mean value per
  account, as sender and as receiver, plus its payment counts; trained on the accounts of
  ``--populations`` simulated populations, with every typology (``seen``) and with the typology
  scored left out (``unseen``), as ``bench.typology_holdout`` does for the payment model.

Each is printed per typology of ``ALL_TYPOLOGIES`` (account ROC-AUC and recall at 1 % of normal
accounts; normal accounts against that typology's, accounts touching two typologies left out),
beside the shipped payment model's highest score per account (trained on ``TYPOLOGIES``, so the
three later typologies are unseen for it). Evaluation: the training seed + 1, every typology,
look-alikes on, as ``bench.typology_holdout``'s.

Run from the repository root: ``python -m bench.account_level [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.account_level")

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import host_info
from bench.report import write_json
from bench.typology_holdout import Evaluation
from inference.model import ModelFiles, forward, load_npz
from inference.simulate import ALL_TYPOLOGIES, SimConfig, simulate
from inference.train import FEATURE_NAMES, NOT_READ, recall_at_fpr, roc_auc

FPR = 0.01
# (column, role): the account's highest value of the column over the payments it sends ("o") or
# receives ("b"); "share:" columns are the share of its payments with the flag set
AGGREGATES: tuple[tuple[str, str], ...] = (
    ("forward_share_permille", "o"), ("pass_through_24h_q16", "o"), ("pass_through_7d_q16", "o"),
    ("orig_fan_out_1d", "o"), ("orig_fan_out_7d", "o"), ("orig_fan_out_30d", "o"), ("scatter_gather", "o"),
    ("cycle_count", "o"), ("orig_dormancy_days", "o"), ("amount_log2_ratio_q8", "o"),
    ("orig_near_threshold_count_24h", "o"), ("orig_distinct_counterparties_24h", "o"),
    ("orig_in_out_24h", "o"), ("orig_fan_in_7d", "o"), ("bene_country_risk", "o"),
    ("bene_fan_in_1d", "b"), ("bene_fan_in_7d", "b"), ("bene_fan_in_30d", "b"),
    ("bene_near_threshold_count_24h", "b"), ("bene_in_out_24h", "b"),
    ("bene_distinct_counterparties_24h", "b"),
    ("orig_country_risk", "b"), ("share:cross_border", "o"), ("share:cross_border", "b"),
    ("share:round_amount", "o"), ("share:new_counterparty", "o"),
)
_COLUMN = {n: i for i, n in enumerate(FEATURE_NAMES)}
MODEL_COLUMNS = [i for i, n in enumerate(FEATURE_NAMES) if n not in NOT_READ]


def _sides(ev: Evaluation) -> tuple[np.ndarray, np.ndarray, int]:
    n_pay = len(ev.rows)
    return ev.ends[:n_pay], ev.ends[n_pay:], len(ev.account_typology)


def _max_by(index: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, index, values)
    out[np.isneginf(out)] = 0.0  # an account that never sends (or receives) reads 0 on that side
    return out


def active(ev: Evaluation) -> np.ndarray:
    """Accounts some payment touches."""
    return np.bincount(ev.ends, minlength=len(ev.account_typology)) > 0


def aggregates(ev: Evaluation) -> dict[str, np.ndarray]:
    """``AGGREGATES`` per account."""
    orig, bene, n = _sides(ev)
    out: dict[str, np.ndarray] = {}
    for column, role in AGGREGATES:
        side = orig if role == "o" else bene
        if column.startswith("share:"):
            flag = ev.rows[:, _COLUMN[column[6:]]]
            out[f"{role}:{column}"] = (np.bincount(side, weights=flag, minlength=n)
                                       / np.maximum(1, np.bincount(side, minlength=n)))
        else:
            out[f"{role}:{column}"] = _max_by(side, ev.rows[:, _COLUMN[column]], n)
    return out


def peer_tail(ev: Evaluation) -> np.ndarray:
    """Per account, the sum over ``AGGREGATES`` of ``-log`` of the share of active accounts whose
    value is at least its own (0 for an account at the bottom of every one)."""
    live = active(ev)
    score = np.zeros(len(ev.account_typology))
    for values in aggregates(ev).values():
        peers = np.sort(values[live])
        at_or_above = len(peers) - np.searchsorted(peers, values, side="left")
        score += -np.log(np.maximum(at_or_above, 1) / len(peers))
    return score


def account_matrix(ev: Evaluation) -> np.ndarray:
    """Per account: each model column's highest and mean value (signed log1p) over the payments it
    sends, then over those it receives, each side followed by log1p of its payment count."""
    orig, bene, n = _sides(ev)
    x = ev.rows[:, MODEL_COLUMNS]
    x = np.nan_to_num(np.sign(x) * np.log1p(np.abs(x)))
    parts = []
    for side in (orig, bene):
        count = np.bincount(side, minlength=n)
        parts.append(np.stack([_max_by(side, x[:, j], n) for j in range(x.shape[1])], axis=1))
        sums = np.stack([np.bincount(side, weights=x[:, j], minlength=n) for j in range(x.shape[1])], axis=1)
        parts.append(sums / np.maximum(count, 1)[:, None])
        parts.append(np.log1p(count)[:, None])
    return np.hstack(parts)


def fit_logistic(x: np.ndarray, y: np.ndarray, *, steps: int = 300, rate: float = 0.1,
                 l2: float = 1e-3) -> Callable[[np.ndarray], np.ndarray]:
    """A class-balanced logistic regression by full-batch gradient descent on standardised
    columns (deterministic: no sampling); returns the scorer (log-odds)."""
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(z.shape[1]), 0.0
    positives = max(1.0, float(y.sum()))
    weight = np.where(y == 1, (len(y) - positives) / positives, 1.0)
    weight /= weight.mean()
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        g = (p - y) * weight
        w -= rate * (z.T @ g / len(y) + l2 * w)
        b -= rate * float(g.mean())
    return lambda rows: np.asarray(((rows - mu) / sd) @ w + b, dtype=np.float64)


def training_accounts(evs: list[Evaluation], leave_out: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Account matrices and labels (1: touches laundering) of the training populations, without
    the accounts of ``leave_out`` and those touching two typologies."""
    xs, ys = [], []
    for ev in evs:
        keep = active(ev) & (ev.account_typology != "mixed")
        if leave_out is not None:
            keep &= ev.account_typology != leave_out
        xs.append(account_matrix(ev)[keep])
        ys.append((ev.account_typology[keep] != "normal").astype(np.float64))
    return np.vstack(xs), np.concatenate(ys)


def per_typology(ev: Evaluation, score: np.ndarray, typology: str) -> dict[str, float]:
    """Account ROC-AUC and recall at ``FPR`` of normal accounts, normal against ``typology``."""
    keep = active(ev) & ((ev.account_typology == "normal") | (ev.account_typology == typology))
    labels = (ev.account_typology[keep] == typology).astype(np.int64)
    recall, _ = recall_at_fpr(score[keep], labels, FPR)
    return {"roc_auc": roc_auc(score[keep], labels), "recall": recall, "accounts": int(labels.sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="smaller populations (about a minute)")
    ap.add_argument("--seed", type=int, default=7, help="training seed (evaluation: seed + 1)")
    ap.add_argument("--populations", type=int, default=4, help="training populations of the account model")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.populations < 1:
        ap.error("--populations must be at least 1")
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
          f"{host['os']}")
    accounts, normal = (1_000, 8_000) if args.quick else (3_000, 30_000)
    t0 = time.perf_counter()
    # the evaluation set of bench.typology_holdout (5,000 accounts, 49,000 normal payments), smaller
    # in proportion with --quick
    ev = Evaluation.of(simulate(SimConfig(seed=args.seed + 1, days=30, n_accounts=5 * accounts // 3,
                                          n_normal=49 * normal // 30, typology_share=0.03,
                                          lookalikes=True, typologies=ALL_TYPOLOGIES)))
    # training populations: seeds the evaluation seed is not among (seed + 100 + i)
    train = [Evaluation.of(simulate(SimConfig(seed=args.seed + 100 + i, days=30, n_accounts=accounts,
                                              n_normal=normal, typology_share=0.03, lookalikes=True,
                                              typologies=ALL_TYPOLOGIES)))
             for i in range(args.populations)]
    print(f"evaluation: seed {args.seed + 1}, {len(ev.rows):,} payments, {int(active(ev).sum()):,} accounts; "
          f"training: {args.populations} populations of {normal:,} normal payments "
          f"({time.perf_counter() - t0:.0f} s)")
    model = load_npz(ModelFiles.open().weights_path)
    payment = _max_by(ev.ends, np.concatenate([forward(model, ev.rows)] * 2), len(ev.account_typology))
    tail = peer_tail(ev)
    x_eval = account_matrix(ev)
    seen = fit_logistic(*training_accounts(train, None))(x_eval)
    scores: dict[str, dict[str, Any]] = {"payment_model_max": {}, "peer_tail": {},
                                         "account_model_seen": {}, "account_model_unseen": {}}
    print(f"\n{'typology':20s} {'accounts':>8s}   ROC-AUC / recall at 1 % of normal accounts")
    print(f"{'':20s} {'':>8s}   " + " ".join(f"{h:>11s}" for h in ("payment max", "peer tail", "acct seen",
                                                                    "acct unseen")))
    for typology in ALL_TYPOLOGIES:
        unseen = fit_logistic(*training_accounts(train, typology))(x_eval)
        row = {"payment_model_max": per_typology(ev, payment, typology),
               "peer_tail": per_typology(ev, tail, typology),
               "account_model_seen": per_typology(ev, seen, typology),
               "account_model_unseen": per_typology(ev, unseen, typology)}
        for k, v in row.items():
            scores[k][typology] = v
        cells = " ".join(f"{v['roc_auc']:6.3f}/{v['recall']:.2f}" for v in row.values())
        print(f"{typology:20s} {row['peer_tail']['accounts']:8d}   {cells}", flush=True)
    means = {k: {m: float(np.mean([v[m] for v in per.values()])) for m in ("roc_auc", "recall")}
             for k, per in scores.items()}
    print(f"{'mean':20s} {'':8s}   " + " ".join(f"{v['roc_auc']:6.3f}/{v['recall']:.2f}"
                                                for v in means.values()))
    if args.json:
        write_json(args.json, {"host": host, "seed": args.seed, "populations": args.populations,
                               "quick": args.quick, "typologies": scores, "mean": means})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
