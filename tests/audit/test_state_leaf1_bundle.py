"""A window bundle whose state part carries a ``sealtrail.state-leaf/1`` snapshot, sealed as an earlier
release sealed it (its state a ``sealtrail.graph/1`` graph, with the usual-counterparty counts): the
exporter recomputes it with those counts, the offline verifier checks its state against the leaf/1
root and re-derives every decision of the window on it; one byte of that state changed, and the
verifier names the snapshot and re-derives nothing on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.decide.account_secret import load_state_key
from audit.errors import BundleFailed
from audit.export.create import ExportFilters, create_bundle
from audit.state import snapshot as state_snapshot
from audit.state.replay import catch_up, ledger_size
from audit.state.sealed import SealedSnapshot, seal_snapshot
from audit.state.tree import LEAF_FORMAT, LEAF_FORMAT_V1, state_tree
from inference.features import FeatureExtractor
from inference.graph import GRAPH_STATE_FORMAT, GRAPH_STATE_FORMAT_V1, CountedGraph, GraphFeatures
from inference.state_store import features_state_bytes, read_features_state
from inference.velocity import VelocityState, key_id
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.bundle_fixture import members, rewrite
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

SNAPSHOT_FILE = "state/snapshot.bin"
NOT_HELD = "the state snapshot it was to be re-derived on does not hold"


def _half_decided(db: Db, signer: NoteSigner, sandbox: Sandbox) -> tuple[Ledger, Any, list[Any], int]:
    """A ledger whose governed pipeline decided the first 60 of 120 payments: the ledger, the pipeline,
    the payments and the ledger's size after them."""
    ledger = make_ledger(db, signer)
    pipe = governed_pipeline(ledger, sandbox)
    subs = submissions(120, seed=41)
    pipe.decide(subs[:60])
    return ledger, pipe, subs, ledger_size(ledger.engine)


def _leaf1_snapshotted(db: Db, signer: NoteSigner,
                       sandbox: Sandbox) -> tuple[Ledger, list[Any], SealedSnapshot]:
    """A ledger decided by one pipeline from its start: 60 payments, a leaf/1 snapshot of the state
    after them (caught up from seq 0 with the graph/1 counts, as an earlier release's decider held
    it), then the rest, decided by today's pipeline."""
    ledger, pipe, subs, covered = _half_decided(db, signer, sandbox)
    engine = ledger.engine
    old = FeatureExtractor(state=VelocityState(load_state_key(engine)),
                           graph=GraphFeatures(graph=CountedGraph))
    catch_up(engine, old, 0, covered)
    data = state_snapshot.keyed_state_bytes(engine, old)
    # the earlier release's state is today's but for the counts: read into today's graph, it is the pipeline's
    velocity, graph = read_features_state(data, load_state_key(engine))
    assert features_state_bytes(FeatureExtractor(state=velocity, graph=graph)) == \
        state_snapshot.keyed_state_bytes(engine, pipe.extractor)
    sealed = state_snapshot.seal(ledger, data, covered, 0, pipe.decider)
    assert sealed.leaf == LEAF_FORMAT_V1 and sealed.counted and sealed.from_seq == 0
    assert sealed.meta["graph"]["format"] == GRAPH_STATE_FORMAT_V1
    # the same state in today's leaves has another root: a leaf/2 recomputation could not pass for it
    today = state_tree(state_snapshot.keyed_state_bytes(engine, pipe.extractor), sealed.state_key_id)
    assert today.leaf_format == LEAF_FORMAT and today.root != sealed.root
    later = pipe.decide(subs[60:])
    return ledger, later, sealed


def _bundle(ledger: Ledger, signer: NoteSigner, later: list[Any], out: Path, snapshot: bool) -> Path:
    window = ExportFilters.of(later[0].recorded_at, "2100-01-01T00:00:00Z")
    return create_bundle(ledger.engine, ledger, signer, out, window, OFFICER, state_snapshot=snapshot).path


def _state_kinds(path: Path) -> list[str]:
    return [orjson.loads(i)["kind"] for i in members(path)["state/index.jsonl"].splitlines()]


def _graph_part(data: bytes) -> tuple[bytes, dict[str, Any]]:
    """The bytes of ``data`` (a feature state) before its graph, and the graph parsed."""
    head = data.partition(b"\n")[0]
    n = orjson.loads(head)["velocity"]
    before, graph = data[:len(head) + 1 + n], data[len(head) + 1 + n:]
    doc = orjson.loads(graph)
    assert orjson.dumps(doc) == graph  # written by orjson: a changed value re-dumps to the bytes around it
    return before, doc


