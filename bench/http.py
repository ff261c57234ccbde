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
1,000/s offered, with the server's CPU summed over the supervisor and its workers. With
``--list-entries N``, each of those ledgers first has a sanctions list of N entries sealed
(``bench.screening.list_csv``, loaded with ``sealtrail lists load``), so every payment is screened
as a bank's would be; the rows say so.

A second baseline, the durable bare app (``bench.durable_app``), is the same stack again around an
app that seals each request's body as one record of a real decision record's size (measured on
this run's ledger first) with group commit on a fresh SQLite ledger opened as ``sealtrail serve``
opens it, and no decision logic: sealtrail's p99 over its p99 is what deciding adds beyond a
durable write (target <= 3x at 1,000/s), and so for server CPU per request.

Every payment sent to a sealtrail ledger is one it was never sent before (``Feed``): a payment
sent again is answered from the idempotency store with its first decision, not decided, so a
run that reused payments would time replays. The load generator counts answers marked
``replayed``, and a run against sealtrail with any is refused. A batch run stops early, its rate
still measured, when the payments prepared for it (``BATCH_FEED_PER_S`` for its seconds) run out.

Modes: ``--quick`` 3 s per rate after 1 s warm-up, batch runs of 4 s; the default 10 s per rate
after 2 s, batch runs of 10 s; ``--full`` 30 s per rate after 2 s, batch runs of 10 s, and every
configuration (each server at each rate, each batch size, each ``--deciders`` count) run 3 times,
interleaved, the median of the 3 reported with its range. ``--full`` takes about 19 minutes with
the default rates and deciders (each further rate ~5 min, each further decider count ~2.5 min).
Run from the repository root:
``python -m bench.http [--quick | --full] [--json PATH] [--dir DIR] [--rates 500,1000] [--deciders 1,2,4]
[--list-entries N] [--server-env SEALTRAIL_NAME=VALUE ...]`` (``--server-env``: a setting for every
sealtrail server of the run, printed at the top; the baselines do not read it).
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.http")

import argparse
import os
import queue
import sqlite3
import statistics
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from api import ops
from api.certs import create_dev_pki
from api.config import Settings
from bench.machine import filesystem_of, host_info, probe_ms, version_of
from bench.report import Row, format_table, verdict, write_json
from bench.screening import list_csv
from inference.simulate import SimConfig, simulate

P99_TARGET_MS = 10.0
P99_TARGET_RATE = 1000.0
BATCH_TARGET = 5000.0
DURABLE_RATIO_TARGET = 3.0  # sealtrail's p99 over the durable bare app's, at P99_TARGET_RATE
FULL_S = 30.0  # --full: measured seconds per rate
FULL_RUNS = 3  # --full: runs per configuration, the median reported
SEED = 20261204
ROOT = Path(__file__).parents[1]
FEED_CHUNK = 50_000  # payments simulated at a time (one seed each) as a run needs more
BATCH_FEED_PER_S = 12_000  # payments prepared a second of a batch run (it stops early past them)


def bodies(n: int) -> list[bytes]:
    """``n`` seeded simulated payments as JSON messages, each on one line."""
    sims = simulate(SimConfig(seed=SEED, n_normal=n, days=max(3, n // 5000)))
    out = [s.transaction.canonical_bytes() for s in sims[:n]]
    assert all(b"\n" not in b for b in out)
    return out


class Feed:
    """Seeded simulated payments, never reused against one ledger: ``ledger()`` starts a ledger's
    cursor at the first payment, and each file it writes holds the payments after the last one
    it handed out. Simulated ``FEED_CHUNK`` at a time (seed ``SEED + k`` for chunk ``k``; each
    payment's UETR, its idempotency key, differs across them) and shared by every ledger."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._pool: list[bytes] = []
        self._files = 0

    def _upto(self, n: int) -> None:
        while len(self._pool) < n:
            k = len(self._pool) // FEED_CHUNK
            sims = simulate(SimConfig(seed=SEED + k, n_normal=FEED_CHUNK, days=10))
            self._pool += [s.transaction.canonical_bytes() for s in sims[:FEED_CHUNK]]

    def ledger(self) -> FeedCursor:
        """A cursor for a fresh ledger: its first file starts at the first payment."""
        return FeedCursor(self)

    def _write(self, lines: list[bytes]) -> Path:
        self._files += 1
        path = self.tmp / f"feed-{self._files}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path


class FeedCursor:
    """Where one ledger is in the feed: every file it writes holds payments that ledger was not sent."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.at = 0

    def _take(self, n: int) -> list[bytes]:
        self.feed._upto(self.at + n)
        out = self.feed._pool[self.at:self.at + n]
        self.at += n
        return out

    def singles(self, n: int) -> Path:
        """A file of the next ``n`` payments, one request body a line."""
        return self.feed._write(self._take(n))

    def batches(self, size: int, calls: int) -> Path:
        """A file of ``calls`` batch bodies of ``size`` payments each, the next ``size * calls``."""
        got = self._take(size * calls)
        return self.feed._write([b"[" + b",".join(got[k * size:(k + 1) * size]) + b"]" for k in range(calls)])

    def batch_run(self, size: int, seconds: float) -> Path:
        """Enough batch bodies of ``size`` for a run of ``seconds`` at up to ``BATCH_FEED_PER_S``."""
        return self.batches(size, max(2, -(-round(seconds * BATCH_FEED_PER_S) // size)))


def proc_stat(path: Path) -> tuple[int, int] | None:
    """(parent pid, user + system CPU ticks) from a ``/proc/.../stat`` file; None if unreadable."""
    try:
        f = (path / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(f[1]), int(f[11]) + int(f[12])


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads) and of its live child
    processes (``serve --workers``) so far; None off Linux."""
    own = proc_stat(Path(f"/proc/{pid}"))
    if own is None:
        return None
    total = own[1]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := proc_stat(entry)) is not None and st[0] == pid:
            total += st[1]
    return total / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Served:
    url: str
    pid: int


@contextmanager
def serving(argv: list[str], cwd: Path, ready: str, timeout: float = 120.0,
            env_extra: dict[str, str] | None = None) -> Iterator[Served]:
    """A server process started from ``argv`` (the environment without SEALTRAIL_* settings, plus
    ``env_extra``); yields its URL and pid once it printed ``ready``, then stops it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")} | (env_extra or {})
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

    def __init__(self, server: Served, pki: Path, sealtrail: bool = False) -> None:
        """``sealtrail``: the server decides with an idempotency store, so each body is sent at most
        once and a run answered with any replay is refused (``RuntimeError``)."""
        self.url = server.url
        self.pid = server.pid
        self.pki = pki
        self.sealtrail = sealtrail

    def run(self, path: str, body_file: Path, *extra: str) -> dict[str, Any]:
        argv = [sys.executable, "-m", "bench.http_load", "--url", self.url, "--path", path,
                "--ca", str(self.pki / "ca.pem"), "--cert", str(self.pki / "scorer.pem"),
                "--key", str(self.pki / "scorer.key"), "--bodies", str(body_file), *extra,
                *(["--once"] if self.sealtrail else [])]
        cpu0 = process_cpu_s(self.pid)
        res = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                             cwd=ROOT)
        cpu1 = process_cpu_s(self.pid)
        if res.returncode != 0:
            raise RuntimeError(f"load generator failed ({res.returncode}):\n{res.stderr}")
        doc: dict[str, Any] = orjson.loads(res.stdout.strip().splitlines()[-1])
        if self.sealtrail and doc.get("replayed"):
            raise RuntimeError(f"{doc['replayed']} answers of {path} were replays of earlier decisions "
                               f"({body_file} held payments this ledger had been sent): not a measurement")
        # Every request the run sent (warm-up included) costs server CPU; per decision for batches.
        sent = doc["requests_sent"] if doc["mode"] == "open" else doc.get("decisions", doc["ok"])
        doc["server_cpu_s"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        doc["server_cpu_us_per_request"] = (None if doc["server_cpu_s"] is None or not sent
                                            else doc["server_cpu_s"] / sent * 1e6)
        return doc


def _short(r: dict[str, Any]) -> str:
    """Says when a batch run used every payment prepared for it before its time was up."""
    runs = r.get("runs", [r])
    short = sum(1 for x in runs if x.get("exhausted"))
    if not short:
        return ""
    wall = statistics.median(x["wall_s"] for x in runs)
    return f"; {short} of {len(runs)} runs sent every payment prepared, in {wall:.1f} s"


def _cpu(r: dict[str, Any]) -> str:
    us = r.get("server_cpu_us_per_request")
    return "-" if us is None else f"{us:,.0f} µs"


# Figures whose range over the runs is shown beside their median (--full); counts of things that
# went wrong are summed over the runs instead, so that a median never hides one.
_SPREAD = ("p50_ms", "p99_ms", "max_ms", "achieved_per_s", "per_s", "decisions_per_s",
           "server_cpu_us_per_request")
_SUMMED = ("fail_safe", "waited_for_connection")


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures as they are; of several, each figure's median, errors and fail-safes
    summed over the runs, the range of the headline figures under ``spread``, every run under
    ``runs``."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    for key in runs[0]:
        vals = [r.get(key) for r in runs]
        if key == "errors":
            total: dict[str, int] = {}
            for r in runs:
                for k, n in r["errors"].items():
                    total[k] = total.get(k, 0) + n
            out[key] = total
        elif key in _SUMMED:
            out[key] = sum(vals)
        elif any(_number(v) for v in vals) and all(v is None or _number(v) for v in vals):
            out[key] = statistics.median(v for v in vals if v is not None)
    out["spread"] = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in _SPREAD
                     if all(_number(r.get(k)) for r in runs)}
    out["runs"] = runs
    return out


def _range(r: dict[str, Any], key: str, fmt: str = ".2f") -> str:
    """`` [lo-hi]`` over the runs behind a median; empty for a single run."""
    lo_hi = r.get("spread", {}).get(key)
    return "" if lo_hi is None else f" [{lo_hi[0]:{fmt}}-{lo_hi[1]:{fmt}}]"


def _deciders(n: int, tmp: Path, tls: list[str], pki: Path, feed: Feed,
              duration: float, warmup: float, batch_s: float, n_runs: int = 1,
              list_file: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``serve --workers n`` on a fresh ledger of its own (with the sanctions list ``list_file``
    sealed first, when given): batch throughput with ``n`` calls in flight, then POST /v1/decisions
    at 1,000/s offered; ``n_runs`` times each, interleaved."""
    home = tmp / f"deciders-{n}"
    home.mkdir()
    url = f"sqlite:///{home / 'ledger.db'}"
    overrides: dict[str, Any] = {"db": url, "keys": home / "keys"}
    ops.initialise(Settings(**overrides))
    if list_file is not None:
        subprocess.run([sys.executable, "-m", "api.cli", "lists", "load", str(list_file), "--format",
                        "internal-csv", "--name", "bench-list", "--rationale", "benchmark", "--db", url,
                        "--keys", str(home / "keys")], check=True, capture_output=True)
    argv = [sys.executable, "-m", "api.cli", "serve", "--db", url, "--keys", str(home / "keys"),
            "--port", "0", *tls, "--roles", str(pki / "roles.toml"), "--workers", str(n)]
    bs, os_ = [], []
    cursor = feed.ledger()
    with serving(argv, home, "sealtrail serving on ", env_extra=env) as server:
        real = Loader(server, pki, sealtrail=True)
        for k in range(n_runs):
            bs.append(real.run("/v1/decisions/batch", cursor.batch_run(1000, batch_s), "--mode", "batch",
                               "--duration", str(batch_s), "--connections", str(n)))
            os_.append(real.run("/v1/decisions", cursor.singles(round(P99_TARGET_RATE * (duration + warmup))),
                                "--rate", str(P99_TARGET_RATE), "--duration", str(duration),
                                "--warmup", str(warmup)))
            if n_runs > 1:
                print(f"  run {k + 1}/{n_runs}: --workers {n}: batch {bs[-1]['decisions_per_s']:,.0f} "
                      f"decisions/s; 1,000/s offered p99 {os_[-1].get('p99_ms', 0.0):.2f} ms")
    b, o = combine(bs), combine(os_)
    listed = "" if list_file is None else ", a sanctions list in force"
    print(f"serve --workers {n}{listed}: batch endpoint {b['decisions_per_s']:,.0f} decisions/s ({n} calls "
          f"in flight{_short(b)}, server CPU {_cpu(b)}/decision)")
    print(_open_line(f"--workers {n}", o))
    return {"workers": n, "batch": b, "open": o, "list": list_file is not None}


def _open_line(label: str, r: dict[str, Any]) -> str:
    errs = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
    p50, p99, top = (r.get(k, 0.0) for k in ("p50_ms", "p99_ms", "max_ms"))
    lag = "-" if r["send_lag_p99_ms"] is None else f"{r['send_lag_p99_ms']:.2f} ms"  # None: every send waited
    return (f"  {label:<19} {r['offered_per_s']:>6,.0f}/s offered, {r['achieved_per_s']:>6,.0f}/s achieved: "
            f"p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  max {top:7.2f} ms; errors {errs}; "
            f"fail-safe {r['fail_safe']}; waited for a connection {r['waited_for_connection']}; "
            f"client CPU {r['client_cpu_share']:.0%}, send lag p99 {lag}; server CPU {_cpu(r)}/request")


def decision_record_bytes(db: Path) -> tuple[int, float]:
    """How many decision records the ledger file ``db`` holds and their mean sealed length, read
    through a read-only connection while the server writes (WAL lets a reader in)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        n, mean = conn.execute("SELECT count(*), avg(length(record)) FROM ledger_entries "
                               "WHERE kind = 'decision'").fetchone()
    finally:
        conn.close()
    return int(n), float(mean or 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="3 s per rate, fewer batch calls")
    mode.add_argument("--full", action="store_true",
                      help=f"{FULL_S:.0f} s per rate, every configuration {FULL_RUNS} times, medians")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dir", type=Path, help="where the SQLite ledger lives [a temporary directory]")
    ap.add_argument("--rates", default="500,1000", help="offered requests/s, comma-separated")
    ap.add_argument("--deciders", default="1,2",
                    help="serve --workers counts for the deciders rows ('' for none)")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for every sealtrail server of the run, e.g. SEALTRAIL_MAX_BATCH=256 "
                         "(repeatable)")
    ap.add_argument("--list-entries", type=int, default=0,
                    help="a sanctions list of this many entries in force for the deciders rows [none]")
    args = ap.parse_args()
    server_env = dict(e.split("=", 1) for e in args.server_env)
    if any(not k.startswith("SEALTRAIL_") for k in server_env):
        ap.error("--server-env takes SEALTRAIL_* settings")
    deciders = [int(n) for n in args.deciders.split(",") if n.strip()]
    duration, warmup = (3.0, 1.0) if args.quick else (FULL_S, 2.0) if args.full else (10.0, 2.0)
    batch_s = 4.0 if args.quick else 10.0
    n_runs = FULL_RUNS if args.full else 1
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
              f"{warmup:.0f} s warm-up, {duration:.0f} s measured per rate"
              + (f"; every configuration {n_runs} times, interleaved, median reported [range]\n"
                 if n_runs > 1 else "\n"))
        if server_env:
            print("Server:     " + ", ".join(f"{k}={v}" for k, v in server_env.items()) + "\n")
        url = f"sqlite:///{tmp / 'ledger.db'}"
        keys, pki = tmp / "keys", tmp / "pki"
        overrides: dict[str, Any] = {"db": url, "keys": keys}
        ops.initialise(Settings(**overrides))
        durable_home = tmp / "durable"
        durable_home.mkdir()
        durable_url = f"sqlite:///{durable_home / 'ledger.db'}"
        durable_overrides: dict[str, Any] = {"db": durable_url, "keys": durable_home / "keys"}
        ops.initialise(Settings(**durable_overrides))
        create_dev_pki(pki)
        feed = Feed(tmp)
        cursor = feed.ledger()  # the payments the main sealtrail server is sent, each once
        tls = ["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
               "--client-ca", str(pki / "ca.pem")]
        bare_argv = [sys.executable, "-m", "bench.bare_app", "--port", "0", *tls]
        real_argv = [sys.executable, "-m", "api.cli", "serve", "--db", url, "--keys", str(keys),
                     "--port", "0", *tls, "--roles", str(pki / "roles.toml")]
        results: dict[str, Any] = {"open": [], "batch": []}
        with ExitStack() as servers:
            bare_server = servers.enter_context(serving(bare_argv, tmp, "bare serving on "))
            real_server = servers.enter_context(serving(real_argv, tmp, "sealtrail serving on ",
                                                        env_extra=server_env))
            bare, real = Loader(bare_server, pki), Loader(real_server, pki, sealtrail=True)
            cap = bare.run("/", feed.ledger().singles(10_000), "--mode", "capacity", "--duration", "3",
                           "--connections", "32")
            results["client_capacity"] = cap
            us = cap["client_cpu_us_per_request"]
            print(f"client capacity (closed loop, 32 connections, against the bare app on the same cores): "
                  f"{cap['per_s']:,.0f} requests/s; client CPU {us:.0f} µs/request "
                  f"(~{1e6 / us:,.0f}/s of one core)")
            # The durable baseline seals records as long as sealtrail's decision records: a second
            # of decisions first (on the ledger the measured runs then extend), their mean length.
            real.run("/v1/decisions", cursor.singles(100), "--rate", "100", "--duration", "1",
                     "--warmup", "0")
            n_records, record_mean = decision_record_bytes(tmp / "ledger.db")
            if not n_records:
                raise RuntimeError("sealtrail sealed no decision record to measure")
            record_bytes = round(record_mean)
            results["decision_record_bytes"] = record_mean
            durable_argv = [sys.executable, "-m", "bench.durable_app", "--port", "0", *tls,
                            "--db", durable_url, "--keys", str(durable_home / "keys"),
                            "--record-bytes", str(record_bytes)]
            durable_server = servers.enter_context(serving(durable_argv, durable_home, "durable serving on "))
            durable = Loader(durable_server, pki)
            results["durable_record_bytes"] = record_bytes
            print(f"durable bare app: one record of {record_bytes:,} bytes a request (sealtrail's decision "
                  f"records: mean {record_mean:,.0f} bytes over {n_records}), payload the request body, "
                  f"group commit on its own SQLite ledger (WAL, synchronous=FULL)")
            print("open loop:")
            for rate in rates:
                common = ("--rate", str(rate), "--duration", str(duration), "--warmup", str(warmup))
                runs: dict[str, list[dict[str, Any]]] = {"bare": [], "durable": [], "decisions": []}
                for k in range(n_runs):
                    if n_runs > 1:
                        print(f" run {k + 1}/{n_runs}:")
                    single_file = cursor.singles(round(rate * (duration + warmup)))
                    runs["bare"].append(bare.run("/", single_file, *common))
                    print(_open_line("bare app", runs["bare"][-1]))
                    runs["durable"].append(durable.run("/", single_file, *common))
                    print(_open_line("durable bare app", runs["durable"][-1]))
                    runs["decisions"].append(real.run("/v1/decisions", single_file, *common))
                    print(_open_line("POST /v1/decisions", runs["decisions"][-1]))
                entry: dict[str, Any] = {"rate": rate, **{name: combine(rs) for name, rs in runs.items()}}
                if n_runs > 1:
                    print(f" median of {n_runs}:")
                    print(_open_line("bare app", entry["bare"]))
                    print(_open_line("durable bare app", entry["durable"]))
                    print(_open_line("POST /v1/decisions", entry["decisions"]))
                results["open"].append(entry)
            print("batch endpoint (closed loop, one call in flight):")
            for size in (1000, 10_000):
                batch_args = ("--duration", str(batch_s), "--connections", "1")
                bs: list[dict[str, Any]] = []
                us_: list[dict[str, Any]] = []
                ds: list[dict[str, Any]] = []
                for _ in range(n_runs):
                    f = cursor.batch_run(size, batch_s)
                    bs.append(bare.run("/", f, "--mode", "capacity", *batch_args))
                    # transactions/s the transport alone carries
                    bs[-1]["decisions_per_s"] = bs[-1]["per_s"] * size
                    us_.append(durable.run("/batch", f, "--mode", "batch", *batch_args))
                    ds.append(real.run("/v1/decisions/batch", f, "--mode", "batch", *batch_args))
                b, u, d = combine(bs), combine(us_), combine(ds)
                print(f"  {size:>6,} a call: {d['decisions_per_s']:>8,.0f} decisions/s "
                      f"({d['ok']} calls{_short(d)}, "
                      f"p50 {d.get('p50_ms', 0):,.0f} ms a call, errors {sum(d['errors'].values())}; "
                      f"server CPU {_cpu(d)}/decision); bare app with the same bodies "
                      f"{b['decisions_per_s']:,.0f} transactions/s")
                print(f"{'':>17}durable bare app {u['decisions_per_s']:>8,.0f} records/s "
                      f"({u['ok']} calls, p50 {u.get('p50_ms', 0):,.0f} ms a call, "
                      f"errors {sum(u['errors'].values())}; "
                      f"server CPU {_cpu(u)}/record)")
                results["batch"].append({"size": size, "bare": b, "durable": u, "decisions": d})
        list_file = None
        if args.list_entries > 0:
            list_file = tmp / "list.csv"
            list_file.write_bytes(list_csv(args.list_entries))
        results["list_entries"] = args.list_entries
        results["deciders"] = [_deciders(n, tmp, tls, pki, feed, duration, warmup, batch_s, n_runs, list_file,
                                         server_env)
                               for n in deciders]
    probe_after = probe_ms()

    rows = []
    for o in results["open"]:
        b, u, d = o["bare"], o["durable"], o["decisions"]
        at_target = o["rate"] == P99_TARGET_RATE
        rows.append(Row(f"POST /v1/decisions, {o['rate']:,.0f}/s offered: p99",
                        f"{d['p99_ms']:.2f} ms{_range(d, 'p99_ms')} "
                        f"(p50 {d['p50_ms']:.2f}, max {d['max_ms']:.1f}; "
                        f"{d['achieved_per_s']:,.0f}/s, {sum(d['errors'].values())} errors; "
                        f"CPU {_cpu(d)}/req)",
                        f"bare {b['p99_ms']:.2f} ms{_range(b, 'p99_ms')} "
                        f"(p50 {b['p50_ms']:.2f}; CPU {_cpu(b)}/req)",
                        f"{d['p99_ms'] / b['p99_ms']:.1f}x",
                        f"<= {P99_TARGET_MS:.0f} ms" if at_target else "",
                        verdict(d["p99_ms"] <= P99_TARGET_MS and not d["errors"]) if at_target else ""))
        ratio = d["p99_ms"] / u["p99_ms"]
        rows.append(Row("  the same against the durable bare app: p99",
                        f"{d['p99_ms']:.2f} ms (p50 {d['p50_ms']:.2f})",
                        f"durable bare {u['p99_ms']:.2f} ms{_range(u, 'p99_ms')} (p50 {u['p50_ms']:.2f}; "
                        f"{u['achieved_per_s']:,.0f}/s, {sum(u['errors'].values())} errors; "
                        f"CPU {_cpu(u)}/req)",
                        f"{ratio:.1f}x",
                        f"<= {DURABLE_RATIO_TARGET:.0f}x" if at_target else "",
                        verdict(ratio <= DURABLE_RATIO_TARGET and not d["errors"]) if at_target else ""))
        cpu_d, cpu_u = d.get("server_cpu_us_per_request"), u.get("server_cpu_us_per_request")
        rows.append(Row("  the same: server CPU per request",
                        _cpu(d) + _range(d, "server_cpu_us_per_request", ",.0f"),
                        f"durable bare {_cpu(u)}{_range(u, 'server_cpu_us_per_request', ',.0f')}, "
                        f"bare {_cpu(b)}",
                        "" if cpu_d is None or not cpu_u else f"{cpu_d / cpu_u:.1f}x"))
    for bt in results["batch"]:
        b, u, d = bt["bare"], bt["durable"], bt["decisions"]
        rows.append(Row(f"POST /v1/decisions/batch, {bt['size']:,} a call",
                        f"{d['decisions_per_s']:,.0f} decisions/s{_range(d, 'decisions_per_s', ',.0f')} "
                        f"(CPU {_cpu(d)}/decision)",
                        f"bare {b['decisions_per_s']:,.0f} tx/s",
                        f"{b['decisions_per_s'] / d['decisions_per_s']:.1f}x",
                        f">= {BATCH_TARGET:,.0f}/s", verdict(d["decisions_per_s"] >= BATCH_TARGET)))
        rows.append(Row("  the same against the durable bare app",
                        f"{d['decisions_per_s']:,.0f} decisions/s",
                        f"durable bare {u['decisions_per_s']:,.0f} records/s"
                        f"{_range(u, 'decisions_per_s', ',.0f')} (CPU {_cpu(u)}/record)",
                        f"{u['decisions_per_s'] / d['decisions_per_s']:.1f}x"))
    base = results["deciders"][0] if results["deciders"] else None
    listed = f", {results['list_entries']:,}-entry list in force" if results["list_entries"] else ""
    for dn in results["deciders"]:
        d, o = dn["batch"], dn["open"]
        rows.append(Row(f"serve --workers {dn['workers']}{listed}: batch endpoint, 1,000 a call",
                        f"{d['decisions_per_s']:,.0f} decisions/s{_range(d, 'decisions_per_s', ',.0f')} "
                        f"({dn['workers']} calls in flight; CPU {_cpu(d)}/decision)",
                        "" if base is None or base is dn else
                        f"--workers {base['workers']}: {base['batch']['decisions_per_s']:,.0f}/s",
                        "" if base is None or base is dn else
                        f"{d['decisions_per_s'] / base['batch']['decisions_per_s']:.2f}x",
                        ">= 8,000/s" if dn["workers"] == 2 else "",
                        verdict(d["decisions_per_s"] >= 8000) if dn["workers"] == 2 else ""))
        rows.append(Row(f"serve --workers {dn['workers']}{listed}: POST /v1/decisions, 1,000/s offered: p99",
                        f"{o['p99_ms']:.2f} ms{_range(o, 'p99_ms')} (p50 {o['p50_ms']:.2f}; "
                        f"{sum(o['errors'].values())} errors; fail-safe {o['fail_safe']}; CPU {_cpu(o)}/req)",
                        "", "", "", ""))
    print("\n" + format_table(rows, "sealtrail serve (mTLS, SQLite)"))
    print(f"\nratio: sealtrail's p99 over the bare app's (latency rows); the bare app's rate over "
          f"sealtrail's (batch rows). The load generator and the server share {host['cores']} cores.")
    print(f"durable bare app: the same stack sealing one {results['durable_record_bytes']:,}-byte record "
          f"a request (group commit, WAL, synchronous=FULL), no decision logic; its rows' ratios: "
          f"sealtrail's p99 (CPU) over its p99 (CPU), its records/s over sealtrail's decisions/s.")
    if n_runs > 1:
        print(f"--full: each figure the median of {n_runs} runs, [range] over them; errors and fail-safes "
              f"summed over the runs.")
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"(at the start: {load_before})")
    print(f"CPU probe: {probe_before:.1f} ms before, {probe_after:.1f} ms after")
    host["cpu_probe_ms"] = {"before": probe_before, "after": probe_after}
    if args.json:
        write_json(args.json, {"machine": host, "duration_s": duration, "warmup_s": warmup,
                               "batch_s": batch_s, "runs": n_runs, **results})


if __name__ == "__main__":
    main()
