"""PostgreSQL restore drill: base backup + continuous WAL archive -> point-in-time restore ->
the restored ledger verified and proved to extend a checkpoint held from before.

    python tools/pg_backup_drill.py [--records N]

Runs end to end on throwaway clusters (``tests/pg_cluster.py``: the Debian packages' server
binaries, 127.0.0.1, a temporary directory removed afterwards): a cluster with ``archive_mode=on``
and an ``archive_command`` copying each WAL segment into an archive directory; a ledger
(migrations, genesis) with N records; a checkpoint note held; ``pg_basebackup``; N more records
and a named restore point (``pg_create_restore_point``); N more after it. Then the base backup
is restored into a new data directory with ``restore_command``, ``recovery_target_name`` and
``recovery.signal``, started on another port, and checked: ``ledger verify`` in full, its size
exactly what was committed at the restore point, and an RFC 9162 proof that it extends the held
checkpoint. Prints the timings. The steps are the runbook's (docs/backups.md); the functions are
what ``tests/ledger/test_pitr.py`` runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import pwd
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script from a checkout: the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, create_engine

from tests.pg_cluster import Cluster, ClusterError

if TYPE_CHECKING:
    from ledger.append import Ledger

__all__ = ["Drill", "base_backup", "drill", "enable_archiving", "restore", "restore_point", "wait_archived"]

ORIGIN = "drill.sealtrail/ledger"
WAIT_S = 60


def _run_as(pg: Cluster, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A command as the cluster's user (``runuser`` when we are root), failing with its output."""
    if pg.as_user is not None:
        argv = ["runuser", "-u", pg.as_user, "--", *argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=pg.directory, env=env,
                          stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        raise ClusterError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def _own(pg: Cluster, path: Path) -> None:
    if pg.as_user is not None:
        user = pwd.getpwnam(pg.as_user)
        os.chown(path, user.pw_uid, user.pw_gid)


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def admin_engine(pg: Cluster) -> Engine:
    return create_engine(pg.url, isolation_level="AUTOCOMMIT")


def enable_archiving(pg: Cluster, archive: Path) -> None:
    """``archive_mode=on`` with an ``archive_command`` copying each finished WAL segment into
    ``archive`` (never over a segment already there), then a restart (archive_mode needs one)."""
    archive.mkdir(mode=0o700)
    _own(pg, archive)
    command = f"test ! -f {shlex.quote(str(archive))}/%f && cp %p {shlex.quote(str(archive))}/%f"
    engine = admin_engine(pg)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("ALTER SYSTEM SET wal_level = 'replica'")
            conn.exec_driver_sql("ALTER SYSTEM SET archive_mode = 'on'")
            # %%: the driver reads % as its placeholder even without parameters
            setting = _sql_literal(command).replace("%", "%%")
            conn.exec_driver_sql(f"ALTER SYSTEM SET archive_command = {setting}")
    finally:
        engine.dispose()
    pg.stop()
    pg.start()


def base_backup(pg: Cluster, dest: Path) -> float:
    """``pg_basebackup`` of ``pg`` into ``dest`` (plain format, WAL streamed in, a fast checkpoint);
    the seconds it took."""
    started = time.perf_counter()
    _run_as(pg, [str(pg.bin / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres",
                 "-D", str(dest), "-X", "stream", "-c", "fast"])
    return time.perf_counter() - started


def restore_point(engine: Engine, name: str) -> str:
    """A named restore point now (what was committed before it is what a restore to it holds);
    the WAL file it lies in, switched out so the archiver takes it."""
    with engine.connect() as conn:
        lsn = conn.exec_driver_sql("SELECT pg_create_restore_point(%s)", (name,)).scalar()
        walfile = str(conn.exec_driver_sql("SELECT pg_walfile_name(%s)", (lsn,)).scalar())
        conn.exec_driver_sql("SELECT pg_switch_wal()")
        conn.commit()
    return walfile


def wait_archived(engine: Engine, walfile: str, clock: Callable[[], float] = time.monotonic) -> None:
    """Return once the archiver has copied ``walfile`` (or a later one); fail on its first error."""
    deadline = clock() + WAIT_S
    while True:
        with engine.connect() as conn:
            done, failed, failed_wal = conn.exec_driver_sql(
                "SELECT last_archived_wal, failed_count, last_failed_wal FROM pg_stat_archiver").one()
        if done is not None and str(done) >= walfile:
            return
        if failed:
            raise ClusterError(f"archive_command failed ({failed} times, last on {failed_wal})")
        if clock() > deadline:
            raise ClusterError(f"WAL file {walfile} not archived after {WAIT_S}s (last: {done})")
        time.sleep(0.05)  # polling a server-side counter: there is nothing to wait on


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def restore(like: Cluster, base: Path, archive: Path, target_name: str) -> tuple[Cluster, float]:
    """The base backup ``base`` restored into a new cluster directory, replayed from ``archive`` up
    to the restore point ``target_name`` and promoted; started on a free port. The caller closes
    it. Returns it and the seconds from the copy to accepting writes."""
    started = time.perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="sealtrail-pg-restore-"))
    _own(like, directory)
    pg = Cluster(directory, like.bin, _free_port(), like.as_user)
    try:
        _run_as(pg, ["cp", "-a", str(base), str(pg.data)])
        with (pg.data / "postgresql.auto.conf").open("a", encoding="utf-8") as conf:
            fetch = f"cp {shlex.quote(str(archive))}/%f %p"
            conf.write(f"\n# restore drill\nrestore_command = {_sql_literal(fetch)}\n"
                       f"recovery_target_name = {_sql_literal(target_name)}\n"
                       "recovery_target_action = 'promote'\n"
                       "archive_mode = 'off'\n")  # the restored copy must not write into the archive
        signal = pg.data / "recovery.signal"
        signal.touch()
        _own(pg, signal)
        pg.start()
        _wait_promoted(pg)
    except BaseException:
        pg.close()
        raise
    return pg, time.perf_counter() - started


