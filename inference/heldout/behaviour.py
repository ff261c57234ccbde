"""Normal behaviour (label 0): scheduled money and self-exciting everyday spending.

- payroll: employers pay their staff monthly (a fixed day 24-28, moved back to the Friday before
  a weekend) or biweekly (alternate Fridays), in one run of a few minutes early in the morning;
- salary pass-through: some persons move 10-40 % to their savings account, or pay the rent,
  within hours of the salary arriving;
- bills: rent (day 1-3), utilities and telecom (a fixed day, about the same amount each month),
  subscriptions (a fixed price, often to a foreign biller), collected early in the morning;
- households: members send each other money, and the receiver often sends part of it back
  days later (a family round-trip); persons without a salary get a monthly allowance;
- supplier runs: every business pays a batch of its suppliers once a month (companies up to 59),
  merchants also pay one to three suppliers each Monday;
- everyday spending: a Hawkes process per person in its cluster form. Sessions arrive as a
  Poisson process whose rate follows the weekday (Friday and Saturday high, Sunday low) and a
  daily profile in local time; each payment spawns Poisson(0.35) follow-up payments an
  exponential 45 minutes later. Most go to the person's favourite merchants (Zipf weights) with
  category-specific log-normal amounts; some are transfers to other persons.

The rate of everyday spending is set so that all normal payments together reach the
configuration's density (payments per account per day).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from inference.heldout.plan import DAY_US, HOUR_US, MINUTE_US, Plan
from inference.heldout.world import COMPANY, MERCHANT, PERSON, World, stream

__all__ = ["plan_normal"]

_DOW = np.array([0.9, 0.92, 1.0, 1.05, 1.25, 1.35, 0.53])  # Monday..Sunday
_MEDIAN_USD = {
    "grocery": 42.0,
    "restaurant": 31.0,
    "fuel": 58.0,
    "retail": 75.0,
    "online": 48.0,
    "travel": 380.0,
}
_BRANCHING = 0.35
_FOLLOW_UP_MEAN_MIN = 45.0
_ONE_DAY = timedelta(days=1)


def plan_normal(world: World, plan: Plan) -> None:
    """Plan every normal payment of the period into ``plan``."""
    rng = stream(world.config, "schedule")
    _payroll(world, plan, rng)
    _bills(world, plan, rng)
    _households(world, plan, rng)
    _supplier_runs(world, plan, rng)
    scheduled = len(plan.intents)
    target = world.config.density * world.config.n_accounts * world.config.days
    _spending(world, plan, stream(world.config, "spending"), max(0.0, target - scheduled))


def _payday(plan: Plan, day_of_month: int, month_days: list[int]) -> int | None:
    """The period day on which a monthly payment due on ``day_of_month`` is made (weekends move back)."""
    for d in month_days:
        if _dom(plan, d) == day_of_month:
            while plan.weekday(d) >= 5:
                d -= 1
            return d
    return None


def _dom(plan: Plan, day: int) -> int:
    return (plan.world.config.start + day * _ONE_DAY).day


def _months(plan: Plan) -> list[list[int]]:
    """The period's days grouped by calendar month."""
    out: dict[tuple[int, int], list[int]] = {}
    for d in range(plan.world.config.days):
        at = plan.world.config.start + d * _ONE_DAY
        out.setdefault((at.year, at.month), []).append(d)
    return [out[k] for k in sorted(out)]


