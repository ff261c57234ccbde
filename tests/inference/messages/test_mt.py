"""SWIFT FIN parsing: field variants from the public MT103/MT202/MT202COV specifications,
round trips to canonical JSON, and every kind of malformed input refused with its field."""

from __future__ import annotations

import hashlib
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from inference.messages import MessageError, Transaction, parse_messages
from inference.messages.mt import MAX_MESSAGE_BYTES, parse_mt

VEC = Path(__file__).parents[2] / "vectors" / "messages" / "mt"


def one(data: bytes) -> Transaction:
    (r,) = list(parse_mt(data))
    assert isinstance(r, Transaction), str(r)
    return r


def refused(data: bytes) -> MessageError:
    (r,) = list(parse_mt(data))
    assert isinstance(r, MessageError), f"accepted: {r}"
    return r


BASE = (VEC / "mt103_jpy_33b.fin").read_bytes()
SIMPLE = b"""{1:F01BANKBEBBAXXX0000000000}{2:I103BANKDEFFXXXXN}{4:
:20:REF123
:23B:CRED
:32A:260115EUR1814,28
:50K:/DE89370400440532013000
JOHN DOE
MAIN STREET 1
:59:/GB33BUKB20201555555555
JANE SMITH
:71A:SHA
-}"""


def test_mt103_50k_59_with_fx_and_uetr() -> None:
    t = one(BASE)
    assert (t.message_type, t.reference, t.bank_operation_code) == ("MT103", "JP-77", "SSTD")
    assert (t.amount, t.currency, t.value_date) == (Decimal("1500000"), "JPY", date(2026, 11, 30))
    assert (t.instructed_amount, t.instructed_currency) == (Decimal("9250.00"), "EUR")
    assert t.exchange_rate == Decimal("162.16216")
    assert t.uetr == "00a1b2c3-d4e5-4f60-8a7b-8c9d0e1f2a3b"
    assert t.originator.name == "YAMADA TARO" and t.originator.account == "1234567"
    assert t.originator.address_lines == ("1-2-3 MARUNOUCHI", "CHIYODA-KU TOKYO")
    assert t.originator.iban is None
    assert t.beneficiary.iban == "DE89370400440532013000"
    assert [a.role for a in t.agents] == ["sender", "receiver", "ordering_institution"]
    # an output message: block 1 names the receiver, the MIR in block 2 the sender
    assert (t.agents[0].bic, t.agents[1].bic) == ("DEUTDEFFXXX", "MHCBJPJTXXX")
    assert t.agents[2].name_address == ("MIZUHO BANK LTD", "TOKYO")
    assert (t.remittance, t.charges, t.sender_to_receiver) == ("SALARY NOVEMBER", "SHA", "/ACC/INSTANT")
    assert t.raw_sha256 == hashlib.sha256(BASE.strip()).hexdigest()  # the message, not the file's \n
    assert t.r16.complete


def test_mt103_50f_structured_with_birth_date_and_place() -> None:
    t = one((VEC / "mt103_50f_dob.fin").read_bytes())
    o = t.originator
    assert o.name == "MUELLER HANS PETER" and o.country == "DE" and o.address_lines == ("BERLIN",)
    assert [(i.scheme, i.value) for i in o.identifiers] == [("DOB", "1965-04-23"), ("POB", "HAMBURG, DE")]
    assert t.beneficiary.name == "ACME TRADING LLC" and t.beneficiary.country == "US"
    assert t.amount == Decimal("25000.00") and t.currency == "USD"
    assert [a.role for a in t.agents][2:] == ["ordering_institution", "intermediary", "account_with"]
    assert t.remittance == "/RFB/INV-2026-991\nPO 77812"
    assert t.r16.complete


def test_mt103_50f_national_identifier_without_account() -> None:
    t = one((VEC / "mt103_50f_nidn.fin").read_bytes())
    assert [(i.scheme, i.value, i.country) for i in t.originator.identifiers] == [
        ("NIDN", "T22000129", "DE")]
    assert t.r16.originator_address_or_id and not t.r16.originator_account


