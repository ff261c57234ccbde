"""Public sample messages (tests/vectors/public, SOURCES.md): every message is read as a payments
engineer expects (expected.json of each source, written before the parsers read them): decided
with at least the findings listed, or refused naming the field; and the decided rate is the one
docs/messages.md reports, so a drop fails here before the docs can overstate it."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from inference.messages import MessageError, Transaction, parse_messages

PUBLIC = Path(__file__).resolve().parents[2] / "vectors" / "public"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "messages.md"
SOURCES = sorted(p for p in PUBLIC.iterdir() if p.is_dir())
CASES = [(src, f) for src in SOURCES for f in json.loads((src / "expected.json").read_text())["files"]]
# "On <date>, 140 of the 160 messages (136 files ...) are decided: 87.5%." in docs/messages.md
_REPORTED = re.compile(r"(\d+) of the (\d+) messages \((\d+) files[^)]*\) are decided: ([\d.]+)%")


def _check(got: Transaction | MessageError, want: dict[str, Any]) -> str | None:
    """What differs between a parse result and its expected outcome (None: as expected)."""
    if want["outcome"] == "refused":
        if isinstance(got, Transaction):
            return f"decided, expected refused at {want['field']} ({want['why']})"
        if got.field == want["field"] or (got.field or "").endswith("/" + want["field"]):
            return None
        return f"refused at {got.field!r} ({got}), expected {want['field']!r}"
    if isinstance(got, MessageError):
        return f"refused ({got}), expected decided"
    if got.message_type != want["message_type"]:
        return f"message type {got.message_type}, expected {want['message_type']}"
    for key, value in (("amount", Decimal(want["amount"])), ("currency", want["currency"]),
                       ("reference", want["reference"]), ("value_date", want["value_date"])):
        have = got.value_date.isoformat() if key == "value_date" else getattr(got, key)
        if have != value:
            return f"{key} {have!r}, expected {value!r}"
    missing = set(want.get("findings", ())) - {f.code for f in got.findings}
    return f"findings lack {sorted(missing)} (have {[f.code for f in got.findings]})" if missing else None


@pytest.mark.parametrize("source, entry", CASES, ids=[f"{s.name}/{e['path']}" for s, e in CASES])
def test_each_public_message_as_expected(source: Path, entry: dict[str, Any]) -> None:
    got = parse_messages((source / entry["path"]).read_bytes(), entry.get("format", "auto"))
    want = entry["messages"]
    assert len(got) == len(want), [str(g) if isinstance(g, MessageError) else g.reference for g in got]
    wrong = [f"message {n}: {d}" for n, (g, w) in enumerate(zip(got, want, strict=True), 1)
             if (d := _check(g, w)) is not None]
    assert not wrong, wrong


def test_the_decided_rate_is_the_one_reported() -> None:
    """Every message expected decided is decided, and the figures docs/messages.md reports (messages,
    files, decided, rate) are today's: fewer decided, or a lower rate, fails until the docs say so."""
    total = decided = 0
    for source, entry in CASES:
        for g in parse_messages((source / entry["path"]).read_bytes(), entry.get("format", "auto")):
            total += 1
            decided += isinstance(g, Transaction)
    expected = sum(m["outcome"] == "decided" for _, e in CASES for m in e["messages"])
    assert decided == expected
    m = _REPORTED.search(DOCS.read_text())
    assert m is not None, "docs/messages.md no longer reports the public corpus figures"
    reported_decided, reported_total, reported_files, reported_rate = m.groups()
    assert (decided, total, len(CASES)) == (int(reported_decided), int(reported_total), int(reported_files))
    assert float(reported_rate) == round(100 * decided / total, 1)
