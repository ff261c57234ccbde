"""Account risk caught up from the state deltas (``sealtrail.state-delta/3``): each commit's delta
states what its decisions brought to account risk (keyed accounts and points, under one policy and
account key), a decider catches its account risk up from those without reading a decision record,
to the same bits as a rebuild from the records, and ``ledger verify`` names a delta whose
account-risk entries are not what its decision records state."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide import pipeline as pipeline_module
from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState
from audit.errors import DerivedRowError, StateDeltaError
from audit.query.delta_check import TABLE
from audit.query.verify import verify_index
from audit.state import account_risk_replay
from audit.state.account_risk_replay import apply_records, rebuild_account_risk, risk_items
from audit.state.delta import (
    DELTA_SCHEMA,
    DELTA_SCHEMA_V2,
    delta_body,
    entries_bytes,
    parse_delta,
    risk_bytes,
)
from audit.state.replay import delta_pages
from audit.state.risk_snapshot_body import RiskState
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from tests.audit.test_deciders_contention_hostile import _other
from tests.audit.test_state_delta import A, B
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from tests.conftest import Db
from wasm_rules import Sandbox

ORIG, BENE = "1" * 32, "2" * 32
VECTOR = Path(__file__).parents[1] / "vectors" / "state-delta-v3"


def _size(engine: Any) -> int:
    with engine.connect() as conn:
        return store.tail(conn)[0]


def _deltas(engine: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE kind = 'state.delta' "
                                    "ORDER BY seq").all()
    return [orjson.loads(r)["record"] for (r,) in rows]


def _items(engine: Any, lo: int = 0, hi: int | None = None) -> list[tuple[int, Any]]:
    hi = _size(engine) if hi is None else hi
    return risk_items(engine, list(delta_pages(engine, lo, hi)), lo, hi)


@pytest.fixture
def second(db: Db, signer: NoteSigner, ledger: Ledger) -> Iterator[Ledger]:
    lg = _other(db, signer)
    yield lg
    lg.engine.dispose()


def _no_records(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Count the decision records read for account risk (each range read, and what it held)."""
    real = account_risk_replay.risk_bodies
    read: list[tuple[int, int]] = []

    def counted(engine: Any, lo: int, hi: int | None = None) -> Any:
        got = list(real(engine, lo, hi))
        read.append((lo, len(got)))
        return iter(got)
    monkeypatch.setattr(account_risk_replay, "risk_bodies", counted)
    return read


