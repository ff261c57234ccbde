"""Velocity windows against a brute-force reference that scans the whole history."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.errors import FeatureError
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


# -- taking back a stretch of observations (a batch whose commit failed) ---------------------------

gaps = st.one_of(st.integers(-30 * HOUR_US, 30 * HOUR_US), st.sampled_from([3 * DAY, 8 * DAY]))  # late, idle
amounts = st.one_of(st.none(), st.integers(0, 1_200_000), st.integers(800_000, 999_999))  # near the threshold
late_steps = st.lists(st.tuples(accounts, accounts, gaps, amounts), max_size=30)


def _run(state: VelocityState, t: int, plan: list[tuple[str | None, str | None, int, int | None]],
         ) -> tuple[int, list[list[float]]]:
    out = []
    for orig, bene, gap, cents in plan:
        t += gap
        out.append(state.observe(orig, bene, t, cents))
    return t, out


def _same(a: list[list[float]], b: list[list[float]]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for ra, rb in zip(a, b, strict=True)
               for x, y in zip(ra, rb, strict=True))


@settings(max_examples=300, deadline=None)
@given(late_steps, late_steps, late_steps, st.integers(0, 30), st.booleans())
def test_a_rolled_back_stretch_leaves_exactly_the_state_that_never_saw_it(
        before: list[tuple[str | None, str | None, int, int | None]],
        undone: list[tuple[str | None, str | None, int, int | None]],
        after: list[tuple[str | None, str | None, int, int | None]], split: int, keyed: bool) -> None:
    """Late events, evictions, sweeps of idle accounts and new counterparties inside the stretch:
    after ``rollback`` the state is bit for bit the one that never saw it, and what follows
    gets the same values (the pipeline's recovery from a failed commit)."""
    key = b"k" * 32 if keyed else None
    t0 = 1_800_000_000_000_000
    state, never = VelocityState(key), VelocityState(key)
    t, _ = _run(state, t0, before)
    _run(never, t0, before)
    first = state.begin_journal()
    t1, _ = _run(state, t, undone[:split])
    second = state.begin_journal()  # two batches, both taken back (the second was prepared behind the first)
    _run(state, t1, undone[split:])
    state.end_journal()
    state.rollback([first, second])
    assert state.snapshot() == never.snapshot() and state.watermark == never.watermark
    _, got = _run(state, t, after)
    _, want = _run(never, t, after)
    assert _same(got, want)
    assert state.snapshot() == never.snapshot()


def test_a_journal_is_taken_back_once_and_only_by_its_own_state() -> None:
    state, other = VelocityState(), VelocityState()
    journal = state.begin_journal()
    state.observe("A", "B", 1_800_000_000_000_000, 100)
    with pytest.raises(FeatureError, match="another state"):
        other.rollback([journal])
    state.rollback([journal])
    assert len(state) == 0
    with pytest.raises(FeatureError, match="already rolled back"):
        state.rollback([journal])
