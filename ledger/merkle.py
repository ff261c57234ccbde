"""RFC 6962 / RFC 9162 Merkle tree hashing, proofs and their verification.

Pure functions over bytes: nothing here touches storage or the clock. Trees are addressed
by leaf ranges ``[begin, end)``; a range whose length is a power of two and whose start is
a multiple of it is a *perfect subtree* ``(level, index)``, the unit that storage keeps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from ledger.errors import ConsistencyError, InclusionError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "consistency_ranges",
    "inclusion_ranges",
    "leaf_hash",
    "node_hash",
    "perfect_subtrees",
    "range_hash",
    "root_from_inclusion_proof",
    "root_of",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """MTH of a one-leaf tree: SHA-256(0x00 || data)."""
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Interior node: SHA-256(0x01 || left || right)."""
    return _sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """Root of the tree over ``leaf_hashes`` (the empty tree hashes to SHA-256 of nothing)."""
    cr = CompactRange()
    for h in leaf_hashes:
        cr.append(h)
    return cr.root()


class CompactRange:
    """The right edge of a growing tree: one hash per set bit of its size.

    Appending a leaf costs amortised one node hash. ``on_node(level, index, hash)`` is called
    for every perfect subtree completed by an append, so storage can keep what it wants.
    """

    __slots__ = ("hashes", "size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        if size < 0 or len(hashes) != size.bit_count():
            raise ValueError(f"a compact range of size {size} needs {size.bit_count()} hashes")
        self.size = size
        self.hashes = list(hashes)  # biggest subtree first

    def append(
        self, h: bytes, on_node: Callable[[int, int, bytes], None] | None = None
    ) -> None:
        """Append one leaf hash."""
        self.append_subtree(h, 0, on_node)

    def extend(self, leaves: Sequence[bytes], stride: int = 1) -> list[tuple[int, int, bytes]]:
        """Append many leaf hashes; return the completed subtrees ``(level, index, hash)``
        whose level is a positive multiple of ``stride`` (what storage keeps)."""
        hashes = self.hashes
        pop, push = hashes.pop, hashes.append
        sha = _sha256
        kept: list[tuple[int, int, bytes]] = []
        start = self.size
        for n, h in enumerate(leaves, start):
            size = n
            level = 0
            while size & 1:
                h = sha(b"\x01" + pop() + h).digest()
                size >>= 1
                level += 1
                if level % stride == 0:
                    kept.append((level, size, h))
            push(h)
        self.size = start + len(leaves)
        return kept

    def append_subtree(
        self, h: bytes, level: int, on_node: Callable[[int, int, bytes], None] | None = None
    ) -> None:
        """Append the hash of a whole perfect subtree of ``2**level`` leaves."""
        if self.size & ((1 << level) - 1):
            raise ValueError(f"size {self.size} is not aligned to a level-{level} subtree")
        hashes = self.hashes
        grown = 1 << level
        size = self.size >> level
        while size & 1:
            h = _sha256(b"\x01" + hashes.pop() + h).digest()
            size >>= 1
            level += 1
            if on_node is not None:
                on_node(level, size, h)
        hashes.append(h)
        self.size += grown

    def copy(self) -> CompactRange:
        return CompactRange(self.size, list(self.hashes))

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        it = reversed(self.hashes)
        acc = next(it)
        for h in it:
            acc = _sha256(b"\x01" + h + acc).digest()
        return acc


def perfect_subtrees(begin: int, end: int) -> list[tuple[int, int]]:
    """Decompose ``[begin, end)`` as RFC 6962 does into perfect subtrees ``(level, index)``.

    Valid for the ranges that RFC 6962 proofs use: ``begin`` is a multiple of the largest
    power of two not exceeding ``end - begin`` (always true for proof ranges).
    """
    out: list[tuple[int, int]] = []
    while begin < end:
        n = end - begin
        if n & (n - 1) == 0 and begin % n == 0:
            lvl = n.bit_length() - 1
            out.append((lvl, begin >> lvl))
            break
        k = _split(n)
        if begin % k:
            raise ValueError(f"range [{begin}, {end}) is not a Merkle subtree")
        lvl = k.bit_length() - 1
        out.append((lvl, begin >> lvl))
        begin += k
    return out


def range_hash(begin: int, end: int, perfect: Callable[[int, int], bytes]) -> bytes:
    """MTH(D[begin:end]) from the perfect-subtree hashes that ``perfect(level, index)`` gives."""
    parts = [perfect(lvl, idx) for lvl, idx in perfect_subtrees(begin, end)]
    acc = parts[-1]
    for h in reversed(parts[:-1]):
        acc = node_hash(h, acc)
    return acc


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes form PATH(index, D[0:size]), deepest first (RFC 9162 2.1.3)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of size {size}")
    out: list[tuple[int, int]] = []
    begin, end = 0, size
    while end - begin > 1:
        k = _split(end - begin)
        if index < begin + k:
            out.append((begin + k, end))
            end = begin + k
        else:
            out.append((begin, begin + k))
            begin += k
    out.reverse()
    return out


def consistency_ranges(size1: int, size2: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes form PROOF(size1, D[0:size2]) (RFC 9162 2.1.4)."""
    if not 0 <= size1 <= size2:
        raise ValueError(f"no consistency proof from size {size1} to size {size2}")
    if size1 == 0 or size1 == size2:
        return []
    out: list[tuple[int, int]] = []
    begin, end, m, complete = 0, size2, size1, True
    while True:
        n = end - begin
        if m == n:
            if not complete:
                out.append((begin, end))
            break
        k = _split(n)
        if m <= k:
            out.append((begin + k, end))
            end = begin + k
        else:
            out.append((begin, begin + k))
            begin += k
            m -= k
            complete = False
    out.reverse()
    return out


def _check_hash(name: str, h: bytes) -> None:
    if len(h) != HASH_SIZE:
        raise InclusionError(f"{name} is {len(h)} bytes, expected {HASH_SIZE}")


def root_from_inclusion_proof(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes]
) -> bytes:
    """Recompute the root that ``proof`` connects ``leaf`` (at ``index``) to (RFC 9162 2.1.3.2)."""
    if not 0 <= index < size:
        raise InclusionError(f"leaf index {index} is outside a tree of size {size}")
    _check_hash("leaf hash", leaf)
    fn, sn = index, size - 1
    r = leaf
    for i, p in enumerate(proof):
        _check_hash(f"proof[{i}]", p)
        if sn == 0:
            raise InclusionError(f"proof has {len(proof)} hashes, more than the path needs")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise InclusionError(f"proof has {len(proof)} hashes, fewer than the path needs")
    return r


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Return None if ``proof`` shows ``leaf`` at ``index`` in the tree ``(size, root)``; raise."""
    got = root_from_inclusion_proof(index, size, leaf, proof)
    if got != root:
        raise InclusionError(
            f"inclusion proof for leaf {index} leads to root {got.hex()}, "
            f"expected {root.hex()} at size {size}"
        )


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Return None if ``proof`` shows tree ``(size1, root1)`` is a prefix of ``(size2, root2)``."""
    if size2 < size1:
        raise ConsistencyError(f"size {size2} is older than size {size1}")
    for i, p in enumerate(proof):
        if len(p) != HASH_SIZE:
            raise ConsistencyError(f"proof[{i}] is {len(p)} bytes, expected {HASH_SIZE}")
    if size1 == size2:
        if proof:
            raise ConsistencyError("equal sizes need an empty proof")
        if root1 != root2:
            raise ConsistencyError(f"roots differ at the same size {size1}")
        return
    if size1 == 0:
        if proof:
            raise ConsistencyError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise ConsistencyError(f"empty proof from size {size1} to {size2}")
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: its root is the first node
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ConsistencyError(f"proof has {len(proof)} hashes, more than it needs")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ConsistencyError(f"proof has {len(proof)} hashes, fewer than it needs")
    if fr != root1:
        raise ConsistencyError(
            f"proof does not reproduce the size-{size1} root {root1.hex()} (got {fr.hex()})"
        )
    if sr != root2:
        raise ConsistencyError(
            f"proof does not reproduce the size-{size2} root {root2.hex()} (got {sr.hex()})"
        )
