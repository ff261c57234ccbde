"""The graph's fast paths against their straightforward definitions, on random streams with small
caps, late payments and small search budgets: the 3-hop cycle search from the intersection of two
key sets against the walk over edges it replaces, and the inlined windows of ``observe`` against
slices of the kept lists. Also: accounts left without edges are let go, and a rollback brings them
back in their place."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.graph import CountedGraph, GraphConfig, GraphFeatures, as_dict
from inference.graph.config import DAY_US, WEEK_US
from inference.graph.cycles import CYCLE_COUNT_CAP, temporal_cycle
from inference.graph.errors import GraphInputError
from inference.graph.fixedpoint import log2_q8, mid_rank_permille, ratio_q16
from inference.graph.store import Edge, Node, TransactionGraph

H = 3_600_000_000
_BEFORE_ALL = -(1 << 62)


def _paid_between(x: Node, u: Node, after: int, before: int) -> bool:
    """x's kept sent edges hold one to u with after < time < before (a plain scan)."""
    return any(e[2] == u.key and after < e[0] < before for e in x.out)


def _three_hop_walk(graph: TransactionGraph, u: Node, v: Node, t: int, budget: int) -> tuple[int, int, int]:
    """The k = 3 search as first written: over u's received side when it is the smaller, else over
    v's sent edges in time order, one budget step per account or edge visited."""
    shortest = count = 0
    into_u = u.in_last
    if u is v or not into_u:
        return 0, 0, 0
    if v in into_u and _paid_between(v, u, _BEFORE_ALL, t):
        shortest, count = 2, 1
    left = budget
    if len(into_u) < len(v.out_last):
        for y, last_in in into_u.items():
            if y not in v.out_last or y is v or y is u:
                continue
            left -= 1
            if left < 0:
                return shortest, count, 1
            t2: int | None = last_in[0]
            if t2 is not None and t2 >= t:
                before = [e[0] for e in y.out if e[2] == u.key and e[0] < t]
                t2 = before[-1] if before else None
            if t2 is not None and _paid_between(v, y, _BEFORE_ALL, t2):
                shortest = shortest or 3
                count = min(count + 1, CYCLE_COUNT_CAP)
        return shortest, count, 0
    seen: set[str] = set()
    for e in v.out:
        if e[0] >= t:
            break
        left -= 1
        if left < 0:
            return shortest, count, 1
        key = e[2]
        if key not in (u.key, v.key) and key not in seen and (n := graph.nodes[key]) in into_u:
            seen.add(key)
            if _paid_between(n, u, e[0], t):
                shortest = shortest or 3
                count = min(count + 1, CYCLE_COUNT_CAP)
    return shortest, count, 0


def _window(edges: list[Edge], t: int, days: int, who: Callable[[Edge], str]) -> tuple[int, int, int]:
    """Edges of a kept list in (t - days, t]: how many, their cents, their distinct counterparties."""
    part = [e for e in edges if t - days * DAY_US < e[0] <= t]
    return len(part), sum(e[3] for e in part), len({who(e) for e in part})


def _src(e: Edge) -> str:
    return e[1]


def _dst(e: Edge) -> str:
    return e[2]


