"""Per-payment graph features on hand-built cases: mule collection against payroll, a dormant
account waking, pass-through, forwarding of a received amount, the amount against the account's
history and hops to a flagged account."""

from __future__ import annotations

from inference.graph import GRAPH_FEATURE_NAMES, GraphConfig, GraphFeatures, as_dict
from inference.graph.fixedpoint import log2_q8

H = 3_600_000_000
DAY = 24 * H
WEEK = 7 * DAY
T0 = 2_930 * WEEK  # a period boundary (2026-02-26), so the 7-day periods are easy to read


def test_values_are_integers_in_the_named_order() -> None:
    values = GraphFeatures().observe("A", "B", T0, 100)
    assert len(values) == len(GRAPH_FEATURE_NAMES)
    assert all(type(v) is int for v in values)


def test_forty_sources_then_fan_out_is_scatter_gather_of_forty() -> None:
    gf = GraphFeatures()
    for i in range(40):
        gf.observe(f"SRC{i:02d}", "MULE", T0 + i * 60_000_000, 95_000)
    first = as_dict(gf.observe("MULE", "OUT1", T0 + 2 * H, 1_800_000))
    assert first["scatter_gather"] == 40
    assert first["orig_fan_in_1d"] == 40
    assert first["pass_through_24h_q16"] == (1_800_000 << 16) // (40 * 95_000)
    second = as_dict(gf.observe("MULE", "OUT2", T0 + 3 * H, 1_800_000))
    assert second["scatter_gather"] == 40
    assert second["orig_fan_out_1d"] == 2
    assert second["pass_through_24h_q16"] == (3_600_000 << 16) // (40 * 95_000)


def test_scatter_gather_counts_only_sources_inside_its_window() -> None:
    gf = GraphFeatures(GraphConfig(scatter_us=DAY))
    gf.observe("OLD", "M", T0, 100)
    gf.observe("NEW", "M", T0 + 2 * DAY, 100)
    assert as_dict(gf.observe("M", "X", T0 + 2 * DAY + H, 100))["scatter_gather"] == 1


def test_payroll_fan_out_is_told_apart_from_mule_forwarding() -> None:
    gf = GraphFeatures()
    gf.observe("REVENUE", "EMPLOYER", T0, 60_000_000)
    rows = [as_dict(gf.observe("EMPLOYER", f"STAFF{i:03d}", T0 + H + i * 10_000_000, 280_000))
            for i in range(200)]
    last = rows[-1]
    assert last["orig_fan_out_1d"] == 200  # high fan-out ...
    assert max(r["cycle_len"] for r in rows) == 0  # ... no money coming back ...
    assert max(r["scatter_gather"] for r in rows) == 1  # ... fed by one source, not many
    assert last["flagged_hops"] == -1


def test_dormant_account_waking_reports_days_since_its_last_activity() -> None:
    gf = GraphFeatures()
    assert as_dict(gf.observe("SLEEPER", "SHOP", T0, 5_000))["orig_dormancy_days"] == -1  # never seen
    napped = as_dict(gf.observe("NAPPER", "SHOP", T0, 5_000))
    napped = as_dict(gf.observe("NAPPER", "X0", T0 + 21 * DAY + 3 * H, 700_000))
    assert napped["orig_dormancy_days"] == 21  # inside the window: days since its latest payment
    woke = as_dict(gf.observe("SLEEPER", "X1", T0 + 45 * DAY + 5 * H, 900_000))
    assert woke["orig_dormancy_days"] == -1  # nothing in the 30-day window: as quiet as a new account
    assert woke["orig_activity_24h"] == 1
    assert woke["amount_history_n"] == 0  # its old payment has left the window
    burst = [as_dict(gf.observe("SLEEPER", f"X{i}", T0 + 45 * DAY + 6 * H + i, 900_000)) for i in range(2, 9)]
    assert burst[-1]["orig_dormancy_days"] == 0
    assert burst[-1]["orig_activity_24h"] == 8


