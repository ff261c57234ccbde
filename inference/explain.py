"""Why the model scored a payment as it did: feature attributions and the reason codes an officer reads.

``explain(model, rows)`` attributes each score to the model's inputs by **integrated gradients**
(Sundararajan, Taly and Yan, *Axiomatic Attribution for Deep Networks*, ICML 2017) with a fixed
baseline and a fixed number of steps, so the same model and row give the same attributions on
every machine up to float rounding:

- the path runs in the model's standardised input space ``z`` (after the missing-value, log and
  scale steps of ``inference.model.preprocess``), from the baseline ``z = 0`` — the training
  mean of every column, an ordinary payment — to the row's ``z``; a column the model does not
  read (scale 0) has ``z = 0`` and gets no attribution;
- the gradient of the score (the sigmoid output, not the logit) is averaged over ``STEPS``
  midpoints of the path and multiplied by ``z``: the attributions of a row add up to its score
  minus the baseline's score, within the midpoint rule's error (a test checks the sum);
- arithmetic is float64 numpy on the float32 weights, independent of any backend.

``reasons(names, row, attributions)`` groups the attributions of related columns into reason
codes (``REASONS``: amount against the account's history, temporal cycle, pass-through, fan-in,
fan-out, ...), keeps those that raise the score by at least ``MIN_CONTRIBUTION``, at most
``MAX_REASONS`` of them, largest first, and words each from the row's own values ("3.4x this
account's usual amount", "money returned to the sender in 3 hops"). The codes and their order
come from attributions rounded to ``ATTRIBUTION_QUANTUM`` (ties by code order) and the text from
the exact feature values, so a verifier that re-runs the model reproduces them exactly unless an
attribution sits on a rounding boundary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference.model import MlpModel, preprocess

__all__ = ["ATTRIBUTION_QUANTUM", "MAX_REASONS", "MIN_CONTRIBUTION", "REASONS", "STEPS", "Reason", "explain",
           "reasons"]

STEPS = 32  # midpoints on the path from the baseline to the row
ATTRIBUTION_QUANTUM = 1e-3  # attributions are ranked after rounding to this
MIN_CONTRIBUTION = 0.02  # a reason raises the score by at least this much
MAX_REASONS = 3

F64 = np.float64
Values = dict[str, float]


@dataclass(frozen=True)
class Reason:
    """One reason code: what it is, how much it raised the score, and its words for an officer."""

    code: str
    contribution: float  # the summed attributions of its columns, rounded to ATTRIBUTION_QUANTUM
    text: str


def explain(model: MlpModel, rows: npt.ArrayLike, steps: int = STEPS) -> npt.NDArray[np.float64]:
    """Integrated-gradient attributions, shape (N, model.n_features), of the model's score for each
    row (the module docstring states the method)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    z = preprocess(model, rows).astype(F64)
    n, d = z.shape
    layers = [(w.astype(F64), b.astype(F64)) for w, b in model.layers]
    alphas = (np.arange(steps, dtype=F64) + 0.5) / steps
    out = np.empty_like(z)
    chunk = max(1, 8192 // steps)  # rows a pass takes: every step of them in one product
    for lo in range(0, n, chunk):
        zc = z[lo:lo + chunk]
        h = (alphas[:, None, None] * zc[None]).reshape(-1, d)  # step-major: step k of each row
        pre = []
        for i, (w, b) in enumerate(layers):
            a = h @ w + b
            pre.append(a)
            h = np.maximum(a, 0.0) if i < len(layers) - 1 else a
        s = 1.0 / (1.0 + np.exp(-np.clip(h[:, 0], -60.0, 60.0)))
        delta = (s * (1.0 - s))[:, None]  # d score / d logit
        for i in range(len(layers) - 1, -1, -1):
            delta = delta @ layers[i][0].T
            if i:
                delta = delta * (pre[i - 1] > 0)
        out[lo:lo + chunk] = zc * delta.reshape(steps, len(zc), d).mean(axis=0)
    return out


def _q(x: float) -> float:
    return round(x / ATTRIBUTION_QUANTUM) * ATTRIBUTION_QUANTUM


def _n(v: Values, name: str) -> int:
    x = v.get(name, math.nan)
    return int(x) if math.isfinite(x) else 0


def _amount_text(v: Values) -> str:
    ratio = 2 ** (v.get("amount_log2_ratio_q8", 0.0) / 256)
    if v.get("amount_history_n", 0.0) <= 0:
        return "the first payment this account sends in 30 days"
    if ratio >= 1:
        return f"{ratio:.1f}x this account's usual amount (the median of its payments in 30 days)"
    return f"{1 / ratio:.1f}x below this account's usual amount"


def _share(q16: float) -> str:
    share = q16 / 65536 if math.isfinite(q16) else 0.0
    return "4x or more" if share >= 4 else f"{share:.0%}"


def _pass_text(v: Values) -> str:
    day, week = v.get("pass_through_24h_q16", 0.0), v.get("pass_through_7d_q16", 0.0)
    return f"the sender paid on {_share(day)} of what it received in 24 hours ({_share(week)} over 7 days)"


def _dormancy_text(v: Values) -> str:
    days = _n(v, "orig_dormancy_days")
    if days < 0:
        return "the sender had no payment in or out in the last 30 days"
    return f"the sender's first payment after {days} quiet days ({_n(v, 'orig_activity_24h')} in 24 hours)"


# code -> (the columns it groups, how it reads); order is the tie-break
REASONS: tuple[tuple[str, tuple[str, ...], Callable[[Values], str]], ...] = (
    ("TEMPORAL_CYCLE", ("cycle_len", "cycle_count", "cycle_truncated"),
     lambda v: f"money returned to the sender in {_n(v, 'cycle_len')} hops, each later than the last"
               f" ({_n(v, 'cycle_count')} such paths)"),
    ("PASS_THROUGH", ("pass_through_24h_q16", "pass_through_7d_q16", "orig_in_out_24h", "bene_in_out_24h"),
     _pass_text),
    ("SCATTER_GATHER", ("scatter_gather",),
     lambda v: f"{_n(v, 'scatter_gather')} different accounts paid the sender in the 3 days before"),
    ("FAN_OUT", ("orig_fan_out_1d", "orig_fan_out_7d", "orig_fan_out_30d",
                 "orig_distinct_counterparties_24h"),
     lambda v: f"the sender paid {_n(v, 'orig_fan_out_1d')} different accounts in 24 hours "
               f"({_n(v, 'orig_fan_out_30d')} in 30 days)"),
    ("FAN_IN", ("orig_fan_in_1d", "orig_fan_in_7d", "orig_fan_in_30d", "bene_fan_in_1d", "bene_fan_in_7d",
                "bene_fan_in_30d", "bene_distinct_counterparties_24h"),
     lambda v: f"the beneficiary was paid by {_n(v, 'bene_fan_in_1d')} different accounts in 24 hours "
               f"({_n(v, 'bene_fan_in_30d')} in 30 days)"),
    ("AMOUNT_VS_HISTORY", ("amount_log2_ratio_q8", "amount_percentile_permille", "amount_history_n"),
     _amount_text),
    ("DORMANT_THEN_ACTIVE", ("orig_dormancy_days", "orig_activity_24h"), _dormancy_text),
    ("STRUCTURING_BAND", ("orig_near_threshold_count_24h", "bene_near_threshold_count_24h"),
     lambda v: f"{max(_n(v, 'orig_near_threshold_count_24h'), _n(v, 'bene_near_threshold_count_24h'))} "
               "payments of USD 8,000 to 9,999 in 24 hours"),
    ("VELOCITY", ("orig_count_1h", "orig_count_24h", "orig_count_7d", "bene_count_1h", "bene_count_24h",
                  "bene_count_7d"),
     lambda v: f"the sender made {_n(v, 'orig_count_24h')} payments in 24 hours "
               f"({_n(v, 'orig_count_7d')} in 7 days)"),
    ("NEW_COUNTERPARTY", ("new_counterparty",),
     lambda v: "the sender has not paid this beneficiary in the last 7 days"),
    ("HIGH_RISK_JURISDICTION", ("orig_country_risk", "bene_country_risk", "cross_border"),
     lambda v: "a party in a jurisdiction on a FATF list" if max(
         v.get("orig_country_risk", 0.0) or 0.0, v.get("bene_country_risk", 0.0) or 0.0) > 0
     else "a cross-border payment"),
    ("INCOMPLETE_PARTY_DATA", ("orig_name_present", "orig_account_present", "orig_address_or_id_present",
                               "bene_name_present", "bene_account_present"),
     lambda v: "originator or beneficiary information is incomplete (FATF Recommendation 16)"),
    ("ROUND_AMOUNT", ("round_amount",), lambda v: "a round amount"),
)


def reasons(names: Sequence[str], row: Sequence[float] | npt.NDArray[np.float64],
            attributions: Sequence[float] | npt.NDArray[np.float64]) -> list[Reason]:
    """The reason codes of one row (see the module): codes whose columns together raise the score by
    at least ``MIN_CONTRIBUTION``, at most ``MAX_REASONS``, largest first, ties in ``REASONS`` order."""
    index = {n: i for i, n in enumerate(names)}
    values = {n: float(row[i]) for n, i in index.items()}
    found: list[tuple[float, int, Reason]] = []
    for order, (code, columns, words) in enumerate(REASONS):
        held = [index[c] for c in columns if c in index]
        if not held:
            continue
        contribution = _q(math.fsum(float(attributions[i]) for i in held))
        if contribution >= MIN_CONTRIBUTION:
            found.append((-contribution, order, Reason(code, contribution, words(values))))
    found.sort(key=lambda f: (f[0], f[1]))
    return [r for _, _, r in found[:MAX_REASONS]]
