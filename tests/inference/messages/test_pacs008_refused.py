"""pacs.008 input that must be refused, each naming the element and the reason."""

from __future__ import annotations

import re

import pytest

from inference.messages.errors import MessageError
from inference.messages.pacs008 import MAX_XML_BYTES, parse_pacs008
from tests.inference.messages.pacs008_samples import NS8, TX1, V, drop, read, refuse, sub

# --- the vectors, field by field ---------------------------------------------------------------


def test_truncated_xml() -> None:
    data = read("sepa_eur_ibans.xml")
    e = refuse(data[: len(data) // 2])
    assert e.field == "Document" and "not well-formed XML" in e.reason


def test_oversize_input_is_refused_before_parsing() -> None:
    data = read("sepa_eur_ibans.xml")
    big = data.replace(b"<FIToFICstmrCdtTrf>", b"<!--" + b"x" * MAX_XML_BYTES + b"--><FIToFICstmrCdtTrf>")
    e = refuse(big)
    assert e.field == "Document" and f"the limit is {MAX_XML_BYTES}" in e.reason


def test_invalid_utf8() -> None:
    e = refuse(sub("sepa_eur_ibans.xml", "Müller", "M").replace(b">M Werkzeug", b">M\xfc Werkzeug"))
    assert e.field == "Document" and "not UTF-8" in e.reason


def test_other_declared_encoding() -> None:
    e = refuse(sub("sepa_eur_ibans.xml", 'encoding="UTF-8"', 'encoding="ISO-8859-1"'))
    assert e.field == "Document" and "'ISO-8859-1'; only UTF-8" in e.reason


def test_billion_laughs_is_refused_not_expanded() -> None:
    lol = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    bomb = (f'<?xml version="1.0"?><!DOCTYPE Document [<!ENTITY lol0 "lol">{lol}]>'
            f'<Document xmlns="{NS8.decode()}"><FIToFICstmrCdtTrf>&lol9;</FIToFICstmrCdtTrf></Document>')
    e = refuse(bomb.encode())
    assert e.field == "Document" and "forbidden" in e.reason


def test_external_entity_is_refused_not_read() -> None:
    xxe = (b'<?xml version="1.0"?><!DOCTYPE Document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
           b'<Document xmlns="' + NS8 + b'"><FIToFICstmrCdtTrf><GrpHdr><MsgId>&xxe;</MsgId></GrpHdr>'
           b"</FIToFICstmrCdtTrf></Document>")
    e = refuse(xxe)
    assert e.field == "Document" and "forbidden" in e.reason and "root:" not in str(e)


def test_any_dtd_is_refused() -> None:
    data = sub("sepa_eur_ibans.xml", "<Document ", '<!DOCTYPE Document SYSTEM "http://example.com/x.dtd">'
               "<Document ")
    e = refuse(data)
    assert e.field == "Document" and "DTDs, entities and external references are forbidden" in e.reason


@pytest.mark.parametrize(("namespace", "reason"), [
    ("pacs.008.001.07", "pacs.008.001.07 is not supported (pacs.008.001.08 and later)"),
    ("pacs.008.001.02", "pacs.008.001.02 is not supported"),
    ("pacs.009.001.08", "unsupported message pacs.009.001.08: only pacs.008"),
    ("pain.001.001.09", "unsupported message pain.001.001.09"),
    ("pacs.008.001.٠٨", "not an ISO 20022 Document"),
])
def test_wrong_version_or_message(namespace: str, reason: str) -> None:
    e = refuse(sub("sepa_eur_ibans.xml", "pacs.008.001.08", namespace))
    assert e.field == "Document" and reason in e.reason


@pytest.mark.parametrize("xml", [
    b"<Document/>",
    b'<Document xmlns="urn:example:not-iso"/>',
    b'<Envelope><Other xmlns="urn:x"/></Envelope>',
    b'<html><body/></html>',
])
def test_not_an_iso_20022_document(xml: bytes) -> None:
    e = refuse(xml)
    assert e.field == "Document"
    assert "not an ISO 20022 Document" in e.reason or "neither a Document nor an envelope" in e.reason


# --- refusals: mandatory elements ------------------------------------------------------------

@pytest.mark.parametrize(("element", "field"), [
    ("EndToEndId", f"{TX1}/PmtId/EndToEndId"),
    ("PmtId", f"{TX1}/PmtId"),
    ("IntrBkSttlmAmt", f"{TX1}/IntrBkSttlmAmt"),
    ("ChrgBr", f"{TX1}/ChrgBr"),
    ("Dbtr", f"{TX1}/Dbtr"),
    ("Cdtr", f"{TX1}/Cdtr"),
    ("DbtrAgt", f"{TX1}/DbtrAgt"),
    ("CdtrAgt", f"{TX1}/CdtrAgt"),
    ("MsgId", "GrpHdr/MsgId"),
    ("NbOfTxs", "GrpHdr/NbOfTxs"),
    ("SttlmInf", "GrpHdr/SttlmInf"),
    ("GrpHdr", "GrpHdr"),
])
def test_missing_mandatory_element(element: str, field: str) -> None:
    e = refuse(drop("usd_cross_border_intermediary.xml", element))
    assert e.field == field and e.reason == f"{element} is missing (mandatory)"


def test_missing_settlement_date_here_and_in_the_group_header() -> None:
    e = refuse(drop("usd_cross_border_intermediary.xml", "IntrBkSttlmDt"))
    assert e.field == f"{TX1}/IntrBkSttlmDt" and "missing here and in GrpHdr" in e.reason


def test_missing_currency_attribute() -> None:
    e = refuse(sub("usd_cross_border_intermediary.xml", ' Ccy="USD"', ""))
    assert e.field == f"{TX1}/IntrBkSttlmAmt/@Ccy" and "missing" in e.reason


def test_no_transactions() -> None:
    e = refuse(drop("usd_cross_border_intermediary.xml", "CdtTrfTxInf"))
    assert e.field == "CdtTrfTxInf" and "at least one is mandatory" in e.reason


def test_agent_without_financial_institution_id() -> None:
    data = re.sub(rb"<DbtrAgt>.*?</DbtrAgt>", b"<DbtrAgt><BrnchId><Id>7</Id></BrnchId></DbtrAgt>",
                  read(V), flags=re.S)
    e = refuse(data)
    assert e.field == f"{TX1}/DbtrAgt/FinInstnId" and e.reason == "FinInstnId is missing (mandatory)"


def test_error_in_a_later_transaction_names_it() -> None:
    data = read("multiple_transactions.xml").replace(b">250.5<", b">250.555<")
    e = refuse(data)
    assert e.field == "CdtTrfTxInf[3]/IntrBkSttlmAmt" and "more decimals than EUR allows (2)" in e.reason


# --- refusals: values ------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "field", "reason"), [
    ('Ccy="USD">25000.00', 'Ccy="ABC">25000.00', f"{TX1}/IntrBkSttlmAmt/@Ccy", "not an ISO 4217 code"),
    ('Ccy="USD">25000.00', 'Ccy="usd">25000.00', f"{TX1}/IntrBkSttlmAmt/@Ccy", "not three capital"),
    ('Ccy="USD">25000.00', 'Ccy="XAU">25000.00', f"{TX1}/IntrBkSttlmAmt/@Ccy", "has no minor unit"),
    (">25000.00<", ">100.001<", f"{TX1}/IntrBkSttlmAmt", "more decimals than USD allows (2)"),
    (">25000.00<", ">25000,00<", f"{TX1}/IntrBkSttlmAmt", "uses ','"),
    (">25000.00<", ">25,000.00<", f"{TX1}/IntrBkSttlmAmt", "uses ','"),
    (">25000.00<", ">-5.00<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number"),
    (">25000.00<", ">0.00<", f"{TX1}/IntrBkSttlmAmt", "must be positive"),
    (">25000.00<", ">1e3<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number"),
    (">2025-03-14<", ">2025-02-30<", f"{TX1}/IntrBkSttlmDt", "is not YYYY-MM-DD"),
    (">2025-03-14<", ">20250314<", f"{TX1}/IntrBkSttlmDt", "is not YYYY-MM-DD"),
    (">2025-03-14<", ">14.03.2025<", f"{TX1}/IntrBkSttlmDt", "is not YYYY-MM-DD"),
    ("<BICFI>BOFAUS3N", "<BICFI>BOFAZZ3N", f"{TX1}/CdtrAgt/FinInstnId/BICFI", "BIC 'BOFAZZ3N' is invalid"),
    ("<BICFI>NWBKGB2L", "<BICFI>NWBK", f"{TX1}/InstgAgt/FinInstnId/BICFI", "BIC 'NWBK' is invalid"),
    ("<Ctry>US", "<Ctry>XX", f"{TX1}/Cdtr/PstlAdr/Ctry", "country 'XX' is not an ISO 3166-1"),
    ("<Ctry>GB", "<Ctry>gb", f"{TX1}/Dbtr/PstlAdr/Ctry", "country 'gb' is not an ISO 3166-1"),
    ("8a562c67-ca16-48ba", "8A562C67-CA16-48BA", f"{TX1}/PmtId/UETR", "not a lower-case version 4 UUID"),
    ("-48ba-", "-18ba-", f"{TX1}/PmtId/UETR", "not a lower-case version 4 UUID"),
    ("GB29NWBK60161331926819", "GB29NWBK60161331926818", f"{TX1}/DbtrAcct/Id/IBAN", "invalid"),
    ("<ChrgBr>DEBT", "<ChrgBr>OUR", f"{TX1}/ChrgBr", "'OUR' is not one of"),
    ("<SttlmMtd>INDA", "<SttlmMtd>WIRE", "GrpHdr/SttlmInf/SttlmMtd", "'WIRE' is not one of"),
    ("<NbOfTxs>1", "<NbOfTxs>2", "GrpHdr/NbOfTxs", "'2' but the message holds 1"),
    ("<NbOfTxs>1", "<NbOfTxs>١", "GrpHdr/NbOfTxs", "'١' but the message holds 1"),
    (">25000.00<", ">٢٥٠٠٠.٠٠<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number (ASCII digits)"),
    (">25000.00<", ">２５０００<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number (ASCII digits)"),
    (">2025-03-14<", ">٢٠٢٥-03-14<", f"{TX1}/IntrBkSttlmDt", "is not YYYY-MM-DD"),
    ("<EndToEndId>INV-2025-0042", "<EndToEndId>" + "E" * 36, f"{TX1}/PmtId/EndToEndId",
     "36 characters; at most 35"),
    ("<Nm>Harbour Freight Forwarding Ltd</Nm>", "<Nm> </Nm>", f"{TX1}/Dbtr/Nm", "must hold text"),
    ("<Nm>Harbour Freight Forwarding Ltd</Nm>", "<Nm><b>x</b></Nm>", f"{TX1}/Dbtr/Nm", "must hold text"),
    ("<BldgNb>12</BldgNb>", "<BldgNb>12</BldgNb><BldgNb>14</BldgNb>", f"{TX1}/Dbtr/PstlAdr/BldgNb",
     "appears twice"),
])
def test_bad_value(old: str, new: str, field: str, reason: str) -> None:
    e = refuse(sub(V, old, new))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


