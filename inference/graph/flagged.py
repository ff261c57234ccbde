"""Hops from a payment to the nearest flagged account, in either direction.

For a payment ``u -> v``: 0 when ``u`` or ``v`` is flagged; else the least ``h`` (1 <= h <= max_hops)
such that a flagged account is ``h`` edges from ``u`` or ``v`` over the kept edges taken either
way (an account that paid or was paid by one at distance ``h - 1``); -1 when none is within
``max_hops``, or when the search would expand more accounts than its budget before finding one
(a level whose accounts would take the count past the budget is not expanded).
The search goes breadth first, level by level; a level's accounts are kept in an insertion-ordered
dict (never a set), so the same search runs on every machine.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

from inference.graph.store import Node

__all__ = ["hops_to_flagged"]

_OUT = attrgetter("out_last")
_IN = attrgetter("in_last")


def hops_to_flagged(u: Node, v: Node, flagged: set[Node], max_hops: int, budget: int) -> int:
    """Hops from ``u -> v`` to the nearest account in ``flagged`` (see the module); -1 for none."""
    if not flagged:
        return -1
    if u.flagged or v.flagged:
        return 0
    apart = flagged.isdisjoint
    frontier: dict[Node, None] = {u: None, v: None}
    seen: dict[Node, None] = {u: None, v: None}
    left = budget
    for hops in range(1, max_hops + 1):
        # one neighbour of the level flagged: the flagged account is ``hops`` away
        if not all(map(apart, map(_OUT, frontier))) or not all(map(apart, map(_IN, frontier))):
            return hops
        if hops == max_hops:
            break
        left -= len(frontier)
        if left < 0:
            return -1
        linked = dict.fromkeys(chain.from_iterable(map(_OUT, frontier)))
        linked.update(dict.fromkeys(chain.from_iterable(map(_IN, frontier))))
        frontier = {y: None for y in linked if y not in seen}
        if not frontier:
            break
        seen.update(frontier)
    return -1
