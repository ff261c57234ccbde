"""An independent held-out payment generator for judging detection on traffic it was not tuned on.

Written apart from ``inference.simulate`` (whose mechanics it does not share and which it does not
import) and never used for training or tuning. Accounts hold balances with overdraft limits;
salaries, bills and supplier runs follow calendars; everyday spending is a self-exciting process
with weekly seasonality; laundering typologies follow published FATF, Egmont and FinCEN
descriptions (``typologies.md`` in this package names each source). Its random streams are seeded
from ``DOMAIN`` plus the seed, so no seed of another simulator reaches them.

``generate(HeldoutConfig(...))`` returns ``HeldoutTx`` records sorted by event time; ``run`` also
returns the world, the patterns and their suspect accounts. Same config, same output, bit for bit.
"""

from __future__ import annotations

from inference.heldout.errors import HeldoutConfigError, HeldoutError
from inference.heldout.generate import HeldoutRun, HeldoutTx, credit_minor, generate, run
from inference.heldout.plan import Pattern
from inference.heldout.typologies import TYPOLOGIES
from inference.heldout.world import DOMAIN, HeldoutConfig

BENIGN_LOOKALIKES: tuple[str, ...] = ("payroll", "card", "family", "salary_pass_through", "supplier_run")

__all__ = [
    "BENIGN_LOOKALIKES",
    "DOMAIN",
    "TYPOLOGIES",
    "HeldoutConfig",
    "HeldoutConfigError",
    "HeldoutError",
    "HeldoutRun",
    "HeldoutTx",
    "Pattern",
    "credit_minor",
    "generate",
    "run",
]