def test_duplicate_amount_is_refused_not_first_or_last_wins() -> None:
    e = refuse(sub(V, "<IntrBkSttlmDt>", '<IntrBkSttlmAmt Ccy="USD">1.00</IntrBkSttlmAmt><IntrBkSttlmDt>'))
    assert e.field == f"{TX1}/IntrBkSttlmAmt" and "appears 2 times; at most once" in e.reason


def test_leading_zeros_in_the_transaction_count_are_fine() -> None:
    assert len(parse_pacs008(sub(V, "<NbOfTxs>1<", "<NbOfTxs>001<"))) == 1


def test_bad_control_sum() -> None:
    e = refuse(read("multiple_transactions.xml").replace(b"3750.50", b"3750.51"))
    assert e.field == "GrpHdr/CtrlSum" and "not the sum" in e.reason


def test_bad_exchange_rate_and_instructed_amount() -> None:
    f = "fx_uetr_instructed_amount.xml"
    e = refuse(sub(f, ">1.0850<", ">1,0850<"))
    assert e.field == f"{TX1}/XchgRate" and "exchange rate" in e.reason
    e = refuse(sub(f, ">1.0850<", ">0<"))
    assert e.field == f"{TX1}/XchgRate" and "exchange rate" in e.reason
    e = refuse(sub(f, 'Ccy="EUR">10000.00', 'Ccy="EUR">10000.001'))
    assert e.field == f"{TX1}/InstdAmt" and "more decimals than EUR allows" in e.reason


