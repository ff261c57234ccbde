"""RFC 6962 hashing and proofs against transparency-dev/merkle's known answers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import merkle
from ledger.errors import ConsistencyError, InclusionError

VEC = json.loads((Path(__file__).parents[1] / "vectors" / "merkle_rfc6962.json").read_text())
LEAVES = [merkle.leaf_hash(bytes.fromhex(x)) for x in VEC["leaves_hex"]]
ROOTS = [bytes.fromhex(x) for x in VEC["roots_hex"]]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def reference_mth(leaves: list[bytes]) -> bytes:
    """MTH straight from RFC 9162 section 2.1.1, recursive: the independent reference."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return merkle.node_hash(reference_mth(leaves[:k]), reference_mth(leaves[k:]))


def proof_hashes(ranges: list[tuple[int, int]], leaves: list[bytes]) -> list[bytes]:
    return [reference_mth(leaves[b:e]) for b, e in ranges]


def test_roots_for_sizes_1_to_8() -> None:
    for n in range(1, 9):
        assert merkle.root_of(LEAVES[:n]) == ROOTS[n - 1]
    assert ROOTS[7].hex() == "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"


def test_empty_tree_root_is_hash_of_nothing() -> None:
    assert merkle.root_of([]) == hashlib.sha256(b"").digest()


@pytest.mark.parametrize("case", VEC["inclusion"], ids=lambda c: f"{c['leaf']}-of-{c['size']}")
def test_inclusion_vectors(case: dict[str, object]) -> None:
    index, size = int(case["leaf"]) - 1, int(case["size"])  # type: ignore[call-overload]
    want = [bytes.fromhex(h) for h in case["proof"]]  # type: ignore[attr-defined]
    assert proof_hashes(merkle.inclusion_ranges(index, size), LEAVES) == want
    merkle.verify_inclusion(index, size, LEAVES[index], want, ROOTS[size - 1])


@pytest.mark.parametrize("case", VEC["consistency"], ids=lambda c: f"{c['size1']}-{c['size2']}")
def test_consistency_vectors(case: dict[str, int | list[str]]) -> None:
    s1, s2 = int(case["size1"]), int(case["size2"])  # type: ignore[arg-type]
    want = [bytes.fromhex(h) for h in case["proof"]]  # type: ignore[union-attr]
    assert proof_hashes(merkle.consistency_ranges(s1, s2), LEAVES) == want
    merkle.verify_consistency(s1, s2, want, ROOTS[s1 - 1], ROOTS[s2 - 1])


def _inclusion_probes(index: int, size: int, proof: list[bytes], root: bytes, leaf: bytes):  # type: ignore[no-untyped-def]
    """The corruptions transparency-dev's verifier tests apply (each must fail)."""
    yield index - 1, size, leaf, proof, root
    yield index + 1, size, leaf, proof, root
    yield index ^ 2, size, leaf, proof, root
    yield index, size * 2, leaf, proof, root
    yield index, size // 2, leaf, proof, root
    yield index, size, b"WrongLeaf", proof, root
    yield index, size, leaf, proof, hashlib.sha256(b"").digest()
    yield index, size, leaf, proof, SOME_HASH
    yield index, size, leaf, [*proof, b""], root
    yield index, size, leaf, [*proof, root], root
    yield index, size, leaf, [b"", *proof], root
    yield index, size, leaf, [root, *proof], root
    for i in range(len(proof)):
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 8]) + bad[i][1:]
        yield index, size, leaf, bad, root
    if proof:
        yield index, size, leaf, proof[:-1], root
    if len(proof) > 1:
        yield index, size, leaf, [proof[0], SOME_HASH, *proof[1:]], root


@pytest.mark.parametrize("case", VEC["inclusion"][1:], ids=lambda c: f"{c['leaf']}-of-{c['size']}")
def test_corrupted_inclusion_proofs_fail(case: dict[str, object]) -> None:
    index, size = int(case["leaf"]) - 1, int(case["size"])  # type: ignore[call-overload]
    proof = [bytes.fromhex(h) for h in case["proof"]]  # type: ignore[attr-defined]
    for i, s, leaf, p, root in _inclusion_probes(index, size, proof, ROOTS[size - 1], LEAVES[index]):
        with pytest.raises(InclusionError):
            merkle.verify_inclusion(i, s, leaf, p, root)


