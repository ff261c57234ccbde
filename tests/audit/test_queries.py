"""Trace queries: each filter returns exactly the matching decisions, pages visit each once,
bad input names its field, every filter is an index range scan, get_trace shows it all."""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine

from audit.decide.fixed_point import body_score
from audit.errors import QueryError
from audit.query.traces import TraceFilter, _page_query, get_trace, get_traces, parse_time, query_traces
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.test_trace_index import (
    OTHER,
    decision_entries,
    indexed_pipeline,
    mixed_submissions,
    transaction_of,
)
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


@dataclass(frozen=True)
class Rec:
    seq: int
    recorded_at: str
    body: dict[str, Any]
    accounts: frozenset[str]


@dataclass
class World:
    ledger: Ledger
    recs: list[Rec]

    def brute(self, keep: Callable[[Rec], bool]) -> list[int]:
        return sorted((r.seq for r in self.recs if keep(r)), reverse=True)


def build(db: Db, signer: NoteSigner, sb: Sandbox, wasm: bytes) -> World:
    ledger = make_ledger(db, signer)
    pipe = indexed_pipeline(ledger, sb, wasm)
    subs = mixed_submissions(400, seed=11)
    for i in range(0, len(subs), 90):  # several commits: several recorded_at values
        pipe.decide(subs[i:i + 90])
    recs = []
    for seq, env, raw in decision_entries(ledger.engine):
        assert raw is not None
        tx = transaction_of(env["record"], raw)
        accounts = frozenset(p.account for p in (tx.originator, tx.beneficiary) if p.account)
        recs.append(Rec(seq, env["recorded_at"], env["record"], accounts))
    return World(ledger, recs)


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> World:
    return build(db, signer, sandbox, pack_wasm)


def every_page(engine: Engine, f: TraceFilter) -> list[int]:
    seqs: list[int] = []
    cursor = None
    while True:
        page = query_traces(engine, TraceFilter(**{**vars(f), "cursor": cursor}))
        assert len(page.items) <= f.limit
        seqs += [i.seq for i in page.items]
        if page.next_cursor is None:
            return seqs
        assert len(page.items) == f.limit
        cursor = page.next_cursor


def test_each_filter_returns_exactly_the_matching_decisions(world: World) -> None:
    recs, engine = world.recs, world.ledger.engine
    fired = Counter(h["id"] for r in recs for h in r.body["fired"])
    accounts = Counter(a for r in recs for a in r.accounts)
    times = sorted({r.recorded_at for r in recs})
    assert len(fired) >= 3 and len(times) >= 4
    rule, rare_rule = fired.most_common()[0][0], fired.most_common()[-1][0]
    account = accounts.most_common()[0][0]
    cases: list[tuple[dict[str, Any], Callable[[Rec], bool]]] = [
        ({}, lambda r: True),
        ({"rule_id": rule}, lambda r: rule in [h["id"] for h in r.body["fired"]]),
        ({"rule_id": rare_rule}, lambda r: rare_rule in [h["id"] for h in r.body["fired"]]),
        ({"rule_id": "NO_SUCH_RULE"}, lambda r: False),
        ({"account": account}, lambda r: account in r.accounts),
        ({"account": account.lower()}, lambda r: account in r.accounts),  # normalised like the index
        ({"principal": OTHER["fingerprint_sha256"]},
         lambda r: r.body["principal"]["fingerprint_sha256"] == OTHER["fingerprint_sha256"]),
        ({"principal": OTHER["fingerprint_sha256"].upper()},
         lambda r: r.body["principal"]["fingerprint_sha256"] == OTHER["fingerprint_sha256"]),
        ({"principal": OTHER["subject"]}, lambda r: r.body["principal"]["subject"] == OTHER["subject"]),
        ({"score_min": 0.5}, lambda r: (s := body_score(r.body)) is not None and s >= 0.5),
        ({"score_max": 0.01}, lambda r: (s := body_score(r.body)) is not None and s <= 0.01),
        ({"score_min": 0.2, "score_max": 0.9},
         lambda r: (s := body_score(r.body)) is not None and 0.2 <= s <= 0.9),
        ({"since": times[1]}, lambda r: r.recorded_at >= times[1]),
        ({"until": times[2]}, lambda r: r.recorded_at < times[2]),
        ({"since": times[1], "until": times[3]}, lambda r: times[1] <= r.recorded_at < times[3]),
        ({"rule_id": rule, "account": account},
         lambda r: rule in [h["id"] for h in r.body["fired"]] and account in r.accounts),
        ({"account": account, "decision": "ALLOW", "since": times[1]},
         lambda r: account in r.accounts and r.body["decision"] == "ALLOW" and r.recorded_at >= times[1]),
    ]
    cases += [({"decision": d}, lambda r, d=d: r.body["decision"] == d)
              for d in ("ALLOW", "REVIEW", "HOLD", "BLOCK")]
    nonempty = 0
    for given, keep in cases:
        want = world.brute(keep)
        nonempty += bool(want)
        for limit in (7, 1000):
            got = every_page(engine, TraceFilter(**given, limit=limit))
            assert got == want, given
    assert nonempty >= len(cases) - 3


