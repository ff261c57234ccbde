"""``sealtrail lists load|show|history|diff|withdraw``: the sanctions lists payments are screened against.

``load`` parses a list file in one of the published formats (OFAC, UN, EU, UK, the bank's own
CSV or JSON) and, only if the whole file parses, seals it as the version of that list in force
from now on: a ``sanctions_list`` record naming the list, its publication date, the SHA-256 of the
file and the local operator who loaded it, with the file itself as the record's payload; then it
screens every held payment again and annotates each that meets an entry its record does not name
(``audit.screening.held``). No list
is ever fetched from the network: the operator brings the file. ``show`` lists the versions in
force; ``history`` every load and withdrawal of one list; ``diff`` compares two sealed versions
entry by entry; ``withdraw`` takes a list out of force.

Exit codes as every command: 0 done, 1 a refused file or name (the message names the element or
line), 2 a usage or configuration error.
"""

from __future__ import annotations

import getpass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import DbOpt, JsonOpt, KeysOpt, emit, out, settings
from api.cli.common import engine as _engine

if TYPE_CHECKING:

    from audit.decide.principal import Principal
    from audit.screening.lists import ListInForce

__all__ = ["lists_app"]

lists_app = typer.Typer(
    no_args_is_help=True,
    help="Sanctions lists: load a file (sealed), show those in force, history, diff, withdraw.")

# inference.screening.lists.FORMATS (a test holds them equal; not imported here, so --help stays light)
LIST_FORMATS = ("ofac-xml", "ofac-enhanced-xml", "un-xml", "eu-xml", "uk-xml", "internal-csv",
                "internal-json")
LIST_SOURCES = ("ofac-sdn", "ofac-consolidated", "un", "eu", "uk", "internal")

NameArg = Annotated[str, typer.Argument(metavar="NAME",
                                        help="the list's name, e.g. ofac-sdn, un, bank-exits")]
RationaleOpt = Annotated[str, typer.Option("--rationale", help="why (sealed with the load or withdrawal)")]


def _operator() -> Principal:
    from audit.decide.principal import Principal

    return Principal.local(getpass.getuser())


def _human_load(doc: dict[str, Any], verb: str) -> None:
    published = doc["published"] or "no publication date stated"
    out.print(f"{verb} list {doc['name']} ({doc['source']}, {doc['format']}) at seq {doc['seq']}: "
              f"{doc['entries']:,} entries, published {published}, sha256 {doc['sha256']}", markup=False)


