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

from bisect import bisect_right
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


class _Side:
    """One direction of one account: events in time order plus integer prefix sums."""

    __slots__ = ("cps", "cum_cents", "cum_near", "times")

    def __init__(self) -> None:
        self.times: list[int] = []
        self.cps: list[str | None] = []
        self.cum_cents: list[int] = [0]  # cum[i] = total of the events before index i
        self.cum_near: list[int] = [0]

    def add(self, t: int, cents: int, near: int, cp: str | None) -> None:
        times = self.times
        if not times or t >= times[-1]:
            times.append(t)
            self.cps.append(cp)
            self.cum_cents.append(self.cum_cents[-1] + cents)
            self.cum_near.append(self.cum_near[-1] + near)
            return
        at = bisect_right(times, t)  # late event: insert in order, redo the prefix sums after it
        times.insert(at, t)
        self.cps.insert(at, cp)
        for cum, value in ((self.cum_cents, cents), (self.cum_near, near)):
            later = [b - a for a, b in zip(cum[at:], cum[at + 1:], strict=False)]
            del cum[at + 1:]
            for v in (value, *later):
                cum.append(cum[-1] + v)

    def events(self) -> list[list[object]]:
        """``[time, cents, near, counterparty]`` per event, in time order."""
        cc, cn = self.cum_cents, self.cum_near
        return [[t, cc[i + 1] - cc[i], cn[i + 1] - cn[i], cp]
                for i, (t, cp) in enumerate(zip(self.times, self.cps, strict=True))]

    def evict(self, horizon: int) -> list[str | None]:
        """Drop events at or before ``horizon``; returns their counterparties."""
        k = bisect_right(self.times, horizon)
        if not k:
            return []
        gone = self.cps[:k]
        del self.times[:k], self.cps[:k]
        del self.cum_cents[:k], self.cum_near[:k]
        return gone


class _Account:
    __slots__ = ("cp_out", "last", "rx", "tx")

    def __init__(self) -> None:
        self.tx = _Side()  # sent
        self.rx = _Side()  # received
        self.cp_out: dict[str, int] = {}  # beneficiary -> events held in tx
        self.last = 0


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

    def _touch(self, key: str, t: int) -> _Account:
        acc = self._accounts.get(key)
        if acc is None:
            acc = self._accounts[key] = _Account()
        else:
            self._accounts.move_to_end(key)
            horizon = self.watermark - _HORIZON
            rx_times = acc.rx.times
            if rx_times and rx_times[0] <= horizon:
                acc.rx.evict(horizon)
            tx_times = acc.tx.times
            if not tx_times or tx_times[0] > horizon:
                if t > acc.last:
                    acc.last = t
                return acc
            for cp in acc.tx.evict(horizon):
                if cp is not None:
                    left = acc.cp_out[cp] - 1
                    if left:
                        acc.cp_out[cp] = left
                    else:
                        del acc.cp_out[cp]
        if t > acc.last:
            acc.last = t
        return acc

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
        if t > self.watermark:
            self.watermark = t
            if t >= self._next_sweep:
                self._sweep()
        amount = 0 if cents is None else cents
        near = 1 if 800_000 <= amount < 1_000_000 else 0
        day_lo = t - _DAY
        out: list[float] = []
        new_cp = NAN
        o_distinct = o_near = o_inout = NAN
        if orig is None:
            out.extend((NAN,) * 6)
        else:
            acc = self._touch(orig, t)
            if bene is not None:
                new_cp = 0.0 if bene in acc.cp_out else 1.0
                acc.cp_out[bene] = acc.cp_out.get(bene, 0) + 1
            side = acc.tx
            side.add(t, amount, near, bene)
            o_distinct, o_near = self._window(side, t, out)
            rx = acc.rx.times
            o_inout = 1.0 if rx and bisect_right(rx, t) > bisect_right(rx, day_lo) else 0.0
        b_distinct = b_near = b_inout = NAN
        if bene is None:
            out.extend((NAN,) * 6)
        else:
            acc = self._touch(bene, t)
            side = acc.rx
            side.add(t, amount, near, orig)
            b_distinct, b_near = self._window(side, t, out)
            sent = acc.tx.times
            b_inout = 1.0 if sent and bisect_right(sent, t) > bisect_right(sent, day_lo) else 0.0
        out += (o_distinct, b_distinct, o_near, b_near, o_inout, b_inout, new_cp)
        return out

    @staticmethod
    def _window(side: _Side, t: int, out: list[float]) -> tuple[float, float]:
        # unrolled over WINDOWS_US (1 h, 24 h, 7 d): this runs twice per transaction
        times, cum = side.times, side.cum_cents
        n = len(times)  # never 0: the current transfer was just added
        hi = n if times[-1] <= t else bisect_right(times, t)
        lo1 = bisect_right(times, t - HOUR_US)
        lo24 = bisect_right(times, t - _DAY)
        # held events are within 7 days of the watermark, so this is 0 unless the transfer is late
        lo7 = 0 if times[0] > t - _HORIZON else bisect_right(times, t - _HORIZON)
        top = cum[hi]
        out += (float(hi - lo1), float(hi - lo24), float(hi - lo7),
                (top - cum[lo1]) / 100, (top - cum[lo24]) / 100, (top - cum[lo7]) / 100)
        cps = side.cps[lo24:hi]
        distinct = len(set(cps))
        if None in cps:
            distinct -= 1
        return float(distinct), float(side.cum_near[hi] - side.cum_near[lo24])

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
        side.add(_int(t), _int(cents), near, cp)
        last = t
