"""Velocity windows against a brute-force reference that scans the whole history."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from inference.velocity import HOUR_US, WINDOWS_US, VelocityState

DAY = 24 * HOUR_US
WEEK = 7 * DAY


def brute(history: list[tuple[str | None, str | None, int, int | None]], orig: str | None,
          bene: str | None, t: int, cents: int | None) -> list[float]:
    """The documented definitions, computed from every event so far (times non-decreasing)."""
    amount = cents or 0
    events = [*history, (orig, bene, t, cents)]

    def side(acct: str | None, sending: bool) -> list[float]:
        if acct is None:
            return [math.nan] * 6
        mine = [(tt, c or 0) for o, b, tt, c in events if (o if sending else b) == acct]
        counts = [float(sum(1 for tt, _ in mine if t - w < tt <= t)) for w in WINDOWS_US]
        sums = [sum(c for tt, c in mine if t - w < tt <= t) / 100 for w in WINDOWS_US]
        return counts + sums

    def distinct(acct: str | None, sending: bool) -> float:
        if acct is None:
            return math.nan
        cps = {(b if sending else o) for o, b, tt, _ in events
               if (o if sending else b) == acct and t - DAY < tt <= t}
        return float(len(cps - {None}))

    def near(acct: str | None, sending: bool) -> float:
        if acct is None:
            return math.nan
        return float(sum(1 for o, b, tt, c in events if (o if sending else b) == acct
                         and t - DAY < tt <= t and 800_000 <= (c or 0) < 1_000_000))

    def in_out(acct: str | None, sending: bool) -> float:
        if acct is None:
            return math.nan
        # the other direction, within 24 h (the current transfer counts only for its own direction)
        other = [tt for o, b, tt, _ in events[:-1] if (b if sending else o) == acct and t - DAY < tt <= t]
        if not sending and orig == acct:
            other.append(t)
        return 1.0 if other else 0.0

    new = math.nan
    if orig is not None and bene is not None:
        seen = any(o == orig and b == bene and tt > t - WEEK for o, b, tt, _ in history)
        new = 0.0 if seen else 1.0
    del amount
    return [*side(orig, True), *side(bene, False), distinct(orig, True), distinct(bene, False),
            near(orig, True), near(bene, False), in_out(orig, True), in_out(bene, False), new]


accounts = st.one_of(st.none(), st.sampled_from(["A", "B", "C", "D"]))
steps = st.lists(st.tuples(accounts, accounts, st.integers(0, 30 * HOUR_US),
                           st.one_of(st.none(), st.integers(0, 1_200_000))), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_velocity_matches_brute_force(plan: list[tuple[str | None, str | None, int, int | None]]) -> None:
    state = VelocityState()
    history: list[tuple[str | None, str | None, int, int | None]] = []
    t = 1_800_000_000_000_000
    for orig, bene, gap, cents in plan:
        t += gap
        got = state.observe(orig, bene, t, cents)
        want = brute(history, orig, bene, t, cents)
        assert len(got) == len(want) == 19
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert (math.isnan(g) and math.isnan(w)) or g == w, (i, got, want)
        history.append((orig, bene, t, cents))
    assert VelocityState.restore(state.snapshot()).snapshot() == state.snapshot()
