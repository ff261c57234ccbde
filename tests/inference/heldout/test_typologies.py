"""Hand-checked shapes of two typologies, read back from the generated payments."""

from __future__ import annotations

import itertools
from collections import defaultdict

from inference.heldout import HeldoutRun, HeldoutTx, credit_minor


def _patterns(run: HeldoutRun, typology: str) -> dict[int, list[HeldoutTx]]:
    out: dict[int, list[HeldoutTx]] = defaultdict(list)
    for x in run.transactions:
        if x.typology == typology:
            out[x.pattern].append(x)
    return out


def test_a_cycle_returns_to_its_origin_through_hops_each_later_than_the_last(small: HeldoutRun) -> None:
    cycles = _patterns(small, "cycle")
    assert cycles
    lengths = set()
    acc = small.world.accounts
    for legs in cycles.values():
        legs.sort(key=lambda x: x.at)
        origin = legs[0].orig
        assert legs[-1].bene == origin  # the money comes back
        for a, b in itertools.pairwise(legs):
            assert b.orig == a.bene  # each hop pays on what the last one brought
            assert b.at > a.at  # strictly later: a temporal cycle
            usd_a = float(a.transaction.amount) * acc[a.orig].country.usd_per_unit
            usd_b = float(b.transaction.amount) * acc[b.orig].country.usd_per_unit
            assert usd_b <= usd_a * 1.001  # no money from nowhere: at most what came in moves on
        nodes = [x.orig for x in legs]
        assert len(set(nodes)) == len(nodes) and 3 <= len(nodes) <= 10
        lengths.add(len(nodes))
    assert 3 in lengths  # the shortest cycles are there too


def test_three_hop_cycle_by_hand(small: HeldoutRun) -> None:
    three = [legs for legs in _patterns(small, "cycle").values() if len(legs) == 3]
    assert three
    a_b, b_c, c_a = sorted(three[0], key=lambda x: x.at)
    a, b, c = a_b.orig, b_c.orig, c_a.orig
    assert (a_b.bene, b_c.bene, c_a.bene) == (b, c, a)
    assert a_b.at < b_c.at < c_a.at
    acc = small.world.accounts
    usd = [float(x.transaction.amount) * acc[x.orig].country.usd_per_unit for x in (a_b, b_c, c_a)]
    assert usd[0] >= usd[1] * 0.97 and usd[1] >= usd[2] * 0.97  # at most the hop fee (and rounding) lost


def test_scatter_gather_fans_in_from_many_sources_then_out_to_many(small: HeldoutRun) -> None:
    patterns = _patterns(small, "scatter_gather")
    assert patterns
    acc = small.world.accounts
    for legs in patterns.values():
        gathered = [x for x in legs if x.kind == "gather"]
        scattered = [x for x in legs if x.kind == "scatter"]
        hub = gathered[0].bene
        assert all(x.bene == hub for x in gathered) and all(x.orig == hub for x in scattered)
        sources = {x.orig for x in gathered}
        assert 5 <= len(sources) <= 100 and hub not in sources
        assert 5 <= len({x.bene for x in scattered}) <= 30
        assert max(x.at for x in gathered) < min(x.at for x in scattered)  # all in before anything out
        cur = acc[hub].currency
        into = sum(
            credit_minor(int(x.transaction.amount * 100), x.transaction.currency, cur) for x in gathered
        )
        out = sum(int(x.transaction.amount * 100) for x in scattered)
        assert 0.75 * into <= out <= into  # most of it moves on, none is created


def test_mule_network_collects_before_it_forwards(small: HeldoutRun) -> None:
    for legs in _patterns(small, "mule_network").values():
        forwards = [x for x in legs if x.kind == "mule_forward"]
        assert forwards
        for f in forwards:
            received = [x for x in legs if x.bene == f.orig and x.at < f.at]
            assert received  # a mule forwards only after money came in
        victims = {x.orig for x in legs if x.kind == "victim_payment"}
        suspects = {a for p in small.patterns if p.typology == "mule_network" for a in p.suspects}
        assert not victims & suspects  # fraud victims are not suspects