def _payroll(world: World, plan: Plan, rng: np.random.Generator) -> None:
    acc = world.accounts
    employers = [e for role in (COMPANY, MERCHANT, "biller") for e in world.by_role[role] if acc[e].staff]
    for e in employers:
        emp = acc[e]
        days: list[int] = []
        if emp.pay_schedule == "monthly":
            for month in _months(plan):
                d = _payday(plan, emp.pay_day, month)
                if d is not None and d >= 0:
                    days.append(d)
        else:
            days = [
                d
                for d in range(world.config.days)
                if plan.weekday(d) == 4 and ((world.config.start.toordinal() + d) // 7) % 2 == emp.pay_day
            ]
        share = 1.0 if emp.pay_schedule == "monthly" else 12 / 26
        for d in days:
            t = plan.local_us(d, float(rng.uniform(5.5, 8.0)), emp)
            for k, p in enumerate(emp.staff):
                person = acc[p]
                usd = person.monthly_salary_usd * share * float(rng.uniform(0.99, 1.01))
                paid = t + k * int(rng.integers(1, 4)) * 1_000_000
                plan.add(paid, e, p, usd, "payroll", f"SALARY {emp.name[:20]}")
                _pass_through(plan, rng, p, paid, usd)


def _pass_through(plan: Plan, rng: np.random.Generator, p: int, paid: int, usd: float) -> None:
    """Salary in, part of it out within hours: savings sweep or rent on payday (benign)."""
    person = plan.world.accounts[p]
    if person.savings >= 0 and rng.random() < 0.5:
        plan.add(
            paid + int(rng.uniform(0.5, 10) * HOUR_US),
            p,
            person.savings,
            usd * float(rng.uniform(0.1, 0.4)),
            "salary_pass_through",
            "SAVINGS",
        )
    rent = [b for b in person.bills if plan.world.accounts[b[0]].kind == "landlord"]
    if rent and rng.random() < 0.3:
        plan.add(
            paid + int(rng.uniform(1, 14) * HOUR_US), p, rent[0][0], rent[0][2], "salary_pass_through", "RENT"
        )


def _bills(world: World, plan: Plan, rng: np.random.Generator) -> None:
    acc = world.accounts
    months = _months(plan)
    for p in world.by_role[PERSON]:
        person = acc[p]
        for biller, dom, usd in person.bills:
            kind = acc[biller].kind
            for month in months:
                d = next((x for x in month if _dom(plan, x) == dom), None)
                if d is None:
                    continue
                amount = usd if kind in ("landlord", "subscription") else usd * float(rng.normal(1.0, 0.06))
                plan.add(
                    plan.local_us(d, float(rng.uniform(0.5, 6.0)), person),
                    p,
                    biller,
                    max(1.0, amount),
                    "bill",
                    f"{kind.upper()} {acc[biller].name[:20]}",
                )


def _households(world: World, plan: Plan, rng: np.random.Generator) -> None:
    acc = world.accounts
    members: dict[int, list[int]] = {}
    for p in world.by_role[PERSON]:
        if acc[p].household >= 0:
            members.setdefault(acc[p].household, []).append(p)
    period_days = world.config.days
    for h in sorted(members):
        group = members[h]
        for a in group:
            n = int(rng.poisson(period_days / 14))
            for _ in range(n):
                b = group[int(rng.integers(0, len(group)))]
                if b == a:
                    continue
                t = plan.local_us(int(rng.integers(0, period_days)), float(rng.uniform(7, 23)), acc[a])
                usd = float(rng.lognormal(np.log(120), 0.8))
                plan.add(t, a, b, usd, "family", "FAMILY")
                if rng.random() < 0.6:  # sent back: a family round-trip A -> B -> A
                    back = t + int(rng.uniform(0.1, 10) * DAY_US)
                    plan.add(back, b, a, usd * float(rng.uniform(0.5, 1.0)), "family", "FAMILY")
            if acc[a].employer < 0 and len(group) > 1:  # allowance from another member
                giver = next(x for x in group if x != a)
                for month in _months(plan):
                    d = month[0]
                    plan.add(
                        plan.local_us(d, float(rng.uniform(8, 20)), acc[giver]),
                        giver,
                        a,
                        float(rng.lognormal(np.log(300), 0.4)),
                        "family",
                        "ALLOWANCE",
                    )
    for s in world.by_role["savings"]:
        owner = acc[s].owner
        for month in _months(plan):
            if rng.random() < 0.3:
                d = month[int(rng.integers(0, len(month)))]
                plan.add(
                    plan.local_us(d, float(rng.uniform(8, 22)), acc[owner]),
                    s,
                    owner,
                    acc[owner].monthly_salary_usd * float(rng.uniform(0.05, 0.3)),
                    "savings",
                    "TRANSFER",
                )


def _supplier_runs(world: World, plan: Plan, rng: np.random.Generator) -> None:
    acc = world.accounts
    for b in world.by_role[COMPANY] + world.by_role[MERCHANT] + world.by_role["biller"]:
        biz = acc[b]
        median = 4_000.0 if biz.role == COMPANY else 1_500.0
        run_dom = int(rng.choice([5, 10, 15, 20, 25]))
        for month in _months(plan):
            d = next((x for x in month if _dom(plan, x) == run_dom), None)
            if d is None:
                continue
            while plan.weekday(d) >= 5 and d > 0:
                d -= 1
            t = plan.local_us(d, float(rng.uniform(9, 16)), biz)
            paid = [s for s in biz.suppliers if rng.random() < 0.7] or list(biz.suppliers[:1])
            for k, s in enumerate(paid):
                plan.add(
                    t + k * int(rng.integers(5, 40)) * 1_000_000,
                    b,
                    s,
                    float(rng.lognormal(np.log(median), 0.9)),
                    "supplier_run",
                    f"INVOICE {int(rng.integers(10_000, 99_999))}",
                )
        if biz.role == MERCHANT:
            for d in range(world.config.days):
                if plan.weekday(d) == 0:
                    for _ in range(int(rng.integers(1, 4))):
                        s = biz.suppliers[int(rng.integers(0, len(biz.suppliers)))]
                        plan.add(
                            plan.local_us(d, float(rng.uniform(9, 17)), biz),
                            b,
                            s,
                            float(rng.lognormal(np.log(900), 0.7)),
                            "supplier_run",
                            f"INVOICE {int(rng.integers(10_000, 99_999))}",
                        )


def _session_hours(rng: np.random.Generator, n: int) -> np.ndarray:
    """Local hours of ``n`` spending sessions: morning, lunch and evening peaks, few at night."""
    which = rng.choice(4, n, p=[0.2, 0.3, 0.42, 0.08])
    centre = np.array([9.0, 12.8, 18.5, 23.0])[which]
    spread = np.array([1.2, 1.0, 1.8, 1.5])[which]
    return np.clip(rng.normal(centre, spread), 0.0, 23.99)


def _spending(world: World, plan: Plan, rng: np.random.Generator, wanted: float) -> None:
    acc = world.accounts
    persons = [p for p in world.by_role[PERSON] if not acc[p].dormant]
    if not persons or wanted <= 0:
        return
    days = world.config.days
    mean_dow = float(np.mean([_DOW[plan.weekday(d)] for d in range(days)]))
    rate = wanted * (1 - _BRANCHING) / (len(persons) * days * mean_dow)  # sessions per person-day
    activity = rng.gamma(2.0, 0.5, len(persons))  # some persons spend far more often than others
    by_country: dict[str, list[int]] = {}
    for p in persons:
        by_country.setdefault(acc[p].country.code, []).append(p)
    dow = np.array([_DOW[plan.weekday(d)] for d in range(days)])
    for p, act in zip(persons, activity, strict=True):
        person = acc[p]
        counts = rng.poisson(rate * act * dow)
        total = int(counts.sum())
        if not total:
            continue
        day_of = np.repeat(np.arange(days), counts)
        hours = _session_hours(rng, total)
        times = [plan.local_us(int(d), float(h), person) for d, h in zip(day_of, hours, strict=True)]
        queue = list(times)
        while queue:  # the cluster (branching) form of the Hawkes process
            t = queue.pop()
            for _ in range(int(rng.poisson(_BRANCHING))):
                child = t + int(rng.exponential(_FOLLOW_UP_MEAN_MIN) * MINUTE_US) + MINUTE_US
                times.append(child)
                if len(times) < total * 4:
                    queue.append(child)
        fav = np.array(person.favourite_weights)
        for t in times:
            u = rng.random()
            if u < 0.07:
                peers = by_country[person.country.code]
                other = peers[int(rng.integers(0, len(peers)))]
                plan.add(t, p, other, float(rng.lognormal(np.log(60), 0.9)), "transfer", "TRANSFER")
                continue
            m = person.favourites[int(rng.choice(len(fav), p=fav))]
            usd = float(rng.lognormal(np.log(_MEDIAN_USD[acc[m].kind]), 0.7))
            channel = "card" if u < 0.95 else "transfer"
            plan.add(t, p, m, usd, channel, f"{'CARD ' if channel == 'card' else ''}{acc[m].name[:24]}")
