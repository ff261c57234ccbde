"""inference.messages.xsd_validation: each AppHdr and Document against the official XSD of its
version. Known-valid public samples, hand-broken copies of them (a mandatory element removed,
elements out of order, a bad code, text too long), namespaces without a shipped schema, envelopes,
and hostile input refused by the same defused parsing as the parsers before any schema runs."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

import inference.messages.xsd_validation as xv
from inference.messages import MessageError
from inference.messages.xsd_validation import (
    MAX_ERRORS,
    SCHEMAS,
    PartValidation,
    XsdValidationError,
    schema_for,
    validate_xml,
)

PUBLIC = Path(__file__).resolve().parents[2] / "vectors" / "public"
# head.001.001.04 + pacs.008.001.12 in a SWIFT envelope
PACS008_12 = PUBLIC / "iso-ballerina-iso20022-to-swiftmt" / "p_2_1_1 pacs.008-AtoB.xml"
PACS008_08 = PUBLIC / "iso-phoughton-cbpr-ur" / "y2025_pacs.008.min.xml"  # head.02 + pacs.008.08
PACS009_08 = PUBLIC / "iso-phoughton-cbpr-ur" / "y2025_pacs.009.min.xml"  # head.02 + pacs.009.08
PAIN001_03 = PUBLIC / "iso-svapnil-iso20022js" / "example_sepa_pain_001_v3.xml"
SWISS = PUBLIC / "iso-moov-io-iso20022" / "musterfile_pain.001_Nov2020.xml"
PROWIDE = PUBLIC / "iso-prowide-iso20022" / "pacs.008.001.07.xml"
XSD_DIR = Path(xv.__file__).parent / "xsd"
ISO = "urn:iso:std:iso:20022:tech:xsd:"


def _only(parts: tuple[PartValidation, ...], part: str) -> PartValidation:
    (found,) = [p for p in parts if p.part == part]
    return found


def _document(data: bytes) -> PartValidation:
    return _only(validate_xml(data), "Document")


# ------------------------------------------------------------------------- valid and shipped


def test_a_public_cbpr_message_is_valid_header_and_document() -> None:
    hdr, doc = validate_xml(PACS008_12.read_bytes())
    assert (hdr.part, hdr.namespace, hdr.schema, hdr.status, hdr.valid) == (
        "AppHdr", ISO + "head.001.001.04", "head.001.001.04.xsd", "valid", True)
    assert (doc.part, doc.namespace, doc.schema, doc.status, doc.errors) == (
        "Document", ISO + "pacs.008.001.12", "pacs.008.001.12.xsd", "valid", ())


@pytest.mark.parametrize("path, version", [
    (PACS008_08, "pacs.008.001.08"), (PAIN001_03, "pain.001.001.03"), (PROWIDE, "pacs.008.001.07"),
    (PUBLIC / "iso-ballerina-iso20022-to-swiftmt" / "p_2_4_1 pacs.009-BtoC.xml", "pacs.009.001.11"),
    (PUBLIC / "iso-ballerina-iso20022-to-swiftmt" / "p_2_2_1 pacs.004-CtoB.xml", "pacs.004.001.13")])
def test_each_shipped_version_validates_its_public_sample(path: Path, version: str) -> None:
    doc = _document(path.read_bytes())
    assert (doc.schema, doc.status) == (f"{version}.xsd", "valid")


def test_only_the_definitions_sealtrail_reads_are_shipped() -> None:
    families = {name.rsplit(".", 2)[0] for name in SCHEMAS}
    assert families <= {"head.001", "pacs.008", "pacs.009", "pacs.004", "pain.001"}
    assert {"pacs.008.001.02", "pacs.008.001.08", "pacs.008.001.13", "pain.001.001.03",
            "pain.001.001.09", "head.001.001.04", "pacs.009.001.11", "pacs.004.001.13"} <= SCHEMAS
    # no copy of these was found under a licence file that allows redistributing it whole
    assert not {"head.001.001.01", "head.001.001.02", "head.001.001.03"} & SCHEMAS
    assert schema_for(ISO + "pacs.008.001.08") == "pacs.008.001.08"
    assert schema_for(ISO + "pacs.008.001.01") is None  # older than sealtrail reads
    assert schema_for(ISO + "camt.053.001.08") is None


def test_every_shipped_schema_is_the_file_its_source_md_names() -> None:
    """SOURCE.md records each file's SHA-256 as taken from its source: none was edited since."""
    recorded = dict(re.findall(r"^\| `([^`]+\.xsd)` \|.*\| `([0-9a-f]{64})` \|$",
                               (XSD_DIR / "SOURCE.md").read_text(), flags=re.M))
    shipped = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in XSD_DIR.glob("*.xsd")}
    assert shipped == recorded
    assert (XSD_DIR / "LICENSE").is_file() and (XSD_DIR / "LICENSE-APACHE-2.0").is_file()


# ------------------------------------------------------------------------- invalid, hand-broken


