"""JSON messages: the canonical form parses back exactly; every refusal names its JSONPath."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from inference.messages.errors import MessageError
from inference.messages.json_message import MAX_JSON_BYTES, parse_json
from inference.messages.pacs008 import parse_pacs008
from inference.messages.transaction import R16, Agent, Identifier, Party

PACS = Path(__file__).parents[2] / "vectors" / "messages" / "pacs008"

MINIMAL: dict[str, Any] = {
    "reference": "ORDER-991",
    "value_date": "2025-06-02",
    "amount": "1814.28",
    "currency": "EUR",
    "originator": {"name": "Müller Werkzeugbau GmbH", "account": "DE89370400440532013000",
                   "address_lines": ["Industriestraße 7", "70565 Stuttgart"], "country": "DE"},
    "beneficiary": {"name": "Atelier Lefèvre SARL", "account": "FR1420041010050500013M02606"},
}


def dumps(doc: object) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def with_(path: str, value: object, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``doc`` (default MINIMAL) with the dotted ``path`` set (or removed: ...)."""
    out = copy.deepcopy(MINIMAL if doc is None else doc)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return out


def refuse(data: bytes) -> MessageError:
    with pytest.raises(MessageError) as info:
        parse_json(data)
    return info.value


# --- accepted --------------------------------------------------------------------------------

def test_minimal_object() -> None:
    data = dumps(MINIMAL)
    (t,) = parse_json(data)
    assert (t.message_type, t.reference, t.currency) == ("json", "ORDER-991", "EUR")
    assert t.amount == Decimal("1814.28") and str(t.amount) == "1814.28"
    assert t.value_date == date(2025, 6, 2)
    assert t.originator == Party(
        name="Müller Werkzeugbau GmbH", account="DE89370400440532013000", iban="DE89370400440532013000",
        address_lines=("Industriestraße 7", "70565 Stuttgart"), country="DE")
    assert t.beneficiary.iban == "FR1420041010050500013M02606"  # derived from the account
    assert t.agents == () and t.uetr is None and t.exchange_rate is None
    assert t.r16 == R16(True, True, True, True, True)
    assert t.raw_sha256 == hashlib.sha256(data).hexdigest()


