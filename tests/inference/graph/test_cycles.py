"""Temporal cycles: money that returns to an account through hops each later than the last."""

from __future__ import annotations

import pytest

from inference.graph import GraphConfig, GraphFeatures, as_dict

H = 3_600_000_000
DAY = 24 * H


def _last(config: GraphConfig, hops: list[tuple[str, str, int]]) -> dict[str, int]:
    gf = GraphFeatures(config)
    values: tuple[int, ...] = ()
    for orig, bene, t in hops:
        values = gf.observe(orig, bene, t, 10_000)
    return as_dict(values)


def test_three_hop_cycle_with_increasing_times_is_found() -> None:
    got = _last(GraphConfig(), [("A", "B", 1 * H), ("B", "C", 2 * H), ("C", "A", 3 * H)])
    assert (got["cycle_len"], got["cycle_count"], got["cycle_truncated"]) == (3, 1, 0)


def test_cycle_whose_last_hop_is_earlier_than_the_previous_is_not_found() -> None:
    # A->B at 1 h, C->A at 2 h, B->C at 3 h: the money B sent on at 3 h cannot have come back at 2 h.
    gf = GraphFeatures()
    seen = [as_dict(gf.observe(o, b, t, 10_000))["cycle_len"]
            for o, b, t in [("A", "B", 1 * H), ("C", "A", 2 * H), ("B", "C", 3 * H)]]
    assert seen == [0, 0, 0]


def test_two_hop_round_trip_is_a_cycle_of_two() -> None:
    got = _last(GraphConfig(), [("A", "B", 1 * H), ("B", "A", 2 * H)])
    assert (got["cycle_len"], got["cycle_count"]) == (2, 1)


def test_cycle_longer_than_k_is_not_found_and_is_at_a_deeper_k() -> None:
    hops = [("A", "B", 1 * H), ("B", "C", 2 * H), ("C", "D", 3 * H), ("D", "A", 4 * H)]
    assert _last(GraphConfig(cycle_hops=3), hops)["cycle_len"] == 0
    assert _last(GraphConfig(cycle_hops=4), hops)["cycle_len"] == 4


def test_six_hop_cycle_at_k_six_and_shortest_reported() -> None:
    names = "ABCDEF"
    hops = [(names[i], names[(i + 1) % 6], (i + 1) * H) for i in range(6)]
    assert _last(GraphConfig(cycle_hops=6), hops)["cycle_len"] == 6
    # a shortcut B->F after A->B: the same closing payment F->A now also closes A->B->F->A
    hops2 = [*hops[:1], ("B", "F", int(1.5 * H)), *hops[1:]]
    got = _last(GraphConfig(cycle_hops=6), hops2)
    assert (got["cycle_len"], got["cycle_count"]) == (3, 2)


def test_parallel_routes_are_counted_once_each() -> None:
    hops = [("A", "B", 1 * H), ("A", "D", 1 * H + 1), ("B", "C", 2 * H), ("D", "C", 2 * H + 1),
            ("B", "C", 2 * H + 2)]  # a second payment on the same route adds no route
    got = _last(GraphConfig(cycle_hops=4), [*hops, ("C", "A", 3 * H)])
    assert (got["cycle_len"], got["cycle_count"]) == (3, 2)  # A->B->C->A and A->D->C->A


def test_cycle_that_started_before_the_window_is_not_found() -> None:
    cfg = GraphConfig(window_us=2 * DAY, scatter_us=DAY)
    assert _last(cfg, [("A", "B", 0), ("B", "C", 2 * DAY - H), ("C", "A", 2 * DAY + H)])["cycle_len"] == 0
    assert _last(cfg, [("A", "B", H), ("B", "C", 2 * DAY - H), ("C", "A", 2 * DAY)])["cycle_len"] == 3


def test_self_transfer_closes_no_cycle() -> None:
    assert _last(GraphConfig(), [("A", "A", H), ("A", "A", 2 * H)])["cycle_len"] == 0


def test_search_budget_stops_the_search_and_says_so() -> None:
    # A pays 50 accounts, each of which pays C, and C pays A: 50 routes, the budget allows 10 edges.
    hops = [("A", f"M{i:02d}", H + i) for i in range(50)]
    hops += [(f"M{i:02d}", "C", 2 * H + i) for i in range(50)]
    hops += [("C", "X", 3 * H), ("X", "A", 4 * H)]
    full = _last(GraphConfig(cycle_hops=4), hops)
    assert (full["cycle_len"], full["cycle_count"], full["cycle_truncated"]) == (4, 50, 0)
    cut = _last(GraphConfig(cycle_hops=4, search_budget=10), hops)
    assert cut["cycle_truncated"] == 1
    assert cut["cycle_count"] < 50


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_payroll_fan_out_closes_no_cycle(k: int) -> None:
    gf = GraphFeatures(GraphConfig(cycle_hops=k))
    gf.observe("FUNDER", "EMPLOYER", H, 50_000_000)
    for i in range(200):
        got = as_dict(gf.observe("EMPLOYER", f"STAFF{i:03d}", 2 * H + i * 1_000_000, 250_000))
        assert got["cycle_len"] == 0


def test_late_closing_payment_does_not_use_a_hop_after_it() -> None:
    minute = 60_000_000
    cfg = GraphConfig(late_us=10 * minute)
    base = [("A", "B", 1 * H), ("A", "X1", 1 * H + 1), ("A", "X2", 1 * H + 2)]
    # B pays C only at 3 h; the payment C -> A at 2 h 55 arrives late: no money had come round yet
    later_only = _last(cfg, [*base, ("B", "C", 3 * H), ("C", "A", 3 * H - 5 * minute)])
    assert later_only["cycle_len"] == 0
    # B also paid C at 2 h: that hop is before the late payment, so the cycle is there
    both = _last(cfg, [*base, ("B", "C", 2 * H), ("B", "C", 3 * H), ("C", "A", 3 * H - 5 * minute)])
    assert (both["cycle_len"], both["cycle_count"]) == (3, 1)
