"""State snapshots sealed in the ledger: the Merkle root of the feature state at a seq.

A ``state.snapshot`` record states the root of the per-account tree (``audit.state.tree``) of the
feature state after seq ``covers_seq``, with everything of that state that is not per account.
The version 1 body, RFC 8785::

    {"accounts": N,                      # leaves of the tree
     "covers_seq": S,                    # the state after the entry at S (the first S + 1 entries)
     "decider": "<host>/<pid>/<8 hex>",  # the process that sealed it
     "feature_state": "sealtrail.feature-state/1",
     "from_seq": F,                      # the state is an empty one caught up from seq F to S
     "graph": {"accounts": n, "config": [8 ints], "edges": n, "format": "sealtrail.graph/1",
               "watermark": µs | null},
     "leaf": "sealtrail.state-leaf/1",
     "root": "<64 hex>",
     "schema": "sealtrail.state-snapshot/1",
     "state_key_id": "<16 hex>",
     "velocity": {"accounts": n, "format": "sealtrail.velocity/2", "next_sweep": µs,
                  "watermark": µs, "windows_us": [3600000000, 86400000000, 604800000000]}}

``from_seq`` is what makes the claim checkable: the state is what an empty state, keyed under the
state key, holds after ``audit.state.replay.catch_up`` from ``from_seq`` to ``covers_seq + 1``
(the usual-counterparty means of the graph remember further back than any window, so where the
state began is part of what it is). A decider that restored a sealed snapshot carries that
snapshot's ``from_seq`` on; one that rebuilt its state from the ledger starts a new one.

Sealing goes through ``Ledger.append_many`` like any record; a snapshot is sealed after the
entries it covers, by any decider, at any time (its body names the seq it speaks for).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine

from audit.errors import StateSnapshotError
from audit.state.replay import entry_pages
from audit.state.tree import LEAF_FORMAT, StateTree
from inference.state_store import FEATURE_STATE_FORMAT
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record

__all__ = ["SNAPSHOT_KIND", "SNAPSHOT_SCHEMA", "SealedSnapshot", "find_sealed", "parse_snapshot",
           "seal_snapshot", "snapshot_body", "snapshot_pages"]

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

    def matches(self, tree: StateTree, from_seq: int) -> str | None:
        """What differs between this record and ``tree`` (None: the tree is the sealed state)."""
        if tree.state_key_id != self.state_key_id:
            return f"state key {tree.state_key_id}, sealed under {self.state_key_id}"
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
            "leaf": LEAF_FORMAT, "root": tree.root.hex(), "schema": SNAPSHOT_SCHEMA,
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
    if body["feature_state"] != FEATURE_STATE_FORMAT or body["leaf"] != LEAF_FORMAT:
        raise StateSnapshotError(f"{where}: feature state {body['feature_state']!r} or leaf {body['leaf']!r} "
                                 "is not one this release reads")
    if not isinstance(body["graph"], dict) or not isinstance(body["velocity"], dict):
        raise StateSnapshotError(f"{where}: graph and velocity are objects")
    return SealedSnapshot(seq, covers, start, bytes.fromhex(root), n, kid,
                          {"graph": body["graph"], "velocity": body["velocity"]}, decider)


def seal_snapshot(ledger: Ledger, tree: StateTree, covers_seq: int, from_seq: int,
                  decider: str) -> SealedSnapshot:
    """Seal ``tree`` as the state after ``covers_seq`` (caught up from ``from_seq``); the record
    as sealed. The caller vouches that the tree is that state."""
    body = snapshot_body(tree, covers_seq, from_seq, decider)
    receipt = ledger.append(Record.from_jcs(SNAPSHOT_KIND, canonical_bytes(body)))
    return parse_snapshot(receipt.seq, body)


def snapshot_pages(engine: Engine, from_seq: int = 0,
                   to_seq: int | None = None) -> Iterator[list[tuple[int, bytes]]]:
    """The ``state.snapshot`` entries from ``from_seq`` on (to ``to_seq``), (seq, envelope bytes),
    in seq order, a page at a time (the ``(kind, seq)`` index)."""
    return entry_pages(engine, SNAPSHOT_KIND, from_seq, to_seq)


def find_sealed(engine: Engine, covers_seq: int, root: bytes,
                hint: int | None = None) -> SealedSnapshot | None:
    """A sealed snapshot of the state after ``covers_seq`` with root ``root`` (the one at seq
    ``hint`` first, if it is one), else None. Records that do not parse are passed over."""
    def of(seq: int, rec: bytes) -> SealedSnapshot | None:
        try:
            s = parse_snapshot(seq, orjson.loads(rec).get("record"))
        except (StateSnapshotError, orjson.JSONDecodeError, AttributeError):
            return None
        return s if s.covers_seq == covers_seq and s.root == root else None

    if hint is not None and hint > covers_seq:
        for page in snapshot_pages(engine, hint, hint + 1):
            for seq, rec in page:
                if (got := of(seq, rec)) is not None:
                    return got
    for page in snapshot_pages(engine, covers_seq + 1):
        for seq, rec in page:
            if (got := of(seq, rec)) is not None:
                return got
    return None
