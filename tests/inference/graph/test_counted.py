"""The graph as ``sealtrail.graph/1`` held it (``CountedGraph``): the same values as the graph of
today, its usual-counterparty counts on hand-built weeks, and its state bytes in that format."""

from __future__ import annotations

import random

import pytest

from inference.graph import CountedGraph, GraphFeatures
from inference.graph.errors import GraphInputError

H = 3_600_000_000
DAY = 24 * H
WEEK = 7 * DAY
T0 = 2_930 * WEEK  # a period boundary (2026-02-26), so the 7-day periods are easy to read


def _ema_out(gf: GraphFeatures, key: str) -> int:
    assert isinstance(gf.graph, CountedGraph)
    counts = gf.graph.counts_of(key)
    assert counts is not None
    return counts["ema_out"]


def test_usual_counterparties_is_a_running_mean_over_completed_weeks() -> None:
    gf = GraphFeatures(graph=CountedGraph)
    for week in range(3):
        for j in range(4):
            gf.observe("A", f"W{week}P{j}", T0 + week * WEEK + j * H, 100)
    gf.observe("A", "NEW", T0 + 3 * WEEK + H, 100)
    assert _ema_out(gf, "A") == 4 << 16  # 4, 4, 4 distinct payees a week
    # one week with 20 payees: the mean moves a quarter of the way towards 20
    for j in range(19):
        gf.observe("A", f"BURST{j}", T0 + 3 * WEEK + 2 * H + j, 100)
    gf.observe("A", "AFTER", T0 + 4 * WEEK + H, 100)
    assert _ema_out(gf, "A") == (4 << 16) + ((20 << 16) - (4 << 16)) // 4  # 8.0
    # two silent weeks pull it down a quarter each
    gf.observe("A", "LATE", T0 + 7 * WEEK + H, 100)
    ema = (8 << 16) + ((1 << 16) - (8 << 16)) // 4  # the week with one payee ("AFTER")
    ema -= ema // 4
    ema -= ema // 4
    assert _ema_out(gf, "A") == ema


def test_a_payee_paid_again_in_the_same_week_is_not_new() -> None:
    gf = GraphFeatures(graph=CountedGraph)
    for i in range(5):
        gf.observe("A", "SAME", T0 + i * H, 100)
    gf.observe("A", "X", T0 + WEEK + H, 100)
    assert _ema_out(gf, "A") == 1 << 16


def test_an_account_let_go_loses_its_counts() -> None:
    gf = GraphFeatures(graph=CountedGraph)
    gf.observe("A", "B", T0, 100)
    gf.observe("C", "D", T0 + 31 * DAY, 100)  # A -> B expires: both let go
    assert gf.graph.get("A") is None and isinstance(gf.graph, CountedGraph)
    assert gf.graph.counts_of("A") is None and len(gf.graph.counts) == 2
    gf.observe("A", "E", T0 + 32 * DAY, 100)
    assert gf.graph.counts_of("A") == {"last": T0 + 32 * DAY, "period": (T0 + 32 * DAY) // WEEK, "p_out": 1,
                                       "p_in": 0, "periods": 0, "ema_out": 0, "ema_in": 0}


def test_the_values_are_todays_and_the_bytes_round_trip_as_graph_1() -> None:
    rng = random.Random(3)
    t = T0
    stream = []
    for _ in range(3000):
        t += rng.randrange(2 * 60 * DAY // 3000)
        stream.append((f"A{rng.randrange(60)}", f"A{rng.randrange(400)}", t, rng.randrange(10**6)))
    plain, counted = GraphFeatures(), GraphFeatures(graph=CountedGraph)
    assert plain.observe_many(stream[:2000]) == counted.observe_many(stream[:2000])
    saved = counted.state_bytes()
    assert saved.startswith(b'{"format":"sealtrail.graph/1"')
    again = GraphFeatures.restore(saved, graph=CountedGraph)
    assert again.state_bytes() == saved
    read_plain = GraphFeatures.restore(saved)  # today's graph reads it, letting the counts go
    assert read_plain.state_bytes() == plain.state_bytes()
    rest = stream[2000:]
    assert again.observe_many(rest) == counted.observe_many(rest) == plain.observe_many(rest)
    assert again.state_bytes() == counted.state_bytes()
    with pytest.raises(GraphInputError, match=r"no sealtrail\.graph/1 counts"):
        GraphFeatures.restore(plain.state_bytes(), graph=CountedGraph)
    with pytest.raises(GraphInputError, match="not journaled"):
        counted.begin_journal()
