"""``sealtrail reports draft|file|list``: the goAML suspicious transaction report of a case, drafted
from its sealed decisions, filed under legal hold, and the filed versions listed (a thin face over
``audit.cases.reports``; docs/goaml.md).

``draft`` writes the document to ``--out`` (which must not exist) or, without it, to stdout (with
``--json``: inside the JSON object, as ``xml``); nothing is sealed. It needs the reporting-entity
file (``--reporting-entity`` or ``SEALTRAIL_REPORTING_ENTITY``): without one, or with one that does
not read, it exits 2 naming the setting. ``file`` seals the document read from FILE as the case's
report, as the local operator (``Principal.local(getpass.getuser())``, as ``score`` and ``cases act``
record it), after the legal hold over the case's evidence; ``list`` prints the filed versions.

Exit codes: 0 done; 1 a refused input (a document that does not validate or is another case's, a
purged payload, a foreign amount without ``--rate``, ``--amends`` that is not the report in force,
an unknown case), naming the option or field (``field`` in ``--json``), or a report filed whose
bytes' hold failed (``ReportHoldError``, with the event's ``seq``); 2 a usage or configuration error.
``audit.cases`` and ``api.ops`` are imported in the command bodies so that ``sealtrail --help`` does
not load the database layer.
"""

from __future__ import annotations

import getpass
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, out, setting_option, settings

if TYPE_CHECKING:
    from decimal import Decimal

    from audit.cases.reports import ReportingSettings
    from audit.errors import CaseError, ReportError

__all__ = ["reports_app"]

reports_app = typer.Typer(
    no_args_is_help=True,
    help="goAML suspicious transaction reports: draft one from a case, file it, list them.")

CaseArg = Annotated[int, typer.Argument(min=0, max=2**63 - 1,
                                        help="the case id (the seq of its first alert)")]
EntityOpt = Annotated[Path | None, setting_option(
    "reporting_entity", "--reporting-entity", help="the reporting-entity file (TOML, docs/goaml.md)")]
_RATE = re.compile(r"([A-Z]{3})=([0-9]{1,12}(?:\.[0-9]{1,12})?)")
_OPTION = {"amends": "--amends", "rationale": "--rationale", "reason": "--reason", "action": "--action",
           "indicators": "--indicator", "fiu_ref_number": "--fiu-ref", "case_id": "CASE", "xml": "FILE"}


def _refused(exc: CaseError | ReportError) -> NoReturn:
    """A refusal of the audit layer: exit 1, naming the option (or the document's field)."""
    from audit.errors import ReportError

    field = exc.field.split("[", 1)[0]
    name = _OPTION.get(field, exc.field)
    why = exc.why if isinstance(exc, ReportError) else exc.message
    raise CliError(f"{name}: {why}", code=1, error=type(exc).__name__, field=name) from exc


def _reporting(path: Path | None) -> ReportingSettings:
    from audit.cases.reports import read_reporting_settings
    from audit.errors import ReportError

    if path is None:
        raise CliError("drafting a report needs the reporting-entity file: set SEALTRAIL_REPORTING_ENTITY or "
                       "--reporting-entity (docs/goaml.md)", code=2, error="configuration",
                       field="SEALTRAIL_REPORTING_ENTITY")
    try:
        return read_reporting_settings(path)
    except ReportError as exc:
        raise CliError(f"the reporting-entity file (SEALTRAIL_REPORTING_ENTITY) does not read: {exc}", code=2,
                       error="configuration", field=f"SEALTRAIL_REPORTING_ENTITY:{exc.field}") from exc


def _rates(given: list[str]) -> dict[str, Decimal]:
    from decimal import Decimal

    rates: dict[str, Decimal] = {}
    for text in given:
        m = _RATE.fullmatch(text.strip())
        if m is None:
            raise CliError(f"--rate: {text!r} is not CCY=RATE (USD=0.9215: local units for one USD)", code=2,
                           error="usage", field="--rate")
        rates[m[1]] = Decimal(m[2])
    return rates


