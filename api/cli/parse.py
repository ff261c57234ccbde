"""``sealtrail parse FILE``: canonical transactions, or why each message was refused.

``--validate`` also checks each ISO 20022 ``AppHdr`` and ``Document`` against the official XSD of
its version (``inference.messages.xsd_validation``); without it, output and exit codes are as they
always were. ``inference.messages`` is imported in the command body so that ``sealtrail --help``
does not load it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from api.cli.common import (
    FORMAT_HELP,
    FORMATS,
    CliError,
    JsonOpt,
    emit,
    emit_failed,
    err,
    out,
    read_message_file,
)

__all__ = ["parse"]

_XML_KINDS = ("pacs008", "pacs009", "pacs004", "pain001", "iso20022")
NOT_XML = "--validate checks ISO 20022 XML only; {kind} input is not validated"


def parse(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    fmt: Annotated[str, typer.Option("--format",
                                     help=FORMAT_HELP)] = "auto",
    as_json: JsonOpt = False,
    validate: Annotated[bool, typer.Option(
        "--validate", help="also check each ISO 20022 AppHdr and Document against the official XSD "
                           "of its version; exit 1 if any is invalid")] = False,
) -> None:
    """Parse payment messages into canonical transactions; exit 1 if any message is refused."""
    from inference.messages import MessageError, Transaction, parse_messages

    if fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code=2, error="usage",
                       field="--format")
    data = read_message_file(file)
    results = parse_messages(data, fmt)  # type: ignore[arg-type]
    refused = [r for r in results if isinstance(r, MessageError)]
    doc: dict[str, Any] = {
        "ok": not refused,
        "transactions": [{**r.to_json(), "sha256": r.sha256} for r in results if isinstance(r, Transaction)],
        "errors": [{"message": e.message, "field": e.field, "reason": e.reason, "error": str(e)}
                   for e in refused],
    }
    checked = _validation(data, fmt) if validate else None
    invalid = 0
    if checked is not None:
        parts, note = checked
        invalid = sum(p["status"] in ("invalid", "refused") for p in parts)
        doc["validation"] = parts
        if note:
            doc["validation_note"] = note
        doc["ok"] = not refused and not invalid
    if refused:
        doc |= {"error": "message_refused", "message": f"{len(refused)} of {len(results)} message(s) refused"}
    elif invalid:
        doc |= {"error": "schema_invalid",
                "message": f"{invalid} of {len(doc['validation'])} part(s) fail their XSD check"}

    def human() -> None:
        for r in results:
            if isinstance(r, MessageError):
                err.print(f"refused: {r}", markup=False)
            else:
                out.print(orjson.dumps({**r.to_json(), "sha256": r.sha256},
                                       option=orjson.OPT_INDENT_2).decode(), markup=False)
        out.print(f"{len(results) - len(refused)} parsed, {len(refused)} refused", markup=False)
        if checked is not None:
            _print_validation(*checked)

    if refused or invalid:
        emit_failed(doc, as_json, human)
    emit(doc, as_json, human)


def _validation(data: bytes, fmt: str) -> tuple[list[dict[str, Any]], str]:
    """The XSD verdict of each part as JSON, and a note when the input is not ISO 20022 XML (which
    is reported, not failed: FIN and JSON have no XSD)."""
    from inference.messages import MessageError, detect_format
    from inference.messages.xsd_validation import validate_xml

    try:
        kind = detect_format(data) if fmt == "auto" else fmt
    except MessageError:
        kind = "unrecognised"
    if kind not in _XML_KINDS:
        name = "SWIFT FIN" if kind.startswith("mt") else "JSON" if kind == "json" else kind
        return [], NOT_XML.format(kind=name)
    try:
        return [p.to_json() for p in validate_xml(data)], ""
    except MessageError as exc:
        return [{"part": exc.field, "namespace": None, "schema": None, "status": "refused", "valid": False,
                 "errors": [{"path": exc.field, "reason": exc.reason}], "errors_omitted": 0,
                 "note": str(exc)}], ""


def _print_validation(parts: list[dict[str, Any]], note: str) -> None:
    if note:
        out.print(f"validation: {note}", markup=False)
        return
    for p in parts:
        name = (p["namespace"] or "").rsplit(":", 1)[-1] or "?"
        if p["status"] == "refused":
            err.print(f"validation refused: {p['note']}", markup=False)
            continue
        line = f"validation: {p['part']} {name}: {p['status']}"
        if p["status"] == "not validated":
            line += f" ({p['note']})"
        elif p["schema"]:
            line += f" against {p['schema']}"
        out.print(line, markup=False)
        for e in p["errors"]:
            out.print(f"  {e['path']}: {e['reason']}", markup=False)
        if p["errors_omitted"]:
            out.print(f"  ... and {p['errors_omitted']} more", markup=False)
    n = {s: sum(p["status"] == s for p in parts) for s in ("valid", "invalid", "not validated")}
    out.print(f"{n['valid']} valid, {n['invalid']} invalid, {n['not validated']} not validated "
              "against the official XSD", markup=False)
