"""goAML STR drafting and validation (audit.cases.goaml): a full report validates and is the same bytes
every time; removing any mandatory part from a valid document fails naming that part; bad inputs are
refused naming the field; hostile XML (entity bombs, DTDs, external entities) is refused unread."""

from __future__ import annotations

import hashlib
import pickle
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from defusedxml.ElementTree import fromstring as safe_fromstring

from audit.cases.goaml import (
    MAX_REPORT_BYTES,
    PROFILE,
    Account,
    Address,
    Entity,
    Person,
    ReportError,
    ReportingEntity,
    ReportTransaction,
    Side,
    StrDraft,
    amendment_note,
    draft_report,
    validate_report,
)
from audit.cases.goaml import schema as goaml_schema
from audit.errors import AuditError
from tests.test_layers import impurities, run_without_database

ROOT = Path(__file__).parents[3]
WHEN = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)

# -- inputs ---------------------------------------------------------------------------------------


def officer() -> Person:
    return Person(first_name="Zoë", last_name="Ó Briain", gender="F", title="MLRO",
                  email="mlro@bank.example", occupation="Money laundering reporting officer")


def entity(**kw: Any) -> ReportingEntity:
    args: dict[str, Any] = {"rentity_id": 1234, "reporting_person": officer(), "currency_code_local": "EUR",
                            "rentity_branch": "Head office",
                            "location": Address(address_type="B", address="1 Quay Street", city="Dublin",
                                                country_code="IE")}
    return ReportingEntity(**(args | kw))


def our_account() -> Account:
    return Account(institution_name="Example Bank plc", swift="exmpie2d", account="IE29AIBK93115212345678",
                   iban="IE29 AIBK 9311 5212 3456 78", currency_code="EUR", account_name="Jürgen Müller",
                   client_number="C-000042", holder=Person(first_name="Jürgen", last_name="Müller",
                                                           birthdate=date(1970, 5, 17), nationality="DE"))


def tx(**kw: Any) -> ReportTransaction:
    args: dict[str, Any] = {
        "number": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "date": WHEN, "amount": Decimal("9500.00"),
        "currency": "EUR", "transmode_code": "ELCFT",
        "from_": Side(party=our_account(), country="IE", funds_code="K"),
        "to": Side(party=Entity(name="Shell Trading Ltd", incorporation_number="HE 123456",
                                incorporation_country_code="CY"), country="CY", funds_code="K",
                   funds_comment="credited to the beneficiary's account"),
        "from_my_client": True, "to_my_client": False, "purpose": "Consultancy invoice 42",
        "internal_ref_number": "E2E-77",
    }
    return ReportTransaction(**(args | kw))


def draft(**kw: Any) -> StrDraft:
    args: dict[str, Any] = {
        "entity": entity(), "transactions": (tx(),),
        "reason": "Three transfers just below the reporting threshold within one hour,\n"
                  "to a newly incorporated company abroad.",
        "action": "Relationship under review; outgoing payments held.",
        "indicators": ("STRUC", "NEWCO"), "entity_reference": "CASE-2026-0007",
        "submission_date": datetime(2026, 3, 2, 9, 0, tzinfo=UTC),
    }
    return StrDraft(**(args | kw))


def parse(xml: bytes) -> ET.Element:
    root: ET.Element = safe_fromstring(xml)
    return root


# -- a full report --------------------------------------------------------------------------------


