"""The rolling graph: window expiry, the per-account and global caps, late payments, bad input, and
its state saved and restored."""

from __future__ import annotations

import random
from typing import Any

import pytest

from inference.errors import FeatureError
from inference.graph import (
    GraphConfig,
    GraphConfigError,
    GraphFeatures,
    GraphInputError,
    TransactionGraph,
    as_dict,
)

H = 3_600_000_000
DAY = 24 * H


def _add(g: TransactionGraph, orig: str, bene: str, t: int, cents: int = 100) -> None:
    g.check(orig, bene, t, cents)
    src, dst = g.node(orig), g.node(bene)
    g.advance(t)
    g.add(src, dst, t, cents)


def test_hub_with_a_million_payments_keeps_its_cap() -> None:
    g = TransactionGraph(GraphConfig(node_cap=1024))
    sources = [g.node(f"S{i}") for i in range(10)]
    hub = g.node("HUB")
    for i in range(1_000_000):
        t = 1_000 + i
        g.advance(t)
        g.add(sources[i % 10], hub, t, 100)
    assert len(hub.inn) == 1024
    assert all(len(s.out) == 1024 for s in sources)
    assert g.edges_held == 10 * 1024  # each source's newest 1,024; the hub's are among them
    assert g.edges_logged <= 2 * g.edges_held + 1024  # dropped edges do not pile up
    assert len(hub.in_last) == 10
    assert [e[0] for e in hub.inn] == list(range(1_000_000 - 1024 + 1_000, 1_000_000 + 1_000))


def test_global_cap_drops_the_oldest_first() -> None:
    g = TransactionGraph(GraphConfig(global_cap=100))
    for i in range(1_000):
        _add(g, f"A{i}", f"B{i}", i)
    assert g.edges_held == 100
    assert not g.node("A899").out
    assert [e[0] for e in g.node("A900").out] == [900]


def test_edges_expire_as_the_window_moves() -> None:
    gf = GraphFeatures(GraphConfig(window_us=2 * DAY, scatter_us=DAY))
    gf.observe("A", "OLD", 0, 100)
    gf.observe("A", "MID", DAY, 100)
    got = as_dict(gf.observe("A", "NEW", 2 * DAY, 100))  # OLD at 0 is at watermark - window: gone
    assert got["orig_fan_out_30d"] == 2
    assert got["amount_history_n"] == 1
    assert gf.graph.edges_held == 2
    gf.observe("Z", "Y", 10 * DAY, 100)  # time moves on: everything of A's expires
    assert gf.graph.edges_held == 1
    # A holds no edge any more: the graph lets it go (and its payees), keeping only Z and Y
    assert gf.graph.get("A") is None and gf.graph.get("MID") is None
    assert gf.graph.accounts == 2
    back = as_dict(gf.observe("A", "Y", 10 * DAY + 1, 100))  # it comes back as a new account would
    assert back["orig_dormancy_days"] == -1 and back["amount_history_n"] == 0


def test_late_payment_within_tolerance_is_placed_in_time_order() -> None:
    gf = GraphFeatures(GraphConfig(late_us=10 * 60_000_000))
    gf.observe("A", "B", H, 100)
    gf.observe("A", "C", H + 5 * 60_000_000, 100)
    gf.observe("A", "D", H + 60_000_000, 100)  # 4 minutes late
    a = gf.graph.get("A")
    assert a is not None
    assert [e[2] for e in a.out] == ["B", "D", "C"]
    # the same payments in time order give the same state
    ordered = GraphFeatures(GraphConfig(late_us=10 * 60_000_000))
    for o, b, t in [("A", "B", H), ("A", "D", H + 60_000_000), ("A", "C", H + 5 * 60_000_000)]:
        ordered.observe(o, b, t, 100)
    assert [e[2] for e in a.out] == [e[2] for e in ordered.graph.get("A").out]  # type: ignore[union-attr]


def test_time_going_back_beyond_tolerance_is_refused_and_changes_nothing() -> None:
    gf = GraphFeatures()
    gf.observe("A", "B", 10 * H, 100)
    before = gf.state_bytes()
    with pytest.raises(GraphInputError, match="behind the latest seen") as err:
        gf.observe("A", "C", 9 * H, 100)
    assert isinstance(err.value, FeatureError)
    assert gf.state_bytes() == before


@pytest.mark.parametrize(("orig", "bene", "t", "cents", "says"), [
    ("A", "B", H, -1, "non-negative integer of US cents"),
    ("A", "B", H, 1.5, "non-negative integer of US cents"),
    ("A", "B", H, True, "non-negative integer of US cents"),
    ("A", "B", H, None, "non-negative integer of US cents"),
    ("A", "B", float(H), 100, "integer of microseconds"),
    ("A", "B", "3600", 100, "integer of microseconds"),
    ("", "B", H, 100, "non-empty strings"),
    ("A", None, H, 100, "non-empty strings"),
])
def test_bad_payment_is_refused_with_a_feature_error(orig: object, bene: object, t: object, cents: object,
                                                     says: str) -> None:
    gf = GraphFeatures()
    before = gf.state_bytes()
    with pytest.raises(FeatureError, match=says):
        gf.observe(orig, bene, t, cents)  # type: ignore[arg-type]
    assert gf.state_bytes() == before
    assert gf.graph.accounts == 0


