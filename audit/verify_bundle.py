"""The offline bundle verifier: a ``sealtrail.bundle/1`` ZIP in, a report or a ``BundleError`` out.

No database and no network: everything is checked from the ZIP and the keys the examiner pins
(docs/bundle-format.md). In order: the member list (safe names, no bombs, nothing unlisted or
missing); ``manifest.sig`` by a trusted key over the canonical ``manifest.json``; every file's
SHA-256; ``checkpoint.txt`` by a trusted key for the manifest's log; then one streamed pass over
the records (leaf and index, chain, payloads, replay of every decision), the multiproof to the
checkpoint root and every record's own inclusion path, the consistency proof from the previous
export, and the context the decisions name (rule modules, their governance, models). Failures
that concern records are collected (up to ``Limits.max_failures``) and raised together as
``BundleFailed``; one that leaves nothing to trust (a bad signature, an unsafe ZIP) is raised at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from audit.bundle_context import check_context
from audit.bundle_errors import (
    BundleError,
    BundleFailed,
    BundleMalformed,
    BundleTampered,
    BundleUntrusted,
    ProofMismatch,
)
from audit.bundle_reader import MANIFEST, SIGNATURE, BundleArchive, BundleManifest, Limits
from audit.bundle_records import INDEX, PAYLOADS, RECORDS, Findings, RecordTally, scan_records
from audit.canonical import CanonicalError, canonical_bytes
from audit.replay import Replayer
from ledger.checkpoint import SignedCheckpoint
from ledger.errors import KeyFileError, LedgerError, NoteError
from ledger.merkle import verify_consistency, verify_inclusion
from ledger.multiproof import audit_paths, decode_nodes, multiproof_root
from ledger.note import NoteVerifier, open_note
from ledger.records import format_time
from wasm_rules import Sandbox

__all__ = ["UNPINNED_WARNING", "BundleReport", "Limits", "verify_bundle"]

SIG_TITLE = "sealtrail bundle manifest v1"
NODES, CONSISTENCY, PREVIOUS = "proofs/nodes.bin", "proofs/consistency.json", "checkpoints/previous.txt"
UNPINNED_WARNING = (
    "NO TRUSTED KEY PINNED: the signatures were checked only against the keys the bundle itself "
    "names (manifest.log.verifier_keys). Anyone who rewrote the bundle could have replaced those "
    "keys too, so this proves internal consistency, NOT that the bank's ledger produced it. "
    "Pin the ledger's key (--trusted-key) to verify authenticity.")
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BundleReport:
    """What was verified. ``pinned`` is false when only the bundle's own keys were used."""

    path: str
    bundle_id: str
    origin: str
    checkpoint_size: int
    checkpoint_root: str  # base64
    signed_by: tuple[str, ...]  # the vkeys whose signatures held
    pinned: bool
    records: int
    decisions: int
    annotations: int
    context: int
    replayed: int  # decisions re-run through their rule module
    rescored: int  # decisions whose score the numpy model recomputed
    fail_safe: int  # fail-safe HOLDs (nothing to re-run), checked for their shape
    payloads_present: int
    payloads_purged: int
    previous: dict[str, Any] | None
    verified_at: str
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _trusted(manifest: BundleManifest, pinned: Sequence[NoteVerifier]) -> list[NoteVerifier]:
    if pinned:
        return list(pinned)
    try:
        return [NoteVerifier.from_vkey(k) for k in manifest.verifier_keys]
    except KeyFileError as exc:
        raise BundleMalformed(f"log.verifier_keys: {exc}", kind="manifest.field", file=MANIFEST) from None


def _open_manifest(bundle: BundleArchive, pinned: Sequence[NoteVerifier]
                   ) -> tuple[BundleManifest, list[NoteVerifier], list[NoteVerifier]]:
    """The manifest, the keys trusted for this bundle and those that signed its manifest."""
    data = bundle.read(MANIFEST, bundle.limits.max_manifest)
    note = bundle.read(SIGNATURE, 1 << 16)
    manifest = BundleManifest.parse(data)  # parsed before it is trusted: only to find its keys
    keys = _trusted(manifest, pinned)
    try:
        text, good = open_note(note.decode("utf-8"), keys)
    except (NoteError, UnicodeDecodeError) as exc:
        raise BundleUntrusted(f"the manifest signature does not hold: {exc}", kind="manifest.signature",
                              file=SIGNATURE) from None
    lines = text.split("\n")
    digest = hashlib.sha256(data).hexdigest()
    if len(lines) != 4 or lines[0] != SIG_TITLE or lines[3]:
        raise BundleMalformed(f"the signed text is not '{SIG_TITLE}', bundle id, SHA-256",
                              kind="manifest.signature", file=SIGNATURE)
    if lines[2] != digest:
        raise BundleTampered(f"manifest.json hashes to {digest}; the signed note says {lines[2]}",
                             kind="manifest.hash", file=MANIFEST)
    if lines[1] != manifest.bundle_id:
        raise BundleTampered(f"the signed note is for bundle {lines[1]}, the manifest says "
                             f"{manifest.bundle_id}", kind="manifest.bundle_id", file=MANIFEST)
    try:
        canonical = canonical_bytes(manifest.raw) == data
    except CanonicalError:
        canonical = False
    if not canonical:
        raise BundleMalformed("manifest.json is not RFC 8785 canonical JSON", kind="manifest.canonical",
                              file=MANIFEST)
    return manifest, keys, good


