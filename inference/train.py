"""Train the shipped risk model from the simulator, reproducibly, and write its model card.

``train(TrainConfig(seed=...), out_dir)`` simulates independent sets from the seed and turns each
into feature rows with its own feature state (velocity windows and graph):

- every set carries benign look-alikes in its normal traffic (billers, merchants, payroll and
  supplier runs, salaries passed on, family round trips: ``SimConfig.lookalikes``);
- training: plain typologies from ``seed`` plus evasion variants from ``seed + 3`` (so the model
  learns the shapes that slip under the rules), and ``populations`` populations unlike each other
  (``draw_populations``: amount scales over five orders of magnitude, 7 to 45 days, 1,000 to 20,000
  accounts, densities, typology lengths and spreads), half of them evasion variants;
- held-out: ``seed + 1`` and ``seed + 2`` (evasion), plus populations drawn from ``seed + 1``.

It fits a small MLP with mini-batch Adam in float64 (numpy only), rounds the weights to float32
and writes ``weights.npz``, ``model.onnx`` and ``card.json``; the card also states how far each
precision a backend may score at lies from the reference over the held-out sets
(``score_precision``, ``inference.precision``; ``python -m inference.precision_bounds`` measures
it again for a card). The model reads every column of the
feature schema but those in ``NOT_READ`` (absolute USD amounts, the clock, the data-quality
flags), which it gets with scale 0: what it learns is relative to each account's history and
network, so it carries across amount scales and densities. Everything is a function of the seed:
the same seed on the same numpy/BLAS gives the same bytes (the test suite checks the shipped
files this way).
"""

from __future__ import annotations

import math
import platform
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from inference.features import FeatureExtractor
from inference.model import (
    CARD_FORMAT,
    CARD_NAME,
    ONNX_NAME,
    WEIGHTS_NAME,
    Z_CLIP,
    MlpModel,
    forward,
    model_npz_bytes,
    preprocess,
    sha256_hex,
    to_onnx_bytes,
)
from inference.precision import SECTION, card_section
from inference.schema import MODEL_SCHEMA, feature_names
from inference.simulate import TYPOLOGIES, SimConfig, SimTx, simulate

__all__ = ["GOVERNANCE", "STATED_WHEN_SET", "TrainConfig", "TrainResult", "build_rows", "by_place",
           "evaluation_configs", "fit", "governance", "pattern_places", "recall_at_fpr", "roc_auc",
           "same_drift_reference", "train"]

F64 = np.float64
# The model learns from the columns of MODEL_SCHEMA (the leading columns of every row).
FEATURE_SCHEMA = MODEL_SCHEMA
FEATURE_NAMES = feature_names(MODEL_SCHEMA)
# Columns the model gets with scale 0 (it cannot read them): USD amounts and sums, which mean
# different things at different amount scales; the hour and weekday in UTC, which say more about
# where the simulator puts its customers than about laundering; and the data-quality flags, which
# the simulator's messages never set (the rule pack acts on them).
NOT_READ = frozenset(("amount_usd", "log_amount_usd", "orig_sum_usd_1h", "orig_sum_usd_24h",
                      "orig_sum_usd_7d", "bene_sum_usd_1h", "bene_sum_usd_24h", "bene_sum_usd_7d",
                      "hour_utc", "weekend", "finding_count", "orig_iban_invalid", "bene_iban_invalid",
                      "country_unreadable", "service_nak")) & frozenset(FEATURE_NAMES)
