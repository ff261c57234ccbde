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
- the products run in float32 on the model's weights, in the row blocks of the numpy reference
  (``inference.model.dense``), and the mean over the path and the product with ``z`` in float64:
  about 30 us a row on one CPU core at batch 1,024; another machine's BLAS may differ in the
  last float32 bits, far below the tolerance a verifier allows (``check_reasons``).

``reasons(names, row, attributions)`` groups the attributions of related columns into reason
codes (``REASONS``: amount against the account's history, temporal cycle, pass-through, fan-in,
fan-out, ...), keeps those that raise the score by at least ``MIN_CONTRIBUTION``, at most
``MAX_REASONS`` of them, largest first, and words each from the row's own values ("3.4x this
account's usual amount", "money returned to the sender in 3 hops"). The codes and their order
come from attributions rounded to ``ATTRIBUTION_QUANTUM`` (ties by code order) and the text from
the exact feature values, so a verifier that re-runs the model reproduces them exactly unless an
attribution sits on a rounding boundary; ``check_reasons`` is that verifier's test, which accepts
codes a sum within the stated tolerance of the recomputed one would give, and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from inference.model import MlpModel, dense, preprocess

__all__ = ["ATTRIBUTION_QUANTUM", "MAX_REASONS", "MIN_CONTRIBUTION", "REASONS", "STEPS", "Reason",
           "check_reasons", "explain", "reasons"]

STEPS = 32  # midpoints on the path from the baseline to the row
ATTRIBUTION_QUANTUM = 1e-3  # attributions are ranked after rounding to this
MIN_CONTRIBUTION = 0.02  # a reason raises the score by at least this much
MAX_REASONS = 3

F32, F64 = np.float32, np.float64
Values = dict[str, float]


@dataclass(frozen=True)
class Reason:
    """One reason code: what it is, how much it raised the score, and its words for an officer."""

    code: str
    contribution_milli: int  # the summed attributions of its columns in thousandths of the score
    text: str

    @property
    def contribution(self) -> float:
        """The summed attributions of its columns, rounded to ``ATTRIBUTION_QUANTUM``."""
        return self.contribution_milli * ATTRIBUTION_QUANTUM


def explain(model: MlpModel, rows: npt.ArrayLike, steps: int = STEPS) -> npt.NDArray[np.float64]:
    """Integrated-gradient attributions, shape (N, model.n_features), of the model's score for each
    row (the module docstring states the method)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    z = preprocess(model, rows)
    n, d = z.shape
    layers = model.layers
    back = [(np.ascontiguousarray(w.T), np.zeros(w.shape[0], F32)) for w, _ in layers]
    alphas = ((np.arange(steps, dtype=F64) + 0.5) / steps).astype(F32)
    out = np.empty((n, d), F64)
    chunk = max(1, 4096 // steps)  # rows a pass takes: every step of them in one product
    for lo in range(0, n, chunk):
        zc = z[lo:lo + chunk]
        h = (alphas[:, None, None] * zc[None]).reshape(-1, d)  # step-major: step k of each row
        pre = []
        for i, (w, b) in enumerate(layers):
            a = dense(h, w, b)
            pre.append(a)
            h = np.maximum(a, F32(0)) if i < len(layers) - 1 else a
        s = 1.0 / (1.0 + np.exp(-np.clip(h[:, 0].astype(F64), -60.0, 60.0)))
        delta = (s * (1.0 - s))[:, None].astype(F32)  # d score / d logit
        for i in range(len(layers) - 1, -1, -1):
            delta = dense(delta, *back[i])
            if i:
                delta *= pre[i - 1] > 0
        grad = delta.reshape(steps, len(zc), d).astype(F64).mean(axis=0)
        out[lo:lo + chunk] = zc.astype(F64) * grad
    return out


def _milli(x: float) -> int:
    return round(x / ATTRIBUTION_QUANTUM)  # half to even


def _n(v: Values, name: str) -> int:
    x = v.get(name, math.nan)
    return int(x) if math.isfinite(x) else 0


def _amount_text(v: Values) -> str:
    ratio = 2 ** (v.get("amount_log2_ratio_q8", 0.0) / 256)
    n = _n(v, "amount_history_n")
    if n <= 0:
        return "the first payment this account sends in 30 days"
    share = _n(v, "amount_percentile_permille") / 10
    payments = "1 payment" if n == 1 else f"{n} payments"
    history = f"the median of its {payments} in 30 days; percentile {share:.0f} among them"
    if ratio >= 1:
        return f"{ratio:.1f}x this account's usual amount ({history})"
    return f"{1 / ratio:.1f}x below this account's usual amount ({history})"


def _share(q16: float) -> str:
    share = q16 / 65536 if math.isfinite(q16) else 0.0
    return "4x or more" if share >= 4 else f"{share:.0%}"


def _pass_text(v: Values) -> str:
    day, week = v.get("pass_through_24h_q16", 0.0), v.get("pass_through_7d_q16", 0.0)
    return f"the sender paid on {_share(day)} of what it received in 24 hours ({_share(week)} over 7 days)"


def _forward_text(v: Values) -> str:
    hours = _n(v, "forward_delay_hours")
    if hours < 0 or not math.isfinite(v.get("forward_delay_hours", math.nan)):
        return "the sender received no amount as large in the 7 days before"
    share = _n(v, "forward_share_permille")
    after = "within the hour" if hours < 1 else "1 hour" if hours == 1 else f"{hours} hours"
    when = after if hours < 1 else f"{after} after it came in"
    part = "less than 0.1%" if share <= 0 else f"{share / 10:.1f}%"
    text = f"the sender passed on {part} of an amount it received, {when}"
    n = _n(v, "forward_source_fan_out")  # features/6 and later; 0 where a record has no such column
    if n > 0:
        text += f", from an account that paid {'1 account' if n == 1 else f'{n} accounts'} in 30 days"
    return text


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
    ("FORWARDED_AMOUNT", ("forward_share_permille", "forward_delay_hours", "forward_source_fan_out"),
     _forward_text),
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


@lru_cache(maxsize=16)
def _layout(names: tuple[str, ...]) -> tuple[tuple[str, tuple[int, ...], Callable[[Values], str]], ...]:
    """Each reason code whose columns ``names`` holds: its code, those columns' indices, its words."""
    index = {n: i for i, n in enumerate(names)}
    return tuple((code, tuple(index[c] for c in columns if c in index), words)
                 for code, columns, words in REASONS if any(c in index for c in columns))


