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


@pytest.mark.parametrize(("where", "insert"), [
    ("<Document ", '<!-- a comment first --><!DOCTYPE Document [<!ENTITY x "y">]><Document '),
    ("<Document ", "<!doctype Document><Document "),  # any case: not XML, and never read without defusedxml
    ("<Document ", '<!DOCTYPE Document [<!-- --><!ENTITY x SYSTEM "file:///etc/passwd">]><Document '),
])
def test_a_declaration_anywhere_goes_through_defusedxml(where: str, insert: str) -> None:
    e = refuse(sub("sepa_eur_ibans.xml", where, insert))
    assert e.field == "Document"
    assert "forbidden" in e.reason or "not well-formed" in e.reason


def test_an_entity_reference_without_a_dtd_is_not_well_formed() -> None:
    e = refuse(sub("sepa_eur_ibans.xml", "<MsgId>", "<MsgId>&xxe;"))
    assert e.field == "Document" and "not well-formed" in e.reason and "undefined entity" in e.reason


def test_a_single_quoted_foreign_encoding_is_refused_before_any_parser() -> None:
    e = refuse(sub("sepa_eur_ibans.xml", 'encoding="UTF-8"', "encoding = 'cp037'"))
    assert "'cp037'; only UTF-8" in e.reason


def test_comments_and_cdata_alone_keep_the_message_readable() -> None:
    from inference.messages import Transaction, parse_messages

    data = sub("sepa_eur_ibans.xml", "<Document ", "<!-- exported 2026-12-04 --><Document ")
    data = data.replace(b"<MsgId>", b"<MsgId><![CDATA[]]>", 1)
    assert all(isinstance(t, Transaction) for t in parse_messages(data, "pacs008"))


@pytest.mark.parametrize(("namespace", "reason"), [
    ("pacs.009.001.08", "unsupported message pacs.009.001.08: pacs.008 is parsed here"),
    ("pacs.008.001.01", "pacs.008.001.01 is not supported (pacs.008.001.02 and later)"),
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
    ("PmtId", f"{TX1}/PmtId"),
    ("IntrBkSttlmAmt", f"{TX1}/IntrBkSttlmAmt"),
    ("Dbtr", f"{TX1}/Dbtr"),
    ("Cdtr", f"{TX1}/Cdtr"),
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
    (">25000.00<", ">٢٥٠٠٠.٠٠<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number (ASCII digits)"),
    (">25000.00<", ">２５０００<", f"{TX1}/IntrBkSttlmAmt", "not a decimal number (ASCII digits)"),
    (">2025-03-14<", ">٢٠٢٥-03-14<", f"{TX1}/IntrBkSttlmDt", "is not YYYY-MM-DD"),
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


def test_bad_control_sum_is_a_finding_on_every_transaction() -> None:
    ts = parse_pacs008(read("multiple_transactions.xml").replace(b"3750.50", b"3750.51"))
    assert all(("CTRL_SUM_MISMATCH", "GrpHdr/CtrlSum") in {(f.code, f.field) for f in t.findings} for t in ts)


@pytest.mark.parametrize("element", ["EndToEndId", "ChrgBr", "DbtrAgt", "CdtrAgt", "MsgId", "NbOfTxs"])
def test_a_missing_element_the_payment_reads_without_is_a_finding(element: str) -> None:
    (t,) = parse_pacs008(drop("usd_cross_border_intermediary.xml", element))
    assert [f.code for f in t.findings] == ["MANDATORY_FIELD_MISSING"]
    assert t.findings[0].field.endswith(element)


def test_no_settlement_information_is_a_finding() -> None:
    (t,) = parse_pacs008(drop("usd_cross_border_intermediary.xml", "SttlmInf"))
    assert [(f.code, f.field) for f in t.findings] == [("MISSING_SETTLEMENT_INFO", "GrpHdr/SttlmInf")]


@pytest.mark.parametrize(("name", "old", "new", "code", "field"), [
    (V, "<BICFI>BOFAUS3N", "<BICFI>BOFAZZ3N", "BIC_UNKNOWN_COUNTRY", f"{TX1}/CdtrAgt/FinInstnId/BICFI"),
    (V, "<BICFI>NWBKGB2L", "<BICFI>NWBK", "BIC_MALFORMED", f"{TX1}/InstgAgt/FinInstnId/BICFI"),
    (V, "<Ctry>US", "<Ctry>XX", "COUNTRY_UNKNOWN", f"{TX1}/Cdtr/PstlAdr/Ctry"),
    (V, "<Ctry>GB", "<Ctry>gb", "COUNTRY_UNKNOWN", f"{TX1}/Dbtr/PstlAdr/Ctry"),
    (V, "8a562c67-ca16-48ba", "8A562C67-CA16-48BA", "UETR_INVALID", f"{TX1}/PmtId/UETR"),
    (V, "-48ba-", "-18ba-", "UETR_INVALID", f"{TX1}/PmtId/UETR"),
    (V, "GB29NWBK60161331926819", "GB29NWBK60161331926818", "IBAN_CHECK_DIGITS", f"{TX1}/DbtrAcct/Id/IBAN"),
    (V, "<ChrgBr>DEBT", "<ChrgBr>OUR", "CODE_NOT_IN_LIST", f"{TX1}/ChrgBr"),
    (V, "<SttlmMtd>INDA", "<SttlmMtd>WIRE", "CODE_NOT_IN_LIST", "GrpHdr/SttlmInf/SttlmMtd"),
    (V, "<NbOfTxs>1", "<NbOfTxs>2", "NB_OF_TXS_MISMATCH", "GrpHdr/NbOfTxs"),
    (V, "<NbOfTxs>1", "<NbOfTxs>١", "NB_OF_TXS_MISMATCH", "GrpHdr/NbOfTxs"),
    (V, "<EndToEndId>INV-2025-0042", "<EndToEndId>EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "FIELD_TOO_LONG",
     f"{TX1}/PmtId/EndToEndId"),
    ("private_person_birth.xml", "<CtryOfBirth>HK", "<CtryOfBirth>QQ", "COUNTRY_UNKNOWN",
     f"{TX1}/Dbtr/Id/PrvtId/DtAndPlcOfBirth/CtryOfBirth"),
    ("private_person_birth.xml", "<Cd>CCPT</Cd>", "<Cd>pass</Cd>", "CODE_NOT_IN_LIST",
     f"{TX1}/Dbtr/Id/PrvtId/Othr[2]/SchmeNm/Cd"),
    ("private_person_birth.xml", "<CtryOfRes>HK", "<CtryOfRes>HKG", "FIELD_TOO_LONG",
     f"{TX1}/Dbtr/CtryOfRes"),
    ("organisation_lei_bic.xml", "529900T8BM49AURSDO55", "529900T8BM49AURSDO56", "LEI_CHECK_DIGITS",
     f"{TX1}/Dbtr/Id/OrgId/LEI"),
    ("organisation_lei_bic.xml", "7LTWFZYICNSX8D621K86", "7LTWFZYICNSX8D621K8", "LEI_CHECK_DIGITS",
     f"{TX1}/Cdtr/Id/OrgId/LEI"),
    ("organisation_lei_bic.xml", "<AnyBIC>NWCCUS33", "<AnyBIC>NWCC1S33", "BIC_MALFORMED",
     f"{TX1}/Dbtr/Id/OrgId/AnyBIC"),
])
def test_a_flawed_value_of_a_readable_payment_is_a_finding(name: str, old: str, new: str, code: str,
                                                           field: str) -> None:
    """Read liberally: the payment is decided, the flaw named where it is (and in the hash)."""
    clean = parse_pacs008(read(name))
    flawed = parse_pacs008(sub(name, old, new))
    assert (code, field) in {(f.code, f.field) for f in flawed[0].findings}, flawed[0].findings
    assert not clean[0].findings and flawed[0].sha256 != clean[0].sha256
    assert flawed[0].amount == clean[0].amount


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
    ("<CityOfBirth>Kowloon</CityOfBirth>", "", f"{TX1}/Dbtr/Id/PrvtId/DtAndPlcOfBirth/CityOfBirth",
     "missing"),
    ("<Id>K01234567</Id>", "", f"{TX1}/Dbtr/Id/PrvtId/Othr[2]/Id", "missing"),
    ("<PrvtId>\n            <Othr>", "<OrgId/><PrvtId><Othr>", f"{TX1}/Cdtr/Id", "exactly one of PrvtId"),
])
def test_bad_private_identification(old: str, new: str, field: str, reason: str) -> None:
    e = refuse(sub("private_person_birth.xml", old, new))
    assert e.field == field and reason in e.reason, (e.field, e.reason)


