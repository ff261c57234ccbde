"""A synthetic alert and case view at a bank's scale, written straight into the view tables.

What is real and what is not: the rows have the shapes, sizes and skews of a worked queue, but
they are not folded from sealed decisions (there are none: ``ledger verify`` would not pass on
this database). Alerts (``audit_alerts``) are spread evenly over ``DAYS`` days before ``today``,
grouped into cases (``audit_cases``) of skewed sizes (log-normal: most cases a few alerts, the
largest some hundreds) plus one long-running case of ``big`` alerts; each alert's fired rules
are in ``audit_trace_rules``, as the trace index holds them. Most alerts are closed; the young
ones mostly open, and a few per cent of the old ones too (the overdue backlog). Each case has an
officer (50 of them, a Zipf share each, so one officer's queue is long), and each alert the rows
its officers' work leaves (assign, start review, escalate, release or reject, close) in
``audit_case_events`` and ``audit_payment_outcomes``.

The one long-running case is folded by the real fold (``audit.cases.fold.CaseFold``) from its
decisions and its case events, and only its events are in ``ledger_entries``: real
``case_event`` envelopes (``event_body``, RFC 8785, ``ledger.records.seal``) with their leaf
hashes, so ``case_detail`` reads and parses real bytes. Their chain hashes link those entries
only, and the decisions the events name have no entries (their leaf hashes are made up). The
newest record of the log is the last event of that case, and the view's watermark is its seq:
``catch_up`` takes its no-op path, as in a quiet production view.

Seqs: alert ``i`` (in time order) is the decision at ``STRIDE * (i + 1)``; the decisions in
between that opened no alert are not written; events take the free seqs after the newest
decision before them.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, Table, update

from audit.cases.events import EVENT_KIND, event_body
from audit.cases.fold import CaseFold
from audit.cases.policy import DEFAULT_POLICY
from audit.cases.store import alert_row, case_row, event_row, outcome_row
from audit.cases.tables import alerts, case_events, cases, payment_outcomes, watermark
from audit.decide.record import DECISION_KIND
from audit.query.index import trace_rules
from bench.queries import PRINCIPALS, RULES
from ledger import store
from ledger.jcs import canonical_bytes
from ledger.merkle import leaf_hash
from ledger.records import Record, seal

__all__ = ["BIG_CASE", "DAYS", "OFFICERS", "STRIDE", "ViewInfo", "officer", "populate"]

STRIDE = 16  # one alert per STRIDE seqs; the seqs between are free for case events
DAYS = 400
BIG_CASE = 1_000  # alerts in the one long-running case
OFFICERS = 50
CHUNK = 50_000
_DAY = 86_400.0
_OUTCOMES = (("REVIEW", 0.60), ("HOLD", 0.25), ("BLOCK", 0.05), ("ALLOW", 0.10))  # ALLOW: account alert
_ALERT_RULES = RULES[:-1]
_RATIONALES = (
    "Reviewed the counterparty history and the KYC file: activity matches the customer's stated "
    "business (payroll and supplier payments for a logistics firm).",
    "Beneficiary bank and corridor are usual for this customer; amounts in line with the last six "
    "months. No indicator of structuring or layering.",
    "Source of funds documented (sale of property, notary deed on file). Nothing further.",
    "Same beneficiary as three earlier alerts closed after enhanced due diligence; no new facts.",
    "Escalated to the MLRO: repeated round amounts just under the reporting threshold across "
    "accounts of related parties.",
)


def officer(k: int) -> dict[str, Any]:
    """Officer ``k``'s principal as sealed records state it."""
    return {"subject": f"CN=officer-{k:02d},OU=FIU,O=Example Bank",
            "sans": [f"email:officer{k:02d}@bank.example"], "issuer": "CN=Example Bank Officers CA",
            "serial": f"{0x1000 + k:x}",
            "fingerprint_sha256": hashlib.sha256(f"officer-{k}".encode()).hexdigest()}


