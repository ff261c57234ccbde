"""pacs.008: the sample vectors map field by field; every refusal names the element and why."""

from __future__ import annotations

import hashlib
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from inference.messages.errors import MessageError
from inference.messages.pacs008 import MAX_XML_BYTES, parse_pacs008
from inference.messages.transaction import R16, Agent, Identifier, Party

VEC = Path(__file__).parents[2] / "vectors" / "messages" / "pacs008"
VECTORS = sorted(p.name for p in VEC.glob("*.xml"))
NS8 = b"urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08"
TX1 = "CdtTrfTxInf[1]"
V = "usd_cross_border_intermediary.xml"


def read(name: str) -> bytes:
    return (VEC / name).read_bytes()


def refuse(data: bytes) -> MessageError:
    with pytest.raises(MessageError) as info:
        parse_pacs008(data)
    return info.value


def sub(name: str, old: str, new: str, count: int = 1) -> bytes:
    data = read(name).decode()
    assert data.count(old) >= count, old
    return data.replace(old, new, count).encode()


def drop(name: str, element: str) -> bytes:
    """The vector without its first ``element`` (and everything inside it)."""
    data = read(name).decode()
    out, n = re.subn(rf"\s*<{element}( [^>]*)?>.*?</{element}>", "", data, count=1, flags=re.S)
    assert n == 1, element
    return out.encode()


# --- the vectors, field by field ---------------------------------------------------------------

def test_usd_cross_border_with_intermediary_and_structured_addresses() -> None:
    data = read("usd_cross_border_intermediary.xml")
    (t,) = parse_pacs008(data)
    assert t.message_type == "pacs.008.001.09"
    assert (t.reference, t.related_reference) == ("INV-2025-0042", "NWB-INSTR-778812")
    assert t.uetr == "8a562c67-ca16-48ba-b074-65581be6f011"
    assert (t.amount, t.currency, t.value_date) == (Decimal("25000.00"), "USD", date(2025, 3, 14))
    assert str(t.amount) == "25000.00"
    assert (t.instructed_amount, t.instructed_currency, t.exchange_rate) == (None, None, None)
    assert t.charges == "DEBT" and t.bank_operation_code is None and t.sender_to_receiver is None
    assert t.originator == Party(
        name="Harbour Freight Forwarding Ltd", account="GB29NWBK60161331926819",
        iban="GB29NWBK60161331926819", address_lines=("Quayside Road 12", "SO14 3QN Southampton"),
        country="GB")
    assert t.beneficiary == Party(
        name="Lakeside Machine Tools Inc", account="4471002299", iban=None,
        address_lines=("West Wacker Drive 233", "60606 Chicago", "IL"), country="US")
    assert t.agents == (
        Agent("instructing", bic="NWBKGB2L"), Agent("instructed", bic="CHASUS33"),
        Agent("debtor_agent", bic="NWBKGB2L"),
        Agent("intermediary", bic="CHASUS33", account="0011223344"),
        Agent("creditor_agent", bic="BOFAUS3N"),
    )
    assert t.remittance == "INVOICE 2025-0042 SPARE PARTS"
    assert t.r16 == R16(True, True, True, True, True) and t.r16.complete
    assert t.raw_sha256 == hashlib.sha256(data).hexdigest()


def test_sepa_eur_with_ibans_and_unstructured_address() -> None:
    (t,) = parse_pacs008(read("sepa_eur_ibans.xml"))
    assert t.message_type == "pacs.008.001.08"
    assert (t.reference, t.related_reference, t.uetr) == ("RECHNUNG-48213", "SCT-2025-0602-17", None)
    assert (t.amount, t.currency, t.value_date) == (Decimal("1814.28"), "EUR", date(2025, 6, 2))
    assert t.value_date == date(2025, 6, 2)  # from GrpHdr: the transaction gives none
    assert t.originator.name == "Müller Werkzeugbau GmbH"
    assert t.originator.address_lines == ("Industriestraße 7", "70565 Stuttgart")
    assert (t.originator.iban, t.originator.country) == ("DE89370400440532013000", "DE")
    assert (t.beneficiary.iban, t.beneficiary.country) == ("FR1420041010050500013M02606", "FR")
    assert [(a.role, a.bic) for a in t.agents] == [("debtor_agent", "COBADEFFXXX"),
                                                   ("creditor_agent", "BNPAFRPP")]
    assert t.remittance == "Rechnung 48213 vom 20.05.2025\nKundennr. 10-7781"
    assert t.charges == "SLEV" and t.r16.complete


