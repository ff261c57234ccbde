"""The integer stand-ins for log2, ratios, percentiles and running means."""

from __future__ import annotations

import itertools
import math

import pytest

from inference.graph.fixedpoint import LOG2_TABLE, ema_step_q16, log2_q8, mid_rank_permille, ratio_q16


def test_log2_table_is_the_floor_of_256_log2_and_rises() -> None:
    assert len(LOG2_TABLE) == 256
    assert LOG2_TABLE[0] == 0 and LOG2_TABLE[-1] == 255
    assert all(a <= b for a, b in itertools.pairwise(LOG2_TABLE))
    for m in range(256, 512):  # cross-checked against libm, away from exact boundaries
        exact = 256 * math.log2(m / 256)
        assert LOG2_TABLE[m - 256] == math.floor(exact) or abs(exact - round(exact)) < 1e-9


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 40, 62])
def test_log2_of_a_power_of_two_is_exact(n: int) -> None:
    assert log2_q8(1 << n) == 256 * n


def test_log2_is_less_than_2_45_256ths_below_the_true_value() -> None:
    for x in [*range(1, 5000), 10**6 + 7, 123_456_789, 10**15 + 3]:
        err = math.log2(x) * 256 - log2_q8(x)
        assert -1e-9 <= err < 2.45, x


def test_ratio_is_floored_capped_and_zero_without_a_denominator() -> None:
    assert ratio_q16(1, 3, 1 << 20) == 21_845
    assert ratio_q16(10, 1, 4 << 16) == 4 << 16
    assert ratio_q16(5, 0, 4 << 16) == 0


def test_mid_rank_percentile() -> None:
    assert mid_rank_permille([], 5) == -1
    assert mid_rank_permille([1, 2, 3, 4], 10) == 1000
    assert mid_rank_permille([1, 2, 3, 4], 0) == 0
    assert mid_rank_permille([1, 2, 2, 4], 2) == 500


def test_running_mean_moves_a_quarter_of_the_way() -> None:
    assert ema_step_q16(0, 4) == 1 << 16
    assert ema_step_q16(8 << 16, 0) == 6 << 16
    assert ema_step_q16(5, 0) == 3  # 5 + floor(-5 / 4)
    assert ema_step_q16(1, 0) == 0  # never below zero from a non-negative mean
