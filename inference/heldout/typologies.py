"""Laundering typologies (label 1), each built from a published description.

``typologies.md`` beside this module gives each typology's mechanics and its source. Every
instance is a ``Pattern``: its payments share a pattern id, and its suspects (the accounts
that act for it) are listed; innocent victims (fraud victims paying a mule) are listed apart.
An account takes part in at most one pattern, unless the world is too small to give every
typology an instance with accounts of its own. At most a quarter of the accounts act for
patterns (each typology's part of that by its share of the mix). Amounts are USD-equivalents before the amount
scale, so thresholds such as the USD 10,000 reporting line scale with it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from inference.heldout.plan import DAY_US, HOUR_US, MINUTE_US, Pattern, Plan
from inference.heldout.world import COMPANY, PERSON, World, stream

__all__ = ["TYPOLOGIES", "plan_typologies"]

# name -> (share of laundering payments, rough payments per instance)
_MIX: dict[str, tuple[float, float]] = {
    "mule_network": (0.15, 30.0),
    "funnel_account": (0.12, 28.0),
    "structuring": (0.12, 9.0),
    "cycle": (0.12, 6.5),
    "scatter_gather": (0.15, 45.0),
    "dormant_burst": (0.10, 8.0),
    "pass_through_business": (0.12, 22.0),
    "trade_layering": (0.12, 13.0),
}
TYPOLOGIES: tuple[str, ...] = tuple(_MIX)
_SUSPECT_BUDGET = 0.25  # at most this share of the accounts acts for patterns (split by the mix)
_HOPS = np.arange(3, 11)  # accounts in a cycle, shorter ones more often (weight 1 / (hops - 2))
_HOP_WEIGHTS = (1 / (_HOPS - 2)) / (1 / (_HOPS - 2)).sum()


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


class _Cast:
    """Draws accounts for patterns, each at most once."""

    def __init__(self, world: World, rng: np.random.Generator) -> None:
        self.world = world
        self.rng = rng
        self.used: set[int] = set()
        acc = world.accounts
        self.persons = [p for p in world.by_role[PERSON] if not acc[p].dormant]
        self.dormant = [p for p in world.by_role[PERSON] if acc[p].dormant]
        self.companies = list(world.by_role[COMPANY])

    def take(
        self, pool: list[int], n: int, avoid_country: str | None = None, same_country: str | None = None
    ) -> list[int]:
        out: list[int] = []
        acc = self.world.accounts
        for _ in range(n * 40):
            if len(out) == n:
                break
            a = pool[int(self.rng.integers(0, len(pool)))]
            c = acc[a].country.code
            if (
                a in self.used
                or (avoid_country and c == avoid_country)
                or (same_country and c != same_country)
            ):
                continue
            self.used.add(a)
            out.append(a)
        return out

    def any_person(self) -> int:
        """A person who need not be unused (a fraud victim)."""
        return self.persons[int(self.rng.integers(0, len(self.persons)))]


def plan_typologies(world: World, plan: Plan) -> None:
    """Plan the laundering of the period: about ``typology_share`` of all payments, every typology
    at least once when the share is above zero."""
    share = world.config.typology_share
    if share <= 0:
        return
    normal = world.config.density * world.config.n_accounts * world.config.days
    laundering = normal * share / (1 - share)
    cast = _Cast(world, stream(world.config, "typology-cast"))
    builders: dict[str, Callable[[Plan, _Cast, np.random.Generator, int], None]] = {
        "mule_network": _mule_network,
        "funnel_account": _funnel_account,
        "structuring": _structuring,
        "cycle": _cycle,
        "scatter_gather": _scatter_gather,
        "dormant_burst": _dormant_burst,
        "pass_through_business": _pass_through_business,
        "trade_layering": _trade_layering,
    }
    pattern = 0
    rngs = {name: stream(world.config, f"typology:{name}") for name in TYPOLOGIES}
    for name in TYPOLOGIES:
        weight, size = _MIX[name]
        budget = _SUSPECT_BUDGET * world.config.n_accounts * weight
        suspects = 0
        for _ in range(max(1, round(laundering * weight / size))):
            if suspects >= budget:
                break
            pattern += 1
            before = len(plan.patterns)
            builders[name](plan, cast, rngs[name], pattern)
            suspects += sum(len(p.suspects) for p in plan.patterns[before:])
    for name in TYPOLOGIES:  # a world too small for every pattern: accounts may serve twice
        if not any(p.typology == name for p in plan.patterns):
            cast.used.clear()
            for _ in range(20):
                pattern += 1
                builders[name](plan, cast, rngs[name], pattern)
                if plan.patterns and plan.patterns[-1].typology == name:
                    break


def _start(plan: Plan, rng: np.random.Generator, latest: float = 0.8) -> int:
    return int(rng.uniform(0.03, latest) * plan.period_us)


def _record(plan: Plan, name: str, pid: int, suspects: list[int], victims: list[int] | None = None) -> None:
    plan.patterns.append(
        Pattern(name, pid, tuple(dict.fromkeys(suspects)), tuple(dict.fromkeys(victims or [])))
    )


def _mule_network(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Fraud victims pay recruited mules; each mule forwards most of it within hours (keeping a
    commission) to a collector abroad, sometimes through a second-tier mule."""
    acc = plan.world.accounts
    name = "mule_network"
    first = cast.take(cast.persons, 1)
    if not first:
        return
    home = acc[first[0]].country.code
    mules = first + cast.take(cast.persons, int(rng.integers(1, 6)), same_country=home)
    collector = cast.take(cast.companies + cast.persons, 1, avoid_country=home)
    if not collector:
        return
    tier2 = mules.pop() if len(mules) >= 3 and rng.random() < 0.5 else None
    t0 = _start(plan, rng, 0.7)
    victims: list[int] = []
    tier2_in: list[tuple[int, float]] = []
    for m in mules:
        n = int(rng.integers(3, 16))
        span = rng.uniform(1, 5) * DAY_US
        paying = [v for v in (cast.any_person() for _ in range(n)) if v not in cast.used and v != m]
        times = sorted((plan.daytime(int(t0 + rng.uniform(0, span)), acc[v], rng), v) for v in paying)
        cuts = sorted(set(rng.integers(1, max(2, len(times)), int(rng.integers(0, 3))).tolist()))
        for g in (times[a:b] for a, b in zip([0, *cuts], [*cuts, len(times)], strict=True)):
            received = 0.0
            for t, v in g:
                usd = float(np.clip(rng.lognormal(np.log(1_200), 0.6), 200, 6_000))
                victims.append(v)
                plan.add(t, v, m, usd, "victim_payment", "INVOICE PAYMENT", name, pid)
                received += usd
            if received:
                t_out = g[-1][0] + int(rng.uniform(0.3, 8) * HOUR_US)
                usd = received * float(rng.uniform(0.85, 0.95))
                dest = tier2 if tier2 is not None else collector[0]
                plan.add(t_out, m, dest, usd, "mule_forward", "TRANSFER", name, pid)
                if tier2 is not None:
                    tier2_in.append((t_out, usd))
    if tier2 is not None and tier2_in:
        last = max(t for t, _ in tier2_in)
        total = sum(u for _, u in tier2_in) * float(rng.uniform(0.9, 0.97))
        parts = int(rng.integers(1, 3))
        for k in range(parts):
            plan.add(
                last + int(rng.uniform(1, 12) * HOUR_US) + k * 10 * MINUTE_US,
                tier2,
                collector[0],
                total / parts,
                "mule_forward",
                "TRANSFER",
                name,
                pid,
            )
        mules.append(tier2)
    _record(plan, name, pid, [*mules, collector[0]], victims)


