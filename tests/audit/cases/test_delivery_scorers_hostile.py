"""Hostile probes of the per-scorer webhook cursors (revision 0011, ``audit_outcome_delivery_scorers``):
each tries to lose an outcome, send one twice after a 2xx, send out of ledger order or corrupt the
cursors, with scorers added, taken off and put back, failures and leases lost in the middle of an
added scorer's backfill, and endpoint rows left by revision 0010."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError

import migrations
from audit.cases.delivery import (
    Answer,
    deliver_round,
    deliveries,
    enable,
    pending_of,
    release,
    scorer_cursors,
    status,
)
from audit.cases.service import act
from audit.cases.tables import alerts, payment_outcomes, watermark
from audit.cases.webhooks import Endpoint
from ledger.append import Ledger
from tests.audit.cases.test_cases import BOB, decided, rows  # noqa: F401 - fixture
from tests.audit.cases.test_delivery import Clock, Receiver, endpoint, outcomes, scorers_of  # noqa: F401
from tests.conftest import Db


def seal(ledger: Ledger, fp: str, n: int = 1) -> list[int]:
    """``n`` new outcomes of scorer ``fp``'s held payments; their seqs."""
    out = []
    for i in range(n):
        held = next(a for a in rows(ledger.engine, alerts) if a.payment == "HELD" and a.scorer_fp == fp)
        out.append(act(ledger, BOB, "reject", alert=held.seq, rationale=f"probe {i}").seq)
    return out


def ids(seqs: list[int]) -> list[str]:
    return [f"outcome_{s}" for s in seqs]


def kept(ledger: Ledger) -> dict[str, int]:
    with ledger.engine.connect() as conn:
        got = conn.execute(select(scorer_cursors.c.scorer_fp, scorer_cursors.c.cursor))
        return {str(f): int(c) for f, c in got}


def legacy_row(ledger: Ledger, cursor: int, **kw: Any) -> None:
    """An endpoint row as the deliverer of revision 0010 left it: no scorer rows."""
    with ledger.engine.begin() as conn:
        conn.execute(deliveries.insert().values(
            endpoint=kw.get("name", "core-banking"), url="https://pay.bank.example/hooks", cursor=cursor,
            delivered=3, failures=0, next_attempt_us=0, lease_until_us=0))


def a_delivered(decided: Ledger, outcomes: list[dict[str, Any]],  # noqa: F811
                clock: Clock | None = None) -> tuple[str, list[int], str, list[int], Receiver]:
    """The two scorers (a, b) and their outcome seqs, with a's outcomes delivered to a new receiver
    by an endpoint naming a alone (b is then the scorer added later)."""
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(scorers_of(outcomes, decided).items())
    rx = Receiver()
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1", **(clock.both if clock else {}))
    return a_fp, a_seqs, b_fp, b_seqs, rx


def acked_twice(rx: Receiver, failed: set[str]) -> list[str]:
    """Ids the receiver got more than once, except those it had answered with a failure."""
    return [i for i, n in Counter(rx.ids()).items() if n > 1 and i not in failed]


# --------------------------------------------------------------------------- nothing lost


