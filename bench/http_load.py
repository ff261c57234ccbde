"""The HTTP benchmark's load generator, run as its own process: open-loop, over mutual TLS.

Requests leave on a fixed schedule, one every ``1/rate`` s whatever the server does, and
each latency is measured from the request's *scheduled* send time to the end of its response:
time a request waits for a free connection, or because the client fell behind, counts
(no coordinated omission). Connections are HTTP/1.1 keep-alive, opened before the schedule
starts; the client is plain asyncio protocols with httptools' response parser, so one core
offers thousands of requests/s (``--mode capacity`` measures how many, closed-loop).
``--mode batch`` sends batch calls back to back and counts the decisions they return.

Bodies come one per line from ``--bodies``, reused in turn; with ``--once`` each is sent at most
once (an open-loop run whose schedule needs more bodies than the file holds is refused; a closed
loop stops when they run out). Answers that say ``"replayed":true`` are counted (``replayed``): a
payment sent again to sealtrail is answered from its idempotency store, not decided, so a run
that reuses bodies against one ledger measures replays. The result is one JSON object on stdout;
the parent, ``bench.http``, prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httptools
import orjson

from bench.report import percentile

__all__ = ["main"]

_FAIL_SAFE_NULL = b'"fail_safe":null'
_REPLAYED = b'"replayed":true'  # an answer from the idempotency store (sealtrail's JSON has no spaces)


class _Conn(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.body: list[bytes] = []
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.ready: asyncio.Future[None] = loop.create_future()
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(exc or ConnectionResetError("connection closed"))

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        body, self.body = b"".join(self.body), []
        if waiter is not None and not waiter.done():
            waiter.set_result((self.parser.get_status_code(), body))

    def _fail(self, exc: BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def request(self, data: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Send one whole request; the future resolves with (status, body)."""
        fut: asyncio.Future[tuple[int, bytes]] = self.loop.create_future()
        if self.closed or self.transport is None:
            fut.set_exception(ConnectionResetError("connection closed"))
            return fut
        self.waiter = fut
        self.transport.write(data)
        return fut


class _Target:
    """Where requests go and the bytes of each one, prepared before any timing."""

    def __init__(self, args: argparse.Namespace) -> None:
        url = urlsplit(args.url)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 443
        self.ssl = ssl.create_default_context(cafile=str(args.ca))
        self.ssl.load_cert_chain(str(args.cert), str(args.key))
        head = (f"POST {args.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\n").encode()
        bodies = [line for line in Path(args.bodies).read_bytes().split(b"\n") if line]
        if not bodies:
            raise SystemExit(f"{args.bodies}: no request bodies")
        self.requests = [head + b"Content-Length: %d\r\n\r\n" % len(b) + b for b in bodies]

    async def connect(self, n: int) -> list[_Conn]:
        loop = asyncio.get_running_loop()
        conns = []
        for _ in range(n):
            _, proto = await loop.create_connection(lambda: _Conn(loop), self.host, self.port, ssl=self.ssl)
            conns.append(proto)
        return conns


def _latency_summary(lat_s: list[float]) -> dict[str, float]:
    if not lat_s:
        return {}
    ms = [v * 1e3 for v in lat_s]
    return {"p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99),
            "p999_ms": percentile(ms, 99.9), "max_ms": max(ms), "mean_ms": sum(ms) / len(ms)}