@pytest.mark.parametrize(("old", "new", "field", "reason"), [
    ("<BirthDt>1979-02-28", "<BirthDt>1979-02-29", f"{TX1}/Dbtr/Id/PrvtId/DtAndPlcOfBirth/BirthDt",
     "not YYYY-MM-DD"),
    ("<CtryOfBirth>HK", "<CtryOfBirth>QQ", f"{TX1}/Dbtr/Id/PrvtId/DtAndPlcOfBirth/CtryOfBirth",
     "not an ISO 3166-1"),
    ("<CityOfBirth>Kowloon</CityOfBirth>", "", f"{TX1}/Dbtr/Id/PrvtId/DtAndPlcOfBirth/CityOfBirth",
     "missing"),
    ("<Cd>CCPT</Cd>", "<Cd>pass</Cd>", f"{TX1}/Dbtr/Id/PrvtId/Othr[2]/SchmeNm/Cd", "not 1-4 capitals"),
    ("<Id>K01234567</Id>", "", f"{TX1}/Dbtr/Id/PrvtId/Othr[2]/Id", "missing"),
    ("<CtryOfRes>HK", "<CtryOfRes>HKG", f"{TX1}/Dbtr/CtryOfRes", "at most 2"),
    ("<PrvtId>\n            <Othr>", "<OrgId/><PrvtId><Othr>", f"{TX1}/Cdtr/Id", "exactly one of PrvtId"),
])
def test_bad_private_identification(old: str, new: str, field: str, reason: str) -> None:
    e = refuse(sub("private_person_birth.xml", old, new))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


