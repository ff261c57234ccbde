"""Deterministic feature rows (schema ``sealtrail.features/1``) from canonical transactions.

``FeatureExtractor.extract(transactions, at)`` returns one float64 row per transaction, in
``FEATURE_NAMES`` order, and advances the velocity windows: transactions are taken in the
order given, and each row counts the ones before it and itself. Time is the ``at`` passed in
(the pipeline's injected clock or the transaction's recorded time), never the wall clock.

Definitions (README "Features" lists them for examiners):
- amounts: the settlement amount in USD via the FX table, rounded half-even to the cent;
  a currency missing from the table gives NaN (and the transfer is counted, not summed);
- round_amount: a positive multiple of 1,000 in its own currency;
- a party's country: its own country, else its IBAN's, else its BIC's, else its bank's BIC;
  cross_border is NaN when either country is unknown; country risk comes from the FATF table;
- an account is its IBAN, else its account number at its bank's BIC, else its BIC, else its
  first identifier (e.g. ``NIDN:DE:T22000129``; birth date/place do not count); a party with
  none of these gets NaN velocity values;
- hour_utc 0-23 and weekend (Saturday, Sunday) of ``at`` in UTC.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import chain

import numpy as np

from inference.errors import FeatureError
from inference.messages.transaction import Party, Transaction
from inference.reference_tables import Tables, default_tables
from inference.schema import FEATURE_NAMES, FEATURE_SCHEMA, N_FEATURES
from inference.velocity import VelocityState

__all__ = ["FEATURE_NAMES", "FEATURE_SCHEMA", "FeatureExtractor", "epoch_us", "features_sha256", "row_dict"]

NAN = math.nan
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_THOUSAND = 1000
_HOUR_US = 3_600_000_000
_DAY_US = 24 * _HOUR_US
_NOT_IDS = frozenset({"DOB", "POB"})  # birth date and place identify no one on their own
_ORIG_AGENTS = ("debtor_agent", "ordering_institution", "instructing", "sender")
_BENE_AGENTS = ("creditor_agent", "account_with", "beneficiary_institution", "instructed", "receiver")
_ROLE_RANK = {**{r: i for i, r in enumerate(_ORIG_AGENTS)}, **{r: i for i, r in enumerate(_BENE_AGENTS)}}
_ORIG_ROLES = frozenset(_ORIG_AGENTS)


def epoch_us(at: datetime) -> int:
    """Microseconds since the Unix epoch of a timezone-aware time."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise FeatureError(f"time {at.isoformat()} has no timezone: give UTC times")
    return (at - _EPOCH) // _US


def features_sha256(row: np.ndarray) -> str:
    """SHA-256 of a row's float64 little-endian bytes (the ``features_sha256`` in a record)."""
    return hashlib.sha256(np.ascontiguousarray(row, dtype="<f8").tobytes()).hexdigest()


def row_dict(row: np.ndarray) -> dict[str, float | None]:
    """A row as ``{name: value}``, NaN as None (for JSON)."""
    return {n: (None if math.isnan(v) else v) for n, v in zip(FEATURE_NAMES, row.tolist(), strict=True)}


def _agent_bics(tx: Transaction) -> tuple[str | None, str | None]:
    """The originator's and the beneficiary's bank BIC, by role precedence (one pass)."""
    orig = bene = None
    o_rank = b_rank = len(_ROLE_RANK)
    for agent in tx.agents:
        if agent.bic:
            rank = _ROLE_RANK.get(agent.role)
            if rank is None:
                continue
            if agent.role in _ORIG_ROLES:
                if rank < o_rank:
                    orig, o_rank = agent.bic, rank
            elif rank < b_rank:
                bene, b_rank = agent.bic, rank
    return orig, bene


def _country(party: Party, agent_bic: str | None) -> str | None:
    if party.country:
        return party.country
    if party.iban:
        return party.iban[:2]
    bic = party.bic or agent_bic
    return bic[4:6] if bic else None


def _account(party: Party, agent_bic: str | None) -> str | None:
    if party.iban:
        return party.iban
    if party.account:
        acct = party.account.lstrip("/").replace(" ", "").upper()
        if acct:
            return f"{acct}@{agent_bic or '?'}"
    if party.bic:
        return f"BIC:{party.bic}"
    ident = next((i for i in party.identifiers if i.scheme not in _NOT_IDS), None)
    return f"{ident.scheme}:{ident.country or '?'}:{ident.value}" if ident else None


class FeatureExtractor:
    """Feature rows plus the velocity state they advance (one extractor per scoring stream)."""

    def __init__(self, tables: Tables | None = None, state: VelocityState | None = None) -> None:
        self.tables = tables if tables is not None else default_tables()
        self.state = state if state is not None else VelocityState()

    def extract(self, transactions: Sequence[Transaction], at: Sequence[datetime] | datetime) -> np.ndarray:
        """Rows (n, 32) float64 for ``transactions`` at times ``at`` (one per transaction or one
        for all); advances the velocity state. A bad time raises before any state changes."""
        n = len(transactions)
        times = [at] * n if isinstance(at, datetime) else list(at)
        if len(times) != n:
            raise FeatureError(f"{n} transactions but {len(times)} times")
        stamps = [epoch_us(t) for t in times]
        rows = [self._row(tx, us) for tx, us in zip(transactions, stamps, strict=True)]
        if not rows:
            return np.empty((0, N_FEATURES), dtype=np.float64)
        return np.fromiter(chain.from_iterable(rows), np.float64, n * N_FEATURES).reshape(n, N_FEATURES)

    def observe(self, transactions: Sequence[Transaction], at: Sequence[datetime] | datetime) -> None:
        """Advance the windows without keeping the rows (rebuilding state after a restart)."""
        self.extract(transactions, at)

    def _row(self, tx: Transaction, us: int) -> list[float]:
        fx, fatf = self.tables.fx, self.tables.fatf
        cents = fx.usd_cents(tx.amount, tx.currency)
        amount_usd = NAN if cents is None else cents / 100
        o_bic, b_bic = _agent_bics(tx)
        o_country, b_country = _country(tx.originator, o_bic), _country(tx.beneficiary, b_bic)
        o_risk, b_risk = fatf.risk(o_country), fatf.risk(b_country)
        r16 = tx.r16
        row = [
            amount_usd,
            math.log10(1.0 + amount_usd) if cents is not None else NAN,
            1.0 if tx.amount > 0 and tx.amount % _THOUSAND == 0 else 0.0,
            NAN if o_country is None or b_country is None else float(o_country != b_country),
            NAN if o_risk is None else float(o_risk),
            NAN if b_risk is None else float(b_risk),
            float(r16.originator_name),
            float(r16.originator_account),
            float(r16.originator_address_or_id),
            float(r16.beneficiary_name),
            float(r16.beneficiary_account),
        ]
        row += self.state.observe(_account(tx.originator, o_bic), _account(tx.beneficiary, b_bic), us, cents)
        days = us // _DAY_US
        row.append(float((us - days * _DAY_US) // _HOUR_US))
        row.append(1.0 if (days + 3) % 7 >= 5 else 0.0)  # 1970-01-01 was a Thursday (weekday 3)
        return row
