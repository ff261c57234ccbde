"""``sealtrail standby status|promote``: a ledger on PostgreSQL streaming replication.

``status`` says what the ledger database is now (primary or hot standby, its timeline, its newest
``ledger.epoch``, how far it or its standbys lag). ``promote`` ends a standby's recovery
(``pg_promote``) and seals a ``ledger.epoch`` for the timeline it now writes on, with a signed
checkpoint: from then on the sequencer of every process that began on the old primary refuses to
append (``ledger.fencing``, docs/standby.md). Run it on the standby that is to become the primary,
with the ledger's signing key; run it again after a ``pg_ctl promote`` to seal the epoch alone.

Exit codes as the contract says: 0 promoted (or already a primary, its epoch sealed); 1 the
database refused (still in recovery after the wait, or the sequencer's fence refused); 2 usage or
configuration (no database, no key, a role that may not promote).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, out, settings

if TYPE_CHECKING:
    from api.config import Settings

__all__ = ["promote_database", "standby_app"]

standby_app = typer.Typer(no_args_is_help=True, help="Hot standby: replication status and promotion.")


@standby_app.command("status")
def standby_status(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Primary or standby, timeline, newest epoch, replication lag."""
    from ledger import database, replication

    engine = database.open_engine(settings(db, keys).db)
    try:
        doc = replication.status(engine).to_json()
    finally:
        engine.dispose()

    def human() -> None:
        epoch = doc["epoch"]
        newest = "none" if epoch is None else f"timeline {epoch['timeline']} at seq {epoch['seq']}"
        timeline = doc["timeline"] if doc["timeline"] is not None else "of its primary"
        out.print(f"{doc['role']} ({doc['dialect']}), {doc['size']} entries, timeline {timeline}, "
                  f"newest epoch {newest}", markup=False)
        if doc["in_recovery"]:
            out.print(f"received {doc['receive_lsn']}, replayed {doc['replay_lsn']} "
                      f"({doc['replay_lag_bytes']} bytes behind; last replayed commit "
                      f"{doc['last_replay_age_s']} s ago); WAL receiver {doc['receiver'] or 'not running'}",
                      markup=False)
        for s in doc["standbys"]:
            out.print(f"standby {s['name']}: {s['state']}, {s['sync_state']}, replay {s['replay_lag_bytes']} "
                      f"bytes / {s['replay_lag_s']} s behind", markup=False)
        if not doc["in_recovery"] and doc["dialect"] == "postgresql" and not doc["standbys"]:
            out.print("no standby streams from this primary", markup=False)

    emit(doc, as_json, human)


def promote_database(s: Settings, wait_s: int = 60) -> dict[str, Any]:
    """Promote the standby at ``s.db`` (if it still is one) and seal its epoch: what ``sealtrail
    standby promote`` prints. The failover drill calls it as the command runs it."""
    from api import ops
    from ledger import database, replication
    from ledger.fencing import FencedError, seal_epoch

    engine = database.open_engine(s.db)
    try:
        promoted = replication.promote(engine, wait_s)
        ledger = ops.open_ledger(s, engine)
        try:
            sealed = seal_epoch(ledger)
        except FencedError as exc:
            raise CliError(str(exc), code=1, error="fenced", reason=exc.reason) from exc
        size = ledger.size()
    finally:
        engine.dispose()
    return {"promoted": promoted, "timeline": sealed.timeline, "epoch_seq": sealed.seq,
            "epoch_sealed": sealed.created, "lsn": sealed.lsn, "size": size}


@standby_app.command("promote")
def standby_promote(
    db: DbOpt = None,
    keys: KeysOpt = None,
    wait: Annotated[int, typer.Option(min=1, help="seconds to wait for the standby to accept writes")] = 60,
    as_json: JsonOpt = False,
) -> None:
    """Make this standby the primary and seal a ledger.epoch: writers of the old primary are fenced."""
    doc = promote_database(settings(db, keys), wait)
    emit(doc, as_json, lambda: out.print(
        f"{'promoted' if doc['promoted'] else 'already a primary'}: timeline {doc['timeline']}, epoch "
        f"{'sealed' if doc['epoch_sealed'] else 'already sealed'} at seq {doc['epoch_seq']} "
        f"({doc['size']} entries)", markup=False))
