"""The HTTP benchmark's durable baseline: the serving stack of ``sealtrail serve`` around an app that
only seals.

Same uvicorn, ``TlsHttpToolsProtocol`` and mutual TLS as ``bench.bare_app`` (``api.server.build_server``,
one process). Per request the ASGI app reads the body and queues one record: a fixed RFC 8785 body
padded so that the sealed envelope is ``--record-bytes`` long (``bench.http`` measures a real
decision record's), with the request body as its payload, as a decision record carries the raw
message. One batcher thread (``inference.batcher.Batcher``, one worker, batches of up to 1,024, as
the decision service) seals whatever is queued with one ``Ledger.append_many``: one group commit on
a ledger opened as ``sealtrail serve`` opens it (``api.ops.open_ledger``: SQLite WAL,
``synchronous=FULL``, the same checkpoint policy). The answer leaves once the commit returned.
``POST /batch`` takes a JSON array and seals one record per element (payload: that element),
answering ``{"count": n}``. No parsing into a transaction, no features, model, rules, trace index,
summary or state records: what a decision costs beyond this is the decision itself, not the
durable write. Run as ``python -m bench.durable_app --db URL --keys DIR --record-bytes N
--tls-cert S --tls-key K --client-ca CA [--port 0]`` on a ledger ``sealtrail init`` made; it prints
``durable serving on https://HOST:PORT`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import orjson

from api import ops
from api.config import Settings
from api.server import TlsFiles, build_server
from bench.bare_app import serve_announced
from inference.batcher import Batcher, DeadlineExceeded
from ledger.append import Ledger
from ledger.jcs import Jcs, canonical_bytes
from ledger.records import Receipt, Record, seal

__all__ = ["KIND", "Sealer", "main", "padded_body"]

KIND = "bench.durable"
MAX_BATCH = 1024  # the decision service's default (api.config.Settings.max_batch)
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_JSON = (b"content-type", b"application/json")
_Result = Receipt | DeadlineExceeded


def padded_body(record_bytes: int, payload: bytes) -> Jcs:
    """A canonical body ``{"pad": "xx..."}`` whose sealed envelope (kind ``KIND``, with a payload
    digest, a trace id and a timestamp) is ``record_bytes`` long, or as short as it goes."""
    empty = canonical_bytes({"pad": ""})
    _, envelope, _ = seal(Record.from_jcs(KIND, empty, payload=payload), "2026-01-01T00:00:00.000000Z")
    return canonical_bytes({"pad": "x" * max(0, record_bytes - len(envelope))})


class Sealer:
    """The ASGI app: every request's body sealed in the next group commit, answered once durable."""

    def __init__(self, ledger: Ledger, record_bytes: int) -> None:
        self.ledger = ledger
        self.body = padded_body(record_bytes, b"{}")
        self.batcher: Batcher[bytes, Receipt] = Batcher(self._seal, workers=1, max_batch=MAX_BATCH)

    def _seal(self, payloads: list[bytes]) -> list[Receipt]:
        body = self.body
        return self.ledger.append_many([Record.from_jcs(KIND, body, payload=p) for p in payloads])

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    self.batcher.close(drain=True)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        more = True
        while more:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        raw = b"".join(chunks)
        if scope["path"] == "/batch":
            futures = self.batcher.submit_many([orjson.dumps(tx) for tx in orjson.loads(raw)])
            await _all_done(futures)
            _receipts(futures)  # the commit's exception, if it failed
            answer = orjson.dumps({"count": len(futures)})
        else:
            future = self.batcher.submit(raw)
            await _all_done([future])
            (receipt,) = _receipts([future])
            answer = orjson.dumps({"fail_safe": None, "seq": receipt.seq, "trace_id": receipt.trace_id})
        headers = [_JSON, (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def _receipts(done: Sequence[Future[_Result]]) -> list[Receipt]:
    out = []
    for d in done:
        r = d.result()
        if not isinstance(r, Receipt):  # no deadlines are set, so none can pass
            raise RuntimeError(f"unexpected batcher result {r!r}")
        out.append(r)
    return out


def _all_done(futures: Sequence[Future[_Result]]) -> asyncio.Future[None]:
    """Resolves on the running loop once every future is done, with one loop wake-up per call, as
    the decision service's own waiter does for a batch (``audit.decide.service``)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    remaining = len(futures)
    if not remaining:
        waiter.set_result(None)
        return waiter
    lock = threading.Lock()

    def resolve() -> None:
        if not waiter.done():
            waiter.set_result(None)

    def one_done(_: Future[_Result]) -> None:
        nonlocal remaining
        with lock:
            remaining -= 1
            last = remaining == 0
        if last:
            loop.call_soon_threadsafe(resolve)

    for f in futures:
        f.add_done_callback(one_done)
    return waiter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--db", required=True, help="database URL of a ledger 'sealtrail init' made")
    ap.add_argument("--keys", type=Path, required=True, help="its key directory")
    ap.add_argument("--record-bytes", type=int, required=True, help="sealed envelope length of each record")
    ap.add_argument("--tls-cert", type=Path, required=True)
    ap.add_argument("--tls-key", type=Path, required=True)
    ap.add_argument("--client-ca", type=Path, required=True)
    args = ap.parse_args()
    overrides: dict[str, Any] = {"db": args.db, "keys": args.keys}
    app = Sealer(ops.open_ledger(Settings(**overrides)), args.record_bytes)
    tls = TlsFiles(args.tls_cert, args.tls_key, args.client_ca)
    serve_announced(build_server(app, args.host, args.port, tls=tls), "durable serving on")


if __name__ == "__main__":
    main()
