"""Posting planned payments against balances, and rendering them as canonical transactions.

Intents are taken in time order (ties by planning order). A payment is made only when the payer's
balance plus overdraft covers it; a laundering payment that falls short moves what is available
(the pattern keeps its shape), a normal one is declined and dropped. The payer's currency is the
payment's; the payee is credited the equivalent in its own currency at this world's fixed rates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from inference.heldout.banks import BY_CODE
from inference.heldout.behaviour import plan_normal
from inference.heldout.plan import Pattern, Plan
from inference.heldout.typologies import plan_typologies
from inference.heldout.world import DOMAIN, Account, HeldoutConfig, World, build_world
from inference.messages.transaction import R16, Agent, Identifier, Party, Transaction

__all__ = ["HeldoutRun", "HeldoutTx", "credit_minor", "generate"]

_US = timedelta(microseconds=1)
_USD_PER_UNIT = {c.currency: c.usd_per_unit for c in BY_CODE.values()}
_STREETS = (
    "Hauptstrasse",
    "Kerkstraat",
    "High Street",
    "Bahnhofstrasse",
    "Ulica Polna",
    "Main Street",
    "Storgatan",
    "Station Road",
    "Church Lane",
    "Marktplatz",
)


@dataclass(frozen=True)
class HeldoutTx:
    """One generated payment: the canonical transaction, its event time (UTC), its label
    (1 = part of a laundering pattern), its typology (``normal`` or a ``TYPOLOGIES`` name), its
    pattern id (0 for normal), what kind of payment it is, and the payer's and payee's account
    indexes in the run's world."""

    transaction: Transaction
    at: datetime
    label: int
    typology: str
    pattern: int
    kind: str
    orig: int
    bene: int


@dataclass(frozen=True)
class HeldoutRun:
    config: HeldoutConfig
    world: World
    transactions: list[HeldoutTx]
    patterns: list[Pattern]
    opening: list[int]  # each account's opening balance in minor units, pattern funding included
    declined: int  # normal payments not made for want of funds

    def suspects(self) -> dict[int, str]:
        """Account index -> typology, for every account that acts for a laundering pattern."""
        out: dict[int, str] = {}
        for p in self.patterns:
            for a in p.suspects:
                out.setdefault(a, p.typology)
        return out


def credit_minor(amount_minor: int, from_currency: str, to_currency: str) -> int:
    """What the payee is credited (its minor units) for ``amount_minor`` of the payer's currency."""
    if from_currency == to_currency:
        return amount_minor
    return round(amount_minor * _USD_PER_UNIT[from_currency] / _USD_PER_UNIT[to_currency])


def _to_minor(usd: float, scale: float, acct: Account) -> int:
    return max(1, round(usd * scale / acct.country.usd_per_unit * 100))


def generate(config: HeldoutConfig) -> list[HeldoutTx]:
    """The held-out payments of ``config``, sorted by event time."""
    return run(config).transactions


def run(config: HeldoutConfig) -> HeldoutRun:
    """The whole run: world, payments, patterns, opening balances."""
    world = build_world(config)
    plan = Plan(world)
    plan_normal(world, plan)
    plan_typologies(world, plan)
    acc = world.accounts
    scale = config.amount_scale
    opening = [
        a.opening + (_to_minor(plan.provision[a.index], scale, a) if a.index in plan.provision else 0)
        for a in acc
    ]
    balance = list(opening)
    renderer = _Renderer(config, world)
    out: list[HeldoutTx] = []
    declined = 0
    for it in sorted(plan.intents, key=lambda i: (i.t, i.seq)):
        payer, payee = acc[it.orig], acc[it.bene]
        amount = _to_minor(it.usd, scale, payer)
        room = balance[it.orig] + payer.overdraft
        if amount > room:
            if not it.cap or room <= 0:
                declined += it.label == 0
                continue
            amount = room
        balance[it.orig] -= amount
        balance[it.bene] += credit_minor(amount, payer.currency, payee.currency)
        at = config.start + it.t * _US
        out.append(
            HeldoutTx(
                renderer.transaction(it.seq, at, payer, payee, amount, it.remittance),
                at,
                it.label,
                it.typology,
                it.pattern,
                it.kind,
                it.orig,
                it.bene,
            )
        )
    return HeldoutRun(config, world, out, plan.patterns, opening, declined)


class _Renderer:
    """Canonical ``Transaction`` objects (message type ``json``) with complete R.16 data."""

    def __init__(self, config: HeldoutConfig, world: World) -> None:
        self.config = config
        self.world = world
        self.parties: dict[int, Party] = {}

    def party(self, acct: Account) -> Party:
        p = self.parties.get(acct.index)
        if p is None:
            street = _STREETS[acct.index % len(_STREETS)]
            ids = (Identifier("CUST", f"H{acct.index:07d}", acct.country.code),)
            p = Party(
                name=acct.name,
                account=acct.number,
                iban=acct.number if acct.is_iban else None,
                address_lines=(f"{street} {acct.index % 97 + 1}", f"{10_000 + acct.index % 89_999} City"),
                country=acct.country.code,
                identifiers=ids,
            )
            self.parties[acct.index] = p
        return p

    def transaction(
        self, seq: int, at: datetime, payer: Account, payee: Account, amount: int, remittance: str
    ) -> Transaction:
        digest = hashlib.sha256(f"{DOMAIN}|{self.config.seed}|{seq}".encode()).hexdigest()
        orig, bene = self.party(payer), self.party(payee)
        cross = payer.country.code != payee.country.code
        uetr = (
            f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-{'89ab'[int(digest[16], 16) % 4]}{digest[17:20]}-"
            f"{digest[20:32]}"
            if cross
            else None
        )
        return Transaction(
            message_type="json",
            reference=f"HO{digest[32:46].upper()}",
            amount=Decimal(amount).scaleb(-2),
            currency=payer.currency,
            value_date=at.date(),
            originator=orig,
            beneficiary=bene,
            raw_sha256=digest,
            uetr=uetr,
            agents=(Agent("debtor_agent", payer.bank.bic), Agent("creditor_agent", payee.bank.bic)),
            remittance=remittance,
            charges="SHA",
            r16=R16.of(orig, bene),
        )