def test_mt103_50a_59a_bic_identified_parties() -> None:
    t = one((VEC / "mt103_50a_59a.fin").read_bytes())
    assert t.originator.bic == "BNPAFRPP" and t.originator.name is None
    assert t.originator.iban == "FR7630006000011234567890189"
    assert t.beneficiary.bic == "UBSWCHZH80A" and t.beneficiary.iban == "CH9300762011623852957"
    assert not t.r16.originator_name and not t.r16.beneficiary_name  # a BIC is not a name
    assert t.amount == Decimal("100000.00") and t.charges == "BEN"


def test_mt202_bank_to_bank() -> None:
    t = one((VEC / "mt202.fin").read_bytes())
    assert (t.message_type, t.reference, t.related_reference) == ("MT202", "FI-TRF-001", "RELREF-99")
    assert t.originator.bic == "DEUTDEFF" and t.beneficiary.bic == "CITIUS33"
    assert t.beneficiary.account == "US33000012345"
    assert [a.role for a in t.agents][-1] == "beneficiary_institution"


def test_mt202cov_reads_the_underlying_customers() -> None:
    t = one((VEC / "mt202cov.fin").read_bytes())
    assert t.message_type == "MT202COV" and t.related_reference == "UNDERLYING-12"
    assert t.originator.name == "SMITH JOHN" and t.beneficiary.name == "JONES MARY"
    assert t.beneficiary.iban == "US64SVBKUS6S3300958879" or t.beneficiary.iban is None
    assert (t.instructed_amount, t.instructed_currency) == (Decimal("10000.00"), "GBP")
    assert t.remittance == "INVOICE 12" and t.r16.complete
    missing_b = (VEC / "mt202cov.fin").read_bytes().split(b":50K:")[0] + b"-}"
    assert refused(missing_b).field == ":50a:"


def test_rje_file_with_two_messages_and_crlf() -> None:
    data = (VEC / "rje_two.fin").read_bytes().replace(b"\n", b"\r\n")
    results = parse_messages(data)
    assert [r.message_type for r in results if isinstance(r, Transaction)] == ["MT103", "MT202"]
    bad = data.replace(b"CHF100000,00", b"CHF100000.00")
    results = parse_messages(bad)
    assert isinstance(results[0], MessageError) and isinstance(results[1], Transaction)
    assert str(results[0]).startswith("message 1 (MT103) :32A: amount '100000.00' uses '.'")


def test_canonical_json_is_stable_and_exact() -> None:
    t = one(SIMPLE)
    doc = t.to_json()
    assert doc["amount"] == "1814.28" and doc["value_date"] == "2026-01-15"
    assert doc["schema"] == "sealtrail.transaction/2"
    assert t.canonical_bytes().startswith(b'{"agents":[')
    assert one(SIMPLE).sha256 == t.sha256
    assert one(SIMPLE.replace(b"REF123", b"REF124")).sha256 != t.sha256


@pytest.mark.parametrize("currency, text, value", [
    ("JPY", "1500000,", "1500000"), ("USD", "0,5", "0.50"), ("BHD", "12,345", "12.345"),
    ("EUR", "1000,", "1000.00"), ("KWD", "1,1", "1.100"), ("EUR", "100,10", "100.10"),
])
def test_minor_units(currency: str, text: str, value: str) -> None:
    t = one(SIMPLE.replace(b"EUR1814,28", f"{currency}{text}".encode()))
    assert format(t.amount, "f") == value


