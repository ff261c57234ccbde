"""Merkle multiproofs (bundle proofs/nodes.bin): published vectors, stored proofs, attacks."""

from __future__ import annotations

import functools
import itertools
import json
import pickle
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.errors import InclusionError, LedgerError, VerificationError
from ledger.merkle import inclusion_ranges, leaf_hash, node_hash, root_of, verify_inclusion
from ledger.multiproof import (
    ITEM_SIZE,
    MultiproofError,
    audit_paths,
    decode_nodes,
    encode_nodes,
    frontier,
    multiproof_root,
    verify_multiproof,
)
from ledger.multiproof_store import subtree_hashes
from ledger.proofs import inclusion_proof, root_at
from tests.conftest import Db, make_ledger

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "merkle_rfc6962.json").read_text())
Nodes = dict[tuple[int, int], bytes]


def reference_frontier(size: int, exported: Sequence[int]) -> list[tuple[int, int]]:
    """Union of the ordinary audit-path ranges, less those holding an exported leaf."""
    ranges = {r for i in exported for r in inclusion_ranges(i, size)}
    return sorted(r for r in ranges if not any(r[0] <= e < r[1] for e in exported))


def proof_parts(ls: Sequence[bytes], exported: Sequence[int]) -> tuple[dict[int, bytes], Nodes]:
    """Leaves and frontier hashes of ``exported``, hashed independently by ``root_of``."""
    nodes = {(lo, hi): root_of(ls[lo:hi]) for lo, hi in frontier(len(ls), exported)}
    return {i: ls[i] for i in exported}, nodes


def tree(size: int) -> list[bytes]:
    return [leaf_hash(b"leaf %d" % i) for i in range(size)]


