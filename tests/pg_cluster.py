"""A throwaway PostgreSQL cluster that a test owns: it may stop, crash and restart it at will.

The shared server behind ``SEALTRAIL_TEST_POSTGRES_URL`` must never be stopped (other tests use
it), so a test about the database going away starts its own cluster from the Debian packages'
binaries (``/usr/lib/postgresql/<version>/bin``, the newest; ``pg_config --bindir`` elsewhere):
a fresh ``initdb`` in a temporary directory, trust authentication, listening on 127.0.0.1 only
on a free port, its unix socket in that same directory. ``initdb`` and ``postgres`` refuse to
run as root; under root the cluster is run as the ``postgres`` system user (``runuser``), in a
directory that user owns.

    reason = pg_cluster.unavailable()  # None, or why no cluster can be started here
    if reason:
        pytest.skip(reason)
    with pg_cluster.Cluster.create() as pg:  # started; removed, data and all, on exit
        url = pg.url  # postgresql+psycopg://postgres@127.0.0.1:PORT/postgres
        pg.stop(mode="immediate")  # a crash: connections cut, recovery on the next start
        pg.start()  # the same data, the same port

Streaming replication (a hot standby on another port of the same machine):

    with pg_cluster.Cluster.create(replication=True) as primary:  # wal_level=replica, senders, slots
        with primary.standby("site_b") as standby:  # slot site_b, pg_basebackup -R -S site_b, started
            primary.set_synchronous("site_b")  # synchronous_standby_names, reloaded ("" turns it off)
            primary.wait_streaming("site_b", sync=True)
            primary.replication()  # pg_stat_replication rows: state, sync_state, LSNs, replay lag
            standby.replay_lag_bytes()  # received but not yet replayed, from pg_last_wal_*_lsn()
            primary.stop(mode="immediate")
            standby.promote()  # pg_ctl promote: the standby is a primary on the next timeline

Every command's output goes to ``log`` (the server log included) and is quoted in the error
(``ClusterError``) when a step fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql as pgsql

__all__ = ["Cluster", "ClusterError", "Replica", "bindir", "unavailable"]

SYSTEM_USER = "postgres"  # whom the cluster runs as when the test runs as root
START_TIMEOUT_S = 30
# a primary that streams to standbys: WAL for them, a few senders and slots, hints for pg_rewind
REPLICATION_CONF = """
wal_level = replica
max_wal_senders = 8
max_replication_slots = 8
wal_keep_size = 256MB
hot_standby = on
wal_log_hints = on
hot_standby_feedback = on
wal_receiver_status_interval = 1s
"""


class ClusterError(RuntimeError):
    """A cluster step (initdb, start, stop) failed; the message holds its output and the log's tail."""


def bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (the newest Debian version), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                   key=lambda p: _version(p.parent.parent.name))
    if found:
        return found[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        d = Path(out.stdout.strip())
        if out.returncode == 0 and (d / "pg_ctl").exists() and (d / "initdb").exists():
            return d
    return None


def unavailable() -> str | None:
    """Why a cluster cannot be started here (a reason to skip with), or None when it can."""
    if bindir() is None:
        return ("no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql "
                "or pg_config --bindir")
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root, and without runuser the cluster cannot run as another user"
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return f"running as root, and there is no {SYSTEM_USER!r} user to run the cluster as"
    return None


@dataclass
class Cluster:
    """One initialised cluster in ``directory`` (data, socket, log), listening on 127.0.0.1:``port``."""

    directory: Path
    bin: Path
    port: int
    as_user: str | None  # run through runuser as this user (the test runs as root); None: as ourselves
    name: str = "primary"  # cluster_name: the application_name its WAL receiver reports upstream
    standbys: list[Cluster] = field(default_factory=list, repr=False)  # made by standby(), closed with us

    @classmethod
    def create(cls, *, replication: bool = False, name: str = "primary") -> Cluster:
        """initdb in a new temporary directory, then start; ``close()`` removes it all.

        ``replication``: configured as a streaming primary (``REPLICATION_CONF``); initdb's
        pg_hba.conf already trusts replication connections from 127.0.0.1."""
        reason = unavailable()
        if reason:
            raise ClusterError(reason)
        c = cls._new(name)
        try:
            c._run("initdb", "-D", str(c.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                   "--no-instructions")
            if replication:
                with (c.data / "postgresql.conf").open("a", encoding="utf-8") as f:
                    f.write(REPLICATION_CONF)
            c.port = _free_port()
            c.start()
        except BaseException:
            c.close()
            raise
        return c

    @classmethod
    def _new(cls, name: str) -> Cluster:
        """An empty temporary directory the cluster's user owns (nothing started)."""
        d = bindir()
        assert d is not None
        directory = Path(tempfile.mkdtemp(prefix=f"sealtrail-pg-{name}-"))
        as_user = None
        if os.geteuid() == 0:
            as_user = SYSTEM_USER
            user = pwd.getpwnam(SYSTEM_USER)
            os.chown(directory, user.pw_uid, user.pw_gid)
        return cls(directory, d, 0, as_user, name)

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the cluster's ``postgres`` database, as its superuser."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def conninfo(self) -> str:
        """The libpq connection string of the ``postgres`` database (what psycopg connects with)."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def start(self) -> None:
        """Start (or start again) on the same data and port; returns once it accepts connections."""
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.directory} -c cluster_name={self.name}")
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", str(START_TIMEOUT_S), "-o", opts)

    def stop(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server: ``fast`` ends every session and shuts down cleanly; ``immediate`` is a
        crash (no shutdown checkpoint; the next start recovers from the WAL)."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", str(START_TIMEOUT_S))

    def running(self) -> bool:
        return self._pg_ctl_status() == 0

    # -- replication ---------------------------------------------------------------------

    def sql(self, statement: str | pgsql.Composable, *args: Any) -> list[tuple[Any, ...]]:
        """Run one statement (autocommit, as the superuser) and return its rows ([] for none)."""
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(statement, args or None)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description is not None else []

    def create_slot(self, slot: str) -> None:
        """A physical replication slot: the primary keeps the WAL its standby has not received."""
        self.sql("SELECT pg_create_physical_replication_slot(%s)", slot)

    def standby(self, name: str = "standby", *, slot: str | None = None) -> Cluster:
        """A hot standby of this primary on a free port: a replication slot (``slot``, default
        ``name``), ``pg_basebackup -R -S <slot> -X stream`` into a new directory (``-R`` writes
        ``primary_conninfo`` and ``standby.signal``), started with ``cluster_name`` ``name``.
        Closed (and removed) with this cluster, or by its own ``close()``."""
        slot = slot or name
        self.create_slot(slot)
        s = type(self)._new(name)
        try:
            s._run("pg_basebackup", "-D", str(s.data), "-h", "127.0.0.1", "-p", str(self.port),
                   "-U", "postgres", "-R", "-S", slot, "-X", "stream", "-c", "fast", "--no-sync")
            s.port = _free_port()
            s.start()
        except BaseException:
            s.close()
            raise
        self.standbys.append(s)
        return s

    def follow(self, primary: Cluster, *, slot: str | None = None) -> None:
        """Make this stopped cluster (an old primary) a standby of ``primary``: its data taken
        afresh by ``pg_basebackup -R`` (what it wrote after the fork is gone, as it must be), then
        started; it can never come back as a primary on its old timeline."""
        if self.running():
            self.stop(mode="fast")
        slot = slot or self.name
        primary.create_slot(slot)
        shutil.rmtree(self.data)
        self._run("pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(primary.port),
                  "-U", "postgres", "-R", "-S", slot, "-X", "stream", "-c", "fast", "--no-sync")
        self.start()

    def set_synchronous(self, names: str) -> None:
        """``synchronous_standby_names`` (``""``: asynchronous), then a reload: a commit waits
        for (returns after) the named standby's flush of its WAL from the next commit on."""
        self.sql(pgsql.SQL("ALTER SYSTEM SET synchronous_standby_names = {}").format(pgsql.Literal(names)))
        self.sql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.sql("SHOW synchronous_standby_names")[0][0] != names:
            if time.monotonic() > deadline:
                raise ClusterError(f"synchronous_standby_names did not become {names!r} after a reload")
            time.sleep(0.02)

    def replication(self) -> list[Replica]:
        """This primary's standbys as ``pg_stat_replication`` shows them now."""
        rows = self.sql(
            "SELECT application_name, state, sync_state, pid, "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn), "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn), "
            "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), "
            "extract(epoch FROM replay_lag) FROM pg_stat_replication ORDER BY application_name")
        return [Replica(str(a), str(st), str(sy), int(pid), int(sent or 0), int(fl or 0), int(rp or 0),
                        None if lag is None else float(lag))
                for a, st, sy, pid, sent, fl, rp, lag in rows]

    def wait_streaming(self, name: str, *, sync: bool | None = None, caught_up: bool = False,
                       timeout_s: float = START_TIMEOUT_S) -> Replica:
        """Wait until standby ``name`` streams (``sync``: with sync_state ``sync`` / ``async``;
        ``caught_up``: having replayed every byte of WAL written so far)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = [r for r in self.replication() if r.name == name and r.state == "streaming"]
            if got and (sync is None or (got[0].sync_state == "sync") == sync) and (
                    not caught_up or got[0].replay_lag_bytes == 0):
                return got[0]
            if time.monotonic() > deadline:
                raise ClusterError(f"standby {name!r} not streaming as asked within {timeout_s} s: "
                                   f"{self.replication()}")
            time.sleep(0.02)

    def in_recovery(self) -> bool:
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])

    def replay_lag_bytes(self) -> int:
        """On a standby: WAL received but not yet replayed (``pg_last_wal_receive_lsn()`` minus
        ``pg_last_wal_replay_lsn()``)."""
        row = self.sql("SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())")
        return int(row[0][0] or 0)

    def replay_lsn(self) -> str | None:
        """On a standby: the last WAL position replayed (None on a primary)."""
        return self.sql("SELECT pg_last_wal_replay_lsn()::text")[0][0]  # type: ignore[no-any-return]

    def timeline(self) -> int:
        """The timeline of the newest checkpoint (``pg_control_checkpoint()``)."""
        return int(self.sql("SELECT timeline_id FROM pg_control_checkpoint()")[0][0])

    def promote(self) -> None:
        """``pg_ctl promote -w``: the standby ends recovery and accepts writes on a new timeline."""
        self._run("pg_ctl", "promote", "-D", str(self.data), "-w", "-t", str(START_TIMEOUT_S))

    def walsender_pid(self, name: str) -> int:
        """On a primary: the pid of the WAL sender serving standby ``name``."""
        for r in self.replication():
            if r.name == name:
                return r.pid
        raise ClusterError(f"no WAL sender for standby {name!r}: {self.replication()}")

    def walreceiver_pid(self) -> int:
        """On a standby: the pid of its WAL receiver."""
        rows = self.sql("SELECT pid FROM pg_stat_wal_receiver")
        if not rows:
            raise ClusterError("no WAL receiver runs on this cluster")
        return int(rows[0][0])

    @staticmethod
    def freeze(pid: int) -> None:
        """SIGSTOP a server process (a WAL sender or receiver): replication stalls, the rest runs."""
        os.kill(pid, signal.SIGSTOP)

    @staticmethod
    def thaw(pid: int) -> None:
        os.kill(pid, signal.SIGCONT)

    def close(self) -> None:
        """Stop the server if it runs (immediate: nothing is kept) and remove the directory; its
        standbys first."""
        for s in self.standbys:
            s.close()
        self.standbys.clear()
        if self.data.exists() and self._pg_ctl_status() == 0:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", check=False)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pg_ctl_status(self) -> int:
        return self._run("pg_ctl", "status", "-D", str(self.data), check=False).returncode

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin / tool), *args]
        if self.as_user is not None:
            argv = ["runuser", "-u", self.as_user, "--", *argv]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # no PGDATA, PGPORT...
        # cwd: a directory the cluster's user may enter (runuser keeps ours, maybe root's private one)
        done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=self.directory,
                              env=env, stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S + 30)
        if check and done.returncode != 0:
            raise ClusterError(f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout}"
                               f"{done.stderr}\nserver log:\n{self._log_tail()}")
        return done

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


@dataclass(frozen=True)
class Replica:
    """One row of a primary's ``pg_stat_replication``; the lags in bytes of WAL behind the
    primary's current position (sent, flushed to the standby's disk, replayed there)."""

    name: str  # application_name (the standby's cluster_name)
    state: str  # streaming, catchup, ...
    sync_state: str  # sync | async | potential | quorum
    pid: int  # the WAL sender's
    sent_lag_bytes: int
    flush_lag_bytes: int
    replay_lag_bytes: int
    replay_lag_s: float | None


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())
