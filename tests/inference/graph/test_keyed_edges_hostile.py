"""Edges that name their accounts by key (not by ``Node``): hostile streams checked against the values of
the code before the change (edges held ``Node`` objects).

Two kinds of test:

- golden streams: seeded adversarial streams (tiny ``node_cap`` and ``global_cap``, late payments, self
  payments, flags, journals rolled back, restores, ``CountedGraph``, ``cycle_hops`` 2 to 6 with small
  budgets, accounts forgotten and re-created under the same key, compaction) whose every returned value,
  exception and state digest is hashed; the expected digests are those the code before the change gave.
  These pass: on streams that keep the graph's contract the change is bit-for-bit.
- the invariant the change relies on ("every edge held in an account's list names an account the graph
  holds"), which the code before could lose: a flag taken back between a journal's end and its
  rollback (the rollback now holds again the accounts held when the journal began), and a restored
  state whose one-sided edge names an account with no edge of its own (now refused).
"""

from __future__ import annotations

import hashlib
import random

import orjson
import pytest

from inference.graph import GRAPH_FEATURE_NAMES, GraphConfig, GraphFeatures, as_dict
from inference.graph.counted import CountedGraph
from inference.graph.errors import GraphInputError
from inference.graph.store import GraphJournal, TransactionGraph

H = 3_600_000_000
DAY = 24 * H
T0 = 1_767_225_600_000_000
# The values the code before had (the digests below predate ``forward_source_fan_out``, the last one;
# tests/inference/graph/test_forward_source.py checks it)
_BEFORE = GRAPH_FEATURE_NAMES.index("forward_source_fan_out")


# --- golden streams -------------------------------------------------------------------------------

