"""Temporal cycles closed by a payment: money that left the beneficiary comes back to it.

A payment ``u -> v`` at time ``t`` closes a temporal cycle of length ``L`` (2 <= L <= k, counting
this payment) when the graph holds a path of ``L - 1`` edges ``v = x0 -> x1 -> ... -> x(L-1) = u``
through distinct accounts other than ``u`` and ``v``, with times strictly increasing along the path
and all before ``t``; every edge held is inside the window, so the whole cycle is too. Money paid
out by ``v`` thus returns to ``v`` through ``u`` with each hop later than the last.

``temporal_cycle`` returns the shortest such ``L`` (0 if none), the number of distinct account
sequences ``(x0, ..., x(L-1))`` that admit such times (capped at ``CYCLE_COUNT_CAP``), and whether
the search stopped at its budget (then both are over what was searched). The search runs depth
first over each account's sent edges in time order, taking for each next account the earliest edge
after the time the money arrived (the earliest is the one that leaves the most paths open), and
checks the last hop into ``u`` with one lookup; ``budget`` bounds the edges it visits.
A self-transfer (``u`` is ``v``) closes no cycle.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping

from inference.graph.store import Edge, Node

__all__ = ["CYCLE_COUNT_CAP", "temporal_cycle"]

CYCLE_COUNT_CAP = 64
_BEFORE_ALL = -(1 << 62)  # before any time: no lower bound


def _paid_between(x: Node, u: Node, after: int, before: int) -> bool:
    """Whether x's kept sent edges hold one to ``u`` with ``after < time < before``."""
    e = x.out_last.get(u)
    if e is None:
        return False
    te = e[0]
    if te <= after:
        return False
    if te < before:
        return True
    out = x.out  # the latest is at or after ``before`` (a late payment): look through the rest
    i = bisect_left(out, (after + 1,))
    key = u.key
    for j in range(i, len(out)):
        f = out[j]
        if f[0] >= before:
            return False
        if f[2] == key:
            return True
    return False


def _last_before(y: Node, u: Node, before: int) -> int | None:
    """Time of y's latest kept payment to ``u`` strictly before ``before``, or None."""
    out = y.out
    key = u.key
    for j in range(bisect_left(out, (before,)) - 1, -1, -1):
        if out[j][2] == key:
            return out[j][0]
    return None


def _three_hop(u: Node, v: Node, t: int, into_u: dict[Node, Edge], budget: int) -> int | None:
    """The number of routes ``v -> y -> u`` the k = 3 search below counts, found from the accounts
    both paid by ``v`` and paying ``u`` (a C-level intersection of two key sets, usually empty or
    one or two accounts) instead of a walk over one side's edges; None when the search could stop at
    its budget, where only the walk in its own order says what it counts. Order does not matter to
    the count, so the intersection's order (a set's) changes nothing."""
    v_out_last = v.out_last
    if into_u.keys().isdisjoint(v_out_last) and (len(into_u) < len(v_out_last) or len(v.out) <= budget):
        return 0  # the usual case: no account both paid by v and paying u, and no budget to reach
    common = into_u.keys() & v_out_last.keys()
    if len(into_u) < len(v_out_last):  # the walk over u's side: one step per account of ``common``
        if len(common) > budget:
            return None
        found = 0
        for y in common:
            if y is v or y is u:
                continue
            t2: int | None = into_u[y][0]
            if t2 is not None and t2 >= t:  # a late payment: y paid u after it; find a payment before
                t2 = _last_before(y, u, t)
            if t2 is not None and _paid_between(v, y, _BEFORE_ALL, t2):
                found += 1
        return found
    if len(v.out) > budget:  # the walk over v's sent edges might stop at its budget
        return None
    found = 0
    for y in common:
        if y is v or y is u:
            continue
        a = v_out_last[y][0]  # v's latest payment to y; the walk takes its earliest one before t
        if a < t and _paid_between(y, u, a, t):  # y paid u after even the latest: so after the earliest
            found += 1
            continue
        key = y.key
        for e in v.out:
            if e[0] >= t:
                break
            if e[2] == key:  # the earliest
                if _paid_between(y, u, e[0], t):
                    found += 1
                break
    return found


