"""The decision summaries checked against the decisions they speak for, by ``ledger verify``.

A ``decision.summary`` (``audit.decide.summary``) is sealed, so nobody rewrites it unseen; but it
is what a bundle's completeness proof stands on, so the walk of ``audit.query.verify`` also
checks that the sealing code wrote what it should: the summaries form one chain (each links the
seq and leaf hash of the one before, the first links none), ``recorded_at`` never decreases along
it, each summary speaks for the entries just before it and every one of them is a decision whose
outcome, fired rule ids and ``recorded_at`` are the summary's, and no decision sealed after the
first summary goes without one. Decisions sealed before the first summary (by a version that
kept none) are counted, not judged. The account keys are not recomputed here (that needs every
payload parsed again); the exporter checks them for the account it selects, and the bundle
verifier against the payloads it carries.

Refusals likewise: a version 2 summary's refusal entry must stand at a ``refusal`` record of that
kind sealed at the summary's ``recorded_at``, and no refusal sealed after the first version 2
summary goes without one. Refusals sealed before it (by a version that summarised none) are
counted, not judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson

from audit.decide.summary import Summary, parse_summary
from audit.errors import SummaryError

__all__ = ["TABLE", "SummaryWalk"]

TABLE = "decision.summary"

Fail = Callable[[str, int, str], None]


@dataclass(frozen=True)
class _Seen:
    decision: str
    rules: tuple[str, ...]
    recorded_at: str
    refusal: str | None = None  # a refusal of this kind (decision and rules empty)


class SummaryWalk:
    """Fed decisions and summaries in seq order (decisions of a summary before it)."""

    def __init__(self, fail: Fail) -> None:
        self._fail = fail
        self._pending: dict[int, _Seen] = {}
        self._prev: tuple[int, str, str] | None = None  # seq, leaf hex, recorded_at
        self.summaries = 0
        self.unsummarised = 0  # decisions sealed before the first summary
        self.refusals = 0  # refusals checked against their summary entry
        self.refusals_unsummarised = 0  # refusals sealed before the first version 2 summary
        self._v2 = False  # a version 2 summary was seen: from here on refusals are summarised

    def decision(self, seq: int, recorded_at: str, decision: str, rules: tuple[str, ...]) -> None:
        self._pending[seq] = _Seen(decision, rules, recorded_at)

    def refusal(self, seq: int, record: bytes) -> None:
        """A sealed ``refusal`` entry (its envelope bytes), before the summary after it."""
        try:
            env = orjson.loads(record)
            kind, at = env["record"]["refusal"]["kind"], env["recorded_at"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            kind, at = "?", ""
        self._pending[seq] = _Seen("", (), str(at), str(kind))

    def summary(self, seq: int, record: bytes, leaf: bytes) -> Summary | None:
        """Check the summary at ``seq``; returns it parsed (None if it does not parse)."""
        self.summaries += 1
        fail = self._fail
        try:
            env = orjson.loads(record)
            s = parse_summary(seq, env["record"])
            at = str(env["recorded_at"])
        except (SummaryError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            fail(TABLE, seq, f"the summary does not parse: {exc}")
            self._prev = (seq, leaf.hex(), "")
            return None
        link = None if self._prev is None else self._prev[:2]
        if s.prev != link:
            fail(TABLE, seq, f"the summary links to {s.prev}; the summary before it is {link}")
        if self._prev is not None and at < self._prev[2]:
            fail(TABLE, seq, f"recorded at {at}, before the summary before it ({self._prev[2]})")
        self._prev = (seq, leaf.hex(), at)
        for early in sorted(k for k in self._pending if k < s.first_seq):
            self._uncovered(early, before_chain=self.summaries == 1)
        self._v2 = self._v2 or s.version >= 2
        for i, e in enumerate(s.entries):
            dseq = s.first_seq + i
            d = self._pending.pop(dseq, None)
            if e.refusal is not None:
                if d is None or d.refusal is None:
                    fail(TABLE, seq, f"the summary speaks for a refusal at seq {dseq}, which holds none")
                elif (d.refusal, d.recorded_at) != (e.refusal, at):
                    fail(TABLE, seq, f"seq {dseq} is a refusal ({d.refusal}) at {d.recorded_at}; the summary "
                                     f"says a refusal ({e.refusal}) at {at}")
                else:
                    self.refusals += 1
            elif d is None or d.refusal is not None:
                fail(TABLE, seq, f"the summary speaks for seq {dseq}, which holds no decision")
            elif (d.decision, d.rules, d.recorded_at) != (e.decision, e.rules, at):
                fail(TABLE, seq, f"seq {dseq} is {d.decision} firing {list(d.rules)} at {d.recorded_at}; "
                                 f"the summary says {e.decision} firing {list(e.rules)} at {at}")
        return s

    def _uncovered(self, seq: int, *, before_chain: bool) -> None:
        seen = self._pending.pop(seq)
        if seen.refusal is not None:
            if self._v2:
                self._fail(TABLE, seq, "a refusal no summary speaks for")
            else:
                self.refusals_unsummarised += 1  # sealed before the ledger summarised refusals
        elif before_chain:
            self.unsummarised += 1  # sealed before the ledger kept summaries
        else:
            self._fail(TABLE, seq, "a decision no summary speaks for")

    def finish(self) -> None:
        for seq in sorted(self._pending):
            self._uncovered(seq, before_chain=self._prev is None)
