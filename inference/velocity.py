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

A state made with a key (``VelocityState(key=...)``, 32 bytes) holds no account identifier in
clear: every account and counterparty is replaced by its HMAC-SHA256 under that key before it
is stored, so its snapshot (``sealtrail.velocity/2``) names accounts only by keyed hashes. The
values ``observe`` returns do not depend on the key (the hash is injective in practice).
A ``sealtrail.velocity/1`` snapshot (accounts in clear) still restores, and with a key it is
converted to keyed identifiers as it loads.

``begin_journal()`` records every change the following observations make, and
``rollback(journals)`` takes them back exactly (watermark, evicted events, swept accounts, the
order accounts are swept in): the decision pipeline undoes a batch whose commit failed this way
instead of replaying the ledger. Other state that advances with the same transactions (the
transaction graph) joins the journal with ``journal_with``: each journal then begins, ends and
rolls back theirs too, so one journal covers all the feature state a batch changed.
"""

from __future__ import annotations

import hashlib
import hmac
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import orjson

from inference.errors import FeatureError

__all__ = ["HOUR_US", "KEY_BYTES", "VELOCITY_FORMAT", "VELOCITY_FORMAT_KEYED", "WINDOWS_US", "Journal",
           "VelocityState", "key_id"]

HOUR_US = 3_600_000_000
WINDOWS_US = (HOUR_US, 24 * HOUR_US, 7 * 24 * HOUR_US)  # 1 h, 24 h, 7 d
_DAY = WINDOWS_US[1]
_HORIZON = WINDOWS_US[-1]
_SWEEP_EVERY = HOUR_US
VELOCITY_FORMAT = "sealtrail.velocity/1"  # accounts in clear (a state made without a key)
VELOCITY_FORMAT_KEYED = "sealtrail.velocity/2"  # accounts as HMAC-SHA256 under the state's key
KEY_BYTES = 32
_IDS_CACHED = 1 << 16  # account -> keyed id, remembered for the hot loop (cleared when full)
NAN = float("nan")
_NAN6 = (NAN,) * 6


def key_id(key: bytes) -> str:
    """Names a key without revealing it: a snapshot says which key its identifiers are under."""
    return hashlib.sha256(b"sealtrail.velocity-key\n" + key).hexdigest()[:16]


# Journal entries (tuples; the first item says which change it takes back).
_NEW, _SWEPT, _EVICT, _ADD, _CP = range(5)


class Journaled(Protocol):
    """State journaled along with the windows (``VelocityState.journal_with``)."""

    def begin_journal(self) -> Any: ...

    def end_journal(self) -> None: ...

    def rollback(self, journals: list[Any]) -> None: ...


class Journal:
    """What a stretch of observations changed in one ``VelocityState``, to take back exactly."""

    __slots__ = ("entries", "linked", "next_sweep", "state", "watermark")

    def __init__(self, state: VelocityState) -> None:
        self.state: VelocityState | None = state  # None once rolled back
        self.watermark = state.watermark
        self.next_sweep = state._next_sweep
        self.entries: list[tuple[Any, ...]] = []
        self.linked: list[Any] = []  # the journals of the state joined with ``journal_with``, in order


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

    def add(self, t: int, cents: int, cp: str | None) -> int:
        """Add an event; returns its index."""
        times, cum = self.times, self.cum_cents
        if _is_near(cents):
            insort(self.near, t)
        if not times or t >= times[-1]:
            times.append(t)
            self.cps.append(cp)
            cum.append(cum[-1] + cents)
            return len(times) - 1
        at = bisect_right(times, t)  # late event: insert in order, shift the prefix sums after it
        times.insert(at, t)
        self.cps.insert(at, cp)
        cum.insert(at + 1, cum[at] + cents)
        cum[at + 2:] = [c + cents for c in cum[at + 2:]]
        return at

    def remove(self, at: int, t: int, cents: int) -> None:
        """Take back ``add``: the event at index ``at`` (time ``t``, ``cents``) goes."""
        del self.times[at], self.cps[at]
        cum = self.cum_cents
        del cum[at + 1]
        if at + 1 < len(cum):
            cum[at + 1:] = [c - cents for c in cum[at + 1:]]
        if _is_near(cents):
            near = self.near
            del near[bisect_left(near, t)]

    def events(self) -> list[list[object]]:
        """``[time, cents, near, counterparty]`` per event, in time order."""
        cum = self.cum_cents
        out: list[list[object]] = []
        for i, (t, cp) in enumerate(zip(self.times, self.cps, strict=True)):
            cents = cum[i + 1] - cum[i]
            out.append([t, cents, 1 if _is_near(cents) else 0, cp])
        return out

    def evict(self, horizon: int, log: list[tuple[Any, ...]] | None = None,
              cp_out: dict[str, int] | None = None) -> list[str | None]:
        """Drop events at or before ``horizon``; returns their counterparties. With a journal
        ``log``, what is dropped is kept there (with ``cp_out``, the counts they were part of)."""
        k = bisect_right(self.times, horizon)
        if not k:
            return []
        gone = self.cps[:k]
        near = self.near
        j = bisect_right(near, horizon) if near and near[0] <= horizon else 0
        if log is not None:
            log.append((_EVICT, self, self.times[:k], gone, self.cum_cents[:k], near[:j], cp_out))
        del self.times[:k], self.cps[:k], self.cum_cents[:k]
        if j:
            del near[:j]
        return gone


class _Account:
    __slots__ = ("cp_out", "last", "rx", "seq", "tx")

    def __init__(self) -> None:
        self.tx = _Side()  # sent
        self.rx = _Side()  # received
        self.cp_out: dict[str, int] = {}  # beneficiary -> events held in tx
        self.last = 0
        self.seq = 0  # when it was last touched: the accounts are held in this order

    def evict_sent(self, horizon: int, log: list[tuple[Any, ...]] | None = None) -> None:
        """Drop the sent events at or before ``horizon`` and their counterparties' counts."""
        cp_out = self.cp_out
        for cp in self.tx.evict(horizon, log, cp_out):
            if cp is not None:
                left = cp_out[cp] - 1
                if left:
                    cp_out[cp] = left
                else:
                    del cp_out[cp]


