"""Seeded synthetic payments with AML typologies, labelled per transaction.

``simulate(SimConfig(...))`` returns ``SimTx`` records sorted by event time: canonical
``Transaction`` objects (message type ``json``) plus the time, the label (1 = part of a
laundering pattern) and the typology. Output depends only on the config: the same seed gives
the same list, field for field, whatever the clock or ``PYTHONHASHSEED``. The population
(``inference.simulate_population``), normal traffic and typologies draw from separate
streams, so a plain run and an evasion run with one seed share their accounts and normal
payments and differ only in the laundering. USD equivalents use ``USD_PER_UNIT`` (the ECB
reference rates of October 2025); amounts carry the currency's ISO 4217 minor units.

Normal traffic (label 0): customers in low-risk home markets (86 %), financial hubs (5 %),
FATF increased-monitoring countries (8 %; FATF call-for-action accounts, 1 %, send and receive
nothing normal); 20 % businesses (35 % in hubs) sending twice as often as retail customers;
log-normal amounts (retail median USD 180, sigma 1.0; business median USD 1,500, sigma 1.1),
80 % to the account's 2-7 usual payees (75 % domestic), daytime hours in the customer's time
zone, weekends at 35 % of a weekday. For false-positive pressure: payroll batches (one per
2,000 payments: a business pays 10-25 staff within 20 minutes), invoice batches (one per
4,000: 3-4 payments of USD 8,000-9,999 to one supplier within 2 hours), single payments of
USD 8,000-9,999 (2 %), large round amounts of USD 10,000-300,000 (1.5 % of business payments),
business payments to suppliers abroad, often in hubs (2 %), remittances to grey-list countries
(2.5 % of retail), incomplete originator data (3 %).

Typologies (label 1 on every transaction of the pattern), started at a daytime moment of the
first payer (70 %) or at any time:

- ``structuring``: one originator sends 3-8 transfers of USD 8,200-9,850 (40 % rounded to
  100 units) to 1-3 beneficiaries 5-150 minutes apart; or 3-8 smurfs pay one beneficiary so.
- ``layering``: a chain of 3-5 transfers A->B->C->D..., USD 12,000-150,000 at the start (half
  of them a multiple of 1,000), less a 0.5-3 % fee per hop, each hop 5 minutes to 6 hours
  after the funds arrived, 70 % of hops cross-border, often through hubs; the source is a hub,
  grey-list or business account, with an incomplete originator 25 % of the time.
- ``fan_in``: 10-30 mules (retail customers) pay one collector (a hub or grey-list account
  40 % of the time) within 2-20 hours, USD 12,000-90,000 in total.
- ``fan_out``: one account pays 10-30 mules within 1-20 hours, USD 12,000-90,000 in total;
  half the time funded 10 minutes earlier by one inflow from a hub or grey-list account.
- ``high_risk_corridor``: 1-4 payments of USD 1,000-250,000 (median 9,000), 1-30 hours apart,
  between a low-risk customer and a FATF call-for-action (30 %: KP, IR, MM) or
  increased-monitoring account, 60 % outbound, 55 % with incomplete originator information.
- ``round_tripping``: A->B->C(->D)->A through hubs and foreign businesses, 6-48 hours a hop,
  a multiple of 1,000 worth USD 25,000-250,000, each hop 0-1.5 % less, rounded to 100 units.

Evasion variants (``SimConfig(evasion=True)``) keep the intent but stay under the thresholds of
the ``aml_core`` rule pack: complete R.16 data, jittered (not round) amounts, low-risk
countries except where the typology needs a listed one, and payments spread over days so that
within any 24 hours the pattern gives no account 10 counterparties, USD 10,000, a near-threshold
payment or money both in and out:

- ``structuring``: USD 7,000-7,850 per transfer (under the USD 8,000 near-threshold band),
  25-40 hours apart; 3-5 transfers to 2-4 beneficiaries, or 4-8 smurfs each paying once.
- ``layering``: USD 6,000-9,400, 3-6 hops, each 25-50 hours after the funds arrived, 60 %
  domestic (no in-and-out within 24 h, nothing over USD 10,000).
- ``fan_in`` / ``fan_out``: 2-3 waves, each of 7-9 new mules within 6 hours and USD
  6,000-9,400 in total, waves 31-48 hours apart (never 10 counterparties or USD 10,000 in 24 h).
- ``high_risk_corridor``: increased-monitoring countries only, 3-6 payments of USD 400-950
  (under the USD 1,000 R.16 and grey-list thresholds) from or to 2-4 customers, 25-40 hours apart.
- ``round_tripping``: 4-5 accounts, USD 6,000-9,400, 0.5-3 % less each hop, 25-60 hours a hop.

Further typologies, simulated when ``typologies`` names them (``ALL_TYPOLOGIES``; the default is the
six above, as before the setting existed; each typology's docstring has its figures):

- ``scatter_gather``: ``fan_mules`` sources pay one account over ``fan_hours`` (retail, business or a
  hub), which pays 85-98 % of it on to 1-30 accounts once most of it has arrived; with one to three
  destinations, mostly abroad, it is a funnel account (FinCEN FIN-2014-A005).
- ``pass_through``: an account that keeps its normal payments (a retail money mule or a front
  business) passes 80-98 % of each of 1-6 inflows, from fraud victims at home or from abroad, on to one
  or two collectors within 36 hours (FinCEN FIN-2020-A003, money mules).
- ``dormant_burst``: an account with no payments in the period (its normal traffic is taken out)
  receives large sums, mostly from abroad, and moves them on within days (FATF and Egmont red flags:
  dormant accounts suddenly active).

Benign look-alikes (``lookalikes=True``; part of the normal payments, label 0), so that a model
learns what tells laundering apart from ordinary traffic of the same shape: billers collecting
from 30-300 customers each on one or two fixed days a month (fan-in, no money moved on); merchants
paid small sums by 20-200 customers a day who settle the takings to a supplier every few days
(fan-in, some of it moved on); monthly payroll runs of 10-200 staff and supplier runs of 10-60
suppliers, a third abroad (fan-out); salaries passed on within hours (70-95 % to savings or
rent); family transfers paid partly back days later (a two-account round trip). A salary passed on
is paid by a business that pays nobody else; with ``payroll_salaries=True`` it is one of the
payroll runs' salaries instead, as a salary is (its employer pays its whole staff), and the other
look-alikes are unchanged. Either way a run has ``n_normal`` normal payments, or more when the
look-alikes alone need more (a short ``n_normal`` over a long period); then the two differ.

Scale and shape: ``amount_scale`` multiplies every amount, the bands above included (a payment of
USD 8,000-9,999 at scale 0.01 is one of USD 80-99.99; whole-unit rounding steps scale by the
nearest power of ten); ``chain_hops``, ``cycle_hops``, ``fan_mules`` and ``fan_hours`` set the plain
typologies' lengths and spreads. The defaults are the figures above; the same seed and defaults give
the same payments as before these settings existed.

Patterns that would not fit a short period have fewer or closer payments (never closer than
the gaps above). Rough size: ``typology_share`` of all transactions are laundering, split 20 % structuring,
15 % layering, 20 % fan-in, 20 % fan-out, 15 % high-risk corridor, 10 % round-tripping (with the
further typologies, in proportion to the weights 0.20, 0.15, 0.20, 0.20, 0.15, 0.10, then 0.17
scatter-gather, 0.15 pass-through, 0.10 dormant burst); each typology occurs at least once when the
share is above zero.
"""

