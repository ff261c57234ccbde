"""``sealtrail follow``: check every checkpoint the primary publishes, from beside its hot standby.

Two forms: a loop (``--interval``, Prometheus metrics on ``--metrics-port``, one line on stderr per
alarm) and a cron form (``--once``: one round, exit 0 all good, 1 an alarm, 2 usage or
configuration). The checks are ``ledger.follow``'s; the sources and the state directory
``ledger.follow_io``'s; this module only parses options, wires them, and reports.
"""

from __future__ import annotations

import signal
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import CliError, JsonOpt, emit, emit_failed, err, out

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from ledger.follow import Primary, Replica, Round
    from ledger.follow_io import StateDir
    from ledger.note import NoteVerifier

__all__ = ["FollowMetrics", "follow", "follow_loop", "follow_once"]


def _opt(*decls: str, env: str, help: str, **kw: Any) -> Any:
    return typer.Option(*decls, envvar=env, show_envvar=True, help=help, **kw)


@dataclass(frozen=True)
class RoundOutcome:
    """One round as the command reports it: the round and where each alarm's evidence went."""

    round: Round
    evidence: tuple[str | None, ...]
    now: float

    def to_json(self) -> dict[str, Any]:
        doc = self.round.to_json(self.now)
        for alarm, where in zip(doc["alarms"], self.evidence, strict=True):
            alarm["evidence"] = where
        return doc


def follow_once(state_dir: StateDir, primary: Primary, replica: Replica, pinned: Sequence[NoteVerifier],
                *, now: float, stall_after: float) -> RoundOutcome:
    """One round: load the state, check, keep the new state and the evidence of each alarm."""
    from ledger.follow import follow_round

    r = follow_round(state_dir.load(), primary, replica, pinned, now=now, stall_after=stall_after)
    if r.state is not None:
        state_dir.save(r.state)
    where = [state_dir.keep_evidence(a, now) for a in r.alarms]
    return RoundOutcome(r, tuple(None if w is None else str(w) for w in where), now)