def test_a_missing_mandatory_element_is_named_at_its_parent() -> None:
    data = re.sub(rb"<MsgId>[^<]*</MsgId>", b"", PACS008_12.read_bytes(), count=1)
    doc = _document(data)
    assert (doc.status, doc.valid) == ("invalid", False)
    (e,) = doc.errors
    assert e.path == "Document/FIToFICstmrCdtTrf/GrpHdr"
    assert "MsgId" in e.reason and "expected" in e.reason


def test_elements_out_of_order_are_invalid() -> None:
    data = PACS008_12.read_bytes()
    msg_id = re.search(rb"<MsgId>[^<]*</MsgId>", data)
    cre = re.search(rb"<CreDtTm>[^<]*</CreDtTm>", data)
    assert msg_id and cre and msg_id.end() < cre.start()
    swapped = (data[:msg_id.start()] + cre[0] + data[msg_id.end():cre.start()] + msg_id[0]
               + data[cre.end():])
    doc = _document(swapped)
    assert doc.status == "invalid"
    assert doc.errors[0].path == "Document/FIToFICstmrCdtTrf/GrpHdr"
    assert "CreDtTm" in doc.errors[0].reason


def test_a_code_outside_its_enumeration_is_invalid_at_the_element() -> None:
    data = re.sub(rb"<ChrgBr>[A-Z]+</ChrgBr>", b"<ChrgBr>OURS</ChrgBr>", PACS008_12.read_bytes(), count=1)
    (e,) = _document(data).errors
    assert e.path == "Document/FIToFICstmrCdtTrf/CdtTrfTxInf/ChrgBr"
    assert "SHAR" in e.reason  # names the codes allowed


def test_text_longer_than_its_type_allows_is_invalid() -> None:
    data = re.sub(rb"<MsgId>[^<]*</MsgId>", b"<MsgId>" + b"M" * 36 + b"</MsgId>", PACS008_12.read_bytes(),
                  count=1)
    (e,) = _document(data).errors
    assert e.path == "Document/FIToFICstmrCdtTrf/GrpHdr/MsgId"
    assert "35" in e.reason


def test_a_broken_header_is_invalid_while_its_document_stays_valid() -> None:
    data = re.sub(rb"<BizMsgIdr>[^<]*</BizMsgIdr>", b"<BizMsgIdr></BizMsgIdr>", PACS008_12.read_bytes())
    hdr, doc = validate_xml(data)
    assert (hdr.status, hdr.errors[0].path, doc.status) == ("invalid", "AppHdr/BizMsgIdr", "valid")


def test_a_pain001_with_a_placeholder_date_is_invalid() -> None:
    data = re.sub(rb"<ReqdExctnDt>[^<]*</ReqdExctnDt>", b"<ReqdExctnDt>2025-02-30</ReqdExctnDt>",
                  PAIN001_03.read_bytes(), count=1)
    (e,) = _document(data).errors
    assert e.path == "Document/CstmrCdtTrfInitn/PmtInf/ReqdExctnDt"


def test_errors_are_capped_and_the_rest_counted() -> None:
    data = PACS008_12.read_bytes()
    n = len(re.findall(rb"<BICFI>", data))
    many = re.sub(rb"<BICFI>([A-Z0-9]+)</BICFI>", rb"<BICFI>\1!</BICFI>", data)
    parts = validate_xml(many)
    bad = sum(len(p.errors) + p.omitted for p in parts)
    assert bad == n > MAX_ERRORS // 2
    assert all(len(p.errors) <= MAX_ERRORS for p in parts)
    repeated = data.replace(b"<ChrgBr>", b"<ChrgBr>X")
    doc = _document(re.sub(rb"(<CdtTrfTxInf>.*</CdtTrfTxInf>)", lambda m: m[1] * (MAX_ERRORS + 5), repeated,
                           flags=re.S))
    assert len(doc.errors) == MAX_ERRORS and doc.omitted == 5
    assert doc.to_json()["errors_omitted"] == 5


# ------------------------------------------------------------------------- not validated


def test_a_version_without_a_shipped_schema_is_not_validated_never_invalid() -> None:
    hdr, doc = validate_xml(PACS009_08.read_bytes())
    assert (hdr.namespace, hdr.schema, hdr.status, hdr.valid) == (
        ISO + "head.001.001.02", None, "not validated", None)
    assert hdr.note == f"no schema shipped for {ISO}head.001.001.02"
    assert (doc.status, doc.valid, doc.schema, doc.errors) == ("not validated", None, None, ())
    assert doc.note == f"no schema shipped for {ISO}pacs.009.001.08"
    prowide_hdr = validate_xml(PROWIDE.read_bytes())[0]
    assert (prowide_hdr.namespace, prowide_hdr.status) == (ISO + "head.001.001.01", "not validated")


def test_a_national_variant_is_not_validated() -> None:
    doc = _document(SWISS.read_bytes())
    assert doc.status == "not validated"
    assert doc.namespace == "http://www.six-interbank-clearing.com/de/pain.001.001.03.ch.02.xsd"
    assert doc.note.startswith("no schema shipped for http://www.six-interbank-clearing.com/")


