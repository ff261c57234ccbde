"""``sealtrail witness init|serve|evidence`` (the witness service) and ``sealtrail ledger cosign`` (the
log asking its witnesses).

``witness evidence`` and ``ledger cosign`` are the cron forms: exit 0 when all is well, 1 on an alarm
(evidence kept, a split view, a witness ahead of the log, fewer cosignatures than the quorum), 2 on
a configuration error. ``api.witness`` and the ledger are imported in the command bodies so that
``sealtrail --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, emit_failed, engine, out

__all__ = ["cosign", "witness_app"]

witness_app = typer.Typer(no_args_is_help=True, help="A witness that cosigns the log's checkpoints "
                                                      "(C2SP tlog-witness).")

ConfigOpt = Annotated[Path, typer.Option("--config", envvar="SEALTRAIL_WITNESS_CONFIG",
                                         help="the witness's config file (TOML)")]


@witness_app.command("init")
def witness_init(
    config: ConfigOpt,
    name: Annotated[str, typer.Option("--name", help="the witness's name, e.g. audit.bank.example/witness")],
    log_key: Annotated[list[str], typer.Option(
        "--log-key", help="a verifier key of the log to witness (repeatable); its name is the log's origin")],
    as_json: JsonOpt = False,
) -> None:
    """Create a witness: a new key (witness.key, 0600), its empty state (witness.db) and a config
    beside them. Prints the witness's verifier key, which the log and examiners pin."""
    from api.witness import init_witness
    from ledger.note import NoteVerifier

    try:
        keys = [NoteVerifier.from_vkey(k) for k in log_key]
        cosigner = init_witness(config, name, keys)
    except ValueError as exc:  # KeyFileError is a LedgerError: classified as configuration (exit 2)
        raise CliError(f"{exc}", code=2, error="usage") from None
    doc = {"vkey": cosigner.verifier.vkey, "config": str(config),
           "key_file": str(config.parent / "witness.key"), "state": str(config.parent / "witness.db"),
           "logs": sorted({k.name for k in keys})}
    emit(doc, as_json, lambda: out.print(cosigner.verifier.vkey, markup=False))


def _open(config: Path) -> Any:
    from api.witness import open_witness

    return open_witness(config)


@witness_app.command("serve")
def witness_serve(
    config: ConfigOpt,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="port (0: any free port)")] = 8444,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", envvar="SEALTRAIL_WITNESS_TLS_CERT",
                                                  help="server certificate (PEM)")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", envvar="SEALTRAIL_WITNESS_TLS_KEY",
                                                 help="server private key (PEM)")] = None,
    client_ca: Annotated[Path | None, typer.Option("--client-ca", envvar="SEALTRAIL_WITNESS_CLIENT_CA",
                                                   help="CA client certificates must chain to")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Serve add-checkpoint over mutual TLS. Prints ``sealtrail witness serving on https://HOST:PORT``
    once it accepts connections; SIGTERM/SIGINT stop it."""
    from api.cli.serve import listen
    from api.server import TlsFiles, build_server
    from api.witness import create_witness_app

    if tls_cert is None or tls_key is None or client_ca is None:
        raise CliError("--tls-cert, --tls-key and --client-ca are required: the witness serves mutual TLS "
                       "only", code=2, error="usage")
    witness = _open(config)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    tls = TlsFiles(tls_cert, tls_key, client_ca)
    server = build_server(create_witness_app(witness), host, bound, tls=tls)
    url = f"https://{host}:{bound}"

    import asyncio

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            emit({"url": url, "host": host, "port": bound, "vkey": witness.cosigner.verifier.vkey}, as_json,
                  lambda: print(f"sealtrail witness serving on {url}", flush=True))
        await task

    try:
        asyncio.run(run())
    except (Exception, SystemExit) as exc:  # uvicorn exits when its startup fails (a bad TLS file)
        raise CliError(f"the witness stopped: {exc}", code=2, error="stopped") from None
    finally:
        sock.close()
        witness.close()
    if not server.started:
        raise CliError("the witness did not start (see the messages above)", code=2, error="not_started")


@witness_app.command("evidence")
def witness_evidence(config: ConfigOpt, as_json: JsonOpt = False) -> None:
    """The split views the witness refused and kept (each with both signed notes). Exit 1 when
    there is any: a log showed this witness two histories."""
    witness = _open(config)
    try:
        rows = [e.to_json() for e in witness.evidence()]
    finally:
        witness.close()
    doc: dict[str, Any] = {"witness": witness.cosigner.verifier.vkey, "evidence": rows}

    def human() -> None:
        if not rows:
            out.print("no evidence: every checkpoint submitted was consistent with what was cosigned",
                      markup=False)
        for e in rows:
            out.print(f"{e['kind']} in {e['origin']} at size {e['size']}: {e['detail']}", markup=False)
            out.print(f"  submitted:\n{e['submitted_note']}  cosigned before:\n{e['cosigned_note']}",
                      markup=False)

    if rows:
        emit_failed(doc | {"error": "evidence", "message": f"{len(rows)} contradicting checkpoint(s) kept"},
                    as_json, human)
    emit(doc, as_json, human)


def cosign(
    db: DbOpt = None,
    keys: KeysOpt = None,
    witnesses: Annotated[Path, typer.Option(
        "--witnesses", envvar="SEALTRAIL_WITNESSES_FILE",
        help="the witness list (TOML: a witness table per witness with url and vkey, "
             "min_witnesses, client TLS)")] = Path("witnesses.toml"),
    as_json: JsonOpt = False,
) -> None:
    """Ask each witness to cosign the newest checkpoint (one round; run it from cron or after
    checkpoints). Exit 0 when at least min_witnesses cosigned it, 1 on an alarm or a short quorum."""
    from api.witness import http_post, load_witness_list
    from ledger.cosign import collect

    wl = load_witness_list(witnesses)
    eng = engine(db, keys)
    try:
        with http_post(wl) as post:
            outcomes = collect(eng, wl.endpoints, post)
    finally:
        eng.dispose()
    good = sum(o.ok for o in outcomes)
    alarms = [o for o in outcomes if o.alarm]
    size = outcomes[0].size if outcomes else 0
    doc: dict[str, Any] = {"size": size, "cosigned": good, "min_witnesses": wl.min_witnesses,
                           "witnesses": [o.to_json() for o in outcomes]}

    def human() -> None:
        for o in outcomes:
            mark = "ok   " if o.ok else ("ALARM" if o.alarm else "no   ")
            out.print(f"{mark} {o.witness.split('+')[0]}: {o.detail}", markup=False)
        out.print(f"checkpoint size {size}: {good} of {len(outcomes)} witnesses (quorum {wl.min_witnesses})",
                  markup=False)

    if alarms or good < wl.min_witnesses:
        why = "alarm: " + alarms[0].detail if alarms else f"only {good} of {wl.min_witnesses} cosignatures"
        if not as_json:
            print(why, file=sys.stderr)
        emit_failed(doc | {"error": "alarm" if alarms else "quorum", "message": why}, as_json, human)
    emit(doc, as_json, human)