# counts and USD sums are heavy-tailed: the model sees log(1 + x) of these
LOG_FEATURES = frozenset(n for n in FEATURE_NAMES if "_count_" in n or "_sum_usd_" in n
                         or n in ("amount_usd",) or n.endswith("counterparties_24h")
                         or "_fan_" in n or n in ("scatter_gather", "cycle_count", "orig_activity_24h",
                                                  "amount_history_n"))


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 7
    days: int = 21
    n_accounts: int = 3000
    n_normal: int = 60_000
    typology_share: float = 0.05
    hidden: tuple[int, ...] = (64, 32)
    epochs: int = 10
    batch: int = 256
    learning_rate: float = 3e-3
    weight_decay: float = 1e-5
    fpr: float = 0.01  # the operating point the card reports recall at
    adversarial: bool = True  # also train on evasion variants (seed + 3)
    populations: int = 24  # populations of randomised scale and shape added to training (draw_populations)
    heldout_populations: int = 6  # and to the held-out evaluation
    population_payments: int = 30_000  # normal payments per drawn population, at most
    lookalikes: bool = True  # benign traffic shaped like laundering in every set (SimConfig.lookalikes)
    typologies: tuple[str, ...] = TYPOLOGIES  # in every set, drawn populations included
    payroll_salaries: bool = False  # SimConfig.payroll_salaries in every set


# Settings added after models were shipped: a card states them only when they differ from these
# values, so a card trained without them reads the same (and ``precision_bounds.train_config``
# reads a missing one as this value).
STATED_WHEN_SET: dict[str, Any] = {"typologies": TYPOLOGIES, "payroll_salaries": False}


@dataclass(frozen=True)
class TrainResult:
    model: MlpModel
    card: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # name -> SHA-256


def draw_populations(
        seed: int, n: int, max_payments: int = 30_000, *, typologies: tuple[str, ...] = TYPOLOGIES,
        payroll_salaries: bool = False) -> list[SimConfig]:
    """``n`` simulator settings drawn from ``seed``, each unlike the others: amount scale
    log-uniform over 10^-2.5 to 10^3 (typical payments from about USD 1 to 10^6), 7 to 45 days,
    1,000 to 20,000 accounts (log-uniform), 0.05 to 1.5 normal payments per account and day (at most
    ``max_payments``), 1 to 8 % laundering, layering chains of 3 to 10 transfers, cycles through 3 to
    10 accounts, fan-in and fan-out of 5 to 100 mules spread over half an hour to two weeks; every
    other one evasion variants, with laundering of ``typologies`` (and ``payroll_salaries``, as
    ``SimConfig`` has it). The draws use their own stream (``sealtrail.train/{seed}/population/i``) and
    do not depend on the two settings."""
    out = []
    for i in range(n):
        rng = random.Random(f"sealtrail.train/{seed}/population/{i}")
        scale = 10 ** rng.uniform(-2.5, 3.0)
        days = rng.randint(7, 45)
        accounts = round(math.exp(rng.uniform(math.log(1_000), math.log(20_000))))
        density = math.exp(rng.uniform(math.log(0.05), math.log(1.5)))
        payments = max(2_000, min(max_payments, round(density * accounts * days)))
        share = rng.uniform(0.01, 0.08)
        chain_lo = rng.randint(3, 6)
        chain = (chain_lo, rng.randint(chain_lo, 10))
        cycle_lo = rng.randint(3, 6)
        cycle = (cycle_lo, rng.randint(cycle_lo, 10))
        mules_lo = rng.randint(5, 30)
        mules = (mules_lo, rng.randint(mules_lo, 100))
        hours_lo = math.exp(rng.uniform(math.log(0.5), math.log(24)))
        hours = (hours_lo, math.exp(rng.uniform(math.log(hours_lo), math.log(24 * 14))))
        out.append(SimConfig(seed=seed * 1_000 + i, days=days, n_accounts=accounts, n_normal=payments,
                             typology_share=share, evasion=bool(i % 2), amount_scale=scale, chain_hops=chain,
                             cycle_hops=cycle, fan_mules=mules, fan_hours=hours, lookalikes=True,
                             typologies=typologies, payroll_salaries=payroll_salaries))
    return out


def _population(cfg: SimConfig) -> dict[str, Any]:
    """A drawn population as the card states it."""
    return {"seed": cfg.seed, "days": cfg.days, "n_accounts": cfg.n_accounts, "n_normal": cfg.n_normal,
            "typology_share": round(cfg.typology_share, 4), "evasion": cfg.evasion,
            "amount_scale": float(f"{cfg.amount_scale:.4g}"), "chain_hops": list(cfg.chain_hops),
            "cycle_hops": list(cfg.cycle_hops), "fan_mules": list(cfg.fan_mules),
            "fan_hours": [round(h, 2) for h in cfg.fan_hours]}