def _check_files(bundle: BundleArchive, manifest: BundleManifest, found: Findings) -> None:
    present = set(bundle.sizes) - {MANIFEST, SIGNATURE}
    for name in sorted(present - set(manifest.files)):
        found.add(BundleTampered("the ZIP holds a file the signed manifest does not list",
                                 kind="file.unlisted", file=name))
    for name in sorted(set(manifest.files) - present):
        found.add(BundleTampered("the signed manifest lists a file the ZIP lacks", kind="file.missing",
                                 file=name))
    for name in sorted(present & set(manifest.files) - {RECORDS, INDEX, PAYLOADS}):
        _check_hash(name, bundle.sha256(name), manifest, found)


def _check_hash(name: str, got: str | None, manifest: BundleManifest, found: Findings) -> None:
    want = manifest.files.get(name)
    if got is not None and want is not None and got != want:
        found.add(BundleTampered(f"hashes to {got}, the signed manifest says {want}", kind="file.hash",
                                 file=name))


def _checkpoint(bundle: BundleArchive, name: str, keys: list[NoteVerifier], origin: str,
                size: int, root: bytes, what: str) -> SignedCheckpoint:
    try:
        cp = SignedCheckpoint.verify(bundle.read(name, 1 << 16).decode("utf-8"), keys, origin)
    except (NoteError, UnicodeDecodeError) as exc:
        raise BundleUntrusted(f"the checkpoint does not verify: {exc}", kind="checkpoint.signature",
                              file=name) from None
    c = cp.checkpoint
    if (c.size, c.root) != (size, root):
        raise BundleTampered(f"the signed checkpoint is size {c.size} root {_b64(c.root)}; "
                             f"{what} says size {size} root {_b64(root)}",
                             kind="checkpoint.mismatch", file=name)
    return cp


def _b64(h: bytes) -> str:
    return base64.b64encode(h).decode()


def _check_tree(bundle: BundleArchive, t: RecordTally, size: int, root: bytes, found: Findings) -> None:
    """The multiproof to the checkpoint root, then every record's own audit path."""
    if not t.leaves:
        found.add(ProofMismatch("no record to prove", kind="proof.empty", file=RECORDS))
        return
    try:
        nodes = decode_nodes(bundle.read(NODES, bundle.limits.max_manifest))
        got = multiproof_root(size, t.leaves, nodes)
        if got != root:
            found.add(ProofMismatch(f"records and nodes lead to root {base64.b64encode(got).decode()}, the "
                                    f"checkpoint says {base64.b64encode(root).decode()} (size {size})",
                                    kind="proof.root", file=NODES))
            return
        for index, path in audit_paths(size, t.leaves, nodes):
            try:
                verify_inclusion(index, size, t.leaves[index], path, root)
            except LedgerError as exc:
                found.add(ProofMismatch(str(exc), kind="proof.inclusion", file=NODES, seq=index))
    except LedgerError as exc:  # MultiproofError: malformed, missing or unused nodes
        found.add(ProofMismatch(str(exc), kind="proof.nodes", file=NODES))


