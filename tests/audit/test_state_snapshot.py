"""State snapshots: the feature state as a Merkle tree over per-account leaves, its root sealed in
a ``state.snapshot``; the same root however the state was reached, every account provable against
it, a claim that is not the state failed by ``ledger verify --state-roots``, and the published
vector reproduced bit for bit."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide.account_secret import load_state_key
from audit.decide.pipeline import Pipeline
from audit.errors import DerivedRowError, StateSnapshotError
from audit.query.snapshot_check import TABLE
from audit.query.verify import verify_index
from audit.state import snapshot as state_snapshot
from audit.state.replay import catch_up, ledger_size
from audit.state.sealed import SNAPSHOT_KIND, parse_snapshot, snapshot_body
from audit.state.tree import AccountProof, state_tree, verify_account
from inference.features import FeatureExtractor
from inference.graph import CountedGraph, GraphFeatures
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id
from ledger.jcs import canonical_bytes
from ledger.merkle import leaf_hash, verify_inclusion
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from wasm_rules import Sandbox

VECTOR = Path(__file__).parents[1] / "vectors" / "state-snapshot-v1"
DELTA_VECTOR = Path(__file__).parents[1] / "vectors" / "state-delta-v1"


@pytest.fixture
def pipe(ledger: Any, sandbox: Sandbox, pack_wasm: bytes) -> Iterator[Pipeline]:
    yield indexed_pipeline(ledger, sandbox, pack_wasm)


def _decided(pipe: Pipeline, n: int = 120, seed: int = 7, step: int = 40) -> list[Any]:
    subs = mixed_submissions(n, seed=seed)
    return [d for i in range(0, n, step) for d in pipe.decide(subs[i:i + step])]


def _kid(pipe: Pipeline) -> str:
    return key_id(load_state_key(pipe.ledger.engine))


def _caught_up(engine: Any, to: int, start: int = 0) -> FeatureExtractor:
    fresh = FeatureExtractor(state=VelocityState(load_state_key(engine)))
    catch_up(engine, fresh, start, to)
    return fresh


def test_a_decided_state_and_one_caught_up_from_the_deltas_have_the_same_root(pipe: Pipeline) -> None:
    _decided(pipe)
    engine = pipe.ledger.engine
    decided = state_tree(features_state_bytes(pipe.extractor), _kid(pipe))
    in_steps = FeatureExtractor(state=VelocityState(load_state_key(engine)))
    size = ledger_size(engine)
    catch_up(engine, in_steps, 0, size // 2)  # another path: two catch-ups, split mid-log
    catch_up(engine, in_steps, size // 2, size)
    for other in (_caught_up(engine, size), in_steps):
        tree = state_tree(features_state_bytes(other), _kid(pipe))
        assert tree.root == decided.root and tree.meta == decided.meta and tree.leaves == decided.leaves
    assert decided.size > 50 and list(decided.accounts) == sorted(decided.accounts)
    leaf = orjson.loads(decided.leaves[0])
    assert sorted(leaf) == ["account", "graph", "velocity"] and leaf["account"] == decided.accounts[0]
    behind = _caught_up(engine, size - 3)  # the state one commit earlier: another root
    assert state_tree(features_state_bytes(behind), _kid(pipe)).root != decided.root


def test_a_sealed_snapshot_verifies_and_each_account_proves_against_its_root(pipe: Pipeline,
                                                                              tmp_path: Path) -> None:
    _decided(pipe)
    engine = pipe.ledger.engine
    covered = ledger_size(engine)
    sealed = state_snapshot.save(tmp_path / "state.snap",
                                 pipe.ledger, pipe.extractor, covered, 0, pipe.decider)
    assert (sealed.covers_seq, sealed.from_seq, sealed.seq) == (covered - 1, 0, covered)
    with engine.connect() as conn:
        kind, rec = conn.exec_driver_sql(
            f"SELECT kind, record FROM ledger_entries WHERE seq = {sealed.seq}").one()
    assert kind == SNAPSHOT_KIND and parse_snapshot(sealed.seq, orjson.loads(rec)["record"]) == sealed
    report = verify_index(engine, state_roots=True)
    assert (report.state_snapshots, report.state_roots_recomputed) == (1, 1)
    assert report.to_json()["state_snapshots"] == 1
    tree = state_tree(features_state_bytes(pipe.extractor), _kid(pipe))
    for account in (tree.accounts[0], tree.accounts[-1], tree.accounts[len(tree.accounts) // 2]):
        proof = tree.prove(account)
        state = verify_account(proof, sealed.root, sealed.accounts)
        assert state["account"] == account and (state["velocity"] or state["graph"])
        # and by the ledger's own proof verification
        verify_inclusion(proof.index, proof.size, leaf_hash(proof.leaf), proof.path, sealed.root)
    proof = tree.prove(tree.accounts[1])
    doc = orjson.loads(proof.leaf)
    doc["velocity"]["last"] += 1  # one account's state changed
    with pytest.raises(StateSnapshotError, match="inclusion proof"):
        verify_account(AccountProof(proof.account, proof.index, proof.size, orjson.dumps(doc), proof.path),
                       sealed.root, sealed.accounts)
    with pytest.raises(StateSnapshotError, match="not account"):  # another account's leaf and path
        other = tree.prove(tree.accounts[2])
        verify_account(AccountProof(proof.account, other.index, other.size, other.leaf, other.path),
                       sealed.root, sealed.accounts)
    with pytest.raises(StateSnapshotError, match="tree of"):
        verify_account(proof, sealed.root, sealed.accounts + 1)
    with pytest.raises(StateSnapshotError, match="holds no account"):
        tree.prove("0" * 64)


@pytest.mark.parametrize("lie", ["root of another state", "another from_seq"])
def test_verify_fails_a_snapshot_that_is_not_the_state_it_claims(pipe: Pipeline, lie: str) -> None:
    _decided(pipe)
    engine = pipe.ledger.engine
    covered = ledger_size(engine)
    data = state_snapshot.keyed_state_bytes(engine, pipe.extractor)
    from_seq = 0
    if lie == "root of another state":
        data = features_state_bytes(_caught_up(engine, covered - 3))
    else:
        from_seq = 5  # the state is not the one caught up from seq 5
    sealed = state_snapshot.seal(pipe.ledger, data, covered, from_seq, pipe.decider)
    assert verify_index(engine).state_snapshots == 1  # parsed and in place: the root is not recomputed
    with pytest.raises(DerivedRowError) as exc:
        verify_index(engine, state_roots=True)
    assert [(t, s) for t, s, _ in exc.value.findings] == [(TABLE, sealed.seq)]
    assert "root" in exc.value.findings[0][2]


@pytest.mark.parametrize("leaf", [1, 2])
def test_the_vector_root_body_and_proof_are_reproduced(leaf: int) -> None:
    """Each leaf format's vector: leaf/1 (an earlier release's snapshots) from the graph with its
    graph/1 counts (``CountedGraph``), leaf/2 from the graph as it is."""
    want = orjson.loads((VECTOR.parent / f"state-snapshot-v{leaf}" / "expected.json").read_bytes())
    key = bytes.fromhex(want["state_key"])
    extractor = FeatureExtractor(state=VelocityState(key),
                                 graph=GraphFeatures(graph=CountedGraph) if leaf == 1 else None)
    for line in (VECTOR / "deltas.jsonl").read_bytes().splitlines():
        extractor.advance([(o, b, t, c) for o, b, t, c in orjson.loads(line)["body"]["entries"]])
    state = features_state_bytes(extractor)
    delta_vector = orjson.loads((DELTA_VECTOR / "expected.json").read_bytes())
    sha = delta_vector["feature_state_sha256" if leaf == 1 else "feature_state_sha256_graph2"]
    assert hashlib.sha256(state).hexdigest() == sha  # the same input state
    tree = state_tree(state, key_id(key))
    assert tree.leaf_format == want["body"]["leaf"] == f"sealtrail.state-leaf/{leaf}"
    assert tree.root.hex() == want["root"] == want["body"]["root"]
    body = snapshot_body(tree, want["covers_seq"], 0, want["decider"])
    assert orjson.loads(canonical_bytes(body)) == want["body"]
    p = want["proof"]
    proof = tree.prove(p["account"])
    assert proof.to_json() == p
    verify_inclusion(p["index"], p["size"], leaf_hash(p["leaf"].encode()),
                     [bytes.fromhex(h) for h in p["path"]], bytes.fromhex(want["root"]))


def _keyed_state(n: int = 3) -> tuple[bytes, str]:
    key = bytes(range(32))
    ex = FeatureExtractor(state=VelocityState(key))
    ids = [hashlib.sha256(bytes([i])).hexdigest() for i in range(n)]
    ex.advance([(ids[i], ids[(i + 1) % n], 1_700_000_000_000_000 + i, 100 * (i + 1)) for i in range(n)])
    return features_state_bytes(ex), key_id(key)


def test_a_state_in_clear_or_under_another_key_or_malformed_is_refused() -> None:
    data, kid = _keyed_state()
    assert state_tree(data, kid).size == 3
    with pytest.raises(StateSnapshotError, match="keyed under"):
        state_tree(data, "0" * 16)
    clear = FeatureExtractor()
    clear.advance([("DE89370400440532013000", "GB29NWBK60161331926819", 1_700_000_000_000_000, 100)])
    with pytest.raises(StateSnapshotError, match="not keyed"):
        state_tree(features_state_bytes(clear), kid)
    for bad in (b"", b"{}\n{}", data[:-40], b'{"format":"sealtrail.feature-state/1","velocity":9}\n{}'):
        with pytest.raises(StateSnapshotError):
            state_tree(bad, kid)


def _body(**change: Any) -> dict[str, Any]:
    data, kid = _keyed_state()
    body = snapshot_body(state_tree(data, kid), 10, 0, "host/1/abcd0123")
    body.update(change)
    return body


@pytest.mark.parametrize(("change", "what"), [
    ({"schema": "sealtrail.state-snapshot/2"}, "schema"),
    ({"extra": 1}, "fields"),
    ({"covers_seq": 12}, "covers_seq"),
    ({"covers_seq": -1}, "covers_seq"),
    ({"from_seq": 12}, "from_seq"),
    ({"root": "AB" * 32}, "root"),
    ({"accounts": -1}, "accounts"),
    ({"state_key_id": "xyz"}, "state_key_id"),
    ({"decider": "a b"}, "decider"),
    ({"leaf": "sealtrail.state-leaf/9"}, "leaf"),
    ({"graph": []}, "objects"),
    ({"leaf": "sealtrail.state-leaf/1"}, r"leaf/1 leaves are made of a sealtrail\.graph/1 graph, not"),
])
def test_a_snapshot_body_off_its_schema_is_refused_with_what_is_wrong(change: dict[str, Any],
                                                                      what: str) -> None:
    assert parse_snapshot(12, _body()).covers_seq == 10
    with pytest.raises(StateSnapshotError, match=what):
        parse_snapshot(12, _body(**change))


def test_a_snapshot_cannot_be_made_of_no_seq_or_from_after_it() -> None:
    data, kid = _keyed_state()
    tree = state_tree(data, kid)
    for covers, start in ((-1, 0), (5, 7), (5, -1)):
        with pytest.raises(StateSnapshotError, match="covers a seq"):
            snapshot_body(tree, covers, start, "host/1/abcd0123")
    with pytest.raises(StateSnapshotError, match="decider"):
        snapshot_body(tree, 5, 0, 'a"b')
