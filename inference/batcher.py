"""Dynamic batcher: gathers scoring requests into batches on worker threads, by priority lane.

Which requests form a batch, and in what order, is ``inference.lanes`` (P0 first, then overdue
P1/P2 oldest first, then P1, then P2); this module runs that core on threads and adds:

* **Never wait when idle.** A free worker dispatches whatever is queued at once; nothing waits
  to fill a batch. Batches form only while every worker is busy, up to ``max_batch``.
* **Idle work** (optional). With ``idle_s`` and ``on_idle``, a worker that found the queue empty
  for ``idle_s`` calls ``on_idle`` (then looks at the queue again): work that keeps the next
  batch fast, done while nothing waits (a decider keeping up with the others' commits).
* **Deadlines fail safe.** A request whose deadline passes before dispatch resolves to
  ``DeadlineExceeded`` (decision HOLD, reason DEADLINE_EXCEEDED), never a silent drop.
  A deadline is the first instant at which the request is too late: it is expired once
  ``now >= deadline``. It covers the wait in the queue, not the batch run once dispatched.

Times are seconds on the injected monotonic clock. The lane names (``Priority``,
``DEFAULT_CEILINGS``, ``LaneQueue``, ``Ticket``) are re-exported here, so callers import the
batcher and its lanes from one place.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from inference.errors import InferenceError
from inference.lanes import DEFAULT_CEILINGS, LaneQueue, Priority, Ticket

__all__ = [
    "DEFAULT_CEILINGS",  # re-exported from inference.lanes
    "Batcher",
    "BatcherClosedError",
    "BatcherError",
    "BatcherStats",
    "DeadlineExceeded",
    "LaneQueue",  # re-exported
    "Priority",  # re-exported
    "Ticket",  # re-exported
]

ReqT = TypeVar("ReqT")
ResT = TypeVar("ResT")


class BatcherError(InferenceError):
    """The batcher refused work or a batch function broke its contract."""


class BatcherClosedError(BatcherError):
    """The batcher is closed: no new work is accepted, and undrained queued work fails with this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineExceeded:
    """The fail-safe result of a request whose deadline passed before it was dispatched."""

    decision: Literal["HOLD"] = "HOLD"
    reason: Literal["DEADLINE_EXCEEDED"] = "DEADLINE_EXCEEDED"
    priority: Priority
    waited_s: float


@dataclass(frozen=True, slots=True)
class BatcherStats:
    """A snapshot of the batcher's counters; ``batch_sizes`` maps power-of-two bucket -> batches."""

    submitted: int
    dispatched: int
    batches: int
    expired: int
    failed: int
    cancelled: int
    largest_batch: int
    batch_sizes: dict[int, int]
    queued: dict[Priority, int]

    @property
    def mean_batch(self) -> float:
        """Requests per dispatched batch."""
        return self.dispatched / self.batches if self.batches else 0.0


log = logging.getLogger(__name__)
_Job = tuple[ReqT, Future[ResT | DeadlineExceeded]]
_MIN_WAIT_S = 0.0005  # floor for timed waits, so a clock that barely moves cannot make a thread spin