class VelocityState:
    """Per-account windows; ``observe`` adds one transaction and returns its velocity values.

    With ``key`` (32 bytes), accounts are held and saved only as HMAC-SHA256 under it."""

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and (type(key) is not bytes or len(key) != KEY_BYTES):
            raise FeatureError(f"a velocity key is {KEY_BYTES} bytes")
        self._key = key
        self._ids: dict[str, str] | None = None if key is None else {}  # account -> keyed id
        self._accounts: OrderedDict[str, _Account] = OrderedDict()
        self.watermark = 0  # latest event time seen, µs since the Unix epoch
        self._next_sweep = 0
        self._seq = 0  # touches so far: an account's seq orders the sweep
        self._log: list[tuple[Any, ...]] | None = None  # the open journal's entries
        self._joined: list[Journaled] = []  # journaled with the windows (journal_with)

    def __len__(self) -> int:
        return len(self._accounts)

    @property
    def key_id(self) -> str | None:
        """``key_id(key)`` of the key accounts are hashed under; None: accounts in clear."""
        return None if self._key is None else key_id(self._key)

    def account_id(self, account: str) -> str:
        """What the state holds ``account`` as: its keyed identifier (a state made with a key), else
        the account itself. Other state kept beside the windows keys accounts the same way."""
        ids = self._ids
        if ids is None:
            return account
        return ids.get(account) or self._id(account)

    def journal_with(self, other: Journaled) -> None:
        """Journal ``other`` with the windows from the next ``begin_journal`` on: each journal of
        this state begins, ends and rolls back one of ``other``'s."""
        self._joined.append(other)

    def _id(self, account: str) -> str:
        """The keyed identifier the state holds ``account`` as (a state made with a key)."""
        assert self._key is not None and self._ids is not None
        got = hmac.digest(self._key, account.encode(), "sha256").hex()
        if len(self._ids) >= _IDS_CACHED:
            self._ids.clear()
        self._ids[account] = got
        return got

    # --- journal ------------------------------------------------------------------------

    def begin_journal(self) -> Journal:
        """Record every change from now on (until ``end_journal`` or the next ``begin_journal``)
        so that ``rollback`` can take it back."""
        journal = Journal(self)
        self._log = journal.entries
        journal.linked = [other.begin_journal() for other in self._joined]
        return journal

    def end_journal(self) -> None:
        """Stop recording changes."""
        self._log = None
        for other in self._joined:
            other.end_journal()

    def rollback(self, journals: Sequence[Journal]) -> None:
        """Take back every change ``journals`` recorded, newest first: the state is again
        exactly the one the first of them began on. They must be this state's latest journals,
        in the order they began, none rolled back before (else ``FeatureError``, nothing done)."""
        if any(j.state is not self for j in journals):
            raise FeatureError("velocity rollback: a journal of another state, or one already rolled back")
        if any(len(j.linked) != len(self._joined) for j in journals):
            raise FeatureError("velocity rollback: a journal begun before other state joined it")
        for i, other in enumerate(self._joined):  # each checks its journals before changing anything
            other.rollback([j.linked[i] for j in journals])
        accounts = self._accounts
        moved = False  # an account held before went back to an earlier place in the sweep order
        for journal in reversed(journals):
            for e in reversed(journal.entries):
                tag = e[0]
                if tag == _ADD:
                    _, acc, side, at, t, cents, last, seq = e
                    side.remove(at, t, cents)
                    acc.last, acc.seq = last, seq
                    moved = True
                elif tag == _CP:
                    cp_out, cp = e[1], e[2]
                    left = cp_out[cp] - 1
                    if left:
                        cp_out[cp] = left
                    else:
                        del cp_out[cp]
                elif tag == _EVICT:
                    _, side, times, cps, cum, near, cp_out = e
                    side.times[:0], side.cps[:0], side.cum_cents[:0], side.near[:0] = times, cps, cum, near
                    if cp_out is not None:
                        for cp in cps:
                            if cp is not None:
                                cp_out[cp] = cp_out.get(cp, 0) + 1
                elif tag == _NEW:
                    del accounts[e[1]]
                else:  # _SWEPT
                    accounts[e[1]] = e[2]
                    moved = True
            self.watermark, self._next_sweep = journal.watermark, journal.next_sweep
            journal.state = None
            if self._log is journal.entries:
                self._log = None
            journal.entries = []
        if moved:  # the accounts in the order of their last touch, as before the journals
            ordered = sorted(accounts.items(), key=lambda kv: kv[1].seq)  # Timsort: the sorted runs
            accounts.clear()
            accounts.update(ordered)

    @property
    def events_held(self) -> int:
        return sum(len(a.tx.times) + len(a.rx.times) for a in self._accounts.values())

    def _sweep(self) -> None:
        horizon = self.watermark - _HORIZON
        accounts = self._accounts
        log = self._log
        while accounts:
            key, acc = next(iter(accounts.items()))
            if acc.last > horizon:
                break
            del accounts[key]
            if log is not None:
                log.append((_SWEPT, key, acc))
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
        ids = self._ids
        if ids is not None:  # a keyed state: the account's keyed id from here on
            if orig is not None:
                orig = ids.get(orig) or self._id(orig)
            if bene is not None:
                bene = ids.get(bene) or self._id(bene)
        self.observe_ids_into(out, orig, bene, t, cents)

    def observe_ids_into(self, out: list[float], orig: str | None, bene: str | None, t: int,
                         cents: int | None) -> None:
        """``observe_into`` for accounts given as the state holds them (``account_id``): what a
        sealed state delta names, or the feature extractor once it has keyed them."""
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
                if self._log is not None:
                    self._log.append((_CP, cp_out, bene))
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
        log = self._log
        try:  # (OrderedDict.get is slower than this; a new account is rare)
            acc = accounts[key]
        except KeyError:
            acc = accounts[key] = _Account()
            if log is not None:
                log.append((_NEW, key))
        else:
            accounts.move_to_end(key)
            horizon = self.watermark - _HORIZON
            rx = acc.rx.times
            if rx and rx[0] <= horizon:
                acc.rx.evict(horizon, log)
            tx = acc.tx.times
            if tx and tx[0] <= horizon:
                acc.evict_sent(horizon, log)
        last, seq = acc.last, acc.seq
        acc.seq = self._seq
        self._seq += 1
        if t > last:
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
            if log is not None:
                log.append((_ADD, acc, side, hi - 1, t, cents, last, seq))
        else:
            at = side.add(t, cents, cp)  # late: inserted in order
            if log is not None:
                log.append((_ADD, acc, side, at, t, cents, last, seq))
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
        """The whole state as canonical JSON bytes (restore() reads them back): a
        ``sealtrail.velocity/2`` document naming its key by ``key_id`` for a keyed state, else
        ``sealtrail.velocity/1`` (accounts in clear)."""
        accounts: list[Any] = []
        for key, acc in self._accounts.items():
            accounts.append([key, acc.last, acc.tx.events(), acc.rx.events()])
        head: dict[str, Any] = ({"format": VELOCITY_FORMAT} if self._key is None
                                else {"format": VELOCITY_FORMAT_KEYED, "key_id": key_id(self._key)})
        return orjson.dumps({**head, "watermark": self.watermark, "next_sweep": self._next_sweep,
                             "accounts": accounts})

    @classmethod
    def restore(cls, data: bytes, key: bytes | None = None, *, as_held: bool = False) -> VelocityState:
        """Rebuild from ``snapshot()`` bytes; anything malformed raises ``FeatureError``.

        With ``key``, the state is keyed: a ``sealtrail.velocity/2`` document must name that key,
        and the clear accounts of a ``sealtrail.velocity/1`` one are hashed as they load.
        Without it, only a ``sealtrail.velocity/1`` document restores, unless ``as_held``: then a
        keyed document loads too, its identifiers taken as they are, into a state that holds no
        key (one that is only ever advanced by identifiers, ``observe_ids_into``: what a holder of
        sealed state deltas but not of the state key does)."""
        try:
            doc = orjson.loads(data)
            fmt = doc.get("format") if isinstance(doc, dict) else None
            if fmt not in (VELOCITY_FORMAT, VELOCITY_FORMAT_KEYED):
                raise FeatureError(f"velocity snapshot: not a {VELOCITY_FORMAT} or "
                                   f"{VELOCITY_FORMAT_KEYED} document")
            if fmt == VELOCITY_FORMAT_KEYED and key is None and not as_held:
                raise FeatureError("velocity snapshot: its accounts are keyed hashes; give its key")
            if fmt == VELOCITY_FORMAT_KEYED and key is not None and doc.get("key_id") != key_id(key):
                raise FeatureError("velocity snapshot: its accounts are hashed under key "
                                   f"{doc.get('key_id')!r}, not the one given ({key_id(key)})")
            state = cls(key)
            ids = state._id if fmt == VELOCITY_FORMAT and key is not None else None  # clear: hash them
            state.watermark = _int(doc["watermark"])
            state._next_sweep = _int(doc["next_sweep"])
            for account, last, tx, rx in doc["accounts"]:
                if not isinstance(account, str):
                    raise FeatureError(f"velocity snapshot: bad account {account!r}")
                name = account if ids is None else ids(account)
                if name in state._accounts:
                    raise FeatureError(f"velocity snapshot: repeated account {name!r}")
                acc = state._accounts[name] = _Account()
                acc.last = _int(last)
                acc.seq = state._seq
                state._seq += 1
                for side, events in ((acc.tx, tx), (acc.rx, rx)):
                    _load_side(side, events, ids)
                for cp in acc.tx.cps:
                    if cp is not None:
                        acc.cp_out[cp] = acc.cp_out.get(cp, 0) + 1
        except FeatureError:
            raise
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FeatureError(f"velocity snapshot is malformed: {exc}") from exc
        if ids is not None and state._ids is not None:
            state._ids.clear()  # the clear accounts of the document: not kept beyond the load
        return state


def _int(v: object) -> int:
    if type(v) is not int:
        raise FeatureError(f"velocity snapshot: expected an integer, got {v!r}")
    return v


def _load_side(side: _Side, events: Iterable[Any], ids: Callable[[str], str] | None = None) -> None:
    last = None
    for t, cents, near, cp in events:
        if last is not None and _int(t) < last:
            raise FeatureError("velocity snapshot: events out of time order")
        if near not in (0, 1) or not (cp is None or isinstance(cp, str)):
            raise FeatureError("velocity snapshot: bad event")
        if ids is not None and cp is not None:
            cp = ids(cp)
        t, cents = _int(t), _int(cents)
        if near != _is_near(cents):  # snapshot() writes the flag the amount gives
            raise FeatureError("velocity snapshot: bad event (near-threshold flag does not match the amount)")
        side.add(t, cents, cp)
        last = t
