"""Console output shared by the CLI modules: human text, or JSON with ``--json``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]


def emit(doc: dict[str, Any], as_json: bool, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        human()