@pytest.mark.requirement("FATF-R20-str", "EU-AMLR-69-reporting")
def test_a_full_report_drafts_validates_and_reads_back() -> None:
    xml = draft_report(draft())
    validate_report(xml)  # None: valid
    assert xml.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<report>')
    root = parse(xml)
    assert [c.tag for c in root] == [
        "rentity_id", "rentity_branch", "submission_code", "report_code", "entity_reference",
        "submission_date", "currency_code_local", "reporting_person", "location", "reason", "action",
        "transaction", "report_indicators"]
    assert root.findtext("rentity_id") == "1234"
    assert root.findtext("submission_code") == "E"
    assert root.findtext("report_code") == "STR"
    assert root.findtext("submission_date") == "2026-03-02T09:00:00"
    assert root.findtext("reporting_person/first_name") == "Zoë"
    t = root.find("transaction")
    assert t is not None
    assert [c.tag for c in t] == ["transactionnumber", "internal_ref_number", "transaction_description",
                                  "date_transaction", "transmode_code", "amount_local", "t_from_my_client",
                                  "t_to"]
    assert t.findtext("transactionnumber") == "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    assert t.findtext("date_transaction") == "2026-03-01T12:30:05"
    assert t.findtext("amount_local") == "9500.00"
    acct = t.find("t_from_my_client/from_account")
    assert acct is not None
    assert acct.findtext("swift") == "EXMPIE2D"  # written in capitals
    assert acct.findtext("iban") == "IE29AIBK93115212345678"  # written compact
    assert acct.findtext("signatory/t_person/birthdate") == "1970-05-17T00:00:00"
    assert t.findtext("t_from_my_client/from_country") == "IE"
    assert t.findtext("t_to/to_entity/name") == "Shell Trading Ltd"
    assert t.find("t_from_my_client/from_foreign_currency") is None  # local currency: no block
    assert [i.text for i in root.iterfind("report_indicators/indicator")] == ["STRUC", "NEWCO"]


def test_drafting_is_byte_for_byte_deterministic() -> None:
    first, second = draft_report(draft()), draft_report(draft())  # equal drafts built separately
    assert first == second
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
    assert draft_report(draft(reason="Another narrative.")) != first


def test_the_same_instant_in_another_zone_drafts_the_same_bytes() -> None:
    plus2 = timezone(timedelta(hours=2))
    local = draft(transactions=(tx(date=WHEN.astimezone(plus2).replace(microsecond=999)),))
    assert draft_report(local) == draft_report(draft())


def test_several_transactions_and_each_party_kind() -> None:
    person_to = Side(party=Person(first_name="Ana", last_name="Silva", residence="PT"), country="PT",
                     funds_code="CASH")
    bank_code = Side(party=Account(institution_name="Caixa", institution_code="0035", account="123",
                                   holder=Entity(name="Silva Lda")), country="PT", funds_code="K")
    second = tx(number="t-2", from_=bank_code, to=person_to, from_my_client=False, to_my_client=True,
                location="Lisbon branch", comment="Paid out in cash.", transmode_comment="counter")
    root = parse(draft_report(draft(transactions=(tx(), second))))
    t2 = root.findall("transaction")[1]
    assert [c.tag for c in t2][-3:] == ["t_from", "t_to_my_client", "comments"]
    assert t2.findtext("t_from/from_account/institution_code") == "0035"
    assert t2.findtext("t_from/from_account/t_entity/name") == "Silva Lda"
    assert t2.findtext("t_to_my_client/to_person/last_name") == "Silva"


# -- mandatory parts: each removed from a valid document fails, naming the part ---------------------


def _without(xml: bytes, path: str) -> bytes:
    """``xml`` with every element at ``path`` (an ElementTree path from the report) removed."""
    root = ET.fromstring(xml)  # our own drafted bytes: trusted
    parent_path, _, tag = path.rpartition("/")
    parents = [root] if not parent_path else root.findall(parent_path)
    removed = 0
    for parent in parents:
        for child in parent.findall(tag):
            parent.remove(child)
            removed += 1
    assert removed, f"nothing at {path}"
    return bytes(ET.tostring(root, encoding="utf-8"))


