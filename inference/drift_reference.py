"""Where the shipped model's main input features sat in training, for feature drift monitoring.

The model card's ``drift_reference`` states the score's distribution on the normal training
payments only. This module states, for the same 660,810 normal training payments, the
distribution of the ten features the model reads most (``REFERENCE``): per feature, bin edges at
the deciles (distinct values, 6 decimals), the share of payments in each bin ``[edge_i,
edge_i+1)`` (the first bin is everything below the first edge) and the share missing (NaN). A
serving process bins its recent feature rows the same way and reports each feature's population
stability index against it (``sealtrail_feature_psi`` on ``/metrics``).

"Reads most": the largest mean of ``|z_j| * ||W1[j]||`` over those payments, where ``z`` is the
model's standardised input (``inference.model.preprocess``) and ``W1[j]`` the first layer's
weights from feature ``j``: how much of what the first layer receives comes from the feature.

``REFERENCE`` is data, rebuilt by ``python -m inference.drift_reference``: it simulates the
training sets of ``inference.train.train`` under the card's own settings again (seeded: about two
minutes), keeps their normal payments, and refuses to go on unless the model's scores on them give
the card's score reference bin for bin, so the features and the score describe one population.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import orjson

__all__ = ["MAIN_FEATURES", "REFERENCE", "build", "decile_bins", "main_features",
           "reference_for"]

N_MAIN = 10  # features with a reference
_BINS = 10  # deciles, as the card's score reference

# Rebuilt by `python -m inference.drift_reference` (see the module docstring); do not edit by hand.
REFERENCE: dict[str, Any] = {
    "model_sha256": "69238cf44efc2278afd6e2021f69b6d6cc67464f016d15bb0f57bd0b597cc741",
    "payments": 660810,
    "features": {
        "amount_log2_ratio_q8": {
            "first_layer_input": 4.4362, "missing": 0.0,
            "edges": [-513.0, -267.0, -97.0, 0.0, 23.0, 159.0, 349.0, 634.0],
            "shares": [0.099959, 0.09989, 0.09962, 0.072056, 0.228011, 0.100375, 0.09984, 0.100227, 0.100023],
        },
        "bene_count_1h": {
            "first_layer_input": 4.1835, "missing": 0.0,
            "edges": [1.0, 8.0, 16.0],
            "shares": [0.0, 0.799694, 0.093089, 0.107217],
        },
        "bene_fan_in_7d": {
            "first_layer_input": 4.1792, "missing": 0.0,
            "edges": [1.0, 2.0, 3.0, 4.0, 6.0, 62.0, 165.0],
            "shares": [0.0, 0.310566, 0.164468, 0.094387, 0.106528, 0.122745, 0.099062, 0.102244],
        },
        "new_counterparty": {
            "first_layer_input": 3.6739, "missing": 0.0,
            "edges": [0.0, 1.0],
            "shares": [0.0, 0.252306, 0.747694],
        },
        "pass_through_7d_q16": {
            "first_layer_input": 3.0877, "missing": 0.0,
            "edges": [0.0, 6562.0, 21255.0, 52809.0, 121141.0, 262144.0],
            "shares": [0.0, 0.499992, 0.099995, 0.100009, 0.100003, 0.061635, 0.138365],
        },
        "amount_percentile_permille": {
            "first_layer_input": 2.9909, "missing": 0.0,
            "edges": [-1.0, 0.0, 95.0, 333.0, 500.0, 666.0, 846.0, 1000.0],
            "shares": [0.0, 0.209593, 0.190274, 0.099115, 0.082756, 0.114057, 0.103391, 0.038628, 0.162186],
        },
        "bene_fan_in_30d": {
            "first_layer_input": 2.9231, "missing": 0.0,
            "edges": [1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 69.0, 187.0],
            "shares": [0.0, 0.222589, 0.15547, 0.100754, 0.117659, 0.08947, 0.113919, 0.099251, 0.100888],
        },
        "forward_share_permille": {
            "first_layer_input": 2.8622, "missing": 0.0,
            "edges": [0.0, 56.0, 204.0, 425.0, 713.0],
            "shares": [0.0, 0.599584, 0.100156, 0.100053, 0.100117, 0.100091],
        },
        "cross_border": {
            "first_layer_input": 2.782, "missing": 0.0,
            "edges": [0.0, 1.0],
            "shares": [0.0, 0.681633, 0.318367],
        },
        "orig_count_1h": {
            "first_layer_input": 2.6774, "missing": 0.0,
            "edges": [1.0, 2.0],
            "shares": [0.0, 0.89821, 0.10179],
        },
    },
}

MAIN_FEATURES: tuple[str, ...] = tuple(REFERENCE.get("features", {}))


def decile_bins(values: np.ndarray, bins: int = _BINS) -> dict[str, Any]:
    """Edges at the quantiles ``1/bins .. (bins-1)/bins`` of the present values (distinct, 6
    decimals), each bin's share of all values, and the share missing (NaN)."""
    values = np.asarray(values, dtype=np.float64)
    present = values[~np.isnan(values)]
    if not len(present):
        return {"edges": [], "shares": [0.0], "missing": 1.0}
    inner = sorted({round(float(q), 6) for q in np.quantile(present, np.arange(1, bins) / bins)})
    counts = np.bincount(np.searchsorted(np.array(inner), present, side="right"), minlength=len(inner) + 1)
    n = len(values)
    return {"edges": inner, "shares": [round(float(c) / n, 6) for c in counts],
            "missing": round(float(n - len(present)) / n, 6)}


