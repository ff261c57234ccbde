"""Readiness: whether this process's ledger commits succeed, as its own commits tell it.

Reading the ledger's size says nothing about writing: a database that has gone read-only, a
full disk or a lost write privilege still answers reads. So ``/healthz`` also reports the outcome
of the commits this process attempted: after a commit failed it answers 503 with Retry-After
until a commit succeeds, or until ``hold_s`` seconds pass without another failure (a node that a
load balancer took out of rotation must get traffic again to find out whether the ledger is
back; if it is not, the next commit fails and the node is unready again). Nothing is written to
find out: no probe rows, no checkpoint.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CommitHealth", "Unready"]


@dataclass(frozen=True)
class Unready:
    """Why the process is not ready: when the last commit failed, and for how long to wait."""

    failures: int  # commits failed since the last one that succeeded
    since_s: float  # seconds since the last failure
    retry_after_s: int  # whole seconds until the hold ends (at least 1)


class CommitHealth:
    """The outcome of the latest commits; thread-safe (the batcher thread reports successes)."""

    def __init__(self, hold_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not hold_s > 0:
            raise ValueError("hold_s must be positive")
        self.hold_s = hold_s
        self.clock = clock
        self._lock = threading.Lock()
        self._failed_at: float | None = None
        self._failures = 0

    def failed(self) -> None:
        """A commit failed (the ledger was unavailable): unready from now for ``hold_s``."""
        with self._lock:
            self._failed_at = self.clock()
            self._failures += 1

    def committed(self) -> None:
        """A commit succeeded: ready again at once."""
        if self._failed_at is None:  # the hot path (once per batch) takes no lock
            return
        with self._lock:
            self._failed_at = None
            self._failures = 0

    def unready(self) -> Unready | None:
        """None when ready; else how long since the last failure and how long to wait."""
        with self._lock:
            at, n = self._failed_at, self._failures
        if at is None:
            return None
        since = self.clock() - at
        if since >= self.hold_s:
            return None
        return Unready(n, since, max(1, math.ceil(self.hold_s - since)))