@pytest.mark.parametrize("kwargs", [
    {"window_us": 31 * DAY}, {"window_us": 0}, {"cycle_hops": 7}, {"cycle_hops": 1}, {"flag_hops": 0},
    {"scatter_us": 31 * DAY}, {"node_cap": 0}, {"global_cap": 0}, {"search_budget": 0},
    {"late_us": -1}, {"late_us": 30 * DAY}, {"node_cap": 10.0},
])
def test_settings_out_of_range_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(GraphConfigError):
        GraphConfig(**kwargs)  # type: ignore[arg-type]


def test_state_bytes_name_their_format_and_change_with_the_state() -> None:
    gf = GraphFeatures()
    empty = gf.state_bytes()
    assert b'"format":"sealtrail.graph/2"' in empty
    gf.observe("A", "B", H, 100)
    one = gf.state_bytes()
    assert one != empty
    gf.flag("A")
    assert gf.state_bytes() != one


def _stream(n: int, seed: int) -> list[tuple[str, str, int, int]]:
    rng = random.Random(seed)
    names = [f"AC{i:03d}" for i in range(120)]
    t = 1_767_225_600_000_000
    out = []
    for i in range(n):
        t += rng.randrange(90_000_000)
        late = rng.randrange(30_000_000) if rng.random() < 0.05 else 0
        out.append((rng.choice(names[:20] if i % 3 else names), rng.choice(names), t - late,
                    rng.randrange(1, 3_000_000)))
    return out


def test_a_restored_graph_holds_the_same_state_and_gives_the_same_values() -> None:
    cfg = GraphConfig(cycle_hops=4, node_cap=32, global_cap=900, late_us=60_000_000,
                      window_us=DAY, scatter_us=DAY // 2)
    payments = _stream(4000, 11)
    live = GraphFeatures(cfg)
    live.observe_many(payments[:2500])
    live.flag(payments[100][1])
    saved = live.state_bytes()
    again = GraphFeatures.restore(saved, cfg)
    assert again.state_bytes() == saved
    assert again.graph.edges_held == live.graph.edges_held
    assert again.observe_many(payments[2500:]) == live.observe_many(payments[2500:])
    assert again.state_bytes() == live.state_bytes()


@pytest.mark.parametrize(("mangle", "message"), [
    (lambda d: b"not json", "not JSON"),
    (lambda d: d.replace(b"sealtrail.graph/2", b"sealtrail.graph/9"), "is not sealtrail.graph/2"),
    (lambda d: d.replace(b"sealtrail.graph/2", b"sealtrail.graph/1"), "account 0 is malformed"),  # rows of /2
    (lambda d: d.replace(b'"config":[', b'"config":[1,'), "other settings"),
    (lambda d: d.replace(b'"edges":[[', b'"edges":[[9999999999999999,0,0,0,1,1],['), "out of time order"),
    (lambda d: d.replace(b'"edges":[[', b'"edges":[[0,99999,0,5,1,1],['), "edge 0 is malformed"),
    (lambda d: d.replace(b'"accounts":[["', b'"accounts":[[7,"'), "account 0 is malformed"),
])
def test_a_damaged_graph_state_is_refused_naming_what_is_wrong(mangle: Any, message: str) -> None:
    live = GraphFeatures()
    live.observe_many(_stream(50, 3))
    with pytest.raises(GraphInputError, match=message):
        GraphFeatures.restore(mangle(live.state_bytes()))


def test_a_graph_state_kept_under_other_settings_is_refused() -> None:
    live = GraphFeatures(GraphConfig(cycle_hops=5))
    live.observe_many(_stream(20, 4))
    with pytest.raises(GraphInputError, match="other settings"):
        GraphFeatures.restore(live.state_bytes())


@pytest.mark.parametrize("cfg", [
    GraphConfig(cycle_hops=4, node_cap=32, global_cap=900, late_us=60_000_000, window_us=DAY,
                scatter_us=DAY // 2),
    GraphConfig(node_cap=2, global_cap=5_000, late_us=60_000_000),  # edges die by the cap: compaction
], ids=["expiry-and-global-cap", "per-account-cap"])
def test_journaled_payments_are_taken_back_exactly(cfg: GraphConfig) -> None:
    payments = _stream(9000, 21)
    live, reference = GraphFeatures(cfg), GraphFeatures(cfg)
    live.observe_many(payments[:3000])
    reference.observe_many(payments[:3000])
    before = live.state_bytes()
    first = live.begin_journal()
    live.observe_many(payments[3000:6000])
    second = live.begin_journal()  # a second batch prepared behind the first
    live.observe_many(payments[6000:])
    live.end_journal()
    assert live.state_bytes() != before
    live.rollback([first, second])
    assert live.state_bytes() == before
    # and it goes on exactly as a graph that never saw the batches taken back
    assert live.observe_many(payments[4000:5000]) == reference.observe_many(payments[4000:5000])
    assert live.state_bytes() == reference.state_bytes()


def test_a_journal_is_taken_back_once_and_only_by_its_graph() -> None:
    a, b = GraphFeatures(), GraphFeatures()
    journal = a.begin_journal()
    a.observe_many(_stream(30, 5))
    with pytest.raises(GraphInputError, match="another graph"):
        b.rollback([journal])
    a.rollback([journal])
    assert a.graph.accounts == 0
    with pytest.raises(GraphInputError, match="already rolled back"):
        a.rollback([journal])