def test_activity_counts_both_directions_inside_24_hours() -> None:
    gf = GraphFeatures()
    gf.observe("A", "B", T0, 100)
    gf.observe("C", "A", T0 + 4 * H, 100)
    gf.observe("A", "D", T0 + DAY + 2 * H, 100)  # the first one is now more than 24 h back
    assert as_dict(gf.observe("A", "E", T0 + DAY + 3 * H, 100))["orig_activity_24h"] == 3


def test_pass_through_is_capped_and_zero_without_money_in() -> None:
    gf = GraphFeatures()
    assert as_dict(gf.observe("A", "B", T0, 1_000))["pass_through_24h_q16"] == 0  # nothing came in
    gf.observe("C", "A", T0 + H, 100)
    got = as_dict(gf.observe("A", "B", T0 + 2 * H, 100_000))
    assert got["pass_through_24h_q16"] == 4 << 16  # out / in = 1,010: reported as the cap, 4.0
    gf.observe("D", "A", T0 + 9 * DAY, 500_000)
    later = as_dict(gf.observe("A", "B", T0 + 9 * DAY + H, 250_000))
    assert later["pass_through_24h_q16"] == 1 << 15  # 250,000 / 500,000 = 0.5
    assert later["pass_through_7d_q16"] == 1 << 15  # the first week's flows are older than 7 days


def test_a_layering_hop_forwards_what_it_received_less_a_small_fee_a_day_later() -> None:
    gf = GraphFeatures()
    gf.observe("X", "HOP", T0, 1_000_000)  # USD 10,000 in
    got = as_dict(gf.observe("HOP", "NEXT", T0 + 30 * H + 59 * 60_000_000, 985_000))  # 98.5 % out
    assert (got["forward_share_permille"], got["forward_delay_hours"]) == (985, 30)
    assert got["pass_through_24h_q16"] == 0  # more than 24 hours apart: the 24-hour window misses it


def test_a_salary_passed_on_keeps_a_fifth_and_is_told_apart_from_a_hop() -> None:
    gf = GraphFeatures()
    gf.observe("EMPLOYER", "PERSON", T0, 300_000)
    got = as_dict(gf.observe("PERSON", "SAVINGS", T0 + 2 * H, 240_000))
    assert (got["forward_share_permille"], got["forward_delay_hours"]) == (800, 2)


def test_forwarding_matches_the_smallest_amount_received_that_covers_the_payment() -> None:
    gf = GraphFeatures()
    gf.observe("A", "M", T0, 1_000_000)
    gf.observe("B", "M", T0 + H, 500_000)
    gf.observe("C", "M", T0 + 2 * H, 400_000)  # smaller than the payment: it cannot be the source
    gf.observe("D", "M", T0 + 3 * H, 500_000)  # the same amount again, later
    got = as_dict(gf.observe("M", "OUT", T0 + 9 * H, 490_000))
    assert got["forward_share_permille"] == 980  # 490,000 of 500,000
    assert got["forward_delay_hours"] == 6  # from the latest 500,000, not the first


def test_forwarding_reads_nothing_without_a_covering_amount_in_the_seven_days_before() -> None:
    gf = GraphFeatures()
    nothing = as_dict(gf.observe("M", "OUT", T0, 100))  # nothing received
    assert (nothing["forward_share_permille"], nothing["forward_delay_hours"]) == (0, -1)
    gf.observe("A", "M", T0 + H, 50_000)
    too_big = as_dict(gf.observe("M", "OUT", T0 + 2 * H, 50_001))
    assert (too_big["forward_share_permille"], too_big["forward_delay_hours"]) == (0, -1)
    gf.observe("B", "M", T0 + 3 * H, 900_000)
    week_later = as_dict(gf.observe("M", "OUT", T0 + 3 * H + 7 * DAY, 800_000))  # exactly 7 days: outside
    assert week_later["forward_delay_hours"] == -1
    gf.observe("C", "M", T0 + 8 * DAY, 900_000)
    same_instant = as_dict(gf.observe("M", "OUT", T0 + 8 * DAY, 800_000))  # received at this microsecond
    assert same_instant["forward_delay_hours"] == -1
    whole = as_dict(gf.observe("M", "OUT", T0 + 8 * DAY + 1, 900_000))
    assert (whole["forward_share_permille"], whole["forward_delay_hours"]) == (1000, 0)  # all of it, at once
    zero = as_dict(gf.observe("M", "OUT", T0 + 8 * DAY + 2, 0))  # nothing passed on
    assert (zero["forward_share_permille"], zero["forward_delay_hours"]) == (0, -1)