def test_each_delta_states_its_decisions_account_risk_as_their_records_do(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    got = pipe.decide(mixed_submissions(30, seed=21)[:30])
    (d,) = _deltas(ledger.engine)
    assert d["schema"] == DELTA_SCHEMA == "sealtrail.state-delta/3"
    part = d["account_risk"]
    assert part["account_key_id"] == got[0].account_risk.account_key_id  # type: ignore[union-attr]
    assert part["policy"] == pipe.account_risk.policy.to_json()
    for (o, b, points), dec in zip(part["entries"], got, strict=True):
        r = dec.account_risk
        assert r is not None
        sides = (r.originator and r.originator.account, r.beneficiary and r.beneficiary.account)
        assert (o, b, points) == (*sides, r.points_milli)
    assert canonical_bytes(d) == canonical_bytes(orjson.loads(canonical_bytes(d)))
    report = verify_index(ledger.engine)
    assert report.state_deltas == 1


def test_a_decider_catches_account_risk_up_from_the_deltas_reading_no_decision_record(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    subs = mixed_submissions(120, seed=22)
    b.decide(subs[:10])
    for i in range(10, 100, 15):
        a.decide(subs[i:i + 15])  # six commits of a's for b to catch up with
    read = _no_records(monkeypatch)
    assert b.catch_up() == 90
    assert sum(n for _, n in read) == 0  # account risk from the deltas alone
    monkeypatch.undo()
    rebuilt, report = rebuild_account_risk(ledger.engine, b.account_risk.policy)
    assert report.mismatched == 0
    assert b.account_risk.fingerprint() == rebuilt.fingerprint() == a.account_risk.fingerprint()
    b.decide(subs[100:])  # and decides on it as one process would
    a.catch_up()
    assert a.account_risk.fingerprint() == b.account_risk.fingerprint()
    again, _ = rebuild_account_risk(ledger.engine, a.account_risk.policy)
    assert a.account_risk.fingerprint() == again.fingerprint()


def test_deltas_of_an_earlier_release_are_read_from_the_records_beside_version_3_ones(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(60, seed=23)
    pipe.decide(subs[:20])
    with monkeypatch.context() as m:  # a decider of the release before: deltas without account risk
        m.setattr(pipeline_module, "delta_body",
                  lambda k, f, e, d, s=None, r=None: delta_body(k, f, e, d, s, None))
        pipe.decide(subs[20:40])
    pipe.decide(subs[40:])
    assert [d["schema"] for d in _deltas(ledger.engine)] == [DELTA_SCHEMA, DELTA_SCHEMA_V2, DELTA_SCHEMA]
    read = _no_records(monkeypatch)
    items = _items(ledger.engine)
    assert sum(n for _, n in read) == 20  # the version 2 commit's decisions, from their records
    assert [s for s, _ in items] == sorted(s for s, _ in items) and len(items) == len(subs)
    fresh = AccountRiskState(pipe.account_risk.policy)
    apply_records(fresh, items)
    assert fresh.fingerprint() == pipe.account_risk.fingerprint()
    verify_index(ledger.engine)


def test_a_delta_that_misstates_account_risk_fails_verify_naming_it(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(20, seed=24)
    pipe.decide(subs[:10])
    real = pipeline_module.risk_bytes

    def one_point_more(results: list[Any]) -> bytes:
        doc = orjson.loads(real(results))
        doc["entries"][3][2] += 1
        return canonical_bytes(doc)
    monkeypatch.setattr(pipeline_module, "risk_bytes", one_point_more)
    got = pipe.decide(subs[10:])
    with pytest.raises(DerivedRowError) as err:
        verify_index(ledger.engine)
    ((_, seq, detail),) = [f for f in err.value.findings if f[0] == TABLE]
    assert seq == got[-1].seq + 2 and f"the decision at seq {got[3].seq}" in detail
    assert "account_risk entry 3" in detail


POLICY = AccountRiskPolicy().to_json()


def _v3(**risk: Any) -> dict[str, Any]:
    part = {"account_key_id": "fedcba9876543210", "entries": [[ORIG, BENE, 120], [None, BENE, 0]],
            "policy": POLICY}
    body = orjson.loads(delta_body("0123456789abcdef", 10, entries_bytes([(A, B, 5, 7), (None, B, 6, None)]),
                                   "host/1/abcd0123", 3, canonical_bytes(part)))
    body["account_risk"] |= risk
    return body


def test_a_version_3_delta_reads_its_account_risk_and_version_2_reads_without() -> None:
    d = parse_delta(13, _v3())
    assert d.version == 3 and d.account_risk is not None
    assert d.account_risk.entries == ((ORIG, BENE, 120), (None, BENE, 0))
    assert d.account_risk.account_key_id == "fedcba9876543210"
    assert d.account_risk.policy == AccountRiskPolicy()
    v2 = {k: v for k, v in _v3().items() if k != "account_risk"} | {"schema": DELTA_SCHEMA_V2}
    assert parse_delta(13, v2).account_risk is None and parse_delta(13, v2).version == 2
    with pytest.raises(StateDeltaError, match="fields"):  # version 3 must state it
        parse_delta(13, v2 | {"schema": DELTA_SCHEMA})
    with pytest.raises(StateDeltaError, match="fields"):  # version 2 has none to state
        parse_delta(13, _v3() | {"schema": DELTA_SCHEMA_V2})


@pytest.mark.parametrize(("risk", "why"), [
    ({"entries": [[ORIG, BENE, 120]]}, "one entry per decision"),
    ({"entries": [[ORIG, BENE, -1], [None, BENE, 0]]}, "entry 0"),
    ({"entries": [[ORIG, BENE, 1.0], [None, BENE, 0]]}, "entry 0"),
    ({"entries": [[ORIG, BENE, True], [None, BENE, 0]]}, "entry 0"),
    # more than a score of 1 and a BLOCK add (10,000 + 50,000 under the default policy)
    ({"entries": [[ORIG, BENE, 60_001], [None, BENE, 0]]}, "entry 0 states 60001 milli-points"),
    ({"entries": [[ORIG, BENE, 2**53 + 1], [None, BENE, 0]]}, "entry 0 states"),
    ({"entries": [[ORIG, BENE, 1], [A, BENE, 0]]}, "entry 1"),  # a 64-hex state key, not an account key
    ({"entries": [[ORIG, BENE], [None, BENE, 0]]}, "entry 0"),
    ({"account_key_id": "XYZ"}, "account_key_id"),
    ({"policy": POLICY | {"half_life_hours": 0}}, "half_life_hours"),
    ({"policy": {"id": "other/1"}}, "policy"),
    ({"extra": 1}, "account_key_id, entries, policy"),
])
def test_a_malformed_account_risk_part_is_refused_naming_what_is_wrong(risk: dict[str, Any],
                                                                       why: str) -> None:
    with pytest.raises(StateDeltaError, match=why):
        parse_delta(13, _v3(**risk))


def test_risk_bytes_are_the_canonical_part_and_refuse_a_batch_of_two_policies(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    got = pipe.decide(mixed_submissions(12, seed=25)[:12])
    results = [d.account_risk for d in got]
    assert all(r is not None for r in results)
    raw = risk_bytes(results)  # type: ignore[arg-type]
    assert raw == canonical_bytes(orjson.loads(raw))
    from dataclasses import replace
    other = replace(results[1], policy=AccountRiskPolicy(half_life_hours=2))  # type: ignore[type-var]
    with pytest.raises(StateDeltaError, match="one account-risk policy"):
        risk_bytes([results[0], other])  # type: ignore[list-item]
    with pytest.raises(StateDeltaError, match="one decision"):
        risk_bytes([])


def test_the_published_vector_gives_the_same_account_risk_on_any_machine() -> None:
    """The deltas of ``tests/vectors/state-delta-v3`` applied in order to an empty state give the
    published account-risk root and feature-state digest, and their account risk equals the sealed
    records' (the vector's ``account_risk_root`` was computed from a rebuild from the records)."""
    from inference.features import FeatureExtractor
    from inference.state_store import features_state_bytes
    from inference.velocity import VelocityState

    want = orjson.loads((VECTOR / "expected.json").read_bytes())
    fe = FeatureExtractor(state=VelocityState(bytes.fromhex(want["state_key"])))
    pages = []
    for line in (VECTOR / "deltas.jsonl").read_bytes().splitlines():
        doc = orjson.loads(line)
        assert canonical_bytes(doc["body"]) == orjson.dumps(doc["body"], option=orjson.OPT_SORT_KEYS)
        d = parse_delta(doc["seq"], doc["body"])
        assert d.version == 3
        pages.append([d])
        fe.advance(d.entries)
    assert hashlib.sha256(features_state_bytes(fe)).hexdigest() == want["feature_state_sha256"]
    first = pages[0][0].first_seq
    last = pages[-1][0]
    items = risk_items(None, pages, first, last.first_seq + len(last.entries))  # type: ignore[arg-type]
    state = AccountRiskState(AccountRiskPolicy(half_life_hours=want["half_life_hours"]))
    report = apply_records(state, items)
    assert report.applied == want["decisions"] and report.unreadable == 0
    assert RiskState.of(state).root().hex() == want["account_risk_root"]