def test_an_array_is_several_transactions_sharing_the_input_hash() -> None:
    data = dumps([MINIMAL, with_("reference", "ORDER-992"), with_("amount", "5")])
    ts = parse_json(data)
    assert [t.reference for t in ts] == ["ORDER-991", "ORDER-992", "ORDER-991"]
    assert [str(t.amount) for t in ts] == ["1814.28", "1814.28", "5.00"]
    assert {t.raw_sha256 for t in ts} == {hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize(("amount", "currency", "expected"), [
    ("1500000", "JPY", "1500000"), ("1.5", "BHD", "1.500"), ("1234.567", "BHD", "1234.567"),
    ("0.10", "USD", "0.10"), ("100.010", "USD", "100.01"),
])
def test_amounts_take_the_currency_minor_units_exactly(amount: str, currency: str, expected: str) -> None:
    (t,) = parse_json(dumps(with_("currency", currency, with_("amount", amount))))
    assert str(t.amount) == expected


def test_every_optional_field() -> None:
    doc = dict(MINIMAL, **{
        "schema": "sealtrail.transaction/1", "message_type": "MT103",
        "related_reference": "REL-1", "uetr": "eb6305c9-1f7f-49de-aed0-16487c27b42d",
        "bank_operation_code": "CRED", "instructed_amount": "2000", "instructed_currency": "USD",
        "exchange_rate": "0.90714", "remittance": "INV 1\nINV 2", "charges": "SHA",
        "sender_to_receiver": "/ACC/URGENT", "raw_sha256": "0" * 64,
        "agents": [{"role": "sender", "bic": "deutdeff"},
                   {"role": "intermediary", "account": "/123", "name_address": ["A BANK", "ZURICH"]}],
    })
    doc["originator"] = dict(doc["originator"], bic="NWCCUS33", identifiers=[
        {"scheme": "DOB", "value": "1979-02-28"}, {"scheme": "POB", "value": "Kowloon, HK", "country": "HK"},
        {"scheme": "LEI", "value": "529900T8BM49AURSDO55"}, {"scheme": "BIC", "value": "nwccus33"}])
    (t,) = parse_json(dumps(doc))
    assert t.message_type == "json"  # the source's type is not carried
    assert t.raw_sha256 != "0" * 64
    assert (t.related_reference, t.uetr, t.bank_operation_code) == (
        "REL-1", "eb6305c9-1f7f-49de-aed0-16487c27b42d", "CRED")
    assert (str(t.instructed_amount), t.instructed_currency, t.exchange_rate) == (
        "2000.00", "USD", Decimal("0.90714"))
    assert (t.remittance, t.charges, t.sender_to_receiver) == ("INV 1\nINV 2", "SHA", "/ACC/URGENT")
    assert t.agents == (Agent("sender", bic="DEUTDEFF"),
                        Agent("intermediary", account="/123", name_address=("A BANK", "ZURICH")))
    assert t.originator.bic == "NWCCUS33"
    assert t.originator.identifiers == (
        Identifier("DOB", "1979-02-28"), Identifier("POB", "Kowloon, HK", "HK"),
        Identifier("LEI", "529900T8BM49AURSDO55"), Identifier("BIC", "NWCCUS33"))


@pytest.mark.parametrize("name", sorted(p.name for p in PACS.glob("*.xml")))
def test_pacs008_round_trips_through_the_canonical_json(name: str) -> None:
    for t in parse_pacs008((PACS / name).read_bytes()):
        doc = t.to_json()
        data = dumps(doc)
        (back,) = parse_json(data)
        again = back.to_json()
        assert again["message_type"] == "json" and again["raw_sha256"] == hashlib.sha256(data).hexdigest()
        strip = {"message_type", "raw_sha256"}
        assert {k: v for k, v in again.items() if k not in strip} == \
               {k: v for k, v in doc.items() if k not in strip}
        assert back.r16 == t.r16 and back.amount == t.amount and back.originator == t.originator


def test_the_fullest_pacs008_address_round_trips() -> None:
    parts = "".join(f"<{tag}>{tag.lower()}-{'x' * 60}</{tag}>" for tag in (
        "Dept", "SubDept", "StrtNm", "Flr", "Room")) + "<BldgNb>B-1</BldgNb><BldgNm>Tower</BldgNm>" \
        "<PstBx>PO 7</PstBx><PstCd>10022</PstCd><TwnNm>New York</TwnNm><TwnLctnNm>Midtown</TwnLctnNm>" \
        "<DstrctNm>Manhattan</DstrctNm><CtrySubDvsn>NY</CtrySubDvsn><Ctry>US</Ctry>" + \
        "".join(f"<AdrLine>line {n}</AdrLine>" for n in range(7))
    data = re.sub(rb"<PstlAdr>.*?</PstlAdr>", f"<PstlAdr>{parts}</PstlAdr>".encode(),
                  (PACS / "organisation_lei_bic.xml").read_bytes(), count=1, flags=re.S)
    (t,) = parse_pacs008(data)
    assert len(t.originator.address_lines) == 17 and t.originator.address_lines[3] == "Tower"
    (back,) = parse_json(dumps(t.to_json()))
    assert back.originator == t.originator


def test_json_round_trip_is_a_fixed_point() -> None:
    (t,) = parse_json(dumps(MINIMAL))
    (u,) = parse_json(dumps(t.to_json()))
    assert u.canonical_bytes().replace(u.raw_sha256.encode(), t.raw_sha256.encode()) == t.canonical_bytes()


# --- refused: the document -------------------------------------------------------------------

@pytest.mark.parametrize(("data", "reason"), [
    (b"\xff\xfe{}", "not UTF-8 (invalid byte at offset 0)"),
    (b'{"reference": "A\xc3"}', "not UTF-8 (invalid byte at offset 16)"),
    (b"", "not JSON"),
    (b'{"reference": ', "not JSON"),
    (b"<Document/>", "not JSON"),
    (b'{"amount": NaN}', "NaN is not a JSON number"),
    (b'{"amount": Infinity}', "Infinity is not a JSON number"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'"a string"', "expected an object or an array of objects, not str"),
    (b"42", "expected an object or an array of objects, not int"),
    (b"[]", "an empty array holds no transaction"),
    (b"\xef\xbb\xbf{}", "not JSON"),
])
def test_not_a_json_transaction(data: bytes, reason: str) -> None:
    e = refuse(data)
    assert e.field == "$" and reason in e.reason, e.reason


def test_oversize() -> None:
    data = dumps(with_("remittance", "x" * 60_000)) + b" " * MAX_JSON_BYTES
    e = refuse(data)
    assert e.field == "$" and f"the limit is {MAX_JSON_BYTES}" in e.reason


def test_duplicate_keys_are_refused_not_last_wins() -> None:
    data = dumps(MINIMAL).replace(b'"amount": "1814.28"', b'"amount": "1.00", "amount": "1814.28"')
    e = refuse(data)
    assert e.field == "$..amount" and "duplicate key 'amount'" in e.reason


def test_array_item_not_an_object() -> None:
    e = refuse(dumps([MINIMAL, ["x"]]))
    assert e.field == "$[1]" and "expected an object, not list" in e.reason


# --- refused: the schema ---------------------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "field", "reason"), [
    ("reference", ..., "$.reference", "Field required"),
    ("originator", ..., "$.originator", "Field required"),
    ("nickname", "x", "$.nickname", "Extra inputs are not permitted"),
    ("originator.nickname", "x", "$.originator.nickname", "Extra inputs are not permitted"),
    ("amount", 1814.28, "$.amount", "Input should be a valid string"),
    ("amount", 1814, "$.amount", "Input should be a valid string"),
    ("reference", "", "$.reference", "at least 1 character"),
    ("reference", "R" * 36, "$.reference", "at most 35 characters"),
    ("originator.name", "N" * 257, "$.originator.name", "at most 256 characters"),
    ("originator.address_lines", ["l"] * 21, "$.originator.address_lines", "at most 20 items"),
    ("originator.address_lines", "one line", "$.originator.address_lines", "valid tuple"),
    ("originator.address_lines", ["ok", 7], "$.originator.address_lines[1]", "valid string"),
    ("charges", "ALL", "$.charges", "Input should be 'OUR', 'SHA'"),
    ("bank_operation_code", "cred", "$.bank_operation_code", "should match pattern"),
    ("agents", [{"role": "bank"}], "$.agents[0].role", "Input should be 'sender'"),
    ("agents", [{"bic": "DEUTDEFF"}], "$.agents[0].role", "Field required"),
    ("r16", {"originator_name": "yes"}, "$.r16.originator_name", "valid boolean"),
    ("raw_sha256", "ABC", "$.raw_sha256", "should match pattern"),
    ("originator.identifiers", [{"scheme": "nidn", "value": "1"}], "$.originator.identifiers[0].scheme",
     "should match pattern"),
])
def test_schema_errors_name_the_path(path: str, value: object, field: str, reason: str) -> None:
    e = refuse(dumps(with_(path, value)))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


