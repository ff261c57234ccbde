"""Statements over tables that grow with the ledger seek or read a bounded range, never walk or
sort the rest: a trace search with a time window or ``account_alert``, the export's progress
count and the summary before its window, ``verify_index``'s summaries and state deltas, and
``ledger verify``'s stray-payload check. Each test checks the answers on both dialects (against
the sealed records or rows written here) and, on SQLite, the EXPLAIN QUERY PLAN of every
statement it saw: no temp B-tree sorts, no scan, and a seq range where a window is searched."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, event

from audit.decide.summary import SUMMARY_KIND
from audit.export.completeness import bracket
from audit.export.select import ExportFilters, count_selected
from audit.query.index import traces
from audit.query.traces import TraceFilter, time_text
from audit.query.verify import verify_index
from ledger import DamageError, NoteSigner, store
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.audit.test_bundle_completeness import Steps
from tests.audit.test_export import governed_pipeline
from tests.audit.test_queries import every_page
from tests.audit.test_trace_index import mixed_submissions, transaction_of
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

BATCHES, PER_BATCH = 8, 30


@dataclass(frozen=True)
class Decision:
    seq: int
    recorded_at: str
    decision: str
    rules: frozenset[str]
    accounts: frozenset[str]


@dataclass
class World:
    ledger: Ledger
    times: list[str]  # recorded_at of each batch, one second apart
    decisions: list[Decision]
    entries: list[tuple[int, str, str]]  # every entry: seq, kind, recorded_at

    def seqs(self, keep: Callable[[Decision], bool]) -> list[int]:
        return sorted((d.seq for d in self.decisions if keep(d)), reverse=True)


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox) -> Iterator[World]:
    """BATCHES commits of PER_BATCH decisions, each with its summary and state delta, indexed."""
    ledger = make_ledger(db, signer)
    ledger.clock = Steps()
    pipe = governed_pipeline(ledger, sandbox)
    subs = mixed_submissions(BATCHES * PER_BATCH, seed=29)
    raws: dict[int, bytes] = {}
    times = []
    for i in range(BATCHES):
        batch = subs[i * PER_BATCH:(i + 1) * PER_BATCH]
        got = pipe.decide(batch)
        times.append(got[0].recorded_at)
        raws.update((d.seq, s.raw) for d, s in zip(got, batch, strict=True))
    decisions = []
    with ledger.engine.connect() as conn:
        entries = [(int(s), str(k), str(t)) for s, k, t in conn.exec_driver_sql(
            "SELECT seq, kind, recorded_at FROM ledger_entries ORDER BY seq")]
        for s, r in conn.exec_driver_sql("SELECT seq, record FROM ledger_entries WHERE kind = 'decision'"):
            env = orjson.loads(bytes(r))
            body = env["record"]
            tx = transaction_of(body, raws[int(s)])
            accounts = frozenset(p.account for p in (tx.originator, tx.beneficiary) if p.account)
            decisions.append(Decision(int(s), env["recorded_at"], body["decision"],
                                      frozenset(h["id"] for h in body["fired"]), accounts))
    yield World(ledger, times, decisions, entries)
    ledger.engine.dispose()


def shifted(t: str, seconds: float) -> str:
    return time_text(datetime.fromisoformat(t) + timedelta(seconds=seconds))


def windows(times: list[str]) -> list[tuple[str | None, str | None]]:
    """Windows on, between and outside the batches' times, open on either side or on none."""
    t, past, future = times, "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"
    return [(t[2], t[5]), (t[0], t[1]), (shifted(t[2], 0.5), shifted(t[6], -0.5)), (t[7], None),
            (None, t[3]), (t[4], None), (None, t[0]), (shifted(t[7], 1), None), (past, t[0]),
            (past, future), (t[3], shifted(t[3], 0.000001))]