async def open_loop(t: _Target, rate: float, duration: float, warmup: float, connections: int,
                    drain_s: float = 30.0) -> dict[str, Any]:
    """Fixed-rate schedule; latencies from the scheduled send time; warm-up not counted."""
    loop = asyncio.get_running_loop()
    idle: deque[_Conn] = deque(await t.connect(connections))
    backlog: deque[tuple[int, float]] = deque()  # (request index, scheduled time) waiting for a connection
    total = round(rate * (warmup + duration))
    lat: list[float] = []
    lag: list[float] = []  # send time - scheduled time where a connection was free: the client's own delay
    waited_n = 0  # requests that waited for a free connection (all of the pool busy)
    errors: Counter[str] = Counter()
    fail_safe = 0
    outstanding = 0
    done = asyncio.Event()
    start = loop.time() + 0.05
    measure_from = start + warmup
    last_done = measure_from
    reqs = t.requests
    replayed = 0

    def send(conn: _Conn, i: int, sched: float, waited: bool = False) -> None:
        nonlocal outstanding, waited_n
        now = loop.time()
        if sched >= measure_from:
            if waited:
                waited_n += 1
            else:
                lag.append(now - sched)
        fut = conn.request(reqs[i % len(reqs)])
        outstanding += 1
        fut.add_done_callback(lambda f: finished(conn, f, sched))

    def finished(conn: _Conn, fut: asyncio.Future[tuple[int, bytes]], sched: float) -> None:
        nonlocal outstanding, fail_safe, last_done, replayed
        outstanding -= 1
        now = loop.time()
        counted = sched >= measure_from
        exc = fut.exception()
        if exc is not None:
            if counted:
                errors[type(exc).__name__] += 1
        else:
            status, body = fut.result()
            replayed += body.count(_REPLAYED)  # the warm-up's too: a replay anywhere taints the run
            if counted:
                if status == 200:
                    lat.append(now - sched)
                    last_done = now
                    if body != b"{}" and _FAIL_SAFE_NULL not in body:
                        fail_safe += 1
                else:
                    errors[f"HTTP {status}"] += 1
        if conn.closed:
            pass  # a broken connection leaves the pool
        elif backlog:
            i, s = backlog.popleft()
            send(conn, i, s, waited=True)
        else:
            idle.append(conn)
        if outstanding == 0 and not backlog and sent_all:
            done.set()

    sent_all = False
    cpu0 = time.process_time()
    i = 0
    while i < total:
        now = loop.time()
        while i < total and start + i / rate <= now:
            sched = start + i / rate
            if idle:
                send(idle.popleft(), i, sched)
            else:
                backlog.append((i, sched))
            i += 1
        if i < total:
            await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
    sent_all = True
    if outstanding == 0 and not backlog:
        done.set()
    try:
        await asyncio.wait_for(done.wait(), drain_s)
    except TimeoutError:
        errors["no answer within the drain"] += outstanding + len(backlog)
    cpu = time.process_time() - cpu0
    window = max(last_done - measure_from, 1e-9)
    measured = total - round(rate * warmup)
    return {"mode": "open", "offered_per_s": rate, "duration_s": duration, "warmup_s": warmup,
            "connections": connections, "requests": measured, "requests_sent": total, "ok": len(lat),
            "replayed": replayed,
            "achieved_per_s": len(lat) / window, "errors": dict(errors), "fail_safe": fail_safe,
            **_latency_summary(lat), "send_lag_p99_ms": percentile(lag, 99) * 1e3 if lag else None,
            "waited_for_connection": waited_n,
            "client_cpu_s": cpu, "client_cpu_share": cpu / (warmup + duration)}


async def closed_loop(t: _Target, duration: float, concurrency: int, count_field: bool,
                      once: bool = False) -> dict[str, Any]:
    """Each connection sends its next request when the previous answer arrived; for capacity.
    ``once``: each body at most once, stopping early when they run out (``exhausted``)."""
    loop = asyncio.get_running_loop()
    conns = await t.connect(concurrency)
    ok = 0
    decisions = 0
    replayed = 0
    sent = 0  # the next body (one counter for every connection)
    reqs = t.requests
    errors: Counter[str] = Counter()
    lat: list[float] = []
    cpu0 = time.process_time()
    t0 = loop.time()
    stop_at = t0 + duration

    async def worker(conn: _Conn) -> None:
        nonlocal ok, decisions, replayed, sent
        while loop.time() < stop_at and not conn.closed and not (once and sent >= len(reqs)):
            n, sent = sent, sent + 1
            s = loop.time()
            try:
                status, body = await conn.request(reqs[n % len(reqs)])
            except (ConnectionError, httptools.HttpParserError) as exc:
                errors[type(exc).__name__] += 1
                return
            if status != 200:
                errors[f"HTTP {status}"] += 1
                continue
            ok += 1
            lat.append(loop.time() - s)
            replayed += body.count(_REPLAYED)
            if count_field:
                decisions += int(orjson.loads(body)["count"])

    await asyncio.gather(*(worker(c) for c in conns))
    wall = loop.time() - t0
    cpu = time.process_time() - cpu0
    out = {"mode": "closed", "concurrency": concurrency, "wall_s": wall, "ok": ok, "per_s": ok / wall,
           "replayed": replayed, "exhausted": once and sent >= len(reqs) and loop.time() < stop_at,
           "errors": dict(errors), **_latency_summary(lat), "client_cpu_s": cpu,
           "client_cpu_us_per_request": cpu / max(ok, 1) * 1e6}
    if count_field:
        out["decisions"] = decisions
        out["decisions_per_s"] = decisions / wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="https://HOST:PORT")
    ap.add_argument("--path", default="/v1/decisions")
    ap.add_argument("--ca", type=Path, required=True)
    ap.add_argument("--cert", type=Path, required=True)
    ap.add_argument("--key", type=Path, required=True)
    ap.add_argument("--bodies", type=Path, required=True, help="one request body per line")
    ap.add_argument("--mode", choices=("open", "capacity", "batch"), default="open")
    ap.add_argument("--rate", type=float, default=1000.0, help="requests/s offered (open)")
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds sent first and not counted (open)")
    ap.add_argument("--connections", type=int, default=64, help="pool size (open), or in flight (closed)")
    ap.add_argument("--once", action="store_true",
                    help="send each body at most once (a closed loop stops when they run out)")
    args = ap.parse_args()
    target = _Target(args)
    if args.mode == "open":
        need = round(args.rate * (args.warmup + args.duration))
        if args.once and need > len(target.requests):
            raise SystemExit(f"{args.bodies}: {len(target.requests)} bodies, the schedule sends {need} "
                             "and --once sends each at most once")
        coro = open_loop(target, args.rate, args.duration, args.warmup, args.connections)
    else:
        coro = closed_loop(target, args.duration, args.connections, count_field=args.mode == "batch",
                           once=args.once)
    result = asyncio.run(coro)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
