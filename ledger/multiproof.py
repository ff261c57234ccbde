"""Merkle multiproofs: the subtree hashes that prove many leaves of one RFC 9162 tree at once.

Pure functions over bytes, nothing here touches storage. A subtree is named by its leaf range
``[lo, hi)`` as the RFC 9162 recursion produces it (split at the largest power of two smaller
than ``hi - lo``). The *frontier* of an exported set ``E`` is every subtree that holds no leaf
of ``E`` while its sibling holds at least one: with those hashes and the leaf hashes of ``E``
the root, and every leaf's ordinary audit path, follow (docs/bundle-format.md,
``proofs/nodes.bin``).
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise

from ledger.errors import InclusionError
from ledger.merkle import HASH_SIZE, _split

__all__ = [
    "ITEM_SIZE",
    "MultiproofError",
    "audit_paths",
    "decode_nodes",
    "encode_nodes",
    "frontier",
    "iter_encoded",
    "multiproof_root",
    "verify_multiproof",
]

ITEM_SIZE = 48  # lo (u64 BE) || hi (u64 BE) || hash (32 bytes)
_ITEM = struct.Struct(">QQ32s")
_U64_END = 1 << 64
_MEMO_MIN = 32  # subtrees at least this big keep their hash between the two walks
_BLOCK = 256  # fully exported perfect subtrees up to this size yield their paths in one go
_sha256 = hashlib.sha256

Range = tuple[int, int]


class MultiproofError(InclusionError):
    """A multiproof is malformed, incomplete, carries unused data, or misses the root.

    ``subtree`` or ``leaf`` names the offending item where one can be named; a wrong root
    alone cannot say which hash is bad (the root commits to all of them).
    """

    def __init__(self, message: str, *, subtree: Range | None = None, leaf: int | None = None):
        self.subtree = subtree
        self.leaf = leaf
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries with its evidence
        return (_rebuild, (str(self), self.subtree, self.leaf))


def _rebuild(message: str, subtree: Range | None, leaf: int | None) -> MultiproofError:
    return MultiproofError(message, subtree=subtree, leaf=leaf)


def _check_exported(size: int, exported: Sequence[int]) -> None:
    if size < 1:
        raise MultiproofError(f"a multiproof needs a non-empty tree, got size {size}")
    if not exported:
        raise MultiproofError("no exported leaf: a multiproof proves at least one")
    if exported[0] < 0 or exported[-1] >= size:
        bad = exported[0] if exported[0] < 0 else exported[-1]
        raise MultiproofError(f"leaf index {bad} is outside a tree of size {size}", leaf=bad)
    for x, y in pairwise(exported):
        if x >= y:
            what = "duplicate" if x == y else "out of order"
            raise MultiproofError(f"exported leaf {y} is {what} (after {x})", leaf=y)


def frontier(size: int, exported: Sequence[int]) -> list[Range]:
    """The subtrees ``[lo, hi)`` with no exported leaf whose sibling has one, sorted.

    ``exported`` must be sorted, unique, non-empty and inside the tree. O(k log size).
    """
    _check_exported(size, exported)
    out: list[Range] = []
    stack = [(0, size, 0, len(exported))]
    while stack:
        lo, hi, a, b = stack.pop()
        if a == b:
            out.append((lo, hi))
            continue
        n = hi - lo
        if b - a == n:  # every leaf exported (a single leaf included): nothing to add
            continue
        mid = lo + _split(n)
        m = bisect_left(exported, mid, a, b)
        stack.append((mid, hi, m, b))
        stack.append((lo, mid, a, m))
    return out


def iter_encoded(items: Iterable[tuple[int, int, bytes]]) -> Iterator[bytes]:
    """Each ``(lo, hi, hash)`` as its 48-byte item, refusing unsorted or overlapping input."""
    prev: Range | None = None
    for lo, hi, h in items:
        _check_item(prev, lo, hi, h)
        prev = (lo, hi)
        yield _ITEM.pack(lo, hi, h)


def encode_nodes(items: Iterable[tuple[int, int, bytes]]) -> bytes:
    """``nodes.bin``: items sorted by ``(lo, hi)``, disjoint, each ``lo < hi``, 32-byte hashes."""
    return b"".join(iter_encoded(items))


def decode_nodes(data: bytes) -> dict[Range, bytes]:
    """Parse ``nodes.bin`` into ``{(lo, hi): hash}``; refuse a bad length or item order."""
    if len(data) % ITEM_SIZE:
        raise MultiproofError(
            f"nodes are {len(data)} bytes, not a multiple of the {ITEM_SIZE}-byte item"
        )
    out: dict[Range, bytes] = {}
    prev: Range | None = None
    for lo, hi, h in _ITEM.iter_unpack(data):
        _check_item(prev, lo, hi, h)
        prev = (lo, hi)
        out[prev] = h
    return out


def _check_item(prev: Range | None, lo: int, hi: int, h: bytes) -> None:
    if not 0 <= lo < hi < _U64_END:
        raise MultiproofError(f"node [{lo}, {hi}) is not a non-empty u64 range", subtree=(lo, hi))
    if len(h) != HASH_SIZE:
        raise MultiproofError(
            f"node [{lo}, {hi}) hash is {len(h)} bytes, expected {HASH_SIZE}", subtree=(lo, hi)
        )
    if prev is not None and lo < prev[1]:
        what = "a duplicate" if (lo, hi) == prev else "out of order or overlapping"
        raise MultiproofError(
            f"node [{lo}, {hi}) is {what} after [{prev[0]}, {prev[1]})", subtree=(lo, hi)
        )


class _Tree:
    """One tree, its exported leaves and given nodes; walks the RFC 9162 recursion."""

    __slots__ = ("exported", "leaves", "memo", "nodes", "recording", "size", "used")

    def __init__(self, size: int, leaves: Mapping[int, bytes], nodes: Mapping[Range, bytes]):
        self.size = size
        self.exported = sorted(leaves)
        _check_exported(size, self.exported)
        for i in self.exported:
            if len(leaves[i]) != HASH_SIZE:
                raise MultiproofError(
                    f"leaf {i} hash is {len(leaves[i])} bytes, expected {HASH_SIZE}", leaf=i
                )
        for (lo, hi), h in nodes.items():
            if len(h) != HASH_SIZE:
                raise MultiproofError(
                    f"node [{lo}, {hi}) hash is {len(h)} bytes, expected {HASH_SIZE}",
                    subtree=(lo, hi),
                )
        self.leaves = leaves
        self.nodes = nodes
        self.memo: dict[Range, bytes] = {}
        self.recording = False
        self.used = 0

    def root(self, *, record: bool) -> bytes:
        """The root by the recursion; refuses missing and unused nodes."""
        self.recording = record
        root = self.hash(0, self.size, 0, len(self.exported))
        self.recording = False
        if self.used != len(self.nodes):
            needed = set(frontier(self.size, self.exported))
            unused = sorted(r for r in self.nodes if r not in needed)
            shown = ", ".join(f"[{lo}, {hi})" for lo, hi in unused[:5])
            more = f" and {len(unused) - 5} more" if len(unused) > 5 else ""
            raise MultiproofError(
                f"{len(unused)} node(s) not used by the proof of size {self.size}: {shown}{more}",
                subtree=unused[0],
            )
        return root

    def hash(self, lo: int, hi: int, a: int, b: int) -> bytes:
        """MTH(D[lo:hi]), the exported leaves of it being ``exported[a:b]``."""
        if a == b:
            try:
                h = self.nodes[(lo, hi)]
            except KeyError:
                raise MultiproofError(
                    f"node [{lo}, {hi}) is missing: no exported leaf under it, and the "
                    f"proof of size {self.size} needs its hash", subtree=(lo, hi),
                ) from None
            self.used += 1
            return h
        n = hi - lo
        if n == 1:
            return self.leaves[lo]
        if b - a == n and n & (n - 1) == 0:
            return self.fold(lo, n, keep=False)[-1][0]
        mid = lo + _split(n)
        m = bisect_left(self.exported, mid, a, b)
        h = _sha256(b"\x01" + self.hash(lo, mid, a, m) + self.hash(mid, hi, m, b)).digest()
        if self.recording and n >= _MEMO_MIN:
            self.memo[(lo, hi)] = h
        return h

    def fold(self, lo: int, n: int, *, keep: bool) -> list[list[bytes]]:
        """The levels of the perfect, fully exported subtree ``[lo, lo + n)``, leaves first
        (with ``keep`` false only the root level: a million-leaf fold holds one row at a time)."""
        leaves = self.leaves
        row = [leaves[i] for i in range(lo, lo + n)]
        levels = [row]
        width = 1
        while len(row) > 1:
            row = [_sha256(b"\x01" + row[i] + row[i + 1]).digest() for i in range(0, len(row), 2)]
            if keep:
                levels.append(row)
            width *= 2
            if self.recording and width >= _MEMO_MIN:
                for j, h in enumerate(row):
                    self.memo[(lo + j * width, lo + j * width + width)] = h
        return levels if keep else [row]

    def sibling(self, lo: int, hi: int, a: int, b: int) -> bytes:
        if a == b:
            return self.nodes[(lo, hi)]
        got = self.memo.get((lo, hi))
        return got if got is not None else self.hash(lo, hi, a, b)

    def paths(self) -> Iterator[tuple[int, list[bytes]]]:
        """Every exported leaf's audit path in index order, one walk, O(log size) held."""
        exported = self.exported
        above: list[bytes] = []  # sibling hashes from the root down to the current subtree
        # (op, lo, hi, a, b): 0 visit the subtree, 1 push its hash as a sibling, 2 pop one
        work = [(0, 0, self.size, 0, len(exported))]
        while work:
            op, lo, hi, a, b = work.pop()
            if op == 2:
                above.pop()
                continue
            if op == 1:
                above.append(self.sibling(lo, hi, a, b))
                continue
            n = hi - lo
            if n == 1:
                yield lo, above[::-1]
                continue
            if b - a == n and n & (n - 1) == 0 and n <= _BLOCK:
                levels = self.fold(lo, n, keep=True)
                tail = above[::-1]
                depth = range(len(levels) - 1)
                for j in range(n):
                    yield lo + j, [levels[lvl][(j >> lvl) ^ 1] for lvl in depth] + tail
                continue
            mid = lo + _split(n)
            m = bisect_left(exported, mid, a, b)
            if m < b:  # runs second: right subtree with the left one's hash above it
                work += [(2, 0, 0, 0, 0), (0, mid, hi, m, b), (1, lo, mid, a, m)]
            if a < m:  # runs first: left subtree with the right one's hash above it
                work += [(2, 0, 0, 0, 0), (0, lo, mid, a, m), (1, mid, hi, m, b)]


