"""What the HTTP application costs beside the decision: the ASGI app's CPU a request, in process.

``sealtrail serve`` spends a request's CPU in three places: the server stack (uvloop, TLS,
HTTP; ``bench.http``'s bare app measures it), the application (authentication, the rate and body
gate, routing, reading the headers and body, decoding and checking the payment, the answer) and
the decision itself (``bench.batch_cost``). This measures the second alone: the app that
``serve`` runs (``api.app.create_app`` over a real runtime on a fresh SQLite ledger) called
directly as ASGI (no socket, no TLS; the client certificate handed in as the TLS extension
gives it), its decision service replaced by one that answers every payment at once with a
decision sealed beforehand. Each payment is a seeded simulated JSON message never sent before.
Same-run baseline: ``parse_submissions`` alone over the same bodies, the part of the app's work
that reads the payment. Rows: ``POST /v1/decisions`` (one payment a request) and
``POST /v1/decisions/batch`` (1,000 a call). Run from the repository root:
``python -m bench.app_cost [--quick] [--json PATH]``.
"""

from __future__ import annotations

import sys

if not __package__:  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.app_cost")

import argparse
import asyncio
import ssl
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from api import ops
from api.app import create_app
from api.certs import create_dev_pki
from api.config import Settings
from api.server import TLS_PEER_DER, tune_gc_for_serving
from audit.decide.runtime import Runtime
from audit.decide.submissions import parse_submissions
from audit.decide.types import Decision, Submission
from bench.batch_cost import PRINCIPAL
from bench.http import Feed
from bench.machine import host_info, probe_ms, report_probe
from bench.report import Row, format_table, write_json
from inference.batcher import Priority

BATCH = 1000


class _Answered:
    """A decision service that answers every payment with one decision sealed beforehand."""

    on_batch = None

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    async def decide_async(self, subs: Sequence[Submission], priority: Priority = Priority.P1,
                           timeout_s: float | None = None) -> list[Decision]:
        return [self.decision] * len(subs)


def _scope(path: str, body: bytes, tls: dict[str, Any]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "https", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "headers": [(b"host", b"127.0.0.1:8443"), (b"content-type", b"application/json"),
                                         (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8443), "extensions": {"tls": tls},
            "state": {}}


async def _call(app: Any, path: str, body: bytes, tls: dict[str, Any]) -> int:
    """One request through the app; its status (the body must come whole in one message)."""
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never: the app read the whole body
        raise AssertionError("unreachable")

    async def send(msg: dict[str, Any]) -> None:
        nonlocal status
        if msg["type"] == "http.response.start":
            status = int(msg["status"])

    await app(_scope(path, body, tls), receive, send)
    return status


async def _measure(app: Any, rt: Runtime, tls: dict[str, Any], singles: list[bytes],
                   batches: list[bytes]) -> dict[str, float]:
    async with app.router.lifespan_context(app):
        sealed = rt.service.decide(parse_submissions(singles[0], "json", PRINCIPAL, batch=False))[0]
        real, rt.service = rt.service, _Answered(sealed)  # type: ignore[assignment]  # a stand-in
        try:
            for path, body in (("/v1/decisions", singles[1]), ("/v1/decisions/batch", batches[0])):
                if (status := await _call(app, path, body, tls)) != 200:
                    raise RuntimeError(f"{path} answered {status}")
            out: dict[str, float] = {}
            for name, path, bodies, per in (("single", "/v1/decisions", singles[2:], 1),
                                            ("batch", "/v1/decisions/batch", batches[1:], BATCH)):
                c0 = time.process_time()
                for body in bodies:
                    if (status := await _call(app, path, body, tls)) != 200:
                        raise RuntimeError(f"{path} answered {status}")
                out[name] = (time.process_time() - c0) / (len(bodies) * per) * 1e6
            return out
        finally:
            rt.service = real


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2,000 single requests and 3 batches instead of 10,000 and 10")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    n_single, n_batch = (2000, 3) if args.quick else (10_000, 10)
    host = host_info()
    print(f"CPU: {host['cpu']} ({host['cores']} cores), Python {host['python']}; the app in process, "
          "one thread, the collector set as serve sets it")
    probe0 = probe_ms()
    tune_gc_for_serving()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        pki = tmp / "pki"
        create_dev_pki(pki)
        overrides: dict[str, Any] = {"db": f"sqlite:///{tmp / 'ledger.db'}", "keys": tmp / "keys",
                                     "roles_file": pki / "roles.toml", "client_ca": pki / "ca.pem"}
        settings = Settings(**overrides)
        ops.initialise(settings)
        cursor = Feed(tmp).ledger()
        singles = [b for b in cursor.singles(n_single + 2).read_bytes().split(b"\n") if b]
        batches = [b for b in cursor.batches(BATCH, n_batch + 1).read_bytes().split(b"\n") if b]
        der = ssl.PEM_cert_to_DER_cert((pki / "scorer.pem").read_text())
        tls: dict[str, Any] = {"server_cert": None, "client_cert_chain": [], "client_cert_name": None,
                               "client_cert_error": None, "tls_version": None, "cipher_suite": None,
                               TLS_PEER_DER: der}
        rt = Runtime.open(settings)
        try:
            app = create_app(settings, runtime=rt)
            app_us = asyncio.run(_measure(app, rt, tls, singles, batches))
        finally:
            rt.close()
    principal = PRINCIPAL
    c0 = time.process_time()
    for body in singles[2:]:
        parse_submissions(body, "json", principal, batch=False)
    parse_single = (time.process_time() - c0) / len(singles[2:]) * 1e6
    c0 = time.process_time()
    for body in batches[1:]:
        parse_submissions(body, "json", principal, batch=True)
    parse_batch = (time.process_time() - c0) / (len(batches[1:]) * BATCH) * 1e6
    rows = [Row("POST /v1/decisions, the app's CPU a request (decision stubbed)",
                f"{app_us['single']:,.0f} µs", f"parse_submissions alone {parse_single:,.0f} µs",
                f"{app_us['single'] / parse_single:.1f}x"),
            Row(f"POST /v1/decisions/batch, {BATCH:,} a call, the app's CPU a payment",
                f"{app_us['batch']:,.0f} µs", f"parse_submissions alone {parse_batch:,.0f} µs",
                f"{app_us['batch'] / parse_batch:.1f}x")]
    print(format_table(rows, subject="the app in process"))
    report_probe(host, probe0)
    if args.json:
        write_json(args.json, {"machine": host, "app_us_single": app_us["single"],
                               "app_us_batch": app_us["batch"], "parse_us_single": parse_single,
                               "parse_us_batch": parse_batch})
    return 0


if __name__ == "__main__":
    sys.exit(main())
