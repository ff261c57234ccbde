"""How the risk model does on a typology it never saw: leave-one-typology-out on the training simulator.

The independent held-out generator (``bench.heldout_eval``) judges a model on laundering shaped
unlike anything it was trained on, and may be run only once a model is adopted. This benchmark
estimates the same kind of gap without it, from the training simulator alone: for each typology
``T`` of ``ALL_TYPOLOGIES`` it fits a model the way ``sealtrail model train`` does but with ``T``
left out of every training set (``TrainConfig(typologies=ALL_TYPOLOGIES - T)``), and one model with
every typology, then scores one evaluation set that has them all (the training seed + 1, never
trained on) and prints, per typology, beside each other:

- seen: the model trained with every typology, on ``T``;
- unseen: the model trained without ``T``, on ``T``;

each as payment recall at 1 % of normal payments, and account-level ROC-AUC and recall at 1 % of
normal accounts (an account scored by its highest payment score, labelled by the typology of any
laundering payment it sends or receives; accounts touching another typology are left out). The
drop from seen to unseen is what a typology the training simulator lacks costs; its spread over
typologies says which shapes the features carry to new patterns and which the model only knows by
heart.

The evaluation set is fixed (look-alikes on, salaries as the simulator's default), whatever the
training settings. The models are smaller than the shipped one's training (8 drawn populations of
up to 20,000 normal payments; ``--quick``: 4) so that the ten fits take minutes; the shipped training
settings are the default otherwise, and ``--set NAME=VALUE`` changes one (``--set 'hidden=(32,)'``),
so that two settings can be compared on typologies they never saw rather than on the independent
generator.
Run from the repository root: ``python -m bench.typology_holdout [--quick] [--set NAME=VALUE]...
[--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.typology_holdout")

import argparse
import ast
import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.machine import host_info
from bench.report import write_json
from inference.model import MlpModel, forward
from inference.simulate import ALL_TYPOLOGIES, SimConfig, SimTx, simulate
from inference.train import TrainConfig, build_rows, fit, recall_at_fpr, roc_auc

FPR = 0.01


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One evaluation set: its payments' rows, labels and typologies, and the accounts they touch."""

    rows: np.ndarray
    typology: np.ndarray  # per payment: "normal" or a typology
    ends: np.ndarray  # account index of each payment's originator, then of each beneficiary
    account_typology: np.ndarray  # per account: "normal", a typology, or "mixed" (more than one)

    @classmethod
    def of(cls, sims: list[SimTx]) -> Evaluation:
        rows, _, kinds = build_rows(sims)
        ids: dict[str, int] = {}
        orig = [ids.setdefault(s.transaction.originator.account or "", len(ids)) for s in sims]
        bene = [ids.setdefault(s.transaction.beneficiary.account or "", len(ids)) for s in sims]
        ends = np.array(orig + bene)
        typology = np.array(kinds, dtype=object)
        account = np.full(len(ids), "normal", dtype=object)
        for i, k in zip(ends.tolist(), np.concatenate([typology, typology]).tolist(), strict=True):
            if k != "normal":
                account[i] = k if account[i] in ("normal", k) else "mixed"
        return cls(rows, typology, ends, account)


def figures(model: MlpModel, ev: Evaluation, typology: str) -> dict[str, float]:
    """Payment recall at 1 % of normal payments and the account-level figures, on ``typology``."""
    scores = forward(model, ev.rows)
    normal_pay = ev.typology == "normal"
    keep = normal_pay | (ev.typology == typology)
    pay_recall, _ = recall_at_fpr(scores[keep], (ev.typology[keep] == typology).astype(np.int64), FPR)
    best = np.full(len(ev.account_typology), -np.inf)
    np.maximum.at(best, ev.ends, np.concatenate([scores, scores]))
    keep_acc = (ev.account_typology == "normal") | (ev.account_typology == typology)
    labels = (ev.account_typology[keep_acc] == typology).astype(np.int64)
    acc_recall, _ = recall_at_fpr(best[keep_acc], labels, FPR)
    normal = best[keep_acc][labels == 0]
    # recall counts scores strictly above the threshold: a top score many normal accounts share
    # (a saturated sigmoid) leaves none there, which this count shows
    return {"payment_recall": pay_recall, "account_roc_auc": roc_auc(best[keep_acc], labels),
            "account_recall": acc_recall, "accounts": int(labels.sum()),
            "normal_accounts_at_top_score": int(np.count_nonzero(normal == normal.max()))}


