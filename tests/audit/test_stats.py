"""Overview aggregates: each equals a brute-force count over the same sealed decisions, on both
dialects; a window over the cap aggregates exactly its newest decisions; bad windows name the field."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event

import migrations
from audit.decide.fixed_point import body_score
from audit.errors import QueryError
from audit.query.stats import (
    SCORE_BINS,
    TOP_RULES,
    Window,
    bucket_keys,
    newest_recorded_at,
    overview,
    percentiles,
    resolve_window,
    window,
)
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from tests.audit.test_pipeline import BrokenModel
from tests.audit.test_trace_index import decision_entries, indexed_pipeline, mixed_submissions
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import OUTCOMES, Sandbox

T0 = datetime(2026, 12, 1, 9, 58, 30, tzinfo=UTC)
# commit times: minutes after T0, so that 5-minute, hour and day buckets each split them
OFFSETS = (0, 1, 3, 7, 12, 55, 61, 64, 130, 24 * 60 + 5, 26 * 60, 3 * 24 * 60)


@dataclass(frozen=True)
class Rec:
    seq: int
    recorded_at: str
    body: dict[str, Any]


def at(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> tuple[Engine, list[Rec]]:
    # the genesis stamped before the commits: recorded_at never goes back along the log, so commits
    # dated before a genesis stamped by the real clock would all be stamped at the genesis's time
    engine = db.engine()
    migrations.upgrade(engine)
    ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600),
                           clock=lambda: T0 - timedelta(days=1))
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    good = pipe.scorer
    subs = mixed_submissions(12 * 25, seed=3)
    for i, minutes in enumerate(OFFSETS):
        ledger.clock = lambda m=minutes: T0 + timedelta(minutes=m)
        pipe.scorer = BrokenModel() if i == 4 else good  # one commit of fail-safe HOLDs, no score
        pipe.decide(subs[i * 25:(i + 1) * 25])
    recs = [Rec(seq, env["recorded_at"], env["record"]) for seq, env, _ in decision_entries(ledger.engine)]
    assert len(recs) == 300 and any(body_score(r.body) is None for r in recs)
    assert sorted({r.recorded_at for r in recs}) == [at(m) for m in OFFSETS]  # each commit at its time
    return ledger.engine, recs


def _bucket(recorded_at: str, bucket: str) -> str:
    t = datetime.fromisoformat(recorded_at)
    if bucket == "5min":
        return t.replace(minute=t.minute // 5 * 5).strftime("%Y-%m-%dT%H:%M")
    return t.strftime({"hour": "%Y-%m-%dT%H", "day": "%Y-%m-%d", "month": "%Y-%m"}[bucket])


def _check(engine: Engine, w: Window, recs: list[Rec], cap: int = 500_000, sample: int = 5000) -> None:
    """overview(w) against counts made here from the records themselves."""
    inside = sorted((r for r in recs if w.since <= r.recorded_at < w.until),
                    key=lambda r: (r.recorded_at, r.seq), reverse=True)
    got = overview(engine, w, cap=cap, latency_limit=sample)
    kept = inside[:cap]
    assert got.truncated == (len(inside) > cap)
    assert got.total == len(kept)
    assert dict(zip(OUTCOMES, got.counts, strict=True)) == {o: sum(r.body["decision"] == o for r in kept)
                                                             for o in OUTCOMES}
    want_buckets = Counter((_bucket(r.recorded_at, w.bucket), r.body["decision"]) for r in kept)
    got_buckets = Counter({(b.start, o): n for b in got.buckets
                           for o, n in zip(OUTCOMES, b.counts, strict=True) if n})
    assert got_buckets == want_buckets
    assert [b.start for b in got.buckets] == sorted(b.start for b in got.buckets)
    fired = Counter(rule for r in kept for rule in {h["id"] for h in r.body["fired"]})
    assert [(c.rule_id, c.decisions) for c in got.rules] == sorted(fired.items(),
                                                                   key=lambda kv: (-kv[1], kv[0]))[:TOP_RULES]
    assert got.rule_decisions == sum(bool(r.body["fired"]) for r in kept)
    scored = [s for r in kept if (s := body_score(r.body)) is not None]
    bins = Counter(min(int(s * SCORE_BINS), SCORE_BINS - 1) for s in scored)
    assert got.scores.bins == tuple(bins.get(i, 0) for i in range(SCORE_BINS))
    assert got.scores.unscored == len(kept) - len(scored)
    newest = inside[:sample]  # latency is read from the window's newest records, truncated or not
    assert got.latency.decisions == len(newest)
    by_stage = {s.stage: s for s in got.latency.stages}
    if newest:
        assert set(by_stage) == {*newest[0].body["latency_us"], "total"}
        for stage in by_stage:
            values = [sum(r.body["latency_us"].values()) if stage == "total" else r.body["latency_us"][stage]
                      for r in newest]
            ranks = [int(np.percentile(values, q, method="inverted_cdf")) for q in (50, 90, 99)]
            want = [*ranks, max(values)]
            s = by_stage[stage]
            assert [s.p50, s.p90, s.p99, s.max] == want, stage
    else:
        assert by_stage == {}


@pytest.mark.parametrize(("lo", "hi", "bucket"), [
    (-1, 60, "5min"), (0, 180, "5min"), (-30, 24 * 60, "hour"), (0, 5 * 24 * 60, "day"),
    (-400 * 24 * 60, 5 * 24 * 60, "month"), (2, 3, "5min"), (10_000, 10_060, "5min")])
def test_each_aggregate_matches_a_count_of_the_records(world: tuple[Engine, list[Rec]], lo: float, hi: float,
                                                       bucket: str) -> None:
    engine, recs = world
    w = resolve_window(None, T0, at(lo), at(hi))
    assert w.bucket == bucket
    _check(engine, w, recs)


@pytest.mark.parametrize("cap", [1, 25, 40, 299, 300])
def test_a_window_over_the_cap_aggregates_exactly_its_newest_decisions(world: tuple[Engine, list[Rec]],
                                                                      cap: int) -> None:
    engine, recs = world
    w = resolve_window(None, T0, at(-1), at(5 * 24 * 60))
    _check(engine, w, recs, cap=cap, sample=30)  # 25 decisions share each recorded_at: ties by seq
    got = overview(engine, w, cap=cap)
    assert got.truncated == (cap < 300)
    assert got.covered_since == (w.since if cap >= 300 else sorted(r.recorded_at for r in recs)[-cap - 1])


def test_the_default_window_ends_at_the_newest_decision(world: tuple[Engine, list[Rec]]) -> None:
    engine, recs = world
    newest = max(r.recorded_at for r in recs)
    assert newest_recorded_at(engine) == newest
    w = window(engine, now=T0 + timedelta(days=40))  # the clock is far ahead: the data is old
    assert w.anchor == "newest decision" and w.bucket == "hour"
    end = datetime.fromisoformat(newest) + timedelta(microseconds=1)
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    assert (w.since, w.until) == ((end - timedelta(days=1)).strftime(fmt), end.strftime(fmt))
    got = overview(engine, w)
    assert got.total == sum(w.since <= r.recorded_at for r in recs) == 25
    assert len(got.buckets) == 25  # the empty hours are there, so the time axis has no gaps
    assert sum(b.total for b in got.buckets) == 25


def test_an_empty_index_gives_zeros_and_a_window_at_the_clock(db: Db, signer: NoteSigner) -> None:
    engine = make_ledger(db, signer).engine
    w = window(engine, now=T0, span=timedelta(hours=1))
    assert (w.since, w.until, w.anchor, w.bucket) == (at(-60), at(0), "clock", "5min")
    got = overview(engine, w)
    assert got.total == 0 and not got.truncated and got.rules == () and got.latency.stages == ()
    assert got.scores.bins == (0,) * SCORE_BINS and got.scores.unscored == 0
    assert [b.total for b in got.buckets] == [0] * 13  # 08:55 .. 09:55, both partial


def test_overview_reads_the_window_through_the_recorded_at_index(sqlite_db: Db, signer: NoteSigner) -> None:
    engine = make_ledger(sqlite_db, signer).engine
    plans: list[str] = []

    def explain(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if "audit_traces" in statement and not statement.startswith("EXPLAIN"):
            rows = cursor.connection.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
            plans.append("\n".join(r[-1] for r in rows))

    event.listen(engine, "before_cursor_execute", explain)
    overview(engine, resolve_window(None, T0), cap=10)
    assert len(plans) == 4
    for plan in plans:
        first = plan.splitlines()[0]
        assert "ix_audit_traces_recorded_at_seq" in first and first.startswith("SEARCH"), plan


def test_resolve_window_fills_open_ends_from_the_newest_decision_or_the_clock() -> None:
    newest = at(30)
    w = resolve_window(newest, T0, span=timedelta(hours=1))
    assert (w.since, w.until, w.anchor) == ("2026-12-01T09:28:30.000001Z", "2026-12-01T10:28:30.000001Z",
                                            "newest decision")
    w = resolve_window(newest, T0, since=at(-10))  # a start alone runs to the clock (or the newest)
    assert (w.since, w.until, w.anchor) == (at(-10), "2026-12-01T10:28:30.000001Z", "clock")
    w = resolve_window(newest, T0, until="2026-12-01T12:00:00+02:00", span=timedelta(days=7))
    assert (w.since, w.until, w.bucket, w.anchor) == (
        "2026-11-24T10:00:00.000000Z", "2026-12-01T10:00:00.000000Z", "day", "given")
    spans = (1, 3, 4, 92, 93, 2000, 3000)
    assert [resolve_window(None, T0, span=timedelta(days=d)).bucket for d in spans] == [
        "hour", "hour", "day", "day", "month", "month", "year"]


@pytest.mark.parametrize(("given", "field"), [
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-12-01T10:00:00"}, "since"),  # no offset: ambiguous
    ({"until": "2026-13-01T00:00:00Z"}, "until"),
    ({"since": "2026-12-01T10:00:00Z", "until": "2026-12-01T10:00:00Z"}, "until"),
    ({"since": "2026-12-01T11:00:00Z", "until": "2026-12-01T10:00:00Z"}, "until"),
    ({"since": "2027-01-01T00:00:00Z"}, "since"),  # a start after now, with no end given
    ({"span": timedelta(0)}, "span"),
    ({"span": timedelta(days=-1)}, "span"),
    ({"until": "0001-01-01T01:00:00Z"}, "span"),
])
def test_a_bad_window_names_its_field(given: dict[str, Any], field: str) -> None:
    with pytest.raises(QueryError) as info:
        resolve_window(None, T0, **given)
    assert info.value.field == field


def test_bucket_keys_cover_the_window_without_gaps() -> None:
    w = resolve_window(None, T0, "2026-12-01T09:58:30Z", "2026-12-01T11:02:00Z")
    keys = bucket_keys(w)
    assert keys is not None and keys[0] == "2026-12-01T09:55" and keys[-1] == "2026-12-01T11:00"
    assert len(keys) == 14 and keys == sorted(set(keys))
    w = resolve_window(None, T0, "2025-11-15T00:00:00Z", "2026-02-01T00:00:00Z")
    assert w.bucket == "day" and bucket_keys(w) == [
        (datetime(2025, 11, 15) + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(78)]
    w = resolve_window(None, T0, "2020-11-15T00:00:00Z", "2026-02-01T00:00:00Z")
    keys = bucket_keys(w)
    assert w.bucket == "month" and keys is not None and keys[:3] == ["2020-11", "2020-12", "2021-01"]
    assert keys[-1] == "2026-01" and len(keys) == 63
    assert bucket_keys(resolve_window(None, T0, "0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z")) is None


def test_percentiles_are_nearest_rank() -> None:
    assert percentiles([]) == (0, 0, 0, 0)
    assert percentiles([7]) == (7, 7, 7, 7)
    values = list(range(1, 101))
    assert percentiles(values[::-1]) == (50, 90, 99, 100)
    assert percentiles([1, 2, 3]) == (2, 3, 3, 3)


def test_a_nan_score_counts_as_unscored_on_each_dialect(db: Db, signer: NoteSigner) -> None:
    # PostgreSQL sorts NaN above every number: without care it would land in the top bin
    from audit.query.index import traces
    engine = make_ledger(db, signer).engine
    row = {"trace_id": "", "recorded_at": "", "event_at": at(-5), "decision": "HOLD", "fail_safe": None,
           "fired": "", "principal_fp": "0" * 64, "principal_subject": "CN=x", "ruleset_id": "aml_core",
           "ruleset_version": "1", "module_sha256": "0" * 64}
    with engine.begin() as conn:
        conn.execute(traces.insert(), [
            {**row, "seq": 1, "trace_id": f"00000000-0000-7000-8000-{1:012d}", "recorded_at": at(-5),
             "score": float("nan")},
            {**row, "seq": 2, "trace_id": f"00000000-0000-7000-8000-{2:012d}", "recorded_at": at(-4),
             "score": 0.52}])
    got = overview(engine, window(engine, now=T0, span=timedelta(hours=1)))
    assert got.total == 2 and got.scores.unscored == 1
    assert got.scores.bins[10] == 1 and sum(got.scores.bins) == 1
