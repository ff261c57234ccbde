"""The flagged-account search against the plain breadth-first search it replaces (each level's
counterparties looked up in the set of flagged accounts), on random streams with small caps, late
payments, small budgets and every depth, with flags set and taken back as they go, a journal
rolled back and a state restored; and the graph's ``near`` counts it reads against a recount from
the maps (a flagged hub whose cap dropped edges its counterparties still hold included)."""

from __future__ import annotations

import random
from itertools import chain

import pytest

from inference.graph import GraphConfig, GraphFeatures, as_dict
from inference.graph.flagged import hops_to_flagged
from inference.graph.store import Node, TransactionGraph

H = 3_600_000_000
T0 = 1_767_225_600_000_000


def _hops_plain(u: Node, v: Node, flagged: set[Node], max_hops: int, budget: int) -> int:
    """The search as first written: every level's maps looked through for a flagged account."""
    if not flagged:
        return -1
    if u.flagged or v.flagged:
        return 0
    frontier: dict[Node, None] = {u: None, v: None}
    seen: dict[Node, None] = {u: None, v: None}
    left = budget
    for hops in range(1, max_hops + 1):
        if any(not flagged.isdisjoint(x.out_last) or not flagged.isdisjoint(x.in_last) for x in frontier):
            return hops
        if hops == max_hops:
            break
        left -= len(frontier)
        if left < 0:
            return -1
        linked = dict.fromkeys(chain.from_iterable(x.out_last for x in frontier))
        linked.update(dict.fromkeys(chain.from_iterable(x.in_last for x in frontier)))
        frontier = {y: None for y in linked if y not in seen}
        if not frontier:
            break
        seen.update(frontier)
    return -1


def _check_near(g: TransactionGraph) -> None:
    want = {n: sum(k.flagged for k in n.out_last) + sum(k.flagged for k in n.in_last)
            for n in g.nodes.values()}
    assert g.near == {n: c for n, c in want.items() if c}


def _observe_checked(gf: GraphFeatures, o: str, b: str, t: int, c: int) -> int:
    """observe, its ``flagged_hops`` compared with the plain search over the graph it saw."""
    g = gf.graph
    if g.watermark is None or t > g.watermark:
        g.advance(t)  # as observe does first (it then finds nothing to advance)
    src, dst = g.node(o), g.node(b)
    want = _hops_plain(src, dst, g.flagged, gf.config.flag_hops, gf.config.search_budget)
    got = as_dict(gf.observe(o, b, t, c))["flagged_hops"]
    assert got == want, (o, b, t)
    return got


def _stream(rng: random.Random, n: int, accounts: int) -> list[tuple[str, str, int, int]]:
    names = [f"A{i:03d}" for i in range(accounts)]
    hubs = names[:3]
    t = T0
    out = []
    for _ in range(n):
        t += rng.randrange(40 * 60_000_000)
        late = rng.randrange(50_000_000) if rng.random() < 0.05 else 0
        o = rng.choice(hubs) if rng.random() < 0.2 else rng.choice(names)
        b = rng.choice(hubs) if rng.random() < 0.3 else rng.choice(names)
        out.append((o, b, t - late, rng.randrange(1, 1_000_000)))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_hops_match_the_plain_search(seed: int) -> None:
    rng = random.Random(seed)
    cfg = GraphConfig(flag_hops=rng.randint(1, 6), search_budget=rng.choice([1, 2, 3, 5, 12, 40, 20_000]),
                      node_cap=rng.choice([2, 4, 9, 1024]), global_cap=rng.choice([150, 400, 100_000]),
                      late_us=60_000_000, window_us=rng.choice([2, 5]) * 86_400_000_000,
                      scatter_us=86_400_000_000)
    gf = GraphFeatures(cfg)
    payments = _stream(rng, 1500, rng.choice([15, 40, 120]))
    names = sorted({p[0] for p in payments} | {p[1] for p in payments})
    seen = set()
    journals = []
    for i, p in enumerate(payments):
        if rng.random() < 0.03:
            gf.flag(rng.choice(names))
            _check_near(gf.graph)
        if rng.random() < 0.015:
            gf.unflag(rng.choice(names))
            _check_near(gf.graph)
        if i % 300 == 0 and not journals:
            journals.append(gf.begin_journal())
            marked = i
        seen.add(_observe_checked(gf, *p))
        if journals and i == marked + 120:
            gf.end_journal()
            gf.flag(rng.choice(names))  # a flag set inside the journal stays after the rollback
            gf.rollback(journals)
            journals = []
            _check_near(gf.graph)
        if i % 100 == 0:
            _check_near(gf.graph)
        if i == 1100:
            gf = GraphFeatures.restore(gf.state_bytes(), cfg)
            _check_near(gf.graph)
    _check_near(gf.graph)
    assert len(seen) > 1


def test_a_flagged_hub_found_by_those_whose_edges_its_cap_dropped() -> None:
    """The hub's received list keeps its newest 2 edges; each sender still holds its own, so a flag
    on the hub must reach every sender's ``near`` count, not only those the hub's maps name."""
    gf = GraphFeatures(GraphConfig(node_cap=2))
    for i in range(8):
        gf.observe(f"S{i}", "HUB", T0 + i * H, 100)
    g = gf.graph
    hub = g.nodes["HUB"]
    assert len(hub.in_last) == 2
    gf.flag("HUB")
    _check_near(g)
    assert g.near[g.nodes["S0"]] == 1
    assert _observe_checked(gf, "S0", "X", T0 + 9 * H, 5) == 1  # S0 paid the hub: one hop
    assert _observe_checked(gf, "Y", "S1", T0 + 10 * H, 5) == 1
    assert _observe_checked(gf, "Q", "Y", T0 + 10 * H, 5) == 2  # Y paid S1, which paid the hub
    gf.unflag("HUB")
    _check_near(g)
    assert _observe_checked(gf, "Q", "Y", T0 + 11 * H, 5) == -1
    again = GraphFeatures.restore(gf.state_bytes(), gf.config)  # one-sided edges come back as such
    again.flag("HUB")
    _check_near(again.graph)
    assert _observe_checked(again, "S2", "Z", T0 + 12 * H, 5) == 1


def test_the_search_sees_u_and_v_the_same_either_way() -> None:
    g = TransactionGraph(GraphConfig())
    a, b = g.node("A"), g.node("B")
    assert hops_to_flagged(a, b, g.flagged, g.near, 3, 20_000) == -1
    g.flag("A")
    assert hops_to_flagged(b, a, g.flagged, g.near, 3, 20_000) == 0