def temporal_cycle(u: Node, v: Node, t: int, k: int, budget: int,
                   nodes: Mapping[str, Node]) -> tuple[int, int, int]:
    """(shortest cycle length or 0, number of cycles capped, 1 if the budget cut the search short)
    for the payment ``u -> v`` at ``t``, over cycles of at most ``k`` payments (see the module).
    ``nodes``: the graph's accounts by key (an edge names its accounts by key)."""
    if u is v:
        return 0, 0, 0
    into_u = u.in_last
    if not into_u:  # every cycle ends with a payment into u
        return 0, 0, 0
    shortest = 0
    count = 0
    if v in into_u and _paid_between(v, u, _BEFORE_ALL, t):  # v -> u, then u -> v now
        shortest, count = 2, 1
    if k < 3:
        return shortest, count, 0
    if k == 3:
        fast = _three_hop(u, v, t, into_u, budget)
        if fast is not None:
            return (shortest or 3, min(count + fast, CYCLE_COUNT_CAP), 0) if fast else (shortest, count, 0)
    left = budget
    truncated = 0
    if k == 3 and len(into_u) < len(v.out_last):  # v -> y -> u, from u's side: fewer to look at
        for y, last_in in into_u.items():
            first_out = v.out_last.get(y)
            if first_out is None or y is v or y is u:
                continue
            left -= 1
            if left < 0:
                return shortest, count, 1
            t2: int | None = last_in[0]
            if t2 is not None and t2 >= t:  # a late payment: y paid u after it; find a payment before
                t2 = _last_before(y, u, t)
            if t2 is not None and _paid_between(v, y, _BEFORE_ALL, t2):
                if not shortest:
                    shortest = 3
                if count < CYCLE_COUNT_CAP:
                    count += 1
        return shortest, count, 0
    if k == 3:  # the usual depth, without the recursion: v -> y -> u
        seen: dict[str, None] = {}
        ends = (u.key, v.key)
        for e in v.out:
            te = e[0]
            if te >= t:
                break
            left -= 1
            if left < 0:
                return shortest, count, 1
            yk = e[2]
            if yk in seen or yk in ends:
                continue
            y = nodes[yk]  # an edge held names an account held
            if y in into_u:
                seen[yk] = None
                if _paid_between(y, u, te, t):
                    if not shortest:
                        shortest = 3
                    if count < CYCLE_COUNT_CAP:
                        count += 1
        return shortest, count, 0
    on_path: dict[str, None] = {v.key: None, u.key: None}

    def walk(x: Node, arrived: int, hops: int) -> None:
        """x reached from v in ``hops`` edges, the last at ``arrived``: extend by one edge."""
        nonlocal left, truncated, shortest, count
        last_level = hops + 3 == k  # the next account's only way on is its edge into u
        seen: dict[str, None] = {}
        out = x.out
        i = bisect_left(out, (arrived + 1,))
        for j in range(i, len(out)):
            e = out[j]
            te = e[0]
            if te >= t:
                break
            left -= 1
            if left < 0:
                truncated = 1
                return
            yk = e[2]
            if yk in on_path or yk in seen:
                continue
            seen[yk] = None
            y = nodes[yk]  # an edge held names an account held
            if y in into_u and _paid_between(y, u, te, t):
                length = hops + 3
                if not shortest or length < shortest:
                    shortest = length
                if count < CYCLE_COUNT_CAP:
                    count += 1
            if not last_level:
                on_path[yk] = None
                walk(y, te, hops + 1)
                del on_path[yk]
                if truncated:
                    return

    walk(v, _BEFORE_ALL, 0)
    return shortest, count, truncated