_LEAD = {**officer(99), "subject": "CN=queue-lead,OU=FIU,O=Example Bank"}  # assigns the queue
_TEAM = [officer(k) for k in range(OFFICERS)]
_CLOSED_BY = [canonical_bytes(o).decode() for o in _TEAM]


@dataclass
class ViewInfo:
    """What was written, and what the measurements need to know about it."""

    alerts: int
    cases: int
    events: int
    today: date
    busiest: str  # the fingerprint of the officer with the most open alerts
    busiest_open: int
    big_case: int  # the case id of the long-running case
    big_alerts: int
    big_events: int
    tip: int  # the newest seq: the watermark and the last ledger entry
    load_s: float


def _sizes(rng: random.Random, n_alerts: int, n_cases: int, big: int) -> list[int]:
    """Alerts per case: ``big`` first, then ``n_cases - 1`` log-normal sizes summing to the rest."""
    k, rest = n_cases - 1, n_alerts - big
    if k < 1 or rest < k:
        raise ValueError(f"{n_alerts:,} alerts cannot make {n_cases:,} cases beside one of {big:,}")
    raw = [rng.lognormvariate(0.0, 1.2) for _ in range(k)]
    scale = (rest - k) / sum(raw)
    sizes = [min(big - 1, 1 + int(r * scale)) for r in raw]
    short = rest - sum(sizes)
    while short > 0:  # floors and the cap leave alerts over: one more to random cases below the cap
        i = rng.randrange(k)
        if sizes[i] < big - 1:
            sizes[i] += 1
            short -= 1
    return [big, *sizes]


def _p_open(age_days: float) -> float:
    """How likely an alert this old is still open: young ones mostly, old ones a backlog."""
    return 0.85 if age_days < 7 else 0.45 if age_days < 30 else 0.03


def _tid(seq: int, ms: int) -> str:
    """A UUIDv7-shaped trace id for ``seq`` at Unix ``ms``, unique by seq."""
    t = f"{ms:012x}"
    return f"{t[:8]}-{t[8:]}-7{seq % 4096:03x}-8{seq % 4096:03x}-{seq:012x}"


def _leaf(seq: int) -> str:
    """The leaf hash of the decision at ``seq``: made up, as the decision is not written."""
    return hashlib.sha256(b"decision %d" % seq).hexdigest()


class _Clock:
    """Times of the synthetic log, in seconds since ``start`` (a midnight), as sealed-record text."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self._epoch_ms = int(start.timestamp() * 1000)
        self._days = [(start + timedelta(days=d)).date().isoformat() for d in range(DAYS + 2)]
        self._due: dict[str, tuple[str, str]] = {}

    def text(self, t: float) -> str:
        d, us = divmod(int(t * 1e6), 86_400_000_000)
        s, us = divmod(us, 1_000_000)
        h, s = divmod(s, 3600)
        m, s = divmod(s, 60)
        return f"{self._days[d]}T{h:02d}:{m:02d}:{s:02d}.{us:06d}Z"

    def seconds(self, text: str) -> float:
        return (datetime.fromisoformat(text) - self.start).total_seconds()

    def ms(self, t: float) -> int:
        return self._epoch_ms + int(t * 1000)

    def due(self, opened: str) -> tuple[str, str]:
        """(review due, filing due) under the default policy, cached by day."""
        day = opened[:10]
        if day not in self._due:
            self._due[day] = (DEFAULT_POLICY.review_due(opened), DEFAULT_POLICY.filing_due(opened))
        return self._due[day]


class _Seqs:
    """Free seqs for events: after the newest alert at or before the event's time, in order."""

    def __init__(self, times: Sequence[float]) -> None:
        self._times = times
        self._used = bytearray(len(times) + 2)
        self.last = STRIDE * len(times)

    def at(self, t: float) -> int:
        j = bisect.bisect_right(self._times, t)
        while self._used[j] >= STRIDE - 1:
            j += 1
            if j >= len(self._used):
                self._used.extend(bytes(1024))
        self._used[j] += 1
        seq = STRIDE * j + self._used[j]
        self.last = max(self.last, seq)
        return seq


