"""Priority lanes: the pure scheduling core of the dynamic batcher (no threads, no clock of its own).

``LaneQueue`` decides which queued requests form the next batch and which have expired; the
caller passes the time in as ``now`` (seconds on a monotonic clock), so the policy is tested on a
fake clock and ``inference.batcher.Batcher`` runs it on worker threads behind one lock. Kept apart
from the batcher so that the policy can be read, tested and reasoned about without threads.

Policy (the seed's table: lanes P0/P1/P2 with ceilings 5/50/200 ms):

* **P0 never waits behind P1/P2.** Every batch starts with all queued P0 (FIFO).
* **Ceilings bound how long a lower lane waits** before it is served ahead of fresher
  higher-lane work. A P1/P2 request that has waited at least its lane's ceiling
  (``now >= enqueued_at + ceiling``) is *overdue*; overdue requests follow P0, oldest first
  (P1 before P2 on a tie). Then the rest of P1, then P2 (FIFO within a lane). So however
  heavy the P1 load, a P2 request waits its ceiling and then only behind P0 and older
  requests. The P0 ceiling is a latency target only: P0 always goes first.
* **Deadlines expire, never batch.** A deadline is the first instant at which the request is
  too late: it is expired once ``now >= deadline``, and ``expire``/``take`` hand it back apart
  from any batch.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping
from enum import StrEnum
from typing import Generic, TypeVar

__all__ = ["DEFAULT_CEILINGS", "LaneQueue", "Priority", "Ticket"]

T = TypeVar("T")


class Priority(StrEnum):
    """A request's lane; P0 is the most urgent."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"

    @classmethod
    def parse(cls, text: str) -> Priority:
        """Parse a lane name such as an ``X-Priority`` header value (case and surrounding space ignored)."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            raise ValueError(f"unknown priority {text!r}: expected one of P0, P1, P2") from None


_LANES: tuple[Priority, ...] = tuple(Priority)
_LANE_INDEX: dict[str, int] = {p.value: i for i, p in enumerate(_LANES)}

DEFAULT_CEILINGS: Mapping[Priority, float] = {Priority.P0: 0.005, Priority.P1: 0.050, Priority.P2: 0.200}


def _lane_of(priority: Priority | str) -> int:
    try:
        return _LANE_INDEX[priority]
    except KeyError:
        raise ValueError(f"unknown priority {priority!r}: expected one of P0, P1, P2") from None


class Ticket(Generic[T]):
    """One queued request: its item, lane, enqueue time and optional deadline."""

    __slots__ = ("_lane", "_queued", "deadline", "enqueued_at", "item", "priority", "seq")

    def __init__(self, item: T, lane: int, enqueued_at: float, deadline: float | None, seq: int) -> None:
        self.item = item
        self.priority = _LANES[lane]
        self.enqueued_at = enqueued_at
        self.deadline = deadline
        self.seq = seq
        self._lane = lane
        self._queued = True

    @property
    def queued(self) -> bool:
        """True until the ticket is taken into a batch, expired, or cleared."""
        return self._queued

    def __repr__(self) -> str:
        return (f"Ticket(seq={self.seq}, priority={self.priority.value}, enqueued_at={self.enqueued_at}, "
                f"deadline={self.deadline}, queued={self._queued})")


class LaneQueue(Generic[T]):
    """The scheduling core: three FIFO lanes and a deadline heap; pure, single-threaded.

    Removal is lazy: a taken or expired ticket is flagged and skipped when reached, so every
    operation is O(log n) or better per ticket.
    """

    def __init__(self, ceilings: Mapping[Priority, float] = DEFAULT_CEILINGS) -> None:
        merged = {**DEFAULT_CEILINGS, **ceilings}
        for p, c in merged.items():
            if not (math.isfinite(c) and c >= 0):
                raise ValueError(f"ceiling for {p} must be a finite number >= 0, got {c!r}")
        self.ceilings: Mapping[Priority, float] = {p: merged[p] for p in _LANES}
        self._lanes: tuple[deque[Ticket[T]], ...] = tuple(deque() for _ in _LANES)
        self._counts = [0] * len(_LANES)
        self._size = 0
        self._deadlines: list[tuple[float, int, Ticket[T]]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return self._size

    def depth(self, priority: Priority) -> int:
        """Number of queued requests in one lane."""
        return self._counts[_lane_of(priority)]

    def depths(self) -> dict[Priority, int]:
        """Number of queued requests per lane."""
        return dict(zip(_LANES, self._counts, strict=True))

    def push(self, item: T, priority: Priority, deadline: float | None, now: float) -> Ticket[T]:
        """Queue ``item`` in ``priority``'s lane at time ``now``; ``deadline`` is absolute or None."""
        lane = _lane_of(priority)
        if deadline is not None and math.isnan(deadline):
            raise ValueError("deadline is NaN")
        seq = next(self._seq)
        ticket = Ticket(item, lane, now, deadline, seq)
        self._lanes[lane].append(ticket)
        self._counts[lane] += 1
        self._size += 1
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, seq, ticket))
        return ticket

    def expire(self, now: float) -> list[Ticket[T]]:
        """Remove and return every queued ticket whose deadline has come (``now >= deadline``)."""
        heap = self._deadlines
        expired: list[Ticket[T]] = []
        while heap and heap[0][0] <= now:
            ticket = heapq.heappop(heap)[2]
            if ticket._queued:
                self._unqueue(ticket)
                expired.append(ticket)
        return expired

    def take(self, now: float, max_batch: int) -> tuple[list[Ticket[T]], list[Ticket[T]]]:
        """Expire what is late, then remove and return the next batch: ``(batch, expired)``.

        Batch order: all P0, then overdue P1/P2 (oldest first), then P1, then P2.
        """
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        expired = self.expire(now)
        batch: list[Ticket[T]] = []
        if self._size:
            p0, p1, p2 = self._lanes
            self._drain(p0, batch, max_batch)
            c1, c2 = self.ceilings[Priority.P1], self.ceilings[Priority.P2]
            while len(batch) < max_batch:  # overdue P1/P2, oldest first; the lane fronts are oldest
                t1, t2 = self._front(p1), self._front(p2)
                if t1 is not None and t1.enqueued_at + c1 > now:
                    t1 = None
                if t2 is not None and t2.enqueued_at + c2 > now:
                    t2 = None
                if t1 is not None and (t2 is None or t1.enqueued_at <= t2.enqueued_at):
                    p1.popleft()
                    self._unqueue(t1)
                    batch.append(t1)
                elif t2 is not None:
                    p2.popleft()
                    self._unqueue(t2)
                    batch.append(t2)
                else:
                    break
            self._drain(p1, batch, max_batch)
            self._drain(p2, batch, max_batch)
        self._compact()
        return batch, expired

    def next_wakeup(self) -> float | None:
        """The earliest deadline among queued tickets (when ``expire`` next has work), or None."""
        heap = self._deadlines
        while heap and not heap[0][2]._queued:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def clear(self) -> list[Ticket[T]]:
        """Remove and return every queued ticket, in lane order (P0, P1, P2; FIFO within each)."""
        out = [t for dq in self._lanes for t in dq if t._queued]
        for t in out:
            t._queued = False
        self._counts = [0] * len(_LANES)
        self._size = 0
        self._compact()
        return out

    def _unqueue(self, ticket: Ticket[T]) -> None:
        ticket._queued = False
        self._counts[ticket._lane] -= 1
        self._size -= 1

    def _drain(self, dq: deque[Ticket[T]], batch: list[Ticket[T]], max_batch: int) -> None:
        while dq and len(batch) < max_batch:
            t = dq.popleft()
            if t._queued:
                self._unqueue(t)
                batch.append(t)

    @staticmethod
    def _front(dq: deque[Ticket[T]]) -> Ticket[T] | None:
        while dq and not dq[0]._queued:
            dq.popleft()
        return dq[0] if dq else None

    def _compact(self) -> None:
        # Flagged tickets linger in the lanes and heap; drop them when nothing live remains,
        # or rebuild the heap once it is mostly dead.
        if not self._size:
            for dq in self._lanes:
                dq.clear()
            self._deadlines.clear()
        elif len(self._deadlines) > 2 * self._size + 1024:
            self._deadlines = [e for e in self._deadlines if e[2]._queued]
            heapq.heapify(self._deadlines)
