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

The check is one statement per commit (index seeks on ``(kind, seq)``), which also reads the
newest summary the batch's own summary links to.
"""

from __future__ import annotations

from collections.abc import Collection

import orjson
from sqlalchemy import Connection

from audit.decide.record import DECISION_KIND
from audit.decide.summary import SUMMARY_KIND
from audit.errors import StateSuperseded
from audit.screening.clearance_state import CLEARANCE_KIND
from audit.state.delta import DELTA_KIND
from ledger import store

__all__ = ["ACTIVATION_KINDS", "StateSuperseded", "activations_between", "fence", "newest_delta"]

ACTIVATION_KINDS = ("ruleset.activated", "ruleset.bootstrapped")  # a record that changes the active rules

def _clearance_steps(conn: Connection, after: int, below: int, used: Collection[int] | None) -> int | None:
    """Seq of the first clearance record at ``after`` < seq < ``below`` that may change a clearance in
    ``used`` (a step naming one of them, or a record that cannot be read as a step; with ``used``
    None, any), or None. Proposals and steps of other clearances leave the batch's cleared hits as
    they were checked: an officer at work on other customers refuses no batch."""
    p = store.param(conn)
    if used is None:
        got = store.last_of_kind(conn, CLEARANCE_KIND, below)
        return got[0] if got is not None and got[0] > after else None
    rows = conn.exec_driver_sql(f"SELECT seq, record FROM ledger_entries WHERE kind = {p} AND seq > {p} "
                                f"AND seq < {p} ORDER BY seq", (CLEARANCE_KIND, after, below)).all()
    for seq, raw in rows:
        try:
            body = orjson.loads(raw).get("record")
        except (orjson.JSONDecodeError, AttributeError):
            return int(seq)
        if not isinstance(body, dict):
            return int(seq)
        target = body.get("clearance")
        if body.get("action") != "proposed" and (type(target) is not int or target in used):
            return int(seq)
    return None


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


def fence(conn: Connection, first: int, tip: int | None, since: int | None,
          cleared_at: int | None = None, used: Collection[int] | None = None) -> tuple[int, bytes] | None:
    """Under the sequencer lock, before a batch sealed from seq ``first`` on a state ending at
    delta ``tip``, with the rules active when the log was ``since`` entries long:
    ``StateSuperseded`` unless the newest delta before the batch is ``tip`` and no ruleset was
    activated since, nor (for a batch that cleared a hit by the clearances as of the clearance
    record at ``cleared_at``) a clearance record sealed after that one that steps on a clearance
    the batch used (``used``: their proposals' seqs; None: any record after it): a revocation
    sealed meanwhile must clear nothing in it. Returns the newest ``decision.summary``'s (seq,
    leaf hash), or None: the batch's summary links to it. Both read in one statement (index seeks
    on ``(kind, seq)``)."""
    p = store.param(conn)
    newest = f"FROM ledger_entries WHERE kind = {p} AND seq < {p} ORDER BY seq DESC LIMIT 1"
    found, decision, summary_seq, summary_leaf = conn.exec_driver_sql(
        f"SELECT (SELECT seq {newest}), (SELECT seq {newest}), (SELECT seq {newest}), "
        f"(SELECT leaf_hash {newest})",
        (DELTA_KIND, first, DECISION_KIND, first, SUMMARY_KIND, first, SUMMARY_KIND, first)).one()
    found = None if found is None else int(found)
    if found != tip:
        raise StateSuperseded(tip, found)
    if since is not None and decision is not None and int(decision) >= since:
        # decisions the state does not hold, sealed with no delta (a writer of an earlier release)
        raise StateSuperseded(tip, found, f"a decision was sealed at seq {int(decision)} with no state delta "
                                          "after this batch's state was read: nothing written")
    if since is not None and since < first and activations_between(conn, since, first):
        raise StateSuperseded(tip, found, f"a ruleset was activated at or after seq {since}, after "
                                          "this batch's rules were chosen: nothing written")
    if cleared_at is not None:
        stepped = _clearance_steps(conn, cleared_at, first, used)
        if stepped is not None:
            raise StateSuperseded(tip, found, f"a clearance record was sealed at seq {stepped}, after this "
                                              "batch cleared a hit by the clearances as of seq "
                                              f"{cleared_at}: nothing written")
    return None if summary_seq is None else (int(summary_seq), bytes(summary_leaf))
