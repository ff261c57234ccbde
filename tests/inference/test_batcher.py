"""The dynamic batcher: the pure lane scheduler on a fake clock, then the threaded batcher.

Threads are synchronised with events and futures (every wait has a timeout), never with sleeps.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future

import pytest

from inference.batcher import (
    Batcher,
    BatcherClosedError,
    BatcherError,
    DeadlineExceeded,
    LaneQueue,
    Priority,
    Ticket,
)
from inference.errors import InferenceError

P0, P1, P2 = Priority.P0, Priority.P1, Priority.P2
TIMEOUT = 5.0


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


# -- Batcher -----------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Gate:
    """A batch function that records batches and blocks on a request named "block"."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, batch: list[str]) -> list[str]:
        self.batches.append(list(batch))
        if "block" in batch:
            self.started.set()
            assert self.release.wait(TIMEOUT), "test never released the worker"
        return [f"done:{r}" for r in batch]


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()  # a failing test must not leave a worker blocked


def blocked(batcher: Batcher[str, str], gate: Gate) -> Future[str | DeadlineExceeded]:
    """Occupy the (single) worker until ``gate.release`` is set."""
    fut = batcher.submit("block", P0)
    assert gate.started.wait(TIMEOUT)
    return fut


def test_a_free_worker_dispatches_at_once_without_waiting_to_fill() -> None:
    # The clock never moves: if the batcher waited for a ceiling or a fill, this would hang.
    def double(batch: list[int]) -> list[int]:
        return [x * 2 for x in batch]

    with Batcher(double, clock=FakeClock(), max_batch=64) as batcher:
        assert batcher.submit(21).result(timeout=TIMEOUT) == 42
        assert batcher.submit(5, P2).result(timeout=TIMEOUT) == 10
        stats = batcher.stats()
    assert (stats.batches, stats.dispatched, stats.largest_batch) == (2, 2, 1)


def test_requests_queued_while_the_worker_is_busy_form_one_batch_p0_first(gate: Gate) -> None:
    with Batcher(gate, clock=FakeClock()) as batcher:
        first = blocked(batcher, gate)
        lanes = [P2, P1, P0, P2, P1, P0, P1, P2, P0, P1]
        futs = [batcher.submit(f"{p.value}-{i}", p) for i, p in enumerate(lanes)]
        assert batcher.stats().queued == {P0: 3, P1: 4, P2: 3}
        gate.release.set()
        assert first.result(timeout=TIMEOUT) == "done:block"
        expected = [f"done:{p.value}-{i}" for i, p in enumerate(lanes)]
        assert [f.result(timeout=TIMEOUT) for f in futs] == expected
    assert gate.batches[1] == ["P0-2", "P0-5", "P0-8", "P1-1", "P1-4", "P1-6", "P1-9", "P2-0", "P2-3",
                               "P2-7"]
    assert len(gate.batches) == 2
    stats = batcher.stats()
    assert (stats.batches, stats.dispatched, stats.largest_batch, stats.mean_batch) == (2, 11, 10, 5.5)
    assert stats.batch_sizes == {1: 1, 16: 1}  # power-of-two buckets: 1, and 9..16


def test_p0_submitted_after_p2_work_comes_first_in_the_next_batch(gate: Gate) -> None:
    with Batcher(gate, clock=FakeClock(), max_batch=2) as batcher:
        blocked(batcher, gate)
        low = batcher.submit_many(["a", "b", "c"], P2)
        urgent = batcher.submit("urgent", P0)
        gate.release.set()
        for f in [urgent, *low]:
            f.result(timeout=TIMEOUT)
    assert gate.batches[1:] == [["urgent", "a"], ["b", "c"]]


def test_deadline_passing_while_the_worker_is_busy_fails_safe(gate: Gate) -> None:
    clock = FakeClock()
    with Batcher(gate, clock=clock) as batcher:
        blocked(batcher, gate)
        doomed = batcher.submit("doomed", P2, deadline=clock.now + 0.100)
        keeps = batcher.submit("keeps", P1, deadline=clock.now + 1.0)
        clock.advance(0.150)
        batcher.expire()  # deterministic trigger (the watcher thread may get there first)
        result = doomed.result(timeout=TIMEOUT)  # resolved while the worker is still blocked
        assert isinstance(result, DeadlineExceeded)
        assert (result.decision, result.reason, result.priority) == ("HOLD", "DEADLINE_EXCEEDED", P2)
        assert result.waited_s == pytest.approx(0.150)
        assert not keeps.done()
        gate.release.set()
        assert keeps.result(timeout=TIMEOUT) == "done:keeps"
        stats = batcher.stats()
    assert stats.expired == 1
    assert all("doomed" not in b for b in gate.batches)


def test_a_worker_fails_late_requests_when_it_next_looks_at_the_queue(gate: Gate) -> None:
    clock = FakeClock()
    with Batcher(gate, clock=clock, default_timeout=0.050) as batcher:
        blocked(batcher, gate)
        late = batcher.submit_many(["x", "y"], P1)
        on_time = batcher.submit("z", P1, deadline=clock.now + 10)
        clock.advance(0.050)  # exactly the default timeout: expired
        gate.release.set()
        for f in late:
            result = f.result(timeout=TIMEOUT)
            assert isinstance(result, DeadlineExceeded)
            assert result.priority == P1
            assert result.waited_s == pytest.approx(0.050)
        assert on_time.result(timeout=TIMEOUT) == "done:z"


def test_a_request_already_past_its_deadline_fails_safe_at_once() -> None:
    clock = FakeClock()
    batcher: Batcher[int, int] = Batcher(lambda b: b, clock=clock)
    with batcher:
        result = batcher.submit(1, P0, deadline=clock.now).result(timeout=TIMEOUT)
    assert result == DeadlineExceeded(priority=P0, waited_s=0.0)