@pytest.mark.requirement("FATF-R11-reconstruct")
def test_a_bundle_carrying_a_leaf1_snapshot_verifies_and_its_decisions_re_derive(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    ledger, later, sealed = _leaf1_snapshotted(sqlite_db, signer, sandbox)
    with_snap = _bundle(ledger, signer, later, tmp_path / "s.zip", True)
    m = orjson.loads(members(with_snap)["manifest.json"])["state"]
    assert m["from_seq"] == 0
    assert m["snapshot"] == {"covers_seq": sealed.covers_seq, "file": SNAPSHOT_FILE, "seq": sealed.seq}
    assert sealed.covers_seq < later[0].seq
    # the state carried is the graph/1 state the earlier release sealed, its leaf/1 root the sealed one
    data = members(with_snap)[SNAPSHOT_FILE]
    assert _graph_part(data)[1]["format"] == GRAPH_STATE_FORMAT_V1 != GRAPH_STATE_FORMAT
    tree = state_tree(data, sealed.state_key_id, sealed.leaf)
    assert (tree.leaf_format, tree.root, tree.meta) == (LEAF_FORMAT_V1, sealed.root, sealed.meta)
    assert sealed.matches(tree, 0) is None
    # the snapshot stands in for the deltas before it (the first commit's delta is left out with it)
    assert _state_kinds(with_snap) == ["state.snapshot", "state.delta"]
    without = _bundle(ledger, signer, later, tmp_path / "d.zip", False)
    assert _state_kinds(without) == ["state.delta", "state.delta"]
    for path in (with_snap, without):
        report = verify_bundle(path, [signer.verifier], sandbox=sandbox)
        assert report.rederived == len(later) and report.not_rederived == {}


def _one_count(doc: dict[str, Any]) -> tuple[int, int]:
    """(account row, column) of an account's latest activity (``last``, column 1 of a graph/1 row),
    one of the counts graph/1 adds: leaf/1 hashes it, leaf/2 does not hold it."""
    return next((i, 1) for i, a in enumerate(doc["accounts"]) if a[1] > 0)


def _one_edge_amount(doc: dict[str, Any]) -> tuple[int, int]:
    """(edge row, column) of an edge's cents: both leaf formats hash it."""
    return next((i, 3) for i, e in enumerate(doc["edges"]) if e[3] > 0)


@pytest.mark.parametrize(("part", "where"), [("accounts", _one_count), ("edges", _one_edge_amount)],
                         ids=["graph1-count", "edge-cents"])
def test_a_carried_leaf1_snapshot_with_one_byte_changed_fails_naming_the_snapshot(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path, part: str, where: Any) -> None:
    ledger, later, sealed = _leaf1_snapshotted(sqlite_db, signer, sandbox)
    path = _bundle(ledger, signer, later, tmp_path / "s.zip", True)
    data = members(path)[SNAPSHOT_FILE]
    before, doc = _graph_part(data)
    row, col = where(doc)
    value = doc[part][row][col]
    doc[part][row][col] = value - 1 if value % 10 else value + 1  # the last digit only
    forged_state = before + orjson.dumps(doc)
    assert len(forged_state) == len(data)
    assert sum(a != b for a, b in zip(forged_state, data, strict=True)) == 1
    forged = rewrite(path, tmp_path / "f.zip", change={SNAPSHOT_FILE: forged_state}, rehash=True,
                     resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(forged, [signer.verifier], sandbox=sandbox)
    (err,) = [e for e in caught.value.failures if e.kind == "state.snapshot"]
    assert err.seq == sealed.seq
    assert f"not the one sealed at seq {sealed.seq}" in str(err) and "root" in str(err)
    report = caught.value.report
    assert report is not None and report.rederived == 0
    assert report.not_rederived == {NOT_HELD: len(later)}


def test_a_leaf2_snapshot_carried_as_a_graph1_state_fails_naming_the_snapshot(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    """A leaf/2 root does not commit to graph/1's counts: a bundle carrying a leaf/2 snapshot's state
    as graph/1 bytes (counts added, any values) is refused, so the bytes carried are the ones sealed."""
    ledger, pipe, subs, covered = _half_decided(sqlite_db, signer, sandbox)
    engine = ledger.engine
    sealed = state_snapshot.seal(ledger, state_snapshot.keyed_state_bytes(engine, pipe.extractor), covered, 0,
                                 pipe.decider)
    assert sealed.leaf == LEAF_FORMAT and not sealed.counted
    later = pipe.decide(subs[60:])
    path = _bundle(ledger, signer, later, tmp_path / "s.zip", True)
    assert verify_bundle(path, [signer.verifier], sandbox=sandbox).rederived == len(later)
    counted = FeatureExtractor(state=VelocityState(load_state_key(engine)),
                               graph=GraphFeatures(graph=CountedGraph))
    catch_up(engine, counted, 0, covered)
    as_graph1 = state_snapshot.keyed_state_bytes(engine, counted)
    assert state_tree(as_graph1, sealed.state_key_id, LEAF_FORMAT, counted_ok=True).root == sealed.root
    forged = rewrite(path, tmp_path / "f.zip", change={SNAPSHOT_FILE: as_graph1}, rehash=True, resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(forged, [signer.verifier], sandbox=sandbox)
    (err,) = [e for e in caught.value.failures if e.kind == "state.snapshot"]
    assert err.seq == sealed.seq and "sealtrail.graph/2 state, not from sealtrail.graph/1" in str(err)


def test_a_snapshot_sealed_under_another_state_key_does_not_stop_an_export(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    """Anyone who can append could seal a snapshot of some other state: the exporter passes over one
    under another key, and the bundle carries the deltas instead."""
    ledger, pipe, subs, covered = _half_decided(sqlite_db, signer, sandbox)
    other = FeatureExtractor(state=VelocityState(bytes(range(32))))
    other.advance([("ab" * 32, "cd" * 32, 1_767_225_600_000_000, 100)])
    stray = seal_snapshot(ledger, state_tree(features_state_bytes(other), key_id(bytes(range(32)))),
                          covered - 1, 0, "elsewhere/1/00000000")
    assert stray.state_key_id != key_id(load_state_key(ledger.engine))
    later = pipe.decide(subs[60:])
    path = _bundle(ledger, signer, later, tmp_path / "s.zip", True)
    assert orjson.loads(members(path)["manifest.json"])["state"]["snapshot"] is None
    assert _state_kinds(path) == ["state.delta", "state.delta"]
    assert verify_bundle(path, [signer.verifier], sandbox=sandbox).rederived == len(later)
