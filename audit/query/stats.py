"""What the console's overview charts show: decisions per outcome over time, the rules that fire
most, the score distribution and stage latencies, over a time window of the trace index.

Every read is bounded so the page stays fast over millions of decisions: the window is one range
scan of ``ix_audit_traces_recorded_at_seq``; a window holding more than ``cap`` decisions is
aggregated over its newest ``cap`` (``Overview.truncated``); latencies are not in the index, so
they come from the sealed records of the newest ``latency_sample`` decisions only. Times are the
index's ISO text (UTC, µs), whose prefixes are the time buckets on SQLite and PostgreSQL alike.
The clock is passed in (``now=``); the assembly of results is pure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.errors import QueryError
from audit.query.traces import parse_time, time_text
from ledger import store
from wasm_rules import OUTCOMES

__all__ = ["BUCKETS", "CAP", "DEFAULT_SPAN", "LATENCY_SAMPLE", "SCORE_BINS", "TOP_RULES", "LatencySample",
           "OutcomeBucket", "Overview", "RuleCount", "ScoreHistogram", "StageLatency", "Window",
           "bucket_keys", "latency_sample", "newest_recorded_at", "overview", "percentiles",
           "resolve_window", "window"]

DEFAULT_SPAN = timedelta(hours=24)
CAP = 500_000
LATENCY_SAMPLE = 5_000
SCORE_BINS = 20
TOP_RULES = 10
STAGES = ("queue", "features", "model", "rules")  # the order stages happen in; others follow, sorted

# (name, the longest window it is chosen for, SQL key of a recorded_at text); keys sort as times
BUCKETS: tuple[tuple[str, timedelta, str], ...] = (
    ("5min", timedelta(hours=3), "substr(recorded_at, 1, 15) || CASE WHEN substr(recorded_at, 16, 1) "
                                 "IN ('0', '1', '2', '3', '4') THEN '0' ELSE '5' END"),
    ("hour", timedelta(days=3), "substr(recorded_at, 1, 13)"),
    ("day", timedelta(days=92), "substr(recorded_at, 1, 10)"),
    ("month", timedelta(days=6 * 366), "substr(recorded_at, 1, 7)"),
    ("year", timedelta.max, "substr(recorded_at, 1, 4)"),
)
_MAX_FILLED = 400  # buckets beyond this (a window of centuries) are listed only where they hold data


@dataclass(frozen=True)
class Window:
    """[since, until) in the index's time text, and the bucket size its length calls for."""

    since: str
    until: str
    bucket: str  # a BUCKETS name
    anchor: str  # what a bound left open was taken from: "given" | "newest decision" | "clock"


@dataclass(frozen=True)
class OutcomeBucket:
    start: str  # the bucket's key: a prefix of the ISO time (with the 5-minute digit for "5min")
    counts: tuple[int, ...]  # per outcome, in OUTCOMES order

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class RuleCount:
    rule_id: str
    decisions: int  # decisions in which the rule fired


@dataclass(frozen=True)
class ScoreHistogram:
    bins: tuple[int, ...]  # SCORE_BINS counts; bin i holds [i/20, (i+1)/20), the last one 1.0 too
    unscored: int  # decisions with no score (fail-safe HOLDs: the model failed or the deadline passed)


@dataclass(frozen=True)
class StageLatency:
    stage: str  # a sealed stage, or "total" (the sum of a record's stages)
    p50: int  # µs, nearest rank
    p90: int
    p99: int
    max: int


@dataclass(frozen=True)
class LatencySample:
    decisions: int  # records read: the newest ``limit`` of the window, or all of it if fewer
    limit: int
    stages: tuple[StageLatency, ...]


@dataclass(frozen=True)
class Overview:
    window: Window
    counts: tuple[int, ...]  # per outcome over the aggregated decisions, in OUTCOMES order
    truncated: bool  # the window held more than ``cap``: only its newest ``cap`` are aggregated
    cap: int
    covered_since: str  # the oldest time aggregated (window.since unless truncated)
    buckets: tuple[OutcomeBucket, ...]
    rules: tuple[RuleCount, ...]  # top TOP_RULES, most decisions first
    rule_decisions: int  # decisions in which at least one rule fired
    scores: ScoreHistogram
    latency: LatencySample

    @property
    def total(self) -> int:
        return sum(self.counts)


_parse = datetime.fromisoformat