def test_a_document_without_a_namespace_is_not_validated() -> None:
    doc = _document(b"<Document><FIToFICstmrCdtTrf/></Document>")
    assert (doc.namespace, doc.status, doc.note) == ("", "not validated", "the Document has no namespace")


# ------------------------------------------------------------------------- envelopes


def test_header_and_document_are_found_in_any_envelope_in_document_order() -> None:
    inner = PACS008_12.read_bytes().split(b"?>", 1)[1]
    body = re.sub(rb"<!--.*?-->", b"", inner, flags=re.S)
    wrapped = b"<DataPDU xmlns='urn:cbpr:xsd:envelope'><Body><Wrap>" + body + b"</Wrap></Body></DataPDU>"
    parts = validate_xml(wrapped)
    assert [(p.part, p.status) for p in parts] == [("AppHdr", "valid"), ("Document", "valid")]
    prowide = validate_xml(PROWIDE.read_bytes())  # <message> without a namespace, head.001.001.01
    assert [(p.part, p.status) for p in prowide] == [("AppHdr", "not validated"), ("Document", "valid")]


def test_a_document_carried_inside_another_part_is_not_a_part() -> None:
    data = PACS008_12.read_bytes()
    nested = data.replace(b"</FIToFICstmrCdtTrf>",
                          b"<SplmtryData><Envlp><Document xmlns='urn:x'/></Envlp></SplmtryData>"
                          b"</FIToFICstmrCdtTrf>", 1)
    assert [p.part for p in validate_xml(nested)] == ["AppHdr", "Document"]


# ------------------------------------------------------------------------- refused, hostile


BOMB = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + b"".join(b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10 if i > 1 else b"&lol;" * 10)
                   for i in range(1, 10))
        + b"]><Document xmlns='" + ISO.encode() + b"pacs.008.001.08'>&lol9;</Document>")
XXE = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
       b"<Document xmlns='" + ISO.encode() + b"pacs.008.001.08'>&x;</Document>")


@pytest.mark.parametrize("data, says", [
    (BOMB, "DTDs, entities and external references are forbidden"),
    (XXE, "DTDs, entities and external references are forbidden"),
    (b"not xml at all", "not well-formed XML"),
    (b"<Document xmlns='" + ISO.encode() + b"pacs.008.001.08'><unclosed></Document>", "not well-formed"),
    (b"<a>" + b"x" * (1 << 20) + b"</a>", "the limit is"),
    (b"\xff\xfe<Document/>", "not UTF-8"),
    (b"<Envelope><AppHdr xmlns='" + ISO.encode() + b"head.001.001.04'/></Envelope>",
     "holds no ISO 20022 Document"),
])
def test_hostile_or_garbage_input_is_refused_before_any_schema_runs(data: bytes, says: str) -> None:
    with pytest.raises(MessageError, match=says) as info:
        validate_xml(data)
    assert info.value.field == "Document"


def test_a_validator_failure_is_the_packages_error_never_xmlschemas(monkeypatch: pytest.MonkeyPatch) -> None:
    import xmlschema

    class Broken:
        def iter_errors(self, *_: Any, **__: Any) -> Any:
            raise xmlschema.XMLSchemaValidatorError(None, "boom")  # type: ignore[arg-type]

    monkeypatch.setattr(xv, "_load", lambda name: Broken())
    with pytest.raises(XsdValidationError, match="schema check failed") as info:
        validate_xml(PACS008_12.read_bytes())
    assert isinstance(info.value, MessageError) and info.value.field == "AppHdr"
    assert not isinstance(info.value, xmlschema.XMLSchemaException)


def test_an_unloadable_shipped_schema_is_the_packages_error(monkeypatch: pytest.MonkeyPatch) -> None:
    xv._load.cache_clear()
    monkeypatch.setattr(xv, "resources", _NoFiles())
    try:
        with pytest.raises(XsdValidationError, match="cannot be loaded"):
            validate_xml(PACS008_12.read_bytes())
    finally:
        monkeypatch.undo()
        xv._load.cache_clear()
    assert _document(PACS008_12.read_bytes()).status == "valid"


class _NoFiles:
    """``importlib.resources`` whose files cannot be read (a damaged installation)."""

    def files(self, _: str) -> Any:
        class _Missing:
            def __truediv__(self, _: str) -> _Missing:
                return self

            def read_bytes(self) -> bytes:
                raise FileNotFoundError("gone")

        return _Missing()


def test_the_scoring_path_parse_never_loads_the_validator() -> None:
    """Validation stays off the scoring path: parsing every shipped-version sample loads neither
    xmlschema nor this module (checked in a fresh interpreter, where nothing else imported them)."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from inference.messages import parse_messages\n"
            f"for p in {[str(p) for p in (PACS008_12, PACS008_08, PAIN001_03, PROWIDE)]!r}:\n"
            "    parse_messages(Path(p).read_bytes())\n"
            "print(sorted(m for m in sys.modules if m.startswith(('xmlschema', 'elementpath'))\n"
            "             or m == 'inference.messages.xsd_validation'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