class FollowMetrics:
    """The loop's Prometheus metrics, in their own registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        from prometheus_client import Counter, Gauge

        from ledger.follow import AlarmKind

        self.registry = registry
        self.accepted_size = Gauge("sealtrail_follow_accepted_size", "size of the last accepted checkpoint",
                                   registry=registry)
        self.replica_size = Gauge("sealtrail_follow_standby_size", "entries replicated to the standby",
                                  registry=registry)
        self.lag = Gauge("sealtrail_follow_standby_lag_entries",
                         "entries the standby is behind the primary", registry=registry)
        self.since_new = Gauge("sealtrail_follow_seconds_since_new_checkpoint",
                               "seconds since a newer checkpoint was last accepted", registry=registry)
        self.last_round = Gauge("sealtrail_follow_last_round_timestamp_seconds",
                                "when the last round ended (seconds since the epoch)", registry=registry)
        self.alarms = Counter("sealtrail_follow_alarms", "alarms raised, by kind (one per round raising it)",
                              ["kind"], registry=registry)
        for kind in AlarmKind:
            self.alarms.labels(str(kind))

    def observe(self, r: Round, now: float) -> None:
        if r.state is not None:
            self.accepted_size.set(r.state.accepted.checkpoint.size)
            self.since_new.set(max(0.0, now - r.state.accepted_at))
        if r.replica_size is not None:
            self.replica_size.set(r.replica_size)
        if r.lag is not None:
            self.lag.set(r.lag)
        for a in r.alarms:
            self.alarms.labels(str(a.kind)).inc()
        self.last_round.set(now)


def _stamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def follow_loop(state_dir: StateDir, primary: Primary, replica: Replica, pinned: Sequence[NoteVerifier], *,
                interval: float, stall_after: float, metrics: FollowMetrics | None = None,
                now: Callable[[], float] = time.time, stop: threading.Event | None = None,
                rounds: int | None = None, log: Callable[[str], None] | None = None) -> int:
    """Run rounds every ``interval`` seconds until ``stop`` is set (or ``rounds`` are done); each
    alarm is one line through ``log``. Returns the rounds run."""
    stop = stop or threading.Event()
    say = log or (lambda line: err.print(line, markup=False))
    done = 0
    while not stop.is_set() and (rounds is None or done < rounds):
        t = now()
        outcome = follow_once(state_dir, primary, replica, pinned, now=t, stall_after=stall_after)
        r = outcome.round
        for alarm, where in zip(r.alarms, outcome.evidence, strict=True):
            say(f"{_stamp(t)} {alarm.line()}" + (f" (evidence: {where})" if where else ""))
        if r.new and r.state is not None:
            say(f"{_stamp(t)} accepted checkpoint of size {r.state.accepted.checkpoint.size}"
                + ("" if r.lag is None else f", standby lag {r.lag}"))
        if metrics is not None:
            metrics.observe(r, t)
        done += 1
        if rounds is None or done < rounds:
            stop.wait(interval)
    return done


def _http_client(cert: Path, key: Path, ca: Path | None, timeout: float) -> Any:
    import httpx

    try:
        ctx = ssl.create_default_context(cafile=None if ca is None else str(ca))
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"cannot load the client certificate, key or CA: {exc}", code=2,
                       error="usage") from exc
    return httpx.Client(verify=ctx, timeout=timeout)


def _usage(message: str, field: str) -> CliError:
    return CliError(message, code=2, error="usage", field=field)


def follow(
    standby_db: Annotated[str | None, _opt("--standby-db", env="SEALTRAIL_STANDBY_DB",
                                           help="the standby's database URL (read only)")] = None,
    primary_url: Annotated[str | None, _opt("--primary-url", env="SEALTRAIL_PRIMARY_URL",
                                            help="the primary's HTTP API (https://, mutual TLS)")] = None,
    primary_db: Annotated[str | None, _opt("--primary-db", env="SEALTRAIL_PRIMARY_DB",
                                           help="or: the primary's database URL")] = None,
    client_cert: Annotated[Path | None, _opt("--client-cert", env="SEALTRAIL_FOLLOW_CLIENT_CERT",
                                             help="client certificate for --primary-url (PEM)")] = None,
    client_key: Annotated[Path | None, _opt("--client-key", env="SEALTRAIL_FOLLOW_CLIENT_KEY",
                                            help="its private key (PEM)")] = None,
    ca_cert: Annotated[Path | None, _opt("--ca-cert", env="SEALTRAIL_FOLLOW_CA_CERT",
                                         help="CA of the primary's server certificate",
                                         show_default="the system's")] = None,
    trusted_key: Annotated[list[str] | None, _opt(
        "--trusted-key", env="SEALTRAIL_TRUSTED_KEY",
        help="the log's verifier key, pinned (repeatable); later keys must chain from it")] = None,
    state_dir: Annotated[Path | None, _opt(
        "--state-dir", env="SEALTRAIL_FOLLOW_STATE_DIR",
        help="the follower's own directory: state.json, evidence/")] = None,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between rounds (loop form)")] = 30.0,
    stall_after: Annotated[float, typer.Option(
        min=1.0, help="seconds of standing still before STALL")] = 300.0,
    metrics_port: Annotated[int | None, typer.Option(
        min=0, max=65535, help="serve Prometheus metrics on this port (loop form)",
        show_default="off")] = None,
    metrics_host: Annotated[str, typer.Option(help="address the metrics listen on")] = "127.0.0.1",
    timeout: Annotated[float, typer.Option(min=0.1, help="seconds to wait for the primary's API")] = 10.0,
    once: Annotated[bool, typer.Option("--once", help="one round, then exit 0 (good), 1 (alarm)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check every checkpoint the primary publishes: signed by a trusted key, never smaller than the
    last accepted (ROLLBACK), consistent with it (FORK), made by the replicated records (FORK), and
    coming while the log grows (STALL)."""
    from ledger.database import open_engine
    from ledger.follow import StateError
    from ledger.follow_io import DbPrimary, DbReplica, HttpPrimary, StateDir
    from ledger.note import NoteVerifier

    if standby_db is None:
        raise _usage("--standby-db is required (the standby's database URL)", "--standby-db")
    if (primary_url is None) == (primary_db is None):
        raise _usage("give exactly one of --primary-url and --primary-db", "--primary-url")
    if primary_url is not None and not primary_url.startswith("https://"):
        raise _usage(f"--primary-url must be an https:// URL (the API takes mutual TLS), not {primary_url!r}",
                     "--primary-url")
    if primary_url is not None and (client_cert is None or client_key is None):
        raise _usage("--primary-url needs --client-cert and --client-key (the API takes mutual TLS)",
                     "--client-cert")
    if not trusted_key:
        raise _usage("--trusted-key is required: pin the log's verifier key (name+keyid+key)",
                     "--trusted-key")
    if state_dir is None:
        raise _usage("--state-dir is required (the follower keeps what it accepted there)", "--state-dir")
    if as_json and not once:
        raise _usage("--json needs --once (the loop logs lines and serves metrics)", "--json")
    pinned = [NoteVerifier.from_vkey(k) for k in trusted_key]

    closers: list[Callable[[], None]] = []
    try:
        replica_engine = open_engine(standby_db)
        closers.append(replica_engine.dispose)
        replica = DbReplica(replica_engine)
        primary: Primary
        if primary_db is not None:
            primary_engine = open_engine(primary_db)
            closers.append(primary_engine.dispose)
            primary = DbPrimary(primary_engine)
        else:
            assert primary_url is not None and client_cert is not None and client_key is not None
            client = _http_client(client_cert, client_key, ca_cert, timeout)
            closers.append(client.close)
            primary = HttpPrimary(client, primary_url)
        sd = StateDir(state_dir)
        try:
            sd.lock()
        except StateError as exc:
            raise CliError(str(exc), code=2, error="state") from exc
        closers.append(sd.close)
        try:
            if once:
                _report(follow_once(sd, primary, replica, pinned, now=time.time(), stall_after=stall_after),
                        as_json)
            else:
                _serve_loop(sd, primary, replica, pinned, interval, stall_after, metrics_host, metrics_port)
        except StateError as exc:
            raise CliError(str(exc), code=2, error="state") from exc
    finally:
        for close in reversed(closers):
            close()


