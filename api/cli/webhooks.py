"""``sealtrail webhooks deliver|status|enable|secret``: held-payment outcomes pushed to the payment systems.

``deliver`` sends each endpoint's outcomes (``SEALTRAIL_WEBHOOKS_FILE``) in ledger order, at least
once, signed as Standard Webhooks (``audit.cases.delivery``, docs/webhooks.md). Two forms: a loop
(``--interval``; one line on stderr when an endpoint starts failing, is disabled or recovers; stops
on SIGTERM or SIGINT after the message in flight) and a cron form (``--once``: one round, exit 0 when
every endpoint is caught up, 1 when one is not: retrying, disabled, held by another deliverer, or
behind after ``--budget`` messages). ``status`` reads each endpoint's cursor, what is pending and the
last failure; ``enable`` resumes an endpoint disabled by ``410 Gone`` or waiting to retry; ``secret``
makes a new ``whsec_`` secret file (0600). Exit 2: usage or configuration.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, emit_failed, engine, err, out, settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from api.webhooks import WebhookList
    from audit.cases.delivery import DeliveryReport

__all__ = ["DeliveryMetrics", "webhooks_app"]

_STATES = ("caught_up", "behind", "retrying", "disabled", "held_elsewhere")


class DeliveryMetrics:
    """The loop's Prometheus metrics, per endpoint, in their own registry: alert on
    ``sealtrail_webhook_failures`` above a few, or on ``sealtrail_webhook_state{state="disabled"}``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from prometheus_client import Counter, Gauge

        self.registry = registry
        self.pending = Gauge("sealtrail_webhook_pending", "outcomes sealed for the endpoint and not yet "
                             "acknowledged", ["endpoint"], registry=registry)
        self.failures = Gauge("sealtrail_webhook_failures", "failed attempts in a row at the endpoint's "
                              "next outcome", ["endpoint"], registry=registry)
        self.delivered = Counter("sealtrail_webhook_delivered", "outcomes acknowledged by the endpoint "
                                 "(this process)", ["endpoint"], registry=registry)
        self.state = Gauge("sealtrail_webhook_state", "1 for the endpoint's state after the last round",
                           ["endpoint", "state"], registry=registry)
        self.last_round = Gauge("sealtrail_webhook_last_round_timestamp_seconds",
                                "when the last round ended (seconds since the epoch)", registry=registry)

    def observe(self, reports: list[DeliveryReport], now: float) -> None:
        for r in reports:
            self.pending.labels(r.endpoint).set(r.pending)
            self.failures.labels(r.endpoint).set(r.failures)
            self.delivered.labels(r.endpoint).inc(r.delivered_now)
            for s in _STATES:
                self.state.labels(r.endpoint, s).set(1 if r.state == s else 0)
        self.last_round.set(now)

webhooks_app = typer.Typer(no_args_is_help=True,
                           help="Held-payment outcomes pushed to the payment systems (Standard Webhooks).")

_FileOpt = Annotated[Path | None, typer.Option(
    "--webhooks", metavar="FILE", envvar="SEALTRAIL_WEBHOOKS_FILE", show_envvar=True,
    help="the endpoints file (TOML, docs/webhooks.md)")]


def _load(file: Path | None, db: str | None, keys: Path | None) -> WebhookList:
    from api.webhooks import load_webhooks
    from audit.cases.webhooks import WebhookConfigError

    path = file or settings(db, keys).webhooks_file
    if path is None:
        raise CliError("no endpoints file: give --webhooks FILE or set SEALTRAIL_WEBHOOKS_FILE", code=2,
                       error="configuration")
    try:
        return load_webhooks(path)
    except WebhookConfigError as exc:
        raise CliError(str(exc), code=2, error="configuration") from exc


def _line(r: DeliveryReport) -> str:
    text = f"{r.endpoint}: {r.state}, cursor {r.cursor}, {r.pending} pending, {r.delivered} delivered"
    if r.delivered_now:
        text += f" ({r.delivered_now} now)"
    if r.state in ("retrying", "disabled") or r.failures:
        text += f"; {r.failures} failure(s) in a row, last {r.last_status or 'no answer'}"
        if r.last_error:
            text += f" ({r.last_error})"
        if r.next_attempt:
            text += f", next attempt {r.next_attempt}"
    if r.disabled:
        text += f"; disabled: {r.disabled}"
    if r.state == "held_elsewhere":
        text += f"; held by {r.holder}"
    if len(r.scorers) > 1:  # one scorer's figures are the endpoint's own
        text += "".join(f"; scorer {s.scorer[:16]}: cursor {s.cursor}, {s.pending} pending"
                        for s in r.scorers)
    return text


def _print_all(reports: list[DeliveryReport]) -> None:
    for r in reports:
        out.print(_line(r), markup=False)


