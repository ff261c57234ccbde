"""``sealtrail export verify FILE.zip [--trusted-key VKEY]... [--json]``: the examiner's one command.

Offline, no database: ``audit.bundle.verify`` checks signatures, hashes, proofs and replays every
decision. Exit 0 only when everything holds; 1 for any failure, each named by kind, file, seq and
trace id; 2 when the file cannot be read as a ZIP or a ``--trusted-key`` is not a verifier key.
Without a pinned key the bundle's own keys are used and a loud warning goes to stderr (and into
``warnings``). A progress bar goes to stderr when it is a terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from api.output import JsonOpt, err, out

__all__ = ["export_verify"]


def _doc(report: Any, failures: list[Any], warnings: list[str]) -> dict[str, Any]:
    return {"verified": not failures, "bundle_id": getattr(report, "bundle_id", None),
            "records": getattr(report, "records", None), "replayed": getattr(report, "replayed", None),
            "warnings": warnings, "failures": [f.to_json() for f in failures],
            "report": None if report is None else report.to_json()}


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
              f"{r.context} context), each with its inclusion proof", markup=False)
    out.print(f"replayed    {r.replayed} through their rule module, {r.rescored} rescored by the numpy "
              f"model, {r.fail_safe} fail-safe holds checked", markup=False)
    out.print(f"payloads    {r.payloads_present} present, {r.payloads_purged} purged", markup=False)
    prev = r.previous
    shown = "none" if prev is None else f"{prev['bundle_id']} (size {prev['checkpoint_size']}), consistent"
    out.print(f"previous    {shown}", markup=False)


def export_verify(
    file: Annotated[Path, typer.Argument(help="the bundle (FILE.zip)")],
    trusted_key: Annotated[list[str] | None, typer.Option(
        "--trusted-key", help="the ledger's verifier key, name+keyid+key (repeatable); without one "
                              "only the bundle's own keys are checked")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify a bundle offline: signatures, file hashes, every record's proof, and a replay of
    every decision. Exit 0 verified, 1 not verified, 2 unreadable file or bad key."""
    from audit.bundle.verify import UNPINNED_WARNING, verify_bundle
    from audit.errors import BundleError, BundleFailed, BundleUnreadable
    from ledger import KeyFileError, NoteVerifier

    try:
        keys = [NoteVerifier.from_vkey(k) for k in trusted_key or ()]
    except KeyFileError as exc:
        _usage(f"--trusted-key: {exc}", as_json)
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
                report = verify_bundle(file, keys,
                                       progress=lambda d, t: bar.update(task, completed=d, total=t))
        else:
            report = verify_bundle(file, keys)
    except BundleUnreadable as exc:
        _usage(str(exc), as_json)
    except BundleError as exc:
        failures = list(exc.failures)
        if isinstance(exc, BundleFailed):
            report, dropped = exc.report, exc.dropped
    warnings = [UNPINNED_WARNING] if not keys else []
    if as_json:
        doc = _doc(report, failures, warnings)
        doc["dropped"] = dropped
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif failures:
        _print_failures(failures, dropped)
    else:
        _print_report(report)
    if failures:
        raise typer.Exit(1)


def _usage(message: str, as_json: bool) -> Any:
    if as_json:
        sys.stdout.write(orjson.dumps({"verified": False, "error": "unreadable", "message": message}).decode()
                         + "\n")
    err.print(f"error: {message}", markup=False)
    raise typer.Exit(2)