def _wait_promoted(pg: Cluster, clock: Callable[[], float] = time.monotonic) -> None:
    """Return once recovery reached its target and the server takes writes."""
    from sqlalchemy.exc import OperationalError

    deadline = clock() + WAIT_S
    engine = admin_engine(pg)
    try:
        while True:
            try:
                with engine.connect() as conn:
                    if not conn.exec_driver_sql("SELECT pg_is_in_recovery()").scalar():
                        return
            except OperationalError as exc:
                if not pg.running():
                    log = pg.log.read_text(errors="replace")[-4000:] if pg.log.exists() else ""
                    raise ClusterError(f"the restored server stopped during recovery:\n{log}") from exc
            if clock() > deadline:
                raise ClusterError(f"the restored server was still in recovery after {WAIT_S}s")
            time.sleep(0.05)  # polling the server's recovery state
    finally:
        engine.dispose()


@dataclass
class Drill:
    """What a drill did and measured; ``restored`` is running until the drill's context ends."""

    keys: Path
    held_note: str  # a checkpoint signed before the base backup
    target_size: int  # entries committed when the restore point was made
    live_size: int  # entries in the live ledger at the end (more than the target)
    after_note: str  # a checkpoint signed after the restore point (the restored ledger is older)
    restored: Cluster
    base_backup_seconds: float
    restore_seconds: float


def _fill(ledger: Ledger, n: int, tag: str) -> None:
    from ledger import Record

    for start in range(0, n, 500):
        ledger.append_many([Record("drill.synthetic", {"n": i, "phase": tag}, payload=f"{tag} {i}".encode())
                            for i in range(start, min(n, start + 500))])


@contextmanager
def drill(records: int = 1000, target_name: str = "drill") -> Iterator[Drill]:
    """The whole drill on throwaway clusters (removed on exit): see the module's docstring."""
    import migrations
    from ledger import database

    with ExitStack() as stack:
        live = stack.enter_context(Cluster.create())
        enable_archiving(live, live.directory / "archive")
        keys = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sealtrail-drill-keys-")))
        engine = database.open_engine(live.url)
        stack.callback(engine.dispose)
        migrations.upgrade(engine)
        ledger = database.initialise(engine, keys / "signing.key", ORIGIN).ledger
        _fill(ledger, records, "before-base-backup")
        held = ledger.checkpoint().note
        base = live.directory / "base"
        base_seconds = base_backup(live, base)
        _fill(ledger, records, "before-restore-point")
        ledger.checkpoint()
        target_size = ledger.size()
        admin = admin_engine(live)
        stack.callback(admin.dispose)
        walfile = restore_point(admin, target_name)
        _fill(ledger, records, "after-restore-point")
        after = ledger.checkpoint().note
        with admin.connect() as conn:
            conn.exec_driver_sql("SELECT pg_switch_wal()")
        wait_archived(admin, walfile)
        restored, restore_seconds = restore(live, base, live.directory / "archive", target_name)
        stack.callback(restored.close)
        yield Drill(keys, held, target_size, ledger.size(), after, restored, base_seconds, restore_seconds)


def main(argv: list[str] | None = None) -> int:
    from api import ops
    from api.config import Settings
    from ledger.backup import prove_extends
    from tests import pg_cluster

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1000,
                        help="records appended in each of the three phases")
    args = parser.parse_args(argv)
    reason = pg_cluster.unavailable()
    if reason:
        print(f"cannot run the drill here: {reason}", file=sys.stderr)
        return 2
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"PostgreSQL binaries {pg_cluster.bindir()}")
    with drill(args.records) as d:
        settings = Settings.model_validate({"db": d.restored.url, "keys": d.keys})
        started = time.perf_counter()
        report = ops.verify(settings, [], None)
        verify_seconds = time.perf_counter() - started
        engine = ops.engine_for(settings)
        try:
            extension = prove_extends(engine, d.held_note)
        finally:
            engine.dispose()
        ok = report.size == d.target_size
        print(f"base backup      {d.base_backup_seconds:8.2f} s")
        print(f"restore (PITR)   {d.restore_seconds:8.2f} s   to the restore point, promoted")
        print(f"verify restored  {verify_seconds:8.2f} s   {report.checkpoints} checkpoints, derived tables")
        print(f"records restored {report.size:8d}     committed at the restore point: {d.target_size}, "
              f"live at the end: {d.live_size}")
        print(f"held checkpoint  size {extension.held.size}: extended (RFC 9162 proof to size "
              f"{extension.target_size}, {len(extension.proof)} hashes)")
        if not ok:
            print("FAILED: the restored ledger does not hold exactly what was committed at the restore point",
                  file=sys.stderr)
            return 1
    print("drill passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