def test_items_carry_what_the_record_says(world: World) -> None:
    by_seq = {r.seq: r for r in world.recs}
    page = query_traces(world.ledger.engine, TraceFilter(limit=50))
    assert [i.seq for i in page.items] == sorted(by_seq, reverse=True)[:50]
    for item in page.items:
        b = by_seq[item.seq].body
        assert (item.decision, item.score, item.principal_fp, item.principal_subject) == (
            b["decision"], body_score(b), b["principal"]["fingerprint_sha256"], b["principal"]["subject"])
        assert item.fired == tuple(h["id"] for h in b["fired"])
        assert (item.ruleset_id, item.ruleset_version, item.module_sha256) == (
            b["rules"]["ruleset_id"], b["rules"]["version"], b["rules"]["module_sha256"])
        assert item.event_at == b["at"] and item.recorded_at == by_seq[item.seq].recorded_at


@pytest.mark.parametrize(("given", "field"), [
    ({"decision": "allow"}, "decision"),
    ({"decision": "MAYBE"}, "decision"),
    ({"rule_id": "bad id"}, "rule_id"),
    ({"account": "  "}, "account"),
    ({"principal": ""}, "principal"),
    ({"score_min": -0.1}, "score_min"),
    ({"score_max": 1.5}, "score_max"),
    ({"score_min": float("nan")}, "score_min"),
    ({"score_min": True}, "score_min"),
    ({"score_min": 0.8, "score_max": 0.2}, "score_max"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-12-02T11:22:18"}, "since"),  # no offset: ambiguous
    ({"until": "2026-13-02T00:00:00Z"}, "until"),
    ({"since": "2026-12-02T12:00:00Z", "until": "2026-12-02T11:00:00Z"}, "until"),
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
    ({"limit": "10"}, "limit"),
    ({"cursor": "!!!"}, "cursor"),
    ({"cursor": base64.urlsafe_b64encode(b"t1.-5.00000000").decode()}, "cursor"),
    ({"cursor": base64.urlsafe_b64encode(b"t1.12.zzzzzzzz").decode()}, "cursor"),
    ({"cursor": base64.urlsafe_b64encode(b"seq=12").decode()}, "cursor"),
    ({"cursor": ""}, "cursor"),
])
def test_bad_filters_and_cursors_name_the_field(given: dict[str, Any], field: str) -> None:
    with pytest.raises(QueryError) as info:
        TraceFilter(**given)
    assert info.value.field == field


def test_a_cursor_is_bound_to_its_filter(world: World) -> None:
    page = query_traces(world.ledger.engine, TraceFilter(limit=5))
    assert page.next_cursor is not None
    with pytest.raises(QueryError) as info:
        TraceFilter(decision="ALLOW", cursor=page.next_cursor)
    assert info.value.field == "cursor" and "different filter" in info.value.message
    # the limit may change between pages
    TraceFilter(limit=50, cursor=page.next_cursor)


def test_times_are_normalised_to_the_ledgers_form() -> None:
    f = TraceFilter(since="2026-12-02T12:22:18+01:00", until="2026-12-02T11:22:19Z")
    assert (f.since, f.until) == ("2026-12-02T11:22:18.000000Z", "2026-12-02T11:22:19.000000Z")


FILTERS: list[dict[str, Any]] = [
    {"decision": "BLOCK"}, {"rule_id": "MODEL_SCORE_BLOCK"}, {"account": "DE89370400440532013000"},
    {"principal": "ab" * 32}, {"principal": "CN=x"}, {"rule_id": "MODEL_SCORE_BLOCK", "account": "1"},
    {"decision": "HOLD", "cursor_seq": 100},
]


def _plan(engine: Engine, given: dict[str, Any]) -> str:
    after = given.pop("cursor_seq", None)
    f = TraceFilter(**given)
    if after is not None:
        f = TraceFilter(**given, cursor=f.cursor_after(after))
    with engine.connect() as conn:
        q = _page_query(f, conn.dialect.name)
        sql = str(q.compile(conn, compile_kwargs={"literal_binds": True}))
        if conn.dialect.name == "postgresql":
            # a tiny table: ask whether an index *can* serve the filter and the order (a plan that
            # still sorts or scans with these off has no index that does)
            for knob in ("seqscan", "sort", "bitmapscan"):
                conn.exec_driver_sql(f"SET enable_{knob} = off")
            return "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {sql}"))
        return "\n".join(r[-1] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))