@pytest.mark.parametrize(("path", "named"), [
    ("rentity_id", "rentity_id"),
    ("submission_code", "submission_code"),
    ("report_code", "report_code"),
    ("entity_reference", "entity_reference"),
    ("submission_date", "submission_date"),
    ("currency_code_local", "currency_code_local"),
    ("reporting_person", "reporting_person"),
    ("reason", "reason"),
    ("transaction", "transaction"),
    ("report_indicators", "report_indicators"),
    ("report_indicators/indicator", "indicator"),
    ("transaction/t_from_my_client", "t_from"),
    ("transaction/t_to", "t_to"),
    ("transaction/transactionnumber", "transactionnumber"),
    ("transaction/date_transaction", "date_transaction"),
    ("transaction/transmode_code", "transmode_code"),
    ("transaction/amount_local", "amount_local"),
    ("transaction/t_from_my_client/from_funds_code", "from_funds_code"),
    ("transaction/t_from_my_client/from_account", "from_account"),
    ("transaction/t_from_my_client/from_country", "from_country"),
    ("transaction/t_to/to_country", "to_country"),
    ("reporting_person/last_name", "last_name"),
    ("transaction/t_from_my_client/from_account/account", "account"),
])
def test_removing_a_mandatory_part_fails_naming_it(path: str, named: str) -> None:
    broken = _without(draft_report(draft()), path)
    with pytest.raises(ReportError) as info:
        validate_report(broken)
    assert named in info.value.field
    assert info.value.field.startswith("report")
    assert named in str(info.value)


def test_a_missing_side_in_the_second_transaction_names_that_transaction() -> None:
    xml = draft_report(draft(transactions=(tx(), tx(number="t-2"))))
    root = ET.fromstring(xml)
    second = root.findall("transaction")[1]
    second.remove(second.findall("t_to")[0])
    with pytest.raises(ReportError) as info:
        validate_report(ET.tostring(root, encoding="utf-8"))
    assert info.value.field == "report/transaction[2]/(t_to_my_client|t_to)"
    assert "t_to_my_client or t_to is missing" in info.value.why


@pytest.mark.parametrize(("path", "value", "named"), [
    ("report_code", "SAR", "report/report_code"),
    ("submission_code", "X", "report/submission_code"),
    ("rentity_id", "0", "report/rentity_id"),
    ("rentity_id", "twelve", "report/rentity_id"),
    ("currency_code_local", "EURO", "report/currency_code_local"),
    ("submission_date", "2026-03-02T09:00:00Z", "report/submission_date"),
    ("submission_date", "1899-12-31T00:00:00", "report/submission_date"),
    ("reason", "   ", "report/reason"),
    ("transaction/amount_local", "9500.001", "report/transaction/amount_local"),
    ("transaction/amount_local", "-1.00", "report/transaction/amount_local"),
    ("transaction/amount_local", "9500", "report/transaction/amount_local"),
    ("transaction/transmode_code", "bad code!", "report/transaction/transmode_code"),
    ("transaction/t_to/to_country", "Cyprus", "report/transaction/t_to/to_country"),
    ("reporting_person/email", "not-an-address", "report/reporting_person/email"),
])
def test_a_malformed_value_fails_naming_its_element(path: str, value: str, named: str) -> None:
    root = ET.fromstring(draft_report(draft()))
    el = root.find(path)
    assert el is not None
    el.text = value
    with pytest.raises(ReportError) as info:
        validate_report(ET.tostring(root, encoding="utf-8"))
    assert info.value.field == named
    assert info.value.faults and info.value.faults[0].path == named


def test_an_unknown_element_and_several_faults_are_reported_together() -> None:
    root = ET.fromstring(draft_report(draft()))
    ET.SubElement(root.find("reporting_person"), "shoe_size").text = "44"  # type: ignore[arg-type]
    root.find("report_code").text = "CTR"  # type: ignore[union-attr]
    with pytest.raises(ReportError) as info:
        validate_report(ET.tostring(root, encoding="utf-8"))
    paths = [f.path for f in info.value.faults]
    assert paths == ["report/report_code", "report/reporting_person/shoe_size"]
    assert "(and 1 more)" in str(info.value)


def test_an_empty_or_foreign_root_is_refused() -> None:
    with pytest.raises(ReportError) as info:
        validate_report(b"<report/>")
    assert info.value.field == "report/rentity_id"
    with pytest.raises(ReportError):
        validate_report(b"<Document><report/></Document>")


def test_a_failure_of_the_validator_itself_is_a_report_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def iter_errors(self, *_: object, **__: object) -> list[object]:
            raise RuntimeError("boom")

    monkeypatch.setattr(goaml_schema, "_schema", lambda: Broken())
    with pytest.raises(ReportError) as info:
        validate_report(b"<report/>")
    assert info.value.field == "report" and "boom" in info.value.why


