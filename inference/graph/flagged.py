"""Hops from a payment to the nearest flagged account, in either direction.

For a payment ``u -> v``: 0 when ``u`` or ``v`` is flagged; else the least ``h`` (1 <= h <= max_hops)
such that a flagged account is ``h`` edges from ``u`` or ``v`` over the kept edges taken either
way (an account that paid or was paid by one at distance ``h - 1``); -1 when none is within
``max_hops``, or when the search would expand more accounts than its budget before finding one
(a level whose accounts would take the count past the budget is not expanded).

The search goes breadth first, level by level. It does not look through each account's
counterparties for a flag: the graph keeps ``near``, the accounts whose ``out_last`` or ``in_last``
names a flagged account (``TransactionGraph`` moves it as those maps and the flags change). So "a
counterparty of an account of this level is flagged" is "an account of this level is in ``near``",
and the last level, whose accounts are not expanded further, is only looked up in it. The answer
depends only on which accounts each level holds and how many (the budget), never on the order they
are visited in, so the levels may be sets: the same search gives the same value on every machine.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

from inference.graph.store import Node

__all__ = ["hops_to_flagged"]

_OUT = attrgetter("out_last")
_IN = attrgetter("in_last")


def hops_to_flagged(u: Node, v: Node, flagged: set[Node], near: dict[Node, int], max_hops: int,
                    budget: int) -> int:
    """Hops from ``u -> v`` to the nearest account in ``flagged`` (see the module); -1 for none.
    ``near`` holds the accounts with a flagged counterparty (``TransactionGraph.near``)."""
    if not flagged:
        return -1
    if u.flagged or v.flagged:
        return 0
    if u in near or v in near:  # a counterparty of u or v is flagged
        return 1
    if max_hops == 1:
        return -1
    frontier = {u, v}
    left = budget - len(frontier)
    if left < 0:
        return -1
    seen = frontier
    hops = 1  # no account within ``hops`` of the accounts of ``frontier`` is flagged
    while hops + 1 < max_hops:
        linked = set(chain.from_iterable(map(_OUT, frontier)))
        linked.update(chain.from_iterable(map(_IN, frontier)))
        frontier = linked - seen
        if not frontier:
            return -1
        hops += 1
        if not near.keys().isdisjoint(frontier):
            return hops
        left -= len(frontier)
        if left < 0:
            return -1
        seen = seen | frontier
    # the last level: the accounts one edge from ``frontier`` (those seen before are not in ``near``)
    apart = near.keys().isdisjoint
    if apart(chain.from_iterable(map(_OUT, frontier))) and apart(chain.from_iterable(map(_IN, frontier))):
        return -1
    return max_hops
