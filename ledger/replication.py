"""A ledger database under PostgreSQL streaming replication: what it is now (primary or hot standby,
its timeline, how far its standbys or it lag) and ending a standby's recovery.

Read by ``sealtrail standby status`` and ``sealtrail standby promote`` (``api.cli.standby``), and by
the failover drill (``bench.failover``). SQLite has no replication: ``status`` says so and
``promote`` refuses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from ledger import store
from ledger.errors import LedgerError, LedgerUnavailableError
from ledger.fencing import Epoch, newest_epoch, role

__all__ = ["ReplicationStatus", "StandbyRow", "promote", "status"]


@dataclass(frozen=True)
class StandbyRow:
    """One standby of a primary (``pg_stat_replication``); lags in bytes of WAL behind the primary's
    current position. A role without ``pg_read_all_stats`` sees the LSNs as unknown (None)."""

    name: str
    state: str | None
    sync_state: str | None
    sent_lag_bytes: int | None
    flush_lag_bytes: int | None
    replay_lag_bytes: int | None
    replay_lag_s: float | None


@dataclass(frozen=True)
class ReplicationStatus:
    """A ledger database now. On a standby: the WAL received and replayed, and the age of the last
    transaction replayed; on a primary: its standbys. ``epoch``: the log's newest ``ledger.epoch``."""

    dialect: str
    in_recovery: bool
    timeline: int | None  # the timeline WAL is inserted on (a primary); None on a standby
    size: int
    epoch: Epoch | None
    synchronous_standby_names: str | None
    receive_lsn: str | None = None
    replay_lsn: str | None = None
    replay_lag_bytes: int | None = None  # received, not yet replayed
    last_replay_age_s: float | None = None  # now - the commit time of the last transaction replayed
    receiver: str | None = None  # pg_stat_wal_receiver.status (streaming, ...); None: no receiver runs
    standbys: tuple[StandbyRow, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["role"] = "standby" if self.in_recovery else "primary"
        e = self.epoch
        doc["epoch"] = None if e is None else {"seq": e.seq, "timeline": e.timeline}
        doc["standbys"] = [asdict(s) for s in self.standbys]
        return doc


def status(engine: Engine) -> ReplicationStatus:
    """The database's role, timeline, newest epoch and replication lag, read now."""
    try:
        with engine.connect() as conn:
            r = role(conn)
            size = store.tail(conn)[0]
            epoch = newest_epoch(conn)
            if conn.dialect.name != "postgresql":
                return ReplicationStatus(conn.dialect.name, False, None, size, epoch, None)
            names = str(conn.exec_driver_sql("SHOW synchronous_standby_names").scalar_one())
            if r.in_recovery:
                recv, replay, lag, age = conn.exec_driver_sql(
                    "SELECT pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, "
                    "pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), "
                    "extract(epoch FROM now() - pg_last_xact_replay_timestamp())").one()
                receiver = conn.exec_driver_sql("SELECT status FROM pg_stat_wal_receiver").scalar()
                return ReplicationStatus(
                    "postgresql", True, None, size, epoch, names, recv, replay,
                    None if lag is None else int(lag), None if age is None else float(age),
                    None if receiver is None else str(receiver))
            rows = conn.exec_driver_sql(
                "SELECT application_name, state, sync_state, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn), "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn), "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), "
                "extract(epoch FROM replay_lag) FROM pg_stat_replication ORDER BY application_name").all()
    except DBAPIError as exc:
        raise LedgerUnavailableError(f"cannot read the ledger database's replication state: "
                                     f"{exc.orig}") from exc
    standbys = tuple(StandbyRow(str(a), _s(st), _s(sy), _i(se), _i(fl), _i(rp),
                                None if lag is None else float(lag))
                     for a, st, sy, se, fl, rp, lag in rows)
    return ReplicationStatus("postgresql", False, r.timeline, size, epoch, names, standbys=standbys)


def promote(engine: Engine, wait_s: int = 60) -> bool:
    """End the standby's recovery (``pg_promote``, waiting up to ``wait_s`` for it to accept
    writes). True if this call promoted it, False if it was a primary already; ``LedgerError`` if
    it did not finish in time or the role may not promote (superuser, or ``GRANT EXECUTE ON
    FUNCTION pg_promote`` to it; ``pg_ctl promote`` on the host does the same)."""
    if engine.dialect.name != "postgresql":
        raise LedgerError("promotion is PostgreSQL's: this ledger database has no standby")
    try:
        with engine.connect() as conn:
            if not role(conn).in_recovery:
                return False
            done = conn.exec_driver_sql("SELECT pg_promote(true, %s)", (int(wait_s),)).scalar_one()
            conn.commit()
    except DBAPIError as exc:
        raise LedgerError(f"promoting the standby failed: {exc.orig}") from exc
    if not done:
        raise LedgerError(f"the standby did not finish its promotion within {wait_s} s")
    return True


def _s(v: object) -> str | None:
    return None if v is None else str(v)


def _i(v: Any) -> int | None:
    return None if v is None else int(v)
