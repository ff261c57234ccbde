"""Held-payment outcomes pushed to each payment system: at least once, in ledger order.

``sealtrail webhooks deliver`` runs :func:`deliver_round` again and again. For each configured
endpoint (``audit.cases.webhooks.Endpoint``) it sends the outcomes of the endpoint's scorers
sealed after each scorer's cursor, oldest first, one message at a time, and moves that cursor
past an outcome only once the receiver answered 2xx. Each scorer of an endpoint has its own
cursor: a scorer added to the endpoint later (a rotated scoring certificate) starts where the
endpoint started (its ``after``) and gets its earlier outcomes too, oldest first, before any
newer one; a scorer taken off and put back resumes where it stopped. So:

- **at least once**: the cursor moves after the answer, in its own transaction; a deliverer
  that dies between the two sends that outcome again, with the same ``webhook-id``;
- **in ledger order**: outcome N+1 is not sent before every earlier outcome pending for the
  endpoint was acknowledged. A failure stops the
  endpoint until its next attempt (``webhooks.retry_delay``: the Standard Webhooks schedule,
  or the receiver's ``Retry-After``); nothing is skipped and nothing is ever dropped;
- **nothing missed**: outcomes are read up to the alert view's watermark only, read before
  them; every outcome at or below it was committed with it, so the cursor never passes one
  that is still being written;
- **one deliverer per endpoint**: an endpoint's row is leased (``holder``, ``lease_until_us``)
  by the deliverer that works it and every write checks the lease, so a second deliverer, or
  one that was stopped past its lease, neither sends in parallel nor moves the cursor. (One
  stopped while a message was in flight may still send that message late, once; the receiver
  knows it by its id.) Lease times are the database's clock (``database_clock_us``), the one
  clock every deliverer of a log shares, so a host whose own clock runs ahead cannot take a live
  lease over; retry times are the deliverer's.

``410 Gone`` disables the endpoint (the specification's meaning: the receiver wants no more);
``sealtrail webhooks enable NAME`` resumes it where it stopped. Redirects are not followed (a
3xx is a failure). The delivery state is ``audit_outcome_deliveries`` (revision 0010): the
operator's, not evidence; the outcomes themselves are sealed ``case_event`` records and their
view is checked by ``ledger verify``. The scorers' cursors are
``audit_outcome_delivery_scorers`` (revision 0011); an endpoint row of revision 0010, which has
none, gives each scorer the endpoints file names then the endpoint's cursor.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    func,
    literal,
    select,
    tuple_,
)
from sqlalchemy import update as sql_update
from sqlalchemy.exc import IntegrityError

from audit.cases.query import outcome_item
from audit.cases.store import catch_up
from audit.cases.tables import payment_outcomes, watermark
from audit.cases.webhooks import Endpoint, body_of, headers_of, message_id, retry_delay

__all__ = ["Answer", "DeliveryReport", "LeaseClock", "Post", "ScorerCursor", "database_clock_us",
           "deliver_round", "deliveries", "enable", "pending_of", "release", "scorer_cursors", "status"]

LeaseClock = Callable[[Connection], int]
"""The time leases are taken and checked by, µs since the epoch, read in the lease's transaction."""


def database_clock_us(conn: Connection) -> int:
    """The database's time, µs since the epoch: PostgreSQL's server clock, which every deliverer
    of a log shares whatever its host's clock says; SQLite's is the one host's its file is on."""
    if conn.dialect.name == "postgresql":
        q = "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
    else:
        q = "SELECT CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
    return int(conn.exec_driver_sql(q).scalar_one())

