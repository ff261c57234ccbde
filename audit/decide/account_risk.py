"""Per-account risk (``sealtrail.account-risk/1``): a time-decayed sum of points per keyed account.

Every decision adds points to the originator's and the beneficiary's account: the model score
quantised to thousandths, plus points for the outcome (REVIEW, HOLD, BLOCK). An account's risk
halves every half-life of event time. When a decision lifts an account's risk from below the
threshold to at or above it, that decision raises an **account alert**, whatever its own outcome.
docs/account-risk.md is the examiner's definition; this module is its one implementation.

Everything is integer (milli-points, whole hours, a Q32 decay table built by exact integer
arithmetic): no float, libm or SIMD result reaches the state, so two processes that apply the
same decisions in the same order hold the same bits. Accounts are the keyed account ids of the
decision summary (``audit.decide.summary.AccountKeyer``), never an account in clear.

The state changes only when a batch is committed: ``AccountRiskState.assess`` computes a batch's
results over the committed state and the batches prepared before it (``Pending``), and
``commit`` applies one once the ledger holds it; a batch that is not committed is ``discard``-ed
and leaves no trace. ``apply_record`` is the same step read back from a sealed record, for the
rebuild (``audit.state.account_risk_replay``).

This module is pure (no database, no clock); the offline bundle verifier reads records with it.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property, lru_cache
from typing import Any

from audit.decide.fixed_point import body_score as _body_score
from audit.errors import AccountRiskError
from ledger.jcs import canonical_bytes

__all__ = [
    "ACCOUNT_RISK_POLICY",
    "FLOOR_MILLI",
    "AccountRisk",
    "AccountRiskError",
    "AccountRiskPolicy",
    "AccountRiskState",
    "Pending",
    "RiskEvent",
    "SideRisk",
    "check_account_risk",
    "decay",
    "decay_table",
    "event_hour",
    "points_milli",
]

ACCOUNT_RISK_POLICY = "sealtrail.account-risk/1"
FLOOR_MILLI = 1000  # an account whose risk is below 1 point at the start of a UTC day is forgotten
SCORE_STEPS = 1000  # the score is quantised to thousandths: round(score * 1000), half to even
HOUR_US = 3_600_000_000
DAY_HOURS = 24
MAX_HALF_LIFE_HOURS = 8760  # one year
MAX_POINTS_MILLI = 10**9
MAX_THRESHOLD_MILLI = 10**12
_OUTCOMES = ("ALLOW", "REVIEW", "HOLD", "BLOCK")
_SIDES = ("originator", "beneficiary")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


# --- decay: exact integers ------------------------------------------------------------------------

@lru_cache(maxsize=8)
def decay_table(half_life_hours: int) -> tuple[int, ...]:
    """``T[h]`` for ``0 <= h < half_life_hours``: the Q32 factor of ``h`` hours of decay.

    ``q`` is the largest integer with ``q ** H <= 2 ** (64 * H - 1)`` (2^-1/H in Q64, rounded
    down, found by integer Newton steps); ``Q[0] = 2 ** 64``, ``Q[h + 1] = Q[h] * q >> 64``, and
    ``T[h] = Q[h] >> 32``. Only integer arithmetic: the table has the same bits everywhere."""
    hl = half_life_hours
    if type(hl) is not int or not 1 <= hl <= MAX_HALF_LIFE_HOURS:
        raise AccountRiskError(f"half_life_hours must be an integer in 1..{MAX_HALF_LIFE_HOURS}, not {hl!r}")
    target = 1 << (64 * hl - 1)
    q = 1 << 64  # Newton from above converges down onto the floor of the root
    while True:
        nxt = ((hl - 1) * q + target // q ** (hl - 1)) // hl
        if nxt >= q:
            break
        q = nxt
    while q ** hl > target:
        q -= 1
    while (q + 1) ** hl <= target:
        q += 1
    out: list[int] = []
    acc = 1 << 64
    for _ in range(hl):
        out.append(acc >> 32)
        acc = acc * q >> 64
    return tuple(out)


def decay(milli: int, hours: int, half_life_hours: int) -> int:
    """``milli`` after ``hours`` whole hours: ``floor(milli * T[h] / 2 ** (32 + n))`` with
    ``n, h = divmod(hours, half_life_hours)``; exactly ``milli >> n`` at ``n`` half-lives."""
    if hours <= 0:
        return milli
    n, h = divmod(hours, half_life_hours)
    return (milli * decay_table(half_life_hours)[h]) >> (32 + n)


def event_hour(at: datetime | str) -> int:
    """The whole UTC hour (since the epoch, floor) of a decision's event time (``at``)."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError as exc:
            raise AccountRiskError(f"event time {at!r} is not an ISO 8601 time") from exc
    if at.tzinfo is None:
        raise AccountRiskError("event time has no time zone")
    return ((at - _EPOCH) // _US) // HOUR_US


# --- the policy ---------------------------------------------------------------------------------

def _int_in(name: str, v: object, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise AccountRiskError(f"account risk: {name} must be an integer in {lo}..{hi}, not {v!r}")
    return v


@dataclass(frozen=True)
class AccountRiskPolicy:
    """The constants of ``sealtrail.account-risk/1`` (milli-points: 1000 = one point).

    A score of 1.0 adds ``score_milli`` (a score ``s`` adds ``round(s * 1000) * score_milli //
    1000``), a missing score ``missing_score_milli``; REVIEW, HOLD and BLOCK add theirs on top; a
    fail-safe decision (``fail_safe`` set: the system, not the payment, decided it) adds nothing.
    An alert is raised at ``threshold_milli``. Bad values raise ``AccountRiskError``."""

    half_life_hours: int = 336  # 14 days
    threshold_milli: int = 50_000
    score_milli: int = 10_000
    missing_score_milli: int = 5_000
    review_milli: int = 10_000
    hold_milli: int = 25_000
    block_milli: int = 50_000

    def __post_init__(self) -> None:
        _int_in("half_life_hours", self.half_life_hours, 1, MAX_HALF_LIFE_HOURS)
        _int_in("threshold_milli", self.threshold_milli, FLOOR_MILLI, MAX_THRESHOLD_MILLI)
        for name in ("score_milli", "missing_score_milli", "review_milli", "hold_milli", "block_milli"):
            _int_in(name, getattr(self, name), 0, MAX_POINTS_MILLI)
        decay_table(self.half_life_hours)  # built once, here, not inside a batch

    @cached_property
    def most_milli(self) -> int:
        """The most milli-points one decision can add under this policy (a score of 1, or a missing
        score, whichever adds more, and the largest outcome's points)."""
        return max(self.score_milli, self.missing_score_milli) + max(self.outcome_milli.values())

    @cached_property
    def jcs(self) -> bytes:
        """The canonical bytes of ``to_json()`` (made once per policy)."""
        return bytes(canonical_bytes(self.to_json()))

    @property
    def outcome_milli(self) -> dict[str, int]:
        return {"ALLOW": 0, "REVIEW": self.review_milli, "HOLD": self.hold_milli, "BLOCK": self.block_milli}

    def to_json(self) -> dict[str, Any]:
        """The policy as every record states it."""
        return {"id": ACCOUNT_RISK_POLICY, "half_life_hours": self.half_life_hours,
                "threshold_milli": self.threshold_milli, "floor_milli": FLOOR_MILLI,
                "score_milli": self.score_milli, "missing_score_milli": self.missing_score_milli,
                "outcome_milli": self.outcome_milli}

    @classmethod
    def from_json(cls, doc: object) -> AccountRiskPolicy:
        """The policy a record states; ``AccountRiskError`` if it is not one this build knows."""
        if not isinstance(doc, dict) or doc.get("id") != ACCOUNT_RISK_POLICY:
            raise AccountRiskError(f"account_risk.policy is not a {ACCOUNT_RISK_POLICY} policy")
        want = {"id", "half_life_hours", "threshold_milli", "floor_milli", "score_milli",
                "missing_score_milli", "outcome_milli"}
        if set(doc) != want:
            raise AccountRiskError(f"account_risk.policy has fields {sorted(doc)}, not {sorted(want)}")
        out = doc["outcome_milli"]
        if (not isinstance(out, dict) or set(out) != set(_OUTCOMES) or out.get("ALLOW") != 0
                or type(out["ALLOW"]) is not int):
            raise AccountRiskError("account_risk.policy.outcome_milli must name ALLOW (0), REVIEW, HOLD "
                                   "and BLOCK")
        if doc["floor_milli"] != FLOOR_MILLI or type(doc["floor_milli"]) is not int:
            raise AccountRiskError(f"account_risk.policy.floor_milli must be {FLOOR_MILLI}")
        values = (doc["half_life_hours"], doc["threshold_milli"], doc["score_milli"],
                  doc["missing_score_milli"], out["REVIEW"], out["HOLD"], out["BLOCK"])
        if all(type(v) is int for v in values):  # every record states its policy: made once, checked once
            held = _POLICIES.get(values)
            if held is not None:
                return held
        policy = cls(half_life_hours=values[0], threshold_milli=values[1], score_milli=values[2],
                     missing_score_milli=values[3], review_milli=values[4], hold_milli=values[5],
                     block_milli=values[6])
        if len(_POLICIES) < 64 and all(type(v) is int for v in values):
            _POLICIES[values] = policy  # by plain ints alone: True or 1.0 must still be refused
        return policy

    @classmethod
    def from_settings(cls, settings: object) -> AccountRiskPolicy:
        """The policy from an object's ``account_risk_*`` fields (defaults where it has none)."""
        kw: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            v = getattr(settings, f"account_risk_{name}", None)
            if v is not None:
                kw[name] = v
        return cls(**kw)


_POLICIES: dict[tuple[int, ...], AccountRiskPolicy] = {}  # the policies records stated, by their values


def points_milli(policy: AccountRiskPolicy, score: float | None, decision: str, fail_safe: str | None) -> int:
    """The milli-points one decision adds to each of its accounts."""
    if fail_safe is not None:
        return 0
    if decision not in _OUTCOMES:
        raise AccountRiskError(f"decision {decision!r} is not one of {_OUTCOMES}")
    if score is None or not math.isfinite(score):
        base = policy.missing_score_milli
    else:
        q = round(min(1.0, max(0.0, score)) * SCORE_STEPS)  # scores outside 0..1 count as 0 or 1
        base = q * policy.score_milli // SCORE_STEPS
    return base + policy.outcome_milli[decision]


# --- what one decision says ------------------------------------------------------------------------

@dataclass(frozen=True)
class SideRisk:
    """One side's account (keyed), its risk before this decision (decayed to its hour) and after."""

    account: str
    before_milli: int
    after_milli: int

    def to_json(self) -> dict[str, Any]:
        return {"account": self.account, "before_milli": self.before_milli, "after_milli": self.after_milli}


@dataclass(frozen=True)
class AccountRisk:
    """The ``account_risk`` of one decision: each side after its points, their maximum, and the
    sides whose risk crossed the threshold from below with this decision (an account alert)."""

    policy: AccountRiskPolicy
    account_key_id: str
    points_milli: int
    originator: SideRisk | None
    beneficiary: SideRisk | None

    @property
    def max_milli(self) -> int:
        return max((s.after_milli for s in (self.originator, self.beneficiary) if s is not None), default=0)

    @property
    def alerts(self) -> tuple[str, ...]:
        t = self.policy.threshold_milli
        return tuple(name for name, s in zip(_SIDES, (self.originator, self.beneficiary), strict=True)
                     if s is not None and s.before_milli < t <= s.after_milli)

    @property
    def alert(self) -> bool:
        return bool(self.alerts)

    def to_jcs(self) -> bytes:
        """The canonical (RFC 8785) bytes of ``to_json()``, made without a general encoder: every
        value is an integer or a hex string (tests hold the two equal)."""
        o, b = self.originator, self.beneficiary
        alerts = b",".join(b'"' + a.encode() + b'"' for a in self.alerts)
        return (b'{"account_key_id":"' + self.account_key_id.encode() + b'","alerts":[' + alerts
                + b'],"beneficiary":' + _side_jcs(b) + b',"max_milli":' + str(self.max_milli).encode()
                + b',"originator":' + _side_jcs(o) + b',"points_milli":' + str(self.points_milli).encode()
                + b',"policy":' + self.policy.jcs + b"}")

    def to_json(self) -> dict[str, Any]:
        """The record's (and the API's) ``account_risk`` object."""
        return {"policy": self.policy.to_json(), "account_key_id": self.account_key_id,
                "points_milli": self.points_milli,
                "originator": None if self.originator is None else self.originator.to_json(),
                "beneficiary": None if self.beneficiary is None else self.beneficiary.to_json(),
                "max_milli": self.max_milli, "alerts": list(self.alerts)}

    @classmethod
    def from_json(cls, doc: object) -> AccountRisk:
        """A recorded ``account_risk``, checked for shape and self-consistency (``max_milli``,
        ``alerts``, ``after = before + points``); ``AccountRiskError`` naming what is wrong."""
        if not isinstance(doc, dict):
            raise AccountRiskError("account_risk is not an object")
        want = {"policy", "account_key_id", "points_milli", "originator", "beneficiary", "max_milli",
                "alerts"}
        if set(doc) != want:
            raise AccountRiskError(f"account_risk has fields {sorted(doc)}, not {sorted(want)}")
        policy = AccountRiskPolicy.from_json(doc["policy"])
        kid = doc["account_key_id"]
        if type(kid) is not str or not _HEX16.fullmatch(kid):
            raise AccountRiskError("account_risk.account_key_id is not 16 hex digits")
        pts = doc["points_milli"]
        if type(pts) is not int or pts < 0:
            raise AccountRiskError("account_risk.points_milli is not a non-negative integer")
        sides: list[SideRisk | None] = []
        for name in _SIDES:
            s = doc[name]
            if s is None:
                sides.append(None)
                continue
            if (not isinstance(s, dict) or set(s) != {"account", "before_milli", "after_milli"}
                    or type(s["account"]) is not str or not _HEX32.fullmatch(s["account"])
                    or any(type(s[k]) is not int or s[k] < 0 for k in ("before_milli", "after_milli"))):
                raise AccountRiskError(f"account_risk.{name} is not {{account (32 hex), before_milli, "
                                       "after_milli}} or null")
            if s["after_milli"] != s["before_milli"] + pts:
                raise AccountRiskError(f"account_risk.{name}: after_milli {s['after_milli']} is not "
                                       f"before_milli {s['before_milli']} + points_milli {pts}")
            sides.append(SideRisk(s["account"], s["before_milli"], s["after_milli"]))
        o, b = sides
        if o is not None and b is not None and o.account == b.account and o != b:
            raise AccountRiskError("account_risk: one account on both sides states two different risks")
        got = cls(policy, kid, pts, o, b)
        if doc["max_milli"] != got.max_milli or type(doc["max_milli"]) is not int:
            raise AccountRiskError(f"account_risk.max_milli is {doc['max_milli']!r}, the larger side is "
                                   f"{got.max_milli}")
        if doc["alerts"] != list(got.alerts):
            raise AccountRiskError(f"account_risk.alerts is {doc['alerts']!r}; crossing the threshold "
                                   f"{policy.threshold_milli} from the recorded values gives "
                                   f"{list(got.alerts)}")
        return got


def _side_jcs(s: SideRisk | None) -> bytes:
    if s is None:
        return b"null"
    return (b'{"account":"' + s.account.encode() + b'","after_milli":' + str(s.after_milli).encode()
            + b',"before_milli":' + str(s.before_milli).encode() + b"}")


def check_account_risk(body: Mapping[str, Any]) -> AccountRisk:
    """A decision/2 body's ``account_risk``, checked against itself and against the body (its
    points from the recorded score, decision and fail_safe); ``AccountRiskError`` if not."""
    got = AccountRisk.from_json(body.get("account_risk"))
    try:
        score = _body_score(body)
    except (TypeError, ValueError) as exc:
        raise AccountRiskError(str(exc)) from None
    fs = body.get("fail_safe")
    want = points_milli(got.policy, score, str(body.get("decision")),
                        fs if isinstance(fs, str) else None)
    if got.points_milli != want:
        raise AccountRiskError(f"account_risk.points_milli is {got.points_milli}; the recorded score, "
                               f"decision and fail_safe give {want} under the stated policy")
    return got


# --- the state -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RiskEvent:
    """What one decision brings to the state: its event hour, keyed accounts and points."""

    hour: int
    originator: str | None
    beneficiary: str | None
    points_milli: int


@dataclass
class Pending:
    """One batch assessed but not yet committed: its per-decision updates, in order."""

    epoch: int
    steps: list[tuple[int, tuple[tuple[str, int], ...]]]  # (effective hour, ((account, after), ...))
    results: list[AccountRisk]
    hour: int  # the newest effective hour of the batch
    latest: dict[str, tuple[int, int]] = field(default_factory=dict)  # account -> (milli, hour) after it


class AccountRiskState:
    """Accounts' risk, ``(milli, hour)`` per keyed account, and the newest event hour applied.

    Time never runs back for the state: a decision is assessed at the later of its own event hour
    and the newest hour applied. An account is read as its risk decayed to that hour, or as none
    if, at the start of the latest UTC day after its last change, its decayed risk was below
    ``FLOOR_MILLI``; those accounts are dropped at the first decision of each day (the sweep)."""

    def __init__(self, policy: AccountRiskPolicy | None = None, account_key_id: str | None = None) -> None:
        self.policy = policy if policy is not None else AccountRiskPolicy()
        self.account_key_id = account_key_id
        self.accounts: dict[str, tuple[int, int]] = {}
        self.hour: int | None = None  # newest effective hour applied
        self.swept_day: int | None = None
        self.applied = 0  # decisions applied
        self._pending: list[Pending] = []
        self._lock = threading.Lock()

    @classmethod
    def of(cls, policy: AccountRiskPolicy, account_key_id: str | None, hour: int | None,
           swept_day: int | None, applied: int, accounts: Mapping[str, tuple[int, int]]) -> AccountRiskState:
        """A state holding what ``committed()`` returned (a sealed snapshot's, read back)."""
        state = cls(policy, account_key_id)
        state.hour, state.swept_day, state.applied = hour, swept_day, applied
        state.accounts = dict(accounts)
        return state

    def committed(self) -> tuple[str | None, int | None, int | None, int, dict[str, tuple[int, int]]]:
        """What the committed state holds, copied: its key id, newest hour, last swept day, decisions
        applied and accounts (batches assessed and not committed are not part of it: a key id only
        once a decision is applied, as a rebuild of the log has it)."""
        with self._lock:
            kid = self.account_key_id if self.applied else None
            return kid, self.hour, self.swept_day, self.applied, dict(self.accounts)

    # reading --------------------------------------------------------------------------------------
    def _read(self, entry: tuple[int, int] | None, at: int, policy: AccountRiskPolicy) -> int:
        return _risk_at(entry, at, policy.half_life_hours)

    def risk(self, account: str, at_hour: int | None = None) -> int:
        """An account's committed risk (milli) at ``at_hour`` (default: the newest hour applied)."""
        with self._lock:
            h = self.hour if at_hour is None else at_hour
            return 0 if h is None else self._read(self.accounts.get(account), h, self.policy)

    # the live path ---------------------------------------------------------------------------------
    def assess(self, events: Sequence[RiskEvent], account_key_id: str, epoch: int = 0) -> Pending:
        """Each event's ``AccountRisk`` over the committed state and the batches of ``epoch`` still
        pending before it (in order); changes nothing until ``commit``."""
        policy = self.policy
        with self._lock:
            if self.account_key_id is None:
                self.account_key_id = account_key_id
            elif self.account_key_id != account_key_id:
                raise AccountRiskError(f"account risk is keyed under {self.account_key_id}, not "
                                       f"{account_key_id}")
            before = [p for p in self._pending if p.epoch == epoch]
            hour = self.hour
            for p in before:
                hour = p.hour if hour is None else max(hour, p.hour)
            local: dict[str, tuple[int, int]] = {}
            layers = [local, *(p.latest for p in reversed(before)), self.accounts]  # newest first

            def entry(key: str) -> tuple[int, int] | None:
                for layer in layers:
                    got = layer.get(key)
                    if got is not None:
                        return got
                return None

            steps: list[tuple[int, tuple[tuple[str, int], ...]]] = []
            results: list[AccountRisk] = []
            for ev in events:
                at = ev.hour if hour is None else max(hour, ev.hour)
                hour = at
                result, updates = _step(policy, account_key_id, ev, entry, at)
                for key, after in updates:
                    local[key] = (after, at)
                steps.append((at, updates))
                results.append(result)
            pend = Pending(epoch, steps, results, -(2**62) if hour is None else hour, local)
            self._pending.append(pend)
            return pend

    def commit(self, pending: Pending) -> None:
        """Apply a batch the ledger now holds (batches commit in the order they were assessed)."""
        with self._lock:
            try:
                self._pending.remove(pending)
            except ValueError:
                raise AccountRiskError("this batch's account risk is not pending") from None
            for at, updates in pending.steps:
                self._apply(at, updates)

    def discard(self, pending: Pending) -> None:
        """Forget a batch that was not committed (and so was refused or failed)."""
        with self._lock:
            if pending in self._pending:
                self._pending.remove(pending)

    def discard_epoch(self, epoch: int) -> None:
        """Forget every pending batch assessed on ``epoch`` (a commit before them failed)."""
        with self._lock:
            self._pending = [p for p in self._pending if p.epoch != epoch]

    # the rebuild path ------------------------------------------------------------------------------
    def apply_record(self, risk: AccountRisk, at: str, score: float | None, decision: str,
                     fail_safe: str | None) -> AccountRisk:
        """Apply one sealed decision's account risk as the live pipeline did: the points from its
        recorded score, decision and fail_safe under its recorded policy, its recorded accounts;
        returns what the state computes (equal to ``risk`` when the record and state agree)."""
        policy = risk.policy
        ev = RiskEvent(event_hour(at), None if risk.originator is None else risk.originator.account,
                       None if risk.beneficiary is None else risk.beneficiary.account,
                       points_milli(policy, score, decision, fail_safe))
        return self.apply_event(policy, risk.account_key_id, ev)

    def apply_event(self, policy: AccountRiskPolicy, account_key_id: str, ev: RiskEvent) -> AccountRisk:
        """Apply one sealed decision's event (its state delta's account-risk entry, or what its
        record gives: ``apply_record``) under the policy it was decided under; returns its
        ``AccountRisk`` as the state computes it."""
        if self.account_key_id is None:
            self.account_key_id = account_key_id
        elif account_key_id != self.account_key_id:
            raise AccountRiskError(f"a record keys accounts under {account_key_id}, the state under "
                                   f"{self.account_key_id}")
        with self._lock:
            when = ev.hour if self.hour is None else max(self.hour, ev.hour)
            result, updates = _step(policy, account_key_id, ev, self.accounts.get, when)
            self._apply(when, updates)
        return result

    def _apply(self, at: int, updates: Iterable[tuple[str, int]]) -> None:
        day = at // DAY_HOURS
        if self.swept_day is None or day > self.swept_day:
            if self.swept_day is not None:
                self._sweep(at)
            self.swept_day = day
        for key, after in updates:
            self.accounts[key] = (after, at)
        self.hour = at
        self.applied += 1

    def _sweep(self, at: int) -> None:
        """Drop every account the read at ``at`` (the first hour of a new day) counts as none."""
        day, hl = at - at % DAY_HOURS, self.policy.half_life_hours
        gone = [k for k, (milli, hour) in self.accounts.items()
                if hour < day and decay(milli, day - hour, hl) < FLOOR_MILLI]
        for k in gone:
            del self.accounts[k]

    def fingerprint(self) -> tuple[Any, ...]:
        """Everything the state holds, for comparing two states bit for bit."""
        with self._lock:
            return (self.account_key_id, self.hour, self.swept_day, self.applied,
                    tuple(sorted(self.accounts.items())))

    def __len__(self) -> int:
        return len(self.accounts)


def _risk_at(entry: tuple[int, int] | None, at: int, half_life_hours: int) -> int:
    """An account's risk at hour ``at`` from its ``(milli, hour)``: decayed, or none if it was
    below ``FLOOR_MILLI`` at the start of the latest UTC day after its hour (see the class)."""
    if entry is None:
        return 0
    milli, hour = entry
    if at <= hour:  # the same hour (the state never reads an account before its hour)
        return milli
    table = decay_table(half_life_hours)
    day = at - at % DAY_HOURS
    if day > hour:
        n, h = divmod(day - hour, half_life_hours)
        if (milli * table[h]) >> (32 + n) < FLOOR_MILLI:
            return 0
    n, h = divmod(at - hour, half_life_hours)
    return (milli * table[h]) >> (32 + n)


def _step(policy: AccountRiskPolicy, key_id: str, ev: RiskEvent,
          entry: Callable[[str], tuple[int, int] | None], at: int,
          ) -> tuple[AccountRisk, tuple[tuple[str, int], ...]]:
    """One decision at effective hour ``at``: its ``AccountRisk`` and the accounts' new values
    (``entry``: an account's ``(milli, hour)`` before it, or None)."""
    sides: list[SideRisk | None] = []
    updates: dict[str, int] = {}
    hl = policy.half_life_hours
    for key in (ev.originator, ev.beneficiary):
        if not key:
            sides.append(None)
            continue
        before = _risk_at(entry(key), at, hl)
        after = before + ev.points_milli
        sides.append(SideRisk(key, before, after))
        updates[key] = after
    o, b = sides
    if o is not None and b is not None and o.account == b.account:
        b = o  # one account on both sides: its points count once
    return AccountRisk(policy, key_id, ev.points_milli, o, b), tuple(updates.items())