@dataclass
class _Case:
    case_id: int = 0
    subject: str = ""
    opened_at: str = ""
    alerts: int = 0
    open_alerts: int = 0
    assignee: int | None = None
    disposition: str | None = None
    closed_at: str = ""
    last_event_seq: int | None = None
    last_alert_seq: int = 0


_ALERT_COLS = ("seq", "trace_id", "leaf_hash", "opened_at", "outcome", "account_alert", "fired", "scorer_fp",
               "subject", "case_id", "policy_seq", "review_due", "filing_due", "ruleset", "model_sha256",
               "score_ppm", "state", "is_open", "assignee_fp", "assignee_subject", "disposition", "closed_at",
               "closed_by", "payment", "last_event_seq", "events")
_CASE_COLS = ("case_id", "subject", "opened_at", "is_open", "alerts", "open_alerts", "assignee_fp",
              "assignee_subject", "disposition", "closed_at", "links", "reports", "last_event_seq",
              "last_alert_seq")
_EVENT_COLS = ("seq", "case_id", "alert_seq", "action", "actor_fp", "recorded_at", "applied")
_OUTCOME_COLS = ("seq", "alert_seq", "trace_id", "scorer_fp", "outcome", "recorded_at")
_RULE_COLS = ("rule_id", "seq")


