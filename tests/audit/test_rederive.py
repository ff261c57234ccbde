"""Re-derivation's own arithmetic: a feature value put in a record's fixed units one at a time is
exactly what the pipeline's batch rounding writes (``audit.decide.fixed_point.quantise_rows``)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.bundle.rederive import _fixed
from audit.decide.fixed_point import LIMIT, quantise_rows

_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(-10**12, 10**12).map(lambda i: i / 200),  # halves and cents: the ties
                    st.sampled_from([0.5, 1.5, 2.5, -0.5, -2.5, 0.005, 1e300, -1e300, 2.0**50, -0.0]))


@settings(max_examples=2000, deadline=None)
@given(value=_FLOATS, digits=st.integers(0, 15))
def test_one_value_in_fixed_units_is_what_the_batch_rounding_writes(value: float, digits: int) -> None:
    _, scaled = quantise_rows(np.array([[value]], dtype=np.float64), (digits,))
    want = None if math.isnan(value) else int(scaled[0, 0])
    got = _fixed(value, 10.0**digits)
    assert got == want
    assert got is None or -LIMIT <= got <= LIMIT
