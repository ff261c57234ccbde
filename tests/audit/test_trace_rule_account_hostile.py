"""Hostile checks of a trace search by rule and account (driven by the account's index):
every page, cursor and filter against a brute-force answer over index rows written here, on both
dialects, and against the intersection of the rule-only and account-only searches."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from audit.query.index import account_key, trace_accounts, trace_rules, traces
from audit.query.traces import TraceFilter, query_traces, time_text
from ledger import NoteSigner, store
from tests.conftest import Db, make_ledger

HUB, SELF, RARE_ACCT, ABSENT = "DE89370400440532013000", "GB82WEST12345698765432", "ACC-RARE-7", "ACC-NOBODY"
COMMON, RARE, NEVER = "VELOCITY_BURST", "SANCTIONS_HIT", "NEVER_FIRED"
FP = ["a" * 64, "b" * 64]
SUBJECTS = ["CN=officer-a,O=bank", "CN=officer-b,O=bank"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Rec:
    seq: int
    recorded_at: str
    decision: str
    score: float | None
    principal: int
    alert: int | None
    rules: frozenset[str]
    accounts: frozenset[str]  # account keys


def _records() -> list[Rec]:
    rnd = random.Random(1907)
    recs, seq, tick = [], 0, 0
    others = [f"ACC-{i}" for i in range(12)]
    for i in range(260):
        seq += rnd.choice([1, 1, 1, 2, 3])  # gaps: summaries and state deltas are not decisions
        tick += rnd.choice([0, 0, 1, 2])  # several decisions share a recorded_at
        rules = {r for r in ("R_A", "R_B", "R_C") if rnd.random() < 0.3}
        if rnd.random() < 0.9:
            rules.add(COMMON)
        parties = {rnd.choice(others), rnd.choice(others)}
        if rnd.random() < 0.6:
            parties.add(HUB)
        if i % 17 == 0:
            parties = {SELF}  # one account as both originator and beneficiary: one row
        if i in (3, 100, 101, 258):
            rules.add(RARE)
            parties.add(HUB)
        if i in (50, 200):
            parties.add(RARE_ACCT)
        outcome = rnd.choice(["ALLOW", "REVIEW", "HOLD", "BLOCK"])
        recs.append(Rec(seq, time_text(T0 + timedelta(seconds=tick)), outcome,
                        None if rnd.random() < 0.1 else round(rnd.random(), 3), rnd.randrange(2),
                        rnd.choice([None, 0, 0, 1, 2, 3]), frozenset(rules),
                        frozenset(account_key(p) for p in parties)))
    return recs


RECS = _records()
LAST = RECS[-1].recorded_at


@pytest.fixture
def engine(db: Db, signer: NoteSigner) -> Iterator[Engine]:
    eng = make_ledger(db, signer).engine
    rows = [(r.seq, f"00000000-0000-7000-8000-{r.seq:012d}", r.recorded_at, r.recorded_at, r.decision,
             r.score, None, ",".join(sorted(r.rules)), FP[r.principal], SUBJECTS[r.principal], "rs", "1",
             "0" * 64, None, r.alert) for r in RECS]
    with eng.begin() as conn:
        store.insert_rows(conn, traces, [c.name for c in traces.columns], rows)
        store.insert_rows(conn, trace_rules, ["rule_id", "seq"], [(x, r.seq) for r in RECS for x in r.rules])
        store.insert_rows(conn, trace_accounts, ["account_key", "seq"],
                          [(k, r.seq) for r in RECS for k in r.accounts])
    yield eng
    eng.dispose()


def pages(engine: Engine, f: TraceFilter) -> list[int]:
    """Every page from ``f``'s own cursor on (``every_page`` starts over, and loops on a bad cursor)."""
    seqs: list[int] = []
    cursor = f.cursor
    for _ in range(len(RECS) + 2):
        page = query_traces(engine, TraceFilter(**{**vars(f), "cursor": cursor}))
        assert len(page.items) == f.limit or (page.next_cursor is None and len(page.items) <= f.limit)
        seqs += [i.seq for i in page.items]
        if page.next_cursor is None:
            return seqs
        cursor = page.next_cursor
    raise AssertionError(f"the cursor never ran out: {seqs[:20]}")


def brute(f: TraceFilter, below: int | None = None) -> list[int]:
    def keep(r: Rec) -> bool:
        return ((f.rule_id is None or f.rule_id in r.rules)
                and (f.account is None or account_key(f.account) in r.accounts)
                and (f.since is None or r.recorded_at >= str(f.since))
                and (f.until is None or r.recorded_at < str(f.until))
                and (f.decision is None or r.decision == f.decision)
                and (f.score_min is None or (r.score is not None and r.score >= f.score_min))
                and (f.score_max is None or (r.score is not None and r.score <= f.score_max))
                and (f.principal is None or f.principal in (FP[r.principal], SUBJECTS[r.principal]))
                and (not f.account_alert or r.alert in (1, 2, 3))
                and (below is None or r.seq < below))
    return sorted((r.seq for r in RECS if keep(r)), reverse=True)


def _t(i: int) -> str:
    return RECS[i].recorded_at


