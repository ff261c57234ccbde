"""Hops from a payment to the nearest flagged account, in either direction.

For a payment ``u -> v``: 0 when ``u`` or ``v`` is flagged; else the least ``h`` (1 <= h <= max_hops)
such that a flagged account is ``h`` edges from ``u`` or ``v`` over the kept edges taken either
way (an account that paid or was paid by one at distance ``h - 1``); -1 when none is within
``max_hops``, or when the search stopped at its budget of accounts expanded before finding one.
The search goes breadth first, in the order accounts were first linked to each account (an
insertion-ordered dict, never a set), so the budget cuts the same search on every machine.
"""

from __future__ import annotations

from inference.graph.store import Node

__all__ = ["hops_to_flagged"]


def hops_to_flagged(u: Node, v: Node, flagged: set[Node], max_hops: int, budget: int) -> int:
    """Hops from ``u -> v`` to the nearest account in ``flagged`` (see the module); -1 for none."""
    if not flagged:
        return -1
    if u.flagged or v.flagged:
        return 0
    frontier: dict[Node, None] = {u: None, v: None}
    seen: dict[Node, None] = {u: None, v: None}
    left = budget
    for hops in range(1, max_hops + 1):
        for x in frontier:
            if not flagged.isdisjoint(x.out_last) or not flagged.isdisjoint(x.in_last):
                return hops
        if hops == max_hops:
            break
        nxt: dict[Node, None] = {}
        for x in frontier:
            left -= 1
            if left < 0:
                return -1
            for y in x.out_last:
                if y not in seen:
                    seen[y] = None
                    nxt[y] = None
            for y in x.in_last:
                if y not in seen:
                    seen[y] = None
                    nxt[y] = None
        if not nxt:
            break
        frontier = nxt
    return -1
