"""The threaded dynamic batcher on top of the lane scheduler (``tests/inference/test_lanes.py``).

Threads are synchronised with events and futures (every wait has a timeout), never with sleeps.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from inference import lanes
from inference.batcher import (
    DEFAULT_CEILINGS,
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


def test_the_lane_names_are_importable_from_the_batcher() -> None:
    assert Priority is lanes.Priority and LaneQueue is lanes.LaneQueue and Ticket is lanes.Ticket
    assert DEFAULT_CEILINGS is lanes.DEFAULT_CEILINGS


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


# -- the idle hook ------------------------------------------------------------------------------

def test_an_idle_worker_calls_its_hook_and_still_takes_work_at_once() -> None:
    called = threading.Event()
    calls: list[float] = []

    def hook() -> None:
        calls.append(time.monotonic())
        called.set()

    with Batcher(lambda reqs: [r * 2 for r in reqs], idle_s=0.01, on_idle=hook) as b:
        assert called.wait(TIMEOUT)  # nothing queued for 10 ms: the hook ran
        assert b.submit(21).result(TIMEOUT) == 42  # and the worker still answers
        n = len(calls)
        called.clear()
        assert called.wait(TIMEOUT) and len(calls) > n  # idle again: again


def test_a_busy_worker_does_not_call_its_hook() -> None:
    release, started = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow(reqs: list[int]) -> list[int]:
        started.set()
        assert release.wait(TIMEOUT)
        return reqs

    with Batcher(slow, idle_s=0.005, on_idle=lambda: calls.append(1)) as b:
        fut = b.submit(1)
        assert started.wait(TIMEOUT)
        before = len(calls)
        time.sleep(0.05)  # ten idle periods while the batch runs: the worker is not idle
        assert len(calls) == before
        release.set()
        assert fut.result(TIMEOUT) == 1


def test_a_failing_hook_is_logged_and_the_worker_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    failed = threading.Event()

    def hook() -> None:
        failed.set()
        raise RuntimeError("database away")

    with caplog.at_level("ERROR", logger="inference.batcher"), \
            Batcher(lambda reqs: reqs, idle_s=0.01, on_idle=hook) as b:
        assert failed.wait(TIMEOUT)
        assert b.submit(7).result(TIMEOUT) == 7
    assert "the idle hook failed" in caplog.text and "database away" in caplog.text


@pytest.mark.parametrize(("idle_s", "hook"), [(0.01, None), (None, lambda: None), (0.0, lambda: None)])
def test_idle_s_and_its_hook_come_together(idle_s: float | None, hook: object) -> None:
    with pytest.raises(ValueError, match="idle_s"):
        Batcher(lambda reqs: reqs, idle_s=idle_s, on_idle=hook)  # type: ignore[arg-type]
