"""``sealtrail serve --workers N``: N deciding processes on one listening socket and one log.

The supervisor binds the port, opens the runtime once to check everything a worker needs (the
ledger, key, model and rules; the shipped ruleset is bootstrapped here, not raced by N workers)
and closes it, then starts N ``sealtrail serve`` processes that inherit the socket
(``--listen-fd``) and the supervisor's settings (as ``SEALTRAIL_*`` variables). The kernel
spreads connections over them; each is a whole decider (TLS, HTTP, parsing, features, model,
rules) that catches its state up with the others' commits before each batch
(``audit.decide.pipeline``), so any worker may take any payment.

It prints its ready line (or ``--json`` object) once every worker is serving; a worker that does
not start then stops the server with exit 2 (the supervisor itself opened everything a moment
before, so that is a fault to see, not to retry). A worker that dies later is started again,
after a delay that doubles while replacements keep failing (1 s up to 30 s: the database may be
down), and the others keep serving meanwhile. SIGTERM / SIGINT (from the start on) stop every
worker gracefully (each finishes its batches in flight) and exit 0 once all have. SIGHUP
restarts the workers one at a time: a new one is serving before the old one is asked to stop,
so the port always has a worker. Every ``SEALTRAIL_*`` variable reaches the workers, the
settings the supervisor resolved on top.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from api.config import Settings

__all__ = ["Supervisor", "worker_environment"]

START_TIMEOUT_S = 300.0  # a worker restores its state before it serves: seconds on a large ledger
RESTART_DELAY_S = 1.0  # doubled while replacements keep failing, up to RESTART_DELAY_MAX_S
RESTART_DELAY_MAX_S = 30.0
STOP_TIMEOUT_S = 60.0


def worker_environment(s: Settings) -> dict[str, str]:
    """The environment that gives a worker exactly ``s`` (one worker: ``workers`` = 1)."""
    env = dict(os.environ)  # variables the settings do not hold (a backend's own) pass through
    for name, value in s.model_dump(mode="json").items():
        if value is None:
            continue
        key = f"SEALTRAIL_{name.upper()}"
        env[key] = value if isinstance(value, str) else json.dumps(value)
    env["SEALTRAIL_WORKERS"] = "1"
    return env


@dataclass
class _Worker:
    proc: subprocess.Popen[str]
    started: float
    ready: bool = False


class Supervisor:
    """Runs ``n`` workers on ``sock`` until told to stop; ``run`` returns the exit status."""

    def __init__(self, s: Settings, sock: socket.socket, n: int, log_level: str,
                 say: Callable[[str], None]) -> None:
        self._env = worker_environment(s)
        self._sock, self._n, self._log_level, self._say = sock, n, log_level, say
        self._workers: list[_Worker] = []
        self._stop = threading.Event()
        self._rolling = threading.Event()
        self.restarts = 0
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Supervisor:
        """Signals are the supervisor's from here on (during the start too)."""
        self._old = {sig: signal.signal(sig, self._on_signal)
                     for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        return self

    def __exit__(self, *exc: object) -> None:
        """Every worker stopped (whatever ended the supervisor), the signals given back."""
        if any(w.proc.poll() is None for w in self._workers):
            self.stop()
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _spawn(self) -> _Worker:
        fd = self._sock.fileno()
        argv = [sys.executable, "-m", "api.cli", "serve", "--listen-fd", str(fd), "--json",
                "--log-level", self._log_level]
        proc = subprocess.Popen(argv, env=self._env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, text=True)
        return _Worker(proc, time.monotonic())

    def _wait_ready(self, w: _Worker) -> bool:
        """Until ``w`` printed its ready object (True) or exited (False)."""
        assert w.proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(w.proc.stdout, lines), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        text = ""  # the worker's --json object, indented over several lines
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if w.proc.poll() is not None:
                    return False
                continue
            if line is None:
                return False
            text += line
            with contextlib.suppress(ValueError):
                doc = json.loads(text)
                if isinstance(doc, dict) and doc.get("ok") and doc.get("url"):
                    w.ready = True
                    return True
        if not self._stop.is_set():  # silent past the deadline; when stopping, stop() ends it
            w.proc.kill()
        return False

    def start(self) -> int | None:
        """Start every worker; None once all serve, else the exit status to stop with."""
        for _ in range(self._n):
            w = self._spawn()
            self._workers.append(w)
            if not self._wait_ready(w):
                if self._stop.is_set():
                    return self.stop()
                self._say(f"sealtrail: a worker did not start (exit {w.proc.poll()}); stopping")
                self.stop()
                return 2
        return None

    def run(self) -> int:
        """Watch the workers until SIGTERM / SIGINT; restart those that die; SIGHUP rolls them."""
        delay = RESTART_DELAY_S
        while not self._stop.is_set():
            if self._rolling.is_set():
                self._rolling.clear()
                self._roll()
            for i, w in enumerate(self._workers):
                code = w.proc.poll()
                if code is None or self._stop.is_set():
                    continue
                self._say(f"sealtrail: worker {w.proc.pid} exited ({code}); another in {delay:.0f} s")
                if self._stop.wait(delay):
                    break
                new = self._spawn()
                self._workers[i] = new
                self.restarts += 1
                if self._wait_ready(new):
                    self._say(f"sealtrail: worker {new.proc.pid} serving in place of {w.proc.pid}")
                    delay = RESTART_DELAY_S
                else:  # not started (the database down?): the others serve on, the next try waits longer
                    delay = min(delay * 2, RESTART_DELAY_MAX_S)
            self._stop.wait(0.2)
        return self.stop()

    def _on_signal(self, sig: int, _frame: Any) -> None:
        if sig == signal.SIGHUP:
            self._rolling.set()
        else:
            self._stop.set()

    def _roll(self) -> None:
        """One worker at a time: the new one serving before the old one stops."""
        for i, old in enumerate(list(self._workers)):
            if self._stop.is_set():
                return
            new = self._spawn()
            if not self._wait_ready(new):
                self._say("sealtrail: a new worker did not start during the rolling restart; keeping the old")
                _terminate(new.proc)
                continue
            self._workers[i] = new
            _terminate(old.proc)

    def stop(self) -> int:
        """SIGTERM every worker, wait for each to drain; 0 when every one exited 0."""
        for w in self._workers:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGTERM)
        codes = [_terminate(w.proc, signal_it=False) for w in self._workers]  # signalled once only
        failed = False
        for w, c in zip(self._workers, codes, strict=True):
            if c == 0 or (not w.ready and c == -signal.SIGTERM):  # one still starting had served nothing
                continue
            failed = True
            self._say(f"sealtrail: worker {w.proc.pid} exited {c} while stopping")
        return 1 if failed else 0

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers]


def _terminate(proc: subprocess.Popen[str], signal_it: bool = True) -> int:
    """SIGTERM (once: a second one during its drain would end it on the spot), then wait for the
    drain; SIGKILL past ``STOP_TIMEOUT_S``."""
    if signal_it and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _pump(stream: IO[str], out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)