def _expected_before(gf: GraphFeatures, orig: str, bene: str, t: int, cents: int) -> dict[str, int] | None:
    """The values measured before the payment, from their definitions over the kept lists (None when
    an account is new: then every one of them is an empty-history value, checked by other tests)."""
    g, cfg = gf.graph, gf.config
    g.advance(t)  # what observe does first (expiry); advancing again there changes nothing
    src, dst = g.get(orig), g.get(bene)
    if src is None or dst is None:
        return None
    hist = sorted(e[3] for e in src.out)
    held = [e[0] for e in src.out + src.inn]
    last = max(held) if held else -1
    c_len, c_count, c_cut = _three_hop_walk(g, src, dst, t, cfg.search_budget)
    return {
        "cycle_len": c_len, "cycle_count": c_count, "cycle_truncated": c_cut,
        "scatter_gather": len({e[1] for e in src.inn if t - cfg.scatter_us < e[0] < t}),
        "orig_dormancy_days": -1 if last < 0 else (t - last) // DAY_US if t > last else 0,
        "amount_history_n": len(hist),
        "amount_log2_ratio_q8": (log2_q8(max(cents, 1)) - log2_q8(max(hist[(len(hist) - 1) // 2], 1))
                                 if hist else 0),
        "amount_percentile_permille": mid_rank_permille(hist, cents),
    }


def _expected_after(gf: GraphFeatures, orig: str, bene: str, t: int) -> dict[str, int]:
    src, dst = gf.graph.get(orig), gf.graph.get(bene)
    assert src is not None and dst is not None
    n_out1, out1, o_out1 = _window(src.out, t, 1, _dst)
    _, out7, o_out7 = _window(src.out, t, 7, _dst)
    n_in1, in1, o_in1 = _window(src.inn, t, 1, _src)
    _, in7, o_in7 = _window(src.inn, t, 7, _src)
    return {
        "orig_fan_out_1d": o_out1, "orig_fan_out_7d": o_out7, "orig_fan_out_30d": len(src.out_last),
        "orig_fan_in_1d": o_in1, "orig_fan_in_7d": o_in7, "orig_fan_in_30d": len(src.in_last),
        "bene_fan_in_1d": _window(dst.inn, t, 1, _src)[2], "bene_fan_in_7d": _window(dst.inn, t, 7, _src)[2],
        "bene_fan_in_30d": len(dst.in_last),
        "pass_through_24h_q16": ratio_q16(out1, in1, 4 << 16),
        "pass_through_7d_q16": ratio_q16(out7, in7, 4 << 16),
        "orig_activity_24h": n_out1 + n_in1,
    }


def _random_stream(seed: int, n: int, accounts: int, gap: int) -> list[tuple[int, int, int, int, int]]:
    """(originator, beneficiary, gap before it, how late, cents): a few busy accounts and many quiet."""
    rng = random.Random(seed)
    busy = max(2, accounts // 4)
    return [(rng.randrange(busy if rng.random() < 0.6 else accounts), rng.randrange(accounts),
             rng.randrange(gap), rng.randrange(10 * 60_000_000) if rng.random() < 0.1 else 0,
             rng.choice((0, 100, 5_000, 5_000, rng.randrange(2_000_000)))) for _ in range(n)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([6, 12, 40]), st.sampled_from([2, 3, 1024]),
       st.sampled_from([1, 4, 20_000]), st.sampled_from([1, 2, 30]), st.sampled_from([40, 100_000]))
def test_observe_matches_the_straightforward_definitions(
        seed: int, accounts: int, node_cap: int, budget: int, window_days: int, global_cap: int) -> None:
    stream = _random_stream(seed, 300, accounts, 4 * H)
    cfg = GraphConfig(node_cap=node_cap, search_budget=budget, window_us=window_days * DAY_US,
                      scatter_us=min(3 * DAY_US, window_days * DAY_US), late_us=15 * 60_000_000,
                      global_cap=global_cap)
    gf = GraphFeatures(cfg)
    t = 1_767_225_600_000_000
    for o, b, gap, late, cents in stream:
        t += gap
        when = t - late if gf.graph.watermark is None or t - late >= gf.graph.watermark - cfg.late_us else t
        orig, bene = f"A{o}", f"A{b}"
        before = _expected_before(gf, orig, bene, when, cents)
        got = as_dict(gf.observe(orig, bene, when, cents))
        if before is not None:
            assert {k: got[k] for k in before} == before
        after = _expected_after(gf, orig, bene, when)
        assert {k: got[k] for k in after} == after
        # accounts without an edge and without a flag are not held
        assert all(n.out or n.inn or n.flagged for n in gf.graph.nodes.values())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([5, 10, 30]), st.sampled_from([1, 2, 5, 20_000]),
       st.sampled_from([2, 4, 1024]))
def test_three_hop_search_matches_the_walk_it_replaces(seed: int, accounts: int, budget: int,
                                                      node_cap: int) -> None:
    gf = GraphFeatures(GraphConfig(node_cap=node_cap, search_budget=budget))
    t = 1_767_225_600_000_000
    for o, b, gap, _, _ in _random_stream(seed, 300, accounts, 2 * H):
        t += gap
        src, dst = gf.graph.get(f"A{o}"), gf.graph.get(f"A{b}")
        if src is not None and dst is not None:
            late = t - 60_000_000  # a late payment too: edges after it must be left out
            for when in (t, late):
                assert (temporal_cycle(src, dst, when, 3, budget, gf.graph.nodes)
                        == _three_hop_walk(gf.graph, src, dst, when, budget))
        gf.observe(f"A{o}", f"A{b}", t, 100)


def test_accounts_without_edges_are_let_go_and_flagged_ones_kept() -> None:
    gf = GraphFeatures(GraphConfig(window_us=2 * DAY_US, scatter_us=DAY_US))
    t0 = 1_767_225_600_000_000
    for i in range(1000):  # a thousand one-off payers over 1,000 hours: only two days' worth are held
        gf.observe(f"P{i}", "SHOP", t0 + i * H, 500)
    assert gf.graph.accounts == 49  # 48 payers within the window, and the shop
    gf.flag("P0")  # let go long ago: a flag brings the account back, and keeps it
    gf.observe("X", "Y", t0 + 2000 * H, 1)  # everything else expires
    assert sorted(gf.graph.nodes) == ["P0", "X", "Y"]
    gf.unflag("P0")  # no edge and no flag: let go at once
    assert sorted(gf.graph.nodes) == ["X", "Y"]
    restored = GraphFeatures.restore(gf.state_bytes(), gf.config)
    assert restored.state_bytes() == gf.state_bytes()


def test_a_rollback_brings_back_the_accounts_let_go_in_their_place() -> None:
    gf = GraphFeatures(GraphConfig(window_us=WEEK_US, scatter_us=DAY_US))
    t0 = 1_767_225_600_000_000
    gf.observe_many([("A", "B", t0, 100), ("C", "D", t0 + DAY_US, 100), ("E", "F", t0 + 3 * DAY_US, 100)])
    before = gf.state_bytes()
    journal = gf.begin_journal()
    values = gf.observe("A", "G", t0 + 7 * DAY_US + 1, 300)  # A -> B expires first: A comes back as new
    assert as_dict(values)["amount_history_n"] == 0
    assert list(gf.graph.nodes) == ["C", "D", "E", "F", "A", "G"]
    gf.end_journal()
    gf.rollback([journal])
    assert list(gf.graph.nodes) == ["A", "B", "C", "D", "E", "F"]
    assert gf.state_bytes() == before


def test_state_written_with_accounts_without_edges_lets_them_go_on_restore() -> None:
    old = (b'{"format":"sealtrail.graph/1","config":[2592000000000,3,3,259200000000,1024,8000000,20000,'
           b'300000000],"watermark":100,"accounts":[["GONE",5,0,0,0,0,0,0,0],["A",100,0,0,1,0,0,0,0],'
           b'["FLAGGED",7,1,0,0,0,0,0,0],["B",100,0,0,0,1,0,0,0]],"edges":[[100,1,3,250,1,1]]}')
    gf = GraphFeatures.restore(old, graph=CountedGraph)  # graph/1 kept as graph/1
    assert list(gf.graph.nodes) == ["A", "FLAGGED", "B"]
    kept = old.replace(b'["GONE",5,0,0,0,0,0,0,0],', b"").replace(b"[100,1,3,", b"[100,0,2,")
    assert gf.state_bytes() == kept
    plain = GraphFeatures.restore(old)  # read into today's graph: the counts are let go
    assert plain.state_bytes() == (
        b'{"format":"sealtrail.graph/2","config":[2592000000000,3,3,259200000000,1024,8000000,20000,'
        b'300000000],"watermark":100,"accounts":[["A",0],["FLAGGED",1],["B",0]],"edges":[[100,0,2,250,1,1]]}')


def test_observe_sealed_gives_observes_values_but_the_flag_search_and_the_same_state() -> None:
    stream = [(f"A{o}", f"A{b}", 1_767_225_600_000_000 + i * H, cents)
              for i, (o, b, _, _, cents) in enumerate(_random_stream(7, 400, 12, 1))]
    full, sealed = GraphFeatures(), GraphFeatures()
    full.flag("A3")
    sealed.flag("A3")
    hops_seen = set()
    for payment in stream:
        want, got = as_dict(full.observe(*payment)), as_dict(sealed.observe_sealed(*payment))
        hops_seen.add(want.pop("flagged_hops"))
        assert got.pop("flagged_hops") == -1
        assert got == want
    assert hops_seen > {0, 1}  # the search did find the flagged account where observe looks for it
    assert sealed.state_bytes() == full.state_bytes()


def test_an_edge_the_global_cap_takes_during_the_payment_is_not_in_its_windows() -> None:
    gf = GraphFeatures(GraphConfig(global_cap=2))
    t0 = 1_767_225_600_000_000
    gf.observe("X", "A", t0, 1_000)  # the oldest edge: A's only received one
    gf.observe("Y", "Z", t0 + 1, 1_000)
    got = as_dict(gf.observe("A", "B", t0 + 2, 500))  # a third edge: the cap takes X -> A
    assert got["scatter_gather"] == 1  # measured before: X had paid A
    assert (got["orig_fan_in_1d"], got["orig_fan_in_7d"], got["orig_fan_in_30d"]) == (0, 0, 0)
    assert got["pass_through_24h_q16"] == 0 and got["orig_activity_24h"] == 1


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([6, 12, 40]), st.sampled_from([2, 3, 1024]),
       st.sampled_from([1, 2, 30]), st.sampled_from([40, 100_000]))
def test_add_sealed_leaves_the_graph_observe_sealed_leaves(
        seed: int, accounts: int, node_cap: int, window_days: int, global_cap: int) -> None:
    """What a decider catching up applies (the state alone) against what the decider that made the
    payments held: late payments, caps, expiry, a journal taken back, and bad payments refused alike."""
    cfg = GraphConfig(node_cap=node_cap, window_us=window_days * DAY_US,
                      scatter_us=min(3 * DAY_US, window_days * DAY_US), late_us=15 * 60_000_000,
                      global_cap=global_cap)
    made, caught_up = GraphFeatures(cfg), GraphFeatures(cfg)
    t = 1_767_225_600_000_000
    stream = _random_stream(seed, 300, accounts, 4 * H)
    for i, (o, b, gap, late, cents) in enumerate(stream):
        t += gap
        wm = made.graph.watermark
        when = t - late if wm is None or t - late >= wm - cfg.late_us else t
        payment = (f"A{o}", f"A{b}", when, cents)
        if i % 97 == 50:  # a batch taken back (its commit refused): both journal it and roll it back
            jm, jc = made.begin_journal(), caught_up.begin_journal()
            made.observe_sealed(*payment)
            caught_up.add_sealed(*payment)
            made.end_journal()
            caught_up.end_journal()
            made.rollback([jm])
            caught_up.rollback([jc])
            assert caught_up.state_bytes() == made.state_bytes()
        made.observe_sealed(*payment)
        caught_up.add_sealed(*payment)
    assert caught_up.state_bytes() == made.state_bytes()
    for bad in (("", "A1", t, 5), ("A1", "A2", t, -1), ("A1", "A2", float(t), 5),
                ("A1", "A2", (made.graph.watermark or t) - cfg.late_us - 1, 5)):
        with pytest.raises(GraphInputError) as want:
            made.observe_sealed(*bad)  # type: ignore[arg-type]
        with pytest.raises(GraphInputError) as got:
            caught_up.add_sealed(*bad)  # type: ignore[arg-type]
        assert str(got.value) == str(want.value)
    assert caught_up.state_bytes() == made.state_bytes()
