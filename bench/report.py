"""How benchmark figures are shown: table rows, verdicts, spreads, percentiles, the JSON file."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    """One line of a summary table: a figure, its same-run baseline, and an optional target."""

    what: str
    result: str
    baseline: str
    ratio: str
    target: str = ""
    met: str = ""


def verdict(ok: bool) -> str:
    """How a target check reads in the table."""
    return "yes" if ok else "NO"


def format_table(rows: Sequence[Row], subject: str) -> str:
    """Rows as aligned plain text under a header; ``subject`` names the result column."""
    header = Row("measurement", subject, "same-run baseline", "ratio", "target", "met")
    cells = [astuple(r) for r in (header, *rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(cs, widths, strict=True)).rstrip() for cs in cells
    ]
    lines.insert(1, "-" * len(max(lines, key=len)))
    return "\n".join(lines)


def spread(rates: Sequence[float]) -> str:
    """Median and range of per-round rates, padded to line up in progress lines."""
    text = f"{statistics.median(rates):>9,.0f}/s [{min(rates):,.0f}-{max(rates):,.0f}]"
    return text.ljust(30)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def write_json(path: Path, figures: dict[str, Any]) -> None:
    """Write ``figures`` as indented JSON and say where."""
    path.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nfigures written to {path}")
