"""The ``sealtrail`` command line: a thin face over the ledger.

Exit codes (public contract): 0 success / verified; 1 verification failure or refused input;
2 usage or configuration error (bad arguments, missing database or key, unmigrated schema).
Every command that prints results takes ``--json``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import orjson
import typer
from sqlalchemy.exc import SQLAlchemyError

from api.cli_certs import certs_app
from api.cli_demo import demo
from api.cli_export import export_app
from api.cli_export_verify import export_verify
from api.cli_model import features, model_app
from api.cli_parse import parse
from api.cli_rules import rules_app
from api.cli_score import score
from api.cli_serve import serve
from api.cli_traces import traces_app
from api.config import Settings
from api.output import JsonOpt, emit, err, out
from ledger import (
    LedgerError,
    LegalHoldError,
    NoteVerifier,
    RecordError,
    VerificationError,
)
from ledger.errors import DamageError, EntryNotFoundError, RefusedError

app = typer.Typer(no_args_is_help=True, add_completion=False, help="sealtrail: sealed AML decisions")
ledger_app = typer.Typer(no_args_is_help=True, help="Verify, checkpoint and prove the ledger.")
keys_app = typer.Typer(no_args_is_help=True, help="Show and rotate the checkpoint signing key.")
retention_app = typer.Typer(no_args_is_help=True, help="Payload retention, erasure and legal holds.")
app.add_typer(ledger_app, name="ledger")
app.add_typer(keys_app, name="keys")
app.add_typer(retention_app, name="retention")
app.add_typer(rules_app, name="rules")
app.command("parse")(parse)
app.command("features")(features)
app.add_typer(model_app, name="model")
app.add_typer(certs_app, name="certs")
app.command("serve")(serve)
app.command("score")(score)
app.add_typer(traces_app, name="traces")
app.command("demo")(demo)
app.add_typer(export_app, name="export")
export_app.command("verify")(export_verify)


DbOpt = Annotated[str | None, typer.Option("--db", help="database URL [env SEALTRAIL_DB]")]
KeysOpt = Annotated[
    Path | None, typer.Option("--keys", help="key directory [env SEALTRAIL_KEYS]")
]


def settings(db: str | None, keys: Path | None) -> Settings:
    overrides: dict[str, Any] = {}
    if db is not None:
        overrides["db"] = db
    if keys is not None:
        overrides["keys"] = keys
    return Settings(**overrides)


def fail(exc: Exception, as_json: bool) -> NoReturn:
    refused = VerificationError | RecordError | LegalHoldError | EntryNotFoundError | RefusedError
    code = 1 if isinstance(exc, refused) else 2
    kind = exc.kind if isinstance(exc, DamageError) else type(exc).__name__
    if as_json:
        doc: dict[str, Any] = {"ok": False, "error": kind, "message": str(exc)}
        if isinstance(exc, DamageError):
            doc["seq"] = exc.seq
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    err.print(f"[bold red]error:[/] {exc}", markup=True)
    raise typer.Exit(code)


def print_hashes(hashes: list[str]) -> None:
    out.print("proof:")
    for h in hashes:
        out.print(f"  {h}")


def guarded(as_json: bool, fn: Callable[[], None]) -> None:
    """Run a command; every error becomes a clear message, JSON with --json, and the exit
    code of the contract (anything unforeseen: 2, never a traceback)."""
    try:
        fn()
    except typer.Exit:
        raise
    except LedgerError as exc:
        fail(exc, as_json)
    except (ValueError, OSError, SQLAlchemyError) as exc:  # settings, files, database set-up
        fail(exc, as_json)


# --------------------------------------------------------------------------- init


@app.command()
def init(
    db: DbOpt = None,
    keys: KeysOpt = None,
    origin: Annotated[str | None, typer.Option(help="log origin [env SEALTRAIL_ORIGIN]")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the tables (Alembic), the signing key (0600) and the genesis record."""
    from api import ops

    s = settings(db, keys)
    if origin:
        s.origin = origin

    def run() -> None:
        result = ops.initialise(s)
        emit(result, as_json, lambda: out.print(
            f"{'initialised' if result['created'] else 'already initialised'}: {s.db}\n"
            f"origin   {result['origin']}\nkey      {result['vkey']}\nkey file {s.key_file}"
        ))

    guarded(as_json, run)


