"""The ``state.snapshot`` record's body: made and read without a database (the offline bundle
verifier reads it too). The body's schema and what it claims are in ``audit.state.sealed``, which
seals and finds such records in a ledger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from audit.errors import StateSnapshotError
from audit.state.tree import LEAF_FORMAT_V1, LEAF_FORMATS, LEAF_GRAPH, StateTree
from inference.state_store import FEATURE_STATE_FORMAT

__all__ = ["SNAPSHOT_KIND", "SNAPSHOT_SCHEMA", "SealedSnapshot", "parse_snapshot", "snapshot_body"]

SNAPSHOT_KIND = "state.snapshot"
SNAPSHOT_SCHEMA = "sealtrail.state-snapshot/1"
_KEYS = frozenset({"accounts", "covers_seq", "decider", "feature_state", "from_seq", "graph", "leaf", "root",
                   "schema", "state_key_id", "velocity"})
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECIDER = re.compile(r"[\x21-\x7e]{1,200}")


@dataclass(frozen=True)
class SealedSnapshot:
    """A parsed ``state.snapshot`` sealed at ``seq``."""

    seq: int
    covers_seq: int
    from_seq: int
    root: bytes
    accounts: int
    state_key_id: str
    meta: dict[str, Any]  # graph and velocity: the state that is not per account
    decider: str
    leaf: str  # the leaf format (``audit.state.tree``): what a recomputed tree must be made of

    @property
    def counted(self) -> bool:
        """Whether recomputing it needs the graph's ``sealtrail.graph/1`` counts (a leaf/1 snapshot
        an earlier release sealed: ``inference.graph.CountedGraph``)."""
        return self.leaf == LEAF_FORMAT_V1

    def matches(self, tree: StateTree, from_seq: int) -> str | None:
        """What differs between this record and ``tree`` (None: the tree is the sealed state)."""
        if tree.state_key_id != self.state_key_id:
            return f"state key {tree.state_key_id}, sealed under {self.state_key_id}"
        if tree.leaf_format != self.leaf:
            return f"leaves {tree.leaf_format}, sealed as {self.leaf}"
        if from_seq != self.from_seq:
            return f"caught up from seq {from_seq}, sealed as caught up from seq {self.from_seq}"
        got = tree.root
        if got != self.root:
            return f"root {got.hex()} ({tree.size} accounts), sealed as {self.root.hex()} ({self.accounts})"
        if tree.size != self.accounts:
            return f"{tree.size} accounts, sealed with {self.accounts}"
        if tree.meta != self.meta:
            return f"windows and graph settings or watermarks {tree.meta}, sealed as {self.meta}"
        return None


def snapshot_body(tree: StateTree, covers_seq: int, from_seq: int, decider: str) -> dict[str, Any]:
    """The body of the record that seals ``tree`` as the state after ``covers_seq``."""
    if type(covers_seq) is not int or covers_seq < 0 or type(from_seq) is not int \
            or not 0 <= from_seq <= covers_seq + 1:
        raise StateSnapshotError(f"a snapshot covers a seq >= 0 and starts at or before it, not "
                                 f"{from_seq!r}..{covers_seq!r}")
    if not _DECIDER.fullmatch(decider) or '"' in decider or "\\" in decider:
        raise StateSnapshotError(f"decider {decider!r} is not printable ASCII without spaces or quotes")
    return {"accounts": tree.size, "covers_seq": covers_seq, "decider": decider,
            "feature_state": FEATURE_STATE_FORMAT, "from_seq": from_seq, "graph": tree.meta["graph"],
            "leaf": tree.leaf_format, "root": tree.root.hex(), "schema": SNAPSHOT_SCHEMA,
            "state_key_id": tree.state_key_id, "velocity": tree.meta["velocity"]}


def parse_snapshot(seq: int, body: object) -> SealedSnapshot:
    """The snapshot sealed at ``seq`` with body ``body`` (parsed JSON); ``StateSnapshotError``
    naming what does not follow the schema."""
    where = f"state snapshot at seq {seq}"
    if not isinstance(body, dict) or body.get("schema") != SNAPSHOT_SCHEMA:
        raise StateSnapshotError(f"{where}: schema is not {SNAPSHOT_SCHEMA}")
    if body.keys() != _KEYS:
        raise StateSnapshotError(f"{where}: fields {sorted(body)} are not the schema's")
    covers, start, root, n = body["covers_seq"], body["from_seq"], body["root"], body["accounts"]
    if type(covers) is not int or not 0 <= covers < seq:
        raise StateSnapshotError(f"{where}: covers_seq {covers!r} is not a seq before it")
    if type(start) is not int or not 0 <= start <= covers + 1:
        raise StateSnapshotError(f"{where}: from_seq {start!r} is not a seq at or before covers_seq + 1")
    if type(root) is not str or not _HEX64.fullmatch(root):
        raise StateSnapshotError(f"{where}: root is not 64 hex digits")
    if type(n) is not int or n < 0:
        raise StateSnapshotError(f"{where}: accounts is not a count")
    kid, decider = body["state_key_id"], body["decider"]
    if type(kid) is not str or not _HEX16.fullmatch(kid):
        raise StateSnapshotError(f"{where}: state_key_id is not 16 hex digits")
    if type(decider) is not str or not _DECIDER.fullmatch(decider):
        raise StateSnapshotError(f"{where}: decider is not printable ASCII without spaces")
    if body["feature_state"] != FEATURE_STATE_FORMAT or body["leaf"] not in LEAF_FORMATS:
        raise StateSnapshotError(f"{where}: feature state {body['feature_state']!r} or leaf {body['leaf']!r} "
                                 "is not one this release reads")
    if not isinstance(body["graph"], dict) or not isinstance(body["velocity"], dict):
        raise StateSnapshotError(f"{where}: graph and velocity are objects")
    if body["graph"].get("format") != LEAF_GRAPH[body["leaf"]]:
        raise StateSnapshotError(f"{where}: {body['leaf']} leaves are made of a {LEAF_GRAPH[body['leaf']]} "
                                 f"graph, not {body['graph'].get('format')!r}")
    return SealedSnapshot(seq, covers, start, bytes.fromhex(root), n, kid,
                          {"graph": body["graph"], "velocity": body["velocity"]}, decider, body["leaf"])
