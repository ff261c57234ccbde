"""Planned payments (intents) and the clock helpers that place them in local time.

A behaviour or a typology plans intents: who pays whom, when, roughly how much (in USD before
the amount scale). Posting (``inference.heldout.generate``) later takes them in time order and
makes only those the payer's balance and overdraft allow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from inference.heldout.world import Account, World

__all__ = ["DAY_US", "HOUR_US", "MINUTE_US", "Intent", "Pattern", "Plan"]

MINUTE_US = 60_000_000
HOUR_US = 60 * MINUTE_US
DAY_US = 24 * HOUR_US


class Intent(NamedTuple):
    t: int  # microseconds from the period's start
    seq: int  # planning order: breaks ties in time, so the order never depends on hashing
    orig: int
    bene: int
    usd: float  # USD-equivalent before the amount scale
    kind: str  # what the payment is (payroll, card, bill, ..., or a typology's role)
    remittance: str
    typology: str = "normal"
    pattern: int = 0
    label: int = 0
    cap: bool = False  # when the balance falls short, pay what is available instead of nothing


@dataclass(frozen=True)
class Pattern:
    """One typology instance: its accounts that act for it (suspects) and its innocent victims."""

    typology: str
    id: int
    suspects: tuple[int, ...]
    victims: tuple[int, ...] = ()


@dataclass
class Plan:
    world: World
    intents: list[Intent] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    provision: dict[int, float] = field(default_factory=dict)  # extra opening USD for pattern sources

    @property
    def period_us(self) -> int:
        return self.world.config.days * DAY_US

    def add(
        self,
        t: int,
        orig: int,
        bene: int,
        usd: float,
        kind: str,
        remittance: str,
        typology: str = "normal",
        pattern: int = 0,
    ) -> None:
        if orig == bene or not 0 <= t < self.period_us:
            return
        label = 0 if typology == "normal" else 1
        self.intents.append(
            Intent(
                int(t),
                len(self.intents),
                orig,
                bene,
                float(usd),
                kind,
                remittance,
                typology,
                pattern,
                label,
                cap=label == 1,
            )
        )

    def fund(self, account: int, usd: float) -> None:
        """The account held ``usd`` more at the start (money placed before the period)."""
        self.provision[account] = self.provision.get(account, 0.0) + usd

    def local_us(self, day: int, hour: float, acct: Account) -> int:
        """Microseconds from the start of local ``hour`` on day ``day`` of the period at ``acct``'s place."""
        start_hour = self.world.config.start.hour + self.world.config.start.minute / 60
        return round((day * 24 + hour - acct.country.utc_offset_h - start_hour) * HOUR_US)

    def daytime(self, t: int, acct: Account, rng: np.random.Generator) -> int:
        """``t`` moved to a business hour (08:00-19:00 local) of the same local day."""
        day = (t + acct.country.utc_offset_h * HOUR_US) // DAY_US
        return self.local_us(int(day), float(rng.uniform(8, 19)), acct)

    def weekday(self, day: int) -> int:
        """0 = Monday for day ``day`` of the period."""
        return (self.world.config.start.weekday() + day) % 7
