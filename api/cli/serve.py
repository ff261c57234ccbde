"""``sealtrail serve``: the HTTP API over mutual TLS (or plain HTTP behind a trusted proxy).

Prints one line ``sealtrail serving on https://HOST:PORT`` once it accepts connections (with
``--port 0``, the port the system chose; with ``--json`` one object: ok, url, host, port).
SIGTERM / SIGINT finish the batches in flight, then exit 0. Exit 2 without starting when the
configuration is refused, the port cannot be bound (one line: taken, not this host's address),
or the ledger, key, model or rules cannot be opened. The port is bound before the ledger opens.

``--workers N`` (N > 1) serves with N deciding processes on the one port and log
(``api.cli.supervise``); SIGHUP then restarts them one at a time.

The app, the runtime and uvicorn are imported in the command body so that ``sealtrail --help``
does not load them.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import CliError, DbOpt, KeysOpt, emit, fail, setting_option, settings
from api.config import Settings

if TYPE_CHECKING:
    from api.server import TlsFiles

__all__ = ["listen", "serve"]

ORPHAN_CHECK_S = 1.0  # how often a worker checks that its supervisor is still its parent


def serve(
    db: DbOpt = None,
    keys: KeysOpt = None,
    host: Annotated[str | None, setting_option("host", "--host", help="address to listen on")] = None,
    port: Annotated[int | None, setting_option("port", "--port", min=0, max=65535,
                                               help="port (0: any free port)")] = None,
    tls_cert: Annotated[Path | None, setting_option(
        "tls_cert", "--tls-cert", help="server certificate (PEM)")] = None,
    tls_key: Annotated[Path | None, setting_option(
        "tls_key", "--tls-key", help="server private key (PEM)")] = None,
    client_ca: Annotated[Path | None, setting_option(
        "client_ca", "--client-ca", help="CA that client certificates must chain to")] = None,
    roles: Annotated[Path | None, setting_option("roles_file", "--roles", help="role map (TOML)")] = None,
    proxy_cert_header: Annotated[str | None, setting_option(
        "proxy_cert_header", "--proxy-cert-header",
        help="trust a client certificate forwarded in this header ...")] = None,
    trusted_proxy: Annotated[list[str] | None, setting_option(
        "trusted_proxies", "--trusted-proxy", envvar=False,  # Settings reads the list as JSON
        help="... only from this address or CIDR (repeatable)")] = None,
    backend: Annotated[str | None, setting_option(
        "backend", "--backend", help="model backend: numpy | onnxruntime | cupy | tensorrt")] = None,
    exports_dir: Annotated[Path | None, setting_option(
        "exports_dir", "--exports-dir", help="where export bundles are written and listed from")] = None,
    reporting_entity: Annotated[Path | None, setting_option(
        "reporting_entity", "--reporting-entity",
        help="the reporting-entity file (TOML, docs/goaml.md) that drafting a report needs")] = None,
    workers: Annotated[int | None, setting_option(
        "workers", "--workers", min=1, max=64,
        help="deciding processes sharing the port and the log")] = None,
    listen_fd: Annotated[int | None, typer.Option(
        "--listen-fd", hidden=True, help="serve on this inherited listening socket (a worker)")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "warning",
    as_json: Annotated[bool, typer.Option(
        "--json", help="once serving, print one JSON object (ok, url, host, port), not the line")] = False,
) -> None:
    """Serve the HTTP API: decisions, traces, ledger proofs, rule governance, metrics."""
    from api.app import authenticator, create_app
    from api.server import build_server
    from audit.decide.runtime import Runtime

    try:
        s = settings(db, keys, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, client_ca=client_ca,
                     roles_file=roles, proxy_cert_header=proxy_cert_header, trusted_proxies=trusted_proxy,
                     backend=backend, exports_dir=exports_dir, workers=workers,
                     reporting_entity=reporting_entity)
        tls = _tls(s)
        authenticator(s)  # the role map and proxy settings are sound before anything opens
    except (ValueError, OSError) as exc:
        fail(exc, as_json, code=2)
    # the port before the ledger: a taken port fails fast, exit 2
    sock = listen(s.host, s.port) if listen_fd is None else socket.socket(fileno=listen_fd)
    try:  # the ledger, key, model and rules open before the port accepts: fail fast, exit 2
        rt = Runtime.open(s)
    except Exception as exc:
        sock.close()
        fail(CliError(f"cannot start: {exc}", code=2, error=type(exc).__name__), as_json)
    if s.workers > 1 and listen_fd is None:
        rt.close()  # checked, bootstrapped and its state saved: the workers start from it
        _supervise(s, sock, tls, log_level, as_json)
        return
    try:
        server = build_server(create_app(s, runtime=rt), s.host, s.port, tls=tls, log_level=log_level)

        async def run() -> None:
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if server.started:
                name = server.servers[0].sockets[0].getsockname()
                url = f"{'https' if tls is not None else 'http'}://{_netloc(name[0], name[1])}"
                emit({"url": url, "host": name[0], "port": name[1]}, as_json, lambda: _serving(url))
            watch = asyncio.create_task(_orphaned(server)) if listen_fd is not None else None
            await task
            if watch is not None:
                watch.cancel()

        _run_loop(run())
    except (Exception, SystemExit) as exc:  # uvicorn exits when its startup fails (a bad TLS file)
        fail(CliError(f"the server stopped: {exc}", code=2, error="stopped"), as_json)
    finally:
        sock.close()
        rt.close()  # after the drain: seals nothing new, saves the velocity windows
    if not server.started:
        fail(CliError("the server did not start (see the messages above)", code=2, error="not_started"),
             as_json)


def _supervise(s: Settings, sock: socket.socket, tls: TlsFiles | None, log_level: str, as_json: bool) -> None:
    from api.cli.supervise import Supervisor

    sock.listen(2048)  # before the workers: connections wait in the backlog while they start
    sup = Supervisor(s, sock, s.workers, log_level, lambda line: print(line, file=sys.stderr, flush=True))
    try:
        with sup:  # SIGTERM / SIGINT / SIGHUP are the supervisor's from the first worker's start
            code = sup.start()
            if code is None:
                name = sock.getsockname()
                url = f"{'https' if tls is not None else 'http'}://{_netloc(name[0], name[1])}"
                emit({"url": url, "host": name[0], "port": name[1], "workers": s.workers, "pids": sup.pids},
                     as_json, lambda: _serving(url))
                code = sup.run()
    finally:
        sock.close()
    if code:
        raise typer.Exit(code)


async def _orphaned(server: Any) -> None:
    """A worker whose supervisor is gone (killed outright, with no chance to stop it) drains and
    exits rather than serve on unsupervised: nothing would restart it, roll it or stop it."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(ORPHAN_CHECK_S)
    print("sealtrail: the supervisor is gone; this worker drains and exits", file=sys.stderr, flush=True)
    server.should_exit = True