def test_jpy_has_no_decimals_and_group_header_defaults_apply() -> None:
    (t,) = parse_pacs008(read("jpy_zero_decimals.xml"))
    assert t.message_type == "pacs.008.001.10"
    assert (str(t.amount), t.currency, t.value_date) == ("1500000", "JPY", date(2025, 9, 1))
    assert [(a.role, a.bic) for a in t.agents] == [
        ("instructing", "MHCBJPJT"), ("instructed", "SMBCJPJT"),
        ("debtor_agent", "MHCBJPJT"), ("creditor_agent", "SMBCJPJT")]
    assert t.originator.address_lines == ("Marunouchi 1-6-5", "100-0005 Tokyo")
    assert (t.originator.account, t.originator.iban) == ("1234567", None)


def test_jpy_refuses_a_decimal_part() -> None:
    e = refuse(sub("jpy_zero_decimals.xml", ">1500000<", ">1500000.5<"))
    assert e.field == f"{TX1}/IntrBkSttlmAmt" and "more decimals than JPY allows (0)" in e.reason


def test_bhd_keeps_three_decimals_and_an_iban_given_as_other_id_is_recognised() -> None:
    (t,) = parse_pacs008(read("bhd_three_decimals.xml"))
    assert (str(t.amount), t.currency) == ("1234.567", "BHD")
    assert t.originator.address_lines == ("2451", "Manama")
    assert (t.beneficiary.account, t.beneficiary.iban) == ("BH02CITI00001077181611",
                                                           "BH02CITI00001077181611")


def test_several_transactions_in_one_message() -> None:
    data = read("multiple_transactions.xml")
    ts = parse_pacs008(data)
    assert [t.reference for t in ts] == ["SAL-2025-07-001", "SAL-2025-07-002", "SAL-2025-07-003"]
    assert [str(t.amount) for t in ts] == ["2500.00", "1000.00", "250.50"]
    assert [t.value_date for t in ts] == [date(2025, 7, 15), date(2025, 7, 15), date(2025, 7, 16)]
    assert [t.beneficiary.iban for t in ts] == ["DE89370400440532013000", "BE68539007547034",
                                                "CH9300762011623852957"]
    assert {t.raw_sha256 for t in ts} == {hashlib.sha256(data).hexdigest()}
    assert len({t.sha256 for t in ts}) == 3
    # the debtor's address is given once only: R.16 sees it on the first transaction alone
    assert [t.r16.originator_address_or_id for t in ts] == [True, False, False]


def test_private_person_date_and_place_of_birth_and_other_ids() -> None:
    (t,) = parse_pacs008(read("private_person_birth.xml"))
    assert t.reference == "NOTPROVIDED" and t.related_reference == "HK-INSTR-5521"
    assert t.originator.identifiers == (
        Identifier("DOB", "1979-02-28"), Identifier("POB", "Kowloon, HK", "HK"),
        Identifier("NIDN", "A1234563"), Identifier("CCPT", "K01234567"))
    assert t.originator.country == "HK"  # CtryOfRes, no postal address
    assert t.originator.address_lines == ()
    assert t.r16.originator_address_or_id  # identified without an address
    assert t.beneficiary.identifiers == (Identifier("OTHR", "CUST-88213"),)  # proprietary scheme
    assert t.charges == "CRED"