DRIFT_BINS = 10

# What a model validator reads first (in the spirit of SR 11-7): what the model is for, what it
# learned from, and where it stops. The card carries it so that the text travels with the weights.
GOVERNANCE: dict[str, Any] = {
    "intended_use": "Ranks payments for anti-money-laundering review inside sealtrail's decision pipeline: "
                    "its score feeds the rule pack's model-score bands beside the rules, and every decision "
                    "is sealed with the model's SHA-256. It decides nothing alone and is not meant for "
                    "credit, fraud-loss or sanctions decisions.",
    "training_data": "Synthetic only (inference.simulate): no bank's data. Normal traffic of retail and "
                     "business customers with benign look-alikes (billers, merchants, payroll and supplier "
                     "runs, salaries passed on, family round trips); six typologies (structuring, layering, "
                     "fan-in, fan-out, high-risk corridors, round-tripping), plain and evasion variants; 24 "
                     "populations of randomised amount scale, size, density and typology shape.",
    "evaluation": "metrics: held-out seeds and populations of the training simulator, computed by "
                  "`sealtrail model train`. An independent generator written apart from the training "
                  "simulator (never used in training or tuning, nor reachable from this code) is "
                  "evaluated by "
                  "`python -m bench.heldout_eval --evaluation`, which writes evaluation.json beside "
                  "this card; `sealtrail model card` shows both.",
    "limits": [
        "Measured on synthetic payments only; a bank must validate it on its own traffic before relying "
        "on its scores.",
        "On the independent generator it ranks laundering accounts well below its training-simulator "
        "figures (evaluation.json): what it learned from one simulator carries over only in part.",
        "Evasion variants that stay under every absolute threshold and space payments over days are "
        "its weak spot (detection at 1 % false positives in metrics.evasion).",
        "A pattern's first payment comes from an account that has shown nothing yet, and is rarely told "
        "from normal traffic one payment at a time; payment-level figures count it beside the later ones "
        "(by_place_at_1pct_fpr: first and later payments apart, and the share of patterns with at least "
        "one payment detected).",
        "It does not read USD amounts, the clock or the data-quality flags (architecture.not_read); "
        "the rule pack covers amounts the law sets and message defects.",
        "It sees 30 days of history: an account quiet for longer looks new.",
    ],
}


def governance(cfg: TrainConfig) -> dict[str, Any]:
    """``GOVERNANCE`` as a card trained with ``cfg`` states it: its training data names the typologies
    and the salaries' source when they are not the default ones (the default text is unchanged)."""
    if cfg.typologies == TYPOLOGIES and not cfg.payroll_salaries:
        return GOVERNANCE
    names = ", ".join(t.replace("_", " ") for t in cfg.typologies)
    salaries = " (salaries passed on come from payroll runs)" if cfg.payroll_salaries else ""
    text = (f"Synthetic only (inference.simulate): no bank's data. Normal traffic of retail and business "
            f"customers with benign look-alikes{salaries}; {len(cfg.typologies)} typologies ({names}), "
            f"plain and evasion variants; {cfg.populations} populations of randomised amount scale, size, "
            f"density and typology shape.")
    return {**GOVERNANCE, "training_data": text}


def drift_reference(scores: np.ndarray) -> dict[str, Any]:
    """What the score looks like on the normal training payments, for drift monitoring: the edges
    of ``DRIFT_BINS`` bins at the deciles (distinct, 6 decimals) and the share of payments in each
    bin ``[edge_i, edge_i+1)``; a serving process compares its recent scores with it (population
    stability index, ``sealtrail_score_psi`` on ``/metrics``)."""
    inner = sorted({round(float(q), 6) for q in np.quantile(scores, np.arange(1, DRIFT_BINS) / DRIFT_BINS)})
    counts = np.bincount(np.searchsorted(np.array(inner), scores, side="right"), minlength=len(inner) + 1)
    return {"score": {"edges": inner, "shares": [round(float(c) / len(scores), 6) for c in counts],
                      "payments": len(scores)}}


