"""Velocity windows per account: counts, sums, counterparties over 1 h / 24 h / 7 d.

State is per account (IBAN, else account number, else BIC), one time-ordered event list
per direction (sent / received). Windows are half-open ``(t - w, t]`` and include the
current transaction. Sums are exact: amounts are whole US cents (ints) and every window sum
is a difference of integer prefix sums, so a state rebuilt from the last seven days gives
the same bits as one that ran for a year.

Memory is bounded by the longest window: an account's events older than
``watermark - 7 d`` (the watermark being the latest event time seen) are dropped when the
account is next touched, and accounts idle for seven days are swept out as stream time
advances. An event that arrives late is placed in time order; it only sees history that
was still held (no more than seven days before the watermark).

``snapshot()`` / ``restore()`` persist the whole state as canonical JSON, so the scoring
service can restart where it stopped; ``VelocityState`` fed the same events again (the
pipeline replays the ledger's recent transactions) reaches the same state.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import orjson

from inference.errors import FeatureError

__all__ = ["HOUR_US", "VELOCITY_FORMAT", "WINDOWS_US", "VelocityState"]

HOUR_US = 3_600_000_000
WINDOWS_US = (HOUR_US, 24 * HOUR_US, 7 * 24 * HOUR_US)  # 1 h, 24 h, 7 d
_DAY = WINDOWS_US[1]
_HORIZON = WINDOWS_US[-1]
_SWEEP_EVERY = HOUR_US
VELOCITY_FORMAT = "sealtrail.velocity/1"
NAN = float("nan")
_NAN6 = (NAN,) * 6


def _is_near(cents: int) -> bool:
    """Near the 10,000 USD reporting threshold: 8,000 up to (not including) 10,000 USD."""
    return 800_000 <= cents < 1_000_000


class _Side:
    """One direction of one account: events in time order plus integer prefix sums of their
    cents; near-threshold events are rare, so their times are kept apart in ``near``."""

    __slots__ = ("cps", "cum_cents", "near", "times")

    def __init__(self) -> None:
        self.times: list[int] = []
        self.cps: list[str | None] = []
        self.cum_cents: list[int] = [0]  # cum[i] = total of the events before index i
        self.near: list[int] = []  # times of the near-threshold events, in order

    def add(self, t: int, cents: int, cp: str | None) -> None:
        times, cum = self.times, self.cum_cents
        if _is_near(cents):
            insort(self.near, t)
        if not times or t >= times[-1]:
            times.append(t)
            self.cps.append(cp)
            cum.append(cum[-1] + cents)
            return
        at = bisect_right(times, t)  # late event: insert in order, shift the prefix sums after it
        times.insert(at, t)
        self.cps.insert(at, cp)
        cum.insert(at + 1, cum[at] + cents)
        cum[at + 2:] = [c + cents for c in cum[at + 2:]]

    def events(self) -> list[list[object]]:
        """``[time, cents, near, counterparty]`` per event, in time order."""
        cum = self.cum_cents
        out: list[list[object]] = []
        for i, (t, cp) in enumerate(zip(self.times, self.cps, strict=True)):
            cents = cum[i + 1] - cum[i]
            out.append([t, cents, 1 if _is_near(cents) else 0, cp])
        return out

    def evict(self, horizon: int) -> list[str | None]:
        """Drop events at or before ``horizon``; returns their counterparties."""
        k = bisect_right(self.times, horizon)
        if not k:
            return []
        gone = self.cps[:k]
        del self.times[:k], self.cps[:k], self.cum_cents[:k]
        near = self.near
        if near and near[0] <= horizon:
            del near[:bisect_right(near, horizon)]
        return gone


class _Account:
    __slots__ = ("cp_out", "last", "rx", "tx")

    def __init__(self) -> None:
        self.tx = _Side()  # sent
        self.rx = _Side()  # received
        self.cp_out: dict[str, int] = {}  # beneficiary -> events held in tx
        self.last = 0

    def evict_sent(self, horizon: int) -> None:
        """Drop the sent events at or before ``horizon`` and their counterparties' counts."""
        cp_out = self.cp_out
        for cp in self.tx.evict(horizon):
            if cp is not None:
                left = cp_out[cp] - 1
                if left:
                    cp_out[cp] = left
                else:
                    del cp_out[cp]