def main_features(model: Any, rows: np.ndarray, n: int = N_MAIN) -> list[tuple[str, float]]:
    """The ``n`` features carrying most of the first layer's input on ``rows`` (the mean of
    ``|z_j| * ||W1[j]||``), most first, with that mean."""
    from inference.model import preprocess

    w1 = np.asarray(model.layers[0][0], dtype=np.float64)
    reach = np.linalg.norm(w1, axis=1)
    carried = np.zeros(len(reach))
    for i in range(0, len(rows), 65_536):  # the standardised rows a slice at a time
        z = np.asarray(preprocess(model, rows[i:i + 65_536]), dtype=np.float64)
        carried += np.abs(z).sum(axis=0)
    carried = carried / max(len(rows), 1) * reach
    order = np.argsort(-carried, kind="stable")[:n]
    return [(model.feature_names[j], round(float(carried[j]), 4)) for j in order]


def _training_normal_rows() -> tuple[np.ndarray, dict[str, Any]]:
    """The normal payments' rows of the training sets ``inference.train.train`` builds under the
    shipped card's settings, in its order, and that card."""
    from inference.model import ModelFiles
    from inference.precision_bounds import train_config
    from inference.simulate import simulate
    from inference.train import build_rows, training_configs

    card = ModelFiles.open().card
    cfg = train_config(card)  # the settings the card states
    parts = []
    for c in training_configs(cfg):
        rows, labels, _ = build_rows(simulate(c))
        parts.append(rows[labels == 0])
    return np.vstack(parts), card


def build() -> dict[str, Any]:
    """``REFERENCE`` rebuilt from the training simulation (about two minutes); ``ValueError``
    when the model's scores on the rebuilt payments do not give the card's score reference."""
    from inference.model import ModelFiles, forward, load_npz
    from inference.train import drift_reference, same_drift_reference

    rows, card = _training_normal_rows()
    model = load_npz(ModelFiles.open().weights_path)
    if not same_drift_reference(drift_reference(forward(model, rows)), card.get("drift_reference")):
        raise ValueError("the rebuilt training payments do not give the model card's score reference: "
                         "the simulator or the features changed since the model was trained")
    ranked = main_features(model, rows)
    names = list(model.feature_names)
    return {
        "model_sha256": card["model_sha256"],
        "payments": len(rows),
        "features": {name: {"first_layer_input": carried, **decile_bins(rows[:, names.index(name)])}
                     for name, carried in ranked},
    }


def reference_for(model_sha256: str) -> dict[str, Any] | None:
    """The feature reference when the runtime scores with the model it was built for, else None
    (another model learned from other payments)."""
    if not REFERENCE or REFERENCE.get("model_sha256") != model_sha256:
        return None
    return REFERENCE


def main() -> int:
    built = build()
    print(orjson.dumps(built, option=orjson.OPT_INDENT_2).decode())
    same = built == REFERENCE
    print("matches REFERENCE" if same else "differs from REFERENCE", file=sys.stderr)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