def _serve_loop(sd: StateDir, primary: Primary, replica: Replica, pinned: Sequence[NoteVerifier],
                interval: float, stall_after: float, host: str, port: int | None) -> None:
    from prometheus_client import CollectorRegistry, start_http_server

    metrics = FollowMetrics(CollectorRegistry())
    server = None
    if port is not None:
        try:
            server, _ = start_http_server(port, addr=host, registry=metrics.registry)
        except OSError as exc:
            raise CliError(f"cannot serve metrics on {host}:{port}: {exc.strerror}", code=2,
                           error="usage", field="--metrics-port") from exc
        err.print(f"sealtrail follow: metrics on http://{host}:{server.server_port}/metrics", markup=False)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        follow_loop(sd, primary, replica, pinned, interval=interval, stall_after=stall_after,
                    metrics=metrics, stop=stop)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if server is not None:
            server.shutdown()


def _report(outcome: RoundOutcome, as_json: bool) -> None:
    r = outcome.round
    doc = outcome.to_json()

    def human() -> None:
        st = r.state
        if st is None:
            out.print("accepted: nothing yet", markup=False)
        else:
            c = st.accepted.checkpoint
            out.print(f"accepted: size {c.size} root {c.root.hex()}{' (new)' if r.new else ''}", markup=False)
        lag = "unknown" if r.lag is None else str(r.lag)
        out.print(f"standby:  {r.replica_size if r.replica_size is not None else '?'} entries, lag {lag}",
                  markup=False)
        for n in r.notes:
            out.print(f"note: {n}", markup=False)
        for alarm, where in zip(r.alarms, outcome.evidence, strict=True):
            err.print(alarm.line() + (f" (evidence: {where})" if where else ""), markup=False)

    if r.alarms:
        first = r.alarms[0]
        emit_failed({**doc, "error": str(first.kind), "message": first.line()}, as_json, human, code=1)
    emit(doc, as_json, human)
