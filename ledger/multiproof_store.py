"""Subtree hashes for a multiproof read from storage: many ranges, a few queries per chunk."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from ledger import store
from ledger.errors import LedgerError
from ledger.merkle import node_hash, perfect_subtrees

__all__ = ["subtree_hashes"]

# perfect subtrees per store.perfect_hashes call: each becomes one OR term, and SQLite refuses
# an expression deeper than 1000 (SQLITE_MAX_EXPR_DEPTH)
_CHUNK = 500


def subtree_hashes(
    conn: Connection, ranges: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    """MTH(D[lo:hi]) of each RFC 9162 subtree ``[lo, hi)`` (a ``multiproof.frontier``).

    Ranges decompose into stored perfect subtrees, fetched in chunks of ``_CHUNK`` with one
    query per stratum touched; raises ``LedgerError`` for a range that is not a subtree of
    the recursion or reaches past what storage holds.
    """
    parts: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for lo, hi in ranges:
        try:
            if not 0 <= lo < hi:
                raise ValueError(f"[{lo}, {hi}) is empty")
            parts[(lo, hi)] = perfect_subtrees(lo, hi)
        except ValueError as exc:
            raise LedgerError(f"no subtree hash for range [{lo}, {hi}): {exc}") from exc
    wanted = sorted({p for ps in parts.values() for p in ps})  # by level: few strata a chunk
    got: dict[tuple[int, int], bytes] = {}
    try:
        for i in range(0, len(wanted), _CHUNK):
            got.update(store.perfect_hashes(conn, wanted[i : i + _CHUNK]))
    except LookupError as exc:
        raise LedgerError(f"Merkle storage is incomplete: {exc}") from exc
    out: dict[tuple[int, int], bytes] = {}
    for key, ps in parts.items():
        acc = got[ps[-1]]
        for p in reversed(ps[:-1]):
            acc = node_hash(got[p], acc)
        out[key] = acc
    return out
