"""Integer stand-ins for the real-valued parts of the graph features, so every CPU gives the same bits.

- ``log2_q8(x)``: log2 of a positive integer in Q8 (units of 1/256), from the top nine bits of
  ``x``: ``256 * n + L[m]`` where ``n = floor(log2 x)``, ``m`` is ``x`` scaled to nine bits
  (``x >> (n - 8)`` or ``x << (8 - n)``, 256 <= m < 512, truncating the bits below) and
  ``L[m] = floor(256 * log2(m / 256))``. ``L`` is derived exactly at import, by squaring the
  rational ``m / 256`` eight times (each square at or above 2 gives a 1 bit), never from libm.
  It is never above the true log2 and less than 2.45/256 below it (the floored table costs under
  1/256, the truncated mantissa under 256 * log2(1 + 1/256) = 1.44 of them).
- ``ratio_q16(num, den, cap)``: ``floor(num * 65536 / den)``, at most ``cap``; 0 when ``den`` is 0.
- ``mid_rank_permille(sorted, x)``: ``floor(1000 * (2 * below + equal) / (2 * n))``, the mid-rank
  percentile of ``x`` among ``n`` sorted integers, in thousandths.
- ``ema_step_q16``: a running mean over periods, ``e + floor(((c << 16) - e) / 4)`` per period (the
  ``sealtrail.graph/1`` usual-counterparty counts that ``inference.graph.counted`` re-derives).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

__all__ = ["LOG2_TABLE", "Q16", "ema_step_q16", "log2_q8", "mid_rank_permille", "ratio_q16"]

Q16 = 1 << 16


def _log2_frac_bits(m: int) -> int:
    """floor(256 * log2(m / 256)) for 256 <= m < 512, exactly: num / den is m / 256 squared."""
    num, den = m, 256
    bits = 0
    for _ in range(8):
        num, den = num * num, den * den
        bits <<= 1
        if num >= 2 * den:
            bits |= 1
            den *= 2
    return bits


LOG2_TABLE: tuple[int, ...] = tuple(_log2_frac_bits(m) for m in range(256, 512))


def log2_q8(x: int) -> int:
    """log2(x) in units of 1/256 for an integer x >= 1 (see the module's definition)."""
    n = x.bit_length() - 1
    m = x >> (n - 8) if n >= 8 else x << (8 - n)
    return 256 * n + LOG2_TABLE[m - 256]


def ratio_q16(num: int, den: int, cap: int) -> int:
    """num / den in Q16, floored and capped at ``cap``; 0 when den is 0."""
    if den <= 0:
        return 0
    r = (num << 16) // den
    return cap if r > cap else r


def mid_rank_permille(values: Sequence[int], x: int) -> int:
    """Where x falls among the sorted ``values``, in thousandths (mid-rank); -1 for none."""
    n = len(values)
    if not n:
        return -1
    below = bisect_left(values, x)
    equal = bisect_right(values, x, below) - below
    return (1000 * (2 * below + equal)) // (2 * n)


def ema_step_q16(ema: int, count: int) -> int:
    """One period of the running mean: a quarter of the way from ``ema`` towards ``count`` (Q16)."""
    return ema + ((count << 16) - ema) // 4