@pytest.mark.parametrize("case", VEC["consistency"][1:], ids=lambda c: f"{c['size1']}-{c['size2']}")
def test_corrupted_consistency_proofs_fail(case: dict[str, int | list[str]]) -> None:
    s1, s2 = int(case["size1"]), int(case["size2"])  # type: ignore[arg-type]
    proof = [bytes.fromhex(h) for h in case["proof"]]  # type: ignore[union-attr]
    r1, r2 = ROOTS[s1 - 1], ROOTS[s2 - 1]
    probes = [
        (s1 - 1, s2, r1, r2, proof), (s1 + 1, s2, r1, r2, proof), (s1 ^ 2, s2, r1, r2, proof),
        (s1, s2 * 2, r1, r2, proof), (s1, s2 // 2, r1, r2, proof),
        (s1, s2, b"WrongRoot", r2, proof), (s1, s2, r1, b"WrongRoot", proof),
        (s1, s2, r2, r1, proof), (s1, s2, r1, r2, []),
        (s1, s2, r1, r2, [*proof, b""]), (s1, s2, r1, r2, [*proof, r1]),
        (s1, s2, r1, r2, [*proof, r2]), (s1, s2, r1, r2, [b"", *proof]),
        (s1, s2, r1, r2, [r1, *proof]), (s1, s2, r1, r2, [r2, *proof]),
        (s1, s2, r1, r2, [proof[0], *proof]), (s1, s2, r1, r2, proof[:-1]),
    ]
    for i in range(len(proof)):
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 16]) + bad[i][1:]
        probes.append((s1, s2, r1, r2, bad))
    for a, b, x, y, p in probes:
        if (a, b, x, y, p) == (s1, s2, r1, r2, proof):
            continue
        with pytest.raises((ConsistencyError, ValueError)):
            merkle.verify_consistency(a, b, p, x, y)


def test_trivial_consistency_cases() -> None:
    r1, r2 = b"don't care 1", b"don't care 2"
    merkle.verify_consistency(0, 0, [], r1, r1)
    merkle.verify_consistency(0, 1, [], r1, r2)
    merkle.verify_consistency(1, 1, [], r2, r2)
    for args in [(0, 0, [], r1, r2), (1, 1, [], r1, r2), (1, 0, [], r1, r2), (2, 1, [], r1, r2),
                 (1, 2, [], r1, r2), (1, 1, [SOME_HASH], r1, r1)]:
        with pytest.raises(ConsistencyError):
            merkle.verify_consistency(*args)  # type: ignore[arg-type]


def test_inclusion_out_of_range_and_wrong_lengths() -> None:
    with pytest.raises(InclusionError):
        merkle.verify_inclusion(0, 0, SOME_HASH, [], SOME_HASH)
    with pytest.raises(InclusionError):
        merkle.verify_inclusion(0, 1, b"short", [], b"short")
    with pytest.raises(ValueError):
        merkle.inclusion_ranges(5, 5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=70), st.data())
def test_proofs_match_the_recursive_definition(data: list[bytes], draw: st.DataObject) -> None:
    leaves = [merkle.leaf_hash(d) for d in data]
    n = len(leaves)
    root = merkle.root_of(leaves)
    assert root == reference_mth(leaves)
    i = draw.draw(st.integers(0, n - 1))
    merkle.verify_inclusion(i, n, leaves[i], proof_hashes(merkle.inclusion_ranges(i, n), leaves), root)
    m = draw.draw(st.integers(1, n))
    proof = proof_hashes(merkle.consistency_ranges(m, n), leaves)
    merkle.verify_consistency(m, n, proof, reference_mth(leaves[:m]), root)


def test_compact_range_reports_every_completed_subtree() -> None:
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(37)]
    seen: dict[tuple[int, int], bytes] = {}
    cr = merkle.CompactRange()
    for h in leaves:
        cr.append(h, lambda lv, ix, hh: seen.__setitem__((lv, ix), hh))
    assert len(seen) == 37 - bin(37).count("1")  # n - popcount(n) internal perfect nodes
    for (lv, ix), h in seen.items():
        assert h == reference_mth(leaves[ix << lv : (ix + 1) << lv])
    bulk = merkle.CompactRange()
    bulk.append_subtree(reference_mth(leaves[:32]), 5)
    for h in leaves[32:]:
        bulk.append(h)
    assert bulk.root() == cr.root() == reference_mth(leaves)
    with pytest.raises(ValueError):
        bulk.append_subtree(SOME_HASH, 3)
