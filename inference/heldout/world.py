"""The held-out world: its configuration, its accounts and how the population is drawn.

Accounts belong to persons (with an employer, a pay schedule, a landlord, utilities and
subscriptions, favourite merchants, sometimes a household and a savings account) or to
businesses (companies that employ staff and supply others, merchants that take card payments,
billers: landlords, utilities, subscription services). Every account has an opening balance and
an overdraft limit; a payment that would take it below minus its limit is not made.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from inference.heldout.banks import COUNTRIES, Bank, Country, make_account_number, make_banks
from inference.heldout.errors import HeldoutConfigError

__all__ = ["DOMAIN", "Account", "HeldoutConfig", "World", "build_world", "stream"]

# Every random stream of this generator is seeded from SHA-256(DOMAIN | seed | stream name), so
# no seed given to another simulator reaches the same generator state.
DOMAIN = "sealtrail.heldout/1 independent evaluation traffic"

PERSON, COMPANY, MERCHANT, BILLER, SAVINGS = "person", "company", "merchant", "biller", "savings"
MERCHANT_CATEGORIES = ("grocery", "restaurant", "fuel", "retail", "online", "travel")
BILLER_KINDS = ("landlord", "utility", "telecom", "subscription")


@dataclass(frozen=True)
class HeldoutConfig:
    """What to generate. Every amount (planned in USD equivalents) is multiplied by ``amount_scale``;
    ``density`` is the target number of normal payments per account per day."""

    seed: int = 1
    start: datetime = datetime(2026, 2, 2, tzinfo=UTC)  # a Monday
    days: int = 30
    n_accounts: int = 5_000
    density: float = 0.33
    amount_scale: float = 1.0
    typology_share: float = 0.02  # roughly, share of laundering payments among all

    def __post_init__(self) -> None:
        checks = (
            (7 <= self.days <= 180, f"days must be 7-180, got {self.days}"),
            (1_000 <= self.n_accounts <= 200_000, f"n_accounts must be 1,000-200,000, got {self.n_accounts}"),
            (0.01 <= self.amount_scale <= 100, f"amount_scale must be 0.01-100, got {self.amount_scale}"),
            (
                0.02 <= self.density <= 5,
                f"density must be 0.02-5 payments per account-day, got {self.density}",
            ),
            (0 <= self.typology_share <= 0.3, f"typology_share must be 0-0.3, got {self.typology_share}"),
            (
                self.start.tzinfo is not None and self.start.utcoffset() is not None,
                "start must be timezone-aware",
            ),
            (
                isinstance(self.seed, int) and self.seed >= 0,
                f"seed must be a non-negative int, got {self.seed!r}",
            ),
        )
        for ok, message in checks:
            if not ok:
                raise HeldoutConfigError(message)


@dataclass
class Account:
    """One account. ``opening`` and ``overdraft`` are in minor units of the account's currency."""

    index: int
    role: str
    name: str
    number: str  # IBAN or national account number
    is_iban: bool
    bank: Bank
    opening: int
    overdraft: int
    kind: str = ""  # merchant category or biller kind
    owner: int = -1  # a savings account's person
    employer: int = -1
    monthly_salary_usd: float = 0.0
    pay_schedule: str = ""  # monthly | biweekly (employers)
    pay_day: int = 0  # day of month (monthly) or 0/1 parity of the biweekly Friday
    household: int = -1
    savings: int = -1  # the person's savings account
    dormant: bool = False  # no own activity unless a pattern wakes it
    favourites: tuple[int, ...] = ()
    favourite_weights: tuple[float, ...] = ()
    bills: tuple[tuple[int, int, float], ...] = ()  # (biller, day of month, USD)
    staff: list[int] = field(default_factory=list)
    suppliers: tuple[int, ...] = ()

    @property
    def country(self) -> Country:
        return self.bank.country

    @property
    def currency(self) -> str:
        return self.bank.country.currency


@dataclass
class World:
    config: HeldoutConfig
    accounts: list[Account]
    banks: dict[str, list[Bank]]
    by_role: dict[str, list[int]]

    def of_role(self, role: str, kind: str | None = None) -> list[int]:
        return [i for i in self.by_role[role] if kind is None or self.accounts[i].kind == kind]