# How far a share of two score references of the same model may differ (``same_drift_reference``).
DRIFT_SHARE_TOLERANCE = 1e-5


def same_drift_reference(got: object, want: object) -> bool:
    """Whether two ``drift_reference`` objects agree: the same edges and payments, every share within
    ``DRIFT_SHARE_TOLERANCE``. The edges are the scores' own deciles, so some scores sit at an edge,
    and the last bits of a float forward pass depend on the CPU's BLAS kernels: such a score falls on
    either side on two machines, and a share moves by a payment or a few (1.5e-6 each of the card's
    660,810 normal training payments). Anything else differing means other payments or another model."""
    if not (isinstance(got, dict) and isinstance(want, dict) and got.keys() == want.keys() == {"score"}):
        return False
    g, w = got["score"], want["score"]
    if not (isinstance(g, dict) and isinstance(w, dict) and g.keys() == w.keys()
            and g.get("edges") == w.get("edges") and g.get("payments") == w.get("payments")):
        return False
    gs, ws = g.get("shares"), w.get("shares")
    return (isinstance(gs, list) and isinstance(ws, list) and len(gs) == len(ws)
            and all(isinstance(a, float | int) and isinstance(b, float | int)
                    and abs(a - b) <= DRIFT_SHARE_TOLERANCE for a, b in zip(gs, ws, strict=True)))