def test_organisation_with_bic_lei_tax_id_and_structured_remittance() -> None:
    (t,) = parse_pacs008(read("organisation_lei_bic.xml"))
    assert t.message_type == "pacs.008.001.11"
    assert t.uetr == "eb6305c9-1f7f-49de-aed0-16487c27b42d"
    o = t.originator
    assert o.bic == "NWCCUS33"
    assert o.identifiers == (Identifier("BIC", "NWCCUS33"), Identifier("LEI", "529900T8BM49AURSDO55"),
                             Identifier("TXID", "98-7654321"))
    assert o.address_lines == ("Treasury", "Park Avenue 399", "10022 New York", "NY", "Floor 12")
    assert t.beneficiary.identifiers == (Identifier("LEI", "7LTWFZYICNSX8D621K86"),)
    assert t.agents[0] == Agent("debtor_agent", bic="CITIUS33",
                                name_address=("Citibank N.A.", "New York", "US"))
    assert t.remittance == "RF18539007547034"


def test_missing_r16_fields_are_reported_not_refused() -> None:
    (t,) = parse_pacs008(read("missing_r16.xml"))
    assert t.r16 == R16(originator_name=True, originator_account=False, originator_address_or_id=False,
                        beneficiary_name=False, beneficiary_account=True)
    assert not t.r16.complete
    assert t.beneficiary == Party(account="000123987")


def test_instructed_amount_exchange_rate_and_agent_without_bic() -> None:
    (t,) = parse_pacs008(read("fx_uetr_instructed_amount.xml"))
    assert (str(t.amount), t.currency) == ("10850.00", "USD")
    assert (str(t.instructed_amount), t.instructed_currency) == ("10000.00", "EUR")
    assert t.exchange_rate == Decimal("1.0850")
    assert t.uetr == "3f2a8c1e-6b7d-4e9f-8a0b-1c2d3e4f5a6b"
    assert t.agents == (
        Agent("debtor_agent", bic="BNPAFRPP"), Agent("intermediary", bic="CITIUS33"),
        Agent("intermediary", name_address=("First Lakeshore Community Bank", "200 Harbor Street",
                                            "Milwaukee WI 53202")),
        Agent("creditor_agent", bic="BOFAUS3N", account="026009593"),
    )


def test_business_application_header_envelope() -> None:
    (t,) = parse_pacs008(read("with_app_header.xml"))
    assert (t.message_type, t.reference, str(t.amount)) == ("pacs.008.001.08", "APH-E2E-0001", "500.00")
    assert [a.role for a in t.agents] == ["instructing", "instructed", "debtor_agent", "creditor_agent"]


def test_header_naming_another_message_is_refused() -> None:
    e = refuse(sub("with_app_header.xml", "<MsgDefIdr>pacs.008.001.08<", "<MsgDefIdr>pacs.009.001.08<"))
    assert e.field == "AppHdr/MsgDefIdr" and "pacs.009.001.08" in e.reason


@pytest.mark.parametrize("name", VECTORS)
def test_every_vector_parses_and_hashes_its_bytes(name: str) -> None:
    data = read(name)
    ts = parse_pacs008(data)
    assert ts and all(t.raw_sha256 == hashlib.sha256(data).hexdigest() for t in ts)
    assert all(t.message_type.startswith("pacs.008.001.") for t in ts)


def test_bom_and_no_declaration_are_fine() -> None:
    data = read("sepa_eur_ibans.xml")
    body = data[data.index(b"?>") + 2:]
    assert parse_pacs008(b"\xef\xbb\xbf" + data)[0].reference == "RECHNUNG-48213"
    assert parse_pacs008(body)[0].reference == "RECHNUNG-48213"


def test_foreign_content_is_allowed_in_supplementary_data_only() -> None:
    extra = ("<SplmtryData><Envlp><x:Note xmlns:x='urn:example:bank'>ok</x:Note></Envlp></SplmtryData>"
             "</CdtTrfTxInf>")
    (t,) = parse_pacs008(sub("sepa_eur_ibans.xml", "</CdtTrfTxInf>", extra))
    assert t.reference == "RECHNUNG-48213"
    e = refuse(sub("sepa_eur_ibans.xml", "<ChrgBr>", "<x:Note xmlns:x='urn:example:bank'>x</x:Note><ChrgBr>"))
    assert e.field == "Note" and "not in the urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08" in e.reason


# --- refusals: the document ------------------------------------------------------------------

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