@pytest.mark.parametrize("edit, field, reason", [
    ((b"EUR1814,28", b"EUR1814.28"), ":32A:", "uses '.' where SWIFT requires ','"),
    ((b"EUR1814,28", b"EUR1814,285"), ":32A:", "more decimals than EUR allows (2)"),
    ((b"EUR1814,28", b"JPY1814,5"), ":32A:", "more decimals than JPY allows (0)"),
    ((b"EUR1814,28", b"XYZ1814,28"), ":32A:", "not an ISO 4217 code"),
    ((b"EUR1814,28", b"EUR0,00"), ":32A:", "must be positive"),
    ((b"EUR1814,28", b"EUR1814"), ":32A:", "not a decimal number"),
    ((b"260115EUR", b"261315EUR"), ":32A:", "not a calendar date"),
    ((b"260115EUR", b"2601EUR"), ":32A:", "not YYMMDD"),
    ((b":59:/GB33BUKB20201555555555\nJANE SMITH\n", b""), ":59a:", "mandatory in MT103 and missing"),
    ((b":50K:/", b":50Z:/"), ":50Z:", "option Z is not allowed"),
    ((b"I103", b"I101"), "block 2", "MT101 is not supported"),
    ((b"I103", b"I999"), "block 2", "MT999 is not supported"),
    ((b"{1:F01BANKBEBB", b"{1:BANKBEBB"), "block 1", "malformed"),
    ((b"\n-}", b"\n"), "block 4", "truncated"),
    ((b"{2:I103BANKDEFFXXXXN}", b""), "block 2", "missing"),
    ((b"{4:\n:20:", b"{4:\nREF\n:20:"), "block 4", "does not start with a field tag"),
])
def test_malformed_messages_name_field_and_reason(edit: tuple[bytes, bytes], field: str, reason: str) -> None:
    old, new = edit
    assert old in SIMPLE
    err = refused(SIMPLE.replace(old, new, 1))
    assert err.field == field and reason in err.reason, str(err)
    assert str(err).startswith("message 1")

@pytest.mark.parametrize("edit, code, field", [
    ((b":71A:SHA", b":71A:ALL"), "CODE_NOT_IN_LIST", ":71A:"),
    ((b":23B:CRED", b":23B:XXXX"), "CODE_NOT_IN_LIST", ":23B:"),
    ((b":20:REF123", b":20:/REF123"), "REFERENCE_FORMAT", ":20:"),
    ((b":20:REF123", b":20:REF123456789012345"), "REFERENCE_FORMAT", ":20:"),
    ((b":71A:SHA\n", b""), "MANDATORY_FIELD_MISSING", ":71A:"),
    ((b"JOHN DOE", b"JOHN D\xc3\x96E"), "NON_X_CHARACTER", "block 4"),
    ((b"JOHN DOE", b"JOHN_DOE"), "NON_X_CHARACTER", "block 4"),
    ((b"MAIN STREET 1", b"M" * 36), "LINE_TOO_LONG", ":50K:"),
    ((b"I103BANKDEFFXXXXN", b"I103BANKXXFFXXXXN"), "BIC_UNKNOWN_COUNTRY", "block 2"),
    ((b"{4:", b"{3:{121:not-a-uuid}}{4:"), "UETR_INVALID", "block 3 {121:}"),
    ((b":59:/GB33", b":57A:ABCDXX22\n:59:/GB33"), "BIC_UNKNOWN_COUNTRY", ":57A:"),
    ((b":59:/GB33BUKB20201555555555", b":59:/GB33BUKB20201555555556"), "IBAN_CHECK_DIGITS", ":59:"),
    ((b":23B:CRED\n", b":23B:CRED\n:26T:K90\n:99X:WHAT\n"), "FIELD_NOT_IN_MESSAGE", ":99X:"),
])
def test_defects_of_a_readable_payment_are_findings(edit: tuple[bytes, bytes], code: str, field: str) -> None:
    """Read liberally, decided strictly: the payment is read, the defect named as a finding in its
    canonical form (and so in its hash)."""
    assert edit[0] in SIMPLE
    t = one(SIMPLE.replace(*edit))
    assert (code, field) in {(f.code, f.field) for f in t.findings}, t.findings
    assert t.amount == one(SIMPLE).amount and t.currency == "EUR"
    assert t.to_json()["findings"][0]["code"] in {f.code for f in t.findings}
    assert t.sha256 != one(SIMPLE).sha256
    assert not one(SIMPLE).findings



def test_50f_structured_line_errors() -> None:
    base = (VEC / "mt103_50f_dob.fin").read_bytes()
    for old, new, reason in [
        (b"4/19650423", b"4/19651323", "date of birth"),
        (b"1/MUELLER", b"X/MUELLER", "must start with a digit"),
        (b"5/DE/HAMBURG", b"9/DE/HAMBURG", "code 9 is not defined"),
        (b"/DE44500105175407324931\n1/", b"FOO/DE/123\n1/", "neither /account"),
    ]:
        err = refused(base.replace(old, new))
        assert err.field == ":50F:" and reason in err.reason, str(err)
    t = one(base.replace(b"3/DE/BERLIN", b"3/XX/BERLIN"))  # a country that is none: dropped, named
    assert t.originator.country is None
    assert [(f.code, f.field) for f in t.findings] == [("COUNTRY_UNKNOWN", ":50F:")]