def build_rows(sims: Sequence[SimTx]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Feature rows (in time order, one fresh velocity state), labels and typologies."""
    full = FeatureExtractor().extract([s.transaction for s in sims], [s.at for s in sims])
    rows = np.ascontiguousarray(full[:, :len(FEATURE_NAMES)])
    labels = np.array([s.label for s in sims], dtype=F64)
    return rows, labels, [s.typology for s in sims]


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with tied scores sharing their mean rank)."""
    order = np.argsort(scores, kind="stable")
    ranked = scores[order]
    ranks = np.empty(len(scores), dtype=F64)
    i = 0
    while i < len(ranked):  # average ranks over ties
        j = i
        while j + 1 < len(ranked) and ranked[j + 1] == ranked[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        raise ValueError("ROC-AUC needs both classes")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def threshold_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr: float) -> float:
    """The lowest score threshold (alert when score > threshold) whose false-positive rate <= fpr."""
    neg = np.sort(scores[labels == 0])[::-1]
    allowed = int(np.floor(fpr * len(neg)))
    return float(neg[allowed]) if allowed < len(neg) else -np.inf


def recall_at_fpr(scores: np.ndarray, labels: np.ndarray, fpr: float) -> tuple[float, float]:
    """(recall, threshold) at the given false-positive rate."""
    thr = threshold_at_fpr(scores, labels, fpr)
    return float((scores[labels == 1] > thr).mean()), thr


def _standardiser(rows: np.ndarray, log_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and 1/std of the preprocessed training features (the model's first step); mean and
    scale 0 for the columns the model does not read (``NOT_READ``)."""
    x = np.nan_to_num(rows.astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    x[:, log_mask] = np.log(np.maximum(x[:, log_mask], 0) + np.float32(1))
    mean = x.astype(F64).mean(axis=0)
    std = x.astype(F64).std(axis=0)
    scale = 1.0 / np.where(std > 1e-6, std, 1.0)
    unread = np.array([n in NOT_READ for n in FEATURE_NAMES])
    mean[unread] = 0.0
    scale[unread] = 0.0
    return mean.astype(np.float32), scale.astype(np.float32)


def _fit(rows: np.ndarray, labels: np.ndarray, cfg: TrainConfig, rng: np.random.Generator) -> MlpModel:
    log_mask = np.array([n in LOG_FEATURES for n in FEATURE_NAMES])
    mean, scale = _standardiser(rows, log_mask)
    sizes = (len(FEATURE_NAMES), *cfg.hidden, 1)
    model = MlpModel.init(rng, sizes, FEATURE_NAMES, log_mask, mean, scale, FEATURE_SCHEMA)
    z = preprocess(model, rows).astype(F64)
    params = [p.astype(F64) for layer in model.layers for p in layer]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    step = 0
    n = len(z)
    for _ in range(cfg.epochs):
        perm = rng.permutation(n)
        for start in range(0, n, cfg.batch):
            idx = perm[start:start + cfg.batch]
            grads = _gradients(params, z[idx], labels[idx])
            step += 1
            lr = cfg.learning_rate * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
            for p, g, mi, vi in zip(params, grads, m, v, strict=True):
                g = g + cfg.weight_decay * p
                mi *= b1
                mi += (1 - b1) * g
                vi *= b2
                vi += (1 - b2) * g * g
                p -= lr * mi / (np.sqrt(vi) + eps)
    layers = tuple((params[i].astype(np.float32), params[i + 1].astype(np.float32))
                   for i in range(0, len(params), 2))
    return MlpModel(FEATURE_SCHEMA, FEATURE_NAMES, log_mask, mean, scale, layers)


def _gradients(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Back-propagation of the mean binary cross-entropy (ReLU hidden layers, sigmoid out)."""
    acts = [x]
    h = x
    n_layers = len(params) // 2
    for i in range(n_layers):
        a = h @ params[2 * i] + params[2 * i + 1]
        h = np.maximum(a, 0) if i < n_layers - 1 else a
        acts.append(h)
    p = 1 / (1 + np.exp(-np.clip(acts[-1][:, 0], -60, 60)))
    delta = ((p - y) / len(y))[:, None]
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for i in range(n_layers - 1, -1, -1):
        grads[2 * i] = acts[i].T @ delta
        grads[2 * i + 1] = delta.sum(axis=0)
        if i:
            delta = (delta @ params[2 * i].T) * (acts[i] > 0)
    return grads


def _per_typology(scores: np.ndarray, typologies: list[str], thr: float) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    kinds = np.array(typologies)
    for kind in sorted(set(typologies) - {"normal"}):
        sel = kinds == kind
        out[kind] = {"n": int(sel.sum()), "detected": float((scores[sel] > thr).mean())}
    return out


def pattern_places(sims: Sequence[SimTx]) -> tuple[np.ndarray, np.ndarray]:
    """Each payment's place in its laundering pattern and the pattern's index, in the order given
    (time order): place 0 for a pattern's first payment, 1 for every later one, -1 for a normal
    payment; patterns numbered 0, 1, ... by their first payment (a pattern is a typology instance:
    ``SimTx.typology`` and ``SimTx.pattern``), -1 for a normal payment."""
    index: dict[tuple[str, int], int] = {}
    places = np.full(len(sims), -1, dtype=np.int64)
    patterns = np.full(len(sims), -1, dtype=np.int64)
    for i, s in enumerate(sims):
        if not s.label:
            continue
        key = (s.typology, s.pattern)
        at = index.get(key)
        if at is None:
            at = index[key] = len(index)
            places[i] = 0
        else:
            places[i] = 1
        patterns[i] = at
    return places, patterns


def by_place(scores: np.ndarray, sims: Sequence[SimTx], thr: float) -> dict[str, Any]:
    """Laundering payments above ``thr`` by their place in a pattern, and the patterns with at least
    one payment above it (per typology too). A pattern's first payment comes from an account that
    has shown nothing yet: a scorer that sees one payment at a time can rarely tell it from normal
    traffic, so this says how much of a payment-level figure is the first payments, and how often a
    pattern is seen at all."""
    places, patterns = pattern_places(sims)
    above = scores > thr
    first, later = places == 0, places == 1
    n = int(patterns.max()) + 1 if len(patterns) else 0
    seen = np.zeros(n, dtype=bool)
    seen[patterns[above & (patterns >= 0)]] = True
    kinds = np.array([""] * n, dtype=object)
    for i in np.flatnonzero(first).tolist():
        kinds[patterns[i]] = sims[i].typology
    per = {k: {"n": int((kinds == k).sum()), "detected": round(float(seen[kinds == k].mean()), 6)}
           for k in sorted(set(kinds.tolist()))}

    def share(sel: np.ndarray) -> dict[str, Any]:
        return {"n": int(sel.sum()), "detected": round(float(above[sel].mean()), 6) if sel.any() else None}

    return {"first_payment": share(first), "later_payments": share(later),
            "patterns": {"n": n, "detected": round(float(seen.mean()), 6) if n else None,
                         "per_typology": per}}


def _sim(cfg: TrainConfig, seed: int, evasion: bool = False) -> SimConfig:
    return SimConfig(seed=seed, days=cfg.days, n_accounts=cfg.n_accounts, n_normal=cfg.n_normal,
                     typology_share=cfg.typology_share, evasion=evasion, lookalikes=cfg.lookalikes,
                     typologies=cfg.typologies, payroll_salaries=cfg.payroll_salaries)


def training_configs(cfg: TrainConfig) -> list[SimConfig]:
    """The simulator settings of the training sets, in the order ``train`` stacks their rows: the
    seed, its evasion variants (``seed + 3``) when adversarial, then the drawn populations."""
    plain = [_sim(cfg, cfg.seed)] + ([_sim(cfg, cfg.seed + 3, evasion=True)] if cfg.adversarial else [])
    return plain + draw_populations(cfg.seed, cfg.populations, cfg.population_payments,
                                    typologies=cfg.typologies, payroll_salaries=cfg.payroll_salaries)


def evaluation_configs(cfg: TrainConfig) -> list[tuple[str, SimConfig]]:
    """The simulator settings of the evaluation sets, named, in the order ``train`` evaluates them:
    held-out (``seed + 1``), evasion variants (``seed + 2``), then each held-out population."""
    return [("heldout", _sim(cfg, cfg.seed + 1)), ("evasion", _sim(cfg, cfg.seed + 2, evasion=True)),
            *(("heldout_populations", p) for p in draw_populations(
                cfg.seed + 1, cfg.heldout_populations, cfg.population_payments, typologies=cfg.typologies,
                payroll_salaries=cfg.payroll_salaries))]


def fit(cfg: TrainConfig) -> tuple[MlpModel, np.ndarray, np.ndarray]:
    """The model ``train`` fits for ``cfg``, without its evaluation or card, with the training rows
    and labels it was fitted on: for a caller comparing training settings (``bench.typology_holdout``)."""
    sets = [build_rows(simulate(c)) for c in training_configs(cfg)]
    rows = np.vstack([r for r, _, _ in sets])
    labels = np.concatenate([y for _, y, _ in sets])
    del sets
    return _fit(rows, labels, cfg, np.random.default_rng(cfg.seed)), rows, labels


def train(cfg: TrainConfig, out_dir: Path | None = None) -> TrainResult:
    """Simulate, fit, evaluate; write the three model files into ``out_dir`` when given."""
    drawn = training_configs(cfg)[-cfg.populations:] if cfg.populations else []
    model, train_rows, train_y = fit(cfg)
    drift = drift_reference(forward(model, train_rows[train_y == 0]))

    test_sims = simulate(_sim(cfg, cfg.seed + 1))
    test_rows, test_y, test_kinds = build_rows(test_sims)
    scores = forward(model, test_rows)
    recall, thr = recall_at_fpr(scores, test_y, cfg.fpr)
    ev_sims = simulate(_sim(cfg, cfg.seed + 2, evasion=True))
    ev_rows, ev_y, ev_kinds = build_rows(ev_sims)
    ev_scores = forward(model, ev_rows)
    ev_pos = ev_y == 1
    held_pops = draw_populations(cfg.seed + 1, cfg.heldout_populations, cfg.population_payments,
                                 typologies=cfg.typologies, payroll_salaries=cfg.payroll_salaries)
    populations: list[dict[str, Any]] = []
    pop_rows: list[np.ndarray] = []
    for p in held_pops:
        p_rows, p_y, _ = build_rows(simulate(p))
        pop_rows.append(p_rows)
        p_scores = forward(model, p_rows)
        p_recall, _ = recall_at_fpr(p_scores, p_y, cfg.fpr)
        populations.append({**_population(p), "rows": len(p_y), "positives": int(p_y.sum()),
                            "roc_auc": round(roc_auc(p_scores, p_y), 6),
                            "recall_at_1pct_fpr": round(p_recall, 6)})

    weights = model_npz_bytes(model)
    onnx_bytes = to_onnx_bytes(model)
    eval_sets = [("heldout", test_rows), ("evasion", ev_rows)]
    if pop_rows:
        eval_sets.append(("heldout_populations", np.vstack(pop_rows)))
    precision = card_section(model, eval_sets, onnx_bytes)  # as python -m inference.precision_bounds
    files = {WEIGHTS_NAME: sha256_hex(weights), ONNX_NAME: sha256_hex(onnx_bytes)}
    card: dict[str, Any] = {
        "format": CARD_FORMAT,
        "name": "aml_mlp",
        "model_sha256": files[WEIGHTS_NAME],
        "files": files,
        "feature_schema": FEATURE_SCHEMA,
        "features": list(FEATURE_NAMES),
        "architecture": {
            "sizes": list(model.sizes), "hidden_activation": "relu", "output": "sigmoid",
            "preprocessing": "float32; NaN -> 0; log(1 + max(x, 0)) on log_features; "
                             f"(x - mean) * scale; clipped to +/-{Z_CLIP:g}",
            "log_features": [n for n in FEATURE_NAMES if n in LOG_FEATURES],
            "not_read": [n for n in FEATURE_NAMES if n in NOT_READ],
        },
        "training": {
            **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()
               if k not in STATED_WHEN_SET or v != STATED_WHEN_SET[k]},
            "simulator": "inference.simulate: training = seed (+ seed + 3 evasion variants when "
                         "adversarial) + the drawn populations, held-out = seed + 1, evasion held-out = "
                         "seed + 2 (evasion variants), held-out populations drawn from seed + 1",
            "populations": [_population(p) for p in drawn],
            "rows": len(train_y), "positives": int(train_y.sum()),
            "numpy": np.__version__, "machine": platform.machine(),
        },
        "metrics": {
            "heldout": {
                "rows": len(test_y), "positives": int(test_y.sum()),
                "roc_auc": round(roc_auc(scores, test_y), 6),
                "recall_at_1pct_fpr": round(recall, 6),
                "threshold_at_1pct_fpr": round(thr, 6),
                "per_typology_recall_at_1pct_fpr": _per_typology(scores, test_kinds, thr),
                "by_place_at_1pct_fpr": by_place(scores, test_sims, thr),
            },
            "evasion": {
                "rows": len(ev_y), "positives": int(ev_pos.sum()),
                "detection_rate_at_1pct_fpr": round(float((ev_scores[ev_pos] > thr).mean()), 6),
                "detection_rate_score_ge_0_5": round(float((ev_scores[ev_pos] >= 0.5).mean()), 6),
                "false_positive_rate_at_threshold": round(float((ev_scores[~ev_pos] > thr).mean()), 6),
                "per_typology_at_1pct_fpr": _per_typology(ev_scores, ev_kinds, thr),
                "by_place_at_1pct_fpr": by_place(ev_scores, ev_sims, thr),
            },
            "heldout_populations": populations,
        },
        "drift_reference": drift,
        "governance": governance(cfg),
        SECTION: precision,
    }
    card_bytes = card_json(card)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / WEIGHTS_NAME).write_bytes(weights)
        (out_dir / ONNX_NAME).write_bytes(onnx_bytes)
        (out_dir / CARD_NAME).write_bytes(card_bytes)
    return TrainResult(model, card, {**files, CARD_NAME: sha256_hex(card_bytes)})


def card_json(card: dict[str, Any]) -> bytes:
    """The card file's bytes: sorted keys, two-space indent, trailing newline."""
    return orjson.dumps(card, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
