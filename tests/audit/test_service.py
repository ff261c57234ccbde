"""DecisionService from an event loop: each caller gets its own decisions, in order, once the batch
holding them is done; a failed batch reaches every caller; a cancelled caller's queued work is
withdrawn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pytest

from audit.decide.pipeline import Pipeline
from audit.decide.service import DecisionService
from audit.decide.types import Decision, Submission
from inference.batcher import Priority
from ledger import LedgerUnavailableError


@dataclass(frozen=True)
class _Sub:  # stands in for audit.decide.pipeline.Submission: the service only replaces queue_us/expired
    n: int
    expired: bool = False
    queue_us: int = 0


def _service(pipe: _Pipeline, timeout_s: float | None) -> DecisionService:
    return DecisionService(cast(Pipeline, pipe), timeout_s=timeout_s)


def _subs(*ns: int) -> list[Submission]:
    return cast(list[Submission], [_Sub(n) for n in ns])


class _Pipeline:
    def __init__(self, fail: bool = False, gate: threading.Event | None = None) -> None:
        self.fail = fail
        self.gate = gate
        self.batches: list[list[int]] = []

    def decide(self, subs: Sequence[Any]) -> list[Decision]:
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append([s.n for s in subs])
        if self.fail:
            raise LedgerUnavailableError("disk full")
        return [Decision(f"t{s.n}", s.n, "00", "now", "HOLD" if s.expired else "ALLOW", 0.5, (), None,
                         {"queue": s.queue_us}) for s in subs]


def test_each_caller_gets_its_own_decisions_in_order() -> None:
    pipe = _Pipeline()
    with _service(pipe, None) as svc:
        async def main() -> list[list[Decision]]:
            calls = [svc.decide_async(_subs(*(k * 100 + j for j in range(k + 1)))) for k in range(20)]
            return await asyncio.gather(*calls)

        results = asyncio.run(main())
    for k, ds in enumerate(results):
        assert [d.seq for d in ds] == [k * 100 + j for j in range(k + 1)]
    assert sorted(n for b in pipe.batches for n in b) == sorted(d.seq for ds in results for d in ds)


def test_an_empty_call_returns_at_once() -> None:
    with _service(_Pipeline(), None) as svc:
        assert asyncio.run(svc.decide_async([])) == []


def test_a_failed_commit_reaches_the_caller_and_no_decision_is_returned() -> None:
    with _service(_Pipeline(fail=True), None) as svc, \
            pytest.raises(LedgerUnavailableError, match="disk full"):
        asyncio.run(svc.decide_async(_subs(1, 2)))


def test_a_request_expired_in_the_queue_gets_its_recorded_fail_safe_decision() -> None:
    gate = threading.Event()
    pipe = _Pipeline(gate=gate)
    with _service(pipe, 0.01) as svc:
        async def main() -> list[Decision]:
            blocker = asyncio.ensure_future(svc.decide_async(_subs(1), timeout_s=None))
            await asyncio.sleep(0.05)  # the worker is inside the gated batch now
            late = asyncio.ensure_future(svc.decide_async(_subs(2), Priority.P2))
            await asyncio.sleep(0.1)  # its 10 ms deadline passes in the queue
            gate.set()
            await blocker
            return await late

        (d,) = asyncio.run(main())
    assert d.seq == 2 and d.decision == "HOLD" and svc.expired == 1


def test_cancelling_a_caller_withdraws_its_queued_requests() -> None:
    gate = threading.Event()
    pipe = _Pipeline(gate=gate)
    with _service(pipe, None) as svc:
        async def main() -> None:
            blocker = asyncio.ensure_future(svc.decide_async(_subs(1)))
            await asyncio.sleep(0.05)
            queued = asyncio.ensure_future(svc.decide_async(_subs(2, 3)))
            await asyncio.sleep(0.01)
            queued.cancel()
            await asyncio.sleep(0.01)
            gate.set()
            await blocker
            with pytest.raises(asyncio.CancelledError):
                await queued

        asyncio.run(main())
    assert pipe.batches == [[1]]