# --------------------------------------------------------------------------- ledger


@ledger_app.command("verify")
def ledger_verify(
    db: DbOpt = None,
    keys: KeysOpt = None,
    trusted_key: Annotated[
        list[str] | None, typer.Option("--trusted-key", help="pin a verifier key (repeatable)")
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="processes (default: cores)")] = None,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option("--checkpoint", help="a signed checkpoint you hold; must match (repeatable)"),
    ] = None,
    max_unsealed: Annotated[
        int | None,
        typer.Option(min=0, help="fail if more newest entries lack a checkpoint "
                                 "[default: SEALTRAIL_CHECKPOINT_EVERY]"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recompute every leaf, chain hash, node and root; check every checkpoint signature."""
    from api import ops

    def run() -> None:
        s = settings(db, keys)
        pinned = [NoteVerifier.from_vkey(k) for k in trusted_key or []]
        held = [p.read_text(encoding="utf-8") for p in checkpoint or []]
        limit = s.checkpoint_every if max_unsealed is None else max_unsealed
        report = ops.verify(s, pinned, workers, held, limit)
        doc = report.to_json()

        def human() -> None:
            out.print(f"[green]verified[/]: {report.size} entries, {report.checkpoints} "
                      f"checkpoints, latest at size {report.latest_checkpoint_size} "
                      f"({report.seconds:.2f}s)")
            out.print(f"trusted key: {report.trusted_key or 'none pinned'}")
            if report.purged:
                out.print(f"purged payloads: {len(report.purged)} (hashes kept, chain intact)")
                for p in report.purged[:20]:
                    out.print(f"  {p.sha256}  first seq {p.first_seq}, purged at seq {p.purge_seq}")
            for w in report.warnings:
                err.print(f"[yellow]warning:[/] {w}")

        emit(doc, as_json, human)

    guarded(as_json, run)


@ledger_app.command("checkpoint")
def ledger_checkpoint(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Sign a checkpoint of the current size now and print the signed note."""
    from api import ops

    def run() -> None:
        cp = ops.open_ledger(settings(db, keys)).checkpoint()
        c = cp.checkpoint
        emit({"origin": c.origin, "size": c.size, "root": c.root.hex(), "note": cp.note},
             as_json, lambda: out.print(cp.note, end="", markup=False))

    guarded(as_json, run)


@ledger_app.command("prove")
def ledger_prove(
    target: Annotated[str, typer.Argument(metavar="SEQ|TRACE_ID")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Inclusion proof of one entry against the latest checkpoint (signs one if needed)."""
    from api import ops

    if not (target.isdigit() or re.fullmatch(r"[0-9a-fA-F-]{36}", target)):
        err.print(f"error: {target!r} is neither a seq number nor a trace id (UUID)")
        raise typer.Exit(2)

    def run() -> None:
        proof = ops.prove(settings(db, keys), int(target) if target.isdigit() else target.lower())
        doc = proof.to_json()

        def human() -> None:
            out.print(f"index     {proof.index}\nsize      {proof.size}")
            out.print(f"leaf hash {doc['leaf_hash']}")
            print_hashes(proof.to_json()["hashes"])  # type: ignore[arg-type]
            out.print("checkpoint:")
            sys.stdout.write(proof.checkpoint)

        emit(doc, as_json, human)

    guarded(as_json, run)


@ledger_app.command("consistency")
def ledger_consistency(
    old_size: Annotated[int, typer.Argument(min=0)],
    new_size: Annotated[int, typer.Argument(min=0)],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Consistency proof that the tree of OLD_SIZE is a prefix of the tree of NEW_SIZE."""
    from api import ops

    def run() -> None:
        doc = ops.consistency(settings(db, keys), old_size, new_size)

        def human() -> None:
            out.print(f"old size {old_size}  root {doc['old_root']}")
            out.print(f"new size {new_size}  root {doc['new_root']}")
            print_hashes(doc["hashes"])

        emit(doc, as_json, human)

    guarded(as_json, run)


# --------------------------------------------------------------------------- keys


@keys_app.command("show")
def keys_show(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Print the verifier key examiners pin (and the ledger's key history)."""
    from api import ops

    def run() -> None:
        doc = ops.keys_show(settings(db, keys))
        emit(doc, as_json, lambda: out.print(doc["active"]))

    guarded(as_json, run)


@keys_app.command("rotate")
def keys_rotate(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Start signing with a new key; the rotation is itself a ledger record."""
    from api import ops

    def run() -> None:
        doc = ops.keys_rotate(settings(db, keys))
        emit(doc, as_json, lambda: out.print(
            f"rotated at seq {doc['seq']}\nold {doc['old_vkey']}\nnew {doc['new_vkey']}\n"
            f"old private key moved to {doc['retired_file']}"))

    guarded(as_json, run)


# --------------------------------------------------------------------------- retention


@retention_app.command("purge")
def retention_purge(
    db: DbOpt = None,
    keys: KeysOpt = None,
    days: Annotated[int | None, typer.Option(min=1, help="retention [env SEALTRAIL_RETENTION_DAYS]")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Purge payloads older than the retention period, except those under legal hold."""
    from api import ops

    def run() -> None:
        doc = ops.purge_old_payloads(settings(db, keys), days)
        emit(doc, as_json, lambda: out.print(
            f"purged {len(doc['purged'])} payloads; kept {len(doc['held'])} under legal hold"))

    guarded(as_json, run)


@retention_app.command("erase")
def retention_erase(
    sha256: Annotated[list[str], typer.Argument(help="payload SHA-256 (hex)")],
    reason: Annotated[str, typer.Option(help="erasure order reference")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Erase specific payloads now (legal order); refused if a legal hold covers any."""
    from api import ops

    def run() -> None:
        doc = ops.erase(settings(db, keys), [s.lower() for s in sha256], reason)
        emit(doc, as_json, lambda: out.print(f"erased {len(doc['purged'])} payloads at seq {doc['seq']}"))

    guarded(as_json, run)


@retention_app.command("hold")
def retention_hold(
    hold_id: str,
    seq_from: Annotated[int, typer.Option("--from", min=0)],
    seq_to: Annotated[int, typer.Option("--to", min=0)],
    reason: Annotated[str, typer.Option()],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Place a legal hold: payloads of entries SEQ_FROM..SEQ_TO cannot be purged."""
    from api import ops

    def run() -> None:
        doc = ops.hold(settings(db, keys), hold_id, seq_from, seq_to, reason)
        emit(doc, as_json, lambda: out.print(f"hold {hold_id} placed at seq {doc['seq']}"))

    guarded(as_json, run)


@retention_app.command("release")
def retention_release(
    hold_id: str,
    reason: Annotated[str, typer.Option()],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Release a legal hold."""
    from api import ops

    def run() -> None:
        doc = ops.release(settings(db, keys), hold_id, reason)
        emit(doc, as_json, lambda: out.print(f"hold {hold_id} released at seq {doc['seq']}"))

    guarded(as_json, run)


@retention_app.command("holds")
def retention_holds(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """List active legal holds."""
    from api import ops

    def run() -> None:
        doc = ops.holds(settings(db, keys))

        def human() -> None:
            for h in doc["holds"]:
                out.print(f"{h['hold_id']}: seq {h['seq_from']}..{h['seq_to']} ({h['reason']})")
            if not doc["holds"]:
                out.print("no active legal holds")

        emit(doc, as_json, human)

    guarded(as_json, run)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
