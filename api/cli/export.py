"""``sealtrail export create|verify``: write a regulator bundle (docs/bundle-format.md), sealing
the ``export.created`` record that says who exported what, when; and verify one offline.

``create``: the offline creator is the local operator (``Principal.local(getpass.getuser())``).
A refused filter, a selection that matches nothing or an existing ``--out`` exit 1 naming the
option; a trace-index row that disagrees with its sealed record exits 1 naming the table and seq
(``derived row mismatch``; nothing written); a missing database, key, model file or module exit 2.
``--case ID`` cuts the bundle of one case instead of a window (``sealtrail.bundle/5``,
docs/bundle-format.md "Case bundles"): it takes no ``--from``/``--to`` or filter (exit 2 if given
with one, or if neither a case nor a window is given); an unknown case exits 1 naming ``--case``,
and a case view that disagrees with the sealed records exits 1 as ``derived row mismatch``.

``verify FILE.zip [--trusted-key VKEY]...``, the examiner's one command: offline, no database;
``audit.bundle.verify`` checks signatures, hashes, proofs and replays every decision. Exit 0
only when everything holds; 1 for any failure, each named by kind, file, seq and trace id; 2
when the file cannot be read as a ZIP or a ``--trusted-key`` is not a verifier key. Without a
pinned key the bundle's own keys are used and a loud warning goes to stderr (and into
``warnings``).

Both draw a progress bar on stderr when it is a terminal. ``audit`` and ``ledger`` are imported
in the command bodies so that ``sealtrail --help`` does not load them.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from api.cli.common import (
    CliError,
    DbOpt,
    JsonOpt,
    KeysOpt,
    emit,
    emit_failed,
    err,
    fail,
    out,
    parse_time,
    settings,
)

if TYPE_CHECKING:
    from audit.errors import QueryError

__all__ = ["export_app", "export_create", "export_verify"]

export_app = typer.Typer(no_args_is_help=True, help="Create and verify regulator export bundles.")

_OPTION = {"from": "--from", "to": "--to", "account": "--account", "decision": "--decision", "rule": "--rule",
           "out": "--out", "filters": "filters", "case_id": "--case"}


def _refused(exc: QueryError) -> NoReturn:
    name = _OPTION.get(exc.field, exc.field)
    raise CliError(f"{name}: {exc.message}", code=1, error="ExportRefused", field=name) from exc


def _human(doc: dict[str, Any]) -> None:
    c = doc["counts"]
    mib = doc["size_bytes"] / 2**20
    out.print(f"bundle      {doc['bundle_id']}", markup=False)
    out.print(f"file        {doc['file']} ({mib:.1f} MiB)", markup=False)
    case = doc.get("case")
    if case is not None:
        out.print(f"case        {case['case_id']}: {case['alerts']} alert(s), {case['events']} event(s), "
                  f"{case['withheld']} other case event(s) of seqs {case['from_seq']}..{case['to_seq']} "
                  "withheld as leaf hashes", markup=False)
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
    out_file: Annotated[Path, typer.Option("--out", help="bundle to write (FILE.zip; must not exist)")],
    start: Annotated[str | None, typer.Option(
        "--from", help="recorded_at >= FROM (ISO 8601; without an offset: UTC); required without "
                       "--case")] = None,
    end: Annotated[str | None, typer.Option(
        "--to", help="recorded_at < TO (ISO 8601; without an offset: UTC); required without --case")] = None,
    case: Annotated[int | None, typer.Option(
        "--case", help="the bundle of this case (its id) instead of a window: its decisions, events, "
                       "filed reports and policies, its history verified offline", min=0)] = None,
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
    annotations, payloads, rules and models, as one bundle an examiner verifies offline; or, with
    --case, the bundle of one case and its whole history."""
    from api import ops
    from audit.decide.principal import Principal
    from audit.errors import ExportError, ExportFilterError, QueryError
    from audit.export.create import ExportFilters, create_bundle, create_case_bundle

    f = None
    if case is not None:
        given = [n for n, v in (("--from", start), ("--to", end), ("--account", account),
                                ("--decision", decision), ("--rule", rule)) if v is not None]
        if given:
            raise CliError(f"--case: takes no {', '.join(given)} (a case bundle holds the whole case)",
                           code=2, error="usage", field="--case")
    elif start is None or end is None:
        raise CliError("--from and --to are required (or --case ID)", code=2, error="usage",
                       field="--from" if start is None else "--to")
    else:
        try:
            f = ExportFilters.of(parse_time(start, "from"), parse_time(end, "to"), account=account,
                                 decision=decision, rule=rule)
        except QueryError as exc:
            _refused(exc)
    s = settings(db, keys)
    ledger = ops.open_ledger(s)
    try:
        signer = ops.export_signer(s, ledger)
        cosign = ops.export_cosign(s, ledger.engine)  # SEALTRAIL_WITNESSES_FILE: a witnessed bundle
        stated = ops.export_stated(s)  # settings the compliance facts state (not proven)
        creator = Principal.local(getpass.getuser())
        show = err.is_terminal and not as_json
        try:
            if f is None:
                assert case is not None
                summary = create_case_bundle(ledger.engine, ledger, signer, out_file, case, creator,
                                             model_dirs=model_dir or (), cosign=cosign, **stated)
            elif show:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

                with Progress("exporting", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                              console=err, transient=True) as bar:
                    task = bar.add_task("export", total=None)
                    summary = create_bundle(ledger.engine, ledger, signer, out_file, f, creator,
                                            model_dirs=model_dir or (), cosign=cosign, **stated,
                                            progress=lambda d, t: bar.update(task, completed=d, total=t))
            else:
                summary = create_bundle(ledger.engine, ledger, signer, out_file, f, creator,
                                        model_dirs=model_dir or (), cosign=cosign, **stated)
        except ExportFilterError as exc:
            _refused(exc)
        except ExportError as exc:  # something the bundle must hold is missing: configuration
            fail(exc, as_json, code=2)
    finally:
        ledger.engine.dispose()
    doc = summary.to_json()
    emit(doc, as_json, lambda: _human(doc))