def resolve_window(newest: str | None, now: datetime, since: str | datetime | None = None,
                   until: str | datetime | None = None, span: timedelta = DEFAULT_SPAN) -> Window:
    """The window asked for; an open end is the newest decision (the clock if there is none),
    an open start is ``span`` before the end. Bad times raise ``QueryError`` naming the field."""
    if span <= timedelta(0):
        raise QueryError("span", "must be a positive duration")
    lo, hi = parse_time(since, "since"), parse_time(until, "until")
    if lo is not None and hi is not None and hi <= lo:
        raise QueryError("until", "must be later than since")
    anchor = "given"
    if hi is None:
        end = _parse(newest) + timedelta(microseconds=1) if newest is not None else now
        anchor = "newest decision" if newest is not None else "clock"
        if lo is not None:
            end = max(end, now)
            if _parse(lo) >= end:
                raise QueryError("since", "must be earlier than now")
            anchor = "clock"
        hi = time_text(end)
    if lo is None:
        try:
            lo = time_text(_parse(hi) - span)
        except OverflowError:
            raise QueryError("span", "reaches before year 1") from None
    length = _parse(hi) - _parse(lo)
    bucket = next(name for name, longest, _ in BUCKETS if length <= longest)
    return Window(lo, hi, bucket, anchor)


def newest_recorded_at(engine: Engine) -> str | None:
    """The newest decision's recorded_at (one index lookup), or None on an empty index."""
    with engine.connect() as conn:
        got = conn.exec_driver_sql("SELECT MAX(recorded_at) FROM audit_traces").scalar()
    return None if got is None else str(got)


def window(engine: Engine, *, now: datetime, since: str | datetime | None = None,
           until: str | datetime | None = None, span: timedelta = DEFAULT_SPAN) -> Window:
    """``resolve_window`` against this index's newest decision."""
    return resolve_window(newest_recorded_at(engine), now, since, until, span)


def _key(t: datetime, bucket: str) -> str:
    text = time_text(t)
    if bucket == "5min":
        return text[:15] + ("0" if text[15] < "5" else "5")
    return text[:{"hour": 13, "day": 10, "month": 7, "year": 4}[bucket]]


_FIXED = {"5min": timedelta(minutes=5), "hour": timedelta(hours=1), "day": timedelta(days=1)}


def _step(t: datetime, bucket: str) -> datetime:
    if bucket in _FIXED:
        return t + _FIXED[bucket]
    if bucket == "month":
        return t.replace(year=t.year + t.month // 12, month=t.month % 12 + 1)
    return t.replace(year=t.year + 1)


def _floor(t: datetime, bucket: str) -> datetime:
    if bucket == "5min":
        return t.replace(minute=t.minute - t.minute % 5, second=0, microsecond=0)
    if bucket == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if bucket == "day":
        return day
    return day.replace(day=1) if bucket == "month" else day.replace(month=1, day=1)


def bucket_keys(w: Window) -> list[str] | None:
    """Every bucket key from the window's start to its end, or None if there would be too many."""
    t, end, keys = _floor(_parse(w.since), w.bucket), _parse(w.until), []
    while t < end:
        keys.append(_key(t, w.bucket))
        if len(keys) > _MAX_FILLED:
            return None
        try:
            t = _step(t, w.bucket)
        except (OverflowError, ValueError):
            break  # year 9999
    return keys


def percentiles(values: Sequence[int]) -> tuple[int, int, int, int]:
    """(p50, p90, p99, max) by nearest rank; zeros for no values."""
    if not values:
        return 0, 0, 0, 0
    ordered = sorted(values)
    n = len(ordered)

    def rank(q: float) -> int:
        return ordered[max(0, math.ceil(q * n) - 1)]

    return rank(0.5), rank(0.9), rank(0.99), ordered[-1]


def latency_sample(records: Sequence[bytes], limit: int) -> LatencySample:
    """Percentiles per sealed stage (and of their sum per record) over decision records' bytes."""
    per: dict[str, list[int]] = {}
    totals: list[int] = []
    for rec in records:
        lat = orjson.loads(rec)["record"].get("latency_us")
        if not isinstance(lat, dict):
            continue
        stages = {k: v for k, v in lat.items() if isinstance(v, int) and not isinstance(v, bool)}
        for k, v in stages.items():
            per.setdefault(k, []).append(v)
        totals.append(sum(stages.values()))
    names = [s for s in STAGES if s in per] + sorted(set(per) - set(STAGES))
    rows = [StageLatency(name, *percentiles(per[name])) for name in names]
    if totals:
        rows.append(StageLatency("total", *percentiles(totals)))
    return LatencySample(len(records), limit, tuple(rows))


def _bin_sql(conn: Connection) -> str:
    # CAST rounds on PostgreSQL and truncates on SQLite: floor() where the dialect has it
    scaled = f"score * {SCORE_BINS}"
    whole = f"floor({scaled})" if conn.dialect.name == "postgresql" else scaled
    # NaN is unscored on both dialects: SQLite stores it as NULL; PostgreSQL sorts it above every
    # number, so it fails "score <= 1" (and would otherwise land in the top bin)
    return (f"CASE WHEN score IS NULL OR NOT (score <= 1) THEN -1 WHEN score >= 1 THEN {SCORE_BINS - 1} "
            f"WHEN score <= 0 THEN 0 ELSE CAST({whole} AS INTEGER) END")


def _assemble(w: Window, grouped: Sequence[tuple[Any, ...]], fired: Sequence[tuple[Any, ...]],
              ) -> tuple[tuple[int, ...], list[OutcomeBucket], list[RuleCount], int, ScoreHistogram]:
    """Rows of (bucket, decision, score bin, count) and (fired ids, count) into the results."""
    where = {o: i for i, o in enumerate(OUTCOMES)}
    per: dict[str, list[int]] = {k: [0] * len(OUTCOMES) for k in bucket_keys(w) or ()}
    bins, unscored = [0] * SCORE_BINS, 0
    for key, decision, b, n in grouped:
        n = int(n)
        per.setdefault(str(key), [0] * len(OUTCOMES))[where[decision]] += n
        if int(b) < 0:
            unscored += n
        else:
            bins[int(b)] += n
    buckets = [OutcomeBucket(k, tuple(v)) for k, v in sorted(per.items())]
    counts = tuple(sum(b.counts[i] for b in buckets) for i in range(len(OUTCOMES)))
    rules: Counter[str] = Counter()
    for ids, n in fired:
        for rule in str(ids).split(","):
            rules[rule] += int(n)
    top = sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_RULES]
    return (counts, buckets, [RuleCount(r, n) for r, n in top], sum(int(n) for _, n in fired),
            ScoreHistogram(tuple(bins), unscored))