deliveries = Table(
    "audit_outcome_deliveries",
    MetaData(),
    Column("endpoint", String(64), primary_key=True),
    Column("url", Text, nullable=False, comment="as configured when last worked"),
    Column("cursor", BigInteger, nullable=False, comment="seq of the last outcome the receiver acknowledged"),
    Column("delivered", BigInteger, nullable=False, comment="outcomes acknowledged, all time"),
    Column("failures", Integer, nullable=False, comment="failed attempts in a row at the next outcome"),
    Column("next_attempt_us", BigInteger, nullable=False),
    Column("last_attempt_us", BigInteger, nullable=True),
    Column("last_status", Integer, nullable=True, comment="HTTP status; null: no answer"),
    Column("last_error", Text, nullable=True),
    Column("disabled", Text, nullable=True, comment="null: active; else why it stopped"),
    Column("holder", String(128), nullable=True, comment="the deliverer holding the lease"),
    Column("lease_until_us", BigInteger, nullable=False),
    Column("start", BigInteger, nullable=True,
           comment="seq the endpoint started after; null: made before 0011"),
)
scorer_cursors = Table(
    "audit_outcome_delivery_scorers",
    MetaData(),
    Column("endpoint", String(64), primary_key=True),
    Column("scorer_fp", String(64), primary_key=True),
    Column("cursor", BigInteger, nullable=False,
           comment="seq of this scorer's last outcome the endpoint's receiver acknowledged"),
)
_D = deliveries
_S = scorer_cursors
_O = payment_outcomes
Cursors = dict[str, int]  # scorer fingerprint -> seq of its last outcome acknowledged
_ERROR_CHARS = 300  # of a receiver's error text kept in the status


@dataclass(frozen=True)
class Answer:
    """What one POST got: the HTTP status (None: no answer at all, ``error`` says why), the
    ``Retry-After`` header if any, and a short error text for a failure."""

    status: int | None
    retry_after: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status <= 299


Post = Callable[[Endpoint, bytes, Mapping[str, str]], Answer]


@dataclass(frozen=True)
class ScorerCursor:
    """Where one of an endpoint's scorers stands: the seq of its latest outcome acknowledged (or, before
    any, where it starts) and its outcomes pending."""

    scorer: str  # the scorer's fingerprint
    cursor: int
    pending: int

    def to_json(self) -> dict[str, Any]:
        return {"scorer": self.scorer, "cursor": self.cursor, "pending": self.pending}


@dataclass(frozen=True)
class DeliveryReport:
    """One endpoint after a round (or as ``status`` reads it).

    ``state``: ``caught_up`` (nothing pending), ``behind`` (the round's message budget ran out),
    ``retrying`` (the last attempt failed; the next is at ``next_attempt``), ``disabled``,
    ``held_elsewhere`` (another deliverer holds the lease) or ``idle`` (status only: pending
    outcomes wait for the next round)."""

    endpoint: str
    url: str
    state: str
    cursor: int
    pending: int
    delivered_now: int
    delivered: int
    failures: int
    next_attempt: str | None
    last_status: int | None
    last_error: str | None
    disabled: str | None
    holder: str | None
    scorers: tuple[ScorerCursor, ...] = ()  # each scorer's cursor and outcomes pending

    def to_json(self) -> dict[str, Any]:
        doc = {k: getattr(self, k) for k in self.__dataclass_fields__}
        doc["scorers"] = [s.to_json() for s in self.scorers]
        return doc


def _us(t: float) -> int:
    return int(t * 1_000_000)


def _iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _start(ep: Endpoint, mark: int) -> int:
    """Where a new endpoint's cursor starts: ``after``, but never past the view's watermark (an
    ``after`` beyond every outcome sealed yet would skip outcomes not sealed when it was written)."""
    return min(ep.after, mark)


def _hold_s(ep: Endpoint, lease_s: float) -> float:
    """How long a lease is taken for: ``lease_s``, but at least the longest a message to ``ep`` may
    take (connect, send and answer each up to its timeout) and a margin, so a slow receiver
    answering within its timeout does not let a second deliverer send beside the first."""
    return max(lease_s, 3 * ep.timeout_s + 10)


def _clean(text: str | None) -> str | None:
    """A receiver's error text as it is kept and shown: printable, one line, short."""
    t = "".join(c if c.isprintable() else " " for c in (text or "")[:_ERROR_CHARS]).strip()
    return t or None


def _ensure(engine: Engine, ep: Endpoint, now_us: int, mark: int) -> None:
    with engine.connect() as conn:
        if conn.execute(select(_D.c.endpoint).where(_D.c.endpoint == ep.name)).first() is not None:
            return
    try:
        with engine.begin() as conn:
            start = _start(ep, mark)
            conn.execute(_D.insert().values(endpoint=ep.name, url=ep.url, cursor=start, start=start,
                                            delivered=0, failures=0, next_attempt_us=now_us,
                                            lease_until_us=0))
    except IntegrityError:  # another deliverer made it meanwhile
        pass


