"""``sealtrail parse``: canonical transactions out, refused messages named, exit 1 on any."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from api.cli import app

VEC = Path(__file__).parents[1] / "vectors" / "messages"
runner = CliRunner()


def test_parse_an_rje_file_to_canonical_json() -> None:
    res = runner.invoke(app, ["parse", str(VEC / "mt" / "rje_two.fin"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["errors"] == []
    assert [t["message_type"] for t in doc["transactions"]] == ["MT103", "MT202"]
    assert all(len(t["sha256"]) == 64 and t["schema"] == "sealtrail.transaction/2"
               for t in doc["transactions"])


def test_one_refused_message_fails_the_file_but_the_others_print(tmp_path: Path) -> None:
    data = (VEC / "mt" / "rje_two.fin").read_bytes().replace(b"CHF100000,00", b"CHF100000.00")
    f = tmp_path / "mixed.fin"
    f.write_bytes(data)
    res = runner.invoke(app, ["parse", str(f), "--json"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert [t["message_type"] for t in doc["transactions"]] == ["MT202"]
    (e,) = doc["errors"]
    assert (e["message"], e["field"]) == ("message 1 (MT103)", ":32A:")
    assert "uses '.' where SWIFT requires ','" in e["reason"]
    human = runner.invoke(app, ["parse", str(f)])
    assert human.exit_code == 1 and "1 parsed, 1 refused" in human.stdout


def test_format_errors(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_bytes(b"hello")
    res = runner.invoke(app, ["parse", str(f), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["errors"][0]["field"] == "format"
    assert runner.invoke(app, ["parse", str(f), "--format", "csv"]).exit_code == 2
    assert runner.invoke(app, ["parse", str(tmp_path / "missing")]).exit_code == 2
    forced = runner.invoke(app, ["parse", str(VEC / "mt" / "mt202.fin"), "--format", "json",
                                 "--json"])
    assert forced.exit_code == 1 and json.loads(forced.stdout)["errors"][0]["message"]


DEDMOO = Path(__file__).parents[1] / "vectors" / "public" / "mt-dedmoo-swift-mt103-parser"


def test_a_stated_mt103_reads_a_text_block_without_headers_and_auto_does_not() -> None:
    f = str(DEDMOO / "valid-plain.txt")
    res = runner.invoke(app, ["parse", f, "--format", "mt103", "--json"])
    assert res.exit_code == 0, res.output
    (t,) = json.loads(res.stdout)["transactions"]
    assert t["message_type"] == "MT103" and [x["code"] for x in t["findings"]] == ["HEADERS_MISSING"]
    refused = runner.invoke(app, ["parse", f, "--json"])  # auto: nothing states the type
    assert refused.exit_code == 1
    assert [e["field"] for e in json.loads(refused.stdout)["errors"]] == ["block 2"]


def test_the_cli_offers_every_format_the_parsers_read() -> None:
    from api.cli.common import FORMATS
    from inference.messages import FORMATS as PARSER_FORMATS

    assert set(FORMATS) == set(PARSER_FORMATS)
