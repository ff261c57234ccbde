"""Deterministic feature rows (schema ``sealtrail.features/6``, ``EXTRACTED_SCHEMA``) from canonical
transactions; the pipeline appends the screening columns of ``features/7``.

``FeatureExtractor.extract(transactions, at)`` returns one float64 row per transaction, in
``EXTRACTED_NAMES`` order, and advances the velocity windows: transactions are taken in the
order given, and each row counts the ones before it and itself. Time is the ``at`` passed in
(the pipeline's injected clock or the transaction's recorded time), never the wall clock.

Definitions (docs/scoring.md "Features" lists them for examiners):
- amounts: the settlement amount in USD via the FX table, rounded half-even to the cent;
  a currency missing from the table gives NaN (and the transfer is counted, not summed);
- round_amount: a positive multiple of 1,000 in its own currency;
- a party's country: its own country, else its IBAN's, else its BIC's, else its bank's BIC;
  cross_border is NaN when either country is unknown; country risk comes from the FATF table;
- an account is its IBAN, else its account number at its bank's BIC, else its BIC, else its
  first identifier (e.g. ``NIDN:DE:T22000129``; birth date/place do not count); a party with
  none of these gets NaN velocity values;
- hour_utc 0-23 and weekend (Saturday, Sunday) of ``at`` in UTC;
- data quality (``features/2``): finding_count is the number of the transaction's findings; a
  party's iban_invalid is 1 when its account has the shape of an IBAN of an IBAN country and fails
  its length or check digits (the parser's ``IBAN_CHECK_DIGITS``, told apart by party);
  country_unreadable is 1 when a country or BIC's country could not be read (``COUNTRY_UNKNOWN``,
  ``BIC_UNKNOWN_COUNTRY``, ``BIC_MALFORMED``); service_nak is 1 behind a SWIFT NAK (``SERVICE_NAK``);
- behaviour and graph (``features/3``; forwarding added in ``features/4``, the fan-out of a forwarded
  amount's sender in ``features/6``):
  ``inference.graph.GraphFeatures`` under its default settings, fed the two accounts (as the
  velocity state keys them), the time and the USD cents; every value
  is NaN, and the payment is not added to the graph, when an account is unknown, the amount has
  no USD value, or the time is further behind the latest seen than the graph accepts (5 minutes).
  The graph is journaled with the velocity windows (``VelocityState.journal_with``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from operator import itemgetter

import numpy as np
from schwifty.exceptions import SchwiftyException
from schwifty.registry import get_iban_spec

from inference.errors import FeatureError
from inference.graph import GRAPH_FEATURE_NAMES, GraphFeatures
from inference.messages.fields import iban_or_none
from inference.messages.transaction import Party, Transaction
from inference.reference_tables import Tables, default_tables
from inference.schema import EXTRACTED_NAMES, FEATURE_NAMES, FEATURE_SCHEMA, GRAPH_NAMES, N_EXTRACTED
from inference.velocity import VelocityState

__all__ = ["FEATURE_NAMES", "FEATURE_SCHEMA", "FeatureExtractor", "StateDelta", "epoch_us", "features_sha256",
           "row_dict"]

StateDelta = tuple[str | None, str | None, int, int | None]
"""What one transaction advanced the feature state by: originator and beneficiary as the state holds
them (None: unknown), event time in µs since the epoch, amount in US cents (None: no FX rate)."""
NAN = math.nan
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_THOUSAND = 1000
_HOUR_US = 3_600_000_000
_DAY_US = 24 * _HOUR_US
_NOT_IDS = frozenset({"DOB", "POB"})  # birth date and place identify no one on their own
_ORIG_AGENTS = ("debtor_agent", "ordering_institution", "instructing", "sender")
_BENE_AGENTS = ("creditor_agent", "account_with", "beneficiary_institution", "instructed", "receiver")
_ORIG_RANK = {r: i for i, r in enumerate(_ORIG_AGENTS)}
_BENE_RANK = {r: i for i, r in enumerate(_BENE_AGENTS)}
_UNRANKED = len(_ORIG_AGENTS) + len(_BENE_AGENTS)  # above every rank
_IBAN_LIKE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}")
_COUNTRY_UNREADABLE = frozenset({"COUNTRY_UNKNOWN", "BIC_UNKNOWN_COUNTRY", "BIC_MALFORMED"})
_NAN_GRAPH = (NAN,) * len(GRAPH_NAMES)
_SEALED_GRAPH = itemgetter(*(GRAPH_FEATURE_NAMES.index(n) for n in GRAPH_NAMES))  # the sealed values


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
    names = EXTRACTED_NAMES if len(row) == N_EXTRACTED else FEATURE_NAMES  # the extractor's, or a record's
    return {n: (None if math.isnan(v) else v) for n, v in zip(names, row.tolist(), strict=True)}


def _agent_bics(tx: Transaction) -> tuple[str | None, str | None]:
    """The originator's and the beneficiary's bank BIC, by role precedence (one pass)."""
    orig = bene = None
    o_rank = b_rank = _UNRANKED
    for agent in tx.agents:
        bic = agent.bic
        if not bic:
            continue
        role = agent.role
        rank = _ORIG_RANK.get(role)
        if rank is not None:
            if rank < o_rank:
                orig, o_rank = bic, rank
        else:
            rank = _BENE_RANK.get(role)
            if rank is not None and rank < b_rank:
                bene, b_rank = bic, rank
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


@lru_cache(maxsize=4096)
def _iban_invalid(account: str) -> float:
    """1.0 when ``account`` has the shape of an IBAN of an IBAN country but is not a valid IBAN."""
    compact = account.lstrip("/").replace(" ", "").upper()
    if not _IBAN_LIKE.fullmatch(compact) or iban_or_none(compact) is not None:
        return 0.0
    try:
        get_iban_spec(compact[:2])
    except SchwiftyException:  # not an IBAN country: an account number that looks like one
        return 0.0
    return 1.0


def _data_quality(tx: Transaction) -> tuple[float, float, float, float, float]:
    """finding_count, orig_iban_invalid, bene_iban_invalid, country_unreadable, service_nak."""
    o_acct, b_acct = tx.originator.account, tx.beneficiary.account
    findings = tx.findings
    if not findings and o_acct is None and b_acct is None:
        return 0.0, 0.0, 0.0, 0.0, 0.0
    codes = {f.code for f in findings}
    return (float(len(findings)),
            0.0 if o_acct is None else _iban_invalid(o_acct),
            0.0 if b_acct is None else _iban_invalid(b_acct),
            1.0 if codes & _COUNTRY_UNREADABLE else 0.0,
            1.0 if "SERVICE_NAK" in codes else 0.0)


class FeatureExtractor:
    """Feature rows plus the velocity state they advance (one extractor per scoring stream)."""

    def __init__(self, tables: Tables | None = None, state: VelocityState | None = None,
                 graph: GraphFeatures | None = None) -> None:
        self.tables = tables if tables is not None else default_tables()
        self.state = state if state is not None else VelocityState()
        self.graph = graph if graph is not None else GraphFeatures()
        if isinstance(self.state, VelocityState):
            self.state.journal_with(self.graph)
        self._lookups: _Lookups | None = None

    def extract(self, transactions: Sequence[Transaction], at: Sequence[datetime] | datetime,
                deltas: list[StateDelta] | None = None,
                ids: Sequence[tuple[str | None, str | None]] | None = None) -> np.ndarray:
        """Rows (n, N_EXTRACTED) float64 for ``transactions`` at times ``at`` (one per transaction or one
        for all); advances the velocity state. A bad time raises before any state changes.

        With ``deltas``, each transaction's state delta is appended to it: what the state was
        advanced by, ``(originator id, beneficiary id, µs, US cents)`` with the accounts as the
        state holds them (keyed, for a keyed state; None where unknown). ``advance`` given the same
        deltas brings another extractor's state to the same bits without the messages.

        With ``ids`` (one pair per transaction), the accounts are taken as those identifiers
        instead of being keyed here: how a holder of sealed state deltas but not of the state key
        computes a payment's features. A transaction that names an account where its pair holds
        None, or none where its pair names one, raises ``FeatureError`` before any state changes."""
        n = len(transactions)
        times = [at] * n if isinstance(at, datetime) else list(at)
        if len(times) != n:
            raise FeatureError(f"{n} transactions but {len(times)} times")
        try:  # epoch_us inlined; a naive time cannot be subtracted from _EPOCH
            stamps = [(t - _EPOCH) // _US for t in times]
        except TypeError:
            stamps = [epoch_us(t) for t in times]  # raises the FeatureError that names the time
        if not n:
            return np.empty((0, N_EXTRACTED), dtype=np.float64)
        if ids is not None and len(ids) != n:
            raise FeatureError(f"{n} transactions but {len(ids)} account identifier pairs")
        look = self._lookups
        if look is None or look.tables is not self.tables:
            look = self._lookups = _Lookups(self.tables)
        rates, risks, risk = look.cents_per_unit, look.risks, look.risk
        state = self.state
        observe_ids = state.observe_ids_into if isinstance(state, VelocityState) else None
        account_id = state.account_id if isinstance(state, VelocityState) else str
        keep = deltas.append if deltas is not None else None
        graph = self.graph
        # the sealed values only: flagged_hops is not one, so its search is skipped where the graph can
        g_observe = graph.observe_sealed
        g_late, pick = graph.config.late_us, _SEALED_GRAPH
        log10 = math.log10
        flat: list[float] = []  # the rows one after another; np.fromiter makes floats of the ints and bools
        if ids is not None:
            given = iter(ids)
            for tx in transactions:
                o, b = next(given)
                o_bic, b_bic = _agent_bics(tx)
                if ((tx.originator.iban or _account(tx.originator, o_bic)) is None) != (o is None) or (
                        (tx.beneficiary.iban or _account(tx.beneficiary, b_bic)) is None) != (b is None):
                    raise FeatureError("a transaction's accounts do not match the identifiers given for them "
                                       "(one names an account where the other holds none)")
            given = iter(ids)
        for tx, us in zip(transactions, stamps, strict=True):
            amount = tx.amount
            rate = rates.get(tx.currency)
            if rate is None:
                cents = None
                usd = log_usd = NAN
            else:
                cents = round(amount * rate)  # = FxTable.usd_cents, see _Lookups
                usd = cents / 100
                log_usd = log10(1.0 + usd)
            o_bic, b_bic = _agent_bics(tx)
            orig, bene = tx.originator, tx.beneficiary
            o_country = orig.country or _country(orig, o_bic)  # the first test of _country, inlined
            b_country = bene.country or _country(bene, b_bic)
            o_risk = risks.get(o_country)
            if o_risk is None:
                o_risk = risk(o_country)
            b_risk = risks.get(b_country)
            if b_risk is None:
                b_risk = risk(b_country)
            r16 = tx.r16
            flat += (
                usd,
                log_usd,
                1.0 if amount > 0 and not amount % _THOUSAND else 0.0,
                NAN if o_country is None or b_country is None else 1.0 if o_country != b_country else 0.0,
                o_risk,
                b_risk,
                r16.originator_name,
                r16.originator_account,
                r16.originator_address_or_id,
                r16.beneficiary_name,
                r16.beneficiary_account,
            )
            o_acct = orig.iban or _account(orig, o_bic)  # the first test of _account, inlined
            b_acct = bene.iban or _account(bene, b_bic)
            if ids is None:
                o_id = None if o_acct is None else account_id(o_acct)
                b_id = None if b_acct is None else account_id(b_acct)
            else:
                o_id, b_id = next(given)
            if keep is not None:
                keep((o_id, b_id, us, cents))
            if observe_ids is not None:
                observe_ids(flat, o_id, b_id, us, cents)
            else:  # a stand-in state (benchmarks)
                flat += state.observe(o_acct, b_acct, us, cents)
            flat += (us % _DAY_US // _HOUR_US,  # floor division and modulo: right before 1970 too
                     1.0 if (us // _DAY_US + 3) % 7 >= 5 else 0.0)  # 1970-01-01 was a Thursday (weekday 3)
            flat += _data_quality(tx)
            wm = graph.graph.watermark
            if (o_id is None or b_id is None or cents is None or cents < 0
                    or (wm is not None and us < wm - g_late)):
                flat += _NAN_GRAPH
            else:
                flat += pick(g_observe(o_id, b_id, us, cents))
        return np.fromiter(flat, np.float64, n * N_EXTRACTED).reshape(n, N_EXTRACTED)

    def observe(self, transactions: Sequence[Transaction], at: Sequence[datetime] | datetime) -> None:
        """Advance the windows without keeping the rows (rebuilding state after a restart)."""
        self.extract(transactions, at)

    def advance(self, deltas: Iterable[StateDelta]) -> int:
        """Advance the windows and the graph by state deltas (``extract(..., deltas=)``, in the
        order they were made), exactly as ``extract`` of their transactions did; returns how many.

        The accounts are taken as the state holds them: deltas made by a keyed state apply only to
        a state under the same key (the caller checks the key id). No message, table or clock is
        read: this is how a process catches up with decisions another one made."""
        state = self.state
        if not isinstance(state, VelocityState):
            raise FeatureError("state deltas advance a VelocityState only")
        observe_ids, graph = state.observe_ids_into, self.graph
        g_add, g_late, g = graph.add_sealed, graph.config.late_us, graph.graph  # the graph's values unread
        scratch: list[float] = []
        n = 0
        for o_id, b_id, us, cents in deltas:
            scratch.clear()
            observe_ids(scratch, o_id, b_id, us, cents)
            wm = g.watermark
            if not (o_id is None or b_id is None or cents is None or cents < 0
                    or (wm is not None and us < wm - g_late)):
                g_add(o_id, b_id, us, cents)
            n += 1
        return n


class _Lookups:
    """Per-``Tables`` caches for the hot loop; they give exactly what the tables' methods give.

    ``cents_per_unit[c]`` is ``usd_per_unit[c]`` times 100, so ``round(amount * it)`` is
    ``FxTable.usd_cents``: scaling by a power of ten changes no digit of the 28-digit product
    the decimal context rounds to, and ``round()`` of a ``Decimal`` rounds half-even to an int,
    as quantizing to the cent half-even and multiplying by 100 does (tests check both agree).
    The one difference: past 10^26 USD, where quantize raises and parsed amounts (at most 18
    integer digits) never go, ``round()`` still answers.
    ``risks`` memoizes ``FatfTable.risk`` as floats (NaN for None) for the country codes seen."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.cents_per_unit = {c: r.scaleb(2) for c, r in tables.fx.usd_per_unit.items()}
        self.risks: dict[str | None, float] = {None: NAN}
        self._fatf = tables.fatf

    def risk(self, country: str | None) -> float:
        level = self._fatf.risk(country)
        value = NAN if level is None else float(level)
        if len(self.risks) < 1024:  # country codes are two letters, but bound it anyway
            self.risks[country] = value
        return value
