"""``sealtrail clearances propose|show|revoke``: good-guy clearances of sanctions name hits.

``propose`` seals that the party at ``--where`` of decision TRACE_ID is not entry ``--entry`` of
list ``--list``, until ``--until`` (at most a year ahead), with a rationale; ``show`` lists every
clearance and what became of it; ``revoke`` ends one. Approval is a four-eyes step taken by a second
officer with a certificate (``POST /v1/clearances/{seq}/approve``, or the console): the CLI acts as
the local operator (``Principal.local(getpass.getuser())``), whom a user name cannot tell apart
from another, so it cannot approve. A proposal clears nothing until it is approved.

Exit codes as every command: 0 done, 1 a refused request (the message names the field), 2 a usage
or configuration error.
"""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import DbOpt, JsonOpt, KeysOpt, emit, out, settings
from api.cli.common import engine as _engine

if TYPE_CHECKING:
    from audit.decide.principal import Principal

__all__ = ["clearances_app"]

clearances_app = typer.Typer(
    no_args_is_help=True,
    help="Good-guy clearances of sanctions name hits: propose (sealed), show, revoke; approval is four-eyes "
         "(HTTP API or console).")

RationaleOpt = Annotated[str, typer.Option("--rationale", help="why (sealed with the step)")]
SeqArg = Annotated[int, typer.Argument(metavar="SEQ", help="the seq of the clearance's proposal")]


def _operator() -> Principal:
    from audit.decide.principal import Principal

    return Principal.local(getpass.getuser())


def _human(doc: dict[str, Any]) -> None:
    approved = "" if doc["approved_seq"] is None else f", approved at seq {doc['approved_seq']}"
    revoked = "" if doc["revoked_seq"] is None else f", revoked at seq {doc['revoked_seq']}"
    out.print(f"clearance {doc['seq']} ({doc['status']}{approved}{revoked}): the {doc['where']} of "
              f"{doc['trace_id']} is not {doc['list']} entry {doc['entry_id']}, until {doc['until']}",
              markup=False)


@clearances_app.command("propose")
def propose_cmd(
    trace_id: Annotated[str, typer.Argument(metavar="TRACE_ID",
                                            help="the decision whose record shows the hit")],
    where: Annotated[str, typer.Option("--where", help="where the hit is (beneficiary, originator, ...)")],
    list_name: Annotated[str, typer.Option("--list", help="the list's name, as the hit names it")],
    entry: Annotated[str, typer.Option("--entry", help="the listed entry's id, as the hit names it")],
    until: Annotated[str, typer.Option("--until", metavar="YYYY-MM-DD",
                                       help="the last day it clears (at most 366 days ahead)")],
    rationale: RationaleOpt,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Propose that the party at --where of TRACE_ID is not entry --entry of list --list (sealed)."""
    from api import ops
    from audit.screening.clearance import propose_clearance

    ledger = ops.open_ledger(settings(db, keys))
    try:
        c = propose_clearance(ledger, trace_id, where, list_name, entry, until, _operator(), rationale)
    finally:
        ledger.engine.dispose()
    doc = c.to_json()
    emit(doc, as_json, lambda: _human(doc))


@clearances_app.command("show")
def show_cmd(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Every clearance proposed and what became of it, oldest first."""
    from audit.screening.clearance import clearances

    engine = _engine(db, keys)
    try:
        found = [c.to_json() for c in clearances(engine)]
    finally:
        engine.dispose()

    def human() -> None:
        if not found:
            out.print("no clearance was ever proposed", markup=False)
        for doc in found:
            _human(doc)

    emit({"clearances": found}, as_json, human)


@clearances_app.command("revoke")
def revoke_cmd(seq: SeqArg, rationale: RationaleOpt, db: DbOpt = None, keys: KeysOpt = None,
               as_json: JsonOpt = False) -> None:
    """Seal that clearance SEQ clears nothing from now on."""
    from api import ops
    from audit.screening.clearance import revoke_clearance

    ledger = ops.open_ledger(settings(db, keys))
    try:
        c = revoke_clearance(ledger, seq, _operator(), rationale)
    finally:
        ledger.engine.dispose()
    doc = c.to_json()
    emit(doc, as_json, lambda: _human(doc))
