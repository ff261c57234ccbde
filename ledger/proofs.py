"""Inclusion and consistency proofs read from storage: O(log n) rows, a few queries."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from sqlalchemy import Connection

from ledger import store
from ledger.errors import LedgerError
from ledger.merkle import consistency_ranges, inclusion_ranges, perfect_subtrees, range_hash

__all__ = ["InclusionProof", "consistency_proof", "inclusion_proof", "root_at"]


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
