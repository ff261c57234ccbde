"""Numbers in fixed units: what a ``sealtrail.decision/4`` record (and each later one) holds for floats.

A version 4 record states each feature value as an integer count of ``10**-digits`` (the
column's digits, ``inference.schema.feature_digits``) and the score as an integer count of
millionths (``score_ppm``). The pipeline rounds its feature rows and scores to those units
*before* the model, the rules and the account risk read them, so the numbers a decision was made
on are exactly the numbers its record states: ``scaled / 10**digits``, one correctly rounded
IEEE 754 division, the same float64 on any machine and in any language that has one.

Why integers: their RFC 8785 form is the integer's decimal digits, with none of the float
formatting rules (shortest round trip, exponent ranges, ``-0``) that make a float record's hash
depend on an encoder's float printing.

Range: a scaled value is kept within +-2**50 (``LIMIT``), beyond which it is clipped: 11
trillion dollars to the cent, far beyond any payment or sum of payments. Within that range the
integer is recovered exactly from the decoded float (``round(value * 10**digits)``): the two
roundings err by at most ``|scaled| * 2**-52``, under a quarter.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.schema import SCORE_DIGITS

__all__ = ["FIXED_SCHEMA", "FIXED_SCHEMAS", "LIMIT", "MAX_DIGITS", "SCORE_SCALE", "body_score", "decode",
           "decode_score", "quantise_rows", "quantise_scores", "scaled_row", "scaled_score"]

FIXED_SCHEMA = "sealtrail.decision/4"  # the first decision record version that holds these numbers
# every version that does (5: and screening; 6: and the precision the score was computed at; 7: and
# screening stopped at its budget)
FIXED_SCHEMAS = (FIXED_SCHEMA, "sealtrail.decision/5", "sealtrail.decision/6", "sealtrail.decision/7")
LIMIT: int = 2**50
MAX_DIGITS = 15  # the most decimal digits a column may keep (10**15 is exact in float64)
SCORE_SCALE: int = 10**SCORE_DIGITS

F64 = np.float64


def quantise_rows(rows: npt.NDArray[F64], digits: Sequence[int]
                  ) -> tuple[npt.NDArray[F64], npt.NDArray[np.int64]]:
    """``rows`` in the fixed units of ``digits`` (one per column): the values as the record
    states them (NaN stays NaN) and the integers it writes (0 where the value is NaN)."""
    scale = _scale(tuple(digits))
    nan = np.isnan(rows)
    with np.errstate(over="ignore"):  # a value beyond float64 in these units is clipped like any other
        x = np.where(nan, 0.0, rows) * scale
        np.minimum(x, LIMIT, out=x)  # np.clip's wrapper costs more than both on a batch of one
        np.maximum(x, -LIMIT, out=x)
        scaled = np.rint(x).astype(np.int64)
    values = scaled.astype(F64) / scale  # float64(int) is exact within LIMIT; one rounding
    values[nan] = math.nan
    return values, scaled


@functools.lru_cache(maxsize=16)
def _scale(digits: tuple[int, ...]) -> npt.NDArray[F64]:
    scale = np.array([10.0**d for d in digits], dtype=F64)
    scale.flags.writeable = False
    return scale


def quantise_scores(scores: npt.NDArray[F64]) -> tuple[npt.NDArray[F64], npt.NDArray[np.int64]]:
    """Scores in millionths, within 0..1: as the record states them (NaN stays NaN) and the
    integers."""
    values, scaled = quantise_rows(np.clip(scores, 0.0, 1.0)[:, None], (SCORE_DIGITS,))
    return values[:, 0], scaled[:, 0]


def decode(scaled: Sequence[int | None], digits: Sequence[int]) -> list[float]:
    """The values a record's integers stand for (``null`` as NaN); ValueError names a value that
    is not an integer within range, or a length that is not the schema's."""
    if len(scaled) != len(digits):
        raise ValueError(f"{len(scaled)} scaled values for {len(digits)} columns")
    out: list[float] = []
    for i, (v, d) in enumerate(zip(scaled, digits, strict=True)):
        if type(d) is not int or not 0 <= d <= MAX_DIGITS:
            raise ValueError(f"digits {i} is {d!r}, not an integer from 0 to {MAX_DIGITS}")
        if v is None:
            out.append(math.nan)
        elif type(v) is not int or not -LIMIT <= v <= LIMIT:
            raise ValueError(f"scaled value {i} is {v!r}, not an integer within +-2**50")
        else:
            out.append(v / 10**d)
    return out


def decode_score(ppm: object) -> float:
    """A record's ``score_ppm`` as the score (NaN for ``null``); ValueError if not 0..10**6."""
    if ppm is None:
        return math.nan
    if isinstance(ppm, bool) or not isinstance(ppm, int) or not 0 <= ppm <= SCORE_SCALE:
        raise ValueError(f"score_ppm is {ppm!r}, not an integer from 0 to {SCORE_SCALE}")
    return int(ppm) / SCORE_SCALE  # int(): an int subclass decodes as its value


def scaled_row(values: Sequence[float], digits: Sequence[int]) -> list[int | None]:
    """The integers of decoded ``values`` (``None`` for NaN): the inverse of ``decode``."""
    return [None if math.isnan(v) else round(v * 10**d) for v, d in zip(values, digits, strict=True)]


def scaled_score(score: float) -> int | None:
    """The ``score_ppm`` of a decoded score (``None`` for NaN)."""
    return None if math.isnan(score) else round(score * SCORE_SCALE)


def body_score(body: Mapping[str, Any]) -> float | None:
    """The score a decision body of any version records (None: not scored): ``score_ppm`` of a
    version 4 body, ``score`` of an earlier one. ValueError where ``score_ppm`` is not 0..10**6,
    TypeError where a ``score`` is not a number."""
    if body.get("schema") in FIXED_SCHEMAS:
        got = decode_score(body.get("score_ppm"))
        return None if got != got else got
    score = body.get("score")
    if score is None:
        return None
    if type(score) not in (int, float):
        raise TypeError("score is not a number")
    return float(score)
