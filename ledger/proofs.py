"""Inclusion and consistency proofs read from storage: O(log n) rows, a few queries.

``prove_inclusion`` and ``prove_consistency`` are what the CLI and the HTTP API hand out: each
proof is checked against its root (and the checkpoint's signature) before it leaves, so a
damaged store yields an error, never a proof that does not verify.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine

from ledger import store
from ledger.checkpoint import SignedCheckpoint
from ledger.errors import DamageError, EntryNotFoundError, LedgerError, NotCoveredError, RefusedError
from ledger.merkle import (
    consistency_ranges,
    inclusion_ranges,
    perfect_subtrees,
    range_hash,
    verify_consistency,
    verify_inclusion,
)
from ledger.note import NoteVerifier

if TYPE_CHECKING:
    from ledger.append import Ledger

__all__ = [
    "ConsistencyProof",
    "InclusionProof",
    "consistency_proof",
    "inclusion_proof",
    "prove_consistency",
    "prove_inclusion",
    "root_at",
]

_MAX_SEQ = 1 << 63  # seqs are signed 64-bit integers in storage


@dataclass(frozen=True)
class InclusionProof:
    index: int
    size: int
    leaf_hash: bytes
    hashes: tuple[bytes, ...]
    checkpoint: str

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "size": self.size,
            "leaf_hash": base64.b64encode(self.leaf_hash).decode(),
            "hashes": [base64.b64encode(h).decode() for h in self.hashes],
            "checkpoint": self.checkpoint,
        }


@dataclass(frozen=True)
class ConsistencyProof:
    """RFC 9162 proof that the tree of ``old_size`` is a prefix of the tree of ``new_size``,
    with both roots and the signed checkpoints stored for those sizes, if any."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]
    old_checkpoint: str | None
    new_checkpoint: str | None

    def to_json(self) -> dict[str, object]:
        b64 = base64.b64encode
        return {
            "old_size": self.old_size, "new_size": self.new_size,
            "old_root": b64(self.old_root).decode(), "new_root": b64(self.new_root).decode(),
            "hashes": [b64(h).decode() for h in self.hashes],
            "old_checkpoint": self.old_checkpoint, "new_checkpoint": self.new_checkpoint,
        }


def _hashes(conn: Connection, ranges: list[tuple[int, int]]) -> list[bytes]:
    wanted = [p for b, e in ranges for p in perfect_subtrees(b, e)]
    try:
        got = store.perfect_hashes(conn, wanted)
    except LookupError as exc:
        raise LedgerError(f"Merkle storage is incomplete: {exc}") from exc
    return [range_hash(b, e, lambda lvl, idx: got[(lvl, idx)]) for b, e in ranges]


def root_at(conn: Connection, size: int) -> bytes:
    """The tree head at ``size`` recomputed from stored nodes."""
    (root,) = _hashes(conn, [(0, size)]) if size else (b"",)
    return root


def inclusion_proof(conn: Connection, index: int, size: int) -> list[bytes]:
    """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
    return _hashes(conn, inclusion_ranges(index, size))


def consistency_proof(conn: Connection, size1: int, size2: int) -> list[bytes]:
    """RFC 9162 consistency proof from the tree of ``size1`` to the tree of ``size2``."""
    return _hashes(conn, consistency_ranges(size1, size2))


def prove_inclusion(ledger: Ledger, target: int | str, *, sign: bool = True) -> InclusionProof:
    """An inclusion proof for ``target`` (seq or trace id) against the latest signed checkpoint.

    An entry newer than that checkpoint gets a checkpoint signed on the spot, unless ``sign`` is
    false (``NotCoveredError``): a page view must not write. ``EntryNotFoundError`` if no entry
    has that seq or trace id."""
    col = "seq" if isinstance(target, int) else "trace_id"
    if isinstance(target, int) and not 0 <= target < _MAX_SEQ:
        raise EntryNotFoundError(f"no ledger entry with seq {target}")
    with ledger.engine.connect() as conn:
        found = store.entry_leaf(conn, target)
    if found is None:
        raise EntryNotFoundError(f"no ledger entry with {col} {target}")
    seq, leaf = found
    latest = ledger.latest_checkpoint()
    if latest is None or latest.checkpoint.size <= seq:
        if not sign:
            have = 0 if latest is None else latest.checkpoint.size
            raise NotCoveredError(f"entry {seq} is newer than the latest signed checkpoint (size {have})")
        latest = ledger.checkpoint()
    size = latest.checkpoint.size
    with ledger.engine.connect() as conn:
        hashes = inclusion_proof(conn, seq, size)
    # Never hand out a bad proof: the checkpoint must carry our key's signature, the proof
    # must lead from the leaf to its root.
    SignedCheckpoint.verify(latest.note, [NoteVerifier.from_vkey(ledger.active_vkey)], ledger.origin)
    verify_inclusion(seq, size, leaf, hashes, latest.checkpoint.root)
    return InclusionProof(seq, size, leaf, tuple(hashes), latest.note)


def prove_consistency(engine: Engine, old: int, new: int) -> ConsistencyProof:
    """The consistency proof from the tree of ``old`` entries to the tree of ``new`` entries.

    Needs no signing key. ``RefusedError`` unless ``0 < old <= new <= size``; ``DamageError`` if a
    checkpoint stored for either size signs another root than the one the nodes give."""
    store.require_schema(engine)
    with engine.connect() as conn:
        size, _ = store.tail(conn)
        if not 0 < old <= new <= size:
            raise RefusedError(f"sizes must satisfy 0 < OLD <= NEW <= {size} (the ledger's size)")
        hashes = consistency_proof(conn, old, new)
        r1, r2 = root_at(conn, old), root_at(conn, new)
        notes = store.checkpoint_notes(conn, (old, new))
    verify_consistency(old, new, hashes, r1, r2)
    for at, root in ((old, r1), (new, r2)):  # the notes handed out must sign these very roots
        if at in notes and SignedCheckpoint.parse_unverified(notes[at]).checkpoint.root != root:
            raise DamageError("root mismatch", at - 1,
                              f"the checkpoint stored for size {at} signs another root")
    return ConsistencyProof(old, new, r1, r2, tuple(hashes), notes.get(old), notes.get(new))
