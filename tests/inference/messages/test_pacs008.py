"""pacs.008: the sample vectors map field by field into the Transaction."""

from __future__ import annotations

import hashlib
from datetime import date
from decimal import Decimal

import pytest

from inference.messages.pacs008 import parse_pacs008
from inference.messages.transaction import R16, Agent, Identifier, Party
from tests.inference.messages.pacs008_samples import TX1, VECTORS, read, refuse, sub

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


@pytest.mark.requirement("BSA-1010.410f-travel", "FATF-R16-originator")
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


def test_header_naming_another_message_is_a_finding() -> None:
    (t,) = parse_pacs008(sub("with_app_header.xml", "<MsgDefIdr>pacs.008.001.08<",
                             "<MsgDefIdr>pacs.009.001.08<"))
    assert [(f.code, f.field) for f in t.findings] == [("APPHDR_VERSION_MISMATCH", "AppHdr/MsgDefIdr")]
    assert "pacs.009.001.08" in t.findings[0].detail


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
