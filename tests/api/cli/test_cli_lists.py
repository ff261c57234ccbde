"""``sealtrail lists``: load a published list file (sealed), show the lists in force, a list's
history, the difference between two loads, and withdraw one; from the command line as an operator
scripts it (``--json``), on files in each official format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli.lists import LIST_FORMATS, LIST_SOURCES
from inference.screening.entries import SOURCES
from inference.screening.lists import FORMATS

runner = CliRunner()
VECTORS = Path(__file__).parents[2] / "vectors" / "sanctions"


@pytest.fixture
def db(tmp_path: Path) -> list[str]:
    args = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    assert runner.invoke(app, ["init", *args]).exit_code == 0
    return args


def run(*args: str, code: int = 0) -> dict[str, Any]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == code, res.stdout + res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_the_cli_offers_every_format_and_source_the_parsers_read() -> None:
    assert LIST_FORMATS == FORMATS
    assert LIST_SOURCES == SOURCES


@pytest.mark.parametrize(("file", "fmt", "extra"), [
    ("ofac_sdn.xml", "ofac-xml", ["--source", "ofac-sdn"]),
    ("ofac_enhanced.xml", "ofac-enhanced-xml", []),
    ("un_consolidated.xml", "un-xml", []),
    ("eu_fsf.xml", "eu-xml", []),
    ("uk_sanctions_list.xml", "uk-xml", []),
    ("internal.csv", "internal-csv", ["--published", "2026-11-30"]),
    ("internal.json", "internal-json", []),
])
def test_each_official_format_loads_sealed_and_in_force(db: list[str], file: str, fmt: str,
                                                        extra: list[str]) -> None:
    name = "internal-exits" if fmt == "internal-json" else "l1"  # a JSON list states its own name
    doc = run("lists", "load", str(VECTORS / file), "--format", fmt, "--name", name,
              "--rationale", "weekly update", *extra, *db)
    assert doc["ok"] and doc["seq"] > 0 and doc["entries"] > 0 and len(doc["sha256"]) == 64
    assert doc["format"] == fmt and doc["principal"]["subject"].startswith("CN=local:")
    shown = run("lists", "show", *db)["lists"]
    assert [(x["name"], x["seq"]) for x in shown] == [(name, doc["seq"])]


def test_history_diff_and_withdraw(db: list[str], tmp_path: Path) -> None:
    v1 = VECTORS / "internal.csv"
    lines = v1.read_text(encoding="utf-8").splitlines(keepends=True)
    v2 = tmp_path / "v2.csv"
    v2.write_text("".join(lines[:-1]), encoding="utf-8")  # the last entry delisted
    load = ("lists", "load", "--format", "internal-csv", "--name", "bank", "--rationale", "r", *db)
    first, second = run(*load, str(v1)), run(*load, str(v2))
    hist = run("lists", "history", "bank", *db)["loads"]
    assert [x["seq"] for x in hist] == [first["seq"], second["seq"]]
    d = run("lists", "diff", "bank", *db)
    assert (d["from_seq"], d["to_seq"]) == (first["seq"], second["seq"])
    assert len(d["removed"]) == 1 and d["added"] == [] and d["changed"] == []
    assert run("lists", "diff", "bank", "--from", str(second["seq"]), "--to", str(first["seq"]), *db)["added"]
    gone = run("lists", "withdraw", "bank", "--rationale", "replaced by the group list", *db)
    assert gone["withdrawn"] is True
    assert run("lists", "show", *db)["lists"] == []
    refused = run("lists", "diff", "bank", "--from", "99999", *db, code=1)
    assert "--from" in refused["message"]


def test_a_file_cut_short_is_refused_and_nothing_sealed(db: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_bytes((VECTORS / "un_consolidated.xml").read_bytes()[:-40])  # cut short
    doc = run("lists", "load", str(bad), "--format", "un-xml", "--name", "un", "--rationale", "r", *db,
              code=1)
    assert doc["field"] == "file" and "un-xml" in doc["message"]
    assert run("lists", "show", *db)["lists"] == []