def test_amount_against_the_accounts_own_history() -> None:
    gf = GraphFeatures()
    for i in range(10):
        gf.observe("A", f"P{i}", T0 + i * H, 10_000 + i)  # USD 100.00 .. 100.09
    got = as_dict(gf.observe("A", "BIG", T0 + 11 * H, 1_000_000))
    assert got["amount_history_n"] == 10
    assert got["amount_log2_ratio_q8"] == log2_q8(1_000_000) - log2_q8(10_004)  # lower median: 10,004
    assert 1_697 <= got["amount_log2_ratio_q8"] <= 1_703  # log2(100) = 6.64 -> 1,700.9 / 256
    assert got["amount_percentile_permille"] == 1000  # above every earlier one
    low = as_dict(gf.observe("A", "SMALL", T0 + 12 * H, 10_004))
    assert low["amount_percentile_permille"] == (1000 * (2 * 4 + 1)) // (2 * 11)  # mid-rank of 11
    assert low["amount_log2_ratio_q8"] == 0  # the median of 11 is 10,005; same top nine bits


def test_fan_counts_over_one_seven_and_thirty_days() -> None:
    gf = GraphFeatures()
    gf.observe("A", "OLD", T0, 100)  # 20 days before
    gf.observe("A", "WEEK", T0 + 17 * DAY, 100)  # 3 days before
    gf.observe("IN2", "A", T0 + 19 * DAY, 100)  # exactly 24 h back: outside (t - 24 h, t]
    gf.observe("IN", "A", T0 + 19 * DAY + H, 100)
    got = as_dict(gf.observe("A", "TODAY", T0 + 20 * DAY, 100))
    assert (got["orig_fan_out_1d"], got["orig_fan_out_7d"], got["orig_fan_out_30d"]) == (1, 2, 3)
    assert (got["orig_fan_in_1d"], got["orig_fan_in_7d"], got["orig_fan_in_30d"]) == (1, 2, 2)
    assert (got["bene_fan_in_1d"], got["bene_fan_in_7d"], got["bene_fan_in_30d"]) == (1, 1, 1)


def test_hops_to_a_flagged_account_either_way() -> None:
    gf = GraphFeatures()
    gf.observe("A", "B", T0, 100)
    gf.observe("C", "B", T0 + H, 100)  # B is paid by C: the link counts against its direction
    assert as_dict(gf.observe("X", "A", T0 + 2 * H, 100))["flagged_hops"] == -1  # nothing flagged
    gf.flag("C")
    assert as_dict(gf.observe("Y", "A", T0 + 3 * H, 100))["flagged_hops"] == 2  # A - B - C
    assert as_dict(gf.observe("Z", "B", T0 + 4 * H, 100))["flagged_hops"] == 1  # B - C
    assert as_dict(gf.observe("C", "Q", T0 + 5 * H, 100))["flagged_hops"] == 0  # C itself
    far = GraphFeatures(GraphConfig(flag_hops=1))
    far.observe("A", "B", T0, 100)
    far.observe("B", "C", T0 + H, 100)
    far.flag("C")
    assert as_dict(far.observe("Y", "A", T0 + 2 * H, 100))["flagged_hops"] == -1  # 2 hops > 1
    gf.unflag("C")
    assert as_dict(gf.observe("W", "A", T0 + 6 * H, 100))["flagged_hops"] == -1


def test_flag_on_an_unseen_account_is_found_once_it_is_linked() -> None:
    gf = GraphFeatures()
    gf.flag("BLOCKED")
    gf.observe("BLOCKED", "M", T0, 100)
    assert as_dict(gf.observe("M", "N", T0 + H, 100))["flagged_hops"] == 1
