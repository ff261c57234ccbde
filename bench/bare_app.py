"""The HTTP benchmark's baseline: the serving stack of ``sealtrail serve`` around an app doing nothing.

Same uvicorn, same ``TlsHttpToolsProtocol``, same mutual TLS (``api.server.build_server``), one
process; the ASGI app reads the request body and answers ``200 {}``. What a decision costs
beyond this is sealtrail's own work. Run as
``python -m bench.bare_app --tls-cert S --tls-key K --client-ca CA [--port 0]``; it prints
``bare serving on https://HOST:PORT`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from api.server import TlsFiles, build_server

__all__ = ["app", "main", "serve_announced"]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"2")]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """200 ``{}`` to every request, after reading its whole body; lifespan acknowledged."""
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": b"{}"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls-cert", type=Path, required=True)
    ap.add_argument("--tls-key", type=Path, required=True)
    ap.add_argument("--client-ca", type=Path, required=True)
    args = ap.parse_args()
    tls = TlsFiles(args.tls_cert, args.tls_key, args.client_ca)
    serve_announced(build_server(app, args.host, args.port, tls=tls), "bare serving on")


def serve_announced(server: Any, banner: str) -> None:
    """Run ``server`` (``api.server.build_server``'s) until it stops; once it listens, print
    ``banner https://HOST:PORT`` on stdout (what ``bench.http.serving`` waits for)."""
    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            sys.stdout.write(f"{banner} https://{host}:{port}\n")
            sys.stdout.flush()
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