def _row(label: str, accounts: str, seen: dict[str, Any], unseen: dict[str, Any]) -> str:
    """One line of the table: the three figures, seen then unseen."""
    cells = "      ".join(f"{seen[k]:.3f}  {unseen[k]:.3f}"
                          for k in ("payment_recall", "account_roc_auc", "account_recall"))
    return f"{label:20s} {accounts:>8s}   {cells}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="4 drawn populations a model instead of 8")
    ap.add_argument("--seed", type=int, default=7, help="training seed (evaluation: seed + 1)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a training setting other than the shipped one, as a Python literal (for example "
                         "hidden='(32,)' or weight_decay=1e-3); repeatable")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    settings: dict[str, Any] = {}
    # what shapes the fitted model (not the seed, the typologies this compares, nor the card's
    # evaluation settings, which the figures here do not use)
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.name not in ("seed", "typologies", "fpr", "heldout_populations")}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in defaults:
            ap.error(f"--set {item!r}: no training setting {name!r} (one of {', '.join(sorted(defaults))})")
        try:
            settings[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            ap.error(f"--set {item!r}: {value!r} is not a Python literal")
        want = type(defaults[name])
        if not (isinstance(settings[name], want) or (want is float and type(settings[name]) is int)):
            ap.error(f"--set {item!r}: {name} takes a {want.__name__}, as its default {defaults[name]!r}")
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), RAM {host['ram_gib']} GiB, Python {host['python']}, "
          f"{host['os']}")
    base = TrainConfig(**{"populations": 4 if args.quick else 8, "population_payments": 20_000,
                          "heldout_populations": 0, **settings, "seed": args.seed})
    print(f"training: seed {base.seed}, {base.n_normal:,} normal payments, {base.populations} drawn "
          f"populations of up to {base.population_payments:,}, evasion variants, look-alikes; {base.epochs} "
          f"epochs, hidden {base.hidden}" + (f"; set: {settings}" if settings else ""))
    t0 = time.perf_counter()
    ev = Evaluation.of(simulate(SimConfig(seed=args.seed + 1, days=30, n_accounts=5_000, n_normal=49_000,
                                          typology_share=0.03, lookalikes=True, typologies=ALL_TYPOLOGIES)))
    print(f"evaluation: seed {args.seed + 1}, {len(ev.rows):,} payments, every typology, look-alikes "
          f"({time.perf_counter() - t0:.0f} s)")
    t0 = time.perf_counter()
    seen, _, _ = fit(dataclasses.replace(base, typologies=ALL_TYPOLOGIES))
    print(f"model with every typology fitted ({time.perf_counter() - t0:.0f} s)")
    training = {k: v for k, v in dataclasses.asdict(base).items() if k != "typologies"}
    training["typologies"] = "seen: every one of ALL_TYPOLOGIES; unseen: all but the typology left out"
    out: dict[str, Any] = {"host": host, "training": training, "settings": settings, "typologies": {}}
    print(f"\n{'left out':20s} {'accounts':>8s}   payment recall@1%  account ROC-AUC   account recall@1%")
    print(f"{'':20s} {'':>8s}   {'      '.join(['seen  unseen'] * 3)}")
    for typology in ALL_TYPOLOGIES:
        t0 = time.perf_counter()
        others = tuple(t for t in ALL_TYPOLOGIES if t != typology)
        without, _, _ = fit(dataclasses.replace(base, typologies=others))
        a, b = figures(seen, ev, typology), figures(without, ev, typology)
        seconds = round(time.perf_counter() - t0, 1)
        out["typologies"][typology] = {"seen": a, "unseen": b, "fit_seconds": seconds}
        print(_row(typology, str(a["accounts"]), a, b), flush=True)
    per = out["typologies"].values()
    drops = [v["seen"]["account_roc_auc"] - v["unseen"]["account_roc_auc"] for v in per]
    out["mean"] = {side: {k: float(np.mean([v[side][k] for v in per]))
                          for k in ("payment_recall", "account_roc_auc", "account_recall")}
                   for side in ("seen", "unseen")}
    print(_row("mean", "", out["mean"]["seen"], out["mean"]["unseen"]))
    print(f"\naccount ROC-AUC lost when a typology is unseen: median {np.median(drops):.3f}, "
          f"largest {max(drops):.3f}")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
