"""The decision service: priority lanes in front of one pipeline, awaited by many callers.

Callers (HTTP handlers, the offline scorer) submit parsed ``Submission``s with a priority and a
deadline; one batcher worker feeds the pipeline whole batches, so the velocity windows advance
in ledger order and one ledger commit covers a batch. A request whose deadline passed in the
queue is not dropped: it is sealed as a fail-safe HOLD (``DEADLINE_EXCEEDED``) in a following
batch, and the caller gets that recorded decision. A failed commit reaches every caller of the
batch as ``LedgerUnavailableError`` and no decision exists (the API answers 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace

from audit.decide.idempotency import decide_keyed
from audit.decide.pipeline import Pipeline
from audit.decide.types import Decision, Submission
from inference.batcher import Batcher, DeadlineExceeded, Priority

__all__ = ["DecisionService", "ServiceStats"]

log = logging.getLogger(__name__)

_Req = tuple[Submission, float]  # the submission and when it was queued (monotonic seconds)


@dataclass(frozen=True)
class ServiceStats:
    batches: int
    decisions: int
    expired: int
    queued: dict[str, int]


class DecisionService:
    """One batcher worker in front of ``pipeline``; thread-safe, usable from asyncio."""

    def __init__(self, pipeline: Pipeline, *, max_batch: int = 1024, timeout_s: float | None = 0.25,
                 clock: Callable[[], float] = time.monotonic,
                 catch_up_idle_s: float | None = None) -> None:
        """``catch_up_idle_s``: when the queue has been empty that long, the worker brings the
        pipeline up to the log (``Pipeline.catch_up``), and again each time it stays empty that
        long, and so it does after a batch it answered wholly from the ledger (payments decided
        before) when it last caught up longer ago than that; None: only before a batch it seals."""
        self.pipeline = pipeline
        self.timeout_s = timeout_s
        self._clock = clock
        # One worker: a second would interleave batches and reorder the velocity windows.
        self._catch_up_s = catch_up_idle_s
        self._caught_up_at = time.monotonic()
        self._batcher: Batcher[_Req, Decision] = Batcher(
            self._process, workers=1, max_batch=max_batch, clock=clock, idle_s=catch_up_idle_s,
            on_idle=None if catch_up_idle_s is None else self._catch_up)
        self.on_batch: Callable[[Sequence[Decision]], None] | None = None  # metrics hook
        # called after each batch the pipeline committed, on the worker, before the next batch starts:
        # the pipeline holds no batch in flight (the runtime's state snapshots); it must not raise
        self.after_batch: Callable[[Sequence[Decision]], None] | None = None
        # called on the worker after a catch-up between batches applied others' decisions (the
        # state is then the log's up to ``pipeline.covered``); it must not raise
        self.after_catch_up: Callable[[], None] | None = None
        self.expired = 0
        self.decided = 0  # decisions this service sealed (the velocity snapshot's check)

    def _catch_up(self) -> None:
        """The idle worker's hook: a failure (the database away) is logged; the next batch catches
        up (or fails) as it always does."""
        try:
            applied = self.pipeline.catch_up()
        except Exception as exc:
            log.warning("catching up while idle failed (the next batch catches up): %s", exc)
            applied = 0
        self._caught_up_at = time.monotonic()
        if applied and self.after_catch_up is not None:
            self.after_catch_up()

    def _process(self, reqs: list[_Req]) -> list[Decision]:
        now = self._clock()
        subs = [replace(s, queue_us=round((now - t) * 1e6)) for s, t in reqs]
        pipeline = self.pipeline  # a payment decided before is answered from the ledger, not again
        decisions = decide_keyed(pipeline.decide, lambda: pipeline.ledger.engine, subs)
        sealed = sum(not getattr(d, "replayed", False) for d in decisions)
        self.decided += sealed  # sealed here
        if sealed:  # the pipeline caught up before it prepared them
            self._caught_up_at = time.monotonic()
        elif self._catch_up_s is not None and time.monotonic() - self._caught_up_at > self._catch_up_s:
            self._catch_up()  # answered from the ledger alone: keep up with the others meanwhile
        if self.on_batch is not None:
            self.on_batch(decisions)
        if self.after_batch is not None:
            self.after_batch(decisions)
        return decisions

    def submit(self, subs: Sequence[Submission], priority: Priority = Priority.P1,
               timeout_s: float | None = None) -> list[Future[Decision | DeadlineExceeded]]:
        """Queue ``subs`` in one lane; each future resolves once its record is durable."""
        now = self._clock()
        wait = self.timeout_s if timeout_s is None else timeout_s
        deadline = None if wait is None else now + wait
        return self._batcher.submit_many([(s, now) for s in subs], priority, deadline)

    def _reseal_expired(self, sub: Submission) -> Future[Decision | DeadlineExceeded]:
        # P0 and no deadline: the fail-safe record itself must not expire again.
        self.expired += 1
        return self._batcher.submit((replace(sub, expired=True), self._clock()), Priority.P0, None)

    def decide(self, subs: Sequence[Submission], priority: Priority = Priority.P1,
               timeout_s: float | None = None) -> list[Decision]:
        """Blocking form of ``submit``: the recorded decisions, in order."""
        futures = self.submit(subs, priority, timeout_s)
        out: list[Decision] = []
        for sub, fut in zip(subs, futures, strict=True):
            res = fut.result()
            if isinstance(res, DeadlineExceeded):
                res = self._reseal_expired(sub).result()
            assert isinstance(res, Decision)
            out.append(res)
        return out

    async def decide_async(self, subs: Sequence[Submission], priority: Priority = Priority.P1,
                           timeout_s: float | None = None) -> list[Decision]:
        """``decide`` for an event loop: awaits the batch without holding a thread."""
        futures = self.submit(subs, priority, timeout_s)
        await _all_done(futures)
        out: list[Decision] = []
        for sub, fut in zip(subs, futures, strict=True):
            res = fut.result()  # the batch's exception (LedgerUnavailableError), if it failed
            if isinstance(res, DeadlineExceeded):
                res = await asyncio.wrap_future(self._reseal_expired(sub))
            assert isinstance(res, Decision)
            out.append(res)
        return out

    def stats(self) -> ServiceStats:
        s = self._batcher.stats()
        return ServiceStats(s.batches, s.dispatched, s.expired, {str(k): v for k, v in s.queued.items()})

    def close(self) -> None:
        """Finish what is queued, then stop."""
        self._batcher.close(drain=True)

    def __enter__(self) -> DecisionService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _all_done(futures: Sequence[Future[Decision | DeadlineExceeded]]) -> asyncio.Future[None]:
    """Resolves on the running loop once every future is done: one loop wake-up per call, not
    one per decision (``wrap_future`` + ``gather`` cost a thread-safe call and a callback each).
    Cancelling it cancels the futures still queued, as ``wrap_future`` would."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    if not futures:
        waiter.set_result(None)
        return waiter
    remaining = len(futures)
    lock = threading.Lock()  # done-callbacks run on the batcher and deadline threads

    def resolve() -> None:
        if not waiter.done():
            waiter.set_result(None)

    def one_done(_: Future[Decision | DeadlineExceeded]) -> None:
        nonlocal remaining
        with lock:
            remaining -= 1
            last = remaining == 0
        if last:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(resolve)

    def cancelled(w: asyncio.Future[None]) -> None:
        if w.cancelled():
            for f in futures:
                f.cancel()

    waiter.add_done_callback(cancelled)
    for f in futures:
        f.add_done_callback(one_done)
    return waiter
