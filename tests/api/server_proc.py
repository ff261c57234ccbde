"""A real ``sealtrail serve`` process for tests: its own ledger, dev PKI and port, over mutual TLS.

``prepare(tmp)`` initialises a ledger (tables, signing key, genesis) and writes the dev PKI;
``start(files)`` launches ``sealtrail serve --port 0`` in a session of its own (so that ``kill()``
reaches every worker it started) and returns once the process printed its ready line
(``sealtrail serving on https://HOST:PORT``), or raises ``ServerStartError`` with the process's
stderr. ``stop()`` sends SIGTERM (a graceful drain), ``kill()`` SIGKILL (a
crash); ``start`` again on the same files restarts on the same database (on a new port).
Environment variables named ``SEALTRAIL_*`` are not passed on: a test's server is configured
by its arguments only.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from api import ops
from api.certs import create_dev_pki
from api.config import Settings

__all__ = ["ServerFiles", "ServerProcess", "ServerStartError", "prepare", "start"]

READY = "sealtrail serving on "
ROLES = ("scorer", "officer", "approver", "regulator", "admin")


class ServerStartError(RuntimeError):
    """The server exited or stayed silent before its ready line; the message holds its stderr."""


@dataclass(frozen=True)
class ServerFiles:
    """Everything a server process is started from: the database, keys and dev PKI."""

    directory: Path
    db: str
    keys: Path
    pki: Path

    @property
    def ca(self) -> Path:
        return self.pki / "ca.pem"

    @property
    def roles(self) -> Path:
        return self.pki / "roles.toml"

    def client_cert(self, role: str) -> tuple[Path, Path]:
        """(certificate, key) of the dev client certificate granted ``role``."""
        if role not in ROLES:
            raise ValueError(f"no dev certificate for role {role!r}; one of {', '.join(ROLES)}")
        return self.pki / f"{role}.pem", self.pki / f"{role}.key"

    def ssl_context(self, role: str) -> ssl.SSLContext:
        """A client TLS context: trusts only the dev CA, presents ``role``'s certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(*map(str, self.client_cert(role)))
        return ctx


def prepare(directory: Path, db: str | None = None) -> ServerFiles:
    """Initialise a ledger at ``db`` (default: a SQLite file in ``directory``) and a dev PKI."""
    directory.mkdir(parents=True, exist_ok=True)
    url = db or f"sqlite:///{directory / 'ledger.db'}"
    keys = directory / "keys"
    overrides: dict[str, Any] = {"db": url, "keys": keys}  # the rest from Settings' defaults
    ops.initialise(Settings(**overrides))
    create_dev_pki(directory / "pki")
    return ServerFiles(directory, url, keys, directory / "pki")


@dataclass
class ServerProcess:
    """A running ``sealtrail serve``; ``url`` is where it listens."""

    files: ServerFiles
    proc: subprocess.Popen[str]
    host: str
    port: int
    stderr_path: Path
    _stdout: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def client(self, role: str = "scorer", timeout: float = 10.0) -> httpx.Client:
        """An HTTP/1.1 keep-alive client authenticated as ``role``."""
        return httpx.Client(base_url=self.url, verify=self.files.ssl_context(role), timeout=timeout)

    def stderr(self) -> str:
        return _tail(self.stderr_path)

    def kill(self) -> int:
        """SIGKILL to the server and every process it started (its workers, paused or not): none
        gets a chance to finish anything. Returns the server's exit status."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: start() made it a leader
        return self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the drain; SIGKILL if it takes longer than ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing outlives the test: the server, and any worker left behind (a test that failed
        with one paused, or whose supervisor was killed on purpose)."""
        self.kill()


def start(files: ServerFiles, *, timeout: float = 60.0, extra_args: tuple[str, ...] = (),
          log_name: str = "serve") -> ServerProcess:
    """Launch ``sealtrail serve`` on ``files`` and wait (at most ``timeout`` s) until it listens."""
    n = 0
    while (files.directory / f"{log_name}-{n}.stderr").exists():
        n += 1
    stderr_path = files.directory / f"{log_name}-{n}.stderr"
    argv = [sys.executable, "-m", "api.cli", "serve", "--db", files.db, "--keys", str(files.keys),
            "--port", "0", "--tls-cert", str(files.pki / "server.pem"),
            "--tls-key", str(files.pki / "server.key"), "--client-ca", str(files.ca),
            "--roles", str(files.roles), *extra_args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")}
    with stderr_path.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, cwd=files.directory, env=env, start_new_session=True)
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise ServerStartError(f"no ready line within {timeout:.0f} s; stdout {seen!r}; stderr:\n"
                                   f"{_tail(stderr_path)}") from None
        if line is None:
            code = proc.wait()
            raise ServerStartError(f"sealtrail serve exited {code} before listening; stdout {seen!r}; "
                                   f"stderr:\n{_tail(stderr_path)}")
        seen.append(line)
        if line.startswith(READY):
            hostport = line[len(READY):].strip().removeprefix("https://")
            host, _, port = hostport.rpartition(":")
            return ServerProcess(files, proc, host, int(port), stderr_path, seen)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Hand each stdout line to the waiting test; None at end of file (the process exited)."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def _tail(path: Path, limit: int = 8000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]