@reports_app.command("draft")
def reports_draft(
    case: CaseArg,
    reason: Annotated[str, typer.Option(help="the officer's narrative: why the transactions are suspicious")],
    indicator: Annotated[list[str], typer.Option(
        "--indicator", help="the FIU's indicator code (repeatable)")],
    action: Annotated[str | None, typer.Option(help="what the bank did")] = None,
    amends: Annotated[str | None, typer.Option(help="SHA-256 of the report in force (a new version)")] = None,
    fiu_ref: Annotated[str | None, typer.Option(
        "--fiu-ref", help="the FIU's reference of that report")] = None,
    rate: Annotated[list[str] | None, typer.Option(
        "--rate", help="CCY=RATE, the bank's rate for a currency not the local one (repeatable)")] = None,
    out_file: Annotated[Path | None, typer.Option(
        "--out", help="write the document here (must not exist)")] = None,
    reporting_entity: EntityOpt = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Draft the goAML STR of case CASE from its sealed decisions (nothing is sealed)."""
    from api import ops
    from audit.cases.reports import draft_case_report
    from audit.errors import CaseError, ReportError
    from ledger.records import now_utc

    rates = _rates(rate or [])
    if out_file is not None and out_file.exists():
        raise CliError(f"--out: {out_file} exists", code=2, error="usage", field="--out")
    s = settings(db, keys, reporting_entity=reporting_entity)
    reporting = _reporting(s.reporting_entity)
    engine = ops.engine_for(s)
    try:
        ops.require_schema(engine)
        try:
            d = draft_case_report(engine, case, reporting, reason=reason, indicators=indicator,
                                  action=action, submission_date=now_utc(), amends=amends, rates=rates,
                                  fiu_ref_number=fiu_ref)
        except (CaseError, ReportError) as exc:
            _refused(exc)
    finally:
        engine.dispose()
    doc: dict[str, Any] = {"case_id": case, "sha256": d.sha256, "bytes": len(d.xml),
                           "transactions": [t.number for t in d.transactions],
                           "decision_seqs": list(d.decision_seqs)}
    if out_file is not None:
        with out_file.open("xb") as f:
            f.write(d.xml)
        doc["file"] = str(out_file)
    elif as_json:
        doc["xml"] = d.xml.decode("utf-8")
    else:
        sys.stdout.buffer.write(d.xml)
        sys.stdout.flush()
        return
    emit(doc, as_json, lambda: out.print(
        f"case {case}: {len(d.transactions)} transaction(s), {len(d.xml):,} bytes, sha256 {d.sha256}, "
        f"written to {out_file}", markup=False))


@reports_app.command("file")
def reports_file(
    case: CaseArg,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="the document (as draft wrote it, or as edited)")],
    rationale: Annotated[str, typer.Option(help="the officer's statement, sealed with the filing")],
    amends: Annotated[str | None, typer.Option(help="SHA-256 of the report in force (a new version)")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """File FILE as the report of case CASE: held, then sealed as a file_report event."""
    from api import ops
    from audit.cases.goaml import MAX_REPORT_BYTES
    from audit.cases.reports import ReportHoldError, file_case_report
    from audit.decide.principal import Principal
    from audit.errors import CaseError, ReportError

    with file.open("rb") as f:
        xml = f.read(MAX_REPORT_BYTES + 1)  # validate_report refuses a larger one by its size
    s = settings(db, keys)
    ledger = ops.open_ledger(s)
    try:
        try:
            filed = file_case_report(ledger, case, xml, Principal.local(getpass.getuser()),
                                     rationale=rationale, amends=amends)
        except (CaseError, ReportError) as exc:
            _refused(exc)
        except ReportHoldError as exc:
            raise CliError(str(exc), code=1, error="ReportHoldError", seq=exc.seq,
                           hold_id=exc.hold_id) from exc
    finally:
        ledger.engine.dispose()
    doc = {"case_id": filed.case_id, "seq": filed.seq, "trace_id": filed.trace_id,
           "recorded_at": filed.recorded_at, "report_sha256": filed.report_sha256, "amends": filed.amends,
           "hold_id": filed.hold_id, "hold_from": filed.hold_from, "hold_to": filed.hold_to,
           "report_hold_id": filed.report_hold_id}
    emit(doc, as_json, lambda: out.print(
        f"case {case}: report {filed.report_sha256} filed at seq {filed.seq}; evidence held by "
        f"{filed.hold_id} (seqs {filed.hold_from}..{filed.hold_to}), the document by {filed.report_hold_id}",
        markup=False))


@reports_app.command("list")
def reports_list(case: CaseArg, db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """The reports filed on case CASE, oldest first."""
    from api import ops
    from audit.cases.reports import list_case_reports
    from audit.errors import CaseError

    engine = ops.engine_for(settings(db, keys))
    try:
        ops.require_schema(engine)
        try:
            versions = list_case_reports(engine, case)
        except CaseError as exc:
            _refused(exc)
    finally:
        engine.dispose()
    items = [{"seq": v.seq, "recorded_at": v.recorded_at, "sha256": v.sha256, "amends": v.amends,
              "principal": {"subject": v.principal.get("subject"),
                            "fingerprint_sha256": v.principal.get("fingerprint_sha256")},
              "rationale": v.rationale, "in_force": v.in_force, "hold_id": v.hold_id, "held": v.held}
             for v in versions]

    def human() -> None:
        for v in versions:
            mark = "in force" if v.in_force else "replaced"
            held = "held" if v.held else "NOT HELD"
            out.print(f"{v.seq:>8}  {v.recorded_at}  {v.sha256}  {mark:<8}  {held:<8}  "
                      f"{v.principal.get('subject', '')}", markup=False)
        out.print(f"{len(versions)} report(s) on case {case}", markup=False)

    emit({"case_id": case, "items": items}, as_json, human)
