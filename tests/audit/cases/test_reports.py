"""Suspicious transaction reports from a case: drafted from its sealed decisions and their payloads,
filed as a sealed event after the legal hold over its evidence, amended only in force."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

import orjson
import pytest
from defusedxml.ElementTree import fromstring
from sqlalchemy import func, select

import audit.cases.reports as reports
from audit.cases.goaml import ReportTransaction, StrDraft, draft_report, validate_report
from audit.cases.reports import (
    ReportHoldError,
    ReportingSettings,
    ReportPurgedError,
    draft_case_report,
    file_case_report,
    filed_report,
    hold_id_of,
    list_case_reports,
    read_reporting_settings,
    report_transaction,
)
from audit.cases.store import catch_up
from audit.cases.tables import case_events, cases
from audit.errors import CaseConflictError, CaseError, CaseNotFoundError, ReportError
from audit.query.verify import verify_index
from inference.messages import Transaction, parse_messages
from ledger import store
from ledger.append import Ledger
from ledger.errors import LedgerUnavailableError, LegalHoldError
from ledger.retention import current_holds, purge_payloads, release_hold
from tests.audit.cases.test_cases import ALICE, BOB, decided, entries, rows  # noqa: F401  (a fixture)
from tests.audit.test_trace_index import transaction_of

EXAMPLE = Path(__file__).parents[3] / "docs" / "reporting-entity.example.toml"
VECTORS = Path(__file__).parents[2] / "vectors" / "messages"
WHEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RATES = {"USD": Decimal("0.9215"), "GBP": Decimal("1.1702"), "CHF": Decimal("1.0480"),
         "JPY": Decimal("0.0061")}
REASON = "Payments to a jurisdiction under a call for action, split across days."


def reporting(own: tuple[str, ...] = ()) -> ReportingSettings:
    return replace(read_reporting_settings(EXAMPLE), own_bics=frozenset(own))


def a_case(ledger: Ledger, at_least: int = 2) -> Any:
    catch_up(ledger.engine)
    return next(c for c in rows(ledger.engine, cases) if c.alerts >= at_least)


def draft(ledger: Ledger, case_id: int, **kw: Any) -> reports.Draft:
    args: dict[str, Any] = {"reason": REASON, "indicators": ["STRUC", "HRJUR"], "action": "Payments held.",
                            "submission_date": WHEN, "amends": None, "rates": RATES}
    return draft_case_report(ledger.engine, case_id, kw.pop("reporting", reporting()), **{**args, **kw})


def decision(ledger: Ledger, seq: int) -> tuple[dict[str, Any], bytes | None]:
    e, p = store.entries, store.payloads
    with ledger.engine.connect() as conn:
        env = orjson.loads(conn.execute(select(e.c.record).where(e.c.seq == seq)).scalar_one())
        raw = conn.execute(select(p.c.data).where(p.c.sha256 == env["payload_sha256"])).scalar()
    return env, raw


def text(el: Element, path: str) -> str | None:
    found = el.find(path)
    return None if found is None else found.text


def hold_ids(ledger: Ledger) -> set[str]:
    return {h.hold_id for h in current_holds(ledger.engine)}


# -- drafting ----------------------------------------------------------------------------------


@pytest.mark.requirement("FATF-R20-str", "EU-AMLR-69-reporting")
def test_a_case_is_drafted_from_its_decisions_and_payloads(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    d = draft(decided, case.case_id)
    validate_report(d.xml)
    assert d.sha256 == hashlib.sha256(d.xml).hexdigest()
    assert draft(decided, case.case_id).xml == d.xml  # the same draft, the same bytes
    assert draft(decided, case.case_id, reason=REASON + " More.").xml != d.xml
    root = fromstring(d.xml)
    assert text(root, "entity_reference") == f"case-{case.case_id}"
    assert text(root, "currency_code_local") == "EUR"
    assert [i.text for i in root.iter("indicator")] == ["STRUC", "HRJUR"]
    got = root.findall("transaction")
    assert len(got) == len(d.transactions) == len(d.decision_seqs) == case.alerts
    assert list(d.decision_seqs) == sorted(d.decision_seqs) and d.decision_seqs[0] == case.case_id
    foreign = 0
    for el, seq in zip(got, d.decision_seqs, strict=True):
        env, raw = decision(decided, seq)
        assert raw is not None
        tx = transaction_of(env["record"], raw)
        assert text(el, "transactionnumber") == env["trace_id"]
        assert text(el, "internal_ref_number") == tx.reference
        at = datetime.fromisoformat(env["record"]["at"]).astimezone(UTC)
        assert text(el, "date_transaction") == at.strftime("%Y-%m-%dT%H:%M:%S")
        assert text(el, "transmode_code") == "ELCFT" and text(el, "transmode_comment") == tx.message_type
        if tx.currency == "EUR":
            assert text(el, "amount_local") == f"{tx.amount:.2f}"
            assert el.find("t_from/from_foreign_currency") is None
        else:
            foreign += 1
            local = (tx.amount * RATES[tx.currency]).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
            assert text(el, "amount_local") == f"{local:f}"
            for side in ("t_from/from", "t_to/to"):
                assert text(el, f"{side}_foreign_currency/foreign_currency_code") == tx.currency
                assert text(el, f"{side}_foreign_currency/foreign_amount") == f"{tx.amount:.2f}"
        for side, party, role in (("t_from/from", tx.originator, "debtor_agent"),
                                  ("t_to/to", tx.beneficiary, "creditor_agent")):
            agent = next(a for a in tx.agents if a.role == role)
            assert text(el, f"{side}_account/account") == party.account
            assert text(el, f"{side}_account/iban") == party.iban
            assert text(el, f"{side}_account/account_name") == party.name
            assert text(el, f"{side}_account/swift") == agent.bic
            assert text(el, f"{side}_country") == party.country
            assert text(el, f"{side}_funds_code") == "K"
        assert f"ledger seq {seq}" in (text(el, "comments") or "")
    assert foreign  # the case exercises the rate table


def test_a_side_kept_at_one_of_the_banks_own_bics_is_its_client(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    env, raw = decision(decided, case.case_id)
    assert raw is not None
    tx = transaction_of(env["record"], raw)
    ours = next(a.bic for a in tx.agents if a.role == "creditor_agent")
    assert ours is not None
    root = fromstring(draft(decided, case.case_id, reporting=reporting((ours[:8] + "XXX",))).xml)
    first = root.findall("transaction")[0]
    assert first.find("t_to_my_client") is not None and first.find("t_to") is None
    assert first.find("t_from") is not None  # the originator's bank is another
    assert fromstring(draft(decided, case.case_id).xml).find("transaction/t_to_my_client") is None


def test_a_foreign_amount_without_a_rate_is_refused_naming_the_transaction(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    d = draft(decided, case.case_id)
    i, tx = next((i, t) for i, t in enumerate(d.transactions) if t.currency != "EUR")
    with pytest.raises(ReportError) as info:
        draft(decided, case.case_id, rates={k: v for k, v in RATES.items() if k != tx.currency})
    assert info.value.field == f"transactions[{i}].amount_local"
    assert tx.number in info.value.why and f"decision seq {d.decision_seqs[i]}" in info.value.why
    assert "invents none" in info.value.why
    with pytest.raises(ReportError) as info:
        draft(decided, case.case_id, rates={**RATES, "USD": 0.92})  # a float is no exact rate
    assert info.value.field == "rates.USD"


def test_a_purged_payload_refuses_the_draft_naming_its_seq(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    env, _ = decision(decided, case.last_alert_seq)
    purge = purge_payloads(decided, [env["payload_sha256"]], "erasure order 2026-17")
    assert purge.receipt is not None
    with pytest.raises(ReportError) as info:
        draft(decided, case.case_id)
    assert info.value.field == f"seq {case.last_alert_seq}"
    assert f"purged at seq {purge.receipt.seq}" in info.value.why and "cannot be rebuilt from hashes" in str(
        info.value)


def test_drafting_refuses_an_unknown_case_and_an_amendment_of_no_report_in_force(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    with pytest.raises(CaseNotFoundError):
        draft(decided, 10**9)
    with pytest.raises(CaseConflictError) as info:
        draft(decided, case.case_id, amends="ab" * 32)
    assert info.value.field == "amends" and "no report is in force" in info.value.message
    with pytest.raises(ReportError) as bad:
        draft(decided, case.case_id, indicators=[])
    assert bad.value.field == "indicators"


def one(name: str) -> Transaction:
    (tx,) = parse_messages((VECTORS / name).read_bytes())
    assert isinstance(tx, Transaction)
    return tx


def xml_of(tx: ReportTransaction) -> Element:
    """The transaction as the drafter writes it, in a one-transaction document."""
    doc = draft_report(StrDraft(entity=reporting().entity, transactions=(tx,), reason="r", indicators=("X",),
                                entity_reference="case-1", submission_date=WHEN))
    found = fromstring(doc).find("transaction")
    assert found is not None
    return found


def test_messages_of_each_kind_map_to_their_sides_and_codes() -> None:
    rs = reporting(("CHASUS33",))
    # MT103 without :52a: or :57a:: the sender keeps the originator's account, the receiver the
    # beneficiary's; no names in the message, so none written; the country read from the IBAN
    el = xml_of(report_transaction(one("mt/mt103_50a_59a.fin"), rs, number="t1", at=WHEN, rates=RATES))
    assert (text(el, "transmode_code"), text(el, "transmode_comment")) == ("ELCFT", "MT103")
    assert (text(el, "t_from/from_account/swift"), text(el, "t_from/from_country")) == ("BNPAFRPPXXX", "FR")
    assert (text(el, "t_to/to_account/swift"), text(el, "t_to/to_country")) == ("UBSWCHZHXXX", "CH")
    assert el.find("t_from/from_account/account_name") is None
    # MT103 with :52a: and :57a:: those institutions; the bank's own BIC makes its side its client's
    el = xml_of(report_transaction(one("mt/mt103_50f_dob.fin"), rs, number="t2", at=WHEN, rates=RATES))
    assert text(el, "t_from/from_account/swift") == "COBADEFF"
    assert text(el, "t_to_my_client/to_account/swift") == "CHASUS33" and el.find("t_to") is None
    assert text(el, "t_from/from_account/account_name") == "MUELLER HANS PETER"
    # MT202: between institutions; the ordering institution has no account here: an entity, its BIC
    el = xml_of(report_transaction(one("mt/mt202.fin"), rs, number="t3", at=WHEN, rates=RATES))
    assert text(el, "transmode_code") == "FIFT"
    assert (text(el, "t_from/from_entity/name"), text(el, "t_from/from_country")) == ("DEUTDEFF", "DE")
    assert text(el, "t_to_my_client/to_account/account") == "US33000012345"
    # MT202COV: the customer transfer it covers; the beneficiary's bank is the cover's :58a:
    el = xml_of(report_transaction(one("mt/mt202cov.fin"), rs, number="t4", at=WHEN, rates=RATES))
    assert text(el, "transmode_code") == "ELCFT" and text(el, "t_to/to_account/swift") == "IRVTUS3N"
    # pacs.008 in the local currency: no foreign block, amount_local is the amount
    el = xml_of(report_transaction(one("pacs008/sepa_eur_ibans.xml"), rs, number="t5", at=WHEN))
    assert text(el, "amount_local") == "1814.28" and el.find("t_from/from_foreign_currency") is None
    assert (text(el, "t_to/to_account/swift"), text(el, "t_to/to_account/iban")) == (
        "BNPAFRPP", "FR1420041010050500013M02606")
    assert text(el, "t_from/from_account/account_name") == "Müller Werkzeugbau GmbH"


def test_what_goaml_cannot_carry_is_refused_naming_the_field() -> None:
    rs = reporting()
    with pytest.raises(ReportError) as info:  # three decimal places
        report_transaction(one("pacs008/bhd_three_decimals.xml"), rs, number="t", at=WHEN,
                           rates={"BHD": Decimal("2.43")})
    assert info.value.field == "amount" and "1234.567" in info.value.why
    with pytest.raises(ReportError) as info:
        report_transaction(one("pacs008/bhd_three_decimals.xml"), rs, number="t", at=WHEN)
    assert info.value.field == "amount_local" and "BHD" in info.value.why


# -- filing -------------------------------------------------------------------------------------


@pytest.mark.requirement("BSA-1020.320-records")
def test_filing_holds_the_evidence_then_seals_the_report_then_holds_its_bytes(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    d = draft(decided, case.case_id)
    before = entries(decided.engine)
    filed = file_case_report(decided, case.case_id, d.xml, ALICE, rationale="Approved by the MLRO.")
    # three records: the evidence hold, the event, the hold on the document's bytes, in that order
    assert entries(decided.engine) == before + 3 and filed.seq == before + 1
    assert (filed.report_sha256, filed.amends, filed.hold_id) == (
        d.sha256, None, f"case-{case.case_id}-{d.sha256[:8]}")
    holds = {h.hold_id: h for h in current_holds(decided.engine)}
    evidence, own = holds[filed.hold_id], holds[filed.report_hold_id]
    assert evidence.placed_seq == before < filed.seq < own.placed_seq
    assert (evidence.seq_from, evidence.seq_to) == (filed.hold_from, filed.hold_to)
    assert evidence.seq_from <= case.case_id and evidence.seq_to == case.last_alert_seq
    assert d.sha256 in evidence.reason and f"case {case.case_id}" in evidence.reason
    assert (own.seq_from, own.seq_to) == (filed.seq, filed.seq)
    with decided.engine.connect() as conn:
        p = store.payloads
        assert conn.execute(select(p.c.data).where(p.c.sha256 == d.sha256)).scalar() == d.xml
        event = orjson.loads(conn.execute(select(store.entries.c.record).where(
            store.entries.c.seq == filed.seq)).scalar_one())
    assert event["kind"] == "case_event" and event["payload_sha256"] == d.sha256
    assert (event["record"]["action"], event["record"]["report"], event["record"]["target"]) == (
        "file_report", d.sha256, {"case": case.case_id})
    (c,) = rows(decided.engine, cases, cases.c.case_id == case.case_id)
    assert (c.reports, c.last_report) == (1, d.sha256)
    # neither the case's payment messages nor the report can be erased while held
    shas = [decision(decided, s)[0]["payload_sha256"] for s in d.decision_seqs]
    for sha in (shas[0], shas[-1], d.sha256):
        with pytest.raises(LegalHoldError):
            purge_payloads(decided, [sha], "erasure order 2026-18")
    assert filed_report(decided.engine, case.case_id, d.sha256) == d.xml
    (v,) = list_case_reports(decided.engine, case.case_id)
    assert (v.seq, v.sha256, v.amends, v.in_force, v.held, v.hold_id) == (
        filed.seq, d.sha256, None, True, True, filed.hold_id)
    assert v.principal["subject"] == ALICE.subject and v.rationale == "Approved by the MLRO."
    verify_index(decided.engine)


def test_an_amendment_replaces_the_report_in_force_and_an_older_one_is_refused(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    first = draft(decided, case.case_id)
    f1 = file_case_report(decided, case.case_id, first.xml, ALICE, rationale="Filed.")
    v2 = draft(decided, case.case_id, amends=first.sha256, fiu_ref_number="FIU-2026-000311")
    late = draft(decided, case.case_id, amends=first.sha256, reason=REASON + " A second view.")
    assert b"Amends the earlier report (FIU reference FIU-2026-000311)" in v2.xml
    f2 = file_case_report(decided, case.case_id, v2.xml, BOB, rationale="Corrected.", amends=first.sha256)
    assert f2.amends == first.sha256 and f2.hold_id != f1.hold_id
    holds, size = hold_ids(decided), entries(decided.engine)
    with pytest.raises(CaseConflictError) as info:  # amends a report no longer in force
        file_case_report(decided, case.case_id, late.xml, ALICE, rationale="Late.", amends=first.sha256)
    assert info.value.field == "amends" and v2.sha256 in info.value.message
    with pytest.raises(CaseConflictError):  # a first report again, while one is in force
        file_case_report(decided, case.case_id, first.xml, ALICE, rationale="Again.")
    assert hold_ids(decided) == holds and entries(decided.engine) == size  # nothing half-written
    with pytest.raises(CaseConflictError):
        draft(decided, case.case_id, amends=first.sha256)
    versions = list_case_reports(decided.engine, case.case_id)
    assert [(v.seq, v.sha256, v.amends, v.in_force) for v in versions] == [
        (f1.seq, first.sha256, None, False), (f2.seq, v2.sha256, first.sha256, True)]
    (c,) = rows(decided.engine, cases, cases.c.case_id == case.case_id)
    assert (c.reports, c.last_report) == (2, v2.sha256)


def test_a_document_that_is_not_this_filing_is_refused_and_nothing_sealed(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    case, other = [c for c in rows(decided.engine, cases)][:2]
    d = draft(decided, case.case_id)
    size = entries(decided.engine)
    refusals: list[tuple[bytes, dict[str, Any], type[Exception], str]] = [
        (d.xml, {"case_id": other.case_id}, ReportError, "report/entity_reference"),
        (d.xml, {"amends": "ab" * 32}, ReportError, "report/reason"),
        (d.xml.replace(b"<reason>", b"<reason>Amends the earlier report whose document has SHA-256 "
                       + b"c" * 64 + b".\n\n"), {}, ReportError, "amends"),
        (d.xml.replace(b"<rentity_id>1234</rentity_id>", b""), {}, ReportError, "report/rentity_id"),
        (b"<report>", {}, ReportError, "xml"),
        (d.xml, {"rationale": " "}, CaseError, "rationale"),
        (d.xml, {"case_id": 10**9}, ReportError, "report/entity_reference"),
    ]
    for xml, kw, err, field in refusals:
        args = {"case_id": case.case_id, "rationale": "Filed.", **kw}
        with pytest.raises(err) as info:
            file_case_report(decided, args.pop("case_id"), xml, ALICE, **args)
        assert getattr(info.value, "field", None) == field, (kw, info.value)
    assert entries(decided.engine) == size and hold_ids(decided) == set()


def test_a_filing_refused_after_the_hold_releases_it(decided: Ledger,  # noqa: F811
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    case = a_case(decided)
    d = draft(decided, case.case_id)

    def raced(*_: Any, **__: Any) -> Any:  # another officer filed first: act refuses before sealing
        raise CaseConflictError("amends", "the report in force changed")

    monkeypatch.setattr(reports, "act", raced)
    size = entries(decided.engine)
    with pytest.raises(CaseConflictError):
        file_case_report(decided, case.case_id, d.xml, ALICE, rationale="Filed.")
    assert hold_ids(decided) == set() and entries(decided.engine) == size + 2  # placed, then released
    with decided.engine.connect() as conn:
        kinds = [k for (k,) in conn.execute(select(store.entries.c.kind).where(store.entries.c.seq >= size)
                                            .order_by(store.entries.c.seq))]
        assert kinds == ["ledger.legal_hold", "ledger.legal_hold"]
        assert conn.execute(select(func.count()).select_from(case_events)).scalar_one() == 0


def test_a_failure_after_the_report_was_sealed_keeps_the_hold(decided: Ledger,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    case = a_case(decided)
    d = draft(decided, case.case_id)
    real = reports.act

    def sealed_then_lost(*args: Any, **kwargs: Any) -> Any:  # the commit succeeded, the answer was lost
        real(*args, **kwargs)
        raise LedgerUnavailableError("connection reset after the commit")

    monkeypatch.setattr(reports, "act", sealed_then_lost)
    with pytest.raises(LedgerUnavailableError) as info:
        file_case_report(decided, case.case_id, d.xml, ALICE, rationale="Filed.")
    assert hold_id_of(case.case_id, d.sha256) in hold_ids(decided)  # a filed report keeps its hold
    assert any("is kept" in n for n in getattr(info.value, "__notes__", []))
    (c,) = rows(decided.engine, cases, cases.c.case_id == case.case_id)
    assert c.last_report == d.sha256


def test_a_report_filed_whose_own_hold_fails_says_so_naming_the_seq(decided: Ledger,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    case = a_case(decided)
    d = draft(decided, case.case_id)
    real = reports.place_hold
    calls: list[str] = []

    def second_fails(ledger: Ledger, hold_id: str, *args: Any) -> Any:
        calls.append(hold_id)
        if len(calls) == 2:
            raise LedgerUnavailableError("the database went away")
        return real(ledger, hold_id, *args)

    monkeypatch.setattr(reports, "place_hold", second_fails)
    with pytest.raises(ReportHoldError) as info:
        file_case_report(decided, case.case_id, d.xml, ALICE, rationale="Filed.")
    (v,) = list_case_reports(decided.engine, case.case_id)
    assert info.value.seq == v.seq and f"seq {v.seq}" in str(info.value)
    assert info.value.hold_id == calls[1] == f"{calls[0]}.report" and "retention hold" in str(info.value)
    assert hold_ids(decided) == {calls[0]} and v.held  # the evidence is held all the same


def test_a_purged_report_is_gone_but_its_event_stays(decided: Ledger) -> None:  # noqa: F811
    case = a_case(decided)
    d = draft(decided, case.case_id)
    filed = file_case_report(decided, case.case_id, d.xml, ALICE, rationale="Filed.")
    with pytest.raises(CaseNotFoundError):
        filed_report(decided.engine, case.case_id, "ab" * 32)
    for hold in (filed.report_hold_id, filed.hold_id):
        release_hold(decided, hold, "court order 2031-4: released")
    purge_payloads(decided, [d.sha256], "erasure order 2031-5")
    with pytest.raises(ReportPurgedError):
        filed_report(decided.engine, case.case_id, d.sha256)
    (v,) = list_case_reports(decided.engine, case.case_id)
    assert (v.sha256, v.in_force, v.held) == (d.sha256, True, False)


# -- the reporting-entity file ------------------------------------------------------------------


def test_the_example_file_loads() -> None:
    rs = read_reporting_settings(EXAMPLE)
    assert rs.entity.rentity_id == 1234 and rs.entity.reporting_person.first_name == "Zoë"
    assert rs.own_bics == frozenset({"EXMPIE2D"}) and rs.funds_code == "K"
    assert dict(rs.transmode_codes) == {"customer": "ELCFT", "institution": "FIFT", "return": "RETRN"}
    assert rs.is_own("EXMPIE2DXXX") and rs.is_own("exmpie2d") and not rs.is_own("EXMPGB2L")


def test_the_entity_part_reaches_the_goaml_reader_as_written() -> None:
    tricky = ('rentity_id = "77"\ncurrency_code_local = "GBP"\n[reporting_person]\n'
              'first_name = "Ann \\"Nan\\" O\'Neil \\\\ \u00e9"\nlast_name = "Ng"\nbirthdate = 1980-02-03\n'
              '[sealtrail]\nfunds_code = "K"\n[sealtrail.transmode_codes]\ncustomer = "A"\n'
              'institution = "B"\nreturn = "C"\n')
    rs = ReportingSettings.from_toml(tricky)
    assert rs.entity.reporting_person.first_name == 'Ann "Nan" O\'Neil \\ \u00e9'
    assert str(rs.entity.reporting_person.birthdate) == "1980-02-03" and rs.own_bics == frozenset()


@pytest.mark.parametrize(("change", "field"), [
    (lambda t: t.replace("[sealtrail]", "[other]"), "other"),  # the entity refuses the unknown table
    (lambda t: t[:t.index("[sealtrail]")], "sealtrail"),
    (lambda t: t.replace("funds_code = ", "funds = "), "sealtrail.funds"),
    (lambda t: t.replace('return = "RETRN"', ""), "sealtrail.transmode_codes.return"),
    (lambda t: t.replace('return = "RETRN"', 'return = "RETRN"\ncash = "X"'),
     "sealtrail.transmode_codes.cash"),
    (lambda t: t.replace('customer = "ELCFT"', 'customer = "EL CFT"'), "sealtrail.transmode_codes.customer"),
    (lambda t: t.replace('["EXMPIE2D"]', '["NOTABIC"]'), "sealtrail.own_bics[0]"),
    (lambda t: t.replace('email = "mlro@bank.example"', 'email = "nobody"'), "reporting_person.email"),
    (lambda t: t.replace("rentity_id = 1234", "rentity_id = 0"), "rentity_id"),
    (lambda t: "= nonsense", "toml"),
])
def test_a_bad_reporting_entity_file_is_refused_naming_the_key(change: Any, field: str) -> None:
    with pytest.raises(ReportError) as info:
        ReportingSettings.from_toml(change(EXAMPLE.read_text("utf-8")))
    assert info.value.field == field


def test_an_unreadable_reporting_entity_file_names_the_setting(tmp_path: Path) -> None:
    for path, data in ((tmp_path / "absent.toml", None), (tmp_path / "latin1.toml", b"\xe9"),
                       (tmp_path / "big.toml", b"#" * (reports.MAX_SETTINGS_BYTES + 1))):
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(ReportError) as info:
            read_reporting_settings(path)
        assert info.value.field == "reporting_entity" and str(path) in info.value.why
