"""Decision state is a function of the ledger prefix: two deciders that caught their state up from
different seqs, both at or before the windows' start, hold the same state-snapshot root; and the
snapshots an earlier release sealed with ``sealtrail.state-leaf/1`` leaves (whose roots depended
on where the state began) still verify, restore and recompute."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from audit.decide.account_secret import load_state_key
from audit.decide.pipeline import Pipeline
from audit.errors import DerivedRowError
from audit.query.snapshot_check import TABLE
from audit.query.verify import verify_index
from audit.state import snapshot as state_snapshot
from audit.state.replay import WINDOW, catch_up, ledger_size
from audit.state.tree import LEAF_FORMAT, LEAF_FORMAT_V1, StateTree, state_tree
from inference.features import FeatureExtractor
from inference.graph import CountedGraph, GraphFeatures
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from wasm_rules import Sandbox

DAY = 86_400_000_000
KEY = bytes(range(32))
Delta = tuple[str, str, int, int]


def _traffic(seed: int, days: int = 75, n: int = 20_000) -> list[Delta]:
    """Keyed payments over ``days``: 50 busy accounts, 350 regular ones and 2,600 that pay or are paid
    rarely (the graph lets them go and meets them again), 2 % of payments up to an hour late."""
    rng = random.Random(seed)
    ids = [hashlib.sha256(i.to_bytes(4, "big")).hexdigest() for i in range(3000)]
    t = 1_767_225_600_000_000
    out: list[Delta] = []
    for _ in range(n):
        t += rng.randrange(2 * days * DAY // n)
        a = rng.choice(ids[:50]) if rng.random() < 0.5 else rng.choice(ids[:400])
        b = rng.choice(ids[:50]) if rng.random() < 0.3 else rng.choice(ids[400:] if rng.random() < 0.1
                                                                         else ids[:400])
        late = rng.randrange(3_600_000_000) if rng.random() < 0.02 else 0
        out.append((a, b, t - late, rng.randrange(1, 10**6)))
    return out


def _tree(deltas: list[Delta], counted: bool = False) -> StateTree:
    ex = FeatureExtractor(state=VelocityState(KEY),
                          graph=GraphFeatures(graph=CountedGraph) if counted else None)
    ex.advance(deltas)
    return state_tree(features_state_bytes(ex), key_id(KEY))


@pytest.mark.parametrize("seed", [1, 2])
def test_catch_ups_from_any_seq_before_the_windows_start_hold_the_same_root(seed: int) -> None:
    deltas = _traffic(seed)
    end = max(d[2] for d in deltas)
    span = WINDOW // timedelta(microseconds=1)  # 30 days and an hour: where a restart's catch-up begins
    window = next(i for i, d in enumerate(deltas) if d[2] >= end - span)
    from_zero = _tree(deltas)
    for start in (window, window // 2, window - 1):
        other = _tree(deltas[start:])
        assert other.root == from_zero.root and other.leaves == from_zero.leaves
        assert other.meta == from_zero.meta
    assert from_zero.leaf_format == LEAF_FORMAT and from_zero.size > 800  # rare accounts held too
    # a catch-up that began inside the windows misses payments they hold: another state
    inside = next(i for i, d in enumerate(deltas) if d[2] >= end - 25 * DAY)
    assert _tree(deltas[inside:]).root != from_zero.root
    # the leaves of earlier releases remembered past the windows: their roots told the origins apart
    old_zero, old_window = _tree(deltas, counted=True), _tree(deltas[window:], counted=True)
    assert old_zero.leaf_format == old_window.leaf_format == LEAF_FORMAT_V1
    assert old_zero.root != old_window.root


@pytest.fixture
def pipe(ledger: Any, sandbox: Sandbox, pack_wasm: bytes) -> Iterator[Pipeline]:
    yield indexed_pipeline(ledger, sandbox, pack_wasm)


def _counted_catch_up(engine: Any, to: int) -> FeatureExtractor:
    """The state as an earlier release held it (the graph with its graph/1 counts), caught up from 0."""
    ex = FeatureExtractor(state=VelocityState(load_state_key(engine)),
                          graph=GraphFeatures(graph=CountedGraph))
    catch_up(engine, ex, 0, to)
    return ex


def test_a_leaf1_snapshot_an_earlier_release_sealed_verifies_restores_and_recomputes(pipe: Pipeline,
                                                                                    tmp_path: Path) -> None:
    subs = mixed_submissions(120, seed=7)
    engine = pipe.ledger.engine
    pipe.decide(subs[:60])
    old_file = tmp_path / "old.snap"
    covered = ledger_size(engine)
    old = state_snapshot.save(old_file, pipe.ledger, _counted_catch_up(engine, covered), covered, 0,
                              pipe.decider)
    assert old.leaf == LEAF_FORMAT_V1 and old.meta["graph"]["format"] == "sealtrail.graph/1"
    pipe.decide(subs[60:])
    covered = ledger_size(engine)
    new = state_snapshot.save(tmp_path / "new.snap", pipe.ledger, pipe.extractor, covered, 0, pipe.decider)
    assert new.leaf == LEAF_FORMAT and new.meta["graph"]["format"] == "sealtrail.graph/2"
    # one catch-up from seq 0 recomputes both roots, each in its own leaf format
    report = verify_index(engine, state_roots=True)
    assert (report.state_snapshots, report.state_roots_recomputed) == (2, 2)
    # a restart from the earlier release's file: trusted against its leaf/1 root, then the tail applied
    restored = state_snapshot.restore(old_file, engine, pipe.ledger.origin)
    assert restored.from_snapshot and restored.sealed == old
    assert restored.report.from_seq == old.covers_seq + 1
    assert features_state_bytes(restored.extractor) == features_state_bytes(pipe.extractor)


def test_a_leaf1_snapshot_of_another_state_fails_verify(pipe: Pipeline) -> None:
    pipe.decide(mixed_submissions(90, seed=7)[:90])
    engine = pipe.ledger.engine
    covered = ledger_size(engine)
    behind = _counted_catch_up(engine, covered - 3)  # not the state after ``covered`` entries
    sealed = state_snapshot.seal(pipe.ledger, features_state_bytes(behind), covered, 0, pipe.decider)
    assert sealed.leaf == LEAF_FORMAT_V1
    with pytest.raises(DerivedRowError) as exc:
        verify_index(engine, state_roots=True)
    assert [(t, s) for t, s, _ in exc.value.findings] == [(TABLE, sealed.seq)]
    assert "root" in exc.value.findings[0][2]