def test_draft_report_refuses_to_return_an_invalid_document() -> None:
    d = draft()
    object.__setattr__(d.transactions[0], "transmode_code", "bad code!")  # bypassing the input checks
    with pytest.raises(ReportError) as info:
        draft_report(d)
    assert info.value.field == "report/transaction/transmode_code"


# -- bad inputs are refused when built, naming the field --------------------------------------------

BAD_INPUTS: list[tuple[str, Callable[[], object], str]] = [
    ("local currency not ISO 4217", lambda: entity(currency_code_local="EURO"), "currency_code_local"),
    ("local currency unknown", lambda: entity(currency_code_local="XYZ"), "currency_code_local"),
    ("transaction currency unknown", lambda: tx(currency="ABC"), "currency"),
    ("account currency lower case", lambda: replace(our_account(), currency_code="eur"), "currency_code"),
    ("side country unknown", lambda: Side(party=our_account(), country="XX", funds_code="K"), "country"),
    ("side country a name", lambda: Side(party=our_account(), country="Ireland", funds_code="K"), "country"),
    ("nationality unknown", lambda: Person(first_name="A", last_name="B", nationality="ZZ"), "nationality"),
    ("empty narrative", lambda: draft(reason="  \n "), "reason"),
    ("narrative not text", lambda: draft(reason=None), "reason"),
    ("narrative too long", lambda: draft(reason="x" * 8001), "reason"),
    ("empty action", lambda: draft(action=""), "action"),
    ("empty indicators", lambda: draft(indicators=()), "indicators"),
    ("indicators a string", lambda: draft(indicators="STRUC"), "indicators"),
    ("indicator repeated", lambda: draft(indicators=("STRUC", "STRUC")), "indicators[1]"),
    ("indicator malformed", lambda: draft(indicators=("STRUC", "two words")), "indicators[1]"),
    ("no transactions", lambda: draft(transactions=()), "transactions"),
    ("transaction repeated", lambda: draft(transactions=(tx(), tx())), "transactions[1].number"),
    ("naive transaction date", lambda: tx(date=datetime(2026, 3, 1, 12, 0)), "date"),
    ("naive submission date", lambda: draft(submission_date=datetime(2026, 3, 2, 9, 0)), "submission_date"),
    ("a date for a datetime", lambda: tx(date=date(2026, 3, 1)), "date"),
    ("negative amount", lambda: tx(amount=Decimal("-5.00")), "amount"),
    ("zero amount", lambda: tx(amount=Decimal(0)), "amount"),
    ("float amount", lambda: tx(amount=9500.0), "amount"),
    ("three decimals", lambda: tx(amount=Decimal("9500.005")), "amount"),
    ("not a number", lambda: tx(amount=Decimal("NaN")), "amount"),
    ("foreign currency without amount_local", lambda: draft(transactions=(tx(currency="USD"),)),
     "transactions[0].amount_local"),
    ("local amount_local that differs", lambda: draft(transactions=(tx(amount_local=Decimal("1.00")),)),
     "transactions[0].amount_local"),
    ("negative amount_local", lambda: tx(currency="USD", amount_local=Decimal("-1")), "amount_local"),
    ("bad BIC", lambda: replace(our_account(), swift="NOTABIC"), "swift"),
    ("BIC of no country", lambda: replace(our_account(), swift="ABCDXX12"), "swift"),
    ("bad IBAN check digits", lambda: replace(our_account(), iban="IE29AIBK93115212345679"), "iban"),
    ("both BIC and institution code", lambda: replace(our_account(), institution_code="93-11-52"), "swift"),
    ("neither BIC nor institution code", lambda: replace(our_account(), swift=None), "swift"),
    ("empty account number", lambda: replace(our_account(), account=""), "account"),
    ("holder not a party", lambda: replace(our_account(), holder="Jürgen"), "holder"),  # type: ignore[arg-type]
    ("side without a party", lambda: Side(party="Jürgen", country="IE", funds_code="K"), "party"),  # type: ignore[arg-type]
    ("funds code malformed", lambda: Side(party=our_account(), country="IE", funds_code="wire transfer"),
     "funds_code"),
    ("transmode code empty", lambda: tx(transmode_code=""), "transmode_code"),
    ("my_client not a bool", lambda: tx(from_my_client="yes"), "from_my_client"),
    ("name over two lines", lambda: Person(first_name="Ana\nMaria", last_name="Silva"), "first_name"),
    ("name with a control character", lambda: Person(first_name="Ana\x00", last_name="Silva"), "first_name"),
    ("name too long", lambda: Person(first_name="A" * 101, last_name="Silva"), "first_name"),
    ("blank last name", lambda: Person(first_name="Ana", last_name=" "), "last_name"),
    ("gender unknown", lambda: Person(first_name="Ana", last_name="Silva", gender="X"), "gender"),
    ("email malformed", lambda: Person(first_name="Ana", last_name="Silva", email="ana at bank"), "email"),
    ("birthdate a datetime", lambda: Person(first_name="A", last_name="B", birthdate=WHEN), "birthdate"),
    ("birthdate before 1900", lambda: Person(first_name="A", last_name="B", birthdate=date(1899, 1, 1)),
     "birthdate"),
    ("rentity_id zero", lambda: entity(rentity_id=0), "rentity_id"),
    ("rentity_id not a number", lambda: entity(rentity_id="12a"), "rentity_id"),
    ("rentity_id a bool", lambda: entity(rentity_id=True), "rentity_id"),
    ("rentity_id too large", lambda: entity(rentity_id=2**31), "rentity_id"),
    ("submission code unknown", lambda: entity(submission_code="X"), "submission_code"),
    ("reporting person not a Person", lambda: entity(reporting_person="Zoë"), "reporting_person"),
    ("entity reference empty", lambda: draft(entity_reference=""), "entity_reference"),
    ("entity reference too long", lambda: draft(entity_reference="C" * 256), "entity_reference"),
    ("previous SHA-256 upper case", lambda: draft(previous_sha256="A" * 64), "previous_sha256"),
    ("previous SHA-256 short", lambda: draft(previous_sha256="ab"), "previous_sha256"),
    ("amendment note overflows reason", lambda: draft(previous_sha256="a" * 64, reason="x" * 7990), "reason"),
    ("address country unknown", lambda: Address(address_type="B", address="1 St", city="X",
                                                country_code="UK"), "country_code"),
]


