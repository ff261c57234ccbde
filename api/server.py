"""Serving the app over mutual TLS, with the peer certificate handed to the application.

uvicorn verifies client certificates (``ssl.CERT_REQUIRED`` against the client CA) but does
not tell the application which certificate the connection presented. ``TlsHttpToolsProtocol``
fills the ASGI TLS extension (asgiref ``specs/tls.rst``) of every request's scope from the
connection's own verified peer certificate, so the principal comes from the TLS session
itself, never from a header a client could write.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["GC_THRESHOLD", "TLS_PEER_DER", "TlsFiles", "TlsHttpToolsProtocol", "build_server",
           "tune_gc_for_serving"]

# Our addition to the spec's dict: the leaf's DER bytes, so that the app need not decode PEM.
TLS_PEER_DER = "sealtrail_peer_der"


class TlsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus ``scope["extensions"]["tls"]`` on TLS connections."""

    _tls: dict[str, Any] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sslobj = transport.get_extra_info("ssl_object")
        if sslobj is None:
            self._tls = None
            return
        der = sslobj.getpeercert(binary_form=True)
        cipher = sslobj.cipher()
        self._tls = {
            "server_cert": None,
            "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
            "client_cert_name": None,
            "client_cert_error": None,
            "tls_version": None,
            "cipher_suite": None,
            "tls_version_name": sslobj.version(),
            "cipher_name": cipher[0] if cipher else None,
            TLS_PEER_DER: der,
        }

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]


@dataclass(frozen=True)
class TlsFiles:
    """Server certificate and key; with ``client_ca``, a client certificate from it is required."""

    cert: Path
    key: Path
    client_ca: Path | None


# A serving process's garbage collector. One batch of 1,000 decisions allocates some 10^5
# short-lived containers (decoded JSON, transactions, records); at CPython's default young threshold
# (700) that is over a hundred young collections a batch, each promoting whatever is in flight, so
# the old generations fill with garbage and full collections walk the whole heap (app, model,
# velocity windows): ~2 s of GC in a 15 s batch run, ~100 µs a decision. Nearly all of it dies by
# reference counting anyway; cycles are still collected, less often.
GC_THRESHOLD = (50_000, 20, 10)


def tune_gc_for_serving() -> None:
    """Freeze what start-up built (it lives as long as the process: no collection need walk it)
    and raise the young threshold to ``GC_THRESHOLD``."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown, so the process would end by
    the signal (143) instead of exiting 0 once the batches in flight are sealed, as
    ``sealtrail serve`` promises. Same handlers, no re-raise. The collector is tuned once the
    app's lifespan has started (the runtime is open), before the first request."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        tune_gc_for_serving()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def build_server(app: Any, host: str, port: int, *, tls: TlsFiles | None,
                 log_level: str = "warning") -> uvicorn.Server:
    """A uvicorn server for ``app``; ``tls`` None serves plain HTTP (only behind a proxy)."""
    kw: dict[str, Any] = {}
    if tls is not None:
        kw = {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
        if tls.client_ca is not None:
            kw |= {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": str(tls.client_ca)}
    config = uvicorn.Config(app, host=host, port=port, http=TlsHttpToolsProtocol, log_level=log_level,
                            access_log=False, lifespan="on", server_header=False, **kw)
    return _Server(config)