def test_oversize_truncated_and_undecodable_input() -> None:
    big = SIMPLE.replace(b":71A:SHA", b":70:" + b"A" * MAX_MESSAGE_BYTES + b"\n:71A:SHA")
    assert "more than" in refused(big).reason
    assert refused(SIMPLE[:120]).field == "block 4"
    assert "UTF-8" in refused(SIMPLE.replace(b"JOHN", b"JO\xffN")).reason
    assert "outside the blocks" in refused(b"garbage " + SIMPLE).reason


def test_input_and_output_headers_name_sender_and_receiver() -> None:
    sent = one(SIMPLE)
    assert [(a.role, a.bic) for a in sent.agents] == [("sender", "BANKBEBBXXX"),
                                                      ("receiver", "BANKDEFFXXX")]
    delivered = SIMPLE.replace(b"{2:I103BANKDEFFXXXXN}",
                               b"{2:O1031200260115DEUTDEFFAXXX00000000002601151200N}")
    assert [(a.role, a.bic) for a in one(delivered).agents] == [("sender", "DEUTDEFFXXX"),
                                                                ("receiver", "BANKBEBBXXX")]


def test_exchange_rates_are_normalised_so_equal_payments_hash_equal() -> None:
    with_rate = SIMPLE.replace(b":71A:SHA", b":36:0,90\n:71A:SHA")
    a, b = one(with_rate), one(with_rate.replace(b"0,90", b"0,9"))
    assert a.exchange_rate == Decimal("0.9") and str(a.exchange_rate) == "0.9"
    assert a.to_json() | {"raw_sha256": ""} == b.to_json() | {"raw_sha256": ""}
    for bad in (b"0,", b"1.5", b"0,0", b"1234567890123,5"):
        assert refused(with_rate.replace(b"0,90", bad)).field == ":36:"


@pytest.mark.parametrize("name", sorted(p.name for p in VEC.glob("*.fin")))
def test_round_trip_through_the_json_form(name: str) -> None:
    import orjson

    from inference.messages.json_message import parse_json

    for t in parse_mt((VEC / name).read_bytes()):
        assert isinstance(t, Transaction)
        (back,) = parse_json(orjson.dumps(t.to_json()))
        ignore = {"message_type": "", "raw_sha256": ""}
        assert back.to_json() | ignore == t.to_json() | ignore


def test_every_agent_option() -> None:
    """53B (location), 54A, 55D, 56C (account only), 57B/57D in one message."""
    agents = (b":53B:/DE44500105175407324931\nFRANKFURT\n:54A:CHASUS33\n"
              b":55D:THIRD REIMBURSEMENT BANK\nZURICH\n:56C://FW021000018\n"
              b":57D:/12345\nACCOUNT WITH BANK\nMAIN ROAD 5\n")
    t = one(SIMPLE.replace(b":59:", agents + b":59:"))
    got = {a.role: a for a in t.agents}
    assert got["senders_correspondent"].account == "DE44500105175407324931"
    assert got["senders_correspondent"].name_address == ("FRANKFURT",)
    assert got["receivers_correspondent"].bic == "CHASUS33"
    assert got["third_reimbursement"].name_address == ("THIRD REIMBURSEMENT BANK", "ZURICH")
    assert got["intermediary"].account == "/FW021000018"
    assert got["account_with"].account == "12345"
    assert got["account_with"].name_address == ("ACCOUNT WITH BANK", "MAIN ROAD 5")
    located = one(SIMPLE.replace(b":59:", b":57B:/998877\nLONDON\n:59:"))
    assert next(a for a in located.agents if a.role == "account_with").account == "998877"
    for odd, tag in ((b":56C:NOACCOUNT\n", ":56C:"), (b":57E:/1\nX\n", ":57E:")):
        t = one(SIMPLE.replace(b":59:", odd + b":59:"))  # an option the message does not allow: lines kept
        assert [(f.code, f.field) for f in t.findings] == [("OPTION_NOT_ALLOWED", tag)]


