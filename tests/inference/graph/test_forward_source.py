"""``forward_source_fan_out`` on hand-built cases: a salary passed on comes from an employer that
paid its whole staff, money a mule passes on from a victim who paid one account; the value follows
the sender's window, the forwarded amount's choice and the extractor's row."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import numpy as np

from inference.explain import reasons
from inference.features import FeatureExtractor
from inference.graph import GraphConfig, GraphFeatures, as_dict
from inference.messages.transaction import R16, Party, Transaction
from inference.schema import EXTRACTED_NAMES, FEATURE_NAMES, feature_names, model_columns

H = 3_600_000_000
DAY = 24 * H
T0 = 1_767_225_600_000_000  # 2026-01-01 00:00 UTC


def test_a_salary_passed_on_names_an_employer_that_paid_forty_staff() -> None:
    gf = GraphFeatures()
    for i in range(40):  # payroll: one employer, forty staff, one morning
        gf.observe("EMPLOYER", f"STAFF{i:02d}", T0 + i * 1_000_000, 300_000)
    got = as_dict(gf.observe("STAFF07", "SAVINGS07", T0 + 3 * H, 240_000))
    assert (got["forward_share_permille"], got["forward_delay_hours"]) == (800, 2)
    assert got["forward_source_fan_out"] == 40


def test_money_a_mule_passes_on_names_a_victim_that_paid_one_account() -> None:
    gf = GraphFeatures()
    gf.observe("VICTIM", "MULE", T0, 500_000)
    got = as_dict(gf.observe("MULE", "COLLECTOR", T0 + H, 460_000))
    assert got["forward_share_permille"] == 920
    assert got["forward_source_fan_out"] == 1


def test_no_forwarded_amount_reads_minus_one() -> None:
    gf = GraphFeatures()
    assert as_dict(gf.observe("A", "B", T0, 100))["forward_source_fan_out"] == -1  # nothing received
    gf.observe("C", "A", T0 + H, 50)
    assert as_dict(gf.observe("A", "B", T0 + 2 * H, 100))["forward_source_fan_out"] == -1  # too small
    assert as_dict(gf.observe("A", "B", T0 + 3 * H, 0))["forward_source_fan_out"] == -1  # nothing paid


def test_the_sender_is_that_of_the_smallest_amount_covering_the_payment() -> None:
    gf = GraphFeatures()
    for i in range(12):
        gf.observe("BIG", f"P{i}", T0 + i, 10_000)  # BIG pays twelve accounts, A among them (P0)
    gf.observe("BIG", "A", T0 + 20, 1_000_000)
    gf.observe("SMALL", "A", T0 + 30, 20_000)
    # 15,000 fits under SMALL's 20,000: SMALL paid one account
    assert as_dict(gf.observe("A", "X", T0 + H, 15_000))["forward_source_fan_out"] == 1
    # 30,000 only under BIG's 1,000,000: BIG paid thirteen
    assert as_dict(gf.observe("A", "X", T0 + 2 * H, 30_000))["forward_source_fan_out"] == 13


def test_the_senders_fan_out_is_over_the_window_held_not_its_whole_history() -> None:
    cfg = GraphConfig(window_us=2 * DAY, scatter_us=DAY)
    gf = GraphFeatures(cfg)
    for i in range(30):
        gf.observe("EMPLOYER", f"OLD{i}", T0 + i, 100)  # a payroll run that leaves the window
    gf.observe("EMPLOYER", "A", T0 + 3 * DAY, 5_000)
    got = as_dict(gf.observe("A", "B", T0 + 3 * DAY + H, 4_000))
    assert got["forward_source_fan_out"] == 1  # the thirty old payments are past the 2-day window


def _tx(orig: str, bene: str, amount: str) -> Transaction:
    o = Party(name="Alice", account=orig, iban=orig, country=orig[:2])
    b = Party(name="Bob", account=bene, iban=bene, country=bene[:2])
    return Transaction("json", "R", Decimal(amount), "EUR", date(2026, 3, 2), o, b, "0" * 64,
                       r16=R16.of(o, b))


def test_the_extractor_puts_it_after_the_forwarding_columns_of_features_4() -> None:
    assert (*feature_names("sealtrail.features/4"), "forward_source_fan_out") == EXTRACTED_NAMES
    assert FEATURE_NAMES[:len(EXTRACTED_NAMES)] == EXTRACTED_NAMES
    assert model_columns(feature_names("sealtrail.features/4"), "sealtrail.features/7") == 59
    employer, staff, savings = "DE89370400440532013000", "DE02120300000000202051", "DE12500105170648489890"
    at = datetime(2026, 3, 2, 8, tzinfo=UTC)
    txs = [_tx(employer, staff, "3000.00"), _tx(employer, "FR1420041010050500013M02606", "3000.00"),
           _tx(staff, savings, "2400.00")]
    rows = FeatureExtractor().extract(txs, [at, at, at + timedelta(hours=3)])
    col = EXTRACTED_NAMES.index("forward_source_fan_out")
    assert rows.shape[1] == len(EXTRACTED_NAMES)
    assert rows[2, col] == 2  # the employer paid two accounts
    o, b = Party(name="Alice", iban=employer, country="DE"), Party(name="Bob", country="DE")  # no account
    unknown = Transaction("json", "R", Decimal("1.00"), "EUR", date(2026, 3, 2), o, b, "0" * 64,
                          r16=R16.of(o, b))
    assert np.isnan(FeatureExtractor().extract([unknown], [at])[0, col])


def test_the_reason_names_how_many_accounts_the_sender_paid() -> None:
    row = np.zeros(len(FEATURE_NAMES))
    attr = np.zeros(len(FEATURE_NAMES))
    row[FEATURE_NAMES.index("forward_share_permille")] = 920
    row[FEATURE_NAMES.index("forward_delay_hours")] = 1
    row[FEATURE_NAMES.index("forward_source_fan_out")] = 1
    attr[FEATURE_NAMES.index("forward_source_fan_out")] = 0.3
    got = reasons(FEATURE_NAMES, row, attr)
    assert got[0].code == "FORWARDED_AMOUNT"
    assert got[0].text == ("the sender passed on 92.0% of an amount it received, 1 hour after it came in, "
                           "from an account that paid 1 account in 30 days")
    old = feature_names("sealtrail.features/5")  # a record of before: its words as they were
    row5 = np.array([row[FEATURE_NAMES.index(n)] for n in old])
    attr5 = np.zeros(len(old))
    attr5[old.index("forward_share_permille")] = 0.3
    assert reasons(old, row5, attr5)[0].text == ("the sender passed on 92.0% of an amount it received, "
                                                 "1 hour after it came in")