def _config(rng: random.Random, long: bool) -> GraphConfig:
    if long:  # enough one-sided and dead edges for compaction (``_dead > 1024``), journaled or not
        window = rng.choice([DAY, 30 * DAY])
        return GraphConfig(window_us=window, cycle_hops=rng.choice([3, 4, 6]),
                           node_cap=rng.choice([1, 2, 3]), global_cap=rng.choice([1500, 3000, 100000]),
                           search_budget=rng.choice([3, 50, 20000]),
                           late_us=rng.choice([0, 1000, window // 2]), scatter_us=window)
    window = rng.choice([2 * H, DAY, 3 * DAY, 8 * DAY, 30 * DAY])
    return GraphConfig(window_us=window, cycle_hops=rng.choice([2, 3, 3, 4, 5, 6]),
                       flag_hops=rng.choice([1, 2, 3, 6]),
                       scatter_us=rng.choice([window, max(1, window // 3)]),
                       node_cap=rng.choice([1, 1, 2, 3, 5]), global_cap=rng.choice([1, 2, 3, 5, 8, 100]),
                       search_budget=rng.choice([1, 2, 3, 5, 8, 50, 20000]),
                       late_us=rng.choice([0, window // 4, window - 1]))


def _held_edges_name_held_accounts(g: TransactionGraph) -> None:
    for key, n in g.nodes.items():
        for e in n.out:
            assert e[1] == key and e[2] in g.nodes, (key, e)
        for e in n.inn:
            assert e[2] == key and e[1] in g.nodes, (key, e)


def _stream(seed: int, nops: int, long: bool) -> str:
    """SHA-256 of everything a seeded hostile stream gives: each payment's values (``observe``,
    ``observe_sealed`` or ``observe_many``), each exception's type, state digests at checkpoints, whether
    a rollback gave back the bytes of its checkpoint and a restore its own bytes, and the final state.
    Journals are used as the contract says: rolled back only while they are the graph's latest changes
    (flags set inside a journal are allowed; they are not journaled)."""
    rng = random.Random(seed)
    cfg = _config(rng, long)
    counted = rng.random() < 0.3
    gf = GraphFeatures(cfg, CountedGraph) if counted else GraphFeatures(cfg)
    keys = [f"K{i}" for i in range(rng.choice([2, 3, 4, 6, 8, 12]))]
    out: list[object] = []
    t = T0
    journals: list[GraphJournal] = []
    ckpt: bytes | None = None
    steps = [1, 1, 1, H, cfg.window_us // 3, cfg.window_us, cfg.window_us + 1, 0, 0]
    if long:
        steps = [0, 1, 1, 1, 7, 1000] * 1000 + [cfg.window_us // 2, cfg.window_us + 1]
    for _ in range(nops):
        r = rng.random()
        if long and rng.random() < 0.97:
            r *= 0.62
        if ckpt is not None and gf.graph._journal is None and r < 0.79:
            journals, ckpt = [], None  # a change outside a journal: what came before is committed
        try:
            if r < 0.62:
                t += rng.choice(steps) if (long or rng.random() < 0.8) else rng.randrange(cfg.window_us + 2)
                wm = gf.graph.watermark
                tt = t
                if wm is not None and rng.random() < 0.25:
                    tt = wm - rng.randrange(cfg.late_us + 1)  # late, up to late_us behind
                o = rng.choice(keys)
                b = o if rng.random() < 0.12 else rng.choice(keys)
                c = rng.choice([0, 1, 100, 100, 250, 99999])
                m = rng.random()
                if m < 0.4:
                    v = gf.observe(o, b, tt, c)
                elif m < 0.7:
                    v = gf.observe_sealed(o, b, tt, c)
                else:
                    v = gf.observe_many([(o, b, tt, c)])[0]
                out.append(["o", o, b, tt - T0, c, list(v[:_BEFORE])])
            elif r < 0.70:
                k = rng.choice(keys)
                gf.flag(k)
                out.append(["f", k])
            elif r < 0.79:
                k = rng.choice(keys)
                gf.unflag(k)
                out.append(["u", k])
            elif r < 0.84 and not counted:
                if ckpt is None:
                    ckpt, journals = gf.state_bytes(), []
                journals.append(gf.begin_journal())
                out.append(["bj"])
            elif r < 0.87 and not counted:
                gf.end_journal()
                out.append(["ej"])
                if rng.random() < 0.5:
                    journals, ckpt = [], None  # committed
            elif r < 0.92 and not counted:
                if journals:
                    gf.rollback(journals)
                    sb = gf.state_bytes()
                    out.append(["rb", hashlib.sha256(sb).hexdigest(), sb == ckpt])
                    journals, ckpt = [], None
            elif r < 0.96:
                sb = gf.state_bytes()
                gf.end_journal()
                journals, ckpt = [], None
                if counted:
                    gf2 = GraphFeatures.restore(sb, cfg, graph=CountedGraph)
                else:
                    gf2 = GraphFeatures.restore(sb, cfg)
                out.append(["rs", hashlib.sha256(sb).hexdigest(), gf2.state_bytes() == sb])
                gf = gf2
            else:
                out.append(["sb", hashlib.sha256(gf.state_bytes()).hexdigest()])
        except (IndexError, KeyError) as exc:
            # an IndexError both versions raise: ``_observe`` reads ``out[-1]`` after the global cap
            # emptied the list (global_cap 1 or 2); the stream goes on with the state as both leave it
            out.append(["EXC", type(exc).__name__])
        _held_edges_name_held_accounts(gf.graph)
    out.append(["final", hashlib.sha256(gf.state_bytes()).hexdigest()])
    return hashlib.sha256(orjson.dumps(out)).hexdigest()


def _group(first: int) -> str:
    """One digest for the 50 short streams from seed ``first`` on."""
    joined = "".join(_stream(s, 300, False) for s in range(first, first + 50))
    return hashlib.sha256(joined.encode()).hexdigest()


# Digests the code before the change gave (edges holding ``Node`` objects): ``_group(first)`` for the
# short streams, ``_stream(seed, 6000, True)`` for the long ones; with the windows after the add
# taking an empty list as empty (a late payment whose edge a global cap of 1 or 2 took at once made
# that code raise IndexError there, the payment already added), in both.
_GOLDEN_SHORT: dict[int, str] = {
    0: "d7cecad799404234291189546c2a9e1bff94848535ab55dcb1acf0e408c1f345",
    50: "f28b79cf00c1e5f71fb5642c1efbaac08c9923fdf877278f65bfee022a3a2533",
    100: "170e0c5384a760b9a68e5ccfc374af1f4f68b545c2c656fac52deb13bc4feb79",
    150: "f728f9d696599dc1a38eaaffa9e8cf1a0bb07ea7eea8af07e4a21bee217e6601",
    200: "0a892f1ed80f4298b6c2cb5c3df3f0bad40b5a848f4776a7ff054a64a3bd3349",
    250: "2e8771d8fc27faf4cdc3e92e0061b271127e2fee18af4984ec0afceefa428969",
    300: "96ddc166fca07bcc8029779beb3e72e32593421ded9e6b74ab7c8452bb57484b",
    350: "9d2ff71b980a91f67cb9c22bd59c07a6e5a845de3ade5745e76686367166e8b3",
    400: "095daa38b480de2266d3b5dc33ed78d4b6f377c9e7dba5176ef569611c51c889",
    450: "26c5bf650c5a7cde4b9c5d2adf1f8de0d4866353ce7293e81cc2456090ad9737",
}
_GOLDEN_LONG: dict[int, str] = {
    0: "b63683c7353b385b5b64f22ffa5429980a60eecfc23d170a63ca01b9204bd111",
    1: "4f783ee737f6096f51474881534335d77a6a727a6ac350b0838ba1407507a359",
    2: "769af0c91d3b52ae2a79908fc9bbb58bfc1d9c985273456e095afdc69be0e109",
    3: "eae440de3ba0c2a4051c10ae103b50c8a32d9f3618331a75d7c80fbda3dd5827",
    4: "1f601b6c9d58580f76e95e9da485ca1e891eeeb6a1c7d9588f0becda53f39c10",
    5: "1d83c01bcbde801d144e65dd27c5cb3d6ce54e1f7332c35b046f390c2fbd6afb",
    6: "6eda9d0bd2e6cefeaf06593dcf29180206db599f42657f4f0b9251f276ab14ca",
    7: "d55374d7db48487a4db2c2a19dc78e5911f65592483507fa48827fb76fcfabb4",
}


@pytest.mark.parametrize("first", sorted(_GOLDEN_SHORT))
def test_hostile_streams_give_the_values_of_the_code_before(first: int) -> None:
    assert _group(first) == _GOLDEN_SHORT[first]


@pytest.mark.parametrize("seed", sorted(_GOLDEN_LONG))
def test_long_streams_with_compaction_give_the_values_of_the_code_before(seed: int) -> None:
    assert _stream(seed, 6000, True) == _GOLDEN_LONG[seed]


def test_forgotten_and_recreated_keys_under_journals_and_restores() -> None:
    """An account forgotten (edges expired) and made again under its key inside a journal, its old
    dead edge still in the log: rollback gives the checkpoint's bytes, restore round-trips, and the
    values are those of the code before the change."""
    cfg = GraphConfig(window_us=10 * H, scatter_us=H, node_cap=1, late_us=H, cycle_hops=5, search_budget=4)
    gf = GraphFeatures(cfg)
    vals = [gf.observe("A", "B", T0, 100), gf.observe("A", "C", T0 + 1, 100),  # A->B one-sided (B holds)
            gf.observe("D", "B", T0 + 2, 100)]  # now dead: both lists dropped it
    before = gf.state_bytes()
    j = gf.begin_journal()
    vals.append(gf.observe("B", "A", T0 + 10 * H + 1, 7))  # all of T0..T0+1 expires: A, C let go
    vals.append(gf.observe("C", "B", T0 + 10 * H + 2, 7))  # C again
    vals.append(gf.observe("A", "C", T0 + 10 * H - 100, 9))  # late
    vals.append(gf.observe("B", "B", T0 + 10 * H + 3, 9))  # self payment
    gf.end_journal()
    mid = gf.state_bytes()
    assert GraphFeatures.restore(mid, cfg).state_bytes() == mid
    gf.rollback([j])
    assert gf.state_bytes() == before
    vals.append(gf.observe("C", "A", T0 + 3, 5))
    # the values of the code before the change
    assert [v[:_BEFORE] for v in vals] == [
        (0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, -1, 1, 0, 0, -1, -1, 0, -1),
        (0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 500, -1, 0, -1),
        (0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, -1, 1, 0, 0, -1, -1, 0, -1),
        (0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4587, 4587, 0, 2, 0, 0, -1, -1, 70, 9),
        (0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, -1, 1, 0, 0, -1, -1, 0, -1),
        (0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, -1, -1, 0, -1),
        (0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 65536, 65536, 0, 2, 1, 93, 1000, -1, 0, -1),
        (2, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3276, 3276, 0, 2, 0, 0, -1, -1, 50, 0),
    ]


# --- the invariant kept through the public API --------------------------------------------------

def _unflag_between_journal_and_rollback(cfg: GraphConfig) -> GraphFeatures:
    """K is let go by an ``unflag`` after its journal ended (flags are not journaled), and the rollback
    then gives A's list, with A->K, back. K was held when the journal began, so the rollback holds it
    again with the lists it had then: every edge a list holds names an account held. (The code before
    edges named their accounts by key left K out of the graph here, and its ``state_bytes`` raised
    ``KeyError``.)"""
    gf = GraphFeatures(cfg)
    gf.observe("A", "K", T0, 100)
    gf.observe("Q0", "Q", T0, 100)
    gf.flag("K")
    j = gf.begin_journal()
    gf.observe("X", "Y", T0 + 31 * DAY, 5)  # A->K expires: A let go (journaled); K kept by its flag
    gf.end_journal()
    gf.unflag("K")  # K has no edge: let go, outside any journal
    gf.rollback([j])
    # K was held when the journal began: the rollback holds it again, with the lists it had then
    assert gf.graph.nodes["K"].inn == gf.graph.nodes["A"].out == [(T0, "A", "K", 100)]
    assert not gf.graph.nodes["K"].flagged  # the flag taken back stays taken back
    return gf


def test_unflag_then_rollback_leaves_a_graph_whose_state_round_trips_and_searches() -> None:
    gf = _unflag_between_journal_and_rollback(GraphConfig(cycle_hops=4))
    restored = GraphFeatures.restore(gf.state_bytes(), gf.config)  # the code before: KeyError here
    assert restored.state_bytes() == gf.state_bytes()
    # the values of the code before (its search went through K's node all the same)
    expected = (0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 65536, 65536, 0, 2, 0, 0, -1, -1, 1000, 0)
    assert gf.observe("Q", "A", T0 + 1, 100)[:_BEFORE] == expected
    assert restored.observe("Q", "A", T0 + 1, 100)[:_BEFORE] == expected


def test_unflag_then_rollback_a_payment_to_k_counts_one_beneficiary() -> None:
    """A pays K again: one beneficiary over the window (the code before counted K twice, once for the
    node the rollback gave back outside the graph and once for the one made again under its key)."""
    gf = _unflag_between_journal_and_rollback(GraphConfig())
    v = as_dict(gf.observe("A", "K", T0 + 1, 100))
    assert (v["orig_fan_out_1d"], v["orig_fan_out_7d"], v["orig_fan_out_30d"]) == (1, 1, 1)
    v = as_dict(gf.observe("A", "Z", T0 + 2, 100))
    assert (v["orig_fan_out_1d"], v["orig_fan_out_7d"], v["orig_fan_out_30d"]) == (2, 2, 2)


# --- states no graph writes: refused -------------------------------------------------------------

def _state(cfg: GraphConfig, accounts: list[str], edges: list[list[int]]) -> bytes:
    return orjson.dumps({
        "format": "sealtrail.graph/2",
        "config": [cfg.window_us, cfg.cycle_hops, cfg.flag_hops, cfg.scatter_us, cfg.node_cap,
                   cfg.global_cap, cfg.search_budget, cfg.late_us],
        "watermark": T0 + 2 * H, "accounts": [[a, 0] for a in accounts], "edges": edges})


@pytest.mark.parametrize("edges", [
    [[T0, 0, 1, 100, 1, 0], [T0 + H, 3, 2, 100, 1, 1]],  # A->B held by A's list; B holds nothing else
    [[T0, 0, 1, 100, 0, 1]],  # the mirror: B's list alone holds A->B and A holds nothing else
])
def test_a_one_sided_edge_naming_an_account_without_edges_is_refused_on_restore(
        edges: list[list[int]]) -> None:
    """Such an account would be let go while an edge names it (the code before went on with it: a
    cycle search through it, and counterparty maps that kept it for good once it was made again)."""
    cfg = GraphConfig(cycle_hops=4, node_cap=1)
    with pytest.raises(GraphInputError, match="names an account that holds no edge"):
        GraphFeatures.restore(_state(cfg, ["A", "B", "C", "D"], edges), cfg)
