"""Ledger tables, the database engine, and every statement that reads or writes them.

Tables are created only by the Alembic migrations in ``migrations/``; this module holds
their SQLAlchemy metadata, which the migrations import. Merkle nodes are kept at every
``STRATUM``-th level (leaf hashes, level 0, live in ``ledger_entries``): any perfect subtree
is recomputed from at most ``2**(STRATUM-1)`` stored hashes, so a proof reads O(log n) rows
while an append writes about one node row per ``2**STRATUM - 1`` entries.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    create_engine,
    event,
    inspect,
)
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.exc import NoSuchModuleError as _NoSuchModuleError

from ledger.errors import LedgerUnavailableError, SchemaError
from ledger.merkle import node_hash

__all__ = [
    "STRATUM",
    "TABLES",
    "checkpoints",
    "connect",
    "cosignatures",
    "entries",
    "keys",
    "metadata",
    "nodes",
    "payloads",
    "require_schema",
]

log = logging.getLogger(__name__)

STRATUM = 4
SCHEMA_REVISION = "0011"

metadata = MetaData()
# On SQLite a 64-bit INTEGER PRIMARY KEY is the rowid itself: no second index to maintain.
SeqType = BigInteger().with_variant(Integer(), "sqlite")

entries = Table(
    "ledger_entries",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=False),
    Column("kind", String(64), nullable=False),
    Column("record", LargeBinary, nullable=False, comment="RFC 8785 canonical JSON"),
    Column("leaf_hash", LargeBinary(32), nullable=False),
    Column("chain_hash", LargeBinary(32), nullable=False),
    Column("recorded_at", String(27), nullable=False, comment="UTC, YYYY-MM-DDTHH:MM:SS.ffffffZ"),
    Column("trace_id", String(36), nullable=False),
    Index("ix_ledger_entries_trace_id", "trace_id", unique=True),
    Index("ix_ledger_entries_kind_seq", "kind", "seq"),
)

nodes = Table(
    "ledger_nodes",
    metadata,
    Column("level", SmallInteger, primary_key=True, autoincrement=False),
    Column("idx", BigInteger, primary_key=True, autoincrement=False),
    Column("hash", LargeBinary(32), nullable=False),
    sqlite_with_rowid=False,
)

checkpoints = Table(
    "ledger_checkpoints",
    metadata,
    Column("size", SeqType, primary_key=True, autoincrement=False),
    Column("root", LargeBinary(32), nullable=False),
    Column("note", Text, nullable=False),
    Column("key_id", String(8), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

cosignatures = Table(  # revision 0009: witness cosignatures of checkpoints (ledger.cosign)
    "ledger_cosignatures",
    metadata,
    Column("size", SeqType, primary_key=True, autoincrement=False),
    Column("witness", Text, primary_key=True),
    Column("timestamp", BigInteger, nullable=False),
    Column("line", Text, nullable=False),
    Column("received_at", BigInteger, nullable=False),
)

payloads = Table(
    "ledger_payloads",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=True, comment="NULL once purged"),
    Column("first_seq", BigInteger, nullable=False),
    Column("stored_at", BigInteger, nullable=False),
    Column("purged_at", BigInteger, nullable=True),
    Column("purge_seq", BigInteger, nullable=True),
    Index("ix_ledger_payloads_first_seq", "first_seq"),
)

keys = Table(
    "ledger_keys",
    metadata,
    Column("vkey", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("key_id", String(8), nullable=False),
    Column("public_key", LargeBinary(32), nullable=False),
    Column("valid_from_size", BigInteger, nullable=False, unique=True),
    Column("introduced_seq", BigInteger, nullable=False),
)

TABLES = (entries, nodes, checkpoints, payloads, keys)
APPEND_ONLY = ("ledger_entries", "ledger_nodes", "ledger_checkpoints", "ledger_keys")




def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see _sqlite_begin)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=60000")
    # 16 MiB of page cache per connection (SQLite's default is 2 MiB): the randomly keyed B-trees
    # (payload hashes, account keys) touch pages all over the file on every batch, and a miss is a
    # read from the OS. Measured with bench.pipeline (batch 1,024, index on): ~10 us less CPU per
    # decision. Durability is unchanged: the cache holds pages; the commit still writes and fsyncs.
    cur.execute("PRAGMA cache_size=-16384")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def connect(url: str, *, create_file: bool = False) -> Engine:
    """An engine for ``url`` with durable settings (SQLite: WAL + synchronous=FULL).

    A SQLite file is created (``create_file``) with mode 0600, as the signing key is: it holds the
    payment payloads. SQLite gives its ``-wal`` and ``-shm`` files the database file's mode. An
    existing file is never chmod-ed; if group or others may read it, a warning says so, once."""
    path = _sqlite_file(url)
    if path is not None:
        if not path.exists():
            if not create_file:
                raise SchemaError(f"database {path} does not exist (run 'sealtrail init')")
            _create_private(path)
        else:
            _warn_if_shared(path)
    try:
        engine = create_engine(url, pool_pre_ping=not url.startswith("sqlite"))
    except (ArgumentError, _NoSuchModuleError) as exc:
        raise LedgerUnavailableError(f"cannot use database URL {url!r}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for another dialect, memory, or a ``file:`` URI."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1].split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file:") or "://" in path:
        return None
    return Path(path)


def _create_private(path: Path) -> None:
    """An empty file (SQLite takes it as a new database) that only its owner may read."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process made it first: it is theirs to have made right
    except OSError as exc:
        raise LedgerUnavailableError(f"cannot create database file {path}: {exc.strerror}") from exc
    os.close(fd)


