"""``sealtrail init`` and ``sealtrail ledger verify|checkpoint|prove|consistency|backup|backup-verify``:
create the ledger, check it end to end, print the proofs an examiner checks against a checkpoint,
and back it up (docs/backups.md).

``api.ops`` (the database layer, Alembic) is imported in the command bodies so that
``sealtrail --help`` does not load it.
"""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import (
    CliError,
    DbOpt,
    JsonOpt,
    KeysOpt,
    emit,
    env_note,
    err,
    out,
    setting_default,
    setting_option,
    settings,
)

if TYPE_CHECKING:
    from api.ops import FullVerifyReport

__all__ = ["init", "ledger_app"]

ledger_app = typer.Typer(no_args_is_help=True, help="Verify, checkpoint and prove the ledger.")
_TRACE_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def print_hashes(hashes: list[str]) -> None:
    out.print("proof:")
    for h in hashes:
        out.print(f"  {h}")


def init(
    db: DbOpt = None,
    keys: KeysOpt = None,
    origin: Annotated[str | None, setting_option(
        "origin", "--origin", help="log origin in checkpoints")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the tables (Alembic), the signing key (0600) and the genesis record."""
    from api import ops

    s = settings(db, keys, origin=origin)
    result = ops.initialise(s)
    emit(result, as_json, lambda: out.print(
        f"{'initialised' if result['created'] else 'already initialised'}: {s.db}\n"
        f"origin   {result['origin']}\nkey      {result['vkey']}\nkey file {s.key_file}", markup=False))


@ledger_app.command("verify")
def ledger_verify(
    db: DbOpt = None,
    keys: KeysOpt = None,
    trusted_key: Annotated[list[str] | None, typer.Option(
        "--trusted-key", help=f"pin a verifier key (repeatable) {env_note('SEALTRAIL_TRUSTED_KEY')}",
        show_default="the public key of --keys")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="processes", show_default="cores")] = None,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option("--checkpoint", help="a signed checkpoint you hold; must match (repeatable)"),
    ] = None,
    max_unsealed: Annotated[int | None, typer.Option(
        min=0, help=f"fail if more newest entries lack a checkpoint {env_note('SEALTRAIL_CHECKPOINT_EVERY')}",
        show_default=setting_default("checkpoint_every"))] = None,
    state_roots: Annotated[bool, typer.Option(
        "--state-roots", help="also recompute the root of every sealed state snapshot from the state "
                              "deltas (a catch-up of the feature state per decider run), and of every "
                              "sealed account-risk snapshot from the decision records (a rebuild per "
                              "policy)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Recompute every leaf, chain hash, node and root; check every checkpoint signature; check
    every derived table (the trace index, the alert and case view) row by row against the sealed
    records."""
    from api import ops
    from ledger import NoteVerifier

    s = settings(db, keys)
    pinned = [NoteVerifier.from_vkey(k) for k in trusted_key or []]
    held = [p.read_text(encoding="utf-8") for p in checkpoint or []]
    limit = s.checkpoint_every if max_unsealed is None else max_unsealed
    from audit.errors import DerivedRowError

    try:
        report = ops.verify(s, pinned, workers, held, limit, state_roots=state_roots)
    except DerivedRowError as exc:  # exit 1 as any damage, with every finding listed
        raise CliError(str(exc), code=1, error=exc.kind, seq=exc.seq, table=exc.table, total=exc.total,
                       findings=[{"table": t, "seq": q, "detail": d} for t, q, d in exc.findings],
                       details=[f"{t} seq {q}: {d}" for t, q, d in exc.findings]) from exc
    doc = report.to_json()

    def human() -> None:
        out.print(f"[green]verified[/]: {report.size} entries, {report.checkpoints} "
                  f"checkpoints, latest at size {report.latest_checkpoint_size} "
                  f"({report.seconds:.2f}s)")
        out.print(f"trusted key: {report.trusted_key or 'none pinned'}", markup=False)
        if report.purged:
            out.print(f"purged payloads: {len(report.purged)} (hashes kept, chain intact)")
            for p in report.purged[:20]:
                out.print(f"  {p.sha256}  first seq {p.first_seq}, purged at seq {p.purge_seq}")
        if report.derived is not None:
            d = report.derived
            out.print(f"derived tables: {d.decisions} decisions and {d.annotations} annotations match their "
                      f"trace index rows ({sum(d.rows.values())} rows, {d.seconds:.2f}s)", markup=False)
            early = f" ({d.unsummarised} decisions sealed before summaries began)" if d.unsummarised else ""
            out.print(f"decision summaries: {d.summaries} chained and matching their decisions{early}",
                      markup=False)
            before = (f" ({d.commits_without_delta} commits sealed before state deltas began)"
                      if d.commits_without_delta else "")
            out.print(f"state deltas: {d.state_deltas} matching the commits they speak for{before}",
                      markup=False)
            if d.state_snapshots or d.account_risk_snapshots:
                out.print(f"state snapshots: {d.state_snapshots} sealed ({d.state_roots_recomputed} roots "
                          f"recomputed); account-risk snapshots: {d.account_risk_snapshots} sealed "
                          f"({d.account_risk_roots_recomputed} roots recomputed)", markup=False)
            v = d.case_view
            if v:
                out.print(f"alert and case view: {v['alerts']} alerts, {v['cases']} cases, {v['events']} "
                          f"case events and {v['outcomes']} payment outcomes match the sealed records up to "
                          f"seq {v['watermark']}", markup=False)
        for w in report.warnings:
            err.print(f"warning: {w}", markup=False)

    emit(doc, as_json, human)


@ledger_app.command("checkpoint")
def ledger_checkpoint(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Sign a checkpoint of the current size now and print the signed note."""
    from api import ops

    ledger = ops.open_ledger(settings(db, keys))
    try:
        cp = ledger.checkpoint()
    finally:
        ledger.engine.dispose()
    c = cp.checkpoint
    emit({"origin": c.origin, "size": c.size, "root": c.root.hex(), "note": cp.note},
         as_json, lambda: out.print(cp.note, end="", markup=False))


@ledger_app.command("prove")
def ledger_prove(
    target: Annotated[str, typer.Argument(
        metavar="SEQ|TRACE_ID", help="entry seq number or trace id (UUID)")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Inclusion proof of one entry against the latest checkpoint (signs one if needed)."""
    from api import ops

    if not (target.isdigit() or _TRACE_ID.fullmatch(target)):
        raise CliError(f"{target!r} is neither a seq number nor a trace id (UUID)", code=2, error="usage",
                       field="SEQ|TRACE_ID")
    proof = ops.prove(settings(db, keys), int(target) if target.isdigit() else target.lower())
    doc = proof.to_json()

    def human() -> None:
        out.print(f"index     {proof.index}\nsize      {proof.size}")
        out.print(f"leaf hash {doc['leaf_hash']}")
        print_hashes(proof.to_json()["hashes"])  # type: ignore[arg-type]
        out.print("checkpoint:")
        sys.stdout.write(proof.checkpoint)

    emit(doc, as_json, human)


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

    doc = ops.consistency(settings(db, keys), old_size, new_size)

    def human() -> None:
        out.print(f"old size {old_size}  root {doc['old_root']}")
        out.print(f"new size {new_size}  root {doc['new_root']}")
        print_hashes(doc["hashes"])

    emit(doc, as_json, human)


TrustedKeyOpt = Annotated[list[str] | None, typer.Option(
    "--trusted-key", help=f"pin a verifier key (repeatable) {env_note('SEALTRAIL_TRUSTED_KEY')}",
    show_default="the public key of --keys")]
WorkersOpt = Annotated[int | None, typer.Option(min=1, help="processes", show_default="cores")]


def _verify_copy(url: str, keys: Path | None, trusted_key: list[str] | None,
                 workers: int | None) -> FullVerifyReport:
    """``ledger verify`` in full (entries, checkpoints, derived tables) on the ledger at ``url``;
    a derived row that does not match exits 1 with its findings, as ``ledger verify`` does."""
    from api import ops
    from audit.errors import DerivedRowError
    from ledger import NoteVerifier

    pinned = [NoteVerifier.from_vkey(k) for k in trusted_key or []]
    try:
        return ops.verify(settings(url, keys), pinned, workers)
    except DerivedRowError as exc:
        raise CliError(f"the backup does not verify: {exc}", code=1, error=exc.kind, seq=exc.seq,
                       table=exc.table, total=exc.total,
                       findings=[{"table": t, "seq": q, "detail": d} for t, q, d in exc.findings]) from exc


def _mismatch(exc: Exception) -> CliError:
    """A ``BackupMismatchError`` as exit 1 with both sides in the JSON (``held``, ``ledger``)."""
    from ledger.backup import BackupMismatchError

    assert isinstance(exc, BackupMismatchError)
    b64 = base64.b64encode
    newest = None if exc.newest is None else {"size": exc.newest.size, "root": b64(exc.newest.root).decode()}
    held = {"origin": exc.held.origin, "size": exc.held.size, "root": b64(exc.held.root).decode()}
    return CliError(str(exc), code=1, error="backup mismatch", held=held,
                    ledger={"size": exc.size, "newest_checkpoint": newest})


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


@ledger_app.command("backup")
def ledger_backup(
    to: Annotated[Path, typer.Option("--to", help="the backup file to write; an existing file is refused")],
    force: Annotated[bool, typer.Option("--force", help="replace an existing file at --to")] = False,
    db: DbOpt = None,
    keys: KeysOpt = None,
    trusted_key: TrustedKeyOpt = None,
    workers: WorkersOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy a live SQLite ledger while appends go on, verify the copy in full, prove it extends the
    live ledger's checkpoint, and only then put it at --to (PostgreSQL: docs/backups.md)."""
    from api import ops
    from ledger.backup import BackupMismatchError, backup_sqlite

    s = settings(db, keys)
    verified: list[FullVerifyReport] = []
    engine = ops.engine_for(s)
    def check(url: str) -> None:
        verified.append(_verify_copy(url, keys, trusted_key, workers))

    try:
        report = backup_sqlite(engine, to, force=force, check=check)
    except BackupMismatchError as exc:
        raise _mismatch(exc) from exc
    finally:
        engine.dispose()
    full = verified[0]
    doc = {**report.to_json(), "verify": full.to_json()}

    def human() -> None:
        e = report.extension
        out.print(f"[green]backed up[/]: {report.path} ({_mib(report.bytes)}, sha256 {report.sha256})")
        out.print(f"records     {e.size} ({e.size - e.newest.size} newer than its newest checkpoint)")
        out.print(f"checkpoint  size {e.newest.size}  root {base64.b64encode(e.newest.root).decode()}",
                  markup=False)
        out.print(f"consistent  with the live checkpoint at size {e.held.size} (RFC 9162 proof, "
                  f"{len(e.proof)} hashes)")
        out.print(f"verified    {full.size} entries, {full.checkpoints} checkpoints, derived tables")
        out.print(f"took        {report.seconds:.2f}s (copy {report.copy_seconds:.2f}s, "
                  f"verify {report.check_seconds:.2f}s)")
        for w in full.warnings:
            err.print(f"warning: {w}", markup=False)

    emit(doc, as_json, human)


@ledger_app.command("backup-verify")
def ledger_backup_verify(
    backup: Annotated[str, typer.Argument(
        metavar="PATH|URL", help="a backup file, or the database URL of a restored ledger")],
    checkpoint: Annotated[Path | None, typer.Option(
        "--checkpoint", help="a signed checkpoint note held from before: the backup must extend it")] = None,
    keys: KeysOpt = None,
    trusted_key: TrustedKeyOpt = None,
    workers: WorkersOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify a backup offline (full ``ledger verify``) and, given a checkpoint held from before,
    prove by RFC 9162 consistency proof that the backup extends it."""
    import time

    from api import ops
    from ledger.backup import BackupMismatchError, inspect_sqlite_backup, prove_extends, sha256_file

    started = time.perf_counter()
    held = None if checkpoint is None else checkpoint.read_text(encoding="utf-8")
    path = None if "://" in backup else Path(backup)
    url = backup if path is None else inspect_sqlite_backup(path)
    full = _verify_copy(url, keys, trusted_key, workers)
    extension = None
    if held is not None:
        engine = ops.engine_for(settings(url, keys))
        try:
            extension = prove_extends(engine, held)
        except BackupMismatchError as exc:
            raise _mismatch(exc) from exc
        finally:
            engine.dispose()
    doc: dict[str, Any] = {
        "verified": True, "backup": backup, "records": full.size,
        "latest_checkpoint_size": full.latest_checkpoint_size,
        "sha256": None if path is None else sha256_file(path),
        "bytes": None if path is None else path.stat().st_size,
        "extends": None if extension is None else extension.to_json(),
        "verify": full.to_json(), "seconds": round(time.perf_counter() - started, 3),
    }

    def human() -> None:
        out.print(f"[green]verified[/]: {backup}: {full.size} entries, {full.checkpoints} checkpoints, "
                  f"latest at size {full.latest_checkpoint_size}, derived tables", highlight=False)
        if path is not None:
            out.print(f"file        {_mib(doc['bytes'])}, sha256 {doc['sha256']}")
        out.print(f"trusted key {full.trusted_key or 'none pinned'}", markup=False)
        if extension is not None:
            out.print(f"extends     the held checkpoint of size {extension.held.size} (RFC 9162 proof to "
                      f"size {extension.target_size}, {len(extension.proof)} hashes)")
        for w in full.warnings:
            err.print(f"warning: {w}", markup=False)

    emit(doc, as_json, human)