def test_a_scorer_added_to_an_endpoint_whose_after_was_clamped_gets_what_the_endpoint_started_at(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """An ``after`` past the watermark is clamped to the watermark when the endpoint is made (a
    mistyped ``after`` must not skip the outcomes sealed until the log reaches it). A scorer added
    later starts where the endpoint started (kept in the endpoint's row), not at ``min(after,
    watermark now)``, which would skip its outcomes sealed between the two: it gets what an endpoint
    naming both scorers from the start gets."""
    a_fp, b_fp = sorted(scorers_of(outcomes, decided))
    rx = Receiver()
    (r,) = deliver_round(decided.engine, [endpoint((a_fp,), after=10**12)], rx, holder="d1")
    start = r.cursor
    assert start < 10**12 and rx.ids() == []
    b_new = seal(decided, b_fp)  # sealed after the endpoint started, before b was added
    a_new = seal(decided, a_fp)
    # the control: an endpoint naming both scorers from the same start gets both
    ctl = Receiver()
    with decided.engine.begin() as conn:
        conn.execute(deliveries.insert().values(endpoint="control", url="https://pay.bank.example/hooks",
                                                cursor=start, delivered=0, failures=0, next_attempt_us=0,
                                                lease_until_us=0))
    deliver_round(decided.engine, [endpoint((a_fp, b_fp), name="control", after=10**12)], ctl, holder="d1")
    assert ctl.ids() == ids(sorted(b_new + a_new))
    (r,) = deliver_round(decided.engine, [endpoint((a_fp, b_fp), after=10**12)], rx, holder="d1")
    assert rx.ids() == ids(sorted(b_new + a_new)), "b's outcome sealed before b was added was skipped"


def test_an_after_within_the_ledger_starts_an_added_scorer_there_too(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    by = scorers_of(outcomes, decided)
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(by.items())
    after = outcomes[2]["seq"]
    rx = Receiver()
    deliver_round(decided.engine, [endpoint((a_fp,), after=after)], rx, holder="d1")
    assert rx.ids() == ids([s for s in a_seqs if s > after])
    a_new = seal(decided, a_fp)
    (r,) = deliver_round(decided.engine, [endpoint((a_fp, b_fp), after=after)], rx, holder="d1")
    assert rx.ids() == ids([s for s in a_seqs if s > after] + [s for s in b_seqs if s > after] + a_new)
    assert (r.state, r.pending, r.cursor) == ("caught_up", 0, a_new[0])


def test_status_is_read_only_and_agrees_with_the_round_that_follows(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    by = scorers_of(outcomes, decided)
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(by.items())
    both = endpoint((a_fp, b_fp))
    assert status(decided.engine, [endpoint((a_fp,))])[0].pending == len(a_seqs)
    assert kept(decided) == {}
    deliver_round(decided.engine, [endpoint((a_fp,))], Receiver(), holder="d1")
    before = kept(decided)
    (s,) = status(decided.engine, [both])
    assert kept(decided) == before and (s.state, s.pending) == ("idle", len(b_seqs))
    (r,) = deliver_round(decided.engine, [both], Receiver(), holder="d1")
    assert r.delivered_now == s.pending
    assert status(decided.engine, [both])[0].pending == 0


def test_status_and_each_round_say_where_each_scorer_stands(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """A scorer added later starts where the endpoint started: its earlier outcomes show as its own
    pending while the other scorer is caught up, and the endpoint's figures are their sums."""
    a_fp, a_seqs, b_fp, b_seqs, _ = a_delivered(decided, outcomes)
    both = endpoint((a_fp, b_fp))
    (s,) = status(decided.engine, [both])
    assert [(c.scorer, c.cursor, c.pending) for c in s.scorers] == [
        (a_fp, a_seqs[-1], 0), (b_fp, 0, len(b_seqs))]
    assert s.pending == len(b_seqs) and s.to_json()["scorers"][1] == {
        "scorer": b_fp, "cursor": 0, "pending": len(b_seqs)}
    (r,) = deliver_round(decided.engine, [both], Receiver(), holder="d1", budget=1)
    assert r.state == "behind" and [(c.cursor, c.pending) for c in r.scorers] == [
        (a_seqs[-1], 0), (b_seqs[0], len(b_seqs) - 1)]
    (r,) = deliver_round(decided.engine, [both], Receiver(), holder="d1")
    assert r.state == "caught_up" and [(c.cursor, c.pending) for c in r.scorers] == [
        (a_seqs[-1], 0), (b_seqs[-1], 0)]


# --------------------------------------------------------------------------- a backfill interrupted


def test_a_5xx_in_the_middle_of_a_backfill_holds_back_newer_outcomes_and_resends_only_the_failed_one(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    a_fp, a_seqs, b_fp, b_seqs, rx = a_delivered(decided, outcomes, clock)
    a_new = seal(decided, a_fp, 2)
    rx.script = [Answer(204), Answer(503, error="HTTP 503")]
    both = endpoint((a_fp, b_fp))
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1", **clock.both, rng=random.Random(0))
    assert (r.state, r.delivered_now, r.pending) == ("retrying", 1, len(b_seqs) - 1 + 2)
    assert rx.ids()[len(a_seqs):] == ids(b_seqs[:2])
    assert kept(decided)[b_fp] == b_seqs[0] and kept(decided)[a_fp] == a_seqs[-1]
    clock.t += 3  # before the retry is due: nothing, not even a's newer outcomes
    assert deliver_round(decided.engine, [both], rx, holder="d1", **clock.both)[0].delivered_now == 0
    clock.t += 10
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1", **clock.both)
    assert (r.state, r.pending, r.failures) == ("caught_up", 0, 0)
    assert rx.ids() == ids(a_seqs + b_seqs[:2] + b_seqs[1:] + a_new)
    assert kept(decided) == {a_fp: a_new[-1], b_fp: b_seqs[-1]}


def test_a_410_during_a_backfill_then_enable_resumes_the_backfill_where_it_stopped(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    a_fp, a_seqs, b_fp, b_seqs, rx = a_delivered(decided, outcomes, clock)
    a_new = seal(decided, a_fp)
    both = endpoint((a_fp, b_fp))
    rx.script = [Answer(200), Answer(410, error="HTTP 410")]
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1", **clock.both)
    assert r.state == "disabled" and r.disabled is not None and str(b_seqs[1]) in r.disabled
    clock.t += 86_400  # a day later: still disabled, nothing sent
    assert deliver_round(decided.engine, [both], rx, holder="d1", **clock.both)[0].state == "disabled"
    assert len(rx.got) == len(a_seqs) + 2
    # the operator takes b off, then enables, then puts b back: b resumes after its acknowledged one
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1", **clock.both)
    assert enable(decided.engine, "core-banking", clock=clock)
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1", **clock.both)
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1", **clock.both)
    assert r.state == "caught_up"
    assert list(dict.fromkeys(rx.ids())) == ids(a_seqs + b_seqs[:2] + a_new + b_seqs[2:])
    assert acked_twice(rx, {f"outcome_{b_seqs[1]}"}) == []


def test_budget_one_rounds_across_scorers_send_each_outcome_once_in_seq_order(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    a_fp, a_seqs, b_fp, b_seqs, rx = a_delivered(decided, outcomes)
    a_new = seal(decided, a_fp)
    both = endpoint((a_fp, b_fp))
    states = []
    for _ in range(len(a_seqs) + len(b_seqs) + 3):
        (r,) = deliver_round(decided.engine, [both], rx, holder="d1", budget=1)
        states.append(r.state)
        if r.state == "caught_up":
            break
    assert rx.ids() == ids(a_seqs + b_seqs + a_new)
    assert states[-1] == "caught_up" and set(states[:-1]) == {"behind"}


# --------------------------------------------------------------------------- two deliverers, one name


def test_two_deliverers_alternating_rounds_with_different_scorer_sets_lose_nothing_and_ack_nothing_twice(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    by = scorers_of(outcomes, decided)
    (a_fp, a_seqs), (b_fp, b_seqs) = sorted(by.items())
    clock = Clock()
    rx = Receiver()
    one, two = endpoint((a_fp,)), endpoint((b_fp, a_fp))
    sealed: list[int] = []
    for i in range(4):
        if i:
            sealed += seal(decided, (a_fp, b_fp)[i % 2])
        for ep, who in ((one, "d1"), (two, "d2")):
            (r,) = deliver_round(decided.engine, [ep], rx, holder=who, **clock.both, budget=2)
            assert r.state in ("behind", "caught_up")
            release(decided.engine, who)
    for _ in range(4):
        deliver_round(decided.engine, [two], rx, holder="d2", **clock.both)
    assert Counter(rx.ids()) == Counter(ids(a_seqs + b_seqs + sealed))
    # each scorer's outcomes reach the receiver in seq order
    by_seq = {f"outcome_{s}": s for s in a_seqs + b_seqs + sealed}
    fp_of = {**dict.fromkeys(a_seqs, a_fp), **dict.fromkeys(b_seqs, b_fp)}
    fp_of.update({s: f for f in (a_fp, b_fp) for s in sealed if s not in fp_of and kept(decided)[f] >= s})
    for f in (a_fp, b_fp):
        got = [by_seq[i] for i in rx.ids() if fp_of.get(by_seq[i]) == f]
        assert got == sorted(got)


def test_a_lease_lost_in_the_middle_of_a_backfill_to_a_deliverer_with_other_scorers_corrupts_no_cursor(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    a_fp, a_seqs, b_fp, b_seqs, rx = a_delivered(decided, outcomes, clock)
    release(decided.engine, "d1")
    a_new = seal(decided, a_fp)
    calls: list[str] = []

    def stalls(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        rx(e, body, headers)
        calls.append(headers["webhook-id"])
        if len(calls) == 2:  # d1 stalls past its lease with b's second outcome in flight
            clock.t += 200
            (r2,) = deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d2", **clock.both)
            assert (r2.state, r2.delivered_now) == ("caught_up", 1)
        return Answer(200)

    (r,) = deliver_round(decided.engine, [endpoint((a_fp, b_fp))], stalls, holder="d1", **clock.both)
    assert (r.state, r.holder) == ("held_elsewhere", "d2")
    assert kept(decided) == {a_fp: a_new[0], b_fp: b_seqs[0]}  # d1's late 2xx moved nothing
    clock.t += 200
    (r,) = deliver_round(decided.engine, [endpoint((a_fp, b_fp))], rx, holder="d1", **clock.both)
    assert r.state == "caught_up" and kept(decided) == {a_fp: a_new[0], b_fp: b_seqs[-1]}
    # the one in flight when the lease passed on goes again (documented); nothing else twice, none lost
    assert acked_twice(rx, set()) == [f"outcome_{b_seqs[1]}"]
    assert set(rx.ids()) == set(ids(a_seqs + b_seqs + a_new))


def test_a_second_deliverer_with_the_same_scorers_takes_the_backfill_over_from_the_kept_cursor(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    clock = Clock()
    a_fp, a_seqs, b_fp, b_seqs, rx = a_delivered(decided, outcomes, clock)
    both = endpoint((a_fp, b_fp))
    n = [0]

    def stalls(e: Endpoint, body: bytes, headers: Mapping[str, str]) -> Answer:
        rx(e, body, headers)
        n[0] += 1
        if n[0] == 2:
            clock.t += 200
            (r2,) = deliver_round(decided.engine, [both], rx, holder="d2", **clock.both)
            assert r2.state == "caught_up"
        return Answer(200)

    (r,) = deliver_round(decided.engine, [both], stalls, holder="d1", **clock.both)
    assert r.state == "held_elsewhere"
    assert acked_twice(rx, set()) == [f"outcome_{b_seqs[1]}"]
    assert list(dict.fromkeys(rx.ids())) == ids(a_seqs + b_seqs)
    assert kept(decided) == {a_fp: a_seqs[-1], b_fp: b_seqs[-1]}


# --------------------------------------------------------------------------- rows of revision 0010


def test_a_legacy_row_with_a_scorer_added_in_the_same_round_gives_both_the_endpoints_cursor(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """As documented: the first round after the upgrade gives every scorer the file names then the
    endpoint's cursor (which scorers it covered is not recorded by revision 0010)."""
    a_fp, b_fp = sorted(scorers_of(outcomes, decided))
    half = outcomes[len(outcomes) // 2 - 1]["seq"]
    legacy_row(decided, half)
    both = endpoint((a_fp, b_fp))
    (s,) = status(decided.engine, [both])
    assert kept(decided) == {} and s.pending == len([o for o in outcomes if o["seq"] > half])
    rx = Receiver()
    (r,) = deliver_round(decided.engine, [both], rx, holder="d1")
    assert rx.ids() == ids([o["seq"] for o in outcomes if o["seq"] > half])
    assert r.delivered_now == s.pending and r.delivered == 3 + s.pending
    assert set(kept(decided)) == {a_fp, b_fp}


def test_a_legacy_row_seen_first_by_a_held_elsewhere_deliverer_is_not_given_cursors_by_it(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    fps = tuple(sorted(scorers_of(outcomes, decided)))
    half = outcomes[len(outcomes) // 2 - 1]["seq"]
    legacy_row(decided, half)
    clock = Clock()
    with decided.engine.begin() as conn:
        conn.execute(deliveries.update().values(holder="d9", lease_until_us=int((clock.t + 60) * 1e6)))
    (r,) = deliver_round(decided.engine, [endpoint(fps[:1])], Receiver(), holder="d1", **clock.both)
    assert r.state == "held_elsewhere" and kept(decided) == {}
    clock.t += 61
    rx = Receiver()
    deliver_round(decided.engine, [endpoint(fps)], rx, holder="d1", **clock.both)
    assert rx.ids() == ids([o["seq"] for o in outcomes if o["seq"] > half])


def test_a_legacy_scorer_missing_from_the_first_round_after_the_upgrade_loses_nothing_when_put_back(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    """A legacy row worked for scorers a and b up to the last outcome; the first round after the upgrade
    names a only (a second deliverer with an older file, or b briefly taken off). b, put back, is
    taken for a scorer added later: it starts at ``after`` and everything of b's the receiver already
    acknowledged under revision 0010 goes again (at least once holds; nothing is lost)."""
    a_fp, b_fp = sorted(scorers_of(outcomes, decided))
    legacy_row(decided, outcomes[-1]["seq"])
    rx = Receiver()
    deliver_round(decided.engine, [endpoint((a_fp,))], rx, holder="d1")
    b_new = seal(decided, b_fp)
    deliver_round(decided.engine, [endpoint((a_fp, b_fp))], rx, holder="d1")
    assert f"outcome_{b_new[0]}" in rx.ids() and rx.ids()[-1] == f"outcome_{b_new[0]}"
    assert Counter(rx.ids())[f"outcome_{b_new[0]}"] == 1


# --------------------------------------------------------------------------- the schema


def test_a_scorer_cursor_cannot_be_deleted_on_sqlite_and_is_granted_like_the_endpoint_rows(
        decided: Ledger, outcomes: list[dict[str, Any]]) -> None:  # noqa: F811
    fps = tuple(scorers_of(outcomes, decided))
    deliver_round(decided.engine, [endpoint(fps)], Receiver(), holder="d1")
    if decided.engine.dialect.name == "sqlite":
        with pytest.raises(DBAPIError, match="keeps its cursor"), decided.engine.begin() as conn:
            conn.execute(scorer_cursors.delete())
        with decided.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(scorer_cursors)).scalar_one() == len(fps)
    else:
        with decided.engine.connect() as conn:
            comment = conn.execute(text(
                "SELECT col_description('audit_outcome_delivery_scorers'::regclass, 3)")).scalar_one()
        assert comment is not None and "acknowledged" in comment
    from migrations.privileges import HEAD
    assert HEAD["audit_outcome_delivery_scorers"] == HEAD["audit_outcome_deliveries"]


# --------------------------------------------------------------------------- the queries at scale


def _examined(plan: Any) -> int:
    """Rows a PostgreSQL plan's nodes read: returned plus removed by a filter, over every node."""
    n = int(plan.get("Actual Rows", 0)) + int(plan.get("Rows Removed by Filter", 0))
    return n + sum(_examined(p) for p in plan.get("Plans", ()))


def test_a_retired_scorer_far_behind_does_not_make_every_round_read_every_outcome(db: Db) -> None:
    """A rotated-out certificate kept in an endpoint's file keeps the cursor of its last outcome, far
    below the others'. One condition over all scorers (an OR of ``scorer_fp = x AND seq > c`` with
    ORDER BY seq LIMIT) had PostgreSQL walk the primary key from the first outcome and filter every
    row of every scorer, every round (400,000 outcomes: 55 ms, 399,990 rows filtered for 10). Each
    scorer is read on its own range of the ``(scorer_fp, seq)`` index instead: the rows a round reads
    are the rows pending, whatever the table holds."""
    if db.dialect != "postgresql":
        pytest.skip("the plan probed is PostgreSQL's; SQLite reads the pending rows of each scorer")
    engine = db.engine()
    migrations.upgrade(engine)
    n, a_fp, d_fp, c_fp = 60_000, "aa" * 32, "dd" * 32, "cc" * 32
    with engine.begin() as conn:
        conn.execute(payment_outcomes.insert(), [
            {"seq": s, "alert_seq": s, "trace_id": "t", "outcome": "RELEASED", "recorded_at": "r",
             "scorer_fp": d_fp if s <= n // 10 else a_fp if s % 2 else c_fp} for s in range(1, n + 1)])
        if conn.execute(select(watermark)).first() is None:
            conn.execute(watermark.insert().values(id=1, seq=n))
        else:
            conn.execute(watermark.update().values(seq=n))
        conn.exec_driver_sql("ANALYZE audit_payment_outcomes")
    cursors = {a_fp: n - 40, d_fp: n // 10}  # a is current; d, retired, at its last outcome
    examined, got = 0, []
    with engine.connect() as conn:
        for fp, c in cursors.items():
            q = select(payment_outcomes).where(pending_of(fp, c, n))
            q = q.order_by(payment_outcomes.c.scorer_fp, payment_outcomes.c.seq).limit(100)  # as _next
            sql = str(q.compile(engine, compile_kwargs={"literal_binds": True}))
            (plan,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).scalar_one()
            examined += _examined(plan["Plan"])
            got += conn.execute(q).all()
    engine.dispose()
    assert len(got) == 20
    assert examined < 2_000, orjson.dumps(plan).decode()[:3000]
