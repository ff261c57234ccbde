"""``sealtrail serve`` start and stop: SIGTERM seals what is in flight and exits 0, saving the
velocity windows; the next start resumes from them; a bad configuration exits 2 with a message."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
from pathlib import Path

from inference.simulate import SimConfig, simulate
from tests.api.server_proc import prepare, start

JSON = {"content-type": "application/json"}


def test_sigterm_exits_0_and_the_next_start_resumes_the_windows(tmp_path: Path) -> None:
    files = prepare(tmp_path)
    sims = simulate(SimConfig(seed=41, n_normal=100, n_accounts=100, days=3))[:60]
    body = b"[" + b",".join(s.transaction.canonical_bytes() for s in sims) + b"]"
    with start(files) as first:
        with first.client("scorer") as c:
            assert c.post("/v1/decisions/batch", content=body, headers=JSON).status_code == 200
            assert c.get("/healthz").json()["velocity"] == {"from_snapshot": False, "replayed_at_start": 0}
        assert first.stop() == 0, first.stderr()
    assert (files.keys / "velocity.snapshot").exists()
    with start(files) as second:
        with second.client("admin") as c:
            health = c.get("/healthz").json()
        assert second.stop() == 0, second.stderr()
    assert health["velocity"] == {"from_snapshot": True, "replayed_at_start": 0}
    assert health["ledger_size"] > 60


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", "serve", *args], capture_output=True, text=True,
                          timeout=120)


def test_serve_refuses_to_start_without_mutual_tls_or_a_ledger(tmp_path: Path) -> None:
    files = prepare(tmp_path)
    tls = ["--tls-cert", str(files.pki / "server.pem"), "--tls-key", str(files.pki / "server.key")]
    db = ["--db", files.db, "--keys", str(files.keys), "--port", "0"]
    r = run_serve(*db, *tls)  # no --client-ca
    assert r.returncode == 2 and "--client-ca is required" in r.stderr
    r = run_serve(*db)  # no TLS and no proxy
    assert r.returncode == 2 and "--tls-cert" in r.stderr
    r = run_serve("--db", f"sqlite:///{tmp_path / 'absent.db'}", "--keys", str(files.keys), "--port", "0",
                  *tls, "--client-ca", str(files.ca), "--roles", str(files.roles))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run_serve(*db, *tls, "--client-ca", str(files.ca), "--roles", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "missing.toml" in r.stderr


def test_a_taken_port_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    files = prepare(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        args = ["--db", files.db, "--keys", str(files.keys), "--port", str(port),
                "--tls-cert", str(files.pki / "server.pem"), "--tls-key", str(files.pki / "server.key"),
                "--client-ca", str(files.ca), "--roles", str(files.roles)]
        r = run_serve(*args)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: the port is already in "
                                         "use (stop what holds it, or choose another --port)"]
        r = run_serve(*args, "--json")
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert json.loads(r.stdout) == {"ok": False, "error": "listen", "errno": errno.EADDRINUSE,
                                        "message": r.stderr.strip().removeprefix("error: ")}
