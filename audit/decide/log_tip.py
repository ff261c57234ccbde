"""Several deciders on one log: a batch is sealed only on the feature state it was prepared on.

Each decider (process, or host on PostgreSQL) keeps the feature state in memory and brings it up
to the log before it prepares a batch, from the state deltas the others sealed
(``audit.state.replay.catch_up``). Between that catch-up and its commit another decider may
commit: the batch's features would then miss that commit's payments, while the ledger orders
the batch after them. So the commit carries a precondition that the database checks inside the
sealing transaction, under the sequencer lock: the newest ``state.delta`` before the batch is
the one the decider's state ends with (``tip``). If not, nothing is written and the batch is
refused with ``StateSuperseded``; the pipeline takes back what the batch added, catches up and
prepares it again. A decider that was paused (a stopped process, a long GC pause, a partitioned
host) and wakes with a stale state therefore never commits on it: the check is the database's,
not the process's view of itself.

The check is one index seek on ``(kind, seq)`` per commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection

from audit.errors import StateSuperseded
from audit.state.delta import DELTA_KIND
from ledger import store
from ledger.records import Receipt

__all__ = ["ACTIVATION_KINDS", "StateSuperseded", "activations_between", "fenced", "newest_delta"]

ACTIVATION_KINDS = ("ruleset.activated", "ruleset.bootstrapped")  # a record that changes the active rules

Effect = Callable[[Connection, list[Receipt]], None]


def newest_delta(conn: Connection, below: int | None = None) -> int | None:
    """Seq of the newest ``state.delta`` (before seq ``below``, if given); None if there is none."""
    got = store.last_of_kind(conn, DELTA_KIND, below)
    return None if got is None else got[0]


def activations_between(conn: Connection, lo: int, hi: int) -> int:
    """How many records that change the active ruleset sit at seq ``lo`` .. ``hi - 1``."""
    p = store.param(conn)
    n = conn.exec_driver_sql(
        f"SELECT COUNT(*) FROM ledger_entries WHERE kind IN ({p}, {p}) AND seq >= {p} AND seq < {p}",
        (*ACTIVATION_KINDS, lo, hi)).scalar_one()
    return int(n)


def fenced(tip: Callable[[], int | None], since: Callable[[], int | None], then: Effect | None) -> Effect:
    """The ``alongside`` of a commit prepared on a state ending at delta ``tip()``, with the rules
    active when the log was ``since()`` entries long (both read when the commit runs, under the
    sequencer lock): ``StateSuperseded`` unless the newest delta before the batch is that one and
    no ruleset was activated since; then ``then``, if given."""
    def check(conn: Connection, receipts: Sequence[Receipt]) -> None:
        expected = tip()
        first = receipts[0].seq
        found = newest_delta(conn, first)
        if found != expected:
            raise StateSuperseded(expected, found)
        lo = since()
        if lo is not None and lo < first and activations_between(conn, lo, first):
            raise StateSuperseded(expected, found, f"a ruleset was activated at or after seq {lo}, after "
                                                   "this batch's rules were chosen: nothing written")
        if then is not None:
            then(conn, list(receipts))
    return check