class Batcher(Generic[ReqT, ResT]):
    """Runs ``process`` on batches of submitted requests, on ``workers`` daemon threads.

    ``process`` gets a list of requests and must return one result per request, in order. If it
    raises, every future of that batch gets the exception; a wrong result count gives each a
    ``BatcherError``. Workers survive either way.

    Expiry bound: a deadline-watcher thread fails a queued request as soon as its deadline passes
    on ``clock``, even while every worker is busy, plus OS wake-up and GIL latency (about
    ``sys.getswitchinterval()`` while ``process`` runs Python code; longer if it holds the GIL in
    C). A worker's next look at the queue, and ``expire()``, fail late requests too. With an
    injected clock that does not follow real time, call ``expire()`` after moving it.
    """

    def __init__(
        self,
        process: Callable[[list[ReqT]], Sequence[ResT]],
        *,
        workers: int = 1,
        max_batch: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        ceilings: Mapping[Priority, float] = DEFAULT_CEILINGS,
        default_timeout: float | None = None,
        idle_s: float | None = None,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if (idle_s is None) is not (on_idle is None) or (idle_s is not None and not idle_s > 0):
            raise ValueError("idle_s (> 0) and on_idle come together")
        if default_timeout is not None and not default_timeout >= 0:
            raise ValueError(f"default_timeout must be >= 0 or None, got {default_timeout!r}")
        self._process = process
        self._max_batch = max_batch
        self._clock = clock
        self._default_timeout = default_timeout
        self._idle_s, self._on_idle = idle_s, on_idle
        self._queue: LaneQueue[_Job[ReqT, ResT]] = LaneQueue(ceilings)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._watch = threading.Condition(self._lock)
        self._watch_target = math.inf  # the deadline the watcher sleeps until
        self._idle = 0
        self._closed = False
        self._submitted = self._dispatched = self._batches = self._expired = 0
        self._failed = self._cancelled = self._largest = 0
        self._sizes: dict[int, int] = {}
        self._workers = [
            threading.Thread(target=self._run_worker, name=f"sealtrail-batcher-{i}", daemon=True)
            for i in range(workers)
        ]
        self._watcher = threading.Thread(target=self._run_watcher, name="sealtrail-batcher-deadlines",
                                         daemon=True)
        for t in [*self._workers, self._watcher]:
            t.start()

    def __enter__(self) -> Batcher[ReqT, ResT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, req: ReqT, priority: Priority = Priority.P1,
               deadline: float | None = None) -> Future[ResT | DeadlineExceeded]:
        """Queue one request; ``deadline`` is absolute on the clock (None: now + default_timeout)."""
        fut: Future[ResT | DeadlineExceeded] = Future()
        with self._lock:
            self._enqueue(((req, fut),), priority, deadline)
        return fut

    def submit_many(self, reqs: Iterable[ReqT], priority: Priority = Priority.P1,
                    deadline: float | None = None) -> list[Future[ResT | DeadlineExceeded]]:
        """Queue several requests in one lane under one lock; returns their futures in order."""
        jobs: list[_Job[ReqT, ResT]] = [(r, Future()) for r in reqs]
        with self._lock:
            self._enqueue(jobs, priority, deadline)
        return [f for _, f in jobs]

    def expire(self) -> int:
        """Fail every queued request whose deadline has passed, now; returns how many."""
        with self._lock:
            now = self._clock()
            expired = self._queue.expire(now)
            self._expired += len(expired)
        self._fail_expired(expired, now)
        return len(expired)

    def stats(self) -> BatcherStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return BatcherStats(self._submitted, self._dispatched, self._batches, self._expired,
                                self._failed, self._cancelled, self._largest, dict(self._sizes),
                                self._queue.depths())

    @property
    def closed(self) -> bool:
        """True once ``close()`` has been called."""
        return self._closed

    def close(self, drain: bool = True) -> None:
        """Stop accepting work; run what is queued (``drain``) or fail it with ``BatcherClosedError``.

        Joins the threads; idempotent. Requests already running finish either way.
        """
        leftovers: list[Ticket[_Job[ReqT, ResT]]] = []
        with self._lock:
            self._closed = True
            if not drain:
                leftovers = self._queue.clear()
            self._work.notify_all()
        error = BatcherClosedError("batcher closed before this request was dispatched (drain=False)")
        for t in leftovers:
            fut = t.item[1]
            if fut.set_running_or_notify_cancel():
                fut.set_exception(error)
        me = threading.current_thread()
        for w in self._workers:
            if w is not me:
                w.join()
        with self._lock:
            self._watch.notify()
        if self._watcher is not me:
            self._watcher.join()

    # -- internals ---------------------------------------------------------------------------

    def _enqueue(self, jobs: Sequence[_Job[ReqT, ResT]], priority: Priority, deadline: float | None) -> None:
        if self._closed:
            raise BatcherClosedError("batcher is closed; submit() after close() is refused")
        now = self._clock()
        if deadline is None and self._default_timeout is not None:
            deadline = now + self._default_timeout
        push = self._queue.push
        for job in jobs:
            push(job, priority, deadline, now)
        self._submitted += len(jobs)
        if self._idle:
            self._work.notify(-(-len(jobs) // self._max_batch))
        # Wake the watcher for an earlier deadline, unless the idle workers will take all that is queued.
        if (deadline is not None and deadline < self._watch_target
                and len(self._queue) > self._idle * self._max_batch):
            self._watch.notify()

    def _run_worker(self) -> None:
        queue, clock, max_batch = self._queue, self._clock, self._max_batch
        while True:
            with self._lock:
                while True:
                    now = clock()
                    batch, expired = queue.take(now, max_batch)
                    if batch or expired:
                        break
                    if self._closed:
                        return
                    self._idle += 1
                    woken = self._work.wait(self._idle_s)  # empty: nothing expires until a submit
                    self._idle -= 1
                    if not woken and self._on_idle is not None and not len(queue) and not self._closed:
                        self._lock.release()  # the hook runs unlocked: submits queue meanwhile
                        try:
                            self._on_idle()
                        except Exception:  # the hook's failure is its own; the worker goes on
                            log.exception("batcher: the idle hook failed")
                        finally:
                            self._lock.acquire()
                self._expired += len(expired)
                if batch:
                    n = len(batch)
                    self._batches += 1
                    self._dispatched += n
                    self._largest = max(self._largest, n)
                    bucket = 1 << (n - 1).bit_length()
                    self._sizes[bucket] = self._sizes.get(bucket, 0) + 1
            if expired:
                self._fail_expired(expired, now)
            if batch:
                self._dispatch(batch)

    def _dispatch(self, batch: list[Ticket[_Job[ReqT, ResT]]]) -> None:
        live = [t.item for t in batch if t.item[1].set_running_or_notify_cancel()]
        if len(live) != len(batch):
            with self._lock:
                self._cancelled += len(batch) - len(live)
        if not live:
            return
        try:
            results = self._process([req for req, _ in live])
            if len(results) != len(live):
                raise BatcherError(f"batch function returned {len(results)} results for {len(live)} requests")
        except BaseException as exc:  # every caller must hear of it; the worker goes on
            for _, fut in live:
                fut.set_exception(exc)
            with self._lock:
                self._failed += len(live)
            return
        for (_, fut), res in zip(live, results, strict=True):
            fut.set_result(res)

    def _run_watcher(self) -> None:
        queue, clock = self._queue, self._clock
        while True:
            with self._lock:
                while True:
                    if self._closed and not queue:
                        return
                    now = clock()
                    expired = queue.expire(now)
                    if expired:
                        self._expired += len(expired)
                        break
                    wake = queue.next_wakeup()
                    self._watch_target = math.inf if wake is None else wake
                    self._watch.wait(None if wake is None else max(wake - now, _MIN_WAIT_S))
                    self._watch_target = math.inf
            self._fail_expired(expired, now)

    @staticmethod
    def _fail_expired(expired: list[Ticket[_Job[ReqT, ResT]]], now: float) -> None:
        for t in expired:
            fut = t.item[1]
            if fut.set_running_or_notify_cancel():
                fut.set_result(DeadlineExceeded(priority=t.priority, waited_s=now - t.enqueued_at))
