"""``sealtrail parse FILE``: canonical transactions, or why each message was refused.

``inference.messages`` is imported in the command body so that ``sealtrail --help`` does not
load it.
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

def parse(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    fmt: Annotated[str, typer.Option("--format",
                                     help=FORMAT_HELP)] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Parse payment messages into canonical transactions; exit 1 if any message is refused."""
    from inference.messages import MessageError, Transaction, parse_messages

    if fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", code=2, error="usage",
                       field="--format")
    results = parse_messages(read_message_file(file), fmt)  # type: ignore[arg-type]
    refused = [r for r in results if isinstance(r, MessageError)]
    doc: dict[str, Any] = {
        "ok": not refused,
        "transactions": [{**r.to_json(), "sha256": r.sha256} for r in results if isinstance(r, Transaction)],
        "errors": [{"message": e.message, "field": e.field, "reason": e.reason, "error": str(e)}
                   for e in refused],
    }
    if refused:
        doc |= {"error": "message_refused", "message": f"{len(refused)} of {len(results)} message(s) refused"}

    def human() -> None:
        for r in results:
            if isinstance(r, MessageError):
                err.print(f"refused: {r}", markup=False)
            else:
                out.print(orjson.dumps({**r.to_json(), "sha256": r.sha256},
                                       option=orjson.OPT_INDENT_2).decode(), markup=False)
        out.print(f"{len(results) - len(refused)} parsed, {len(refused)} refused", markup=False)

    if refused:
        emit_failed(doc, as_json, human)
    emit(doc, as_json, human)