def test_the_watcher_fails_a_deadline_on_the_real_clock_while_every_worker_is_busy(gate: Gate) -> None:
    with Batcher(gate) as batcher:
        blocked(batcher, gate)
        fut = batcher.submit("late", P0, deadline=time.monotonic() + 0.020)
        result = fut.result(timeout=TIMEOUT)  # nobody submits or releases: only the watcher can do it
        assert isinstance(result, DeadlineExceeded)
        assert result.waited_s >= 0.020
        assert not gate.release.is_set()
        gate.release.set()


def test_a_raising_batch_function_fails_that_batch_and_the_worker_goes_on() -> None:
    def process(batch: list[int]) -> list[int]:
        if 13 in batch:
            raise RuntimeError("model crashed")
        return [x + 1 for x in batch]

    with Batcher(process, clock=FakeClock()) as batcher:
        bad = batcher.submit(13)
        with pytest.raises(RuntimeError, match="model crashed"):
            bad.result(timeout=TIMEOUT)
        assert batcher.submit(1).result(timeout=TIMEOUT) == 2
        assert batcher.stats().failed == 1


def test_a_wrong_result_count_is_a_batcher_error_for_every_request(gate: Gate) -> None:
    def process(batch: list[str]) -> list[str]:
        gate(batch)
        return ["only one"] if batch != ["block"] else ["done"]

    with Batcher(process, clock=FakeClock()) as batcher:
        blocked(batcher, gate)
        futs = batcher.submit_many(["a", "b", "c"])
        gate.release.set()
        for f in futs:
            with pytest.raises(BatcherError, match="returned 1 results for 3 requests"):
                f.result(timeout=TIMEOUT)
        assert batcher.submit("d").result(timeout=TIMEOUT) == "only one"
    assert issubclass(BatcherError, InferenceError)


def test_close_without_drain_fails_queued_work_and_finishes_running_work(gate: Gate) -> None:
    batcher = Batcher(gate, clock=FakeClock())
    running = blocked(batcher, gate)
    queued = batcher.submit_many(["a", "b"], P2)
    closer = threading.Thread(target=batcher.close, kwargs={"drain": False})
    closer.start()
    for f in queued:  # failed before close() waits for the busy worker
        with pytest.raises(BatcherClosedError):
            f.result(timeout=TIMEOUT)
    gate.release.set()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    assert running.result(timeout=TIMEOUT) == "done:block"
    assert gate.batches == [["block"]]


def test_close_with_drain_runs_queued_work(gate: Gate) -> None:
    batcher = Batcher(gate, clock=FakeClock())
    blocked(batcher, gate)
    queued = batcher.submit_many(["a", "b"], P2)
    closer = threading.Thread(target=batcher.close)
    closer.start()
    gate.release.set()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    assert [f.result(timeout=0) for f in queued] == ["done:a", "done:b"]


def test_submit_after_close_is_refused_loudly() -> None:
    batcher: Batcher[int, int] = Batcher(lambda b: b, clock=FakeClock())
    batcher.close()
    batcher.close()  # idempotent
    assert batcher.closed
    with pytest.raises(BatcherClosedError, match="closed"):
        batcher.submit(1)
    with pytest.raises(BatcherClosedError, match="closed"):
        batcher.submit_many([1, 2])


def test_a_cancelled_request_is_never_processed(gate: Gate) -> None:
    with Batcher(gate, clock=FakeClock()) as batcher:
        blocked(batcher, gate)
        gone, kept = batcher.submit("gone"), batcher.submit("kept")
        assert gone.cancel()
        gate.release.set()
        assert kept.result(timeout=TIMEOUT) == "done:kept"
        assert batcher.stats().cancelled == 1
    assert gate.batches[1] == ["kept"]


@pytest.mark.parametrize(
    "kwargs, match",
    [({"workers": 0}, "workers"), ({"max_batch": 0}, "max_batch"), ({"default_timeout": -1.0}, "timeout")],
)
def test_constructor_refuses_bad_settings(kwargs: dict[str, int | float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Batcher(lambda b: b, **kwargs)  # type: ignore[arg-type]


def test_concurrent_submitters_each_get_their_own_result_exactly_once() -> None:
    seen: Counter[int] = Counter()
    seen_lock = threading.Lock()

    def process(batch: list[int]) -> list[int]:
        with seen_lock:
            seen.update(batch)
        return [x * 2 for x in batch]

    n_threads, per_thread = 4, 500
    results: dict[int, list[tuple[int, int | DeadlineExceeded]]] = {}
    start = threading.Barrier(n_threads)

    def submitter(k: int, batcher: Batcher[int, int]) -> None:
        start.wait(TIMEOUT)
        lanes = [P0, P1, P2]
        reqs = [k * per_thread + i for i in range(per_thread)]
        futs = [(req, batcher.submit(req, lanes[req % 3])) for req in reqs]
        results[k] = [(req, f.result(timeout=TIMEOUT)) for req, f in futs]

    with Batcher(process, workers=2, max_batch=64) as batcher:
        threads = [threading.Thread(target=submitter, args=(k, batcher)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT * 4)
        stats = batcher.stats()
    assert len(results) == n_threads
    pairs = [p for k in results for p in results[k]]
    assert all(res == req * 2 for req, res in pairs)
    assert seen == Counter(range(n_threads * per_thread))
    assert (stats.submitted, stats.dispatched, stats.expired, stats.failed) == (2000, 2000, 0, 0)
    assert stats.largest_batch <= 64
    assert sum(stats.batch_sizes.values()) == stats.batches