def overview(engine: Engine, w: Window, *, cap: int = CAP, latency_limit: int = LATENCY_SAMPLE) -> Overview:
    """The overview of window ``w``: a probe for the cap, two grouped scans of the window's range,
    and the newest ``latency_limit`` records."""
    if cap < 1 or latency_limit < 1:
        raise QueryError("cap", "cap and latency_limit must be positive")
    key_sql = next(sql for name, _, sql in BUCKETS if name == w.bucket)
    with engine.connect() as conn:
        p = store.param(conn)
        in_window = f"recorded_at >= {p} AND recorded_at < {p}"
        args: tuple[Any, ...] = (w.since, w.until)
        edge = conn.exec_driver_sql(
            f"SELECT recorded_at, seq FROM audit_traces WHERE {in_window} "
            f"ORDER BY recorded_at DESC, seq DESC LIMIT 1 OFFSET {int(cap)}", args).first()
        covered = w.since
        if edge is not None:  # the (cap+1)-th newest: aggregate what is newer than it
            covered = str(edge[0])
            in_window += f" AND NOT (recorded_at = {p} AND seq <= {p})"
            args = (covered, w.until, covered, int(edge[1]))
        grouped = conn.exec_driver_sql(
            f"SELECT {key_sql}, decision, {_bin_sql(conn)}, COUNT(*) FROM audit_traces "
            f"WHERE {in_window} GROUP BY 1, 2, 3", args).all()
        fired = conn.exec_driver_sql(
            f"SELECT fired, COUNT(*) FROM audit_traces WHERE {in_window} AND fired <> '' GROUP BY fired",
            args).all()
        records = [bytes(r) for (r,) in conn.exec_driver_sql(
            f"SELECT e.record FROM audit_traces t JOIN ledger_entries e ON e.seq = t.seq "
            f"WHERE t.recorded_at >= {p} AND t.recorded_at < {p} "
            f"ORDER BY t.recorded_at DESC, t.seq DESC LIMIT {int(latency_limit)}", (w.since, w.until))]
    counts, buckets, rules, with_rules, scores = _assemble(replace(w, since=covered), grouped, fired)
    return Overview(w, counts, edge is not None, cap, covered, tuple(buckets), tuple(rules), with_rules,
                    scores, latency_sample(records, latency_limit))
