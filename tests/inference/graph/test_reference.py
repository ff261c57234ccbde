"""The graph's values against a slow, independent re-derivation over the flat list of payments, on
random small streams where no cap is reached: cycles, scatter-gather, fan-in and fan-out, activity,
pass-through, dormancy, forwarding (and the fan-out of a forwarded amount's sender) and the amount
against history."""

from __future__ import annotations

import random

import pytest

from inference.graph import GraphConfig, GraphFeatures, as_dict
from inference.graph.fixedpoint import log2_q8

H = 3_600_000_000
DAY = 24 * H
Pay = tuple[str, str, int, int]


def _cycles(held: list[Pay], u: str, v: str, t: int, k: int) -> tuple[int, int]:
    """Shortest cycle and number of account routes v -> ... -> u, times rising, all before t."""
    if u == v:
        return 0, 0
    found: list[int] = []

    def extend(x: str, arrived: int, route: list[str]) -> None:
        if len(route) > k - 1:
            return
        firsts: dict[str, int] = {}
        for o, b, te, _ in held:
            if o == x and arrived < te < t and (b not in firsts or te < firsts[b]):
                firsts[b] = te
        for b, te in sorted(firsts.items()):
            if b == u:
                found.append(len(route) + 1)
            elif b not in route:
                extend(b, te, [*route, b])

    extend(v, -(1 << 62), [v])
    return (min(found) if found else 0), min(len(found), 64)


def _forward(held: list[Pay], u: str, t: int, c: int) -> tuple[int, int]:
    """The smallest amount u received in (t - 7 d, t) that c does not exceed: the share of it passed
    on (permille) and the hours since the latest such payment came in."""
    got = [p for p in held if p[1] == u and t - 7 * DAY < p[2] < t and p[3] >= c]
    if not got or c == 0:
        return 0, -1
    best = min(p[3] for p in got)
    latest = max(p[2] for p in got if p[3] == best)
    return (1000 * c) // best, (t - latest) // H


def _forward_source(held: list[Pay], u: str, t: int, c: int) -> int:
    """How many accounts the sender of that amount paid over ``held`` (the latest such payment to
    arrive, when several came in at once); -1 when none is forwarded."""
    got = [p for p in held if p[1] == u and t - 7 * DAY < p[2] < t and p[3] >= c]
    if not got or c == 0:
        return -1
    best = min(p[3] for p in got)
    latest = max(p[2] for p in got if p[3] == best)
    source = [p for p in got if p[3] == best and p[2] == latest][-1][0]
    return len({p[1] for p in held if p[0] == source})


def _distinct(held: list[Pay], t: int, lo: int, key: int, match: int, who: str) -> int:
    return len({p[key] for p in held if p[match] == who and lo < p[2] <= t})


@pytest.mark.parametrize(("seed", "k"), [(1, 3), (2, 4), (3, 5), (4, 6), (5, 3)])
def test_values_match_a_slow_re_derivation(seed: int, k: int) -> None:
    rng = random.Random(seed)
    window = 5 * DAY
    gf = GraphFeatures(GraphConfig(cycle_hops=k, window_us=window, scatter_us=DAY, late_us=0))
    names = [chr(65 + i) for i in range(9)]
    seen: list[Pay] = []
    last_seen: dict[str, int] = {}
    t = 0
    for _ in range(400):
        t += rng.randrange(3 * H)
        u, v, c = rng.choice(names), rng.choice(names), rng.randrange(0, 100_000)
        held = [p for p in seen if p[2] > t - window]  # the window as of this payment
        got = as_dict(gf.observe(u, v, t, c))
        want_len, want_count = _cycles(held, u, v, t, k)
        assert (got["cycle_len"], got["cycle_count"]) == (want_len, want_count)
        assert got["scatter_gather"] == len({p[0] for p in held if p[1] == u and t - DAY < p[2] < t})
        hist = sorted(p[3] for p in held if p[0] == u)
        assert got["amount_history_n"] == len(hist)
        if hist:
            med = hist[(len(hist) - 1) // 2]
            assert got["amount_log2_ratio_q8"] == log2_q8(max(c, 1)) - log2_q8(max(med, 1))
        assert got["orig_dormancy_days"] == ((t - last_seen[u]) // DAY if u in last_seen else -1)
        assert (got["forward_share_permille"], got["forward_delay_hours"]) == _forward(held, u, t, c)
        assert got["forward_source_fan_out"] == _forward_source(held, u, t, c)
        now = [*held, (u, v, t, c)]
        for span, name in ((DAY, "1d"), (7 * DAY, "7d"), (window, "30d")):
            assert got[f"orig_fan_out_{name}"] == _distinct(now, t, t - span, 1, 0, u)
            assert got[f"orig_fan_in_{name}"] == _distinct(now, t, t - span, 0, 1, u)
            assert got[f"bene_fan_in_{name}"] == _distinct(now, t, t - span, 0, 1, v)
        out1 = sum(p[3] for p in now if p[0] == u and p[2] > t - DAY)
        in1 = sum(p[3] for p in now if p[1] == u and p[2] > t - DAY)
        assert got["pass_through_24h_q16"] == (min((out1 << 16) // in1, 4 << 16) if in1 else 0)
        assert got["orig_activity_24h"] == sum((p[0] == u) + (p[1] == u) for p in now if p[2] > t - DAY)
        seen.append((u, v, t, c))
        last_seen[u] = last_seen[v] = t


@pytest.mark.parametrize(("seed", "k", "accounts"), [(11, 3, 6), (12, 3, 30), (13, 4, 12), (14, 5, 20)])
def test_cycles_match_with_late_payments_and_uneven_degrees(seed: int, k: int, accounts: int) -> None:
    rng = random.Random(seed)
    window, late = 2 * DAY, 40 * 60_000_000
    gf = GraphFeatures(GraphConfig(cycle_hops=k, window_us=window, scatter_us=DAY, late_us=late))
    names = [f"N{i}" for i in range(accounts)]
    busy = names[: max(2, accounts // 5)]  # a few accounts pay out far more than the rest
    seen: list[Pay] = []
    watermark = latest = 0
    for _ in range(600):
        watermark += rng.randrange(H)
        t = watermark - (rng.randrange(late) if rng.random() < 0.15 else 0)
        latest = max(latest, t)  # the graph's watermark: the latest time it has been given
        u = rng.choice(busy if rng.random() < 0.6 else names)
        v, c = rng.choice(names), rng.randrange(1, 1000)
        held = [p for p in seen if p[2] > watermark - window]
        got = as_dict(gf.observe(u, v, t, c))
        assert (got["cycle_len"], got["cycle_count"]) == _cycles(held, u, v, t, k)
        assert got["scatter_gather"] == len({p[0] for p in held if p[1] == u and t - DAY < p[2] < t})
        kept = [p for p in seen if p[2] > latest - window]  # what the graph still holds
        assert (got["forward_share_permille"], got["forward_delay_hours"]) == _forward(kept, u, t, c)
        assert got["forward_source_fan_out"] == _forward_source(kept, u, t, c)
        seen.append((u, v, t, c))