@lists_app.command("load")
def load_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False, readable=True,
                                         help="the list file as published (or the bank's own CSV/JSON)")],
    fmt: Annotated[str, typer.Option("--format", help=f"one of {', '.join(LIST_FORMATS)}")],
    name: Annotated[str, typer.Option(
        "--name", help="the list's name (a later load of the same name replaces it)")],
    rationale: RationaleOpt,
    source: Annotated[str | None, typer.Option(
        "--source",
        help=f"who publishes it, where the format does not say: {', '.join(LIST_SOURCES)}")] = None,
    published: Annotated[str | None, typer.Option(
        "--published", metavar="YYYY-MM-DD",
        help="its publication date, where the format does not state one")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Seal FILE as the version of list NAME that payments are screened against from now on."""
    from api import ops
    from api.cli.common import CliError
    from audit.screening.held import rescreen_held
    from audit.screening.lists import MAX_LIST_BYTES, seal_list

    if fmt not in LIST_FORMATS:
        raise CliError(f"--format: one of {', '.join(LIST_FORMATS)}", code=2, error="usage", field="--format")
    if source is not None and source not in LIST_SOURCES:
        raise CliError(f"--source: one of {', '.join(LIST_SOURCES)}", code=2, error="usage", field="--source")
    try:
        day = date.fromisoformat(published) if published is not None else None
    except ValueError:
        raise CliError("--published: a date, YYYY-MM-DD", code=2, error="usage",
                       field="--published") from None
    with file.open("rb") as f:
        data = f.read(MAX_LIST_BYTES + 1)
    ledger = ops.open_ledger(settings(db, keys))
    try:
        sealed = seal_list(ledger, data, fmt, name, _operator(), rationale, source=source,  # type: ignore[arg-type]
                           published=day)
        held = rescreen_held(ledger, _operator())
    finally:
        ledger.engine.dispose()
    doc = sealed.to_json() | {"rescreened": held.to_json()}

    def human() -> None:
        _human_load(doc, "sealed")
        out.print(f"screened {held.screened} of {held.held} held payments again: {len(held.annotated)} with "
                  "a new hit (annotated)" + (f", {held.purged} purged" if held.purged else ""), markup=False)

    emit(doc, as_json, human)


@lists_app.command("show")
def show_cmd(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """The lists in force: the last sealed load of each list not withdrawn."""
    from audit.screening.lists import lists_in_force

    engine = _engine(db, keys)
    try:
        found = [x.to_json() for x in lists_in_force(engine)]
    finally:
        engine.dispose()

    def human() -> None:
        if not found:
            out.print("no sanctions list is loaded: payments are screened against none "
                      "(sealtrail lists load FILE --format F --name N --rationale ...)", markup=False)
        for doc in found:
            _human_load(doc, "in force:")

    emit({"lists": found}, as_json, human)


@lists_app.command("history")
def history_cmd(name: NameArg, db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """Every sealed load and withdrawal of list NAME, oldest first."""
    from audit.screening.lists import list_history

    engine = _engine(db, keys)
    try:
        found = [x.to_json() for x in list_history(engine, name)]
    finally:
        engine.dispose()

    def human() -> None:
        for doc in found:
            _human_load(doc, "withdrawn:" if doc["withdrawn"] else "loaded:")

    emit({"name": name, "loads": found}, as_json, human)


@lists_app.command("diff")
def diff_cmd(
    name: NameArg,
    old: Annotated[int | None, typer.Option(
        "--from", metavar="SEQ", help="the older load (default: the one before --to)")] = None,
    new: Annotated[int | None, typer.Option(
        "--to", metavar="SEQ", help="the newer load (default: the one in force)")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Entries added, removed and changed between two sealed loads of list NAME."""
    from api.cli.common import CliError
    from audit.errors import ListNotFoundError
    from audit.screening.lists import diff_loads

    engine = _engine(db, keys)
    try:
        try:
            found = diff_loads(engine, name, old=old, new=new)
        except ListNotFoundError as exc:
            opt = {"from": "--from", "to": "--to"}.get(exc.field, "NAME")
            raise CliError(f"{opt}: {exc.message} (sealtrail lists history {name})", code=1,
                           error="ListNotFoundError", field=opt) from None
    finally:
        engine.dispose()
    doc = found.to_json()
    fr, to, d = found.old, found.new, found.diff

    def human() -> None:
        out.print(f"list {name}: seq {fr.seq} -> {to.seq}: {len(d.added)} added, {len(d.removed)} removed, "
                  f"{len(d.changed)} changed", markup=False)
        for e in d.added:
            out.print(f"  + {e.entry_id}  {e.names[0]}", markup=False)
        for e in d.removed:
            out.print(f"  - {e.entry_id}  {e.names[0]}", markup=False)
        for _, e, fields in d.changed:
            out.print(f"  ~ {e.entry_id}  {e.names[0]}  ({', '.join(fields)})", markup=False)

    emit(doc, as_json, human)


@lists_app.command("withdraw")
def withdraw_cmd(name: NameArg, rationale: RationaleOpt, db: DbOpt = None, keys: KeysOpt = None,
                 as_json: JsonOpt = False) -> None:
    """Seal that list NAME is no longer screened against."""
    from api import ops
    from audit.screening.lists import withdraw_list

    ledger = ops.open_ledger(settings(db, keys))
    try:
        done: ListInForce = withdraw_list(ledger, name, _operator(), rationale)
    finally:
        ledger.engine.dispose()
    doc = done.to_json()
    emit(doc, as_json, lambda: _human_load(doc, "withdrew"))