@pytest.mark.parametrize(("old", "new", "field", "reason"), [
    ("529900T8BM49AURSDO55", "529900T8BM49AURSDO56", f"{TX1}/Dbtr/Id/OrgId/LEI", "check digits"),
    ("7LTWFZYICNSX8D621K86", "7LTWFZYICNSX8D621K8", f"{TX1}/Cdtr/Id/OrgId/LEI", "format"),
    ("<AnyBIC>NWCCUS33", "<AnyBIC>NWCC1S33", f"{TX1}/Dbtr/Id/OrgId/AnyBIC", "is invalid"),
])
def test_bad_organisation_identification(old: str, new: str, field: str, reason: str) -> None:
    e = refuse(sub("organisation_lei_bic.xml", old, new))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


def test_mangled_input_is_always_a_message_error() -> None:
    """Cut short, a NUL byte put in, or the start cut off: always refused with a MessageError
    (never a raw ParseError or ValueError, never a partial parse)."""
    data = read(V)
    for cut in range(1, len(data) - 20, 97):
        for mangled in (data[:cut], data[:cut] + b"\x00" + data[cut + 1:], data[cut:]):
            with pytest.raises(MessageError):
                parse_pacs008(mangled)


@pytest.mark.parametrize("char", ["&#x9;", "&#xA;", "&#xD;", "\t", "\x7f", "\x85", "\x9b"])
def test_a_control_character_in_a_name_is_refused_naming_the_element(char: str) -> None:
    """As the JSON and SWIFT parsers refuse them: a tab, line break, DEL or C1 code (an ANSI
    escape introducer, U+009B) inside a name reaches no record, however the XML spells it."""
    e = refuse(sub("sepa_eur_ibans.xml", "Müller Werkzeugbau", f"Müller{char}Werkzeugbau"))
    assert e.field.endswith("/Nm") and "control character" in e.reason


def test_a_control_character_in_remittance_is_refused() -> None:
    data = read("sepa_eur_ibans.xml").decode()
    start = data.index("<Ustrd>") + len("<Ustrd>")
    e = refuse((data[:start] + "x&#xA;y " + data[start:]).encode())
    assert e.field.endswith("/Ustrd") and "U+000A" in e.reason