def multiproof_root(
    size: int, leaves: Mapping[int, bytes], nodes: Mapping[Range, bytes]
) -> bytes:
    """The root of the tree of ``size`` that ``leaves`` (index -> leaf hash) and ``nodes`` give.

    Raises ``MultiproofError`` if a needed node is missing or a given node goes unused.
    """
    return _Tree(size, leaves, nodes).root(record=False)


def verify_multiproof(
    size: int, leaves: Mapping[int, bytes], nodes: Mapping[Range, bytes], root: bytes
) -> None:
    """Return None if ``leaves`` and ``nodes`` prove every leaf in the tree ``(size, root)``."""
    got = multiproof_root(size, leaves, nodes)
    if got != root:
        first, last = min(leaves), max(leaves)
        raise MultiproofError(
            f"multiproof of {len(leaves)} leaves ({first}..{last}) and {len(nodes)} nodes "
            f"leads to root {got.hex()}, expected {root.hex()} at size {size}"
        )


def audit_paths(
    size: int, leaves: Mapping[int, bytes], nodes: Mapping[Range, bytes]
) -> Iterator[tuple[int, list[bytes]]]:
    """Each exported leaf's RFC 9162 audit path (deepest first), in index order.

    Checks the nodes (none missing, none unused) before it returns; the paths are not
    checked against any root: pass each to ``ledger.merkle.verify_inclusion``.
    """
    tree = _Tree(size, leaves, nodes)
    tree.root(record=True)
    return tree.paths()