@pytest.mark.parametrize("given", FILTERS, ids=lambda g: "+".join(g))
def test_each_filtered_page_is_an_index_range_scan_in_seq_order(db: Db, signer: NoteSigner,
                                                                given: dict[str, Any]) -> None:
    engine = make_ledger(db, signer).engine
    plan = _plan(engine, dict(given))
    if db.dialect == "sqlite":
        assert "SEARCH" in plan and "TEMP B-TREE" not in plan, plan  # no sort: the index gives the order
        assert not any(line.startswith("SCAN") for line in plan.splitlines()), plan
    else:
        assert "Seq Scan" not in plan and " Sort " not in plan and "Index" in plan, plan


@pytest.mark.requirement("BSA-1010.410-records")
def test_get_trace_shows_the_sealed_bytes_the_payload_and_a_purge(world: World) -> None:
    from ledger.retention import purge_payloads

    engine = world.ledger.engine
    first = world.recs[0]
    page = query_traces(engine, TraceFilter(limit=1000))
    tid = next(i.trace_id for i in page.items if i.seq == first.seq)
    detail = get_trace(engine, tid)
    assert detail is not None and detail.kind == "decision" and detail.seq == first.seq
    assert hashlib.sha256(b"\x00" + detail.record).hexdigest() == detail.leaf_hash
    assert detail.body == first.body and detail.payload_state == "present" and detail.payload is not None
    assert hashlib.sha256(detail.payload).hexdigest() == detail.payload_sha256
    assert get_trace(engine, tid.upper()) == detail
    purge_payloads(world.ledger, [detail.payload_sha256], reason="erasure order")
    purged = get_trace(engine, tid)
    assert purged is not None and (purged.payload_state, purged.payload) == ("purged", None)
    assert purged.record == detail.record  # the sealed record is untouched
    assert get_trace(engine, "01938a6e-0000-7000-8000-000000000000") is None
    with pytest.raises(QueryError) as info:
        get_trace(engine, "not-a-uuid")
    assert info.value.field == "trace_id"


def test_get_traces_reads_many_traces_exactly_as_get_trace_reads_each(world: World,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.query import traces
    from ledger.retention import purge_payloads

    monkeypatch.setattr(traces, "_BATCH", 64)  # several batches of the reader's statements
    engine = world.ledger.engine
    ids = [i.trace_id for i in query_traces(engine, TraceFilter(limit=1000)).items]
    assert len(ids) > 3 * 64
    one = get_trace(engine, ids[3])
    assert one is not None and one.payload_sha256 is not None
    purge_payloads(world.ledger, [one.payload_sha256], reason="erasure order")
    absent, bad = "01938a6e-0000-7000-8000-000000000000", "not-a-uuid"
    got = get_traces(engine, [*ids, ids[0].upper(), absent, bad])
    assert set(got) == set(ids)  # an unknown id and one that is no UUID have no key
    for t in ids:
        assert got[t] == get_trace(engine, t)
    assert got[ids[3]].payload_state == "purged"
    assert get_traces(engine, []) == {}


def test_a_bound_before_year_1000_still_sorts_as_the_index_text() -> None:
    # the index compares text: '999-...' would sort after '2026-...'
    assert parse_time("0999-01-01T00:00:00Z", "since") == "0999-01-01T00:00:00.000000Z"
    assert parse_time("2026-12-03T10:00:00+01:00", "since") == "2026-12-03T09:00:00.000000Z"
    with pytest.raises(QueryError) as info:
        parse_time("0001-01-01T00:00:00+01:00", "until")
    assert info.value.field == "until"