@pytest.mark.parametrize(("make", "field"), [(m, f) for _, m, f in BAD_INPUTS],
                         ids=[name for name, _, _ in BAD_INPUTS])
def test_a_bad_input_is_refused_naming_the_field(make: Callable[[], object], field: str) -> None:
    with pytest.raises(ReportError) as info:
        make()
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_report_error_is_in_the_audit_tree_a_value_error_and_pickles() -> None:
    with pytest.raises(ReportError) as info:
        validate_report(b"<report/>")
    err = info.value
    assert isinstance(err, AuditError) and isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.field, again.why, again.faults, str(again)) == \
        (ReportError, err.field, err.why, err.faults, str(err))


# -- text: escaped, non-ASCII kept, line breaks as XML reads them ----------------------------------


def test_xml_special_characters_are_escaped_and_non_ascii_names_kept() -> None:
    tricky = Person(first_name="Zoë <script>", last_name="O'Brien & \"Søn\" ]]> 李小龍")
    d = draft(entity=entity(reporting_person=tricky), reason="Amounts < 10,000 & > 9,000; see <note/>.",
              entity_reference="CASE&<7>")
    xml = draft_report(d)
    validate_report(xml)
    assert b"<script>" not in xml and b"<note/>" not in xml
    assert "O'Brien &amp; \"Søn\" ]]&gt; 李小龍".encode() in xml  # UTF-8 bytes, not character references
    assert b"&#" not in xml
    root = parse(xml)
    assert root.findtext("reporting_person/first_name") == "Zoë <script>"
    assert root.findtext("reporting_person/last_name") == "O'Brien & \"Søn\" ]]> 李小龍"
    assert root.findtext("reason") == "Amounts < 10,000 & > 9,000; see <note/>."
    assert root.findtext("entity_reference") == "CASE&<7>"