# --------------------------------------------------------------------------- verify


def _verify_doc(report: Any, failures: list[Any], warnings: list[str], dropped: int) -> dict[str, Any]:
    return {"ok": not failures, "verified": not failures, "bundle_id": getattr(report, "bundle_id", None),
            "records": getattr(report, "records", None), "replayed": getattr(report, "replayed", None),
            "warnings": warnings, "failures": [f.to_json() for f in failures],
            "report": None if report is None else report.to_json(), "dropped": dropped,
            "completeness": None if getattr(report, "completeness", None) is None
            else report.completeness.to_json()}


def _print_failures(failures: list[Any], dropped: int) -> None:
    out.print(f"NOT VERIFIED: {len(failures) + dropped} failure(s)", markup=False)
    for f in failures:
        where = "  ".join(x for x in (f.file, None if f.seq is None else f"seq {f.seq}", f.trace_id) if x)
        out.print(f"  {f.kind}  {where}\n      {f.detail}", markup=False)
    if dropped:
        out.print(f"  ... and {dropped} more not listed", markup=False)


def _print_report(r: Any) -> None:
    out.print(f"VERIFIED bundle {r.bundle_id}", markup=False)
    out.print(f"log         {r.origin}, checkpoint size {r.checkpoint_size} root {r.checkpoint_root}",
              markup=False)
    out.print(f"signed by   {', '.join(r.signed_by)}" + ("" if r.pinned else "  (NOT PINNED)"), markup=False)
    out.print(f"records     {r.records} ({r.decisions} decisions, {r.annotations} annotations, "
              f"{r.context} context, {r.summaries} summaries), each with its inclusion proof", markup=False)
    c = r.completeness
    if c is not None and c.proven and c.window is not None:
        out.print(f"complete    PROVEN for decisions recorded in [{c.window[0]}, {c.window[1]}): "
                  f"{c.summaries} "
                  f"summaries, {c.checked} decisions matched to them", markup=False)
    elif c is not None:
        part = "" if c.window is None else f" (complete only for [{c.window[0]}, {c.window[1]}))"
        out.print(f"complete    NOT PROVEN{part}", markup=False)
    for note in () if c is None else c.notes:
        out.print(f"            {note}", markup=False)
    out.print(f"replayed    {r.replayed} through their rule module, {r.rescored} rescored by the numpy "
              f"model, {r.fail_safe} fail-safe holds checked", markup=False)
    explained = getattr(r, "explained", 0)
    if explained:
        out.print(f"explained   {explained} decisions' reason codes recomputed from their model",
                  markup=False)
    if r.format >= 6:
        gone = f", {r.not_rescreened} not (payment purged)" if r.not_rescreened else ""
        out.print(f"screened    {r.rescreened} decisions screened again against the {r.lists} sanctions list "
                  f"versions they name, the same hits found{gone}", markup=False)
    if r.format >= 7 and (r.state_records or r.rederived or r.not_rederived):
        out.print(f"re-derived  {r.rederived} decisions made again from their messages: parsed again, "
                  f"features recomputed on the sealed state ({r.state_records} state records carried), "
                  "the same found", markup=False)
        for why, n in getattr(r, "not_rederived", {}).items():
            out.print(f"            {n} not re-derivable: {why} (checked by replay as before)", markup=False)
    witnesses = getattr(r, "witnesses", ())
    if witnesses or getattr(r, "min_witnesses", 0):
        pinned = f", {r.witnesses_pinned} of them pinned (at least {r.min_witnesses} required)"
        out.print(f"witnesses   {len(witnesses)} cosigned the checkpoint{pinned}: "
                  f"{', '.join(w.split('+')[0] for w in witnesses) or 'none'}", markup=False)
    out.print(f"payloads    {r.payloads_present} present, {r.payloads_purged} purged", markup=False)
    prev = r.previous
    shown = "none" if prev is None else f"{prev['bundle_id']} (size {prev['checkpoint_size']}), consistent"
    out.print(f"previous    {shown}", markup=False)
    case = getattr(r, "case", None)
    if case is not None:  # a case bundle: its history as the verifier re-derived it
        out.print("", markup=False)
        out.print(case.text(), markup=False)