def _claim(engine: Engine, name: str, holder: str, lease_us: int, lease_clock: LeaseClock) -> bool:
    with engine.begin() as conn:
        now_us = lease_clock(conn)
        got = conn.execute(sql_update(_D).where(
            _D.c.endpoint == name,
            (_D.c.holder.is_(None)) | (_D.c.holder == holder) | (_D.c.lease_until_us < now_us),
        ).values(holder=holder, lease_until_us=now_us + lease_us))
        return got.rowcount == 1


def _row(engine: Engine, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(_D).where(_D.c.endpoint == name)).one()


def _mark(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(watermark.c.seq).where(watermark.c.id == 1)).scalar() or 0)


def _cursors(engine: Engine, ep: Endpoint, row: Any, mark: int, *, make: bool) -> Cursors:
    """Each of ``ep``'s scorers' cursor. A scorer without one starts where the endpoint started, so
    a scorer added later gets its earlier outcomes too. An endpoint row of a release before
    revision 0011 holds no start and no scorer cursor: its scorers then take its cursor (which
    covers the scorers named then), and one added after that starts at ``after`` as the file says
    it now (``_start``). With ``make`` (the deliverer holds the lease) the new cursors are written."""
    with engine.connect() as conn:
        held = {r.scorer_fp: int(r.cursor) for r in conn.execute(
            select(_S.c.scorer_fp, _S.c.cursor).where(_S.c.endpoint == ep.name))}
    start = int(row.start) if row.start is not None else _start(ep, mark) if held else int(row.cursor)
    new = {fp: start for fp in ep.scorers if fp not in held}
    if new and make:
        try:
            with engine.begin() as conn:
                conn.execute(_S.insert(), [{"endpoint": ep.name, "scorer_fp": fp, "cursor": c}
                                           for fp, c in new.items()])
        except IntegrityError:  # another deliverer wrote them meanwhile (it held the lease since)
            return _cursors(engine, ep, row, mark, make=False)
    return {fp: held[fp] if fp in held else new[fp] for fp in ep.scorers}


def pending_of(fp: str, cursor: int, mark: int) -> Any:
    """One scorer's outcomes pending: after its cursor, up to ``mark``. Each scorer is read on its
    own, as a range of ``(scorer_fp, seq)`` row values: only the ``(scorer_fp, seq)`` index serves
    it, so the database reads the rows pending and no others. (``scorer_fp = x AND seq > c`` lets
    PostgreSQL walk the primary key instead, filtering every outcome of every scorer after ``c``,
    where its estimate of a retired scorer's rows is off; one condition over all of an endpoint's
    scorers does so from the oldest cursor on, every round.)"""
    key = tuple_(_O.c.scorer_fp, _O.c.seq)
    return and_(key > tuple_(literal(fp), literal(cursor)), key <= tuple_(literal(fp), literal(mark)))


def _pending(engine: Engine, cursors: Cursors, mark: int) -> dict[str, int]:
    """Each scorer's outcomes pending, by fingerprint."""
    with engine.connect() as conn:
        return {fp: int(conn.execute(select(func.count()).select_from(_O).where(pending_of(fp, c, mark)))
                        .scalar() or 0) for fp, c in sorted(cursors.items())}


def _next(engine: Engine, cursors: Cursors, mark: int, limit: int) -> list[tuple[str, dict[str, Any]]]:
    """The next ``limit`` pending outcomes in seq order, each with its scorer: each scorer's first
    ``limit``, merged."""
    with engine.connect() as conn:
        rows = [r for fp, c in sorted(cursors.items())
                for r in conn.execute(select(_O).where(pending_of(fp, c, mark))
                                      .order_by(_O.c.scorer_fp, _O.c.seq).limit(limit))]
    rows.sort(key=lambda r: int(r.seq))
    return [(r.scorer_fp, outcome_item(r)) for r in rows[:limit]]