def stream(config: HeldoutConfig, name: str) -> np.random.Generator:
    """The generator of stream ``name``: seeded from the domain string, the seed and the name only."""
    digest = hashlib.sha256(f"{DOMAIN}|{config.seed}|{name}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))


_FIRST = (
    "Anna",
    "Jonas",
    "Mia",
    "Lukas",
    "Sofia",
    "Noah",
    "Emma",
    "Elias",
    "Lea",
    "Ben",
    "Zofia",
    "Jakub",
    "Olivia",
    "Liam",
    "Ava",
    "Mateo",
    "Chen",
    "Wei",
    "Aylin",
    "Emir",
    "Ingrid",
    "Erik",
    "Siobhan",
    "Conor",
    "Tereza",
    "Petr",
    "Maria",
    "Jose",
    "Nikolai",
    "Elena",
)
_LAST = (
    "Keller",
    "Brandt",
    "de Vries",
    "Jansen",
    "Smith",
    "Taylor",
    "Gruber",
    "Huber",
    "Meier",
    "Nowak",
    "Lindqvist",
    "Murphy",
    "Novak",
    "Weber",
    "Schmitt",
    "Yilmaz",
    "Demir",
    "Garcia",
    "Lopez",
    "Tan",
    "Wong",
    "Johnson",
    "Brown",
    "Ivanova",
    "Petrov",
    "Andersson",
    "Kelly",
    "Dvorak",
    "Fischer",
    "Koch",
)
_TRADE = (
    "Logistics",
    "Trading",
    "Components",
    "Foods",
    "Textiles",
    "Consulting",
    "Metals",
    "Electronics",
    "Pharma",
    "Software",
    "Building",
    "Packaging",
    "Marine",
    "Agri",
    "Energy",
)
_FORMS = {
    "DE": "GmbH",
    "AT": "GmbH",
    "CH": "AG",
    "NL": "B.V.",
    "GB": "Ltd",
    "IE": "Ltd",
    "PL": "Sp. z o.o.",
    "SE": "AB",
    "CZ": "s.r.o.",
    "LU": "S.A.",
    "CY": "Ltd",
    "BG": "EOOD",
    "TR": "A.S.",
    "US": "Inc.",
    "SG": "Pte Ltd",
    "HK": "Limited",
    "MX": "S.A. de C.V.",
    "VG": "Ltd",
}


def _pick_country(rng: np.random.Generator, weights: np.ndarray) -> Country:
    return COUNTRIES[int(rng.choice(len(COUNTRIES), p=weights))]


def build_world(config: HeldoutConfig) -> World:
    """Draw the population: roles, banks, balances, employment, households, bills and favourites."""
    rng = stream(config, "population")
    banks = make_banks(rng)
    weights = np.array([c.weight for c in COUNTRIES])
    weights = weights / weights.sum()
    n = config.n_accounts
    n_company = max(8, round(n * 0.04))
    n_merchant = max(12, round(n * 0.05))
    n_biller = max(len(BILLER_KINDS) * 3, round(n * 0.012))
    n_savings = round(n * 0.08)
    n_person = n - n_company - n_merchant - n_biller - n_savings
    roles = [COMPANY] * n_company + [MERCHANT] * n_merchant + [BILLER] * n_biller + [PERSON] * n_person
    scale = config.amount_scale
    accounts: list[Account] = []
    by_role: dict[str, list[int]] = {r: [] for r in (PERSON, COMPANY, MERCHANT, BILLER, SAVINGS)}

    def new(role: str, country: Country, name: str, kind: str = "") -> Account:
        b = int(rng.integers(0, len(banks[country.code])))
        bank = banks[country.code][b]
        number, is_iban = make_account_number(bank, rng, b)
        acct = Account(len(accounts), role, name, number, is_iban, bank, 0, 0, kind)
        accounts.append(acct)
        by_role[role].append(acct.index)
        return acct

    def minor(usd: float, country: Country) -> int:
        return max(1, round(usd * scale / country.usd_per_unit * 100))

    for i, role in enumerate(roles):
        country = _pick_country(rng, weights)
        if role == PERSON:
            name = f"{_FIRST[int(rng.integers(0, len(_FIRST)))]} {_LAST[int(rng.integers(0, len(_LAST)))]}"
            acct = new(role, country, name)
            acct.monthly_salary_usd = float(rng.lognormal(np.log(3_000), 0.45))
            acct.opening = minor(acct.monthly_salary_usd * float(rng.uniform(0.2, 2.5)), country)
            acct.overdraft = minor(acct.monthly_salary_usd * float(rng.choice([0.0, 0.5, 1.0])), country)
        elif role == MERCHANT:
            kind = MERCHANT_CATEGORIES[int(rng.choice(6, p=[0.3, 0.22, 0.12, 0.18, 0.13, 0.05]))]
            acct = new(role, country, f"{_LAST[i % len(_LAST)]} {kind.title()} {_FORMS[country.code]}", kind)
            acct.opening = minor(float(rng.lognormal(np.log(60_000), 0.6)), country)
            acct.overdraft = minor(20_000, country)
        elif role == BILLER:
            kind = BILLER_KINDS[i % len(BILLER_KINDS)]
            acct = new(role, country, f"{_LAST[i % len(_LAST)]} {kind.title()} {_FORMS[country.code]}", kind)
            acct.opening = minor(float(rng.lognormal(np.log(200_000), 0.5)), country)
            acct.overdraft = minor(50_000, country)
        else:
            trade = _TRADE[int(rng.integers(0, len(_TRADE)))]
            acct = new(role, country, f"{_LAST[i % len(_LAST)]} {trade} {_FORMS[country.code]}", trade)
            acct.opening = minor(float(rng.lognormal(np.log(400_000), 0.7)), country)
            acct.overdraft = minor(150_000, country)
    world = World(config, accounts, banks, by_role)
    _employ(world, rng)
    _households_and_savings(world, rng, n_savings)
    _bills_and_favourites(world, rng)
    _suppliers(world, rng)
    return world


def _employ(world: World, rng: np.random.Generator) -> None:
    """Persons work for businesses, mostly in their own country; employers pay monthly or biweekly."""
    acc = world.accounts
    employers = world.by_role[COMPANY] + world.by_role[MERCHANT] + world.by_role[BILLER]
    size = rng.pareto(1.2, len(employers)) + 1.0  # a few large employers, many small ones
    by_country: dict[str, list[int]] = {}
    for e in employers:
        by_country.setdefault(acc[e].country.code, []).append(e)
        us_like = acc[e].country.code in ("US", "MX")
        acc[e].pay_schedule = "biweekly" if rng.random() < (0.7 if us_like else 0.15) else "monthly"
        acc[e].pay_day = (
            int(rng.integers(0, 2)) if acc[e].pay_schedule == "biweekly" else int(rng.integers(24, 29))
        )
    weight = {e: float(s) for e, s in zip(employers, size, strict=True)}
    all_w = np.array([weight[e] for e in employers])
    all_w = all_w / all_w.sum()
    local_w = {c: np.array([weight[e] for e in v]) for c, v in by_country.items()}
    local_p = {c: w / w.sum() for c, w in local_w.items()}
    for p in world.by_role[PERSON]:
        u = rng.random()
        if u < 0.04:
            acc[p].dormant = True
            continue
        if u < 0.18:  # students, retired, unemployed: no salary
            continue
        code = acc[p].country.code
        local = by_country.get(code)
        if local and rng.random() < 0.9:
            e = local[int(rng.choice(len(local), p=local_p[code]))]
        else:
            e = employers[int(rng.choice(len(employers), p=all_w))]
        acc[p].employer = e
        acc[e].staff.append(p)


def _households_and_savings(world: World, rng: np.random.Generator, n_savings: int) -> None:
    """About a third of active persons share a household (2-3 members of one country); some
    persons keep a savings account at a bank of their country."""
    acc = world.accounts
    active = [p for p in world.by_role[PERSON] if not acc[p].dormant]
    by_country: dict[str, list[int]] = {}
    for j in rng.permutation(len(active)):
        p = active[int(j)]
        by_country.setdefault(acc[p].country.code, []).append(p)
    h = 0
    for code in sorted(by_country):
        members = by_country[code]
        k = 0
        while k + 1 < len(members) and k < len(members) // 3:
            size = 2 if rng.random() < 0.7 else 3
            for m in members[k : k + size]:
                acc[m].household = h
            h += 1
            k += size
    savers = [active[int(j)] for j in rng.permutation(len(active))[:n_savings]]
    for p in savers:
        owner = acc[p]
        b = int(rng.integers(0, 3))
        bank = world.banks[owner.country.code][b]
        number, is_iban = make_account_number(bank, rng, b)
        s = Account(len(acc), SAVINGS, owner.name, number, is_iban, bank, owner.opening * 2, 0, owner=p)
        acc.append(s)
        world.by_role[SAVINGS].append(s.index)
        owner.savings = s.index


def _bills_and_favourites(world: World, rng: np.random.Generator) -> None:
    acc = world.accounts
    billers = {k: world.of_role(BILLER, k) for k in BILLER_KINDS}
    merchants = world.by_role[MERCHANT]
    m_country = np.array([acc[m].country.code for m in merchants])
    codes = sorted({acc[p].country.code for p in world.by_role[PERSON]})
    local_of = {
        c: {k: [b for b in v if acc[b].country.code == c] or v for k, v in billers.items()} for c in codes
    }
    same_of = {c: np.flatnonzero(m_country == c) for c in codes}
    online = [m for m in merchants if acc[m].kind in ("online", "travel")]
    for p in world.by_role[PERSON]:
        person = acc[p]
        if person.dormant:
            continue
        bills: list[tuple[int, int, float]] = []
        local = local_of[person.country.code]
        if person.employer >= 0 and rng.random() < 0.6:
            landlord = local["landlord"][int(rng.integers(0, len(local["landlord"])))]
            bills.append(
                (
                    landlord,
                    int(rng.integers(1, 4)),
                    person.monthly_salary_usd * float(rng.uniform(0.22, 0.38)),
                )
            )
        for _ in range(int(rng.integers(1, 4))):
            kind = "utility" if rng.random() < 0.6 else "telecom"
            b = local[kind][int(rng.integers(0, len(local[kind])))]
            bills.append((b, int(rng.integers(2, 28)), float(rng.lognormal(np.log(70), 0.5))))
        for _ in range(int(rng.poisson(1.2))):
            pool = billers["subscription"]  # subscriptions are often foreign
            bills.append(
                (
                    pool[int(rng.integers(0, len(pool)))],
                    int(rng.integers(1, 29)),
                    float(rng.choice([4.99, 7.99, 9.99, 12.99, 14.99, 19.99])),
                )
            )
        person.bills = tuple(bills)
        same = same_of[person.country.code]
        k = int(rng.integers(4, 15))
        picks = (
            [merchants[int(j)] for j in rng.choice(same, min(k, len(same)), replace=False)]
            if len(same)
            else []
        )
        picks += (
            [online[int(rng.integers(0, len(online)))] for _ in range(int(rng.integers(0, 3)))]
            if online
            else []
        )
        if not picks:
            picks = [merchants[int(rng.integers(0, len(merchants)))]]
        w = 1.0 / np.arange(1, len(picks) + 1) ** 1.1  # Zipf: a few favourites take most visits
        person.favourites = tuple(picks)
        person.favourite_weights = tuple(float(x) for x in w / w.sum())


def _suppliers(world: World, rng: np.random.Generator) -> None:
    """Businesses buy from companies (companies 5-59 suppliers, others 3-11), drawn from all countries
    alike, so most suppliers are abroad."""
    acc = world.accounts
    companies = world.by_role[COMPANY]
    position = {c: i for i, c in enumerate(companies)}
    for b in world.by_role[COMPANY] + world.by_role[MERCHANT] + world.by_role[BILLER]:
        k = min(
            len(companies) - 1,
            int(rng.integers(3, 12)) if acc[b].role != COMPANY else int(rng.integers(5, 60)),
        )
        i = position.get(b)
        pool = companies if i is None else companies[:i] + companies[i + 1 :]
        acc[b].suppliers = tuple(pool[int(j)] for j in rng.choice(len(pool), max(1, k), replace=False))