def test_narrative_line_breaks_are_written_as_line_feeds() -> None:
    d = draft(reason="First line.\r\nSecond line.\rThird line.\n\tIndented.")
    assert d.reason == "First line.\nSecond line.\nThird line.\n\tIndented."
    assert parse(draft_report(d)).findtext("reason") == d.reason


# -- amounts in a foreign currency -------------------------------------------------------------------


def test_a_foreign_currency_amount_states_both_amounts_and_no_invented_rate() -> None:
    foreign = tx(currency="USD", amount=Decimal("10250.5"), amount_local=Decimal("9431.46"))
    assert foreign.amount == Decimal("10250.50")
    root = parse(draft_report(draft(transactions=(foreign,))))
    t = root.find("transaction")
    assert t is not None
    assert t.findtext("amount_local") == "9431.46"
    for side, prefix in (("t_from_my_client", "from"), ("t_to", "to")):
        block = t.find(f"{side}/{prefix}_foreign_currency")
        assert block is not None
        assert [c.tag for c in block] == ["foreign_currency_code", "foreign_amount"]
        assert block.findtext("foreign_currency_code") == "USD"
        assert block.findtext("foreign_amount") == "10250.50"
    assert not list(root.iter("foreign_exchange_rate"))


def test_amounts_are_written_with_two_decimal_places() -> None:
    txs = (tx(amount=Decimal(7)), tx(number="t-2", amount=Decimal("0.1")))
    root = parse(draft_report(draft(transactions=txs)))
    assert [t.findtext("amount_local") for t in root.iterfind("transaction")] == ["7.00", "0.10"]


# -- amendments ------------------------------------------------------------------------------------


def test_an_amendment_keeps_report_code_str_and_names_the_earlier_report() -> None:
    original = draft_report(draft())
    earlier = hashlib.sha256(original).hexdigest()
    amended = draft(previous_sha256=earlier, fiu_ref_number="FIU-2026-000311",
                    reason="Corrected: four transfers, not three.")
    xml = draft_report(amended)
    root = parse(xml)
    assert root.findtext("report_code") == "STR"
    assert root.findtext("entity_reference") == "CASE-2026-0007"  # the case id, unchanged
    assert root.findtext("fiu_ref_number") == "FIU-2026-000311"
    assert root.findtext("reason") == (f"{amendment_note(earlier, 'FIU-2026-000311')}\n\n"
                                       "Corrected: four transfers, not three.")
    assert earlier in root.findtext("reason", "")
    assert [c.tag for c in root][4:6] == ["entity_reference", "fiu_ref_number"]


def test_an_amendment_without_an_fiu_reference_still_names_the_hash() -> None:
    root = parse(draft_report(draft(previous_sha256="0" * 64)))
    assert root.find("fiu_ref_number") is None
    assert root.findtext("reason", "").startswith(
        f"Amends the earlier report whose document has SHA-256 {'0' * 64}.")


# -- hostile documents -------------------------------------------------------------------------------

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE report [
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
  <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
]>
<report><reason>&e;</reason></report>"""

EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE report [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<report><reason>&x;</reason></report>"""


@pytest.mark.parametrize(("doc", "why"), [
    (BOMB, "DTDs"),
    (EXTERNAL, "DTDs"),
    (b'<!DOCTYPE report SYSTEM "http://example.invalid/goaml.dtd"><report/>', "DTDs"),
    (b"<!-- a comment first --><!DOCTYPE report><report/>", "DTDs"),
    (b"<report><rentity_id>1</report>", "not well-formed"),
    (b"", "not well-formed"),
    ("<report/>".encode("utf-16"), "UTF-8"),
    (b'<?xml version="1.0" encoding="ISO-8859-1"?><report/>', "only UTF-8"),
])
def test_hostile_or_unreadable_xml_is_refused_unread(doc: bytes, why: str) -> None:
    with pytest.raises(ReportError) as info:
        validate_report(doc)
    assert info.value.field == "xml"
    assert why in info.value.why