@pytest.mark.parametrize("edit, field, reason", [
    ((b":71A:SHA", b":71A:SHA\n:32A:260115EUR9999999,00"), ":32A:", "appears twice"),
    ((b":71A:SHA", b":71A:SHA\n:59:/CH9300762011623852957\nMALLORY"), ":59:", "appears twice"),
    ((b"EUR1814,28", b"EUR12345678901234,5"), ":32A:", "not a decimal number"),
])
def test_repeated_foreign_and_misplaced_fields_are_refused(edit: tuple[bytes, bytes], field: str,
                                                          reason: str) -> None:
    err = refused(SIMPLE.replace(*edit, 1))
    assert err.field == field and reason in err.reason, str(err)


@pytest.mark.parametrize("edit, code, field", [
    ((b":71A:SHA", b":71A:SHA\n:21:NOT-IN-103"), "FIELD_NOT_IN_MESSAGE", ":21:"),
    ((b":71A:SHA", b":71A:SHA\n:58A:CHASUS33"), "FIELD_NOT_IN_MESSAGE", ":58A:"),
    ((b":59:", b":52C:/123456\n:59:"), "OPTION_NOT_ALLOWED", ":52C:"),
])
def test_foreign_fields_are_ignored_and_named(edit: tuple[bytes, bytes], code: str, field: str) -> None:
    t = one(SIMPLE.replace(*edit, 1))
    assert [(f.code, f.field) for f in t.findings] == [(code, field)]
    assert "MT103" in t.findings[0].detail or "option" in t.findings[0].detail


def test_cover_payments_cannot_hide_their_customers() -> None:
    cov = (VEC / "mt202cov.fin").read_bytes()
    err = refused(cov.replace(b"{119:COV}", b""))
    assert err.field == ":50a:" and "without {119:COV}" in err.reason
    moved = cov.replace(b":58A:IRVTUS3N\n", b"").replace(b":70:INVOICE 12", b":70:INVOICE 12\n:58A:IRVTUS3N")
    err = refused(moved)  # a misordered message is refused, never a crash
    assert err.field in (":58A:", ":58a:") and "sequence" in err.reason
    reordered = cov.replace(b":20:COV-12\n", b"").replace(b":33B:", b":20:COV-12\n:33B:")
    t = one(reordered)  # the reference moved into sequence B: ignored there, missing in A, both named
    assert t.reference == "NONREF"
    assert {(f.code, f.field) for f in t.findings} == {("FIELD_NOT_IN_MESSAGE", ":20:"),
                                                       ("MANDATORY_FIELD_MISSING", ":20:")}


def test_50f_continuations_identifiers_and_birth_dates() -> None:
    base = (VEC / "mt103_50f_dob.fin").read_bytes()
    t = one(base.replace(b"4/19650423\n5/DE/HAMBURG", b"5/DE/HAMBURG\n8/-ALTONA"))
    assert [i.value for i in t.originator.identifiers] == ["HAMBURG-ALTONA, DE"]
    nidn = base.replace(b"4/19650423\n5/DE/HAMBURG", b"7/DE/T2200\n8/0129")
    assert one(nidn).originator.identifiers[-1].value == "T22000129"
    for old, new, reason in [(b"4/19650423", b"4/+1965042", "YYYYMMDD"),
                             (b"4/19650423", b"4/196504231", "YYYYMMDD"),
                             (b"4/19650423\n5/DE/HAMBURG", b"7/DE", "no identifier"),
                             (b"3/US/NEW YORK NY 10118", b"4/19650423", "not defined here")]:
        err = refused(base.replace(old, new))
        assert reason in err.reason, str(err)


def test_bom_and_system_trailer_are_accepted() -> None:
    t = one(b"\xef\xbb\xbf" + SIMPLE + b"{5:{CHK:123456789ABC}}{S:{SAC:}{COP:P}}")
    assert t.reference == "REF123"
    (r,) = parse_messages(b"\xef\xbb\xbf" + SIMPLE)
    assert isinstance(r, Transaction)
