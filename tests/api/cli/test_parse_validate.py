"""``sealtrail parse FILE --validate``: each ISO 20022 AppHdr and Document checked against the
official XSD of its version, beside the usual output. Without the flag nothing changes; with it a
schema-invalid part exits 1, an unshipped schema is reported and does not fail, FIN and JSON get a
note, and hostile XML is refused before any schema runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from api.cli import app

TESTS = Path(__file__).resolve().parents[2]
PUBLIC = TESTS / "vectors" / "public"
VALID = PUBLIC / "iso-ballerina-iso20022-to-swiftmt" / "p_2_1_1 pacs.008-AtoB.xml"  # head.04 + pacs.008.12
UNSHIPPED = PUBLIC / "iso-phoughton-cbpr-ur" / "y2025_pacs.004.min.xml"  # head.02 + pacs.004.09: no schema
XSD_INVALID = PUBLIC / "iso-svapnil-iso20022js" / "cross_river_pain_001_ach_credit.xml"  # 9-character BIC
FIN = TESTS / "vectors" / "messages" / "mt" / "mt202.fin"
runner = CliRunner()


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    res = runner.invoke(app, ["parse", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_without_the_flag_output_and_exit_code_are_unchanged() -> None:
    code, doc = _json(str(XSD_INVALID))
    assert code == 0 and doc["ok"] is True
    assert "validation" not in doc and "validation_note" not in doc
    assert "validation" not in runner.invoke(app, ["parse", str(XSD_INVALID)]).stdout


def test_pacs009_and_pacs004_of_the_2024_release_validate() -> None:
    for name, schema in (("p_2_4_1 pacs.009-BtoC.xml", "pacs.009.001.11.xsd"),
                         ("p_2_2_1 pacs.004-CtoB.xml", "pacs.004.001.13.xsd")):
        code, doc = _json(str(PUBLIC / "iso-ballerina-iso20022-to-swiftmt" / name), "--validate")
        assert code == 0 and [p["status"] for p in doc["validation"]] == ["valid", "valid"]
        assert doc["validation"][1]["schema"] == schema


def test_a_valid_message_validates_header_and_document() -> None:
    code, doc = _json(str(VALID), "--validate")
    assert code == 0 and doc["ok"] is True and len(doc["transactions"]) == 1 and doc["errors"] == []
    assert [(p["part"], p["schema"], p["status"], p["valid"]) for p in doc["validation"]] == [
        ("AppHdr", "head.001.001.04.xsd", "valid", True), ("Document", "pacs.008.001.12.xsd", "valid", True)]


def test_a_schema_invalid_document_fails_even_though_it_parses() -> None:
    code, doc = _json(str(XSD_INVALID), "--validate")
    assert code == 1 and doc["ok"] is False and doc["error"] == "schema_invalid"
    assert len(doc["transactions"]) == 1  # the parse itself still decides it
    (part,) = doc["validation"]
    assert (part["status"], part["valid"], part["schema"]) == ("invalid", False, "pain.001.001.03.xsd")
    assert part["errors"][0]["path"] == "Document/CstmrCdtTrfInitn/GrpHdr/InitgPty/Id/OrgId/BICOrBEI"
    human = runner.invoke(app, ["parse", str(XSD_INVALID), "--validate"])
    assert human.exit_code == 1
    assert "validation: Document pain.001.001.03: invalid against pain.001.001.03.xsd" in human.stdout
    where = "  Document/CstmrCdtTrfInitn/GrpHdr/InitgPty/Id/OrgId/BICOrBEI: value doesn't match"
    assert where in human.stdout
    assert "0 valid, 1 invalid, 0 not validated" in human.stdout


def test_many_errors_print_one_line_each_then_a_count(tmp_path: Path) -> None:
    data = VALID.read_bytes().replace(b"<ChrgBr>", b"<ChrgBr>X")
    data = re.sub(rb"(<CdtTrfTxInf>.*</CdtTrfTxInf>)", lambda m: m[1] * 13, data, flags=re.S)
    f = tmp_path / "many.xml"
    f.write_bytes(data)
    human = runner.invoke(app, ["parse", str(f), "--validate"])
    assert human.exit_code == 1
    assert human.stdout.count("/ChrgBr: value must be one of") == 10
    assert "  ... and 3 more" in human.stdout


def test_a_version_without_a_shipped_schema_is_reported_and_does_not_fail() -> None:
    code, doc = _json(str(UNSHIPPED), "--validate")
    assert code == 0 and doc["ok"] is True
    hdr, body = doc["validation"]
    assert (hdr["status"], hdr["valid"], hdr["schema"]) == ("not validated", None, None)
    assert hdr["note"] == "no schema shipped for urn:iso:std:iso:20022:tech:xsd:head.001.001.02"
    assert (body["status"], body["valid"], body["schema"]) == ("not validated", None, None)
    assert body["note"] == "no schema shipped for urn:iso:std:iso:20022:tech:xsd:pacs.004.001.09"
    human = runner.invoke(app, ["parse", str(UNSHIPPED), "--validate"])
    assert human.exit_code == 0
    assert "validation: Document pacs.004.001.09: not validated (no schema shipped for" in human.stdout
    assert "validation: AppHdr head.001.001.02: not validated (no schema shipped for" in human.stdout
    assert "0 valid, 0 invalid, 2 not validated" in human.stdout


def test_fin_input_gets_a_note_and_keeps_its_exit_code() -> None:
    code, doc = _json(str(FIN), "--validate")
    assert code == 0 and doc["ok"] is True and doc["validation"] == []
    assert doc["validation_note"] == "--validate checks ISO 20022 XML only; SWIFT FIN input is not validated"
    human = runner.invoke(app, ["parse", str(FIN), "--validate"])
    assert human.exit_code == 0 and "ISO 20022 XML only" in human.stdout


def test_a_refused_message_is_still_refused_with_validate() -> None:
    code, doc = _json(str(PUBLIC / "iso-phoughton-cbpr-ur" / "y2025_pacs.009.min.xml"), "--validate")
    assert code == 1 and doc["error"] == "message_refused"
    # nothing is invalid (no schema for head.001.001.02 or pacs.009.001.08): the refusal alone fails it
    assert [p["status"] for p in doc["validation"]] == ["not validated", "not validated"]


def test_hostile_xml_is_refused_before_any_schema_runs(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.xml"
    bomb.write_bytes(b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
                     b"<Document xmlns='urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08'>&b;</Document>")
    code, doc = _json(str(bomb), "--validate")
    assert code == 1 and doc["ok"] is False
    (part,) = doc["validation"]
    assert part["status"] == "refused" and part["valid"] is False
    assert "DTDs, entities and external references are forbidden" in part["note"]
    human = runner.invoke(app, ["parse", str(bomb), "--validate"])
    assert human.exit_code == 1 and "Traceback" not in human.output
    assert "validation refused:" in human.stderr
