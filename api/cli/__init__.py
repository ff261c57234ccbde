"""The ``sealtrail`` command line: a thin face over the ledger, one module per command group.

Exit codes (public contract): 0 success / verified; 1 verification failure or refused input;
2 usage or configuration error (bad arguments, missing database or key, unmigrated schema, a
port already taken), and an internal error (an error nobody foresaw: one line on stderr
naming an incident id and the private file holding its traceback; never a traceback on screen).
Every command that prints results takes ``--json`` and then prints exactly one JSON object on
stdout, with ``"ok": true`` or ``"ok": false``, on success and on failure (usage errors too).
``api.cli.common`` holds the handler that keeps this contract; each module below one group.

Layout: ``common`` (output, options, errors), ``ledger`` (init, ledger ...), ``keys``,
``retention``, ``rules``, ``parse``, ``model`` (features, model ...), ``certs``, ``serve``,
``score``, ``traces``, ``cases`` (alerts, cases, outcomes), ``webhooks``, ``demo``, ``export`` (export create,
export verify). Modules import ``common`` and nothing else of this package, so there is no
import cycle; heavy layers are imported inside command bodies only to keep ``--help`` and
``--version`` fast.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from api.cli.cases import alerts_app, cases_app, outcomes
from api.cli.certs import certs_app
from api.cli.clearances import clearances_app
from api.cli.common import ContractGroup, out
from api.cli.compliance import compliance_app
from api.cli.demo import demo
from api.cli.export import export_app
from api.cli.follow import follow
from api.cli.keys import keys_app
from api.cli.ledger import init, ledger_app
from api.cli.lists import lists_app
from api.cli.model import features, model_app
from api.cli.parse import parse
from api.cli.reports import reports_app
from api.cli.retention import retention_app
from api.cli.rules import rules_app
from api.cli.score import score
from api.cli.serve import serve
from api.cli.standby import standby_app
from api.cli.traces import traces_app
from api.cli.webhooks import webhooks_app
from api.cli.witness import cosign, witness_app

__all__ = ["app", "main", "package_version"]

app = typer.Typer(cls=ContractGroup, no_args_is_help=True, add_completion=False,
                  help="sealtrail: sealed AML decisions", pretty_exceptions_enable=False)


def package_version() -> str:
    """The installed distribution's version (``pyproject.toml``), or ``unknown`` from a bare tree."""
    try:
        return version("sealtrail")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        out.print(f"sealtrail {package_version()}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="print the version and exit")] = False,
) -> None:
    """sealtrail: sealed AML decisions."""


app.command("init")(init)
app.add_typer(ledger_app, name="ledger")
ledger_app.command("cosign")(cosign)
app.add_typer(witness_app, name="witness")
app.command("follow")(follow)
app.add_typer(standby_app, name="standby")
app.add_typer(keys_app, name="keys")
app.add_typer(retention_app, name="retention")
app.add_typer(compliance_app, name="compliance")
app.add_typer(reports_app, name="reports")
app.add_typer(rules_app, name="rules")
app.add_typer(lists_app, name="lists")
app.add_typer(clearances_app, name="clearances")
app.command("parse")(parse)
app.command("features")(features)
app.add_typer(model_app, name="model")
app.add_typer(certs_app, name="certs")
app.command("serve")(serve)
app.command("score")(score)
app.add_typer(traces_app, name="traces")
app.add_typer(alerts_app, name="alerts")
app.add_typer(cases_app, name="cases")
app.command("outcomes")(outcomes)
app.add_typer(webhooks_app, name="webhooks")
app.command("demo")(demo)
app.add_typer(export_app, name="export")


def main() -> None:
    """The ``sealtrail`` console script."""
    app()