from __future__ import annotations

import bisect
import gc
import hashlib
import itertools
import math
import random
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from inference.messages.transaction import R16, Agent, Transaction
from inference.simulate_population import COUNTRIES, LOW_RISK, Account, Population, build_population

__all__ = ["ALL_TYPOLOGIES", "MINOR_UNITS", "MORE_TYPOLOGIES", "TYPOLOGIES", "USD_PER_UNIT", "SimConfig",
           "SimTx", "simulate", "usd_equivalent"]

# The default set: what SimConfig() simulates, as it always has.
TYPOLOGIES: tuple[str, ...] = (
    "structuring", "layering", "fan_in", "fan_out", "high_risk_corridor", "round_tripping",
)
# Chosen with SimConfig(typologies=ALL_TYPOLOGIES): money gathered from many then scattered, money
# passed straight on by a mule or a front business, and a dormant account woken to move money.
MORE_TYPOLOGIES: tuple[str, ...] = ("scatter_gather", "pass_through", "dormant_burst")
ALL_TYPOLOGIES: tuple[str, ...] = TYPOLOGIES + MORE_TYPOLOGIES
# Each typology's weight; a run's laundering is split by the weights of the typologies it has,
# which for the default set are its shares (they sum to exactly 1.0).
_TYPOLOGY_WEIGHTS: dict[str, float] = {
    "structuring": 0.20, "layering": 0.15, "fan_in": 0.20, "fan_out": 0.20, "high_risk_corridor": 0.15,
    "round_tripping": 0.10, "scatter_gather": 0.17, "pass_through": 0.15, "dormant_burst": 0.10,
}
# Units per EUR, the ECB reference rates of October 2025 (monthly averages), as in the feature
# table ecb-2025-10 that the rule pack was calibrated with.
_PER_EUR = {"EUR": 1.0, "USD": 1.1630, "GBP": 0.8710, "CHF": 0.9310, "CAD": 1.6290, "JPY": 176.10}
USD_PER_UNIT: dict[str, float] = {c: _PER_EUR["USD"] / rate for c, rate in _PER_EUR.items()}
MINOR_UNITS: dict[str, int] = {"USD": 2, "EUR": 2, "GBP": 2, "CHF": 2, "CAD": 2, "JPY": 0}

_MIN = 60_000_000  # microseconds
_H = 60 * _MIN
_DAY = 24 * _H
# Local-time hour profile of normal payments (office hours, a lunch dip, quiet nights).
_HOUR_CUM = tuple(itertools.accumulate(
    (1, 0.5, 0.3, 0.3, 0.3, 0.5, 1, 2, 4, 6, 7, 7, 6, 6, 7, 7, 6, 5, 4, 3, 3, 2, 1.5, 1)))
_LOW_CODES = frozenset(c.code for c in LOW_RISK)


@dataclass(frozen=True)
class SimConfig:
    """What to simulate; the whole output is a function of these fields."""

    seed: int = 7
    start: datetime = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    days: int = 14
    n_accounts: int = 2000
    n_normal: int = 20000  # normal transactions
    typology_share: float = 0.05  # roughly, share of laundering transactions among all
    evasion: bool = False  # evasion variants of the typologies instead of the plain ones
    # Scale and shape (training on populations unlike each other; the defaults are the plain run):
    amount_scale: float = 1.0  # multiplies every amount and amount band, normal and laundering
    chain_hops: tuple[int, int] = (3, 5)  # plain layering: transfers in the chain
    cycle_hops: tuple[int, int] = (3, 4)  # plain round-tripping: accounts the money passes through
    fan_mules: tuple[int, int] = (10, 30)  # plain fan-in / fan-out: mules
    fan_hours: tuple[float, float] = (1.0, 20.0)  # plain fan-in / fan-out: hours the payments spread over
    lookalikes: bool = False  # benign traffic shaped like laundering (billers, merchants, ...; see module)
    typologies: tuple[str, ...] = TYPOLOGIES  # which typologies the laundering is drawn from
    # Look-alike salaries passed on are paid by a payroll run (an employer paying its staff) rather
    # than by a business that pays nobody else; off, the look-alikes are as before the setting existed.
    payroll_salaries: bool = False

    def __post_init__(self) -> None:
        if self.start.utcoffset() != timedelta(0):
            raise ValueError(f"start must be a UTC datetime, got {self.start!r}")
        if self.days < 3:
            raise ValueError(f"days must be at least 3 (evasion spreads over days), got {self.days}")
        if self.n_accounts < 100:
            raise ValueError(f"n_accounts must be at least 100, got {self.n_accounts}")
        if self.n_normal < 0:
            raise ValueError(f"n_normal must be >= 0, got {self.n_normal}")
        if not 0.0 <= self.typology_share < 0.5:
            raise ValueError(f"typology_share must be in [0, 0.5), got {self.typology_share}")
        if not 1e-4 <= self.amount_scale <= 1e4:
            raise ValueError(f"amount_scale must be in [1e-4, 1e4], got {self.amount_scale}")
        for name, lo_min, hi_max in (("chain_hops", 2, 12), ("cycle_hops", 2, 12), ("fan_mules", 2, 200)):
            lo, hi = getattr(self, name)
            if not lo_min <= lo <= hi <= hi_max:
                raise ValueError(f"{name} must be (lo, hi) with {lo_min} <= lo <= hi <= {hi_max}, "
                                 f"got {(lo, hi)}")
        if not 0.1 <= self.fan_hours[0] <= self.fan_hours[1] <= 24 * 30:
            raise ValueError(f"fan_hours must be (lo, hi) with 0.1 <= lo <= hi <= 720, got {self.fan_hours}")
        if isinstance(self.typologies, list):  # a list of names reads as their tuple (stays hashable)
            object.__setattr__(self, "typologies", tuple(self.typologies))
        unknown = [t for t in self.typologies if t not in ALL_TYPOLOGIES]
        if unknown or not self.typologies or len(set(self.typologies)) != len(self.typologies):
            named = f" ({', '.join(map(repr, unknown))} unknown)" if unknown else ""
            raise ValueError(f"typologies must be distinct names from {', '.join(ALL_TYPOLOGIES)}; got "
                             f"{self.typologies!r}{named}")