class VelocityState:
    """Per-account windows; ``observe`` adds one transaction and returns its velocity values."""

    def __init__(self) -> None:
        self._accounts: OrderedDict[str, _Account] = OrderedDict()
        self.watermark = 0  # latest event time seen, µs since the Unix epoch
        self._next_sweep = 0

    def __len__(self) -> int:
        return len(self._accounts)

    @property
    def events_held(self) -> int:
        return sum(len(a.tx.times) + len(a.rx.times) for a in self._accounts.values())

    def _sweep(self) -> None:
        horizon = self.watermark - _HORIZON
        accounts = self._accounts
        while accounts:
            key, acc = next(iter(accounts.items()))
            if acc.last > horizon:
                break
            del accounts[key]
        self._next_sweep = self.watermark + _SWEEP_EVERY

    def observe(self, orig: str | None, bene: str | None, t: int, cents: int | None) -> list[float]:
        """Add a transfer ``orig -> bene`` at ``t`` (µs) of ``cents`` US cents (None: unknown).

        Returns, in this order: orig count 1h/24h/7d, orig sum USD 1h/24h/7d, the same six for
        the beneficiary, orig and bene distinct counterparties 24h, orig and bene
        near-threshold count 24h, orig and bene in-and-out 24h, new counterparty.
        A side whose account is unknown (None) gets NaN for its values.
        """
        out: list[float] = []
        self.observe_into(out, orig, bene, t, cents)
        return [float(v) for v in out]

    def observe_into(self, out: list[float], orig: str | None, bene: str | None, t: int,
                     cents: int | None) -> None:
        """``observe`` for the feature extractor's hot loop: appends the same 19 values to ``out``
        but leaves the counts as ints (the float64 row conversion makes them the same floats)."""
        if t > self.watermark:
            self.watermark = t
            if t >= self._next_sweep:
                self._sweep()
        amount = 0 if cents is None else cents
        if orig is None:
            out += _NAN6
            new_cp = o_distinct = o_near = o_inout = NAN
        else:
            acc, o_distinct, o_near, o_inout = self._record(orig, True, t, amount, bene, out)
            if bene is None:
                new_cp = NAN
            else:
                cp_out = acc.cp_out
                held = cp_out.get(bene, 0)  # never 0 for a key that is there
                new_cp = 0.0 if held else 1.0
                cp_out[bene] = held + 1
        if bene is None:
            out += _NAN6
            b_distinct = b_near = b_inout = NAN
        else:
            _, b_distinct, b_near, b_inout = self._record(bene, False, t, amount, orig, out)
        out += (o_distinct, b_distinct, o_near, b_near, o_inout, b_inout, new_cp)

    def _record(self, key: str, sending: bool, t: int, cents: int, cp: str | None,
                out: list[float]) -> tuple[_Account, int, int, float]:
        """One side of a transfer: touch ``key``'s account (create it, or move it to the end of
        the sweep order and drop its events at or before ``watermark - 7 d``), add the event to
        its sent or received events, append the count and sum windows to ``out`` (counts as
        ints) and return the account with the 24 h distinct-counterparty count, near-threshold
        count and in-and-out flag.

        This runs twice per transaction, hence one function with ``_Side.add`` inlined for the
        usual case: an event at or after the side's latest (then the windows end at the end)."""
        accounts = self._accounts
        try:  # (OrderedDict.get is slower than this; a new account is rare)
            acc = accounts[key]
        except KeyError:
            acc = accounts[key] = _Account()
        else:
            accounts.move_to_end(key)
            horizon = self.watermark - _HORIZON
            rx = acc.rx.times
            if rx and rx[0] <= horizon:
                acc.rx.evict(horizon)
            tx = acc.tx.times
            if tx and tx[0] <= horizon:
                acc.evict_sent(horizon)
        if t > acc.last:
            acc.last = t
        if sending:
            side, other = acc.tx, acc.rx.times
        else:
            side, other = acc.rx, acc.tx.times
        times, cum = side.times, side.cum_cents
        if not times or t >= times[-1]:
            times.append(t)
            side.cps.append(cp)
            top = cum[-1] + cents
            cum.append(top)
            if 800_000 <= cents < 1_000_000:  # _is_near
                side.near.append(t)
            hi = len(times)
        else:
            side.add(t, cents, cp)  # late: inserted in order
            hi = bisect_right(times, t)
            top = cum[hi]
        day_lo = t - _DAY
        lo1 = bisect_right(times, t - HOUR_US)
        lo24 = bisect_right(times, day_lo)
        # The 7 d window starts at index 0: every event held is after watermark - 7 d >= t - 7 d
        # (the eviction above), and the event just added is at t.
        out += (hi - lo1, hi - lo24, hi,
                (top - cum[lo1]) / 100, (top - cum[lo24]) / 100, (top - cum[0]) / 100)
        cps = set(side.cps[lo24:hi])
        # in-and-out: any event in the other direction in (t - 24 h, t]; in time order, the last one
        if not other:
            in_out = 0.0
        elif other[-1] <= t:
            in_out = 1.0 if other[-1] > day_lo else 0.0
        else:
            in_out = 1.0 if bisect_right(other, t) > bisect_right(other, day_lo) else 0.0
        near = side.near
        n_near = bisect_right(near, t) - bisect_right(near, day_lo) if near else 0
        return acc, len(cps) - (None in cps), n_near, in_out

    # --- persistence -------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state as canonical JSON bytes (restore() reads them back)."""
        accounts: list[Any] = []
        for key, acc in self._accounts.items():
            accounts.append([key, acc.last, acc.tx.events(), acc.rx.events()])
        doc = {"format": VELOCITY_FORMAT, "watermark": self.watermark,
               "next_sweep": self._next_sweep, "accounts": accounts}
        return orjson.dumps(doc)

    @classmethod
    def restore(cls, data: bytes) -> VelocityState:
        """Rebuild from ``snapshot()`` bytes; anything malformed raises ``FeatureError``."""
        try:
            doc = orjson.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != VELOCITY_FORMAT:
                raise FeatureError(f"velocity snapshot: not a {VELOCITY_FORMAT} document")
            state = cls()
            state.watermark = _int(doc["watermark"])
            state._next_sweep = _int(doc["next_sweep"])
            for key, last, tx, rx in doc["accounts"]:
                if not isinstance(key, str) or key in state._accounts:
                    raise FeatureError(f"velocity snapshot: bad or repeated account {key!r}")
                acc = state._accounts[key] = _Account()
                acc.last = _int(last)
                for side, events in ((acc.tx, tx), (acc.rx, rx)):
                    _load_side(side, events)
                for cp in acc.tx.cps:
                    if cp is not None:
                        acc.cp_out[cp] = acc.cp_out.get(cp, 0) + 1
        except FeatureError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise FeatureError(f"velocity snapshot is malformed: {exc}") from exc
        return state


def _int(v: object) -> int:
    if type(v) is not int:
        raise FeatureError(f"velocity snapshot: expected an integer, got {v!r}")
    return v


def _load_side(side: _Side, events: Iterable[Any]) -> None:
    last = None
    for t, cents, near, cp in events:
        if last is not None and _int(t) < last:
            raise FeatureError("velocity snapshot: events out of time order")
        if near not in (0, 1) or not (cp is None or isinstance(cp, str)):
            raise FeatureError("velocity snapshot: bad event")
        t, cents = _int(t), _int(cents)
        if near != _is_near(cents):  # snapshot() writes the flag the amount gives
            raise FeatureError("velocity snapshot: bad event (near-threshold flag does not match the amount)")
        side.add(t, cents, cp)
        last = t
