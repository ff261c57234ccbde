"""The offline bundle verifier: a ``sealtrail.bundle/9`` (or ``/8`` to ``/1``) ZIP in, a report or a
``BundleError`` out.

No database and no network: everything is checked from the ZIP and the keys the examiner pins
(docs/bundle-format.md). In order: the member list (safe names, no bombs, nothing unlisted or
missing); ``manifest.sig`` by a trusted key over the canonical ``manifest.json``; every file's
SHA-256; ``checkpoint.txt`` by a trusted key for the manifest's log; then one streamed pass over
the records (leaf and index, chain, payloads, replay of every decision), the multiproof to the
checkpoint root and every record's own inclusion path, the consistency proof from the previous
export, and the context the decisions name (rule modules, their governance, models). A format-2
bundle's decision summaries prove the selection complete (``audit.bundle.completeness``); a
format-1 bundle verifies as before, reported "completeness not proven". A format-3 bundle also
carries the refusal records of its window, replayed where their payload is present; a format-4
bundle proves them complete too (their summaries, ``sealtrail.decision.summary/2``). A format-5
bundle cut for one case carries no summaries: its case's history is re-derived instead, by the
case fold the bank's view runs, against ``case/case.json`` (``audit.bundle.cases``), and the
other cases' events of its range are proved as withheld leaves. A format-9 bundle's compliance facts (of
its window, or of the period a case's records span) are recomputed from its records
(``audit.bundle.compliance``). Failures
that concern records are collected (up to ``Limits.max_failures``) and raised together as
``BundleFailed``; one that leaves nothing to trust (a bad signature, an unsafe ZIP) is raised at once.
"""

from __future__ import annotations

import base64
import gc
import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.bundle.case_doc import CASE_FILE, CaseDoc
from audit.bundle.completeness import CompletenessCheck, CompletenessReport, not_proven_v1
from audit.bundle.compliance import ComplianceCheck
from audit.bundle.context import check_context
from audit.bundle.proofs import check_previous, start_tree_check, verify_checkpoint
from audit.bundle.reader import MANIFEST, SIGNATURE, BundleArchive, BundleManifest, Limits, LineStream
from audit.bundle.records import INDEX, PAYLOADS, RECORDS, Findings, RecordTally, scan_records
from audit.bundle.rederive import STATE_INDEX, STATE_RECORDS, Rederiver, read_state
from audit.bundle.replay import Replayer
from audit.bundle.rescreen import Rescreener
from audit.bundle.witnesses import check_witnesses
from audit.errors import (
    BundleFailed,
    BundleMalformed,
    BundleTampered,
    BundleUntrusted,
)
from ledger.cosignature import CosignerVerifier
from ledger.errors import KeyFileError, NoteError
from ledger.jcs import CanonicalError, canonical_bytes
from ledger.note import NoteVerifier, open_note
from ledger.records import format_time
from wasm_rules import Sandbox

if TYPE_CHECKING:
    from audit.bundle.cases import CaseCheck, CaseReport

__all__ = ["UNPINNED_WARNING", "BundleReport", "Limits", "verify_bundle"]

SIG_TITLE = "sealtrail bundle manifest v1"
UNPINNED_WARNING = (
    "NO TRUSTED KEY PINNED: the signatures were checked only against the keys the bundle itself "
    "names (manifest.log.verifier_keys). Anyone who rewrote the bundle could have replaced those "
    "keys too, so this proves internal consistency, NOT that the bank's ledger produced it. "
    "Pin the ledger's key (--trusted-key) to verify authenticity.")
