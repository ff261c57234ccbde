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

Every command's output goes to ``log`` (the server log included) and is quoted in the error
(``ClusterError``) when a step fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Cluster", "ClusterError", "bindir", "unavailable"]

SYSTEM_USER = "postgres"  # whom the cluster runs as when the test runs as root
START_TIMEOUT_S = 30


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

    @classmethod
    def create(cls) -> Cluster:
        """initdb in a new temporary directory, then start; ``close()`` removes it all."""
        reason = unavailable()
        if reason:
            raise ClusterError(reason)
        d = bindir()
        assert d is not None
        directory = Path(tempfile.mkdtemp(prefix="sealtrail-pg-"))
        as_user = None
        if os.geteuid() == 0:
            as_user = SYSTEM_USER
            user = pwd.getpwnam(SYSTEM_USER)
            os.chown(directory, user.pw_uid, user.pw_gid)
        c = cls(directory, d, 0, as_user)
        try:
            c._run("initdb", "-D", str(c.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                   "--no-instructions")
            c.port = _free_port()
            c.start()
        except BaseException:
            c.close()
            raise
        return c

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

    def start(self) -> None:
        """Start (or start again) on the same data and port; returns once it accepts connections."""
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.directory}")
        self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w",
                  "-t", str(START_TIMEOUT_S), "-o", opts)

    def stop(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server: ``fast`` ends every session and shuts down cleanly; ``immediate`` is a
        crash (no shutdown checkpoint; the next start recovers from the WAL)."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", str(START_TIMEOUT_S))

    def running(self) -> bool:
        return self._pg_ctl_status() == 0

    def close(self) -> None:
        """Stop the server if it runs (immediate: nothing is kept) and remove the directory."""
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


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())