def _groups(names: Sequence[str], row: Sequence[float] | npt.NDArray[np.float64],
            attributions: Sequence[float] | npt.NDArray[np.float64],
            ) -> list[tuple[str, float, Callable[[Values], str]]]:
    """Each reason code whose columns ``names`` holds: its code, summed attribution and words."""
    a = attributions.tolist() if isinstance(attributions, np.ndarray) else list(attributions)
    return [(code, math.fsum(a[i] for i in held), words) for code, held, words in _layout(tuple(names))]


def _values(names: Sequence[str], row: Sequence[float] | npt.NDArray[np.float64]) -> Values:
    values = row.tolist() if isinstance(row, np.ndarray) else [float(v) for v in row]
    return dict(zip(names, values, strict=False))


def reasons(names: Sequence[str], row: Sequence[float] | npt.NDArray[np.float64],
            attributions: Sequence[float] | npt.NDArray[np.float64]) -> list[Reason]:
    """The reason codes of one row (see the module): codes whose columns together raise the score by
    at least ``MIN_CONTRIBUTION``, at most ``MAX_REASONS``, largest first, ties in ``REASONS`` order."""
    floor = _milli(MIN_CONTRIBUTION)
    found: list[tuple[int, int, str, Callable[[Values], str]]] = []
    for order, (code, total, words) in enumerate(_groups(names, row, attributions)):
        milli = _milli(total)
        if milli >= floor:
            found.append((-milli, order, code, words))
    if not found:
        return []
    found.sort(key=lambda f: (f[0], f[1]))
    values = _values(names, row)
    return [Reason(code, -neg, words(values)) for neg, _, code, words in found[:MAX_REASONS]]


def check_reasons(names: Sequence[str], row: Sequence[float] | npt.NDArray[np.float64],
                  attributions: Sequence[float] | npt.NDArray[np.float64], recorded: Sequence[Reason],
                  tolerance: float) -> str | None:
    """Why ``recorded`` cannot be the reason codes of ``row`` given these ``attributions`` (computed
    again, perhaps on another machine), or None when it can.

    ``recorded`` equal to ``reasons(...)`` passes. Otherwise an attribution computed elsewhere may
    differ by up to ``tolerance`` from the one that was recorded, which moves a sum across a
    rounding boundary, across ``MIN_CONTRIBUTION`` or past another code: ``recorded`` still passes
    when it is what ``reasons`` gives for some sums each within ``tolerance`` of these (checked per
    code, with the exact text and the order its own contributions state)."""
    if list(recorded) == reasons(names, row, attributions):
        return None
    values = _values(names, row)
    groups = {code: (order, total, words)
              for order, (code, total, words) in enumerate(_groups(names, row, attributions))}
    half = ATTRIBUTION_QUANTUM / 2 + tolerance  # how far a recorded sum may be from this one
    floor = _milli(MIN_CONTRIBUTION)
    if len(recorded) > MAX_REASONS:
        return f"{len(recorded)} reason codes, more than {MAX_REASONS}"
    for r in recorded:
        if r.code not in groups:
            return f"reason code {r.code!r} is not one this model's columns can give"
        _, total, words = groups[r.code]
        if r.contribution_milli < floor:
            return f"{r.code} contributes {r.contribution_milli} milli, below the {floor} a reason needs"
        if abs(total - r.contribution) > half:
            return (f"{r.code} is recorded as {r.contribution_milli} milli; the attributions give "
                    f"{total * 1000:.3f} milli (tolerance {half * 1000:.3f})")
        if r.text != words(values):
            return f"{r.code} reads {r.text!r}; the feature values read {words(values)!r}"
    keys = [(-r.contribution_milli, groups[r.code][0]) for r in recorded]
    if keys != sorted(keys) or len({r.code for r in recorded}) != len(recorded):
        return "reason codes are not in the order of their contributions, or repeat"
    named = {r.code for r in recorded}
    # a code left out must be one that, at the lowest sum within tolerance, another machine could
    # have left out too: below the floor, or (with MAX_REASONS kept) ranked after the last one kept
    full = len(recorded) == MAX_REASONS
    for code, (order, total, _) in groups.items():
        lowest = _milli(total - tolerance)
        if code not in named and lowest >= floor and (not full or (-lowest, order) < keys[-1]):
            return f"{code} contributes {total * 1000:.3f} milli and is not among the reason codes"
    return None