def subsets(rng: random.Random, size: int) -> list[list[int]]:
    """Single, all, contiguous runs, sparse and dense random picks of ``range(size)``."""
    a = rng.randrange(size)
    run = list(range(a, min(size, a + rng.randint(1, size))))
    return [
        [rng.randrange(size)], [0], [size - 1], list(range(size)), run,
        sorted(rng.sample(range(size), max(1, size // 20))),
        sorted(rng.sample(range(size), rng.randint(1, size))),
    ]


def flip(h: bytes, bit: int = 0) -> bytes:
    return bytes([h[bit // 8] ^ (1 << bit % 8)]) + h[1:] if bit < 8 else h[:-1] + bytes([h[-1] ^ 1])


# --- published vectors ------------------------------------------------------------------------


def test_every_subset_of_the_rfc6962_vector_trees_gives_the_published_root() -> None:
    ls = [leaf_hash(bytes.fromhex(x)) for x in VECTORS["leaves_hex"]]
    for size, root_hex in enumerate(VECTORS["roots_hex"], 1):
        root = bytes.fromhex(root_hex)
        for k in range(1, size + 1):
            for exported in itertools.combinations(range(size), k):
                leaves, nodes = proof_parts(ls[:size], exported)
                verify_multiproof(size, leaves, nodes, root)


def test_audit_paths_equal_the_published_inclusion_proofs() -> None:
    ls = [leaf_hash(bytes.fromhex(x)) for x in VECTORS["leaves_hex"]]
    for case in VECTORS["inclusion"]:
        index, size = case["leaf"] - 1, case["size"]
        leaves, nodes = proof_parts(ls[:size], [index])
        assert list(audit_paths(size, leaves, nodes)) == [
            (index, [bytes.fromhex(h) for h in case["proof"]])
        ]


# --- the frontier -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 700).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=n))))
def test_frontier_is_the_audit_ranges_without_exported_leaves(case: tuple[int, set[int]]) -> None:
    size, exported = case[0], sorted(case[1])
    got = frontier(size, exported)
    assert got == reference_frontier(size, exported)
    # with the exported leaves, the frontier partitions the tree's leaves
    cells = sorted(got + [(i, i + 1) for i in exported])
    assert cells[0][0] == 0 and cells[-1][1] == size
    assert all(x[1] == y[0] for x, y in itertools.pairwise(cells))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 255, 256, 257, 1000])
def test_frontier_edge_cases(size: int) -> None:
    assert frontier(size, list(range(size))) == []  # everything exported: nothing to add
    for i in {0, size // 2, size - 1}:  # one leaf: its ordinary audit path
        assert frontier(size, [i]) == sorted(inclusion_ranges(i, size))


@pytest.mark.parametrize(("size", "exported", "match"), [
    (0, [0], "non-empty tree"), (5, [], "no exported leaf"), (5, [5], "outside"),
    (5, [-1, 2], "outside"), (5, [1, 1], "duplicate"), (5, [3, 1], "out of order"),
])
def test_frontier_refuses_bad_exports(size: int, exported: list[int], match: str) -> None:
    with pytest.raises(MultiproofError, match=match):
        frontier(size, exported)


def test_frontier_of_a_contiguous_export_is_logarithmic() -> None:
    assert len(frontier(1_000_001, list(range(123_457, 987_654)))) <= 2 * 20


# --- root and paths against a pure reference --------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 400).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=n))))
def test_root_and_every_path_match_the_reference(case: tuple[int, set[int]]) -> None:
    size, exported = case[0], sorted(case[1])
    ls = tree(size)
    leaves, nodes = proof_parts(ls, exported)
    root = root_of(ls)
    assert multiproof_root(size, leaves, nodes) == root
    paths = list(audit_paths(size, leaves, nodes))
    assert [i for i, _ in paths] == exported
    for i, path in paths:
        assert path == [root_of(ls[lo:hi]) for lo, hi in inclusion_ranges(i, size)]
        verify_inclusion(i, size, ls[i], path, root)


def test_large_exports_stay_exact() -> None:
    """A full run across perfect blocks bigger than the path walk's block, and a sparse one."""
    size = 70_001
    ls = tree(size)
    ref = memoised_mth(ls)
    root = ref(0, size)
    rng = random.Random(7)
    for exported in (list(range(1_000, 69_000)), sorted(rng.sample(range(size), 5_000))):
        leaves = {i: ls[i] for i in exported}
        nodes = {r: ref(*r) for r in frontier(size, exported)}
        verify_multiproof(size, leaves, nodes, root)
        for i, path in audit_paths(size, leaves, nodes):
            assert path == [ref(lo, hi) for lo, hi in inclusion_ranges(i, size)]


def memoised_mth(ls: Sequence[bytes]) -> Callable[[int, int], bytes]:
    """MTH(D[lo:hi]) straight from RFC 9162 2.1.1, each subtree hashed once."""

    @functools.cache
    def mth(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return ls[lo]
        k = 1 << ((hi - lo - 1).bit_length() - 1)
        return node_hash(mth(lo, lo + k), mth(lo + k, hi))

    return mth


# --- against proofs served by a real ledger (both dialects) -----------------------------------


def _grown(db: Db, signer: NoteSigner) -> tuple[Ledger, list[bytes]]:
    lg = make_ledger(db, signer, every=64)
    for start in range(0, 300, 37):  # odd batch sizes: strata complete mid-batch
        lg.append_many([Record("test.event", {"n": i}) for i in range(start, start + 37)])
    with lg.engine.connect() as conn:
        ls = [leaf_hash(bytes(r[0])) for r in conn.exec_driver_sql(
            "SELECT record FROM ledger_entries ORDER BY seq")]
    return lg, ls


def test_multiproofs_from_storage_match_stored_inclusion_proofs(db: Db, signer: NoteSigner) -> None:
    lg, ls = _grown(db, signer)
    signed = lg.checkpoint().checkpoint
    rng = random.Random(2026)
    sizes = [1, 2, 3, 16, 17, 64, 255, 256, 257, signed.size, *rng.sample(range(1, 301), 5)]
    try:
        with lg.engine.connect() as conn:
            for size in sizes:
                root = root_at(conn, size)
                assert root == root_of(ls[:size])
                if size == signed.size:
                    assert root == signed.root
                for exported in subsets(rng, size):
                    nodes = subtree_hashes(conn, frontier(size, exported))
                    leaves = {i: ls[i] for i in exported}
                    verify_multiproof(size, leaves, nodes, root)
                    for i, path in audit_paths(size, leaves, nodes):
                        assert path == inclusion_proof(conn, i, size)
                        verify_inclusion(i, size, ls[i], path, root)
    finally:
        lg.engine.dispose()


def test_subtree_hashes_batch_thousands_of_ranges(db: Db, signer: NoteSigner) -> None:
    lg, ls = _grown(db, signer)
    ranges = [(lo, hi) for size in range(2, len(ls) + 1)
              for lo, hi in frontier(size, list(range(0, size, 3)))]
    assert len(ranges) > 5_000
    queries: list[str] = []
    event.listen(lg.engine, "before_cursor_execute", lambda *a: queries.append(a[2]))
    try:
        with lg.engine.connect() as conn:
            got = subtree_hashes(conn, ranges)
            assert len(queries) <= 20  # chunks of hundreds of subtrees, one query a stratum
            assert all(got[(lo, hi)] == root_of(ls[lo:hi]) for lo, hi in ranges)
            with pytest.raises(LedgerError, match="not a Merkle subtree"):
                subtree_hashes(conn, [(3, 7)])
            with pytest.raises(LedgerError, match="incomplete"):
                subtree_hashes(conn, [(256, 512)])  # past the ledger's 300 entries
    finally:
        lg.engine.dispose()


# --- tampering and malformed proofs -----------------------------------------------------------


@pytest.fixture
def proof() -> tuple[int, list[bytes], dict[int, bytes], Nodes]:
    size = 29
    ls = tree(size)
    leaves, nodes = proof_parts(ls, [2, 3, 11, 17, 18, 19, 20, 28])
    return size, ls, leaves, nodes


def test_a_flipped_bit_anywhere_fails(proof: tuple[int, list[bytes], dict[int, bytes], Nodes]) -> None:
    size, ls, leaves, nodes = proof
    root = root_of(ls)
    verify_multiproof(size, leaves, nodes, root)
    for key in nodes:
        for bit in (0, 255):
            bad = {**nodes, key: flip(nodes[key], bit)}
            with pytest.raises(MultiproofError, match=f"expected {root.hex()} at size {size}"):
                verify_multiproof(size, leaves, bad, root)
            # every leaf's ordinary path now fails too: each one climbs through the bad hash
            # (the root commits to all of them, so no single item can be blamed)
            for i, path in audit_paths(size, leaves, bad):
                with pytest.raises(InclusionError, match=f"leaf {i} leads to root"):
                    verify_inclusion(i, size, leaves[i], path, root)
    for i in leaves:
        with pytest.raises(MultiproofError, match="leads to root"):
            verify_multiproof(size, {**leaves, i: flip(leaves[i])}, nodes, root)
    with pytest.raises(MultiproofError, match="leads to root"):
        verify_multiproof(size, leaves, nodes, flip(root))


def test_a_missing_node_is_named(proof: tuple[int, list[bytes], dict[int, bytes], Nodes]) -> None:
    size, _, leaves, nodes = proof
    for key in nodes:
        short = {k: v for k, v in nodes.items() if k != key}
        with pytest.raises(MultiproofError, match=rf"node \[{key[0]}, {key[1]}\) is missing") as e:
            multiproof_root(size, leaves, short)
        assert e.value.subtree == key
        with pytest.raises(MultiproofError, match="is missing"):
            audit_paths(size, leaves, short)  # refused before any path is yielded
    with pytest.raises(MultiproofError, match="is missing"):  # a leaf withheld needs a node
        multiproof_root(size, {k: v for k, v in leaves.items() if k != 11}, nodes)


@pytest.mark.parametrize("extra", [(0, 1), (4, 6), (2, 4), (0, 29), (28, 29), (100, 200)])
def test_an_unused_node_is_refused(
    proof: tuple[int, list[bytes], dict[int, bytes], Nodes], extra: tuple[int, int]
) -> None:
    size, ls, leaves, nodes = proof
    assert extra not in nodes  # inside a frontier node, over exported leaves, or off the tree
    hidden = {**nodes, extra: bytes(32)}
    with pytest.raises(MultiproofError, match=rf"1 node\(s\) not used .*\[{extra[0]}, {extra[1]}\)") as e:
        verify_multiproof(size, leaves, hidden, root_of(ls))
    assert e.value.subtree == extra
    with pytest.raises(MultiproofError, match="not used"):
        audit_paths(size, leaves, hidden)


def test_bad_hash_lengths_and_leaf_indices(proof: tuple[int, list[bytes], dict[int, bytes], Nodes]) -> None:
    size, _, leaves, nodes = proof
    key = next(iter(nodes))
    with pytest.raises(MultiproofError, match=rf"node \[{key[0]}, {key[1]}\) hash is 31 bytes"):
        multiproof_root(size, leaves, {**nodes, key: nodes[key][:31]})
    with pytest.raises(MultiproofError, match="leaf 2 hash is 33 bytes") as e:
        multiproof_root(size, {**leaves, 2: leaves[2] + b"\0"}, nodes)
    assert e.value.leaf == 2
    with pytest.raises(MultiproofError, match="leaf index 29 is outside"):
        multiproof_root(size, {**leaves, 29: bytes(32)}, nodes)
    with pytest.raises(MultiproofError, match="no exported leaf"):
        multiproof_root(size, {}, nodes)


# --- nodes.bin encoding -----------------------------------------------------------------------


def test_encoding_round_trips(proof: tuple[int, list[bytes], dict[int, bytes], Nodes]) -> None:
    _, _, _, nodes = proof
    blob = encode_nodes((lo, hi, h) for (lo, hi), h in sorted(nodes.items()))
    assert len(blob) == ITEM_SIZE * len(nodes)
    assert blob[:16] == item(0, 2)[:16]  # lo, hi big-endian u64: the first frontier node
    assert decode_nodes(blob) == nodes
    assert decode_nodes(b"") == {}


def item(lo: int, hi: int, h: bytes = bytes(32)) -> bytes:
    return lo.to_bytes(8, "big") + hi.to_bytes(8, "big") + h


@pytest.mark.parametrize(("blob", "match"), [
    (item(0, 2)[:-1], "not a multiple of the 48-byte item"),
    (item(0, 2) + item(2, 3)[:20], "not a multiple"),
    (item(0, 2) + item(0, 2), "a duplicate"),
    (item(4, 8) + item(0, 4), "out of order"),
    (item(0, 4) + item(2, 4), "overlapping"),
    (item(3, 3), "not a non-empty"),
    (item(5, 2), "not a non-empty"),
])
def test_decoding_refuses_malformed_nodes(blob: bytes, match: str) -> None:
    with pytest.raises(MultiproofError, match=match):
        decode_nodes(blob)


def test_encoding_refuses_what_decoding_would() -> None:
    for items, match in [
        ([(0, 2, bytes(32)), (0, 2, bytes(32))], "a duplicate"),
        ([(4, 8, bytes(32)), (0, 4, bytes(32))], "out of order"),
        ([(0, 2, bytes(31))], "31 bytes"),
        ([(0, 2 ** 64, bytes(32))], "u64"),
        ([(2, 1, bytes(32))], "non-empty"),
    ]:
        with pytest.raises(MultiproofError, match=match):
            encode_nodes(items)


def test_errors_are_verification_errors_with_their_evidence() -> None:
    err = MultiproofError("node [0, 4) is missing", subtree=(0, 4))
    assert isinstance(err, InclusionError) and isinstance(err, VerificationError)
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.subtree, back.leaf) == (str(err), (0, 4), None)