def test_an_oversized_document_is_refused_before_parsing() -> None:
    with pytest.raises(ReportError) as info:
        validate_report(b" " * (MAX_REPORT_BYTES + 1))
    assert info.value.field == "xml" and "limit" in info.value.why


def test_text_instead_of_bytes_is_refused() -> None:
    with pytest.raises(ReportError) as info:
        validate_report(draft_report(draft()).decode())  # type: ignore[arg-type]
    assert info.value.field == "xml" and "bytes" in info.value.why


# -- the reporting entity from configuration ---------------------------------------------------------

CONFIG = """
rentity_id = 1234
rentity_branch = "Head office"
currency_code_local = "EUR"
submission_code = "E"

[reporting_person]
first_name = "Zoë"
last_name = "Ó Briain"
gender = "F"
title = "MLRO"
email = "mlro@bank.example"
occupation = "Money laundering reporting officer"

[location]
address_type = "B"
address = "1 Quay Street"
city = "Dublin"
country_code = "IE"
"""


def test_the_reporting_entity_loads_from_toml() -> None:
    assert ReportingEntity.from_toml(CONFIG) == entity()
    minimal = ReportingEntity.from_toml('rentity_id = "77"\ncurrency_code_local = "GBP"\n'
                                        '[reporting_person]\nfirst_name = "A"\nlast_name = "B"\n')
    assert (minimal.rentity_id, minimal.submission_code, minimal.location) == (77, "E", None)


@pytest.mark.parametrize(("text", "field"), [
    ("shoe_size = 44\n" + CONFIG, "shoe_size"),
    (CONFIG.replace('title = "MLRO"', 'title = "MLRO"\nshoe_size = 44'), "reporting_person.shoe_size"),
    (CONFIG.replace('city = "Dublin"', 'city = "Dublin"\nfloor = 3'), "location.floor"),
    (CONFIG.replace("rentity_id = 1234\n", ""), "rentity_id"),
    (CONFIG.replace('currency_code_local = "EUR"', ""), "currency_code_local"),
    (CONFIG.split("[reporting_person]")[0], "reporting_person"),
    (CONFIG.replace('last_name = "Ó Briain"\n', ""), "reporting_person.last_name"),
    (CONFIG.replace('currency_code_local = "EUR"', 'currency_code_local = "EURO"'), "currency_code_local"),
    (CONFIG.replace('email = "mlro@bank.example"', 'email = "nobody"'), "reporting_person.email"),
    (CONFIG.replace('country_code = "IE"', 'country_code = "XX"'), "location.country_code"),
    (CONFIG.replace('first_name = "Zoë"', "first_name = 7"), "reporting_person.first_name"),
    (CONFIG.replace('submission_code = "E"', 'submission_code = "Z"'), "submission_code"),
    ('rentity_id = 1\ncurrency_code_local = "EUR"\nreporting_person = "Zoë"\n', "reporting_person"),
    ("rentity_id = = 1", "toml"),
])
def test_a_bad_configuration_is_refused_naming_the_key(text: str, field: str) -> None:
    with pytest.raises(ReportError) as info:
        ReportingEntity.from_toml(text)
    assert info.value.field == field


def test_from_toml_wants_text() -> None:
    with pytest.raises(ReportError) as info:
        ReportingEntity.from_toml(CONFIG.encode())  # type: ignore[arg-type]
    assert info.value.field == "toml"


# -- packaging and purity ----------------------------------------------------------------------------


def test_the_schema_ships_as_package_data_with_its_licence() -> None:
    xsd = resources.files("audit.cases.goaml") / "goaml_str.xsd"
    text = xsd.read_text("utf-8")
    assert "SPDX-License-Identifier: Apache-2.0" in text
    assert f'version="{PROFILE}"' in text
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "cases/goaml/*.xsd" in package_data.get("audit", [])


def test_the_goaml_modules_are_pure_and_import_without_the_database_layer() -> None:
    modules = sorted((ROOT / "audit" / "cases" / "goaml").glob("*.py"))
    assert {p.name: impurities(p) for p in modules if impurities(p)} == {}
    res = run_without_database("import audit.cases.goaml\n")
    assert res.returncode == 0, res.stderr
