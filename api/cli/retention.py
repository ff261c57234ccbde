"""``sealtrail retention purge|erase|hold|release|holds``: payload retention, erasure orders and
legal holds (the hashes stay in the chain; verification reports what was purged).

``api.ops`` is imported in the command bodies so that ``sealtrail --help`` does not load it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import DbOpt, JsonOpt, KeysOpt, emit, out, setting_option, settings

__all__ = ["retention_app"]

retention_app = typer.Typer(no_args_is_help=True, help="Payload retention, erasure and legal holds.")


@retention_app.command("purge")
def retention_purge(
    db: DbOpt = None,
    keys: KeysOpt = None,
    days: Annotated[int | None, setting_option("retention_days", "--days", min=1,
                                               help="retention period in days")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Purge payloads older than the retention period, except those under legal hold."""
    from api import ops

    doc = ops.purge_old_payloads(settings(db, keys), days)
    emit(doc, as_json, lambda: out.print(
        f"purged {len(doc['purged'])} payloads; kept {len(doc['held'])} under legal hold"))


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

    doc = ops.erase(settings(db, keys), [s.lower() for s in sha256], reason)
    emit(doc, as_json, lambda: out.print(f"erased {len(doc['purged'])} payloads at seq {doc['seq']}"))


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

    doc = ops.hold(settings(db, keys), hold_id, seq_from, seq_to, reason)
    emit(doc, as_json, lambda: out.print(f"hold {hold_id} placed at seq {doc['seq']}", markup=False))


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

    doc = ops.release(settings(db, keys), hold_id, reason)
    emit(doc, as_json, lambda: out.print(f"hold {hold_id} released at seq {doc['seq']}", markup=False))


@retention_app.command("holds")
def retention_holds(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """List active legal holds."""
    from api import ops

    doc = ops.holds(settings(db, keys))

    def human() -> None:
        for h in doc["holds"]:
            out.print(f"{h['hold_id']}: seq {h['seq_from']}..{h['seq_to']} ({h['reason']})", markup=False)
        if not doc["holds"]:
            out.print("no active legal holds")

    emit(doc, as_json, human)