@dataclass(frozen=True)
class SimTx:
    """One simulated payment and its ground truth."""

    transaction: Transaction
    at: datetime  # UTC event time: when the payment is sent and scored
    label: int  # 1 = part of a money-laundering typology, 0 = normal
    typology: str  # "normal" or one of ALL_TYPOLOGIES
    evasion: bool  # an evasion variant of the typology
    pattern: int = 0  # 1, 2, ... per typology instance (all its payments share it); 0 for normal


def usd_equivalent(amount: Decimal, currency: str) -> float:
    """The USD value the simulator assumes for ``amount`` (``USD_PER_UNIT``)."""
    return float(amount) * USD_PER_UNIT[currency]


def simulate(config: SimConfig) -> list[SimTx]:
    """Normal payments plus laundering typologies, sorted by time (ties in generation order)."""
    # Hundreds of thousands of small acyclic objects: the cyclic collector would only rescan
    # them (about a third of the run time at 100,000 payments), so it pauses meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Simulator(config).run()
    finally:
        if collecting:
            gc.enable()


class _Leg(NamedTuple):
    t: int  # microseconds from the pattern's (later: the period's) start
    orig: int  # account index
    bene: int
    minor: int  # amount in minor units
    currency: str
    variant: int = 0  # originator record: 0 complete, 1-3 incomplete (see Account.parties)


class _Event(NamedTuple):
    t: int
    seq: int
    leg: _Leg
    typology: str
    pattern: int


_SCALE: dict[str, int] = {c: 10**e for c, e in MINOR_UNITS.items()}


def _minor_at(usd: float, currency: str, scale: float) -> int:
    return max(1, round(usd * scale / USD_PER_UNIT[currency] * _SCALE[currency]))


def _rounded_at(minor: int, currency: str, units: int, scale: float) -> int:
    """``minor`` rounded to a multiple of ``units`` whole currency units, the units scaled by
    ``scale`` to the nearest power of ten (at least one minor unit)."""
    step = max(1, round(units * _SCALE[currency] * 10 ** round(math.log10(scale)))) if scale != 1 else (
        units * _SCALE[currency])
    return max(step, round(minor / step) * step)


def _uuid4(hex_digest: str) -> str:
    """A version-4, RFC 9562-variant UUID string from the first 128 bits of a hex digest."""
    h = hex_digest
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


