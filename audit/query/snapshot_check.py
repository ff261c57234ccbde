"""The sealed state snapshots checked by ``ledger verify``.

A ``state.snapshot`` (``audit.state.sealed``) claims the Merkle root of the feature state after
``covers_seq``, caught up from ``from_seq``. Every one is parsed and checked against its place in
the log (it follows the seq it covers; its state key is the ledger's). With ``roots``, each claim
is recomputed: an empty state under the ledger's state key is caught up from the sealed state
deltas (``audit.state.replay.catch_up``) and its tree's root and settings compared with the
record. Snapshots that share a ``from_seq`` (one decider's run) are recomputed in one pass, so
the cost is one catch-up over the deltas from each distinct ``from_seq`` to its newest snapshot:
about as long as the restarts those deciders paid. Snapshots under another state key are counted,
not recomputed.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from sqlalchemy import Engine

from audit.errors import StateDeltaError, StateSnapshotError
from audit.state.replay import catch_up
from audit.state.sealed import SealedSnapshot, parse_snapshot, snapshot_pages
from audit.state.tree import state_tree
from inference.features import FeatureExtractor
from inference.graph import CountedGraph, GraphFeatures
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id

__all__ = ["TABLE", "SnapshotCheck", "check_snapshots"]

TABLE = "state.snapshot"

Fail = Callable[[str, int, str], None]


class SnapshotCheck:
    """What ``check_snapshots`` checked: records parsed, roots recomputed, records under another key."""

    def __init__(self) -> None:
        self.snapshots = 0
        self.recomputed = 0
        self.other_key = 0


def check_snapshots(engine: Engine, state_key: bytes | None, fail: Fail, *, roots: bool) -> SnapshotCheck:
    """Check every sealed state snapshot (and with ``roots``, recompute its root); each finding
    goes to ``fail(TABLE, seq, what)``."""
    kid = None if state_key is None else key_id(state_key)
    done = SnapshotCheck()
    runs: dict[int, list[SealedSnapshot]] = {}
    for page in snapshot_pages(engine):
        for seq, rec in page:
            done.snapshots += 1
            try:
                s = parse_snapshot(seq, orjson.loads(rec).get("record"))
            except (StateSnapshotError, orjson.JSONDecodeError, AttributeError) as exc:
                fail(TABLE, seq, f"the state snapshot does not parse: {exc}")
                continue
            if kid is not None and s.state_key_id != kid:
                done.other_key += 1
                continue
            runs.setdefault(s.from_seq, []).append(s)
    if not roots or state_key is None:
        return done
    for start, snaps in sorted(runs.items()):
        # leaf/1 snapshots (an earlier release's) need the graph/1 counts; the values are the same
        graph = GraphFeatures(graph=CountedGraph) if any(s.counted for s in snaps) else None
        extractor = FeatureExtractor(state=VelocityState(state_key), graph=graph)
        pos = start
        for s in sorted(snaps, key=lambda x: (x.covers_seq, x.seq)):
            try:
                if s.covers_seq + 1 > pos:
                    catch_up(engine, extractor, pos, s.covers_seq + 1)
                    pos = s.covers_seq + 1
                tree = state_tree(features_state_bytes(extractor), s.state_key_id, s.leaf, counted_ok=True)
                diff = s.matches(tree, start)
            except (StateDeltaError, StateSnapshotError) as exc:
                fail(TABLE, s.seq, f"the state after seq {s.covers_seq} cannot be recomputed: {exc}")
                break
            done.recomputed += 1
            if diff is not None:
                fail(TABLE, s.seq, f"the state caught up from seq {start} to seq {s.covers_seq} has {diff}")
    return done
