"""State deltas: every commit of decisions seals what it advanced the feature state by, any
process catches its state up from them to the same bits, and ``ledger verify`` fails a delta
that misstates its commit or a commit that goes without one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from audit.decide import pipeline as pipeline_module
from audit.decide.account_secret import load_state_key
from audit.decide.pipeline import Pipeline
from audit.errors import DerivedRowError, StateDeltaError
from audit.query.delta_check import TABLE
from audit.query.verify import verify_index
from audit.state.delta import (
    DELTA_KIND,
    DELTA_SCHEMA,
    DELTA_SCHEMA_V1,
    delta_body,
    entries_bytes,
    parse_delta,
)
from audit.state.replay import catch_up, replay_decisions
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id
from ledger import store
from ledger.append import Ledger
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from wasm_rules import Sandbox

A, B = "a" * 64, "b" * 64


@pytest.fixture
def pipe(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> Iterator[Pipeline]:
    yield indexed_pipeline(ledger, sandbox, pack_wasm)


def _deltas(engine: Any) -> list[tuple[int, dict[str, Any]]]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT seq, kind, record FROM ledger_entries ORDER BY seq").all()
    return [(int(s), orjson.loads(r)["record"]) for s, k, r in rows if k == DELTA_KIND]


def _keyed(engine: Any) -> FeatureExtractor:
    return FeatureExtractor(state=VelocityState(load_state_key(engine)))


def _findings(exc: DerivedRowError) -> list[tuple[int, str]]:
    return [(seq, detail) for table, seq, detail in exc.findings if table == TABLE]


def _without_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seal as a release before state deltas did: the summary alone after the decisions."""
    real = pipeline_module._commit_tail

    def summary_only(*a: Any) -> Any:
        tail = real(*a)
        return lambda seq: tail(seq)[:1]
    monkeypatch.setattr(pipeline_module, "_commit_tail", summary_only)


def test_each_commit_seals_its_delta_after_its_summary_with_no_account_in_clear(pipe: Pipeline) -> None:
    subs = mixed_submissions(40, seed=3)
    got = pipe.decide(subs[:25]) + pipe.decide(subs[25:])
    engine = pipe.ledger.engine
    (s1, d1), (s2, d2) = _deltas(engine)
    assert (s1, d1["first_seq"], len(d1["entries"])) == (got[24].seq + 2, got[0].seq, 25)
    assert (s2, d2["first_seq"], len(d2["entries"])) == (got[-1].seq + 2, got[25].seq, len(subs) - 25)
    assert d1["schema"] == DELTA_SCHEMA and d1["state_key_id"] == key_id(load_state_key(engine))
    assert d1["state_from"] == d2["state_from"] == 0  # the pipeline began with the ledger: from seq 0
    assert d1["decider"] == d2["decider"] == pipe.decider and str(os.getpid()) in pipe.decider
    sealed = orjson.dumps([d1, d2]).decode()
    named = {a for s in subs for p in (s.transaction.originator, s.transaction.beneficiary)
             for a in (p.account, p.iban) if a}
    assert named and not [a for a in named if a in sealed]
    for (o, b, t, cents), s in zip(d1["entries"] + d2["entries"], subs, strict=True):
        assert t == int(s.received_at.timestamp()) * 1_000_000 + s.received_at.microsecond
        assert cents is None or type(cents) is int
        assert all(x is None or len(x) == 64 for x in (o, b))
    report = verify_index(engine)
    assert (report.state_deltas, report.commits_without_delta) == (2, 0)


def test_two_processes_at_the_same_seq_hold_the_same_bits(pipe: Pipeline) -> None:
    subs = mixed_submissions(90, seed=6)
    at: list[tuple[int, bytes]] = []  # (ledger size after the commit, the deciding process's state then)
    for i in range(0, len(subs), 17):
        pipe.decide(subs[i:i + 17])
        with pipe.ledger.engine.connect() as conn:
            at.append((store.tail(conn)[0], features_state_bytes(pipe.extractor)))
    engine = pipe.ledger.engine
    other = _keyed(engine)  # a second process catching up, a prefix at a time
    done = 0
    for size, want in at:
        report = catch_up(engine, other, done, size)
        assert report.from_deltas == report.replayed > 0 and report.missing_payload == 0
        assert features_state_bytes(other) == want
        done = size
    fresh = _keyed(engine)  # and one catching up the whole prefix at once
    catch_up(engine, fresh, 0)
    assert features_state_bytes(fresh) == at[-1][1]


