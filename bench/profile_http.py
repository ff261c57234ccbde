"""Where a decision's server CPU goes: ``sealtrail serve`` (one process, SQLite) under an open-loop
rate of POST /v1/decisions over mutual TLS, sampled by py-spy (``pip install py-spy``; the dev
extras carry it). Prints the server's CPU per request and the functions that hold the most
samples, by own time and with what they call, and the CPU each of the server's threads used a
request (read from ``/proc``: py-spy counts the event loop's wait for the network as busy, since
uvloop waits inside C); ``--out FILE`` also writes py-spy's speedscope JSON. Run from the
repository root: ``python -m bench.profile_http [--rate 1000] [--seconds 10]``.
"""

from __future__ import annotations

import sys

if not __package__:
    sys.exit("run it as a module from the repository root: python -m bench.profile_http")

import argparse
import collections
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import orjson

from api import ops
from api.certs import create_dev_pki
from api.config import Settings
from bench.http import Feed, Loader, proc_stat, serving
from bench.machine import host_info


def _top(profile: dict[str, Any], n: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]], float]:
    """Own and inclusive sampled time per frame of a speedscope ``sampled`` profile (weights are
    seconds), and the total."""
    frames = profile["shared"]["frames"]
    own: dict[str, float] = collections.defaultdict(float)
    total: dict[str, float] = collections.defaultdict(float)
    samples = 0.0
    for prof in profile["profiles"]:
        for stack, weight in zip(prof["samples"], prof["weights"], strict=True):
            samples += weight
            names = [f"{f['name']} ({Path(f.get('file', '?')).name}:{f.get('line', 0)})"
                     for f in (frames[i] for i in stack)]
            if names:
                own[names[-1]] += weight
            for name in set(names):
                total[name] += weight
    def top(d: dict[str, float]) -> list[tuple[str, float]]:
        return sorted(d.items(), key=lambda kv: -kv[1])[:n]
    return top(own), top(total), samples


def thread_cpu_s(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each thread of process ``pid`` so far; empty off Linux."""
    out: dict[int, float] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        if (st := proc_stat(task)) is not None:
            out[int(task.name)] = st[1] / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(profile: dict[str, Any]) -> dict[int, str]:
    """Thread id -> Python thread name, from the names py-spy gives its profiles
    (``Thread 1234 "MainThread"``)."""
    names: dict[int, str] = {}
    for prof in profile["profiles"]:
        head, _, rest = str(prof.get("name", "")).partition(" ")
        tid, _, name = rest.partition(" ")
        if head == "Thread" and tid.isdigit():
            names[int(tid)] = name.strip('"') or tid
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", type=Path, help="write py-spy's speedscope profile here too")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the server, e.g. SEALTRAIL_MAX_BATCH=256 (repeatable)")
    args = ap.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores); Python {host['python']}")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        url, keys, pki = f"sqlite:///{tmp / 'ledger.db'}", tmp / "keys", tmp / "pki"
        overrides: dict[str, Any] = {"db": url, "keys": keys}
        ops.initialise(Settings(**overrides))
        create_dev_pki(pki)
        cursor = Feed(tmp).ledger()  # each payment sent once: a payment sent again is a replay
        argv = [sys.executable, "-m", "api.cli", "serve", "--db", url, "--keys", str(keys), "--port", "0",
                "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
                "--client-ca", str(pki / "ca.pem"), "--roles", str(pki / "roles.toml")]
        extra = dict(e.split("=", 1) for e in args.env)
        with serving(argv, tmp, "sealtrail serving on ", env_extra=extra) as server:
            loader = Loader(server, pki, sealtrail=True)
            loader.run("/v1/decisions", cursor.singles(round(args.rate * 2)), "--rate", str(args.rate),
                       "--duration", "2", "--warmup", "0")
            out = tmp / "profile.json"
            spy_proc = subprocess.Popen([spy, "record", "--pid", str(server.pid), "--format", "speedscope",
                                         "--output", str(out), "--rate", "250", "--nonblocking",
                                         "--duration", str(round(args.seconds + 1))],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            cpu0 = thread_cpu_s(server.pid)
            doc = loader.run("/v1/decisions", cursor.singles(round(args.rate * args.seconds)), "--rate",
                             str(args.rate), "--duration",
                             str(args.seconds), "--warmup", "0")
            cpu1 = thread_cpu_s(server.pid)
            _, err = spy_proc.communicate(timeout=120)
            if not out.exists():
                print(f"py-spy wrote no profile: {err.decode()[-2000:]}", file=sys.stderr)
                return 1
        profile = orjson.loads(out.read_bytes())
        if args.out:
            args.out.write_bytes(out.read_bytes())
    print(f"{doc['requests_sent']:,} requests at {args.rate:,.0f}/s offered; p50 {doc['p50_ms']:.2f} ms, "
          f"p99 {doc['p99_ms']:.2f} ms; server CPU {doc['server_cpu_us_per_request']:,.0f} µs/request")
    names = thread_names(profile)
    sent = max(int(doc["requests_sent"]), 1)
    print("CPU a request by thread (/proc; py-spy's sampling shown after it, not a share of CPU):")
    for tid, used in sorted(((t, cpu1[t] - cpu0.get(t, 0.0)) for t in cpu1), key=lambda kv: -kv[1]):
        if used > 0:
            print(f"  {used / sent * 1e6:8,.0f} µs  {names.get(tid, f'thread {tid}')}")
    own, total, samples = _top(profile, args.top)
    print(f"\n{samples:.1f} s of samples over the server's threads (py-spy, 250/s, idle excluded)\nown time:")
    for name, k in own:
        print(f"  {k / samples:6.1%}  {name}")
    print("with callees:")
    for name, k in total:
        print(f"  {k / samples:6.1%}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
