"""``sealtrail parse FILE``: canonical transactions, or why each message was refused."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from api.output import JsonOpt, err, out
from inference.messages import MessageError, Transaction, parse_messages


def parse(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    fmt: Annotated[str, typer.Option("--format", help="auto | mt | pacs008 | json")] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Parse payment messages into canonical transactions; exit 1 if any message is refused."""
    if fmt not in ("auto", "mt", "pacs008", "json"):
        err.print(f"error: --format must be auto, mt, pacs008 or json, not {fmt!r}", markup=False)
        raise typer.Exit(2)
    results = parse_messages(file.read_bytes(), fmt)  # type: ignore[arg-type]
    refused = [r for r in results if isinstance(r, MessageError)]
    if as_json:
        doc: dict[str, Any] = {
            "ok": not refused,
            "transactions": [{**r.to_json(), "sha256": r.sha256} for r in results
                             if isinstance(r, Transaction)],
            "errors": [{"message": e.message, "field": e.field, "reason": e.reason,
                        "error": str(e)} for e in refused],
        }
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for r in results:
            if isinstance(r, MessageError):
                err.print(f"refused: {r}", markup=False)
            else:
                out.print(orjson.dumps({**r.to_json(), "sha256": r.sha256},
                                       option=orjson.OPT_INDENT_2).decode(), markup=False)
        out.print(f"{len(results) - len(refused)} parsed, {len(refused)} refused", markup=False)
    if refused:
        raise typer.Exit(1)