Progress = Callable[[int, int], None]
_MAX_LIST = 256 << 20  # a list's bytes (audit.screening.lists.MAX_LIST_BYTES)


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
    format: int = 2
    completeness: CompletenessReport | None = None  # what the decision summaries proved
    summaries: int = 0
    refusals: int = 0  # refusal records (format 3)
    refusals_replayed: int = 0  # of them, parsed again from their payload and refused the same way
    account_risk_checked: int = 0  # decision/2 and /3 records whose account_risk holds together (see docs)
    account_alerts: int = 0  # of them, those that raised an account alert
    explained: int = 0  # decision/3 and /4 records whose reason codes were recomputed from the model
    case: CaseReport | None = None  # format 5, a bundle cut for one case: its history, re-derived
    case_events: int = 0
    policies: int = 0
    holds: int = 0
    lists: int = 0  # format 6: sanctions list versions carried
    rescreened: int = 0  # decision/5 records whose payment was screened again, the same hits found
    not_rescreened: int = 0  # decision/5 records naming lists whose payment was purged
    rederived: int = 0  # format 7: decisions made again from their message and state, same features found
    not_rederived: dict[str, int] = field(default_factory=dict)  # format 7: those not re-derived, by reason
    state_records: int = 0  # format 7: summaries and state deltas carried for the state
    witnesses: tuple[str, ...] = ()  # format 8: witnesses whose cosignature on the checkpoint verified
    witnesses_pinned: int = 0  # of them, those the examiner pinned (--witness-key)
    min_witnesses: int = 0  # the quorum asked for
    compliance: dict[str, Any] | None = None  # format 9: the compliance facts, recomputed from the records

    def to_json(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        out["completeness"] = None if self.completeness is None else self.completeness.to_json()
        out["case"] = None if self.case is None else self.case.to_json()
        return out


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


def _check_counts(m: BundleManifest, t: RecordTally, found: Findings) -> None:
    c = m.counts
    by = {k: t.by_decision.get(k, 0) for k in c.by_decision} | dict(t.by_decision)
    pairs = [("records", c.records, t.records), ("decisions", c.decisions, t.decisions),
             ("summaries", c.summaries, t.summaries), ("refusals", c.refusals, t.refusals),
             ("case_events", c.case_events, t.case_events), ("policies", c.policies, t.policies),
             ("holds", c.holds, t.holds),
             ("annotations", c.annotations, t.annotations), ("context", c.context, t.context),
             ("payloads_present", c.payloads_present, t.payloads_present),
             ("payloads_purged", c.payloads_purged, t.payloads_purged),
             ("by_decision", c.by_decision, by), ("range.first_seq", m.first_seq, t.first_seq),
             ("range.last_seq", m.last_seq, t.last_seq),
             ("range.contiguous", m.contiguous, t.last_seq is not None and t.first_seq is not None
              and t.last_seq - t.first_seq + 1 == t.in_tree == t.records),
             ("rules", list(m.rules), sorted(t.modules)), ("models", list(m.models), sorted(t.models))]
    if m.case is not None:
        pairs.append(("case.events", m.case.events, t.case_events))
    for name, stated, got in pairs:
        if stated != got:
            found.add(BundleTampered(f"manifest states {name} = {stated!r}, the records give {got!r}"[:600],
                                     kind="manifest.counts", file=MANIFEST))


def _case_doc(bundle: BundleArchive, manifest: BundleManifest) -> CaseDoc | None:
    """``case/case.json`` of a case bundle, parsed (``BundleMalformed`` at once if it is not the
    format: nothing of the case can be checked then), checked against ``manifest.case``."""
    sel = manifest.case
    if sel is None:
        return None
    if sel.file != CASE_FILE:
        raise BundleMalformed(f"case.file is {sel.file!r}, not {CASE_FILE}", kind="manifest.field",
                              file=MANIFEST)
    doc = CaseDoc.parse(bundle.read(CASE_FILE, bundle.limits.max_manifest))
    if doc.to_seq >= manifest.checkpoint_size:
        raise BundleTampered(f"the case's events are said searched up to seq {doc.to_seq}, past the "
                             f"checkpoint's tree of size {manifest.checkpoint_size}",
                             kind="case.completeness.range", file=CASE_FILE)
    stated = (sel.case_id, sel.alerts, sel.events, sel.withheld, sel.from_seq, sel.to_seq)
    got = (doc.case_id, len(doc.alerts), len(doc.events), len(doc.withheld), doc.from_seq, doc.to_seq)
    if stated != got:
        raise BundleTampered(f"manifest.case states (case_id, alerts, events, withheld, from_seq, to_seq) = "
                             f"{stated}, {CASE_FILE} gives {got}", kind="manifest.case", file=MANIFEST)
    return doc


def _case_check(doc: CaseDoc, found: Findings) -> CaseCheck:
    # Imported here, for a case bundle only: the case fold's imports are the examiner's machine's
    # concern only when there is a case to fold (docs/bundle-format.md, "Case bundles").
    from audit.bundle.cases import CaseCheck

    return CaseCheck(doc, found)


def _case_completeness(doc: CaseDoc) -> CompletenessReport:
    return CompletenessReport(False, notes=[
        f"a bundle cut for case {doc.case_id}: no decision summary speaks for a case, so completeness is "
        "not proven as for a window; the case's alerts are those its fold re-derives from the decisions "
        "carried, as the bank's view states them",
        f"case events: {len(doc.events)} carried, {len(doc.withheld)} other case event(s) of seqs "
        f"[{doc.from_seq}, {doc.to_seq}] withheld as proved leaf hashes; that none of those is about the "
        "case is the exporter's signed statement, checked one by one where the bank opens a withheld leaf"])


def _rederiver(bundle: BundleArchive, manifest: BundleManifest, found: Findings) -> Rederiver | None:
    """A format-7 window bundle's state lines, read and checked, ready to re-derive its decisions."""
    sec = manifest.state
    if sec is None:
        return None
    cap = bundle.limits.max_manifest
    lines = read_state(LineStream(bundle, STATE_RECORDS), LineStream(bundle, STATE_INDEX),
                       manifest.checkpoint_size, found)
    got = (len(lines.leaves), len(lines.deltas), len(lines.summaries))
    if got != (sec.records, sec.deltas, sec.summaries):
        found.add(BundleTampered(f"manifest.state states (records, deltas, summaries) = "
                                 f"{(sec.records, sec.deltas, sec.summaries)}, {STATE_RECORDS} gives {got}",
                                 kind="manifest.state", file=MANIFEST))
    snapshot = None
    if sec.snapshot_seq is not None and sec.snapshot_covers is not None and sec.snapshot_file is not None:
        data = bundle.read(sec.snapshot_file, cap) if sec.snapshot_file in bundle.sizes else None
        snapshot = (sec.snapshot_seq, sec.snapshot_covers, data)
    return Rederiver(lines, sec.from_seq, snapshot)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Parsed JSON holds no reference cycles, and the cyclic collector rescanning the thousands
    of decision bodies a replay batch keeps alive cost more than parsing them (39 -> 14 us a
    record); plain reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def verify_bundle(path: str | Path, trusted_keys: Sequence[NoteVerifier], *, progress: Progress | None = None,
                  now: Callable[[], datetime] | None = None, limits: Limits | None = None,
                  sandbox: Sandbox | None = None, parallel: bool | None = None,
                  witness_keys: Sequence[CosignerVerifier] = (), min_witnesses: int = 0) -> BundleReport:
    """Verify the bundle at ``path`` offline; return what held, or raise a ``BundleError``.

    With no ``trusted_keys`` the bundle's own keys are used and the report carries
    ``UNPINNED_WARNING``: that shows the bundle is consistent, not who made it. The Merkle
    checks run in a second process unless ``parallel`` is false (see ``audit.bundle.proofs``).
    ``witness_keys``: the witnesses the examiner trusts; the bundle fails unless ``min_witnesses`` of
    them cosigned its checkpoint (format 8, ``audit.bundle.witnesses``)."""
    limits = limits or Limits()
    with _cyclic_gc_paused(), BundleArchive(path, limits) as bundle:
        manifest, keys, good = _open_manifest(bundle, trusted_keys)
        found = Findings(limits.max_failures)
        _check_files(bundle, manifest, found)
        cp = verify_checkpoint(bundle, manifest.checkpoint_file, keys, manifest.origin,
                               manifest.checkpoint_size, manifest.checkpoint_root, "manifest.checkpoint")
        witnessed, witness_failures = check_witnesses(manifest, cp.note, manifest.checkpoint_file,
                                                      witness_keys, min_witnesses)
        found.extend(witness_failures)
        doc = _case_doc(bundle, manifest)
        rederiver = _rederiver(bundle, manifest, found)
        extra: Sequence[tuple[int, bytes]] = () if doc is None else doc.withheld
        if rederiver is not None:
            extra = sorted([*extra, *rederiver.leaves])
        tree = start_tree_check(path, limits, cp.checkpoint.size, cp.checkpoint.root, parallel=parallel,
                                extra=extra)
        own = sandbox is None
        sb = Sandbox() if sandbox is None else sandbox
        case_report: CaseReport | None = None
        try:
            replayer = Replayer(sb, lambda sha: bundle.read(f"rules/{sha}.wasm"),
                                lambda sha: bundle.read(f"models/{sha}/weights.npz"),
                                fetch_card=lambda sha: bundle.read(f"models/{sha}/card.json"))
            check = CompletenessCheck(manifest, found) if manifest.version >= 2 and doc is None else None
            case = None if doc is None else _case_check(doc, found)
            rescreener = None if manifest.version < 6 else Rescreener(
                lambda sha: bundle.read(f"lists/{sha}", _MAX_LIST) if f"lists/{sha}" in bundle.sizes
                else None)
            compliance = None if manifest.compliance is None else ComplianceCheck(manifest, found)
            tally = scan_records(bundle, manifest, replayer, found, progress, check, case, rescreener,
                                 rederiver, None if compliance is None else compliance.record)
            if rederiver is not None:
                found.extend(rederiver.finish())
                if manifest.state is not None and rederiver.unsealed != manifest.state.unsealed_origin:
                    found.add(BundleTampered(
                        f"manifest.state states unsealed_origin = {manifest.state.unsealed_origin}; "
                        f"{rederiver.unsealed} exported decisions have no delta naming their state's origin",
                        kind="manifest.state", file=MANIFEST))
            if doc is not None and case is not None:
                completeness = _case_completeness(doc)
                case_report = case.finish()
            else:
                completeness = not_proven_v1() if check is None else check.finish()
        except BaseException:
            tree.cancel()
            raise
        finally:
            if own:
                sb.close()
        for name, got in tally.hashes.items():
            _check_hash(name, got, manifest, found)
        found.extend(tree.result(bundle))
        previous, prev_failures = check_previous(bundle, manifest, keys)
        found.extend(prev_failures)
        _check_counts(manifest, tally, found)
        check_context(bundle, manifest, tally, found)
        facts = None if compliance is None else compliance.finish(bundle, cp.checkpoint.size,
                                                                  cp.checkpoint.root)
    report = BundleReport(
        path=str(path), bundle_id=manifest.bundle_id, origin=manifest.origin,
        checkpoint_size=cp.checkpoint.size, checkpoint_root=base64.b64encode(cp.checkpoint.root).decode(),
        signed_by=tuple(v.vkey for v in good), pinned=bool(trusted_keys), records=tally.records,
        decisions=tally.decisions, annotations=tally.annotations, context=tally.context,
        replayed=replayer.replayed, rescored=replayer.rescored, fail_safe=replayer.fail_safe,
        payloads_present=tally.payloads_present, payloads_purged=tally.payloads_purged, previous=previous,
        verified_at=format_time((now or (lambda: datetime.now(UTC)))()),
        warnings=() if trusted_keys else (UNPINNED_WARNING,), format=manifest.version,
        completeness=completeness, summaries=tally.summaries, refusals=tally.refusals,
        refusals_replayed=tally.refusals_replayed, account_risk_checked=tally.account_risk_checked,
        account_alerts=tally.account_alerts, explained=replayer.explained, case=case_report,
        case_events=tally.case_events, policies=tally.policies, holds=tally.holds,
        lists=0 if rescreener is None else rescreener.lists,
        rescreened=0 if rescreener is None else rescreener.rescreened,
        not_rescreened=0 if rescreener is None else rescreener.not_rescreened,
        rederived=0 if rederiver is None else rederiver.rederived,
        not_rederived={} if rederiver is None else dict(sorted(rederiver.not_rederived.items())),
        state_records=0 if rederiver is None else len(rederiver.leaves),
        witnesses=tuple(v for v, _ in witnessed.cosigned), witnesses_pinned=witnessed.pinned,
        min_witnesses=min_witnesses, compliance=facts)
    if len(found):
        raise BundleFailed(found.items, found.dropped, report)
    return report
