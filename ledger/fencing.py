"""Fencing across a PostgreSQL failover: after a standby is promoted, writers of the old primary
must not append.

PostgreSQL numbers each promotion with a new *timeline*. ``seal_epoch`` (run by ``sealtrail
standby promote`` on the new primary) seals a ``ledger.epoch`` record stating the timeline the log
continues on. Every writer (``Ledger``) holds a ``Fence``, which the sequencer asks under its lock,
in the sealing transaction, before anything is written (``Fence.check``); nothing is written when it
refuses (``FencedError``, a ``LedgerUnavailableError``: the API answers 503). It refuses when

- the database is in recovery (a standby, or an old primary re-made a standby): a standby cannot
  take writes anyway, this says so plainly;
- the database's timeline is lower than the newest epoch this process has seen (in this database or
  any other it committed to): an old primary that came back as a primary, its log a fork;
- an epoch newer than the timeline this process began on is sealed in the database: the process
  read its state (windows, tip, covered size) from the old primary, whose newest commits the new
  primary may not hold (asynchronous replication); it must be restarted, and a fresh process
  rebuilds from the new primary's log. A process opened on a standby (a warm standby decider)
  began on no timeline: it takes the one it first commits on, since it followed that very log.

What fencing cannot stop: a process that never saw the new primary, writing to an old primary that
came back as a primary with none of the new epochs in its log (both halves of a partition carry on,
each on its own log). Only something that sees both logs catches that: the follower or witness that
checks every checkpoint by a consistency proof. Operations keep an old primary down, or re-make it a
standby of the new one, never let it come back as a primary (docs/standby.md).

The timeline is the one WAL is inserted on now (``pg_walfile_name(pg_current_wal_lsn())``): right
after a promotion ``pg_control_checkpoint()`` still names the old timeline until the next checkpoint
completes. Every function used is executable by any role (the least-privilege app role included).
SQLite has no replication: its fence checks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Connection

from ledger.errors import LedgerError, LedgerUnavailableError
from ledger.records import Record

if TYPE_CHECKING:
    from ledger.append import Ledger

__all__ = ["EPOCH_KIND", "EPOCH_SCHEMA", "Epoch", "Fence", "FencedError", "Role", "Sealed", "newest_epoch",
           "role", "seal_epoch"]

EPOCH_KIND = "ledger.epoch"
EPOCH_SCHEMA = "sealtrail.ledger.epoch/1"


class FencedError(LedgerUnavailableError):
    """A commit refused by the fence; nothing written. ``reason``: ``standby`` | ``old_timeline`` |
    ``superseded``; the timelines and the epoch record's seq are the evidence."""

    def __init__(self, reason: str, message: str, *, timeline: int | None, epoch: int,
                 epoch_seq: int | None) -> None:
        super().__init__(message)
        self.reason, self.timeline, self.epoch, self.epoch_seq = reason, timeline, epoch, epoch_seq


@dataclass(frozen=True)
class Role:
    """A PostgreSQL database as a writer sees it: in recovery (a standby), and the timeline WAL is
    inserted on now (None in recovery, and on SQLite)."""

    in_recovery: bool
    timeline: int | None


@dataclass(frozen=True)
class Epoch:
    """The newest ``ledger.epoch`` record of a log: its seq and the timeline it states."""

    seq: int
    timeline: int


_ROLE_SQL = ("SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN NULL "
             "ELSE pg_walfile_name(pg_current_wal_lsn()) END")
_EPOCH_SQL = (f"SELECT seq, record FROM ledger_entries WHERE kind = '{EPOCH_KIND}' "
              "ORDER BY seq DESC LIMIT 1")


def role(conn: Connection) -> Role:
    """Whether the database is in recovery, and its current timeline (PostgreSQL; SQLite: neither)."""
    if conn.dialect.name != "postgresql":
        return Role(False, None)
    in_recovery, walfile = conn.exec_driver_sql(_ROLE_SQL).one()
    return Role(bool(in_recovery), None if walfile is None else int(str(walfile)[:8], 16))


def _epoch_of(seq: Any, record: Any) -> Epoch:
    try:
        timeline = orjson.loads(bytes(record))["record"]["timeline"]
    except (KeyError, TypeError, ValueError) as exc:
        raise LedgerError(f"the ledger.epoch record at seq {seq} is malformed: {exc!r}") from exc
    if type(timeline) is not int or timeline < 1:
        raise LedgerError(f"the ledger.epoch record at seq {seq} states no timeline: {timeline!r}")
    return Epoch(int(seq), timeline)


def newest_epoch(conn: Connection) -> Epoch | None:
    """The log's newest ``ledger.epoch`` (an index seek on ``(kind, seq)``), or None."""
    row = conn.exec_driver_sql(_EPOCH_SQL).first()
    return None if row is None else _epoch_of(row[0], row[1])