_warned: set[Path] = set()


def _warn_if_shared(path: Path) -> None:
    """Log once per file (and process) that group or others may read the database or its WAL."""
    shared = []
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(p.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            shared.append(f"{p} ({mode:04o})")
    key = path.resolve()
    if shared and key not in _warned:
        _warned.add(key)
        log.warning("database files readable beyond their owner: %s; they hold payment payloads: "
                    "chmod 600 them (sealtrail creates new ones 0600 and never changes an existing "
                    "file's mode)", ", ".join(shared))


def require_schema(engine: Engine) -> None:
    """Raise ``SchemaError`` unless the ledger tables exist at the code's revision."""
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            missing = [t.name for t in TABLES if t.name not in names]
            rev = None
            if "alembic_version" in names:
                rev = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except OperationalError as exc:
        raise LedgerUnavailableError(f"cannot reach the database: {exc.orig}") from exc
    if missing:
        raise SchemaError(
            f"database is not migrated: missing tables {', '.join(missing)} "
            "(run 'sealtrail init' or 'alembic upgrade head')"
        )
    if rev != SCHEMA_REVISION:
        raise SchemaError(f"database schema is at revision {rev}, code expects {SCHEMA_REVISION}")


def param(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def insert_rows(conn: Connection, table: Table, columns: Sequence[str], rows: list[Any]) -> None:
    """executemany of plain tuples: the fastest path both drivers offer."""
    if not rows:
        return
    p = param(conn)
    sql = (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({', '.join([p] * len(columns))})"
    )
    conn.exec_driver_sql(sql, rows)


SEQUENCER_LEASE_MS = 10_000
"""PostgreSQL: a sequencer transaction idle this long (its process stopped, paused or cut off
mid-commit) is ended by the server, which frees the lock for the other writers; the stopped
writer's commit then fails when it wakes. A commit's own pauses between statements are
milliseconds."""


SEQUENCER_BUILD_LEASE_MS = 30_000
"""The lease of a commit whose records are made under the lock (``Ledger.append_many(build=)``: a
decider preparing a batch while no other may commit): features, model and rules for up to a
batch run between its statements."""


SEQUENCER_WAIT_CHECK_MS = 1_000
"""PostgreSQL: how often a writer waiting for the sequencer lock looks at the writer holding it
(``end_stuck_writer``)."""

SEQUENCER_STUCK_MS = SEQUENCER_BUILD_LEASE_MS
"""PostgreSQL: a writer holding the sequencer lock whose statement a writer waiting for the lock
has seen stuck sending its result to a client that does not read it, on every look over this
long, is ended by that waiter. The server's idle lease cannot end it: the transaction is not
idle but blocked on the client's socket (a process paused or frozen while reading a large
result, such as a catch-up read under the lock), and the server defers cancels and timeouts
there; only ending the backend frees the lock. The longest lease a writer may hold
(``SEQUENCER_BUILD_LEASE_MS``): a waiter cannot tell which lease the holder took."""

_SEQUENCER_KEY = "hashtext(current_schema() || '/sealtrail.ledger')::bigint"

# The backend holding the sequencer's advisory lock in this database if the server is blocked sending
# it a result, with when its statement began (pg_locks spells a bigint key as its high and low 32 bits).
_HOLDER_IN_CLIENT_WRITE = f"""
SELECT a.pid, a.state_change FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = ({_SEQUENCER_KEY} >> 32) & 4294967295
  AND l.objid::bigint = {_SEQUENCER_KEY} & 4294967295
  AND a.pid <> pg_backend_pid() AND a.state = 'active' AND a.wait_event = 'ClientWrite'
"""


def _sqlstate(exc: OperationalError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def lock_sequencer(conn: Connection, lease_ms: int | None = None) -> None:
    """Make this transaction the log's only writer until it ends.

    PostgreSQL: a transaction-scoped advisory lock, held as a lease: the server ends the
    transaction (and so frees the lock) if it sits idle for ``SEQUENCER_LEASE_MS``, so a writer
    stopped inside its commit cannot hold the log, nor commit when it wakes. A writer stopped
    while the server is still sending it a result is not idle; one that waits for the lock ends
    it once it has seen it stuck so for ``SEQUENCER_STUCK_MS`` (``end_stuck_writer``). A
    ``lock_timeout`` or ``statement_timeout`` the connection sets still bounds the whole wait.
    SQLite: the transaction was opened with BEGIN IMMEDIATE (one writer at a time); a writer
    stopped inside its commit holds the file lock until it resumes or dies. ``lease_ms``: another
    lease than ``SEQUENCER_LEASE_MS``."""
    if conn.dialect.name != "postgresql":
        return
    lease = int(SEQUENCER_LEASE_MS if lease_ms is None else lease_ms)
    conn.exec_driver_sql(f"SET LOCAL idle_in_transaction_session_timeout = {lease}")
    if conn.exec_driver_sql(f"SELECT pg_try_advisory_xact_lock({_SEQUENCER_KEY})").scalar():
        return  # the lock was free: the usual case, one statement
    # Another writer holds it: queue for it, looking at the holder every SEQUENCER_WAIT_CHECK_MS
    # (a lock timeout ends each wait, the savepoint keeps this transaction usable), within the
    # connection's own lock_timeout or statement_timeout, either of which bounded the one blocking
    # statement a wait used to be (milliseconds; 0: none).
    settings = {str(name): str(value) for name, value in conn.exec_driver_sql(
        "SELECT name, setting FROM pg_settings WHERE name IN ('lock_timeout', 'statement_timeout')")}
    lock_ms, statement_ms = int(settings["lock_timeout"]), int(settings["statement_timeout"])
    budget_ms = min((ms for ms in (lock_ms, statement_ms) if ms), default=0)
    began = time.monotonic()
    watch = StuckWriterWatch()
    while True:
        wait_ms = int(SEQUENCER_WAIT_CHECK_MS)
        if budget_ms:
            wait_ms = max(1, min(wait_ms, budget_ms - int((time.monotonic() - began) * 1000)))
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = {wait_ms}")
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_SEQUENCER_KEY})")
            break
        except OperationalError as exc:
            if _sqlstate(exc) != "55P03":  # lock_not_available: the wait timed out
                raise
            if budget_ms and (time.monotonic() - began) * 1000 >= budget_ms:
                raise  # the connection's own timeout has run out, as without the looks
        end_stuck_writer(conn, watch)
    conn.exec_driver_sql("SELECT set_config('lock_timeout', %(v)s, true)", {"v": str(lock_ms)})


class StuckWriterWatch:
    """What a writer waiting for the sequencer lock has seen of its holder: the statement it last
    found blocked sending to its client (backend and statement start), and since when by this
    process's clock. The server says a backend is blocked, not since when, so "stuck for
    ``SEQUENCER_STUCK_MS``" means seen blocked in the same statement on every look over that time."""

    def __init__(self) -> None:
        self.statement: tuple[int, Any] | None = None
        self.since = 0.0

    def saw(self, statement: tuple[int, Any] | None) -> bool:
        """Record one look; True once ``statement`` has been seen blocked for ``SEQUENCER_STUCK_MS``."""
        now = time.monotonic()
        if statement is None or statement != self.statement:
            self.statement, self.since = statement, now
            return False
        return (now - self.since) * 1000 >= SEQUENCER_STUCK_MS


def end_stuck_writer(conn: Connection, watch: StuckWriterWatch) -> int | None:
    """Look at the backend holding the sequencer lock, and end it if ``watch`` has now seen its
    statement blocked sending to its client for ``SEQUENCER_STUCK_MS`` (see there); its transaction
    rolls back and its writer's commit fails when it wakes, as when its lease ends it. The ended
    backend's process id, or None (none stuck so long, gone meanwhile, or it could not be ended:
    logged, and the caller keeps waiting)."""
    with conn.begin_nested():
        # the server keeps one snapshot of pg_stat_activity for a whole transaction: a fresh one
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        row = conn.exec_driver_sql(_HOLDER_IN_CLIENT_WRITE).first()
    if not watch.saw(None if row is None else (int(row[0]), row[1])):
        return None
    pid, began = (int(row[0]), row[1]) if row is not None else (0, None)
    try:
        with conn.begin_nested():
            # only if the server still shows that statement blocked under the lock, looked at in the
            # same statement as the ending: the backend may have resumed, committed and moved on
            # (pg_terminate_backend's one-argument form: every supported server)
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            ended = conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(h.pid) FROM ({_HOLDER_IN_CLIENT_WRITE}) h "
                "WHERE h.pid = %(pid)s AND h.state_change = %(began)s", {"pid": pid, "began": began}
            ).scalar()
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise
        log.warning("the writer holding the ledger's sequencer lock (backend %s) is stuck sending to "
                    "its client, and could not be ended: %s", pid, exc.orig)
        return None
    if not ended:  # no longer stuck, or gone meanwhile
        return None
    log.warning("ended backend %s: it held the ledger's sequencer lock while stuck sending to its "
                "client for over %d ms (its process paused, frozen, or reading too slowly)", pid,
                SEQUENCER_STUCK_MS)
    return pid