def test_schema_error_in_a_later_array_item() -> None:
    e = refuse(dumps([MINIMAL, MINIMAL, with_("currency", ...)]))
    assert e.field == "$[2].currency" and "Field required" in e.reason


def test_several_schema_errors_are_counted() -> None:
    e = refuse(dumps(with_("currency", 1, with_("amount", 2))))
    assert e.field == "$.amount" and "and 1 more error(s)" in e.reason


# --- refused: the values ---------------------------------------------------------------------

@pytest.mark.parametrize(("path", "value", "field", "reason"), [
    ("currency", "ABC", "$.currency", "not an ISO 4217 code"),
    ("currency", "eur", "$.currency", "not three capital letters"),
    ("amount", "100.001", "$.amount", "more decimals than EUR allows (2)"),
    ("amount", "1814,28", "$.amount", "uses ','"),
    ("amount", "1e3", "$.amount", "not a decimal number"),
    ("amount", "-5", "$.amount", "not a decimal number"),
    ("amount", "0", "$.amount", "must be positive"),
    ("amount", "١٨١٤.٢٨", "$.amount", "not a decimal number (ASCII digits)"),
    ("exchange_rate", "٠.٩", "$.exchange_rate", "exchange rate"),
    ("value_date", "2025-02-30", "$.value_date", "not YYYY-MM-DD"),
    ("value_date", "20250602", "$.value_date", "not YYYY-MM-DD"),
    ("uetr", "EB6305C9-1F7F-49DE-AED0-16487C27B42D", "$.uetr", "not a lower-case version 4 UUID"),
    ("exchange_rate", "0,9", "$.exchange_rate", "exchange rate"),
    ("exchange_rate", "0", "$.exchange_rate", "exchange rate"),
    ("instructed_amount", "10", "$.instructed_amount", "go together"),
    ("originator.country", "XX", "$.originator.country", "not an ISO 3166-1 alpha-2"),
    ("originator.bic", "ZZZZZZZZ", "$.originator.bic", "BIC 'ZZZZZZZZ' is invalid"),
    ("originator.iban", "DE89370400440532013001", "$.originator.iban", "not the valid IBAN form"),
    ("beneficiary.iban", "DE89370400440532013000", "$.beneficiary.iban", "not the valid IBAN form"),
    ("agents", [{"role": "sender", "bic": "DEUT"}], "$.agents[0].bic", "is invalid"),
    ("schema", "sealtrail.transaction/3", "$.schema", "is not one of"),
    ("originator.identifiers", [{"scheme": "DOB", "value": "28.02.1979"}],
     "$.originator.identifiers[0].value", "not YYYY-MM-DD"),
    ("originator.identifiers", [{"scheme": "LEI", "value": "529900T8BM49AURSDO56"}],
     "$.originator.identifiers[0].value", "check digits"),
    ("originator.identifiers", [{"scheme": "BIC", "value": "NOPE"}],
     "$.originator.identifiers[0].value", "is invalid"),
    ("originator.identifiers", [{"scheme": "NIDN", "value": "1", "country": "ZZ"}],
     "$.originator.identifiers[0].country", "not an ISO 3166-1"),
])
def test_bad_value(path: str, value: object, field: str, reason: str) -> None:
    e = refuse(dumps(with_(path, value)))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