class _Simulator:
    def __init__(self, config: SimConfig) -> None:
        self.cfg = config
        self.pop: Population = build_population(config.seed, config.n_accounts)
        self.acc: tuple[Account, ...] = self.pop.accounts
        self.period = config.days * _DAY
        self.room = self.period - 8 * _H  # longest span of a pattern: waves and funding fit after it
        self.utc_offset = tuple(COUNTRIES[a.country].utc_offset for a in self.acc)
        weekend = [(config.start + timedelta(days=d)).weekday() >= 5 for d in range(config.days)]
        self.day_cum = tuple(itertools.accumulate(0.35 if w else 1.0 for w in weekend))
        self.events: list[_Event] = []
        self.seq = 0  # generation order, the tie-break of equal times (events may be dropped: dormancy)
        self.payroll_runs: list[list[_Leg]] = []  # each big payroll's salaries (payroll_salaries)
        self.passing_on: set[int] = set()  # staff who pass their salary on (payroll_salaries)
        self.credit = 0  # look-alike payments counted to a share though emitted by another pattern
        self.sleepers: set[int] = set()  # the dormant bursts' accounts, kept out of the later ones
        self.rng = random.Random(f"sealtrail.simulate/{config.seed}/normal")

    # --- shared helpers --------------------------------------------------------------------

    def _minor(self, usd: float, currency: str) -> int:
        return _minor_at(usd, currency, self.cfg.amount_scale)

    def _rounded(self, minor: int, currency: str, units: int) -> int:
        return _rounded_at(minor, currency, units, self.cfg.amount_scale)

    def _clock(self, account: Account) -> int:
        """A daytime-weighted moment in the account's time zone, as microseconds in the period."""
        rng = self.rng
        day = bisect.bisect(self.day_cum, rng.random() * self.day_cum[-1])
        hour = bisect.bisect(_HOUR_CUM, rng.random() * _HOUR_CUM[-1])
        local = day * _DAY + (hour - self.utc_offset[account.index]) * _H + rng.randrange(_H)
        return local % self.period

    def _emit(self, legs: list[_Leg], typology: str, pattern: int) -> None:
        base, self.seq = self.seq, self.seq + len(legs)
        self.events.extend(_Event(leg.t, base + i, leg, typology, pattern) for i, leg in enumerate(legs))

    def _other(self, pool: tuple[int, ...], not_in: Collection[int]) -> int:
        choice = self.rng.choice(pool)
        while choice in not_in:
            choice = self.rng.choice(pool)
        return choice

    # --- normal traffic ---------------------------------------------------------------------

    def _normal(self) -> None:
        rng, pop, n = self.rng, self.pop, self.cfg.n_normal
        if self.cfg.lookalikes:
            self._lookalikes()
        for _ in range(n // 2000):
            self._payroll()
        for _ in range(n // 4000):
            self._invoices()
        cum = tuple(itertools.accumulate(a.activity for a in self.acc))
        legs: list[_Leg] = []
        for o in rng.choices(range(len(self.acc)), cum_weights=cum, k=max(0, n - len(self.events))):
            a = self.acc[o]
            r = rng.random()
            bene = rng.choice(pop.payees[o]) if rng.random() < 0.8 else self._new_counterparty(a)
            usd = rng.lognormvariate(math.log(1500 if a.business else 180), 1.1 if a.business else 1.0)
            round_to = 1000 if usd >= 1500 and rng.random() < 0.04 else 0
            if r < 0.015 and a.business:  # large round payment: property, loan, dividend
                usd, round_to = math.exp(rng.uniform(math.log(10_000), math.log(300_000))), 1000
            elif r < 0.035:  # legitimate payment just under the reporting threshold
                usd, round_to = rng.uniform(8000, 9999), (10 if rng.random() < 0.5 else 0)
            elif r < 0.06 and not a.business and a.country in _LOW_CODES:  # remittance home
                bene, usd = rng.choice(pop.grey), rng.lognormvariate(math.log(350), 0.8)
            elif r < 0.08 and a.business:  # a supplier abroad, often in a hub
                bene, usd = self._other(pop.hubs + pop.low_business, (o,)), usd * 3
            currency = a.currency
            if self.acc[bene].country != a.country and rng.random() < 0.15:
                currency = "EUR" if a.currency == "USD" else "USD"
            minor = self._minor(min(usd, 2_000_000.0), currency)  # the cap scales with the amounts
            if round_to:
                minor = self._rounded(minor, currency, round_to)
            variant = rng.choice((1, 1, 2, 3)) if rng.random() < 0.03 else 0
            legs.append(_Leg(self._clock(a), o, bene, minor, currency, variant))
        self._emit(legs, "normal", 0)

    def _new_counterparty(self, a: Account) -> int:
        domestic = self.pop.by_country[a.country]
        pool = domestic if len(domestic) > 1 and self.rng.random() < 0.85 else self.pop.low
        return self._other(pool, (a.index,))

    def _invoices(self) -> None:
        """Three or four invoices of USD 8,000-9,999 paid to one supplier within two hours."""
        rng = self.rng
        payer = self.acc[rng.choice(self.pop.low_business)]
        supplier = rng.choice(self.pop.payees[payer.index])
        t0 = min(self._clock(payer), self.period - 2 * _H - 1)
        legs = [_Leg(t0 + rng.randrange(2 * _H), payer.index, supplier,
                     self._minor(rng.uniform(8000, 9999), payer.currency), payer.currency)
                for _ in range(rng.randint(3, 4))]
        self._emit(legs, "normal", 0)

    # --- benign look-alikes -----------------------------------------------------------------

    def _lookalikes(self) -> None:
        """About a third of the normal payments: billers 10 %, merchants 12 %, payroll and supplier
        runs 6 %, salaries passed on 3 %, family round trips 2 % (each fills its share in whole
        patterns, so small runs get at least one of each)."""
        n, start = self.cfg.n_normal, len(self.events)
        for share, make in ((0.10, self._billers), (0.12, self._merchants), (0.04, self._big_payroll),
                            (0.02, self._supplier_run), (0.03, self._salary_pass_through),
                            (0.02, self._family)):
            goal = len(self.events) + self.credit - start + share * n
            while len(self.events) + self.credit - start < goal:
                make()

    def _customers(self, business: Account, lo: int, hi: int) -> list[int]:
        """``lo``-``hi`` retail customers of ``business``, mostly from its country."""
        domestic = [i for i in self.pop.by_country[business.country] if not self.acc[i].business]
        pool = domestic if len(domestic) >= hi else list(self.pop.low_retail)
        return self.rng.sample(pool, min(len(pool), self.rng.randint(lo, hi)))

    def _billers(self) -> None:
        rng = self.rng
        biller = self.acc[rng.choice(self.pop.low_business)]
        payers = self._customers(biller, 30, 300)
        usd = rng.lognormvariate(math.log(90), 0.6)
        days = sorted(rng.sample(range(28), rng.randint(1, 2)))
        legs = []
        for month in range(0, self.cfg.days, 30):
            for c in payers:
                day = month + days[c % len(days)]
                t = day * _DAY + rng.randrange(4 * _H, 9 * _H)  # collected early in the morning
                currency = self.acc[c].currency
                if t < self.period:
                    legs.append(_Leg(t, c, biller.index, self._minor(usd * rng.uniform(0.8, 1.25), currency),
                                     currency))
        self._emit(legs or [_Leg(0, payers[0], biller.index, self._minor(usd, biller.currency),
                                 biller.currency)], "normal", 0)

    def _merchants(self) -> None:
        rng = self.rng
        merchant = self.acc[rng.choice(self.pop.low_business)]
        customers = self._customers(merchant, 50, 400)
        per_day = rng.randint(20, 200)
        supplier = rng.choice(self.pop.payees[merchant.index])
        settle_every = rng.randint(2, 7)
        legs, takings = [], 0
        for day in range(self.cfg.days):
            for _ in range(per_day if (self.cfg.start + timedelta(days=day)).weekday() < 6 else per_day // 3):
                c = rng.choice(customers)
                t = day * _DAY + rng.randrange(8 * _H, 21 * _H) - COUNTRIES[merchant.country].utc_offset * _H
                minor = self._minor(rng.lognormvariate(math.log(25), 0.8), merchant.currency)
                if 0 <= t < self.period:
                    legs.append(_Leg(t, c, merchant.index, minor, merchant.currency))
                    takings += minor
            if day % settle_every == settle_every - 1 and takings:
                t = day * _DAY + 22 * _H
                if t < self.period:  # a part of the takings to the supplier, after closing
                    legs.append(_Leg(t, merchant.index, supplier, round(takings * rng.uniform(0.3, 0.7)),
                                     merchant.currency))
                takings = 0
            if len(legs) > 0.12 * self.cfg.n_normal:
                break
        self._emit(legs or [_Leg(0, customers[0], merchant.index, 100, merchant.currency)], "normal", 0)

    def _big_payroll(self) -> None:
        rng = self.rng
        employer = self.acc[rng.choice(self.pop.low_business)]
        staff = self._customers(employer, 10, 200)
        salary = {s: self._minor(max(1200.0, rng.gauss(3200, 900)), employer.currency) for s in staff}
        day0 = rng.randrange(min(28, self.cfg.days))
        legs = []
        for month_day in range(day0, self.cfg.days, 30):
            t0 = month_day * _DAY + rng.randrange(6 * _H, 10 * _H)
            for s in staff:
                t = t0 + rng.randrange(30 * _MIN)
                if t < self.period:
                    legs.append(_Leg(t, employer.index, s, salary[s], employer.currency))
        self._emit(legs, "normal", 0)
        if legs:
            self.payroll_runs.append(legs)

    def _supplier_run(self) -> None:
        rng, pop = self.rng, self.pop
        payer = self.acc[rng.choice(pop.low_business)]
        k = rng.randint(10, 60)
        suppliers = [self._other(pop.low_business if rng.random() < 0.67 else pop.hubs + pop.low_business,
                                 (payer.index,)) for _ in range(k)]
        day0 = rng.randrange(min(28, self.cfg.days))
        legs = []
        for month_day in range(day0, self.cfg.days, 30):
            t0 = month_day * _DAY + rng.randrange(7 * _H, 15 * _H)
            for sup in suppliers:
                t = t0 + rng.randrange(_H)
                usd = rng.lognormvariate(math.log(4000), 1.0)
                if t < self.period:
                    legs.append(_Leg(t, payer.index, sup, self._minor(usd, payer.currency), payer.currency))
        self._emit(legs, "normal", 0)

    def _salary_pass_through(self) -> None:
        if self.cfg.payroll_salaries and self._payroll_salary_passed_on():
            return
        rng, pop = self.rng, self.pop
        person = self.acc[rng.choice(pop.low_retail)]
        employer = rng.choice(pop.low_business)
        savings = rng.choice(pop.payees[person.index])
        salary = max(1500.0, rng.gauss(3500, 1000))
        legs = []
        day0 = rng.randrange(min(28, self.cfg.days))
        for month_day in range(day0, self.cfg.days, 30):
            t = month_day * _DAY + rng.randrange(6 * _H, 10 * _H)
            out = t + rng.randrange(20 * _MIN, 8 * _H)
            if out < self.period:
                cur = person.currency
                legs.append(_Leg(t, employer, person.index, self._minor(salary, cur), cur))
                passed_on = self._minor(salary * rng.uniform(0.7, 0.95), cur)
                legs.append(_Leg(out, person.index, savings, passed_on, cur))
        self._emit(legs or [_Leg(0, employer, person.index, self._minor(salary, person.currency),
                                 person.currency)], "normal", 0)

    def _payroll_salary_passed_on(self) -> bool:
        """A member of a payroll run's staff passes 70-95 % of each salary on to one of their usual
        payees (savings, rent) 20 minutes to 8 hours after it arrives; the salary counts to this
        look-alike's share as in the pattern above. False when every payroll's staff already do."""
        rng = self.rng
        if not self.payroll_runs:
            return False
        for _ in range(8):
            run = rng.choice(self.payroll_runs)
            person = rng.choice(run).bene
            if person not in self.passing_on:
                break
        else:
            return False
        self.passing_on.add(person)
        savings = rng.choice(self.pop.payees[person])
        legs = [_Leg(leg.t + rng.randrange(20 * _MIN, 8 * _H), person, savings,
                     max(1, round(leg.minor * rng.uniform(0.7, 0.95))), leg.currency)
                for leg in run if leg.bene == person]
        legs = [leg for leg in legs if leg.t < self.period]
        self.credit += len(legs)  # the salaries themselves, emitted by the payroll run
        self._emit(legs, "normal", 0)
        return bool(legs)

    def _family(self) -> None:
        rng, pop = self.rng, self.pop
        a = rng.choice(pop.low_retail)
        home = pop.by_country[self.acc[a].country]
        # (a country's only account has no relative at home: one of another low-risk country instead)
        b = self._other(home if len(home) > 1 else pop.low_retail, (a,))
        t = rng.randrange(max(1, self.period - 10 * _DAY))
        usd = rng.lognormvariate(math.log(800), 0.9)
        currency = self.acc[a].currency
        back = t + rng.randrange(1 * _DAY, 10 * _DAY)
        self._emit([_Leg(t, a, b, self._minor(usd, currency), currency),
                    _Leg(min(back, self.period - 1), b, a, self._minor(usd * rng.uniform(0.2, 1.0), currency),
                         currency)], "normal", 0)

    def _payroll(self) -> None:
        rng, pop = self.rng, self.pop
        employer = self.acc[rng.choice(pop.low_business)]
        staff = [i for i in pop.by_country[employer.country] if not self.acc[i].business]
        if len(staff) < 10:
            staff = list(pop.low_retail)
        k = min(rng.randint(10, 25), len(staff))
        t0 = self._clock(employer)
        t0 = min(t0, self.period - 21 * _MIN)
        currency = employer.currency
        legs = [_Leg(t0 + rng.randrange(20 * _MIN), employer.index, s,
                     self._minor(max(1200.0, rng.gauss(3200, 700)), currency), currency)
                for s in rng.sample(staff, k)]
        self._emit(legs, "normal", 0)

    # --- laundering -------------------------------------------------------------------------

    def _laundering(self) -> None:
        cfg = self.cfg
        if cfg.typology_share == 0:
            return
        self.rng = random.Random(f"sealtrail.simulate/{cfg.seed}/{'evasion' if cfg.evasion else 'plain'}")
        target = round(cfg.n_normal * cfg.typology_share / (1 - cfg.typology_share))
        pattern = 0
        chosen = [t for t in ALL_TYPOLOGIES if t in cfg.typologies]  # a fixed order, whatever the config's
        total = math.fsum(_TYPOLOGY_WEIGHTS[t] for t in chosen)
        for typology in chosen:
            make = getattr(self, f"_{typology}")
            made, budget = 0, round(target * _TYPOLOGY_WEIGHTS[typology] / total)
            while made < max(1, budget):
                legs: list[_Leg] = make(budget - made)
                pattern += 1
                self._emit(self._place(legs), typology, pattern)
                made += len(legs)

    def _place(self, legs: list[_Leg]) -> list[_Leg]:
        """Shift a pattern (times relative to 0) to a start that keeps it inside the period."""
        span = max(leg.t for leg in legs)  # < self.period: _gaps and _fit keep it in self.room
        t0 = self._clock(self.acc[legs[0].orig]) if self.rng.random() < 0.7 else self.period
        if t0 + span >= self.period:
            t0 = self.rng.randrange(self.period - span)
        return [leg._replace(t=t0 + leg.t) for leg in legs]

    def _size(self, lo: int, hi: int, budget: int) -> int:
        return max(lo, min(self.rng.randint(lo, hi), budget))

    def _gaps(self, n: int, lo_h: float, hi_h: float) -> list[int]:
        """``n`` times (from 0), consecutive ones ``lo_h``-``hi_h`` hours apart, the upper bound
        lowered so that they fit in the period (``_fit`` has capped ``n`` where needed)."""
        hi_h = max(lo_h, min(hi_h, self.room / _H / max(1, n - 1)))
        return list(itertools.accumulate(
            [0] + [round(self.rng.uniform(lo_h, hi_h) * _H) for _ in range(n - 1)]))

    def _fit(self, n: int, gap_h: float) -> int:
        """At most as many events as fit in the period with ``gap_h`` hours between them."""
        return max(2, min(n, 1 + int(self.room / _H // gap_h)))

    def _incomplete(self, p: float) -> int:
        return 0 if self.cfg.evasion or self.rng.random() >= p else self.rng.choice((1, 1, 2, 3))

    def _structuring(self, budget: int) -> list[_Leg]:
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        single = rng.random() < 0.6
        lo, hi = ((3, 5) if single else (4, 8)) if ev else (3, 8)
        n = self._fit(self._size(lo, hi, budget), 25) if ev else self._size(lo, hi, budget)
        times = self._gaps(n, 25, 40) if ev else self._gaps(n, 5 / 60, 150 / 60)
        if single:
            orig = rng.choice(pop.low if ev else pop.low + pop.hubs + pop.grey)
            origs = [orig] * n
            k = rng.randint(2, 4) if ev else rng.randint(1, 3)
            benes = [b for b in rng.sample(pop.low + pop.hubs, k + 1) if b != orig][:k]
        else:
            benes = [rng.choice(pop.low + pop.hubs)]
            origs = rng.sample([s for s in pop.low_retail if s != benes[0]], n)
        legs = []
        for i, (t, o) in enumerate(zip(times, origs, strict=True)):
            currency = self.acc[o].currency
            if ev:
                minor = self._minor(rng.uniform(7000, 7850), currency)
            else:
                minor = self._minor(rng.uniform(8200, 9850), currency)
                minor = self._rounded(minor, currency, 100) if rng.random() < 0.4 else minor
            legs.append(_Leg(t, o, benes[i % len(benes)], minor, currency, self._incomplete(0.1)))
        return legs

    def _chain(self, start: int, hops: int, cross_border: float, pool: tuple[int, ...]) -> list[int]:
        chain = [start]
        for _ in range(hops):
            prev = self.acc[chain[-1]]
            domestic = self.pop.by_country[prev.country]
            if self.rng.random() >= cross_border and len(domestic) > len(chain):
                chain.append(self._other(domestic, chain))
            else:
                nxt = self._other(pool, chain)
                for _ in range(5):  # prefer another country
                    if self.acc[nxt].country != prev.country:
                        break
                    nxt = self._other(pool, chain)
                chain.append(nxt)
        return chain

    def _layering(self, budget: int) -> list[_Leg]:
        rng, pop, ev, cfg = self.rng, self.pop, self.cfg.evasion, self.cfg
        hops = (self._fit(self._size(3, 6, budget), 25) if ev
                else self._fit(self._size(*cfg.chain_hops, budget), 1))
        source = rng.choice(pop.low_business if ev else pop.hubs + pop.grey + pop.low_business)
        chain = self._chain(source, hops, 0.4 if ev else 0.7, pop.low + pop.hubs)
        currency = self.acc[source].currency if ev else rng.choice(("USD", "USD", "EUR", "GBP"))
        if ev:
            minor = self._minor(rng.uniform(6000, 9400), currency)
        else:
            minor = self._minor(math.exp(rng.uniform(math.log(12_000), math.log(150_000))), currency)
            minor = self._rounded(minor, currency, 1000) if rng.random() < 0.5 else minor
        times = self._gaps(hops, 25, 50) if ev else self._gaps(hops, 5 / 60, 6)
        legs = []
        for i, t in enumerate(times):
            variant = self._incomplete(0.25) if i == 0 else 0
            legs.append(_Leg(t, chain[i], chain[i + 1], minor, currency, variant))
            minor = round(minor * (1 - rng.uniform(0.005, 0.03)))
        return legs

    def _fan(self, budget: int, inward: bool) -> list[_Leg]:
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        hub = rng.choice(pop.hubs + pop.grey) if rng.random() < 0.4 and not ev else rng.choice(pop.low)
        groups: list[tuple[int, int, float]]  # (wave start, mules, USD total)
        if ev:  # 2-3 waves of 7-9 mules, each wave within 6 h, waves 31-48 h apart
            starts = self._gaps(self._fit(rng.randint(2, 3), 31), 31, 48)
            groups = [(s, rng.randint(7, 9), rng.uniform(6000, 9400)) for s in starts]
            window = 6 * _H
        else:
            lo_h, hi_h = self.cfg.fan_hours
            lo_h = max(lo_h, 2.0) if inward and self.cfg.fan_hours == (1.0, 20.0) else lo_h  # as before
            # no more mules than the world has (a small world with many asked for: all of them)
            k = min(self._size(*self.cfg.fan_mules, budget), len(pop.low_retail) - 1)
            groups = [(0, k, rng.uniform(12_000, 90_000) * max(1.0, k / 30))]
            window = min(round(rng.uniform(lo_h, hi_h) * _H), self.room - 11 * _MIN)
        mules = iter(rng.sample([m for m in pop.low_retail if m != hub], sum(g[1] for g in groups)))
        funded = not inward and not ev and rng.random() < 0.5
        lead = 10 * _MIN if funded else 0
        legs: list[_Leg] = []
        for start, k, total in groups:
            weights = [rng.uniform(0.7, 1.3) for _ in range(k)]
            for w in weights:
                mule = next(mules)
                payer = self.acc[mule if inward else hub]
                usd = total * w / sum(weights)
                t = start + lead + rng.randrange(window)
                o, b = (mule, hub) if inward else (hub, mule)
                legs.append(_Leg(t, o, b, self._minor(usd, payer.currency), payer.currency,
                                 self._incomplete(0.1)))
        if funded:
            source = self._other(pop.hubs + pop.grey, (hub,))
            usd_total = sum(g[2] for g in groups) * rng.uniform(1.0, 1.05)
            currency = self.acc[hub].currency
            legs.insert(0, _Leg(0, source, hub, self._minor(usd_total, currency), currency,
                                self._incomplete(0.3)))
        return sorted(legs, key=lambda leg: leg.t)

    def _fan_in(self, budget: int) -> list[_Leg]:
        return self._fan(budget, inward=True)

    def _fan_out(self, budget: int) -> list[_Leg]:
        return self._fan(budget, inward=False)

    def _high_risk_corridor(self, budget: int) -> list[_Leg]:
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        risky = rng.choice(pop.black if rng.random() < 0.3 and not ev else pop.grey)
        outbound = rng.random() < 0.6
        if ev:
            n = self._fit(self._size(3, 6, budget), 25)
            times = self._gaps(n, 25, 40)
            customers = rng.sample(pop.low_retail, rng.randint(2, 4))
        else:
            n = self._size(1, 4, budget)
            times = self._gaps(n, 1, 30)
            customers = [rng.choice(pop.low)]
        legs = []
        for i, t in enumerate(times):
            customer = customers[i % len(customers)]
            o, b = (customer, risky) if outbound else (risky, customer)
            currency = self.acc[o].currency
            usd = rng.uniform(400, 950) if ev else min(250_000.0, max(1000.0, rng.lognormvariate(
                math.log(9000), 0.9)))
            legs.append(_Leg(t, o, b, self._minor(usd, currency), currency, self._incomplete(0.55)))
        return legs

    def _round_tripping(self, budget: int) -> list[_Leg]:
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        size = self._fit(rng.randint(4, 5), 25) if ev else self._fit(rng.randint(*self.cfg.cycle_hops), 6)
        origin = rng.choice(pop.low_business)
        cycle = self._chain(origin, size - 1, 0.6 if ev else 0.9, pop.hubs + pop.low_business)
        cycle.append(origin)
        currency = self.acc[origin].currency if ev or rng.random() < 0.7 else "USD"
        if ev:
            minor = self._minor(rng.uniform(6000, 9400), currency)
        else:
            usd = math.exp(rng.uniform(math.log(25_000), math.log(250_000)))
            minor = self._rounded(self._minor(usd, currency), currency, 1000)
        times = self._gaps(size, 25, 60) if ev else self._gaps(size, 6, 48)
        legs = []
        for i, t in enumerate(times):
            legs.append(_Leg(t, cycle[i], cycle[i + 1], minor, currency, self._incomplete(0.2)))
            minor = round(minor * rng.uniform(0.97, 0.995)) if ev else self._rounded(
                round(minor * rng.uniform(0.985, 1.0)), currency, 100)
        return legs

    # --- more typologies (SimConfig.typologies = ALL_TYPOLOGIES) ---------------------------------

    def _abroad(self, of: int, pool: tuple[int, ...], not_in: Collection[int]) -> int:
        """An account of ``pool`` in another country than ``of`` (five tries), not in ``not_in``."""
        pick = self._other(pool, not_in)
        for _ in range(5):
            if self.acc[pick].country != self.acc[of].country:
                break
            pick = self._other(pool, not_in)
        return pick

    def _at_home(self, of: int, not_in: Collection[int]) -> int:
        """An account in ``of``'s country, not in ``not_in``; any low-risk one when there is none."""
        home = [a for a in self.pop.by_country[self.acc[of].country] if a not in not_in]
        return self.rng.choice(home) if home else self._other(self.pop.low, not_in)

    def _spaced(self, n: int, gap_h: tuple[float, float], tail_h: float, start: int = 0) -> list[int]:
        """Times of at most ``n`` events from ``start``, consecutive ones ``gap_h`` hours apart, with
        ``tail_h`` hours left in the pattern's room after the last: fewer events where the period is
        short, never closer ones (one event at least)."""
        lo, hi = gap_h
        room_h = (self.room - start) / _H - tail_h
        n = max(1, min(n, 1 + int(room_h // lo))) if room_h >= 0 else 1
        hi = max(lo, min(hi, room_h / (n - 1))) if n > 1 else hi
        gaps = [round(self.rng.uniform(lo, hi) * _H) for _ in range(n - 1)]
        return list(itertools.accumulate([start, *gaps]))

    def _fitted(self, legs: list[_Leg]) -> list[_Leg]:
        """A plain pattern's legs in time order, its times scaled down in proportion when it would not
        fit in the period (a short period: its gaps shrink; the evasion variants never need it)."""
        span = max(leg.t for leg in legs)
        if span >= self.room:
            legs = [leg._replace(t=leg.t * (self.room - 1) // span) for leg in legs]
        return sorted(legs, key=lambda leg: leg.t)

    def _split(self, total: float, n: int) -> list[float]:
        """``total`` in ``n`` uneven parts."""
        weights = [self.rng.uniform(0.6, 1.4) for _ in range(n)]
        return [total * w / sum(weights) for w in weights]

    def _scatter_gather(self, budget: int) -> list[_Leg]:
        """Many sources pay one account, which pays the money on to other accounts (a funnel when
        they are one to three, mostly abroad). Plain: ``fan_mules`` sources over ``fan_hours``, USD
        15,000-300,000 in all (more with more sources); the outflows, 85-98 % of it to 1-30 accounts,
        start once most of it has arrived and spread over 1-72 hours. Evasion: 2-3 waves of 7-9
        sources within 6 hours, 31-48 hours apart, USD 6,000-9,400 a wave; 2-4 outflows of at most USD
        9,400, 25-40 hours apart, the first 25-50 hours after the last wave (never USD 10,000 or ten
        counterparties within a day, nor money in and out); fewer waves and outflows, never closer
        ones, in a period too short for them."""
        rng, pop, ev, cfg = self.rng, self.pop, self.cfg.evasion, self.cfg
        if ev:
            hub = rng.choice(pop.low)
            # the waves, then at least 50 h (the first outflow's longest wait) for the outflows
            starts = self._spaced(rng.randint(2, 3), (31, 48), 6 + 50)
            waves = [(s, rng.randint(7, 9), rng.uniform(6000, 9400), 6 * _H) for s in starts]
        else:
            r = rng.random()
            hub = rng.choice(pop.low_retail if r < 0.5 else pop.low_business if r < 0.85
                             else pop.hubs + pop.grey)
            k = self._size(*cfg.fan_mules, max(1, budget // 2))
            lo_h, hi_h = cfg.fan_hours
            total = math.exp(rng.uniform(math.log(15_000), math.log(300_000))) * max(1.0, k / 30)
            waves = [(0, k, total, round(rng.uniform(lo_h, hi_h) * _H))]
        others = [s for s in pop.low if s != hub]
        sources = iter(rng.sample(others, min(len(others), sum(w[1] for w in waves))))
        legs: list[_Leg] = []
        for start, k, wave_usd, spread in waves:
            for usd in self._split(wave_usd, k):
                o = next(sources, -1)
                o = o if o >= 0 else rng.choice(others)
                cur = self.acc[o].currency
                legs.append(_Leg(start + rng.randrange(max(1, spread)), o, hub, self._minor(usd, cur), cur,
                                 self._incomplete(0.1)))
        last_in = max(leg.t for leg in legs)
        gathered = sum(w[2] for w in waves)
        cur = self.acc[hub].currency
        if ev:
            outs = self._spaced(rng.randint(2, 4), (25, 40), 0, last_in + round(rng.uniform(25, 50) * _H))
            out_usd = [min(9400.0, x) for x in self._split(gathered * rng.uniform(0.85, 0.98), len(outs))]
            dests = [self._other(pop.low, [hub]) for _ in outs]
            legs += [_Leg(t, hub, d, self._minor(usd, cur), cur)
                     for t, d, usd in zip(outs, dests, out_usd, strict=True)]
            return sorted(legs, key=lambda leg: leg.t)
        m = rng.randint(1, 30)
        out_usd = self._split(gathered * rng.uniform(0.85, 0.98), m)
        times = sorted(leg.t for leg in legs)
        begin = times[min(len(times) - 1, int(len(times) * rng.uniform(0.6, 1.0)))]
        spread_out = round(rng.uniform(1, 72) * _H)
        outs = [begin + rng.randrange(10 * _MIN, spread_out) for _ in range(m)]
        pool = pop.hubs + pop.grey + pop.low_business if m <= 3 else pop.low + pop.hubs
        dests = [self._abroad(hub, pool, [hub]) if m <= 3 or rng.random() < 0.5
                 else self._other(pool, [hub]) for _ in range(m)]
        legs += [_Leg(t, hub, d, self._minor(usd, cur), cur)
                 for t, d, usd in zip(outs, dests, out_usd, strict=True)]
        return self._fitted(legs)

    def _pass_through(self, budget: int) -> list[_Leg]:
        """An active account (a retail money mule or a front business; its normal payments go on)
        receives 1-6 payments, from fraud victims at home or from abroad, and passes 80-98 % of each
        on to one or two collectors (75 % abroad) 0.5-36 hours after it arrives; USD 2,000-60,000 an
        inflow (three times that for a business), inflows 0.2-24 hours apart. Evasion: USD
        6,000-9,400 an inflow, 65-80 hours apart, each passed on 25-40 hours later (never money in and
        out within a day), collectors at home 60 % of the time."""
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        business = rng.random() < 0.35
        mule = rng.choice(pop.low_business if business else pop.low_retail)
        n = self._size(1, 6, max(1, budget // 2))
        collectors: list[int] = []
        for _ in range(rng.randint(1, 2)):
            home = rng.random() < (0.6 if ev else 0.25)
            collectors.append(self._at_home(mule, [mule, *collectors]) if home else
                              self._abroad(mule, pop.low + pop.hubs if ev else pop.hubs + pop.grey + pop.low,
                                           [mule, *collectors]))
        victims = rng.random() < 0.5
        times = self._spaced(n, (65, 80), 40) if ev else self._spaced(n, (0.2, 24), 36)
        legs: list[_Leg] = []
        mine = self.acc[mule].currency
        for t in times:
            if victims:
                src = self._at_home(mule, [mule, *collectors])
            else:
                src = self._abroad(mule, pop.hubs + pop.grey + pop.low, [mule, *collectors])
            cur = self.acc[src].currency
            usd = (rng.uniform(6000, 9400) if ev
                   else math.exp(rng.uniform(math.log(2_000), math.log(60_000))) * (3 if business else 1))
            legs.append(_Leg(t, src, mule, self._minor(usd, cur), cur, self._incomplete(0.2)))
            delay = rng.uniform(25, 40) if ev else rng.uniform(0.5, 36)
            legs.append(_Leg(t + round(delay * _H), mule, rng.choice(collectors),
                             self._minor(usd * rng.uniform(0.80, 0.98), mine), mine))
        return sorted(legs, key=lambda leg: leg.t)

    def _dormant_burst(self, budget: int) -> list[_Leg]:
        """An account with no payments in the period (its normal payments are taken out; it takes part
        in no other pattern) wakes: 1-4 payments worth USD 10,000-400,000 in all arrive within two days,
        80 % from abroad, and 85-99 % leaves again in 1-5 payments 5 minutes to 6 hours apart, the first
        0.3-60 hours after the last arrival, 70 % abroad. Evasion: 2-3 inflows of USD 6,000-9,400 from
        at home, 65-80 hours apart, each passed on at home 25-40 hours later."""
        rng, pop, ev = self.rng, self.pop, self.cfg.evasion
        busy = {a for e in self.events if e.typology != "normal" for a in (e.leg.orig, e.leg.bene)}
        kind = pop.low_retail if rng.random() < 0.8 else pop.low_business
        idle = [a for a in kind if a not in busy] or [a for a in pop.low if a not in busy]
        # a world with every account in a pattern already: a sleeper that is in one (only its normal
        # payments are taken out, never another pattern's)
        sleeper = rng.choice(idle or [a for a in pop.low if a not in self.sleepers] or list(pop.low))
        self.sleepers.add(sleeper)
        self.events = [e for e in self.events
                       if e.typology != "normal" or sleeper not in (e.leg.orig, e.leg.bene)]
        keep_out = self.sleepers  # earlier sleepers stay asleep
        mine = self.acc[sleeper].currency
        legs: list[_Leg] = []
        if ev:
            for t in self._spaced(rng.randint(2, 3), (65, 80), 40):
                src = self._at_home(sleeper, keep_out)
                usd = rng.uniform(6000, 9400)
                cur = self.acc[src].currency
                legs.append(_Leg(t, src, sleeper, self._minor(usd, cur), cur))
                legs.append(_Leg(t + round(rng.uniform(25, 40) * _H), sleeper,
                                 self._at_home(sleeper, keep_out | {src}),
                                 self._minor(usd * rng.uniform(0.85, 0.99), mine), mine))
            return sorted(legs, key=lambda leg: leg.t)
        n_in = self._size(1, 4, max(1, budget // 2))
        total = math.exp(rng.uniform(math.log(10_000), math.log(400_000)))
        times = self._gaps(n_in, 0.1, 48 / max(1, n_in - 1))
        for t, usd in zip(times, self._split(total, n_in), strict=True):
            src = (self._abroad(sleeper, pop.hubs + pop.grey + pop.low, keep_out) if rng.random() < 0.8
                   else self._at_home(sleeper, keep_out))
            cur = self.acc[src].currency
            legs.append(_Leg(t, src, sleeper, self._minor(usd, cur), cur, self._incomplete(0.3)))
        t = times[-1] + round(rng.uniform(0.3, 60) * _H)
        for usd in self._split(total * rng.uniform(0.85, 0.99), rng.randint(1, 5)):
            dest = (self._abroad(sleeper, pop.hubs + pop.grey + pop.low, keep_out) if rng.random() < 0.7
                    else self._at_home(sleeper, keep_out))
            legs.append(_Leg(t, sleeper, dest, self._minor(usd, mine), mine))
            t += rng.randrange(5 * _MIN, 6 * _H)
        return self._fitted(legs)

    # --- output -----------------------------------------------------------------------------

    def run(self) -> list[SimTx]:
        self._normal()
        self._laundering()
        self.events.sort(key=lambda e: (e.t, e.seq))
        cfg, start, acc = self.cfg, self.cfg.start.astimezone(UTC), self.acc
        debtor = [Agent("debtor_agent", bic=a.bic) for a in acc]
        creditor = [Agent("creditor_agent", bic=a.bic) for a in acc]
        prefix = f"sealtrail.simulate/1|{cfg.seed}|"  # raw_sha256: over these bytes, no raw message
        r16: dict[tuple[int, int], R16] = {}  # beneficiaries are always complete: R.16 follows the originator
        out: list[SimTx] = []
        for n, (t, _, leg, typology, pattern) in enumerate(self.events):
            at = start + timedelta(microseconds=t)
            reference = f"SIM{n:010d}"
            o, b = acc[leg.orig], acc[leg.bene]
            originator, beneficiary = o.parties[leg.variant], b.parties[0]
            amount = Decimal(leg.minor).scaleb(-MINOR_UNITS[leg.currency])
            raw = f"{prefix}{reference}|{t}|{o.account}|{b.account}|{amount}|{leg.currency}"
            digest = hashlib.sha256(raw.encode()).hexdigest()
            key = (leg.orig, leg.variant)
            if key not in r16:
                r16[key] = R16.of(originator, beneficiary)
            tx = Transaction(
                message_type="json", reference=reference, amount=amount, currency=leg.currency,
                value_date=at.date(), originator=originator, beneficiary=beneficiary,
                raw_sha256=digest, uetr=_uuid4(digest), agents=(debtor[o.index], creditor[b.index]),
                r16=r16[key],
            )
            laundering = typology != "normal"
            out.append(SimTx(tx, at, int(laundering), typology, laundering and cfg.evasion, pattern))
        return out