def _check_previous(bundle: BundleArchive, m: BundleManifest, keys: list[NoteVerifier],
                    found: Findings) -> dict[str, Any] | None:
    prev = m.previous
    if prev is None:
        for name in (CONSISTENCY, PREVIOUS):
            if name in bundle.sizes:
                found.add(BundleMalformed("present although manifest.previous is null",
                                          kind="previous.unexpected", file=name))
        return None
    try:
        _checkpoint(bundle, PREVIOUS, keys, m.origin, prev.checkpoint_size, prev.checkpoint_root,
                    "manifest.previous")
        doc = orjson.loads(bundle.read(CONSISTENCY))
        proof = [base64.b64decode(h, validate=True) for h in doc["hashes"]]
        stated = (doc["old_size"], doc["new_size"], doc["old_root"], doc["new_root"])
        want = (prev.checkpoint_size, m.checkpoint_size, base64.b64encode(prev.checkpoint_root).decode(),
                base64.b64encode(m.checkpoint_root).decode())
        if stated != want:
            raise ProofMismatch(f"states {stated}, the manifest {want}", kind="proof.consistency",
                                file=CONSISTENCY)
        verify_consistency(prev.checkpoint_size, m.checkpoint_size, proof, prev.checkpoint_root,
                           m.checkpoint_root)
    except BundleError as exc:
        found.add(exc)
    except LedgerError as exc:
        found.add(ProofMismatch(str(exc), kind="proof.consistency", file=CONSISTENCY))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, binascii.Error) as exc:
        found.add(BundleMalformed(f"not a consistency proof: {exc}", kind="proof.consistency",
                                  file=CONSISTENCY))
    return {"bundle_id": prev.bundle_id, "checkpoint_size": prev.checkpoint_size,
            "consistent": not any(f.file in (CONSISTENCY, PREVIOUS) for f in found.items)}


def _check_counts(m: BundleManifest, t: RecordTally, found: Findings) -> None:
    c = m.counts
    by = {k: t.by_decision.get(k, 0) for k in c.by_decision} | dict(t.by_decision)
    pairs = [("records", c.records, t.records), ("decisions", c.decisions, t.decisions),
             ("annotations", c.annotations, t.annotations), ("context", c.context, t.context),
             ("payloads_present", c.payloads_present, t.payloads_present),
             ("payloads_purged", c.payloads_purged, t.payloads_purged),
             ("by_decision", c.by_decision, by), ("range.first_seq", m.first_seq, t.first_seq),
             ("range.last_seq", m.last_seq, t.last_seq),
             ("range.contiguous", m.contiguous, t.last_seq is not None and t.first_seq is not None
              and t.last_seq - t.first_seq + 1 == len(t.leaves) == t.records),
             ("rules", list(m.rules), sorted(t.modules)), ("models", list(m.models), sorted(t.models))]
    for name, stated, got in pairs:
        if stated != got:
            found.add(BundleTampered(f"manifest states {name} = {stated!r}, the records give {got!r}"[:600],
                                     kind="manifest.counts", file=MANIFEST))


def verify_bundle(path: str | Path, trusted_keys: Sequence[NoteVerifier], *, progress: Progress | None = None,
                  now: Callable[[], datetime] | None = None, limits: Limits | None = None,
                  sandbox: Sandbox | None = None) -> BundleReport:
    """Verify the bundle at ``path`` offline; return what held, or raise a ``BundleError``.

    With no ``trusted_keys`` the bundle's own keys are used and the report carries
    ``UNPINNED_WARNING``: that shows the bundle is consistent, not who made it."""
    limits = limits or Limits()
    with BundleArchive(path, limits) as bundle:
        manifest, keys, good = _open_manifest(bundle, trusted_keys)
        found = Findings(limits.max_failures)
        _check_files(bundle, manifest, found)
        cp = _checkpoint(bundle, manifest.checkpoint_file, keys, manifest.origin, manifest.checkpoint_size,
                         manifest.checkpoint_root, "manifest.checkpoint")
        own = sandbox is None
        sb = Sandbox() if sandbox is None else sandbox
        try:
            replayer = Replayer(sb, lambda sha: bundle.read(f"rules/{sha}.wasm"),
                                lambda sha: bundle.read(f"models/{sha}/weights.npz"))
            tally = scan_records(bundle, manifest, replayer, found, progress)
        finally:
            if own:
                sb.close()
        for name, got in tally.hashes.items():
            _check_hash(name, got, manifest, found)
        _check_tree(bundle, tally, cp.checkpoint.size, cp.checkpoint.root, found)
        previous = _check_previous(bundle, manifest, keys, found)
        _check_counts(manifest, tally, found)
        check_context(bundle, manifest, tally, found)
    report = BundleReport(
        path=str(path), bundle_id=manifest.bundle_id, origin=manifest.origin,
        checkpoint_size=cp.checkpoint.size, checkpoint_root=base64.b64encode(cp.checkpoint.root).decode(),
        signed_by=tuple(v.vkey for v in good), pinned=bool(trusted_keys), records=tally.records,
        decisions=tally.decisions, annotations=tally.annotations, context=tally.context,
        replayed=replayer.replayed, rescored=replayer.rescored, fail_safe=replayer.fail_safe,
        payloads_present=tally.payloads_present, payloads_purged=tally.payloads_purged, previous=previous,
        verified_at=format_time((now or (lambda: datetime.now(UTC)))()),
        warnings=() if trusted_keys else (UNPINNED_WARNING,))
    if len(found):
        raise BundleFailed(found.items, found.dropped, report)
    return report
