"""The lane scheduler (``inference.lanes``): priority order, ceilings and deadlines on a fake clock.

No threads here: the clock is the ``now`` each call is given.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from inference.lanes import LaneQueue, Priority, Ticket

P0, P1, P2 = Priority.P0, Priority.P1, Priority.P2


def items(tickets: Sequence[Ticket[str]]) -> list[str]:
    return [t.item for t in tickets]


# -- Priority ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [("P0", P0), ("p1", P1), (" P2 ", P2)])
def test_priority_parse_accepts_lane_names(text: str, expected: Priority) -> None:
    assert Priority.parse(text) is expected


@pytest.mark.parametrize("text", ["P3", "", "high", "P 1", "0"])
def test_priority_parse_names_the_bad_value(text: str) -> None:
    with pytest.raises(ValueError, match=f"unknown priority {text!r}"):
        Priority.parse(text)


# -- LaneQueue: ordering -----------------------------------------------------------------------


def test_p0_first_even_when_lower_lanes_queued_earlier() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("p2-a", P2, None, now=0.0)
    q.push("p1-a", P1, None, now=0.0)
    q.push("p0-a", P0, None, now=0.001)
    q.push("p1-b", P1, None, now=0.001)
    q.push("p0-b", P0, None, now=0.002)
    q.push("p2-b", P2, None, now=0.002)
    batch, expired = q.take(now=0.003, max_batch=100)
    assert items(batch) == ["p0-a", "p0-b", "p1-a", "p1-b", "p2-a", "p2-b"]
    assert expired == []
    assert len(q) == 0


def test_overdue_p2_is_served_before_fresh_p1_only_past_its_ceiling() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("old-p2", P2, None, now=0.0)
    q.push("fresh-p1", P1, None, now=0.190)
    assert items(q.take(now=0.199, max_batch=1)[0]) == ["fresh-p1"]

    q.push("fresh-p1-2", P1, None, now=0.199)
    assert items(q.take(now=0.2, max_batch=1)[0]) == ["old-p2"]  # waited exactly its ceiling: overdue
    assert items(q.take(now=0.2, max_batch=1)[0]) == ["fresh-p1-2"]


def test_p0_still_precedes_overdue_work() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("old-p2", P2, None, now=0.0)
    q.push("old-p1", P1, None, now=0.0)
    q.push("p0", P0, None, now=1.0)
    assert items(q.take(now=1.0, max_batch=10)[0]) == ["p0", "old-p1", "old-p2"]


def test_overdue_requests_go_oldest_first_across_lanes() -> None:
    q: LaneQueue[str] = LaneQueue()  # P1 overdue 50 ms after enqueue, P2 200 ms after
    q.push("p2@0", P2, None, now=0.0)
    q.push("p1@.10", P1, None, now=0.10)
    q.push("p1@.17", P1, None, now=0.17)
    q.push("p2@.20 (not overdue)", P2, None, now=0.20)
    q.push("p1@.30 (not overdue)", P1, None, now=0.30)
    batch, _ = q.take(now=0.30, max_batch=10)
    assert items(batch) == ["p2@0", "p1@.10", "p1@.17", "p1@.30 (not overdue)", "p2@.20 (not overdue)"]


def test_overdue_tie_goes_to_p1() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("p2", P2, None, now=0.0)
    q.push("p1", P1, None, now=0.0)
    assert items(q.take(now=0.5, max_batch=10)[0]) == ["p1", "p2"]


def test_sustained_p1_overload_does_not_starve_p2() -> None:
    # Three P1 arrive every 10 ms but only two are served: P1 falls ever further behind.
    # The P2 request still goes out as soon as it has waited its 200 ms ceiling.
    q: LaneQueue[str] = LaneQueue()
    q.push("p2", P2, None, now=0.0)
    served_at = None
    for step in range(100):
        now = step * 0.010
        for i in range(3):
            q.push(f"p1-{step}-{i}", P1, None, now=now)
        if "p2" in items(q.take(now=now, max_batch=2)[0]):
            served_at = now
            break
    assert served_at is not None
    assert served_at == pytest.approx(0.2)


def test_max_batch_is_respected_and_the_rest_stays_queued_in_order() -> None:
    q: LaneQueue[str] = LaneQueue()
    for i in range(5):
        q.push(f"p1-{i}", P1, None, now=0.0)
    for i in range(3):
        q.push(f"p0-{i}", P0, None, now=0.0)
    assert items(q.take(now=0.0, max_batch=4)[0]) == ["p0-0", "p0-1", "p0-2", "p1-0"]
    assert len(q) == 4
    assert q.depths() == {P0: 0, P1: 4, P2: 0}
    q.push("p0-late", P0, None, now=0.0)
    assert items(q.take(now=0.0, max_batch=3)[0]) == ["p0-late", "p1-1", "p1-2"]
    assert items(q.take(now=0.0, max_batch=3)[0]) == ["p1-3", "p1-4"]
    assert items(q.take(now=0.0, max_batch=3)[0]) == []


def test_take_refuses_an_empty_batch_size() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        LaneQueue[str]().take(now=0.0, max_batch=0)


def test_ceilings_are_configurable_and_validated() -> None:
    q: LaneQueue[str] = LaneQueue({P2: 0.010})
    assert q.ceilings == {P0: 0.005, P1: 0.050, P2: 0.010}
    q.push("p2", P2, None, now=0.0)
    q.push("p1", P1, None, now=0.005)
    assert items(q.take(now=0.010, max_batch=1)[0]) == ["p2"]
    with pytest.raises(ValueError, match="ceiling"):
        LaneQueue[str]({P1: -0.001})
    with pytest.raises(ValueError, match="ceiling"):
        LaneQueue[str]({P1: float("nan")})


def test_push_refuses_bad_priority_and_nan_deadline() -> None:
    q: LaneQueue[str] = LaneQueue()
    with pytest.raises(ValueError, match="unknown priority 'P7'"):
        q.push("x", "P7", None, now=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        q.push("x", P1, float("nan"), now=0.0)
    assert len(q) == 0


# -- LaneQueue: deadlines ----------------------------------------------------------------------


def test_expired_requests_are_returned_never_batched() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("late-p0", P0, 0.010, now=0.0)
    q.push("ok-p1", P1, 0.100, now=0.0)
    q.push("late-p2", P2, 0.005, now=0.0)
    q.push("no-deadline", P2, None, now=0.0)
    batch, expired = q.take(now=0.020, max_batch=10)
    assert items(batch) == ["ok-p1", "no-deadline"]
    assert items(expired) == ["late-p2", "late-p0"]  # earliest deadline first
    assert all(not t.queued for t in batch + expired)
    assert len(q) == 0


def test_a_deadline_equal_to_now_is_expired() -> None:
    # Documented choice: the deadline is the first instant at which the request is too late.
    q: LaneQueue[str] = LaneQueue()
    q.push("at", P1, 0.5, now=0.0)
    q.push("after", P1, 0.5000001, now=0.0)
    batch, expired = q.take(now=0.5, max_batch=10)
    assert items(expired) == ["at"]
    assert items(batch) == ["after"]


def test_expire_leaves_live_requests_queued_and_updates_depths() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("a", P1, 1.0, now=0.0)
    q.push("b", P1, 2.0, now=0.0)
    q.push("c", P0, 1.5, now=0.0)
    assert q.expire(now=0.9) == []
    assert items(q.expire(now=1.6)) == ["a", "c"]
    assert q.depths() == {P0: 0, P1: 1, P2: 0}
    assert q.depth(P1) == 1
    assert items(q.take(now=1.6, max_batch=10)[0]) == ["b"]


def test_next_wakeup_is_the_earliest_queued_deadline() -> None:
    q: LaneQueue[str] = LaneQueue()
    assert q.next_wakeup() is None
    q.push("none", P1, None, now=0.0)
    assert q.next_wakeup() is None
    q.push("d3", P2, 3.0, now=0.0)
    q.push("d1", P0, 1.0, now=0.0)
    q.push("d2", P1, 2.0, now=0.0)
    assert q.next_wakeup() == 1.0
    q.take(now=0.0, max_batch=1)  # takes d1 (P0): its deadline no longer counts
    assert q.next_wakeup() == 2.0
    assert items(q.expire(now=2.5)) == ["d2"]
    assert q.next_wakeup() == 3.0
    q.take(now=2.5, max_batch=10)
    assert q.next_wakeup() is None


def test_clear_returns_everything_queued_in_dispatch_lane_order() -> None:
    q: LaneQueue[str] = LaneQueue()
    q.push("p2", P2, None, now=0.0)
    q.push("p1", P1, 9.0, now=0.0)
    q.push("p0", P0, None, now=0.0)
    assert items(q.clear()) == ["p0", "p1", "p2"]
    assert len(q) == 0
    assert q.next_wakeup() is None