def test_decisions_sealed_before_deltas_are_replayed_from_their_messages(
        pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    subs = mixed_submissions(60, seed=8)
    with monkeypatch.context() as m:
        _without_delta(m)
        pipe.decide(subs[:20])
        pipe.decide(subs[20:30])
    pipe.decide(subs[30:])
    engine = pipe.ledger.engine
    fe = _keyed(engine)
    report = catch_up(engine, fe, 0)
    assert (report.replayed, report.from_deltas) == (len(subs), len(subs) - 30)
    assert features_state_bytes(fe) == features_state_bytes(pipe.extractor)
    report_v = verify_index(engine)
    assert (report_v.state_deltas, report_v.commits_without_delta) == (1, 2)  # counted, not judged


def test_a_state_fed_by_payloads_seals_no_origin_since_deltas_alone_would_not_give_it(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.state.snapshot import restore

    old = indexed_pipeline(ledger, sandbox, pack_wasm)  # a release that sealed no delta
    subs = mixed_submissions(40, seed=12)
    with monkeypatch.context() as m:
        _without_delta(m)
        old.decide(subs[:10])
    restored = restore(None, ledger.engine, ledger.origin)
    assert (restored.from_seq, restored.origin) == (0, None)  # caught up from seq 0, partly from payloads
    now = Pipeline(ledger, old.scorer, old._rules, extractor=restored.extractor, covered=restored.covered,
                   state_from=restored.origin)
    now.decide(subs[10:20])
    # a decider whose state is vouched for (say, since seq 10) and up to date ...
    later = restore(None, ledger.engine, ledger.origin)
    vouched = Pipeline(ledger, old.scorer, old._rules, extractor=later.extractor, covered=later.covered,
                       state_from=10)
    vouched.decide(subs[20:25])
    assert vouched.state_from == 10
    with monkeypatch.context() as m:  # ... then another writer of that release seals a commit
        _without_delta(m)
        old.decide(subs[25:30])
    vouched.decide(subs[30:])  # its catch-up replays that commit from its payloads
    assert vouched.state_from is None
    assert [d["state_from"] for _, d in _deltas(ledger.engine)] == [None, 10, None]


def test_a_commit_without_its_delta_after_the_first_fails_verify(
        pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    subs = mixed_submissions(30, seed=9)
    pipe.decide(subs[:10])
    with monkeypatch.context() as m:
        _without_delta(m)
        got = pipe.decide(subs[10:20])
    pipe.decide(subs[20:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(pipe.ledger.engine)
    ((seq, detail),) = _findings(err.value)
    assert seq == got[-1].seq + 1 and "without one" in detail


def test_a_delta_that_misstates_a_time_fails_verify_naming_it(
        pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    subs = mixed_submissions(20, seed=10)
    pipe.decide(subs[:10])
    real = pipeline_module.entries_bytes

    def shifted(deltas: list[Any]) -> bytes:
        o, b, t, c = deltas[3]
        return real([*deltas[:3], (o, b, t + 1, c), *deltas[4:]])
    monkeypatch.setattr(pipeline_module, "entries_bytes", shifted)
    got = pipe.decide(subs[10:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(pipe.ledger.engine)
    ((seq, detail),) = _findings(err.value)
    assert seq == got[-1].seq + 2 and f"the decision at seq {got[3].seq}" in detail


def test_deltas_under_another_key_are_not_applied_their_decisions_replayed_from_messages(
        pipe: Pipeline) -> None:
    subs = mixed_submissions(30, seed=11)
    pipe.decide(subs[:10])
    pipe.decide(subs[10:])
    other = FeatureExtractor(state=VelocityState(bytes(32)))  # as after the account secret was made again
    report = catch_up(pipe.ledger.engine, other, 0)
    assert (report.replayed, report.from_deltas, report.foreign_deltas) == (len(subs), 0, 2)
    by_message = FeatureExtractor(state=VelocityState(bytes(32)))
    replay_decisions(pipe.ledger.engine, by_message, 0)
    assert features_state_bytes(other) == features_state_bytes(by_message)


def test_a_state_in_clear_is_keyed_before_the_first_batch_and_one_under_another_key_refused(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    subs = mixed_submissions(30, seed=12)
    clear = FeatureExtractor()
    clear.observe([s.transaction for s in subs[:10]], [s.received_at for s in subs[:10]])
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    pipe.extractor = clear  # a caller's own replay, in clear: keyed at the first batch, values unchanged
    pipe.decide(subs[10:])
    assert pipe.extractor.state.key_id == key_id(load_state_key(ledger.engine))
    by_message = _keyed(ledger.engine)
    by_message.observe([s.transaction for s in subs[:10]], [s.received_at for s in subs[:10]])
    replay_decisions(ledger.engine, by_message, 0)
    assert features_state_bytes(pipe.extractor) == features_state_bytes(by_message)
    other = indexed_pipeline(ledger, sandbox, pack_wasm)
    other.extractor = FeatureExtractor(state=VelocityState(bytes(32)))
    with pytest.raises(StateDeltaError, match="not under the ledger's state key"):
        other.decide(subs[:1])


def test_each_delta_names_where_its_deciders_state_began_or_null_where_it_cannot_vouch(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    first = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(30, seed=8)
    first.decide(subs[:10])
    covered = store_size(ledger)
    # a second decider whose state was caught up from seq 4 (where its process began it)
    later = _keyed(ledger.engine)
    catch_up(ledger.engine, later, 4, covered)
    second = Pipeline(ledger, first.scorer, first._rules, extractor=later, covered=covered, state_from=4)
    second.decide(subs[10:20])
    # one handed a state it cannot date: it seals null, never a guess
    unknown = Pipeline(ledger, first.scorer, first._rules, extractor=_keyed(ledger.engine))
    unknown.decide(subs[20:])
    got = [(d["schema"], d["state_from"]) for _, d in _deltas(ledger.engine)]
    assert got == [(DELTA_SCHEMA, 0), (DELTA_SCHEMA, 4), (DELTA_SCHEMA, None)]
    assert [parse_delta(s, d).state_from for s, d in _deltas(ledger.engine)] == [0, 4, None]


def store_size(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return store.tail(conn)[0]


def test_a_version_1_delta_still_reads_with_no_origin_and_version_2_holds_its_origin_to_its_range() -> None:
    v2 = orjson.loads(delta_body("0123456789abcdef", 10, entries_bytes([(A, B, 5, 7)]), "host/1/abcd0123", 3))
    assert (v2["state_from"], parse_delta(12, v2).state_from, parse_delta(12, v2).version) == (3, 3, 2)
    v1 = {k: v for k, v in v2.items() if k != "state_from"} | {"schema": DELTA_SCHEMA_V1}
    assert (parse_delta(12, v1).state_from, parse_delta(12, v1).version) == (None, 1)
    with pytest.raises(StateDeltaError, match="fields"):  # a version 1 body has no origin to state
        parse_delta(12, v1 | {"state_from": 3})
    with pytest.raises(StateDeltaError, match="fields"):  # a version 2 body must state it, if only null
        parse_delta(12, {k: v for k, v in v2.items() if k != "state_from"})
    for bad in (11, -1, True, "3", 2.0):  # after its first decision, negative, not an integer
        with pytest.raises(StateDeltaError, match="state_from"):
            parse_delta(12, v2 | {"state_from": bad})
    with pytest.raises(StateDeltaError, match="state_from"):
        delta_body("0123456789abcdef", 10, entries_bytes([(A, B, 5, 7)]), "host/1/abcd0123", 11)


@pytest.mark.parametrize(("body", "why"), [
    ({"schema": "sealtrail.state-delta/9"}, "schema is not"),
    ({"extra": 1}, "fields"),
    ({"state_key_id": "XYZ"}, "state_key_id"),
    ({"first_seq": 3}, "does not end right before the summary"),
    ({"first_seq": True}, "first_seq"),
    ({"decider": "two words"}, "decider"),
    ({"decider": ""}, "decider"),
    ({"entries": []}, "non-empty list"),
    ({"entries": [[A, B, 1, 2], [A, "not hex", 1, 2]]}, "entry 1"),
    ({"entries": [[A, B, 1.5, 2], [A, B, 1, 2]]}, "entry 0"),
    ({"entries": [[A, B, 1, 2.0], [A, B, 1, 2]]}, "entry 0"),
    ({"entries": [[A, B, 1], [A, B, 1, 2]]}, "entry 0"),
])
def test_a_malformed_delta_is_refused_naming_what_is_wrong(body: dict[str, Any], why: str) -> None:
    good = orjson.loads(delta_body("0123456789abcdef", 10, entries_bytes([(A, B, 5, 7), (None, B, 6, None)]),
                                   "host/1/abcd0123"))
    assert parse_delta(13, good).entries == ((A, B, 5, 7), (None, B, 6, None))
    with pytest.raises(StateDeltaError, match=why):
        parse_delta(13, {**good, **body})


def test_accounts_in_clear_are_never_sealed() -> None:
    with pytest.raises(StateDeltaError, match="not keyed"):
        entries_bytes([("DE89370400440532013000", B, 1, 2)])
    with pytest.raises(StateDeltaError, match="integer"):
        entries_bytes([(A, B, 1, 2.5)])  # type: ignore[list-item]


@pytest.mark.parametrize("graph", ["graph/1", "graph/2"])
@pytest.mark.parametrize("version", [1, 2])
def test_the_published_vector_applies_to_the_same_bits_on_any_machine(version: int, graph: str) -> None:
    """The state as the graph holds it now (``sealtrail.graph/2``) and as earlier releases held
    it (``sealtrail.graph/1``, the counts ``CountedGraph`` keeps): each has its published SHA-256."""
    import hashlib
    from pathlib import Path

    from inference.graph import CountedGraph, GraphFeatures

    here = Path(__file__).parents[1] / "vectors" / f"state-delta-v{version}"
    want = orjson.loads((here / "expected.json").read_bytes())
    key = bytes.fromhex(want["state_key"])
    fe = FeatureExtractor(state=VelocityState(key),
                          graph=GraphFeatures(graph=CountedGraph) if graph == "graph/1" else None)
    applied = 0
    for line in (here / "deltas.jsonl").read_bytes().splitlines():
        doc = orjson.loads(line)
        d = parse_delta(doc["seq"], doc["body"])
        assert d.state_key_id == key_id(key) and d.decider
        assert (d.version, d.state_from) == (version, None if version == 1 else 0)
        applied += fe.advance(d.entries)
    assert applied == want["decisions"]
    sha = want["feature_state_sha256" if graph == "graph/1" else "feature_state_sha256_graph2"]
    assert hashlib.sha256(features_state_bytes(fe)).hexdigest() == sha
