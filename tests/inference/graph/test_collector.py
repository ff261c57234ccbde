"""The graph's edges name their accounts by key, so CPython's cyclic collector stops tracking them
and a full collection never walks the window's payments; and every edge an account's list holds
names an account the graph holds, which is what lets the searches look an edge's account up by key.
Checked on random streams with small caps, late payments, flags, rollbacks and restores."""

from __future__ import annotations

import gc
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from inference.graph import GraphConfig, GraphFeatures
from inference.graph.config import DAY_US
from inference.graph.store import TransactionGraph

H = 3_600_000_000
T0 = 1_767_225_600_000_000


def _held_edges_name_held_accounts(g: TransactionGraph) -> None:
    for key, n in g.nodes.items():
        for e in n.out:
            assert e[1] == key and g.nodes.get(e[2]) is not None, (key, e)
        for e in n.inn:
            assert e[2] == key and g.nodes.get(e[1]) is not None, (key, e)
        for peer, e in n.out_last.items():
            assert g.nodes.get(peer.key) is peer and e[2] == peer.key
        for peer, e in n.in_last.items():
            assert g.nodes.get(peer.key) is peer and e[1] == peer.key


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([6, 20, 60]), st.sampled_from([2, 3, 1024]),
       st.sampled_from([1, 3]), st.sampled_from([30, 100_000]))
def test_every_edge_a_list_holds_names_an_account_held(seed: int, accounts: int, node_cap: int,
                                                       window_days: int, global_cap: int) -> None:
    rng = random.Random(seed)
    cfg = GraphConfig(node_cap=node_cap, window_us=window_days * DAY_US, scatter_us=DAY_US,
                      late_us=15 * 60_000_000, global_cap=global_cap)
    gf = GraphFeatures(cfg)
    t = T0
    for i in range(400):
        t += rng.randrange(6 * H)
        late = rng.randrange(10 * 60_000_000) if rng.random() < 0.1 else 0
        o, b = f"A{rng.randrange(accounts)}", f"A{rng.randrange(accounts)}"
        if rng.random() < 0.05:
            gf.flag(o)
        elif rng.random() < 0.05:
            gf.unflag(b)
        if rng.random() < 0.1:  # a batch taken back, as a decider whose commit failed does
            j = gf.begin_journal()
            gf.observe_many([(o, b, t - late, 100), (b, o, t, 50)])
            gf.end_journal()
            gf.rollback([j])
        else:
            gf.observe(o, b, t - late, rng.choice((0, 100, 5_000, rng.randrange(2_000_000))))
        _held_edges_name_held_accounts(gf.graph)
        if i % 97 == 0:
            restored = GraphFeatures.restore(gf.state_bytes(), cfg)
            _held_edges_name_held_accounts(restored.graph)
            assert restored.state_bytes() == gf.state_bytes()


def test_the_window_s_edges_are_not_walked_by_the_collector() -> None:
    gf = GraphFeatures()
    rng = random.Random(5)
    t = T0
    for _ in range(5_000):
        t += rng.randrange(H // 6)  # 5,000 payments over about 17 days: all inside the window
        gf.observe(f"A{rng.randrange(300)}", f"A{rng.randrange(300)}", t, rng.randrange(1, 10**6))
    gc.collect()
    held = [e for n in gf.graph.nodes.values() for e in (*n.out, *n.inn)]
    assert len(held) == 10_000
    assert not any(gc.is_tracked(e) for e in held)  # a full collection walks the lists, not the edges
    # and a graph rebuilt from its state bytes holds edges of the same kind
    restored = GraphFeatures.restore(gf.state_bytes())
    gc.collect()
    assert not any(gc.is_tracked(e) for n in restored.graph.nodes.values() for e in n.out)


def test_a_late_payment_whose_own_edge_the_global_cap_takes_at_once_gets_its_values() -> None:
    """With a global cap of one edge, a late payment's edge is the oldest held, so the cap takes it as
    soon as it is added: the windows after the add find the payer's and payee's lists empty."""
    from inference.graph.features import as_dict

    gf = GraphFeatures(GraphConfig(global_cap=1, late_us=60_000_000))
    gf.observe("A", "B", T0, 100)
    v = as_dict(gf.observe("C", "D", T0 - 30_000_000, 50))  # 30 s late: older than A -> B
    assert (v["orig_fan_out_1d"], v["bene_fan_in_1d"], v["orig_activity_24h"]) == (0, 0, 0)
    assert gf.graph.edges_held == 1 and [e[1:3] for e in gf.graph.nodes["A"].out] == [("A", "B")]