def test_mangled_input_is_always_a_message_error() -> None:
    """Cut short, a NUL byte put in, or the start cut off: always refused with a MessageError
    (never a raw ParseError or ValueError, never a partial parse)."""
    data = read(V)
    for cut in range(1, len(data) - 20, 97):
        for mangled in (data[:cut], data[:cut] + b"\x00" + data[cut + 1:], data[cut:]):
            with pytest.raises(MessageError):
                parse_pacs008(mangled)


@pytest.mark.parametrize("char", ["\x7f", "\x85", "\x9b", "&#x9B;"])
def test_a_control_character_in_a_name_is_refused_naming_the_element(char: str) -> None:
    """As the JSON and SWIFT parsers refuse them: a tab, line break, DEL or C1 code (an ANSI
    escape introducer, U+009B) inside a name reaches no record, however the XML spells it."""
    e = refuse(sub("sepa_eur_ibans.xml", "Müller Werkzeugbau", f"Müller{char}Werkzeugbau"))
    assert e.field.endswith("/Nm") and "control character" in e.reason


@pytest.mark.parametrize("char", ["&#x9;", "&#xA;", "&#xD;", "\t"])
def test_a_line_break_or_tab_in_a_name_is_read_as_a_space_and_named(char: str) -> None:
    """Pretty-printed XML wraps long names: the break never reaches a record, the name reads with one
    space, and the layout finding says so."""
    (t,) = parse_pacs008(sub("sepa_eur_ibans.xml", "Müller Werkzeugbau", f"Müller{char}Werkzeugbau"))
    assert t.originator.name is not None and "Müller Werkzeugbau" in t.originator.name
    assert "LAYOUT" in {f.code for f in t.findings}


def test_a_control_character_in_remittance_is_refused() -> None:
    data = read("sepa_eur_ibans.xml").decode()
    start = data.index("<Ustrd>") + len("<Ustrd>")
    e = refuse((data[:start] + "x&#x85;y " + data[start:]).encode())
    assert e.field.endswith("/Ustrd") and "U+0085" in e.reason
