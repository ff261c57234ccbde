"""``sealtrail export create``: write a regulator bundle (docs/bundle-format.md) and seal the
``export.created`` record that says who exported what, when.

The offline creator is the local operator (``Principal.local(getpass.getuser())``). A refused
filter, a selection that matches nothing or an existing ``--out`` exit 1 naming the option;
a missing database, key, model file or module exit 2. A progress bar goes to stderr when it
is a terminal.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import orjson
import typer

from api.output import JsonOpt, emit, err, out
from audit.errors import QueryError

__all__ = ["export_app"]

export_app = typer.Typer(no_args_is_help=True, help="Create and verify regulator export bundles.")

DbOpt = Annotated[str | None, typer.Option("--db", help="database URL [env SEALTRAIL_DB]")]
KeysOpt = Annotated[Path | None, typer.Option("--keys", help="key directory [env SEALTRAIL_KEYS]")]
_OPTION = {"from": "--from", "to": "--to", "account": "--account", "decision": "--decision", "rule": "--rule",
           "out": "--out", "filters": "filters"}


def _refused(exc: QueryError, as_json: bool) -> NoReturn:
    name = _OPTION.get(exc.field, exc.field)
    message = f"{name}: {exc.message}"
    if as_json:
        sys.stdout.write(orjson.dumps({"ok": False, "error": "ExportRefused", "field": name,
                                       "message": message}).decode() + "\n")
    err.print(f"error: {message}", markup=False)
    raise typer.Exit(1)


def _unavailable(exc: Exception, as_json: bool) -> NoReturn:
    if as_json:
        sys.stdout.write(orjson.dumps({"ok": False, "error": type(exc).__name__,
                                       "message": str(exc)}).decode() + "\n")
    err.print(f"error: {exc}", markup=False)
    raise typer.Exit(2)


def _human(doc: dict[str, Any]) -> None:
    c = doc["counts"]
    mib = doc["size_bytes"] / 2**20
    out.print(f"bundle      {doc['bundle_id']}", markup=False)
    out.print(f"file        {doc['file']} ({mib:.1f} MiB)", markup=False)
    out.print(f"records     {c['records']} ({c['decisions']} decisions, {c['annotations']} annotations, "
              f"{c['context']} context)", markup=False)
    out.print("outcomes    " + ", ".join(f"{k} {v}" for k, v in c["by_decision"].items()), markup=False)
    out.print(f"payloads    {c['payloads_present']} present, {c['payloads_purged']} purged", markup=False)
    out.print(f"checkpoint  size {doc['checkpoint']['size']}, root {doc['checkpoint']['root']}", markup=False)
    prev = doc["previous"]
    out.print("previous    " + ("none" if prev is None else f"{prev['bundle_id']} (size "
                                                             f"{prev['checkpoint_size']})"), markup=False)
    out.print(f"manifest    sha256 {doc['manifest_sha256']}; sealed as entry {doc['record_seq']}",
              markup=False)


@export_app.command("create")
def export_create(
    start: Annotated[str, typer.Option("--from", help="recorded_at >= FROM (ISO 8601 with offset)")],
    end: Annotated[str, typer.Option("--to", help="recorded_at < TO (ISO 8601 with offset)")],
    out_file: Annotated[Path, typer.Option("--out", help="bundle to write (FILE.zip; must not exist)")],
    account: Annotated[str | None, typer.Option(help="originator or beneficiary account / IBAN")] = None,
    decision: Annotated[str | None, typer.Option(help="ALLOW | REVIEW | HOLD | BLOCK")] = None,
    rule: Annotated[str | None, typer.Option(help="a rule id that fired")] = None,
    model_dir: Annotated[list[Path] | None, typer.Option(
        "--model-dir", help="another model directory to find decisions' models in (repeatable)")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the decisions recorded in [FROM, TO) matching every filter, with their proofs,
    annotations, payloads, rules and models, as one bundle an examiner verifies offline."""
    from api import ops
    from api.cli import guarded, settings
    from audit.decide.principal import Principal
    from audit.errors import ExportError, ExportFilterError
    from audit.export.create import ExportFilters, create_bundle
    from ledger.keys import load_signer

    def run() -> None:
        try:
            f = ExportFilters.of(start, end, account=account, decision=decision, rule=rule)
        except QueryError as exc:
            _refused(exc, as_json)
        s = settings(db, keys)
        ledger = ops.open_ledger(s)
        try:
            signer = load_signer(s.key_file)
            creator = Principal.local(getpass.getuser())
            show = err.is_terminal and not as_json
            try:
                if show:
                    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

                    with Progress("exporting", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                  console=err, transient=True) as bar:
                        task = bar.add_task("export", total=None)
                        summary = create_bundle(ledger.engine, ledger, signer, out_file, f, creator,
                                                model_dirs=model_dir or (),
                                                progress=lambda d, t: bar.update(task, completed=d, total=t))
                else:
                    summary = create_bundle(ledger.engine, ledger, signer, out_file, f, creator,
                                            model_dirs=model_dir or ())
            except ExportFilterError as exc:
                _refused(exc, as_json)
            except ExportError as exc:
                _unavailable(exc, as_json)
        finally:
            ledger.engine.dispose()
        doc = summary.to_json()
        emit(doc, as_json, lambda: _human(doc))

    guarded(as_json, run)