def _write(engine: Engine, name: str, holder: str, values: dict[str, Any], lease_us: int,
           lease_clock: LeaseClock, scorer: tuple[str, int] | None = None) -> bool:
    """Update the endpoint's row, and renew the lease, if this deliverer still holds it; with
    ``scorer`` (fingerprint, seq), move that scorer's cursor in the same transaction."""
    with engine.begin() as conn:
        values = {**values, "lease_until_us": lease_clock(conn) + lease_us}
        if conn.execute(sql_update(_D).where(_D.c.endpoint == name, _D.c.holder == holder)
                        .values(**values)).rowcount != 1:
            return False
        if scorer is not None and conn.execute(sql_update(_S).where(
                _S.c.endpoint == name, _S.c.scorer_fp == scorer[0]).values(cursor=scorer[1])).rowcount != 1:
            conn.execute(_S.insert().values(endpoint=name, scorer_fp=scorer[0], cursor=scorer[1]))
        return True


def _retry_after_s(value: str | None, now: float) -> int | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP-date (RFC 9110 10.2.3);
    None when absent or unreadable."""
    if value is None:
        return None
    v = value.strip()
    if v.isascii() and v.isdigit():
        return int(v[:9])
    try:
        when = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, int(when.timestamp() - now))


def _report(ep: Endpoint, row: Any, state: str, cursors: Cursors, pending: dict[str, int],
            now_n: int) -> DeliveryReport:
    return DeliveryReport(
        endpoint=ep.name, url=ep.url, state=state, cursor=int(row.cursor), pending=sum(pending.values()),
        delivered_now=now_n, delivered=int(row.delivered), failures=int(row.failures),
        next_attempt=_iso(int(row.next_attempt_us)) if row.failures else None,
        last_status=row.last_status, last_error=row.last_error, disabled=row.disabled, holder=row.holder,
        scorers=_scorers(cursors, pending))


def _scorers(cursors: Cursors, pending: dict[str, int]) -> tuple[ScorerCursor, ...]:
    return tuple(ScorerCursor(fp, cursors[fp], pending[fp]) for fp in sorted(cursors))


def deliver_round(engine: Engine, endpoints: Sequence[Endpoint], post: Post, *, holder: str,
                  clock: Callable[[], float] = time.time, rng: random.Random | None = None,
                  budget: int = 1000, lease_s: float = 60.0,
                  stop: Callable[[], bool] = lambda: False,
                  lease_clock: LeaseClock = database_clock_us) -> list[DeliveryReport]:
    """One round over every endpoint: bring the alert view current, then send each endpoint's
    pending outcomes in seq order until it is caught up, an attempt fails, or ``budget``
    messages went to it. ``holder`` names this deliverer (host, process). ``stop`` is asked
    before each message: once it says so, the round ends after the message in flight (an
    endpoint left with outcomes pending reports ``behind``). ``clock`` times the messages and
    the retries, ``lease_clock`` the leases (the database's by default). Returns a report per
    endpoint reached, in the order given."""
    if budget < 1:
        raise ValueError("budget must be 1 or more")
    jitter = rng or random.Random()
    catch_up(engine)
    mark = _mark(engine)
    reports = []
    for ep in endpoints:
        if stop():
            break
        now = clock()
        _ensure(engine, ep, _us(now), mark)
        if not _claim(engine, ep.name, holder, _us(_hold_s(ep, lease_s)), lease_clock):
            row = _row(engine, ep.name)
            cursors = _cursors(engine, ep, row, mark, make=False)
            reports.append(_report(ep, row, "held_elsewhere", cursors, _pending(engine, cursors, mark), 0))
            continue
        reports.append(_work(engine, ep, post, holder, mark, clock, jitter, budget, lease_s, stop,
                             lease_clock))
    return reports


def _work(engine: Engine, ep: Endpoint, post: Post, holder: str, mark: int, clock: Callable[[], float],
          jitter: random.Random, budget: int, lease_s: float, stop: Callable[[], bool],
          lease_clock: LeaseClock) -> DeliveryReport:
    lease_us = _us(_hold_s(ep, lease_s))
    row = _row(engine, ep.name)
    cursors = _cursors(engine, ep, row, mark, make=True)
    top, sent = int(row.cursor), 0  # the endpoint's cursor: the latest outcome acknowledged
    if row.disabled is not None:
        return _report(ep, row, "disabled", cursors, _pending(engine, cursors, mark), 0)
    if row.failures and _us(clock()) < int(row.next_attempt_us):
        return _report(ep, row, "retrying", cursors, _pending(engine, cursors, mark), 0)
    while sent < budget and not stop():
        batch = _next(engine, cursors, mark, min(100, budget - sent))
        if not batch:
            break
        for fp, item in batch:
            if stop():
                break
            now = clock()
            msg_id = message_id(item["seq"])
            body = body_of(item)
            answer = post(ep, body, headers_of(ep.secrets, msg_id, int(now), body))
            done = clock()
            if answer.ok:
                top = max(top, item["seq"])
                kept = _write(engine, ep.name, holder, {
                    "cursor": top, "delivered": _D.c.delivered + 1, "failures": 0,
                    "next_attempt_us": _us(done), "last_attempt_us": _us(now), "last_status": answer.status,
                    "last_error": None, "url": ep.url}, lease_us, lease_clock, (fp, item["seq"]))
                if not kept:  # the lease passed on while this message was in flight
                    row = _row(engine, ep.name)
                    cursors = _cursors(engine, ep, row, mark, make=False)
                    return _report(ep, row, "held_elsewhere", cursors, _pending(engine, cursors, mark), sent)
                cursors[fp], sent = item["seq"], sent + 1
                continue
            failures = int(row.failures) + 1 if sent == 0 else 1
            delay = retry_delay(failures, jitter.uniform(-0.1, 0.1), _retry_after_s(answer.retry_after, done))
            error = _clean(answer.error)
            values: dict[str, Any] = {
                "failures": failures, "next_attempt_us": _us(done) + delay * 1_000_000,
                "last_attempt_us": _us(now), "last_status": answer.status, "last_error": error,
                "url": ep.url}
            if answer.status == 410:
                values["disabled"] = (f"410 Gone at outcome {item['seq']} ({_iso(_us(done))}): the receiver "
                                      "asked for no more; 'sealtrail webhooks enable' resumes")
            kept = _write(engine, ep.name, holder, values, lease_us, lease_clock)
            row = _row(engine, ep.name)
            state = "held_elsewhere" if not kept else "disabled" if answer.status == 410 else "retrying"
            if not kept:
                cursors = _cursors(engine, ep, row, mark, make=False)
            return _report(ep, row, state, cursors, _pending(engine, cursors, mark), sent)
    row = _row(engine, ep.name)
    pending = _pending(engine, cursors, mark)
    state = "caught_up" if not any(pending.values()) else "behind"
    return _report(ep, row, state, cursors, pending, sent)


def status(engine: Engine, endpoints: Sequence[Endpoint]) -> list[DeliveryReport]:
    """Each endpoint's delivery state, read only (the view is not brought current: ``pending``
    counts what the last catch-up folded)."""
    mark = _mark(engine)
    out = []
    with engine.connect() as conn:
        rows = {r.endpoint: r for r in conn.execute(select(_D))}
    for ep in endpoints:
        row = rows.get(ep.name)
        if row is None:
            start = _start(ep, mark)
            cursors = dict.fromkeys(ep.scorers, start)
            pending = _pending(engine, cursors, mark)
            state = "idle" if any(pending.values()) else "caught_up"
            out.append(DeliveryReport(ep.name, ep.url, state, start, sum(pending.values()),
                                      0, 0, 0, None, None, None, None, None,
                                      _scorers(cursors, pending)))
            continue
        cursors = _cursors(engine, ep, row, mark, make=False)
        pending = _pending(engine, cursors, mark)
        state = ("disabled" if row.disabled is not None else "retrying" if row.failures else
                 "idle" if any(pending.values()) else "caught_up")
        out.append(_report(ep, row, state, cursors, pending, 0))
    return out


def release(engine: Engine, holder: str) -> int:
    """Give up every lease ``holder`` holds (a deliverer stopping, or a ``--once`` round done), so
    the next deliverer starts at once instead of waiting out the lease; the endpoints released."""
    with engine.begin() as conn:
        return conn.execute(sql_update(_D).where(_D.c.holder == holder).values(
            holder=None, lease_until_us=0)).rowcount


def enable(engine: Engine, name: str, clock: Callable[[], float] = time.time) -> bool:
    """Resume a disabled (or backing-off) endpoint at once, from where it stopped; False if the
    endpoint has never been worked."""
    with engine.begin() as conn:
        return conn.execute(sql_update(_D).where(_D.c.endpoint == name).values(
            disabled=None, failures=0, next_attempt_us=_us(clock()))).rowcount == 1