@contextmanager
def statements(engine: Engine, pattern: str) -> Iterator[list[tuple[str, Any]]]:
    """The statements run on ``engine`` meanwhile whose text matches ``pattern``, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if not many and re.search(pattern, statement):
            seen.append((statement, params))
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def plans(engine: Engine, seen: list[tuple[str, Any]]) -> list[str]:
    """SQLite's EXPLAIN QUERY PLAN of each statement, each asserted to neither sort nor scan
    (but for reading a table's newest row, which SQLite shows as a scan in seq order)."""
    assert seen
    out = []
    with engine.connect() as conn:
        for statement, params in seen:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
            plan = "\n".join(str(r[-1]) for r in rows)
            assert "TEMP B-TREE" not in plan, f"{statement}\n{plan}"
            newest = re.fullmatch(r"SELECT [\w, ]+ FROM \w+ ORDER BY seq DESC LIMIT 1", statement.strip())
            assert newest or not re.search(r"^SCAN ", plan, re.M), f"{statement}\n{plan}"
            out.append(plan)
    return out


# ---------------------------------------------------------------------------- trace search


def test_a_time_window_pages_exactly_the_decisions_recorded_in_it(world: World) -> None:
    engine = world.ledger.engine
    decided = Counter(d.decision for d in world.decisions)
    rule = Counter(r for d in world.decisions for r in d.rules).most_common(1)[0][0]
    account = Counter(a for d in world.decisions for a in d.accounts).most_common(1)[0][0]
    filters: list[tuple[dict[str, Any], Callable[[Decision], bool]]] = [
        ({}, lambda d: True),
        ({"decision": decided.most_common()[0][0]}, lambda d: d.decision == decided.most_common()[0][0]),
        ({"decision": decided.most_common()[-1][0]}, lambda d: d.decision == decided.most_common()[-1][0]),
        ({"rule_id": rule}, lambda d: rule in d.rules),
        ({"account": account}, lambda d: account in d.accounts),
        ({"rule_id": rule, "account": account}, lambda d: rule in d.rules and account in d.accounts),
    ]
    found = 0
    for since, until in windows(world.times):
        def inside(d: Decision, since: str | None = since, until: str | None = until) -> bool:
            return (since is None or d.recorded_at >= since) and (until is None or d.recorded_at < until)
        for given, keep in filters:
            want = world.seqs(lambda d, keep=keep, inside=inside: inside(d) and keep(d))  # type: ignore[misc]
            found += bool(want)
            got = every_page(engine, TraceFilter(since=since, until=until, limit=7, **given))
            assert got == want, (since, until, given)
    assert found >= 30  # most are not empty


PLANNED: list[dict[str, Any]] = [
    {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"},
    {"since": "2026-01-01T00:00:00Z"},
    {"until": "2026-02-01T00:00:00Z"},
    {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "decision": "BLOCK"},
    {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "rule_id": "MODEL_SCORE_BLOCK"},
    {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "account": "DE89370400440532013000"},
    {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "principal": "ab" * 32},
    {"account_alert": True},
    {"account_alert": True, "since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"},
    {"account_alert": True, "decision": "ALLOW"},
    {"account_alert": True, "rule_id": "MODEL_SCORE_BLOCK"},
]


@pytest.mark.parametrize("given", PLANNED, ids=lambda g: "+".join(g))
def test_a_page_with_a_window_or_an_alert_reads_one_range_in_seq_order(db: Db, signer: NoteSigner,
                                                                      given: dict[str, Any]) -> None:
    """A page must cost the same however many decisions the window or the alerts hold."""
    from audit.query.traces import _page_query

    engine = make_ledger(db, signer).engine
    f = TraceFilter(**given)
    for cursor in (None, f.cursor_after(10**6)):  # a first page and a later one
        page = TraceFilter(**given, cursor=cursor)
        with engine.connect() as conn:
            q = _page_query(page, conn.dialect.name)
            sql = str(q.compile(conn, compile_kwargs={"literal_binds": True}))
            if db.dialect == "postgresql":
                # a tiny table: ask whether indexes *can* serve filter and order (a plan that still
                # sorts or scans with these off has none that does)
                for knob in ("seqscan", "sort", "bitmapscan"):
                    conn.exec_driver_sql(f"SET enable_{knob} = off")
                plan = "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {sql}"))
                assert "Seq Scan" not in plan and not re.search(r"Sort  \(", plan), plan
                continue
        (plan,) = plans(engine, [(sql, ())])
        driving = [line for line in plan.splitlines() if line.startswith("SEARCH") and " w " not in line]
        assert driving, plan
        if "since" in given or "until" in given:  # the window's seqs bound the range read
            assert re.search(r"(seq|rowid)[<>]\?", driving[0]), plan
        if given.get("account_alert") and "rule_id" not in given:
            assert plan.count("ix_audit_traces_account_alert_seq (account_alert=?") == 3, plan
            assert plan.startswith("MERGE (UNION ALL)"), plan