def _funnel_account(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Many depositors in other places pay one account below the reporting threshold; the
    account wires the money on to a trading company abroad soon after it builds up."""
    acc = plan.world.accounts
    name = "funnel_account"
    funnel = cast.take(cast.persons + cast.companies, 1)
    if not funnel:
        return
    home = acc[funnel[0]].country.code
    depositors = cast.take(cast.persons, int(rng.integers(6, 31)), avoid_country=None)
    sinks = cast.take(cast.companies, int(rng.integers(1, 3)), avoid_country=home)
    if not depositors or not sinks:
        return
    t0 = _start(plan, rng, 0.65)
    span = rng.uniform(3, 21) * DAY_US
    deposits: list[tuple[int, int, float]] = []
    for d in depositors:
        for _ in range(int(rng.integers(1, 4))):
            usd = float(rng.uniform(1_500, 9_500))
            deposits.append((plan.daytime(int(t0 + rng.uniform(0, span)), acc[d], rng), d, usd))
            plan.fund(d, usd)
    deposits.sort()
    target = _log_uniform(rng, 20_000, 60_000)
    held = 0.0
    for k, (t, d, usd) in enumerate(deposits):
        plan.add(t, d, funnel[0], usd, "funnel_deposit", "DEPOSIT", name, pid)
        held += usd
        if held >= target or k == len(deposits) - 1:
            sink = sinks[int(rng.integers(0, len(sinks)))]
            plan.add(
                t + int(rng.uniform(2, 36) * HOUR_US),
                funnel[0],
                sink,
                held * float(rng.uniform(0.9, 1.0)),
                "funnel_wire",
                f"PURCHASE ORDER {int(rng.integers(1000, 9999))}",
                name,
                pid,
            )
            held = 0.0
    _record(plan, name, pid, [funnel[0], *depositors, *sinks])


def _structuring(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Payments kept just under the USD 10,000 reporting line: one person splitting a sum over
    days to a few beneficiaries, or several smurfs paying one collector within days."""
    acc = plan.world.accounts
    name = "structuring"
    t0 = _start(plan, rng, 0.8)
    if rng.random() < 0.5:
        who = cast.take(cast.persons, 1)
        benes = cast.take(cast.persons + cast.companies, int(rng.integers(1, 4)))
        if not who or not benes:
            return
        n = int(rng.integers(4, 13))
        span_days = rng.uniform(2, 10)
        for _ in range(n):
            usd = float(rng.uniform(8_000, 9_900))
            plan.fund(who[0], usd)
            t = plan.daytime(int(t0 + rng.uniform(0, span_days) * DAY_US), acc[who[0]], rng)
            plan.add(
                t,
                who[0],
                benes[int(rng.integers(0, len(benes)))],
                usd,
                "structured_payment",
                "TRANSFER",
                name,
                pid,
            )
        _record(plan, name, pid, [*who, *benes])
        return
    collector = cast.take(cast.persons + cast.companies, 1)
    smurfs = cast.take(cast.persons, int(rng.integers(4, 16)))
    if not collector or not smurfs:
        return
    span_days = rng.uniform(1, 3)
    for s in smurfs:
        for _ in range(int(rng.integers(1, 3))):
            usd = float(rng.uniform(7_000, 9_900))
            plan.fund(s, usd)
            t = plan.daytime(int(t0 + rng.uniform(0, span_days) * DAY_US), acc[s], rng)
            plan.add(t, s, collector[0], usd, "smurf_payment", "TRANSFER", name, pid)
    _record(plan, name, pid, [*smurfs, *collector])


def _cycle(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Round-tripping: money leaves an account and returns to it through 3-10 hops, each later
    than the last, a small fee lost at each hop."""
    name = "cycle"
    hops = int(rng.choice(_HOPS, p=_HOP_WEIGHTS))
    origin = cast.take(cast.companies if rng.random() < 0.7 else cast.persons, 1)
    others = cast.take(cast.companies + cast.persons, hops - 1)
    if not origin or len(others) < 2:
        return
    nodes = origin + others
    usd = _log_uniform(rng, 20_000, 500_000)
    plan.fund(origin[0], usd)
    t = _start(plan, rng, 0.6)
    longest = max(
        0.6, min(72.0, 0.35 * plan.world.config.days * 24 / len(nodes))
    )  # the cycle closes in the period
    remits = ("CONSULTANCY FEE", "LOAN", "INVOICE", "SERVICES", "REPAYMENT")
    for i in range(len(nodes)):
        payer, payee = nodes[i], nodes[(i + 1) % len(nodes)]
        plan.add(t, payer, payee, usd, "cycle_hop", remits[int(rng.integers(0, len(remits)))], name, pid)
        usd *= 1 - float(rng.uniform(0, 0.02))
        t += int(_log_uniform(rng, 0.5, longest) * HOUR_US)
    _record(plan, name, pid, nodes)


def _scatter_gather(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Fan-in then fan-out: 5-100 sources pay one account over hours to weeks; it then sends most
    of the money on to 5-30 destinations."""
    acc = plan.world.accounts
    name = "scatter_gather"
    hub = cast.take(cast.persons + cast.companies, 1)
    sources = cast.take(cast.persons, round(_log_uniform(rng, 5, 100)))
    dests = cast.take(cast.persons + cast.companies, int(rng.integers(5, 31)))
    if not hub or len(sources) < 5 or len(dests) < 5:
        return
    window = _log_uniform(rng, 6, min(21 * 24, 0.45 * plan.world.config.days * 24)) * HOUR_US
    t0 = _start(plan, rng, 0.5)
    total = 0.0
    for s in sources:
        usd = _log_uniform(rng, 500, 9_000)
        plan.fund(s, usd)
        plan.add(
            plan.daytime(int(t0 + rng.uniform(0, window)), acc[s], rng),
            s,
            hub[0],
            usd,
            "gather",
            "TRANSFER",
            name,
            pid,
        )
        total += usd
    out = total * float(rng.uniform(0.8, 0.98))
    spread = _log_uniform(rng, 1, 96) * HOUR_US
    shares = rng.dirichlet(np.ones(len(dests)))
    t_end = int(t0 + window) + DAY_US  # after the last source was gathered (daytime moves it by < 1 day)
    for d, w in zip(dests, shares, strict=True):
        plan.add(
            t_end + int(rng.uniform(0, spread)), hub[0], d, out * float(w), "scatter", "TRANSFER", name, pid
        )
    _record(plan, name, pid, [*sources, hub[0], *dests])


def _dormant_burst(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """An account silent since the period began receives large sums from abroad and passes them on."""
    acc = plan.world.accounts
    name = "dormant_burst"
    z = cast.take(cast.dormant, 1) if cast.dormant else []
    if not z:
        return
    home = acc[z[0]].country.code
    senders = cast.take(cast.companies + cast.persons, int(rng.integers(1, 4)), avoid_country=home)
    receivers = cast.take(cast.companies + cast.persons, int(rng.integers(2, 6)))
    if not senders or not receivers:
        return
    t = int(rng.uniform(0.5, 0.85) * plan.period_us)
    total = 0.0
    for _ in range(int(rng.integers(2, 7))):
        s = senders[int(rng.integers(0, len(senders)))]
        usd = _log_uniform(rng, 15_000, 200_000)
        plan.fund(s, usd)
        plan.add(t, s, z[0], usd, "dormant_inflow", "TRANSFER", name, pid)
        total += usd
        t += int(rng.uniform(1, 36) * HOUR_US)
    shares = rng.dirichlet(np.ones(len(receivers)))
    out = total * float(rng.uniform(0.9, 1.0))
    for r, w in zip(receivers, shares, strict=True):
        plan.add(
            t + int(rng.uniform(1, 48) * HOUR_US),
            z[0],
            r,
            out * float(w),
            "dormant_outflow",
            "TRANSFER",
            name,
            pid,
        )
    _record(plan, name, pid, [z[0], *senders, *receivers])


def _pass_through_business(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """A business account through which large sums from foreign companies pass to other foreign
    companies within hours or a day or two, almost nothing staying."""
    acc = plan.world.accounts
    name = "pass_through_business"
    biz = cast.take(cast.companies, 1)
    if not biz:
        return
    home = acc[biz[0]].country.code
    payers = cast.take(cast.companies, int(rng.integers(2, 6)), avoid_country=home)
    payees = cast.take(cast.companies, int(rng.integers(2, 6)), avoid_country=home)
    if not payers or not payees:
        return
    waves = int(rng.integers(3, 11))
    t = _start(plan, rng, 0.35)
    step = (plan.period_us * 0.9 - t) / waves
    for w in range(waves):
        tw = int(t + w * step + rng.uniform(0, 0.3) * step)
        received = 0.0
        for _ in range(int(rng.integers(1, 5))):
            usd = _log_uniform(rng, 10_000, 250_000)
            p = payers[int(rng.integers(0, len(payers)))]
            plan.fund(p, usd)
            tw += int(rng.uniform(0, 12) * HOUR_US)
            plan.add(
                tw, p, biz[0], usd, "pass_in", f"INVOICE {int(rng.integers(100, 999))}/{w + 1}", name, pid
            )
            received += usd
        out = received * float(rng.uniform(0.95, 0.995))
        n_out = int(rng.integers(1, 5))
        t_out = tw + int(rng.uniform(2, 36) * HOUR_US)
        for k in range(n_out):
            plan.add(
                t_out + k * int(rng.uniform(1, 30) * MINUTE_US),
                biz[0],
                payees[int(rng.integers(0, len(payees)))],
                out / n_out,
                "pass_out",
                f"SUPPLY CONTRACT {int(rng.integers(100, 999))}",
                name,
                pid,
            )
    _record(plan, name, pid, [biz[0], *payers, *payees])


def _trade_layering(plan: Plan, cast: _Cast, rng: np.random.Generator, pid: int) -> None:
    """Trade-based layering: a ring of companies in several countries pays invoices for goods
    among themselves (round invoice amounts, payments on behalf of third parties), moving one
    sum back and forth over weeks."""
    acc = plan.world.accounts
    name = "trade_layering"
    ring = cast.take(cast.companies, int(rng.integers(3, 7)))
    if len(ring) < 3:
        return
    holding = {c: 0.0 for c in ring}
    holding[ring[0]] = _log_uniform(rng, 50_000, 500_000)
    plan.fund(ring[0], holding[ring[0]])
    t = _start(plan, rng, 0.5)
    for _ in range(int(rng.integers(6, 21))):
        payer = max(ring, key=lambda c: (holding[c], -ring.index(c)))
        payee = ring[int(rng.integers(0, len(ring)))]
        if payee == payer:
            payee = ring[(ring.index(payer) + 1) % len(ring)]
        usd = float(np.floor(holding[payer] * float(rng.uniform(0.6, 1.0)) / 500) * 500)
        if usd <= 0:
            continue
        on_behalf = rng.random() < 0.25
        text = f"INV {int(rng.integers(10_000, 99_999))}" + (
            f" OBO {acc[ring[0]].name[:12]}" if on_behalf else ""
        )
        plan.add(t, payer, payee, usd, "trade_invoice", text, name, pid)
        holding[payer] -= usd
        holding[payee] += usd * float(rng.uniform(0.98, 1.0))
        t += int(_log_uniform(rng, 4, 7 * 24) * HOUR_US)
        if t >= plan.period_us:
            break
    _record(plan, name, pid, ring)
