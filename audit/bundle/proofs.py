"""The Merkle checks of a bundle: every record proved against the signed checkpoint.

The leaf hash of every line of ``records.jsonl`` at the seq ``index.jsonl`` gives it, with
``proofs/nodes.bin``, must rebuild ``checkpoint.root`` (``ledger.multiproof``), and each record's
own RFC 9162 audit path, read off the same recursion, must pass ``ledger.merkle.verify_inclusion``:
an inclusion proof for every record. That is ~20 hashes a record in Python (~25 s for a million),
so where the platform can fork, a second process does it from its own read of the two files while
the verifier's record pass runs (``start_tree_check``). The consistency proof from the previous
export is checked here too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import multiprocessing
import os
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from audit.bundle.reader import BundleArchive, BundleManifest, Limits, LineStream
from audit.bundle.records import INDEX, RECORDS, LeafHashes
from audit.errors import (
    BundleError,
    BundleMalformed,
    BundleTampered,
    BundleUntrusted,
    ProofMismatch,
)
from ledger.checkpoint import SignedCheckpoint
from ledger.errors import LedgerError, NoteError
from ledger.merkle import verify_consistency, verify_inclusion
from ledger.multiproof import audit_paths, decode_nodes, multiproof_root
from ledger.note import NoteVerifier

__all__ = ["CONSISTENCY", "NODES", "PREVIOUS", "TreeCheck", "check_previous", "check_tree",
           "start_tree_check", "verify_checkpoint"]

NODES, CONSISTENCY, PREVIOUS = "proofs/nodes.bin", "proofs/consistency.json", "checkpoints/previous.txt"
_MAX_REPORTED = 100


def _b64(h: bytes) -> str:
    return base64.b64encode(h).decode()


def _leaves(bundle: BundleArchive,
            extra: Sequence[tuple[int, bytes]] = ()) -> tuple[LeafHashes, list[BundleError]]:
    """Leaf hash of each record line at the seq its index line gives (lines the record pass
    refuses, it reports; here they are only left out, which the root then refuses), merged in
    seq order with the ``extra`` leaves (a case bundle's withheld ones, ascending; one at the seq
    of a line is left out here, and the case check reports it)."""
    leaves = LeafHashes()
    last = -1
    sha256, loads = hashlib.sha256, orjson.loads
    more = iter(extra)
    nxt = next(more, None)
    for line, ix in zip(LineStream(bundle, RECORDS), LineStream(bundle, INDEX), strict=False):
        try:
            seq = loads(ix)["seq"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
        if type(seq) is int and seq > last:
            while nxt is not None and nxt[0] <= seq:
                if last < nxt[0] < seq:
                    leaves.append(*nxt)
                    last = nxt[0]
                nxt = next(more, None)
            leaves.append(seq, sha256(b"\x00" + line).digest())
            last = seq
    while nxt is not None:
        if nxt[0] > last:
            leaves.append(*nxt)
            last = nxt[0]
        nxt = next(more, None)
    return leaves, []


def check_tree(bundle: BundleArchive, size: int, root: bytes,
               extra: Sequence[tuple[int, bytes]] = ()) -> list[BundleError]:
    """The multiproof to the checkpoint root, then the audit path of every record (and of every
    ``extra`` leaf: a case bundle's withheld ones)."""
    try:
        leaves, out = _leaves(bundle, extra)
        if not leaves:
            return [ProofMismatch("no record to prove", kind="proof.empty", file=RECORDS)]
        nodes = decode_nodes(bundle.read(NODES, bundle.limits.max_manifest))
        got = multiproof_root(size, leaves, nodes)
        if got != root:
            return [ProofMismatch(f"records and nodes lead to root {_b64(got)}, the checkpoint says "
                                  f"{_b64(root)} (size {size})", kind="proof.root", file=NODES)]
        for index, path in audit_paths(size, leaves, nodes):
            try:
                verify_inclusion(index, size, leaves[index], path, root)
            except LedgerError as exc:
                out.append(ProofMismatch(str(exc), kind="proof.inclusion", file=NODES, seq=index))
                if len(out) >= _MAX_REPORTED:
                    break
        return out
    except BundleError as exc:
        return [exc]
    except LedgerError as exc:  # MultiproofError: malformed, missing or unused nodes
        return [ProofMismatch(str(exc), kind="proof.nodes", file=NODES)]


def _child(conn: Connection, path: str, limits: Limits, size: int, root: bytes,
           extra: Sequence[tuple[int, bytes]]) -> None:
    try:
        with BundleArchive(path, limits) as bundle:
            result: Any = check_tree(bundle, size, root, extra)
    except BaseException as exc:
        result = [ProofMismatch(f"the proof check failed: {type(exc).__name__}: {exc}", kind="proof.worker",
                                file=NODES)]
    conn.send(result)
    conn.close()


class TreeCheck:
    """``check_tree`` running in a forked process, or deferred to ``result`` where there is none."""

    def __init__(self, path: str | Path, limits: Limits, size: int, root: bytes, parallel: bool,
                 extra: Sequence[tuple[int, bytes]] = ()) -> None:
        self._size, self._root, self._extra = size, root, tuple(extra)
        self._proc: Any = None
        if parallel:
            ctx = multiprocessing.get_context("fork")
            self._recv, send = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(target=_child, args=(send, str(path), limits, size, root, self._extra),
                                     daemon=True)
            self._proc.start()
            send.close()

    def result(self, bundle: BundleArchive) -> list[BundleError]:
        """The failures (waiting for the process, or computing them now on ``bundle``)."""
        if self._proc is None:
            return check_tree(bundle, self._size, self._root, self._extra)
        try:
            got: list[BundleError] = self._recv.recv()
        except EOFError:
            got = [ProofMismatch(f"the proof process died (exit code {self._proc.exitcode})",
                                 kind="proof.worker", file=NODES)]
        finally:
            self._recv.close()
        self._proc.join()
        self._proc = None
        return got

    def cancel(self) -> None:
        """Stop the process (the verification ended early); a no-op once ``result`` returned."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join()
            self._recv.close()
            self._proc = None


def start_tree_check(path: str | Path, limits: Limits, size: int, root: bytes, *,
                     parallel: bool | None = None, extra: Sequence[tuple[int, bytes]] = ()) -> TreeCheck:
    """Start ``check_tree`` in a forked process when ``parallel`` (default: the platform can fork
    and there are two CPUs or more); otherwise ``TreeCheck.result`` runs it serially. ``extra``:
    leaves proved beside the records (a case bundle's withheld leaves, ascending seq)."""
    if parallel is None:
        parallel = "fork" in multiprocessing.get_all_start_methods() and (os.cpu_count() or 1) >= 2
    return TreeCheck(path, limits, size, root, parallel, extra)


def verify_checkpoint(bundle: BundleArchive, name: str, keys: list[NoteVerifier], origin: str, size: int,
                root: bytes, what: str) -> SignedCheckpoint:
    """The checkpoint note ``name``, signed by one of ``keys`` for ``origin``, of ``(size, root)``."""
    try:
        cp = SignedCheckpoint.verify(bundle.read(name, 1 << 16).decode("utf-8"), keys, origin)
    except (NoteError, UnicodeDecodeError) as exc:
        raise BundleUntrusted(f"the checkpoint does not verify: {exc}", kind="checkpoint.signature",
                              file=name) from None
    c = cp.checkpoint
    if (c.size, c.root) != (size, root):
        raise BundleTampered(f"the signed checkpoint is size {c.size} root {_b64(c.root)}; {what} says "
                             f"size {size} root {_b64(root)}", kind="checkpoint.mismatch", file=name)
    return cp


def check_previous(bundle: BundleArchive, m: BundleManifest, keys: list[NoteVerifier]
                   ) -> tuple[dict[str, Any] | None, list[BundleError]]:
    """The previous export's checkpoint and the consistency proof from it to this one."""
    prev = m.previous
    if prev is None:
        return None, [BundleMalformed("present although manifest.previous is null",
                                      kind="previous.unexpected", file=name)
                      for name in (CONSISTENCY, PREVIOUS) if name in bundle.sizes]
    out: list[BundleError] = []
    try:
        verify_checkpoint(bundle, PREVIOUS, keys, m.origin, prev.checkpoint_size, prev.checkpoint_root,
                    "manifest.previous")
        doc = orjson.loads(bundle.read(CONSISTENCY))
        proof = [base64.b64decode(h, validate=True) for h in doc["hashes"]]
        stated = (doc["old_size"], doc["new_size"], doc["old_root"], doc["new_root"])
        want = (prev.checkpoint_size, m.checkpoint_size, _b64(prev.checkpoint_root), _b64(m.checkpoint_root))
        if stated != want:
            raise ProofMismatch(f"states {stated}, the manifest {want}", kind="proof.consistency",
                                file=CONSISTENCY)
        verify_consistency(prev.checkpoint_size, m.checkpoint_size, proof, prev.checkpoint_root,
                           m.checkpoint_root)
    except BundleError as exc:
        out.append(exc)
    except LedgerError as exc:
        out.append(ProofMismatch(str(exc), kind="proof.consistency", file=CONSISTENCY))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
        out.append(BundleMalformed(f"not a consistency proof: {exc}", kind="proof.consistency",
                                   file=CONSISTENCY))
    return ({"bundle_id": prev.bundle_id, "checkpoint_size": prev.checkpoint_size, "consistent": not out},
            out)
