"""Benchmark of the HTTP API over mutual TLS: latency at a fixed offered rate, batch throughput.

A load generator in its own process (``bench.http_load``) offers POST /v1/decisions at fixed
rates, open-loop (latency from each request's scheduled send time, so queueing counts), to a
real ``sealtrail serve`` on a fresh SQLite ledger (WAL, synchronous=FULL), carrying seeded
simulated JSON payments. The same-run baseline is the same serving stack (uvicorn,
``TlsHttpToolsProtocol``, mutual TLS) around an app that does nothing (``bench.bare_app``),
under the same load: the ratio of p99s is what sealing a decision adds. Then the batch
endpoint's throughput, 1,000 and 10,000 transactions a call, against the same bodies posted
to the bare app. The client's own capacity is measured first, closed-loop against the bare
app. Then, for each count in ``--deciders`` (default 1,2), ``sealtrail serve --workers N`` on a
fresh ledger: the batch endpoint (1,000 a call, N calls in flight) and POST /v1/decisions at
1,000/s offered, with the server's CPU summed over the supervisor and its workers. Run from the
repository root: ``python -m bench.http [--quick] [--json PATH] [--dir DIR] [--deciders 1,2,4]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.http")

import argparse
import os
import queue
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from api import ops
from api.certs import create_dev_pki
from api.config import Settings
from bench.machine import filesystem_of, host_info, probe_ms, version_of
from bench.report import Row, format_table, verdict, write_json
from inference.simulate import SimConfig, simulate

P99_TARGET_MS = 10.0
P99_TARGET_RATE = 1000.0
BATCH_TARGET = 5000.0
SEED = 20261204
ROOT = Path(__file__).parents[1]


def bodies(n: int) -> list[bytes]:
    """``n`` seeded simulated payments as JSON messages, each on one line."""
    sims = simulate(SimConfig(seed=SEED, n_normal=n, days=max(3, n // 5000)))
    out = [s.transaction.canonical_bytes() for s in sims[:n]]
    assert all(b"\n" not in b for b in out)
    return out


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads) and of its live child
    processes (``serve --workers``) so far; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    total = int(fields[11]) + int(fields[12])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            f = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[1]) == pid:
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Served:
    url: str
    pid: int


@contextmanager
def serving(argv: list[str], cwd: Path, ready: str, timeout: float = 120.0) -> Iterator[Served]:
    """A server process started from ``argv``; yields its URL and pid once it printed ``ready``,
    then stops it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])  # bench.*
    err_path = cwd / f"{Path(argv[2] if argv[1] == '-m' else argv[0]).name}.stderr"
    with err_path.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                text=True, cwd=cwd, env=env)
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    try:
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                raise RuntimeError(f"{argv}: not ready in {timeout} s: {err_path.read_text()}") from None
            if line is None:
                raise RuntimeError(f"{argv}: exited {proc.wait()}: {err_path.read_text()}")
            if line.startswith(ready):
                break
        yield Served(line[len(ready):].strip(), proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    tail = err_path.read_text().strip()
    if tail:
        print(f"  server stderr ({err_path.name}):\n{tail[-2000:]}", file=sys.stderr)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


class Loader:
    """Runs ``bench.http_load`` as a separate process against one server, and reads the server's
    CPU time around it (the server's CPU per request is what the code under test costs; the
    wall figures also carry whatever else runs on these cores)."""

    def __init__(self, server: Served, pki: Path) -> None:
        self.url = server.url
        self.pid = server.pid
        self.pki = pki

    def run(self, path: str, body_file: Path, *extra: str) -> dict[str, Any]:
        argv = [sys.executable, "-m", "bench.http_load", "--url", self.url, "--path", path,
                "--ca", str(self.pki / "ca.pem"), "--cert", str(self.pki / "scorer.pem"),
                "--key", str(self.pki / "scorer.key"), "--bodies", str(body_file), *extra]
        cpu0 = process_cpu_s(self.pid)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                             cwd=ROOT)
        cpu1 = process_cpu_s(self.pid)
        if res.returncode != 0:
            raise RuntimeError(f"load generator failed ({res.returncode}):\n{res.stderr}")
        doc: dict[str, Any] = orjson.loads(res.stdout.strip().splitlines()[-1])
        # Every request the run sent (warm-up included) costs server CPU; per decision for batches.
        sent = doc["requests_sent"] if doc["mode"] == "open" else doc.get("decisions", doc["ok"])
        doc["server_cpu_s"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        doc["server_cpu_us_per_request"] = (None if doc["server_cpu_s"] is None or not sent
                                            else doc["server_cpu_s"] / sent * 1e6)
        return doc


def _cpu(r: dict[str, Any]) -> str:
    us = r.get("server_cpu_us_per_request")
    return "-" if us is None else f"{us:,.0f} µs"


def _deciders(n: int, tmp: Path, tls: list[str], pki: Path, single_file: Path, batch_file: Path,
              duration: float, warmup: float, batch_s: float) -> dict[str, Any]:
    """``serve --workers n`` on a fresh ledger of its own: batch throughput with ``n`` calls in
    flight, then POST /v1/decisions at 1,000/s offered."""
    home = tmp / f"deciders-{n}"
    home.mkdir()
    url = f"sqlite:///{home / 'ledger.db'}"
    overrides: dict[str, Any] = {"db": url, "keys": home / "keys"}
    ops.initialise(Settings(**overrides))
    argv = [sys.executable, "-m", "api.cli", "serve", "--db", url, "--keys", str(home / "keys"),
            "--port", "0", *tls, "--roles", str(pki / "roles.toml"), "--workers", str(n)]
    with serving(argv, home, "sealtrail serving on ") as server:
        real = Loader(server, pki)
        b = real.run("/v1/decisions/batch", batch_file, "--mode", "batch", "--duration", str(batch_s),
                     "--connections", str(n))
        o = real.run("/v1/decisions", single_file, "--rate", "1000", "--duration", str(duration),
                     "--warmup", str(warmup))
    print(f"serve --workers {n}: batch endpoint {b['decisions_per_s']:,.0f} decisions/s ({n} calls in "
          f"flight, server CPU {_cpu(b)}/decision)")
    print(_open_line(f"--workers {n}", o))
    return {"workers": n, "batch": b, "open": o}


def _open_line(label: str, r: dict[str, Any]) -> str:
    errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
    p50, p99, top = (r.get(k, 0.0) for k in ("p50_ms", "p99_ms", "max_ms"))
    lag = "-" if r["send_lag_p99_ms"] is None else f"{r['send_lag_p99_ms']:.2f} ms"  # None: every send waited
    return (f"  {label:<19} {r['offered_per_s']:>6,.0f}/s offered, {r['achieved_per_s']:>6,.0f}/s achieved: "
            f"p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  max {top:7.2f} ms; errors {errs}; "
            f"fail-safe {r['fail_safe']}; waited for a connection {r['waited_for_connection']}; "
            f"client CPU {r['client_cpu_share']:.0%}, send lag p99 {lag}; server CPU {_cpu(r)}/request")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 s per rate, fewer batch calls")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dir", type=Path, help="where the SQLite ledger lives [a temporary directory]")
    ap.add_argument("--rates", default="500,1000", help="offered requests/s, comma-separated")
    ap.add_argument("--deciders", default="1,2",
                    help="serve --workers counts for the deciders rows ('' for none)")
    args = ap.parse_args()
    deciders = [int(n) for n in args.deciders.split(",") if n.strip()]
    duration, warmup = (3.0, 1.0) if args.quick else (10.0, 2.0)
    batch_s = 4.0 if args.quick else 10.0
    rates = [float(r) for r in args.rates.split(",")]

    host = host_info()
    probe_before = probe_ms()
    load_before = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        print(f"CPU:        {host['cpu']} ({host['cores']} cores, shared by the server and the load "
              f"generator: one process each)")
        print(f"RAM:        {host['ram_gib']} GiB; load average now {load_before} (other work on these cores "
              "shows here)")
        print(f"OS:         {host['os']}")
        print(f"Python:     {host['python']}; uvicorn {version_of('uvicorn')}, httptools "
              f"{version_of('httptools')}, FastAPI {version_of('fastapi')}")
        print(f"SQLite:     {sqlite3.sqlite_version} (WAL, synchronous=FULL) in {tmp} ({filesystem_of(tmp)})")
        print("Client:     asyncio + httptools, HTTP/1.1 keep-alive, mutual TLS, open-loop fixed rate; "
              f"{warmup:.0f} s warm-up, {duration:.0f} s measured per rate\n")
        url = f"sqlite:///{tmp / 'ledger.db'}"
        keys, pki = tmp / "keys", tmp / "pki"
        overrides: dict[str, Any] = {"db": url, "keys": keys}
        ops.initialise(Settings(**overrides))
        create_dev_pki(pki)
        top = max(rates)
        singles = bodies(round(top * (duration + warmup)) + 1000)
        single_file = tmp / "single.jsonl"
        single_file.write_bytes(b"\n".join(singles) + b"\n")
        batch_files = {}
        for size in (1000, 10_000):
            batch_files[size] = tmp / f"batch{size}.jsonl"
            batch_files[size].write_bytes(b"\n".join(
                b"[" + b",".join(singles[(k * size + j) % len(singles)] for j in range(size)) + b"]"
                for k in range(4)) + b"\n")
        tls = ["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
               "--client-ca", str(pki / "ca.pem")]
        bare_argv = [sys.executable, "-m", "bench.bare_app", "--port", "0", *tls]
        real_argv = [sys.executable, "-m", "api.cli", "serve", "--db", url, "--keys", str(keys),
                     "--port", "0", *tls, "--roles", str(pki / "roles.toml")]
        results: dict[str, Any] = {"open": [], "batch": []}
        with serving(bare_argv, tmp, "bare serving on ") as bare_server, \
                serving(real_argv, tmp, "sealtrail serving on ") as real_server:
            bare, real = Loader(bare_server, pki), Loader(real_server, pki)
            cap = bare.run("/", single_file, "--mode", "capacity", "--duration", "3", "--connections", "32")
            results["client_capacity"] = cap
            us = cap["client_cpu_us_per_request"]
            print(f"client capacity (closed loop, 32 connections, against the bare app on the same cores): "
                  f"{cap['per_s']:,.0f} requests/s; client CPU {us:.0f} µs/request "
                  f"(~{1e6 / us:,.0f}/s of one core)")
            print("open loop:")
            for rate in rates:
                common = ("--rate", str(rate), "--duration", str(duration), "--warmup", str(warmup))
                b = bare.run("/", single_file, *common)
                print(_open_line("bare app", b))
                d = real.run("/v1/decisions", single_file, *common)
                print(_open_line("POST /v1/decisions", d))
                results["open"].append({"rate": rate, "bare": b, "decisions": d})
            print("batch endpoint (closed loop, one call in flight):")
            for size, f in batch_files.items():
                batch_args = ("--duration", str(batch_s), "--connections", "1")
                b = bare.run("/", f, "--mode", "capacity", *batch_args)
                b["decisions_per_s"] = b["per_s"] * size  # transactions/s the transport alone carries
                d = real.run("/v1/decisions/batch", f, "--mode", "batch", *batch_args)
                print(f"  {size:>6,} a call: {d['decisions_per_s']:>8,.0f} decisions/s ({d['ok']} calls, "
                      f"p50 {d.get('p50_ms', 0):,.0f} ms a call, errors {sum(d['errors'].values())}; "
                      f"server CPU {_cpu(d)}/decision); bare app with the same bodies "
                      f"{b['decisions_per_s']:,.0f} transactions/s")
                results["batch"].append({"size": size, "bare": b, "decisions": d})
        results["deciders"] = [_deciders(n, tmp, tls, pki, single_file, batch_files[1000], duration,
                                         warmup, batch_s) for n in deciders]
    probe_after = probe_ms()

    rows = []
    for o in results["open"]:
        b, d = o["bare"], o["decisions"]
        at_target = o["rate"] == P99_TARGET_RATE
        rows.append(Row(f"POST /v1/decisions, {o['rate']:,.0f}/s offered: p99",
                        f"{d['p99_ms']:.2f} ms (p50 {d['p50_ms']:.2f}, max {d['max_ms']:.1f}; "
                        f"{d['achieved_per_s']:,.0f}/s, {sum(d['errors'].values())} errors; "
                        f"CPU {_cpu(d)}/req)",
                        f"bare {b['p99_ms']:.2f} ms (p50 {b['p50_ms']:.2f}; CPU {_cpu(b)}/req)",
                        f"{d['p99_ms'] / b['p99_ms']:.1f}x",
                        f"<= {P99_TARGET_MS:.0f} ms" if at_target else "",
                        verdict(d["p99_ms"] <= P99_TARGET_MS and not d["errors"]) if at_target else ""))
    for bt in results["batch"]:
        b, d = bt["bare"], bt["decisions"]
        rows.append(Row(f"POST /v1/decisions/batch, {bt['size']:,} a call",
                        f"{d['decisions_per_s']:,.0f} decisions/s (CPU {_cpu(d)}/decision)",
                        f"bare {b['decisions_per_s']:,.0f} tx/s",
                        f"{b['decisions_per_s'] / d['decisions_per_s']:.1f}x",
                        f">= {BATCH_TARGET:,.0f}/s", verdict(d["decisions_per_s"] >= BATCH_TARGET)))
    base = results["deciders"][0] if results["deciders"] else None
    for dn in results["deciders"]:
        d, o = dn["batch"], dn["open"]
        rows.append(Row(f"serve --workers {dn['workers']}: batch endpoint, 1,000 a call",
                        f"{d['decisions_per_s']:,.0f} decisions/s ({dn['workers']} calls in flight; "
                        f"CPU {_cpu(d)}/decision)",
                        "" if base is None or base is dn else
                        f"--workers {base['workers']}: {base['batch']['decisions_per_s']:,.0f}/s",
                        "" if base is None or base is dn else
                        f"{d['decisions_per_s'] / base['batch']['decisions_per_s']:.2f}x",
                        ">= 8,000/s" if dn["workers"] == 2 else "",
                        verdict(d["decisions_per_s"] >= 8000) if dn["workers"] == 2 else ""))
        rows.append(Row(f"serve --workers {dn['workers']}: POST /v1/decisions, 1,000/s offered: p99",
                        f"{o['p99_ms']:.2f} ms (p50 {o['p50_ms']:.2f}; {sum(o['errors'].values())} errors; "
                        f"fail-safe {o['fail_safe']}; CPU {_cpu(o)}/req)", "", "", "", ""))
    print("\n" + format_table(rows, "sealtrail serve (mTLS, SQLite)"))
    print(f"\nratio: sealtrail's p99 over the bare app's (latency rows); the bare app's rate over "
          f"sealtrail's (batch rows). The load generator and the server share {host['cores']} cores.")
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"(at the start: {load_before})")
    print(f"CPU probe: {probe_before:.1f} ms before, {probe_after:.1f} ms after")
    host["cpu_probe_ms"] = {"before": probe_before, "after": probe_after}
    if args.json:
        write_json(args.json, {"machine": host, "duration_s": duration, "warmup_s": warmup, **results})


if __name__ == "__main__":
    main()