FILTERS: list[dict[str, Any]] = [
    {"rule_id": COMMON, "account": HUB},
    {"rule_id": RARE, "account": HUB},
    {"rule_id": COMMON, "account": SELF},
    {"rule_id": "R_A", "account": "acc-3"},  # normalised like the index's key
    {"rule_id": COMMON, "account": RARE_ACCT},
    {"rule_id": COMMON, "account": HUB, "since": _t(40), "until": _t(180)},
    {"rule_id": RARE, "account": HUB, "since": _t(100)},  # starts inside a shared recorded_at
    {"rule_id": RARE, "account": HUB, "until": _t(101)},
    {"rule_id": COMMON, "account": HUB, "since": LAST},
    {"rule_id": COMMON, "account": HUB, "decision": "BLOCK"},
    {"rule_id": COMMON, "account": HUB, "account_alert": True},
    {"rule_id": "R_B", "account": HUB, "account_alert": True, "since": _t(20), "until": _t(240)},
    {"rule_id": COMMON, "account": HUB, "score_min": 0.5},
    {"rule_id": COMMON, "account": HUB, "score_min": 0.2, "score_max": 0.6, "decision": "REVIEW"},
    {"rule_id": COMMON, "account": HUB, "principal": FP[1].upper()},
    {"rule_id": COMMON, "account": HUB, "principal": SUBJECTS[0], "account_alert": True},
]


@pytest.mark.parametrize("limit", [1, 3, 1000])
@pytest.mark.parametrize("given", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
def test_every_page_is_the_brute_force_answer(engine: Engine, given: dict[str, Any], limit: int) -> None:
    f = TraceFilter(**given, limit=limit)
    want = brute(f)
    assert len(want) > 0 or given.get("since") == LAST or given.get("score_min") == 0.2
    got = pages(engine, f)
    assert got == want  # no decision missing, none twice, newest first
    assert len(set(got)) == len(got)


def test_the_sanity_of_the_data() -> None:
    """The log is what the scenarios need: a hub, a rare rule, a self-paying account, gaps."""
    hub = [r for r in RECS if account_key(HUB) in r.accounts]
    assert len(hub) > 100 and len([r for r in hub if RARE in r.rules]) == 4
    assert any(r.accounts == {account_key(SELF)} for r in RECS)
    assert len({r.recorded_at for r in RECS}) < len(RECS) and RECS[-1].seq > len(RECS)


@pytest.mark.parametrize("given", FILTERS[:6] + FILTERS[9:12], ids=[str(i) for i in range(9)])
def test_rule_and_account_is_the_intersection_of_each_alone(engine: Engine, given: dict[str, Any]) -> None:
    both = pages(engine, TraceFilter(**given, limit=7))
    rule = pages(engine, TraceFilter(**{k: v for k, v in given.items() if k != "account"}, limit=50))
    acct = pages(engine, TraceFilter(**{k: v for k, v in given.items() if k != "rule_id"}, limit=50))
    assert both == sorted(set(rule) & set(acct), reverse=True)


@pytest.mark.parametrize("given", [FILTERS[0], FILTERS[1], FILTERS[5], FILTERS[10]],
                         ids=["hub", "rare", "win", "alert"])
def test_a_cursor_at_any_seq_continues_below_it(engine: Engine, given: dict[str, Any]) -> None:
    """A cursor issued at any seq (one in the answer, one between, beyond either end) pages below it."""
    probe = TraceFilter(**given)
    seqs = sorted({0, 1, RECS[-1].seq + 10, 2**40, *(r.seq for r in RECS[::7]),
                   *(r.seq + 1 for r in RECS[::11])})
    for s in seqs:
        f = TraceFilter(**given, limit=2, cursor=probe.cursor_after(s))
        page = query_traces(engine, f)
        assert [i.seq for i in page.items] == brute(f, below=s)[:2], s
        assert (page.next_cursor is None) == (len(brute(f, below=s)) <= 2), s
        assert pages(engine, f) == brute(f, below=s), s


def test_items_are_the_decisions_rows(engine: Engine) -> None:
    by_seq = {r.seq: r for r in RECS}
    page = query_traces(engine, TraceFilter(rule_id=COMMON, account=HUB, limit=1000))
    for item in page.items:
        r = by_seq[item.seq]
        assert (item.decision, item.recorded_at, item.fired) == (r.decision, r.recorded_at,
                                                                 tuple(sorted(r.rules)))
        assert item.principal_fp == FP[r.principal] and item.score == r.score


@pytest.mark.parametrize("given", [
    {"rule_id": NEVER, "account": HUB},
    {"rule_id": COMMON, "account": ABSENT},
    {"rule_id": NEVER, "account": ABSENT},
    {"rule_id": RARE, "account": RARE_ACCT},  # both exist, never together
    {"rule_id": COMMON, "account": HUB, "since": "2027-01-01T00:00:00Z"},
    {"rule_id": COMMON, "account": HUB, "until": "2025-01-01T00:00:00Z"},
    {"rule_id": RARE, "account": HUB, "since": _t(5), "until": _t(99)},  # between the rare firings
], ids=["never-rule", "absent-account", "neither", "apart", "after-log", "before-log", "gap"])
def test_nothing_matches_gives_one_empty_last_page(engine: Engine, given: dict[str, Any]) -> None:
    for limit in (1, 100):
        f = TraceFilter(**given, limit=limit)
        assert brute(f) == []
        page = query_traces(engine, f)
        assert page.items == [] and page.next_cursor is None


def test_limit_one_walks_the_hubs_rare_rule_one_by_one(engine: Engine) -> None:
    f = TraceFilter(rule_id=RARE, account=HUB, limit=1)
    want = brute(f)
    assert want == sorted((RECS[i].seq for i in (3, 100, 101, 258)), reverse=True)
    cursor, seen = None, []
    for n, seq in enumerate(want):
        page = query_traces(engine, TraceFilter(rule_id=RARE, account=HUB, limit=1, cursor=cursor))
        assert [i.seq for i in page.items] == [seq]
        assert (page.next_cursor is None) == (n == len(want) - 1)
        seen.append(seq)
        cursor = page.next_cursor
    assert seen == want