class Fence:
    """One writer's view of the log's epochs; ``check`` runs under the sequencer lock (the
    ``Ledger``'s, so one caller at a time). See the module's docstring for what it refuses."""

    def __init__(self, home: int | None, seen: int = 0) -> None:
        self.home = home  # the timeline this process began on; None: began on a standby (or SQLite)
        self.seen = seen  # the newest epoch timeline this process has seen, in any database
        self._epochs: dict[int, Epoch] = {}  # seq -> parsed epoch (a log holds few)

    @classmethod
    def at_open(cls, conn: Connection) -> Fence:
        """The fence of a writer opening the log on ``conn``'s database now."""
        r = role(conn)
        return cls(None if r.in_recovery else r.timeline)

    def check(self, conn: Connection) -> None:
        """Under the sequencer lock, before anything is written: ``FencedError`` if this process
        must not append to this database (module docstring). One round trip per commit, and one
        index seek; nothing on SQLite."""
        if conn.dialect.name != "postgresql":
            return
        in_recovery, walfile, seq, record = conn.exec_driver_sql(
            f"SELECT r.*, e.* FROM ({_ROLE_SQL}) r LEFT JOIN ({_EPOCH_SQL}) e ON true").one()
        epoch = None
        if seq is not None:
            epoch = self._epochs.get(int(seq))
            if epoch is None:
                epoch = self._epochs[int(seq)] = _epoch_of(seq, record)
            self.seen = max(self.seen, epoch.timeline)
        at = None if epoch is None else epoch.seq
        if in_recovery:
            raise FencedError("standby", "the ledger database is in recovery (a standby, or an old primary "
                              "following the new one): it takes no writes; nothing written",
                              timeline=None, epoch=self.seen, epoch_seq=at)
        timeline = int(str(walfile)[:8], 16)
        if timeline < self.seen:
            raise FencedError("old_timeline", f"the ledger database is on timeline {timeline}, but this "
                              f"process has seen timeline {self.seen} promoted: the database is a superseded "
                              "primary whose log is a fork; nothing written",
                              timeline=timeline, epoch=self.seen, epoch_seq=at)
        if self.home is None:
            self.home = timeline  # a standby's follower, promoted with it: this is its log
        if epoch is not None and epoch.timeline > self.home:
            raise FencedError("superseded", f"timeline {epoch.timeline} was promoted (ledger.epoch at seq "
                              f"{epoch.seq}) after this process began on timeline {self.home}: its state "
                              "was read from the old primary, which may hold commits the new one lost; "
                              "restart the process (it rebuilds from the new primary's log); nothing written",
                              timeline=timeline, epoch=epoch.timeline, epoch_seq=epoch.seq)


@dataclass(frozen=True)
class Sealed:
    """What ``seal_epoch`` did: the epoch in force, and whether this call sealed it."""

    seq: int
    timeline: int
    lsn: str | None
    created: bool


def seal_epoch(ledger: Ledger) -> Sealed:
    """Seal a ``ledger.epoch`` for the timeline the database is on now (on a newly promoted
    primary), with a signed checkpoint; idempotent: when the newest epoch already states this
    timeline, nothing is written. ``FencedError`` on a standby."""
    with ledger.engine.connect() as conn:
        r = role(conn)
        newest = newest_epoch(conn)
    if r.in_recovery or r.timeline is None:
        if r.in_recovery:
            raise FencedError("standby", "the database is still in recovery: promote it first",
                              timeline=None, epoch=0 if newest is None else newest.timeline,
                              epoch_seq=None if newest is None else newest.seq)
        raise LedgerError("epochs are PostgreSQL timelines: this database has none (SQLite)")
    if newest is not None and newest.timeline == r.timeline:
        return Sealed(newest.seq, newest.timeline, None, False)
    timeline = r.timeline

    def body_under_lock(conn: Connection) -> None:
        now = role(conn)
        if now.timeline != timeline:  # promoted again meanwhile: seal that one instead
            raise LedgerUnavailableError(f"the timeline moved from {timeline} to {now.timeline} while "
                                         "sealing its epoch; nothing written, run it again")
        got = newest_epoch(conn)
        if got is not None and got.timeline >= timeline:
            raise LedgerUnavailableError(f"an epoch of timeline {got.timeline} was sealed meanwhile at seq "
                                         f"{got.seq}; nothing written")

    with ledger.engine.connect() as conn:
        promoted_at = str(conn.exec_driver_sql("SELECT pg_current_wal_lsn()::text").scalar_one())
    body = {"schema": EPOCH_SCHEMA, "timeline": timeline, "lsn": promoted_at,
            "previous": None if newest is None else newest.timeline}
    (receipt,) = ledger._commit([Record(EPOCH_KIND, body)], before=body_under_lock, force_checkpoint=True)
    return Sealed(receipt.seq, timeline, promoted_at, True)