@pytest.mark.parametrize("window", [{}, {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"}],
                         ids=["whole log", "window"])
def test_a_rule_and_an_account_together_are_driven_by_the_accounts_index(sqlite_db: Db, signer: NoteSigner,
                                                                          window: dict[str, Any]) -> None:
    """An account's decisions are few, a rule's may be most of the log: a page driven down the
    rule's index would read every decision the rule fired on to find the account's. SQLite gets no
    statistics (sealtrail never runs ANALYZE), so the statement itself must make the account drive."""
    from audit.query.traces import _page_query

    engine = make_ledger(sqlite_db, signer).engine
    given: dict[str, Any] = {"rule_id": "VELOCITY_BURST", "account": "DE89370400440532013000", **window}
    for cursor in (None, TraceFilter(**given).cursor_after(10**6)):  # a first page and a later one
        f = TraceFilter(**given, cursor=cursor)
        with engine.connect() as conn:
            sql = str(_page_query(f, "sqlite").compile(conn, compile_kwargs={"literal_binds": True}))
        (plan,) = plans(engine, [(sql, ())])
        driving = [line for line in plan.splitlines() if line.startswith("SEARCH") and " w " not in line]
        assert driving[0].startswith("SEARCH a USING") and "account_key=?" in driving[0], plan
        assert any(line.startswith("SEARCH r USING") and "rule_id=? AND seq=?" in line
                   for line in driving), plan


def test_query_traces_runs_only_such_statements(sqlite_db: Db, signer: NoteSigner) -> None:
    """The plans above are those of the statements query_traces sends (bounds bound, not inlined)."""
    from audit.query.traces import query_traces

    engine = make_ledger(sqlite_db, signer).engine
    with statements(engine, "audit_traces") as seen:
        for given in PLANNED:
            query_traces(engine, TraceFilter(**given))
    assert len(seen) == len(PLANNED)
    plans(engine, seen)


def _alert_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Index rows with few alerts (every value: originator 1, beneficiary 2, both 3; 0 and None
    are none) and recorded_at rising along seq, many seqs to one time."""
    rng = random.Random(seed)
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    rows, at = [], t0
    for seq in range(n):
        if rng.random() < 0.3:
            at += timedelta(milliseconds=rng.randrange(1, 2000))
        rows.append({
            "seq": seq * 3 + 1, "trace_id": f"{seq:08x}-0000-7000-8000-000000000000",
            "recorded_at": time_text(at), "event_at": time_text(t0),
            "decision": rng.choice(("ALLOW", "ALLOW", "REVIEW", "HOLD", "BLOCK")), "score": rng.random(),
            "fail_safe": None, "fired": "", "principal_fp": "ab" * 32, "principal_subject": "CN=x",
            "ruleset_id": "r", "ruleset_version": "1", "module_sha256": "cd" * 32,
            "account_risk_milli": rng.randrange(0, 90_000),
            "account_alert": rng.choice((None, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3))})
    return rows


def test_account_alert_pages_merge_the_three_alert_values_newest_first(db: Db, signer: NoteSigner) -> None:
    engine = make_ledger(db, signer).engine
    rows = _alert_rows(600, seed=3)
    with engine.begin() as conn:
        conn.execute(traces.insert(), rows)
    assert {r["account_alert"] for r in rows} == {None, 0, 1, 2, 3}
    times = sorted({r["recorded_at"] for r in rows})
    since, until = times[len(times) // 4], times[3 * len(times) // 4]
    cases: list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]] = [
        ({}, lambda r: True),
        ({"decision": "ALLOW"}, lambda r: r["decision"] == "ALLOW"),
        ({"account_risk_min_milli": 45_000}, lambda r: r["account_risk_milli"] >= 45_000),
        ({"since": since, "until": until}, lambda r: since <= r["recorded_at"] < until),
        ({"since": since, "decision": "BLOCK"},
         lambda r: since <= r["recorded_at"] and r["decision"] == "BLOCK"),
    ]
    for given, keep in cases:
        want = sorted((r["seq"] for r in rows if r["account_alert"] in (1, 2, 3) and keep(r)), reverse=True)
        assert len(want) >= 5, given
        for limit in (1, 7, 1000):
            assert every_page(engine, TraceFilter(account_alert=True, limit=limit, **given)) == want, given
        # the window alone, no alert, pages the same rows as the recorded_at filter would
        want = sorted((r["seq"] for r in rows if keep(r)), reverse=True)
        assert every_page(engine, TraceFilter(limit=50, **given)) == want, given


# ---------------------------------------------------------------------------- export


def test_the_export_count_reads_the_window_only(world: World) -> None:
    engine = world.ledger.engine
    t = world.times
    rule = Counter(r for d in world.decisions for r in d.rules).most_common(1)[0][0]
    account = Counter(a for d in world.decisions for a in d.accounts).most_common(1)[0][0]
    filters: list[tuple[dict[str, Any], Callable[[Decision], bool]]] = [
        ({}, lambda d: True),
        ({"decision": "ALLOW"}, lambda d: d.decision == "ALLOW"),
        ({"rule": rule}, lambda d: rule in d.rules),
        ({"account": account}, lambda d: account in d.accounts),
        ({"decision": "ALLOW", "rule": rule}, lambda d: d.decision == "ALLOW" and rule in d.rules),
    ]
    for start, end in ((t[2], t[5]), (t[0], t[1]), (shifted(t[3], 0.5), shifted(t[6], 0.5)),
                       (t[7], "2999-01-01T00:00:00Z"), ("2000-01-01T00:00:00Z", t[0])):
        for given, keep in filters:
            want = sum(1 for d in world.decisions if start <= d.recorded_at < end and keep(d))
            with statements(engine, "audit_traces") as seen, engine.connect() as conn:
                got = count_selected(conn, ExportFilters.of(start, end, **given))
            assert got == want, (start, end, given)
            if engine.dialect.name != "sqlite":
                continue
            (plan,) = plans(engine, seen)
            # the index read is cut to the window: its seqs, or the time index for the time alone
            driving = plan.splitlines()[0]
            by_seq, by_time = r"(seq|rowid)>\? AND (seq|rowid)<\?\)", r"recorded_at>\? AND recorded_at<\?\)"
            assert re.search(by_seq if given else by_time, driving), plan


def test_the_summary_before_the_window_is_found_from_the_window_start(world: World) -> None:
    engine = world.ledger.engine
    t = world.times
    summaries = [(s, at) for s, k, at in world.entries if k == SUMMARY_KIND]
    assert len(summaries) == BATCHES
    with statements(engine, "ledger_entries") as seen:
        for start, end in ((t[2], t[5]), (t[0], t[1]), (shifted(t[3], 0.5), shifted(t[6], 0.5)),
                           (t[7], "2999-01-01T00:00:00Z"), ("2000-01-01T00:00:00Z", t[0]),
                           (shifted(t[7], 1), "2999-01-01T00:00:00Z")):
            f = ExportFilters.of(start, end)
            left = max((s for s, at in summaries if at < f.start), default=None)
            right = min((s for s, at in summaries if at >= f.end and s > (left or -1)), default=None)
            with engine.connect() as conn:
                b = bracket(conn, engine, f)
            assert (b.left, b.right) == (left, right), (start, end)
    if engine.dialect.name != "sqlite":
        return
    lefts = [p for (s, _), p in zip(seen, plans(engine, seen), strict=True) if "seq <" in s]
    assert lefts and all("kind=? AND seq<?" in p for p in lefts), lefts


# ---------------------------------------------------------------------------- verify


def test_verify_reads_summaries_and_deltas_each_in_index_order(world: World) -> None:
    engine = world.ledger.engine
    with statements(engine, "decision.summary|state.delta") as seen:
        report = verify_index(engine, page=7, workers=1)  # many pages: the merge crosses each
    assert (report.decisions, report.summaries) == (BATCHES * PER_BATCH, BATCHES)
    assert report.state_deltas == BATCHES
    assert report.unsummarised == 0 and report.commits_without_delta == 0
    if engine.dialect.name == "sqlite":
        plans(engine, seen)


def test_a_stray_payload_is_found_by_two_seeks_lowest_first_seq_first(world: World,
                                                                       signer: NoteSigner) -> None:
    engine = world.ledger.engine
    with statements(engine, "ledger_payloads") as seen:
        assert verify_ledger(engine, [signer.verifier], workers=1).size == len(world.entries)
    if engine.dialect.name == "sqlite":
        plans(engine, [(s, p) for s, p in seen if "first_seq" in s])
    with engine.begin() as conn:
        p = store.param(conn)
        for digest, first_seq in (("cd" * 32, 10**12), ("ef" * 32, -7)):
            conn.exec_driver_sql(f"INSERT INTO ledger_payloads (sha256, data, first_seq, stored_at) "
                                 f"VALUES ({p}, {p}, {p}, {p})", (digest, b"FAKE", first_seq, 0))
    with pytest.raises(DamageError) as info:
        verify_ledger(engine, [signer.verifier], workers=1)
    assert (info.value.kind, info.value.seq) == ("stray payload", -7)