def _unreadable(message: str) -> NoReturn:
    raise CliError(message, code=2, error="unreadable", verified=False)


@export_app.command("verify")
def export_verify(
    file: Annotated[Path, typer.Argument(help="the bundle (FILE.zip)")],
    trusted_key: Annotated[list[str] | None, typer.Option(
        "--trusted-key", help="the ledger's verifier key, name+keyid+key (repeatable); without one "
                              "only the bundle's own keys are checked")] = None,
    witness_key: Annotated[list[str] | None, typer.Option(
        "--witness-key", help="a witness you trust, its verifier key name+keyid+key (repeatable)")] = None,
    min_witnesses: Annotated[int, typer.Option(
        "--min-witnesses", min=0, help="fail unless this many --witness-key witnesses cosigned the bundle's "
                                       "checkpoint")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Verify a bundle offline: signatures, file hashes, every record's proof, and a replay of
    every decision; with --witness-key and --min-witnesses, the witnesses' cosignatures of its
    checkpoint too. Exit 0 verified, 1 not verified, 2 unreadable file or bad key."""
    from audit.bundle.verify import UNPINNED_WARNING, verify_bundle
    from audit.errors import BundleError, BundleFailed, BundleUnreadable
    from ledger import KeyFileError, NoteVerifier
    from ledger.cosignature import CosignerVerifier

    try:
        keys = [NoteVerifier.from_vkey(k) for k in trusted_key or ()]
    except KeyFileError as exc:
        _unreadable(f"--trusted-key: {exc}")
    try:
        witnesses = [CosignerVerifier.from_vkey(k) for k in witness_key or ()]
    except KeyFileError as exc:
        _unreadable(f"--witness-key: {exc}")
    distinct = len({w.public_key for w in witnesses})  # one key given twice, or under two names, is one
    if min_witnesses > distinct:
        raise CliError(f"--min-witnesses {min_witnesses} needs at least as many distinct --witness-key "
                       f"(given {distinct}): only cosignatures by witnesses you trust count", code=2,
                       error="usage", field="--min-witnesses")
    if not keys:
        err.print(f"WARNING: {UNPINNED_WARNING}", style="bold red", markup=False)
    report: Any = None
    failures: list[Any] = []
    dropped = 0
    try:
        if err.is_terminal and not as_json:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            with Progress("verifying", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                          console=err, transient=True) as bar:
                task = bar.add_task("verify", total=None)
                report = verify_bundle(file, keys, witness_keys=witnesses, min_witnesses=min_witnesses,
                                       progress=lambda d, t: bar.update(task, completed=d, total=t))
        else:
            report = verify_bundle(file, keys, witness_keys=witnesses, min_witnesses=min_witnesses)
    except BundleUnreadable as exc:
        _unreadable(str(exc))
    except BundleError as exc:
        failures = list(exc.failures)
        if isinstance(exc, BundleFailed):
            report, dropped = exc.report, exc.dropped
    warnings = [UNPINNED_WARNING] if not keys else []
    doc = _verify_doc(report, failures, warnings, dropped)
    if failures:
        doc |= {"error": "not_verified", "message": f"NOT VERIFIED: {len(failures) + dropped} failure(s)"}
        emit_failed(doc, as_json, lambda: _print_failures(failures, dropped))
    emit(doc, as_json, lambda: _print_report(report))
