"""State snapshots sealed in the ledger: the Merkle root of the feature state at a seq.

A ``state.snapshot`` record states the root of the per-account tree (``audit.state.tree``) of the
feature state after seq ``covers_seq``, with everything of that state that is not per account.
The version 1 body, RFC 8785::

    {"accounts": N,                      # leaves of the tree
     "covers_seq": S,                    # the state after the entry at S (the first S + 1 entries)
     "decider": "<host>/<pid>/<8 hex>",  # the process that sealed it
     "feature_state": "sealtrail.feature-state/1",
     "from_seq": F,                      # the state is an empty one caught up from seq F to S
     "graph": {"accounts": n, "config": [8 ints], "edges": n, "format": "sealtrail.graph/2",
               "watermark": µs | null},
     "leaf": "sealtrail.state-leaf/2",   # leaf/1 (graph/1) in snapshots of earlier releases
     "root": "<64 hex>",
     "schema": "sealtrail.state-snapshot/1",
     "state_key_id": "<16 hex>",
     "velocity": {"accounts": n, "format": "sealtrail.velocity/2", "next_sweep": µs,
                  "watermark": µs, "windows_us": [3600000000, 86400000000, 604800000000]}}

``from_seq`` is what makes the claim checkable: the state is what an empty state, keyed under the
state key, holds after ``audit.state.replay.catch_up`` from ``from_seq`` to ``covers_seq + 1``. A
leaf/2 state depends on the payments of its windows alone, so any start at or before the windows'
start gives the same root; a leaf/1 state (``sealtrail.graph/1``) also held usual-counterparty
counts that remember further back, so where it began was part of what it was. Recomputing a leaf/1
root takes the graph with those counts (``SealedSnapshot.counted``). A decider that restored a
sealed snapshot carries that snapshot's ``from_seq`` on; one that rebuilt its state from the ledger
starts a new one.

Sealing goes through ``Ledger.append_many`` like any record; a snapshot is sealed after the
entries it covers, by any decider, at any time (its body names the seq it speaks for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import orjson
from sqlalchemy import Engine

from audit.errors import StateSnapshotError
from audit.state.replay import entry_pages
from audit.state.snapshot_body import (
    SNAPSHOT_KIND,
    SNAPSHOT_SCHEMA,
    SealedSnapshot,
    parse_snapshot,
    snapshot_body,
)
from audit.state.tree import StateTree
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record

__all__ = ["SNAPSHOT_KIND", "SNAPSHOT_SCHEMA", "SealedSnapshot", "find_claim", "find_sealed",
           "parse_snapshot", "seal_snapshot", "snapshot_body", "snapshot_pages"]


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
    return find_claim(engine, SNAPSHOT_KIND, parse_snapshot, covers_seq, root, hint)


class _Claim(Protocol):
    @property
    def covers_seq(self) -> int: ...

    @property
    def root(self) -> bytes: ...


C = TypeVar("C", bound=_Claim)


def find_claim(engine: Engine, kind: str, parse: Callable[[int, object], C], covers_seq: int, root: bytes,
               hint: int | None = None, fits: Callable[[C], bool] | None = None) -> C | None:
    """The first record of ``kind`` (parsed by ``parse``, which raises ``StateSnapshotError`` for
    one that does not follow its schema) sealed after ``covers_seq`` that claims root ``root`` for
    the state after it (and that ``fits``, if given: the rest of its claim is the caller's), the one
    at seq ``hint`` first; else None. Records that do not parse are passed over, and so are claims
    that do not fit: a twin of the same root under other terms cannot hide the one that fits."""
    def of(seq: int, rec: bytes) -> C | None:
        try:
            s = parse(seq, orjson.loads(rec).get("record"))
        except (StateSnapshotError, orjson.JSONDecodeError, AttributeError):
            return None
        if s.covers_seq != covers_seq or s.root != root:
            return None
        return s if fits is None or fits(s) else None

    if hint is not None and hint > covers_seq:
        for page in entry_pages(engine, kind, hint, hint + 1):
            for seq, rec in page:
                if (got := of(seq, rec)) is not None:
                    return got
    for page in entry_pages(engine, kind, covers_seq + 1):
        for seq, rec in page:
            if (got := of(seq, rec)) is not None:
                return got
    return None