def _holder() -> str:
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@webhooks_app.command("deliver")
def deliver(
    file: _FileOpt = None,
    once: Annotated[bool, typer.Option("--once", help="one round, then exit 0 (all caught up) or 1")] = False,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between rounds (loop form)")] = 2.0,
    budget: Annotated[int, typer.Option(min=1, help="messages to one endpoint in one round at most")] = 1000,
    metrics_port: Annotated[int | None, typer.Option(
        min=0, max=65535, help="serve Prometheus metrics on this port (loop form)")] = None,
    metrics_host: Annotated[str, typer.Option(help="address the metrics listen on")] = "127.0.0.1",
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send each endpoint the outcomes sealed after its cursor, oldest first, at least once."""
    from api.webhooks import http_post
    from audit.cases.delivery import deliver_round, release

    wl = _load(file, db, keys)
    eng = engine(db, keys)
    holder = _holder()
    try:
        with http_post(wl) as post:
            if once:
                try:
                    reports = deliver_round(eng, wl.endpoints, post, holder=holder, budget=budget)
                finally:
                    release(eng, holder)
                doc = {"holder": holder, "endpoints": [r.to_json() for r in reports]}
                if all(r.state == "caught_up" for r in reports):
                    emit(doc, as_json, lambda: _print_all(reports))
                    return
                emit_failed({**doc, "error": "undelivered",
                             "message": "outcomes remain undelivered: " + "; ".join(
                                 _line(r) for r in reports if r.state != "caught_up")},
                             as_json, lambda: _print_all(reports))
            try:
                _loop(eng, wl, post, holder, interval, budget, _metrics(metrics_host, metrics_port))
            finally:
                release(eng, holder)
    finally:
        eng.dispose()


def _metrics(host: str, port: int | None) -> DeliveryMetrics | None:
    if port is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server

    metrics = DeliveryMetrics(CollectorRegistry())
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise CliError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}", code=2,
                       error="configuration") from exc
    err.print(f"metrics on http://{host}:{port}/metrics", markup=False)
    return metrics


def _loop(eng: Any, wl: WebhookList, post: Any, holder: str, interval: float, budget: int,
          metrics: DeliveryMetrics | None) -> None:
    import time

    from audit.cases.delivery import deliver_round

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    err.print(f"delivering to {len(wl.endpoints)} endpoint(s) as {holder}", markup=False)
    last: dict[str, str] = {}
    while not stop.is_set():
        try:
            reports = deliver_round(eng, wl.endpoints, post, holder=holder, budget=budget, stop=stop.is_set)
        except Exception as exc:  # the database away: say so, try again next round
            err.print(f"round failed: {type(exc).__name__}: {exc}", markup=False)
            stop.wait(interval)
            continue
        for r in reports:
            kind = "ok" if r.state in ("caught_up", "behind") else r.state
            if last.get(r.endpoint, "ok") != kind or (r.delivered_now and kind != "ok"):
                err.print(_line(r), markup=False)
            last[r.endpoint] = kind
        if metrics is not None:
            metrics.observe(reports, time.time())
        if not any(r.state == "behind" for r in reports):
            stop.wait(interval)


@webhooks_app.command("status")
def status(file: _FileOpt = None, db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Each endpoint's cursor, pending outcomes, last failure and lease."""
    from audit.cases.delivery import status as read_status

    wl = _load(file, db, keys)
    eng = engine(db, keys)
    try:
        reports = read_status(eng, wl.endpoints)
    finally:
        eng.dispose()
    emit({"endpoints": [r.to_json() for r in reports]}, as_json, lambda: _print_all(reports))


@webhooks_app.command("enable")
def enable(
    name: Annotated[str, typer.Argument(help="the endpoint's name in the endpoints file")],
    file: _FileOpt = None, db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False,
) -> None:
    """Resume an endpoint disabled by 410 Gone, or retry one at once, from where it stopped."""
    from audit.cases.delivery import enable as resume

    wl = _load(file, db, keys)
    if name not in {e.name for e in wl.endpoints}:
        raise CliError(f"no endpoint {name!r} in the endpoints file", error="refused", field="NAME")
    eng = engine(db, keys)
    try:
        if not resume(eng, name):
            raise CliError(f"endpoint {name!r} has not been delivered to yet; nothing to resume",
                           error="refused", field="NAME")
    finally:
        eng.dispose()
    emit({"endpoint": name, "enabled": True}, as_json,
         lambda: out.print(f"{name}: enabled; the next round sends from its cursor", markup=False))


@webhooks_app.command("secret")
def secret(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="where to write it (must not exist)")],
    as_json: JsonOpt = False,
) -> None:
    """Write a new endpoint secret (whsec_..., 32 random bytes) to FILE, mode 0600; give the same
    value to the receiver over a channel you trust."""
    from audit.cases.webhooks import new_secret
    from ledger.errors import KeyFileError
    from ledger.keys import write_private

    try:
        write_private(path, new_secret(), exclusive=True, what="a webhook secret")
    except KeyFileError as exc:
        raise CliError(str(exc), error="refused", field="FILE") from exc
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}", code=2, error="configuration") from exc
    emit({"path": str(path)}, as_json, lambda: out.print(f"wrote {path} (0600)", markup=False))
