"""Merkle multiproof of an export (bundle proofs/nodes.bin): time and memory at a million leaves.

Pure computation, no database. For a contiguous and a sparse export it times the frontier,
the encoding, the root recomputation and every audit path, with tracemalloc's peak, against
the floor of hashing the whole tree once (``root_of`` over every leaf) in the same run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bench.machine import host_info
from bench.workload import SEED
from ledger.merkle import CompactRange, verify_inclusion
from ledger.multiproof import (
    audit_paths,
    decode_nodes,
    encode_nodes,
    frontier,
    multiproof_root,
)

T = TypeVar("T")


def measured(fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``, its seconds, and (a second run, traced) the MiB allocated at its peak.

    Timed untraced: tracemalloc slows allocation-heavy code two to three times.
    """
    started = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, seconds, peak / 2**20


def fake_leaf(i: int) -> bytes:
    """A distinct 32-byte leaf hash per index (hashing records is not what is timed)."""
    return i.to_bytes(8, "big") * 4


class Tree:
    """Every leaf hash of the tree: the 'storage' the frontier hashes are computed from."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.leaves = [fake_leaf(i) for i in range(size)]
        self.root = self.subtree(0, size)

    def subtree(self, lo: int, hi: int) -> bytes:
        """MTH(D[lo:hi]) by the streaming compact range (independent of the multiproof code)."""
        cr = CompactRange()
        cr.extend(self.leaves[lo:hi])
        return cr.root()


def run_case(name: str, tree: Tree, exported: list[int], check_every: int) -> dict[str, Any]:
    """Time one export's multiproof from frontier to audit paths; verify a sample of paths."""
    size = tree.size
    ranges, t_front, m_front = measured(lambda: frontier(size, exported))
    hashes = [(lo, hi, tree.subtree(lo, hi)) for lo, hi in ranges]
    blob, t_enc, _ = measured(lambda: encode_nodes(hashes))
    nodes, t_dec, _ = measured(lambda: decode_nodes(blob))
    leaves = {i: tree.leaves[i] for i in exported}
    root, t_root, m_root = measured(lambda: multiproof_root(size, leaves, nodes))
    if root != tree.root:
        raise RuntimeError(f"{name}: multiproof root differs from the tree's")

    def walk() -> int:
        n = 0
        for i, path in audit_paths(size, leaves, nodes):
            if n % check_every == 0:
                verify_inclusion(i, size, leaves[i], path, root)
            n += 1
        return n

    count, t_paths, m_paths = measured(walk)
    if count != len(exported):
        raise RuntimeError(f"{name}: {count} paths for {len(exported)} leaves")
    path_bytes = sum(32 * len(p) for _, p in audit_paths(size, {exported[0]: leaves[exported[0]]},
                     {(lo, hi): h for lo, hi, h in _single(tree, exported[0])}))
    return {
        "case": name, "leaves": len(exported), "nodes": len(ranges), "nodes_bytes": len(blob),
        "per_record_proof_bytes_one": path_bytes,
        "frontier_s": t_front, "frontier_mib": m_front, "encode_s": t_enc, "decode_s": t_dec,
        "root_s": t_root, "root_mib": m_root, "paths_s": t_paths, "paths_mib": m_paths,
    }


def _single(tree: Tree, i: int) -> list[tuple[int, int, bytes]]:
    return [(lo, hi, tree.subtree(lo, hi)) for lo, hi in frontier(tree.size, [i])]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1_200_000, help="tree size (leaves)")
    ap.add_argument("--contiguous", type=int, default=1_000_000, help="leaves in the run export")
    ap.add_argument("--sparse", type=int, default=100_000, help="leaves in the scattered export")
    ap.add_argument("--check-every", type=int, default=97, help="verify every n-th path")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    machine = host_info()
    print(f"CPU:    {machine['cpu']} ({machine['cores']} cores; one thread timed)")
    print(f"OS:     {machine['os']}; Python {machine['python']}")
    tree = Tree(args.size)
    _, t_floor, _ = measured(lambda: tree.subtree(0, args.size))
    print(f"floor:  root_of over all {args.size:,} leaves {t_floor:.2f} s")
    rng = random.Random(SEED)
    start = (args.size - args.contiguous) // 2
    cases = [
        ("contiguous", list(range(start, start + args.contiguous))),
        ("sparse", sorted(rng.sample(range(args.size), args.sparse))),
    ]
    for name, exported in cases:
        r = run_case(name, tree, exported, args.check_every)
        print(f"{name:>10}: {r['leaves']:,} leaves, {r['nodes']:,} nodes ({r['nodes_bytes']:,} B; "
              f"one per-record proof alone {r['per_record_proof_bytes_one']} B)")
        print(f"{'':>10}  frontier {r['frontier_s']:.2f} s, encode {r['encode_s']:.2f} s, "
              f"decode {r['decode_s']:.2f} s")
        print(f"{'':>10}  root {r['root_s']:.2f} s ({r['root_s'] / t_floor:.2f}x floor), "
              f"peak {r['root_mib']:.0f} MiB")
        print(f"{'':>10}  audit paths {r['paths_s']:.2f} s ({r['paths_s'] / t_floor:.2f}x floor), "
              f"peak {r['paths_mib']:.0f} MiB (1 in {args.check_every} verified)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