@pytest.mark.parametrize(("path", "value", "field"), [
    ("reference", "REF\x00991", "$.reference"),
    ("originator.name", "M\u00fcller\x1b[2J GmbH", "$.originator.name"),
    ("beneficiary.name", "Atelier\x7f", "$.beneficiary.name"),
    ("beneficiary.name", "Atelier\u0085Lef\u00e8vre", "$.beneficiary.name"),  # C1 NEXT LINE
    ("beneficiary.name", "Atelier\nLef\u00e8vre", "$.beneficiary.name"),  # a name is one line
    ("originator.address_lines", ["Industriestra\u00dfe 7", "70565\tStuttgart"],
     "$.originator.address_lines[1]"),
    ("originator.identifiers", [{"scheme": "NIDN", "value": "12\x003"}], "$.originator.identifiers[0].value"),
    ("remittance", "invoice 12\r\n13", "$.remittance"),  # lines, but newline only
    ("related_reference", "lone \ud800", "$.related_reference"),
])
def test_control_characters_are_refused_as_the_swift_parser_refuses_them(
        path: str, value: object, field: str) -> None:
    e = refuse(json.dumps(with_(path, value)).encode())  # ASCII, \u-escaped: as a client may send a NUL
    assert e.field == field, (e.field, e.reason)
    assert "control character" in e.reason or "surrogate" in e.reason


@pytest.mark.parametrize("encode", [
    lambda d: json.dumps(d).encode(), lambda d: json.dumps(d, ensure_ascii=False).encode(), orjson.dumps,
], ids=["ascii", "utf-8", "orjson"])
def test_every_control_character_is_refused_however_the_json_spells_it(encode: Any) -> None:
    """Clean text skips the search (nothing in it can decode to a control character): every C0,
    DEL, C1 code and surrogate, escaped or raw as each encoder writes it, must still be found."""
    codes = [*range(0x20), *range(0x7F, 0xA0), 0xD800, 0xDBFF, 0xDC00, 0xDFFF]
    for c in codes:
        try:
            data = encode(with_("originator.name", f"A{chr(c)}B"))
        except (TypeError, UnicodeEncodeError):  # UTF-8 holds no lone surrogate: only \uD800 can
            assert 0xD800 <= c <= 0xDFFF
            continue
        with pytest.raises(MessageError) as info:
            parse_json(data)
        assert info.value.field == "$.originator.name", (hex(c), info.value)
    (t,) = parse_json(encode(with_("originator.name", "Caf\u00e9 \u00a0\u2028 \U0001f600")))
    assert t.originator.name == "Caf\u00e9 \u00a0\u2028 \U0001f600"  # text, not control codes


def test_remittance_and_sender_to_receiver_keep_their_lines() -> None:
    doc = with_("sender_to_receiver", "/ACC/line one\n//line two", with_("remittance", "INV 1\nINV 2"))
    (t,) = parse_json(dumps(doc))
    assert (t.remittance, t.sender_to_receiver) == ("INV 1\nINV 2", "/ACC/line one\n//line two")


def test_instructed_currency_checked() -> None:
    doc = with_("instructed_currency", "XYZ", with_("instructed_amount", "10"))
    e = refuse(dumps(doc))
    assert e.field == "$.instructed_currency" and "not an ISO 4217 code" in e.reason


def test_r16_given_must_match_the_parties() -> None:
    r16 = {"originator_name": True, "originator_account": True, "originator_address_or_id": True,
           "beneficiary_name": True, "beneficiary_account": True}
    assert parse_json(dumps(with_("r16", r16)))[0].r16.complete
    e = refuse(dumps(with_("r16", r16, with_("beneficiary.name", ...))))
    assert e.field == "$.r16" and "does not match the parties" in e.reason