def _write(conn: Connection, table: Table, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """Bulk insert of ``rows`` (tuples of ``names``): COPY on PostgreSQL, executemany on SQLite.
    A column the table has and ``names`` lacks is left NULL, or given an empty value where it is
    NOT NULL; a name the table lacks is dropped (so the bench follows the view's columns)."""
    if not rows:
        return
    have = {c.name for c in table.columns}
    keep = [i for i, n in enumerate(names) if n in have]
    extra = [c for c in table.columns if c.name not in names and not c.nullable]
    blanks = tuple("" if c.type.python_type is str else 0 for c in extra)
    cols = [names[i] for i in keep] + [c.name for c in extra]
    if len(keep) < len(names):
        rows = [tuple(r[i] for i in keep) + blanks for r in rows]
    elif blanks:
        rows = [r + blanks for r in rows]
    if conn.dialect.name == "postgresql":
        copy = f"COPY {table.name} ({', '.join(cols)}) FROM STDIN"
        with store.raw_cursor(conn) as cur, cur.copy(copy) as cp:
            for r in rows:
                cp.write_row(r)
    else:
        store.insert_rows(conn, table, cols, rows)


def _write_dicts(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    names = [c.name for c in table.columns]
    _write(conn, table, names, [tuple(r.get(n) for n in names) for r in rows])


class _Plan:
    """The actions taken on one alert, in time order: (action, actor, args) at seqs and times."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, str, str, dict[str, Any], dict[str, Any]]] = []
        self._t = 0.0

    def add(self, seqs: _Seqs, clock: _Clock, t: float, action: str, actor: dict[str, Any],
            **args: Any) -> int:
        t = self._t = max(t, self._t + 1)  # an approval after its proposal, even in the same second
        seq = seqs.at(t)
        self.steps.append((seq, clock.text(t), action, actor, args))
        return seq


def _work(rng: random.Random, seqs: _Seqs, clock: _Clock, t: float, age: float, outcome: str, closed: bool,
          assigned: bool, who: int, *, keep_open: bool = False) -> tuple[_Plan, str, str | None, str | None]:
    """Plan the events of one alert opened at ``t``: its plan, final state, payment, disposition."""
    plan = _Plan()
    span = max(min(age, 20.0) * _DAY if closed else age * _DAY - 60, 10.0)  # open: worked until now
    times = iter(sorted(t + 1 + rng.random() * span for _ in range(5)))
    me, second = _TEAM[who], _TEAM[(who + 1) % OFFICERS]
    state = "new"
    if assigned:
        plan.add(seqs, clock, next(times), "assign", _LEAD, assignee=me)
        state = "assigned"
        if keep_open or rng.random() < (0.3 if closed else 0.5):
            plan.add(seqs, clock, next(times), "start_review", me)
            state = "in_review"
            if keep_open or (not closed and rng.random() < 0.1):
                plan.add(seqs, clock, next(times), "escalate", me, rationale=_RATIONALES[4])
                state = "escalated"
    payment = "HELD" if outcome in ("HOLD", "BLOCK") else None
    if payment and assigned and (closed or rng.random() < 0.3):
        when = next(times)
        if rng.random() < 0.85:
            plan.add(seqs, clock, when, "release", me, rationale=_RATIONALES[1])
            if outcome == "BLOCK":
                plan.add(seqs, clock, when + 1, "approve", second)
            payment = "RELEASED"
        else:
            plan.add(seqs, clock, when, "reject", me, rationale=_RATIONALES[4])
            payment = "REJECTED"
    disposition = None
    if closed:
        disposition = "FALSE_POSITIVE" if rng.random() < 0.85 else "NO_FURTHER_ACTION"
        plan.add(seqs, clock, next(times), "close", me, rationale=rng.choice(_RATIONALES[:4]),
                 disposition=disposition)
        state = "closed"
    return plan, state, payment, disposition


def populate(engine: Engine, n_alerts: int, n_cases: int, *, today: date = date(2026, 12, 1), seed: int = 11,
             big: int = BIG_CASE) -> ViewInfo:
    """Write the view: ``n_alerts`` alerts in ``n_cases`` cases (one of ``big`` alerts), their
    events, rules and outcomes, the long-running case's sealed events, and the watermark."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    now = DAYS * _DAY
    clock = _Clock(datetime(today.year, today.month, today.day, tzinfo=UTC) - timedelta(days=DAYS))
    sizes = _sizes(rng, n_alerts, n_cases, big)
    owner = rng.choices(range(OFFICERS), [1 / (k + 1) for k in range(OFFICERS)], k=n_cases)
    owner[0] = 0  # the long-running case is officer 0's
    when: list[tuple[float, int]] = []
    for k, size in enumerate(sizes):
        start = 5 * _DAY if k == 0 else rng.random() * now
        span = now - start - 1 if k == 0 else min(now - start - 1, size * rng.uniform(0.5, 3.0) * _DAY)
        when += [(start, k)] + [(start + rng.random() * span, k) for _ in range(size - 1)]
    when.sort()
    seqs = _Seqs([t for t, _ in when])
    book = [_Case() for _ in range(n_cases)]
    big_decisions: list[tuple[int, dict[str, Any]]] = []
    big_plans: list[_Plan] = []
    open_of = [0] * OFFICERS
    n_events = 0
    outcomes = [o for o, _ in _OUTCOMES]
    cum = list(itertools.accumulate(w for _, w in _OUTCOMES))
    with engine.begin() as conn:
        for lo in range(0, n_alerts, CHUNK):
            a_rows: list[tuple[Any, ...]] = []
            e_rows: list[tuple[Any, ...]] = []
            p_rows: list[tuple[Any, ...]] = []
            r_rows: list[tuple[Any, ...]] = []
            for i in range(lo, min(n_alerts, lo + CHUNK)):
                t, k = when[i]
                seq = STRIDE * (i + 1)
                c = book[k]
                opened = clock.text(t)
                if c.alerts == 0:
                    c.case_id, c.opened_at = seq, opened
                    c.subject = "account:" + hashlib.sha256(b"bench-acct-%d" % k).hexdigest()
                c.alerts += 1
                c.last_alert_seq = seq
                outcome = outcomes[bisect.bisect(cum, rng.random() * cum[-1])]
                fired = [] if outcome == "ALLOW" else rng.sample(_ALERT_RULES, rng.randint(1, 3))
                scorer = PRINCIPALS[seq % len(PRINCIPALS)][0]
                tid = _tid(seq, clock.ms(t))
                leaf = _leaf(seq)
                age = (now - t) / _DAY
                first_of_big = k == 0 and c.alerts == 1  # stays open: the case never closes
                closed = not first_of_big and rng.random() >= _p_open(age)
                assigned = closed or first_of_big or rng.random() < 0.6
                plan, state, payment, disposition = _work(rng, seqs, clock, t, age, outcome, closed, assigned,
                                                          owner[k], keep_open=first_of_big)
                if k == 0:  # the fold makes this case's rows from its records, below
                    score = 0.0 if outcome == "ALLOW" else round(0.5 + rng.random() / 2, 6)
                    big_decisions.append((seq, {"recorded_at": opened, "trace_id": tid, "leaf_hash": leaf,
                                                "record": {
                        "decision": outcome, "fired": [{"id": r, "reason": "synthetic"} for r in fired],
                        "principal": {"fingerprint_sha256": scorer}, "score": score,
                        "account_risk": {"originator": {"account": c.subject[8:]},
                                         "alerts": ["originator"] if outcome == "ALLOW" else []},
                        "model": {"sha256": "cd" * 32},
                        "rules": {"ruleset_id": "aml_core", "version": "2026.12.0"},
                    }}))
                    big_plans.append(plan)
                    continue
                review_due, filing_due = clock.due(opened)
                last = plan.steps[-1] if plan.steps else None
                me = _TEAM[owner[k]]
                is_open = state != "closed"
                a_rows.append((
                    seq, tid, leaf, opened, outcome, 1 if outcome == "ALLOW" else int(rng.random() < 0.1),
                    ",".join(fired), scorer, c.subject, c.case_id, 0, review_due, filing_due,
                    "aml_core@2026.12.0", "cd" * 32,
                    0 if outcome == "ALLOW" else rng.randrange(500_000, 1_000_000), state, int(is_open),
                    me["fingerprint_sha256"] if assigned else None, me["subject"] if assigned else None,
                    disposition, None if is_open or last is None else last[1],
                    None if is_open else _CLOSED_BY[owner[k]], payment, last and last[0], len(plan.steps)))
                r_rows += [(r, seq) for r in fired]
                for ev_seq, at, action, actor, _ in plan.steps:
                    e_rows.append((ev_seq, c.case_id, seq, action, actor["fingerprint_sha256"], at, 1))
                    if action in ("reject", "approve") or (action == "release" and outcome == "HOLD"):
                        p_rows.append((ev_seq, seq, tid, scorer, payment, at))
                n_events += len(plan.steps)
                if is_open:
                    c.open_alerts += 1
                    open_of[owner[k]] += assigned
                if assigned:
                    c.assignee = owner[k]
                if last is not None:
                    c.last_event_seq = max(c.last_event_seq or 0, last[0])
                    if not is_open and last[1] > c.closed_at:
                        c.closed_at, c.disposition = last[1], disposition
            _write(conn, alerts, _ALERT_COLS, a_rows)
            _write(conn, case_events, _EVENT_COLS, e_rows)
            _write(conn, payment_outcomes, _OUTCOME_COLS, p_rows)
            _write(conn, trace_rules, _RULE_COLS, r_rows)
        big_id = book[0].case_id
        fold, entries, tip = _fold_big_case(rng, seqs, clock, now, big_id, big_decisions, big_plans)
        n_events += len(fold.events)
        _write_dicts(conn, alerts, [alert_row(a) for a in fold.alerts.values()])
        _write_dicts(conn, case_events, [event_row(e) for e in fold.events])
        _write_dicts(conn, payment_outcomes, [outcome_row(o) for o in fold.outcomes])
        _write(conn, trace_rules, _RULE_COLS,
               [(r, a.seq) for a in fold.alerts.values() for r in a.fired.split(",") if r])
        _write_dicts(conn, cases, [case_row(c) for c in fold.cases.values()])
        rows = []
        for c in book[1:]:
            is_open = c.open_alerts > 0
            who = _TEAM[c.assignee] if c.assignee is not None else None
            rows.append((c.case_id, c.subject, c.opened_at, int(is_open), c.alerts, c.open_alerts,
                         who and who["fingerprint_sha256"], who and who["subject"],
                         None if is_open else c.disposition, None if is_open else c.closed_at, "", 0,
                         c.last_event_seq, c.last_alert_seq))
        _write(conn, cases, _CASE_COLS, rows)
        store.insert_rows(conn, store.entries, [c.name for c in store.entries.columns], entries)
        conn.execute(update(watermark).where(watermark.c.id == 1).values(seq=tip))
    fps = [o["fingerprint_sha256"] for o in _TEAM]
    for a in fold.alerts.values():
        if a.open and a.assignee_fp in fps:
            open_of[fps.index(a.assignee_fp)] += 1
    busiest = max(range(OFFICERS), key=open_of.__getitem__)
    if engine.dialect.name == "postgresql":  # what autovacuum does after a bulk load, done now
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    return ViewInfo(n_alerts, n_cases, n_events, today, fps[busiest], open_of[busiest], big_id,
                    fold.cases[big_id].alerts, sum(e.case_id == big_id for e in fold.events), tip,
                    time.perf_counter() - t0)


def _fold_big_case(rng: random.Random, seqs: _Seqs, clock: _Clock, now: float, case_id: int,
                   decisions: list[tuple[int, dict[str, Any]]], plans: list[_Plan]
                   ) -> tuple[CaseFold, list[tuple[Any, ...]], int]:
    """Seal the long-running case's events (a case-level assign, a comment every 50 alerts and a
    last comment at the tip of the log, beside each alert's own) and fold them with its decisions.
    Returns the fold, the ledger entry rows of the events, and the tip seq."""
    records: list[tuple[int, str, dict[str, Any]]] = [(s, DECISION_KIND, env) for s, env in decisions]
    steps: list[tuple[int, str, dict[str, Any], str, dict[str, Any], dict[str, Any]]] = []
    for (seq, env), plan in zip(decisions, plans, strict=True):
        target = {"alert": {"trace_id": env["trace_id"], "seq": seq, "leaf_hash": env["leaf_hash"]}}
        steps += [(s, at, target, action, actor, args) for s, at, action, actor, args in plan.steps]
    first_t = clock.seconds(decisions[0][1]["recorded_at"])
    steps.append((seqs.at(first_t + 30), clock.text(first_t + 30), {"case": case_id}, "assign", _LEAD,
                  {"assignee": _TEAM[0]}))
    for _, env in decisions[50::50]:
        t = clock.seconds(env["recorded_at"]) + 3_600
        steps.append((seqs.at(t), clock.text(t), {"case": case_id}, "comment", _TEAM[0],
                      {"rationale": rng.choice(_RATIONALES)}))
    tip = seqs.last + 1
    steps.append((tip, clock.text(now + 3_600), {"case": case_id}, "comment", _TEAM[0],
                  {"rationale": _RATIONALES[4]}))
    entries: list[tuple[Any, ...]] = []
    chain = b"\x00" * 32
    for seq, at, target, action, actor, args in sorted(steps, key=lambda s: s[0]):
        body = event_body(target, action, actor, **args)
        tid, envelope, _ = seal(Record.from_canonical_body(EVENT_KIND, canonical_bytes(body)), at,
                                _tid(seq, int(datetime.fromisoformat(at).timestamp() * 1000)))
        leaf = leaf_hash(envelope)
        chain = hashlib.sha256(chain + leaf).digest()
        entries.append((seq, EVENT_KIND, envelope, leaf, chain, at, tid))
        records.append((seq, EVENT_KIND, orjson.loads(envelope)))
    fold = CaseFold()
    fold.apply(sorted(records, key=lambda r: r[0]))
    refused = [e for e in fold.events if not e.applied]
    if refused or set(fold.cases) != {case_id}:
        raise RuntimeError(f"the long-running case did not fold as planned: {refused[:1]}, "
                           f"cases {sorted(fold.cases)[:3]}")
    return fold, entries, tip