def _serving(url: str) -> None:
    sys.stdout.write(f"sealtrail serving on {url}\n")
    sys.stdout.flush()


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server to listen on, or ``CliError`` (exit 2)
    saying in one line why not (the port is taken, the address is not this host's, ...)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise CliError(f"cannot listen on {_netloc(host, port)}: {exc}", code=2, error="listen") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            why = "the port is already in use (stop what holds it, or choose another --port)"
        raise CliError(f"cannot listen on {_netloc(host, port)}: {why}", code=2, error="listen",
                       errno=exc.errno) from None
    sock.set_inheritable(True)
    return sock


def _run_loop(main: Coroutine[Any, Any, None]) -> None:
    """uvloop where installed (about 50 µs less CPU a request than asyncio's loop), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


def _tls(s: Settings) -> TlsFiles | None:
    if s.tls_cert is None and s.tls_key is None:
        if not s.proxy_cert_header:
            raise ValueError("--tls-cert and --tls-key are required (plain HTTP is only for running "
                             "behind a TLS-terminating proxy: set --proxy-cert-header and --trusted-proxy)")
        return None
    if s.tls_cert is None or s.tls_key is None:
        raise ValueError("--tls-cert and --tls-key go together")
    if s.client_ca is None and not s.proxy_cert_header:
        raise ValueError("--client-ca is required: clients authenticate with certificates (mutual TLS)")
    for p in (s.tls_cert, s.tls_key, *( [s.client_ca] if s.client_ca else [])):
        if not p.is_file():
            raise ValueError(f"{p}: no such file")
    from api.server import TlsFiles

    return TlsFiles(s.tls_cert, s.tls_key, s.client_ca)