@contextmanager
def writer_turn(engine: Engine) -> Iterator[None]:
    """Wait for the log's writer turn in the kernel before asking SQLite for its write lock.

    SQLite makes a writer that finds the file locked sleep and retry (1, 2, 5 ... up to 100 ms
    between tries), however soon the lock is free: with several processes writing one file (``serve
    --workers``) a batch can sleep far longer than the commit it waits for, past a request's
    deadline. An exclusive ``flock`` on ``<database>-writer.lock`` wakes the next writer the moment
    the last one is done; BEGIN IMMEDIATE then finds the file free. The lock file holds nothing;
    the kernel drops the lock when a process dies. Not SQLite on a file (PostgreSQL queues its
    advisory lock itself; memory databases have one connection): nothing to do."""
    path = _sqlite_file(str(engine.url)) if engine.dialect.name == "sqlite" else None
    if path is None:
        yield
        return
    fd = os.open(f"{path}-writer.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class Head(NamedTuple):
    """The log's end as the sequencer sees it under its lock."""

    size: int
    chain: bytes | None  # chain hash of the last entry
    vkey: str | None  # the active key
    checkpoint_size: int
    checkpoint_at: int  # µs since the epoch; 0 before any checkpoint
    recorded_at: str | None  # the last entry's recorded_at


def head(conn: Connection) -> Head:
    """The log's end (size, last chain hash and recorded_at, active key, latest checkpoint size
    and time) in one round trip: the sequencer asks this once per batch, under its lock."""
    row = conn.exec_driver_sql(
        "SELECT (SELECT seq FROM ledger_entries ORDER BY seq DESC LIMIT 1), "
        "(SELECT chain_hash FROM ledger_entries ORDER BY seq DESC LIMIT 1), "
        "(SELECT vkey FROM ledger_keys ORDER BY valid_from_size DESC LIMIT 1), "
        "(SELECT size FROM ledger_checkpoints ORDER BY size DESC LIMIT 1), "
        "(SELECT created_at FROM ledger_checkpoints ORDER BY size DESC LIMIT 1), "
        "(SELECT recorded_at FROM ledger_entries ORDER BY seq DESC LIMIT 1)"
    ).one()
    seq, chain, vkey, cp_size, cp_at, at = row
    return Head(0 if seq is None else int(seq) + 1, None if chain is None else bytes(chain),
                vkey, int(cp_size or 0), int(cp_at or 0), None if at is None else str(at))


def last_of_kind(conn: Connection, kind: str, below: int | None = None) -> tuple[int, bytes] | None:
    """(seq, leaf hash) of the newest entry of ``kind`` (before seq ``below``, if given), or None;
    an index seek on ``(kind, seq)``."""
    p = param(conn)
    sql = f"SELECT seq, leaf_hash FROM ledger_entries WHERE kind = {p}"
    args: tuple[object, ...] = (kind,)
    if below is not None:
        sql += f" AND seq < {p}"
        args = (kind, below)
    row = conn.exec_driver_sql(sql + " ORDER BY seq DESC LIMIT 1", args).first()
    return None if row is None else (int(row[0]), bytes(row[1]))


def tail(conn: Connection) -> tuple[int, bytes | None]:
    """(size, chain hash of the last entry)."""
    row = conn.exec_driver_sql(
        "SELECT seq, chain_hash FROM ledger_entries ORDER BY seq DESC LIMIT 1"
    ).first()
    if row is None:
        return 0, None
    return int(row[0]) + 1, bytes(row[1])


def raw_cursor(conn: Connection) -> Any:
    """The driver's own cursor: streaming scans skip SQLAlchemy's per-row objects."""
    return conn.connection.driver_connection.cursor()  # type: ignore[union-attr]


def first_bad_index_row(conn: Connection, lo: int, hi: int) -> int | None:
    """First seq in ``[lo, hi)`` whose kind/recorded_at/trace_id columns differ from its bytes.

    Runs inside the database: the envelope starts with ``{"kind":"<kind>"`` and ends with
    the fixed 100-byte tail ``"recorded_at":"<27>","trace_id":"<36>","v":1}``; the leaf
    hash already pins those bytes, so comparing the columns with them is enough.
    """
    if conn.dialect.name == "postgresql":
        sql = (
            "SELECT min(seq) FROM ledger_entries WHERE seq >= %s AND seq < %s AND ("
            "substring(record from length(record) - 43 for 36) <> convert_to(trace_id, 'UTF8') OR "
            "substring(record from length(record) - 84 for 27) <> convert_to(recorded_at, 'UTF8') "
            "OR substring(record from 10 for length(kind) + 1) <> convert_to(kind || '\"', 'UTF8'))"
        )
    else:
        sql = (
            "SELECT min(seq) FROM ledger_entries WHERE seq >= ? AND seq < ? AND ("
            "CAST(substr(record, -44, 36) AS TEXT) != trace_id OR "
            "CAST(substr(record, -85, 27) AS TEXT) != recorded_at OR "
            "CAST(substr(record, 10, length(kind)) AS TEXT) != kind OR "
            "substr(record, 10 + length(kind), 1) != X'22')"
        )
    got = conn.exec_driver_sql(sql, (lo, hi)).scalar()
    return None if got is None else int(got)


def specials(conn: Connection, lo: int, hi: int) -> list[tuple[int, str, bytes]]:
    """The ledger's own records (kinds ``ledger.*``) in ``[lo, hi)``, by the kind index."""
    p = param(conn)
    return [
        (int(s), str(k), bytes(r)) for s, k, r in conn.exec_driver_sql(
            "SELECT seq, kind, record FROM ledger_entries WHERE kind >= 'ledger.' "
            f"AND kind < 'ledger/' AND seq >= {p} AND seq < {p} ORDER BY seq", (lo, hi),
        )
    ]


def entry_leaf(conn: Connection, target: int | str) -> tuple[int, bytes] | None:
    """(seq, leaf hash) of the entry with seq ``target`` (an int) or trace id ``target`` (a str)."""
    col = "seq" if isinstance(target, int) else "trace_id"
    row = conn.exec_driver_sql(
        f"SELECT seq, leaf_hash FROM ledger_entries WHERE {col} = {param(conn)}", (target,)
    ).first()
    return None if row is None else (int(row[0]), bytes(row[1]))


def checkpoint_notes(conn: Connection, sizes: Sequence[int]) -> dict[int, str]:
    """The signed notes stored for those tree ``sizes`` that have one."""
    if not sizes:
        return {}
    p = param(conn)
    rows = conn.exec_driver_sql(
        f"SELECT size, note FROM ledger_checkpoints WHERE size IN ({', '.join([p] * len(sizes))})",
        tuple(sizes),
    )
    return {int(size): str(note) for size, note in rows}


def key_history(conn: Connection) -> list[tuple[str, int]]:
    """Every signing key the log has had: (vkey, first tree size it signs alone), oldest first."""
    return [(str(v), int(f)) for v, f in conn.exec_driver_sql(
        "SELECT vkey, valid_from_size FROM ledger_keys ORDER BY valid_from_size")]


def chain_at(conn: Connection, seq: int) -> bytes:
    row = conn.exec_driver_sql(
        f"SELECT chain_hash FROM ledger_entries WHERE seq = {param(conn)}", (seq,)
    ).first()
    if row is None:
        from ledger.errors import DamageError

        raise DamageError("missing entry", seq, f"no entry is stored at seq {seq}")
    return bytes(row[0])


def perfect_hashes(
    conn: Connection, wanted: Iterable[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    """Hashes of perfect subtrees ``(level, index)``, folded up from the stored strata.

    One query per stratum touched; raises ``LookupError`` if a needed row is missing.
    """
    by_base: dict[int, list[tuple[int, int, int, int]]] = {}
    for level, idx in set(wanted):
        base = level - level % STRATUM
        span = 1 << (level - base)
        by_base.setdefault(base, []).append((level, idx, idx * span, idx * span + span))
    p = param(conn)
    out: dict[tuple[int, int], bytes] = {}
    for base, items in by_base.items():
        args: list[int] = []
        if base == 0:
            where = " OR ".join([f"(seq >= {p} AND seq < {p})"] * len(items))
            sql = f"SELECT seq, leaf_hash FROM ledger_entries WHERE {where}"
            for _, _, lo, hi in items:
                args += [lo, hi]
        else:
            # level inside every OR term: each term is then one primary-key range scan
            where = " OR ".join([f"(level = {p} AND idx >= {p} AND idx < {p})"] * len(items))
            sql = f"SELECT idx, hash FROM ledger_nodes WHERE {where}"
            for _, _, lo, hi in items:
                args += [base, lo, hi]
        got = {int(i): bytes(h) for i, h in conn.exec_driver_sql(sql, tuple(args))}
        for level, idx, lo, hi in items:
            try:
                row = [got[i] for i in range(lo, hi)]
            except KeyError as exc:
                raise LookupError(f"missing stored hash at level {base}, index {exc}") from exc
            while len(row) > 1:
                row = [node_hash(row[i], row[i + 1]) for i in range(0, len(row), 2)]
            out[(level, idx)] = row[0]
    return out
