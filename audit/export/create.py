"""Regulator export bundles (docs/bundle-format.md): creation.

``create_bundle`` (a time window, with filters) streams the selected decisions
(``audit.export.select``), the refusal records of the window (when the selection is the whole
window), the annotations that refer to them and their context (governance, model registration
and purge entries) into a ZIP,
with the decision summaries that bracket the window (``audit.export.completeness``: they prove
the selection complete, its refusals included), payloads, rule modules, model files, the signed
checkpoint, the multiproof, the consistency proof from the previous export, a report,
``manifest.json`` (every file's SHA-256, computed while writing) and ``manifest.sig``; then seals
an ``export.created`` record.

Memory stays bounded whatever the size: one page of entries at a time, spool files beside the
output for the members that grow together (a ZIP takes one member at a time), the sorted
exported seqs and line end offsets (8 bytes each) and the set of payload digests already
written. Both cores work: ``payloads.jsonl`` and ``records.csv`` are compressed (raw deflate,
hashed) on worker threads while the ledger is read; ``records.jsonl`` (in parts) and
``index.jsonl`` on two threads after it, once the context entries are known; the compressed
members are then copied into the ZIP (zlib, hashlib and file I/O release the GIL). Nothing
half-written: everything goes to a hidden temporary directory beside ``out_path``; the record
is sealed only once the ZIP is complete and synced, and the file is renamed into place only
after the record is durable. Any failure removes the temporary files and leaves no record (a
crash between sealing and renaming leaves a record of an export whose file never appeared,
never a file without its record).

A window bundle is written as ``sealtrail.bundle/4``, the oldest format that holds it (so that
the verifier of the previous release still reads it); one whose decisions were screened against
sanctions lists (``sealtrail.decision/5`` naming a list) as ``sealtrail.bundle/6``, with the
``sanctions_list`` records those decisions name and each list's bytes (``lists/<sha256>``), so that
the verifier screens them again.
``create_case_bundle`` cuts the bundle of
one case instead (``audit.export.cases``: its
decisions, events, policies, filed reports and holds, ``case/case.json``, and the other case
events of its range as proved leaf hashes); a case is small, so its lines are built in memory.
Both end in the same writing and sealing (``_write_and_seal``), and both carry the compliance facts
of their period (``audit.compliance``), so both are written as ``sealtrail.bundle/9`` (the window's
``manifest.state``, ``manifest.case`` and ``manifest.witnesses`` saying which earlier format each
extends); a case bundle's period is the span of the case's records (``_case_period``).
"""

from __future__ import annotations

import base64
import heapq
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.bundle.case_doc import CASE_FILE
from audit.compliance.facts import FactsBuilder, Period, covering
from audit.compliance.store import history_entries, stated_facts
from audit.decide.principal import Principal
from audit.errors import ExportFilterError, ExportUnavailableError
from audit.export.cases import CaseSelection, select_case
from audit.export.completeness import bracket, check_selection, seal_right_edge
from audit.export.context import Context, gather_context, previous_export
from audit.export.files import VERIFY_MD, BundleZip, index_line, payload_line, purged_line
from audit.export.report import ReportStats, csv_header, csv_line, csv_row, render_report
from audit.export.select import ExportFilters, count_selected, refusal_rows
from audit.export.spool import Progress, Spools, deflate_spools, read_selection
from audit.export.state import STATE_INDEX, STATE_RECORDS, STATE_SNAPSHOT, select_state
from audit.screening.lists import LIST_KIND
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.checkpoint import SignedCheckpoint
from ledger.cosign import newest_cosigned, witnesses_of
from ledger.cosignature import CosignerVerifier, cosignatures
from ledger.jcs import canonical_bytes
from ledger.merkle import verify_consistency
from ledger.multiproof import encode_nodes, frontier
from ledger.multiproof_store import subtree_hashes
from ledger.note import NoteVerifier, sign_note
from ledger.proofs import consistency_proof, inclusion_proof
from ledger.records import format_time
from wasm_rules import OUTCOMES

__all__ = [
    "BUNDLE_SCHEMA", "CASE_BUNDLE_SCHEMA", "CASE_EXPORT_SCHEMA", "EXPORT_KIND", "EXPORT_SCHEMA",
    "SCREENED_BUNDLE_SCHEMA", "STATE_BUNDLE_SCHEMA", "BundleSummary", "ExportFilters", "create_bundle",
    "create_case_bundle", "list_exports", "manifest_sig_text", "uuid7"
]

BUNDLE_SCHEMA = "sealtrail.bundle/4"  # a window bundle
CASE_BUNDLE_SCHEMA = "sealtrail.bundle/5"  # a bundle cut for one case
SCREENED_BUNDLE_SCHEMA = "sealtrail.bundle/6"  # either, with decisions that state their screening
STATE_BUNDLE_SCHEMA = "sealtrail.bundle/7"  # a window bundle that carries its decisions' feature state
WITNESSED_BUNDLE_SCHEMA = "sealtrail.bundle/8"  # any of them, its checkpoint cosigned by witnesses
COMPLIANCE_BUNDLE_SCHEMA = "sealtrail.bundle/9"  # any bundle carrying its period's compliance facts
COMPLIANCE_FILE, COMPLIANCE_RECORDS, COMPLIANCE_PROOFS = (
    "compliance.json", "compliance/records.jsonl", "compliance/proofs.json")
COMPLIANCE_SCHEMA = "sealtrail.compliance/1"
Cosign = Callable[[], object]
"""Have the witnesses cosign the ledger's newest checkpoint (what ``ledger.cosign.collect`` does)."""
EXPORT_KIND = "export.created"
EXPORT_SCHEMA = "sealtrail.export.created/1"  # the record of a window bundle
CASE_EXPORT_SCHEMA = "sealtrail.export.created/2"  # of a case bundle: ``case`` set, ``filters`` null


def manifest_sig_text(bundle_id: str, manifest_sha256: str) -> str:
    """The text ``manifest.sig`` signs."""
    return f"sealtrail bundle manifest v1\n{bundle_id}\n{manifest_sha256}\n"


def uuid7(now: datetime) -> str:
    """A UUIDv7 (RFC 9562) for ``now``: 48-bit Unix ms, version 7, random rest."""
    ms = int(now.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True)
class BundleSummary:
    bundle_id: str
    path: Path
    created_at: str
    creator: dict[str, Any]
    filters: dict[str, Any] | None  # None for a case bundle
    counts: dict[str, Any]
    checkpoint: dict[str, Any]  # {size, root (b64)}
    previous: dict[str, Any] | None
    manifest_sha256: str
    size_bytes: int
    record_seq: int  # seq of the export.created record
    case: dict[str, Any] | None = None  # manifest.case of a case bundle

    def to_json(self) -> dict[str, Any]:
        return {"bundle_id": self.bundle_id, "file": str(self.path), "created_at": self.created_at,
                "creator": self.creator, "filters": self.filters, "counts": self.counts,
                "checkpoint": self.checkpoint, "previous": self.previous,
                "manifest_sha256": self.manifest_sha256, "size_bytes": self.size_bytes,
                "record_seq": self.record_seq, "case": self.case}


def _checkpoint(ledger: Ledger, signer: NoteSigner, last_seq: int) -> SignedCheckpoint:
    cp = ledger.latest_checkpoint()
    if cp is None or cp.checkpoint.size <= last_seq:
        cp = ledger.checkpoint()
    # never hand out a checkpoint our own key does not sign
    return SignedCheckpoint.verify(cp.note, [signer.verifier], ledger.origin)


def _witnessed(conn: Connection, ledger: Ledger, cp: SignedCheckpoint, last_seq: int,
               prev: dict[str, Any] | None, vkeys: list[str]
               ) -> tuple[SignedCheckpoint, list[dict[str, Any]]]:
    """The newest checkpoint witnesses cosigned that can stand for ``cp`` (covering ``last_seq`` and
    no older than the previous export's), its note carrying their cosignature lines, and the
    manifest's ``witnesses``; or ``cp`` and no witnesses when none was cosigned (``sealtrail ledger
    cosign`` collects them)."""
    floor = max(last_seq + 1, int(prev["checkpoint_size"]) if prev is not None else 0)
    got = newest_cosigned(conn, 1, floor)
    if got is None:
        return cp, []
    size, note = got
    rows = witnesses_of(conn, size)
    # the log's own signature, by the key of the history that signed it, and each cosignature, checked
    # before they leave: never hand out a line that does not verify
    signed = SignedCheckpoint.verify(note, [NoteVerifier.from_vkey(v) for v in vkeys], ledger.origin)
    found = {c.witness.vkey: c.timestamp for c in
             cosignatures(note, [CosignerVerifier.from_vkey(w) for w, _ in rows])}
    witnesses = [{"vkey": w, "timestamp": t} for w, t in rows]
    if {w["vkey"]: w["timestamp"] for w in witnesses} != found:
        raise ExportUnavailableError(f"the cosignatures stored for the checkpoint of size {size} do not "
                                     "verify (run 'sealtrail ledger verify')")
    return signed, witnesses


def _nodes_bin(conn: Connection, size: int, exported: array[int]) -> bytes:
    """``proofs/nodes.bin``: the frontier subtrees of the exported seqs, with their hashes."""
    ranges = frontier(size, exported)
    got = subtree_hashes(conn, ranges)
    return encode_nodes((lo, hi, got[(lo, hi)]) for lo, hi in ranges)


def _refuse_early(ledger: Ledger, signer: NoteSigner, out_path: Path) -> None:
    if signer.verifier.vkey != ledger.active_vkey:
        raise ExportUnavailableError(f"the key given is {signer.verifier.vkey}; the ledger's active "
                                     f"key is {ledger.active_vkey}")
    if Path(out_path).exists():
        raise ExportFilterError("out", f"{out_path} exists; refusing to overwrite a bundle")


def create_bundle(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, filters: ExportFilters,
                  creator: Principal, *, now: datetime | None = None, progress: Progress | None = None,
                  model_dirs: Iterable[Path] = (), page_size: int = 5000, compresslevel: int = 1,
                  bundle_id: str | None = None, state_snapshot: bool | None = None,
                  cosign: Cosign | None = None, retention_days: int | None = None,
                  witnesses_configured: Sequence[str] | None = None) -> BundleSummary:
    """Write the bundle of ``filters`` to ``out_path`` and seal its ``export.created`` record.

    Refuses (``ExportFilterError``, field ``filters``) a selection with no decision, (field
    ``out``) an ``out_path`` that exists, and (``DerivedRowError``, naming the table and seq) a
    selection through a trace-index row that disagrees with its sealed record; nothing is written.
    ``signer`` must be the ledger's active key. ``bundle_id`` (a UUIDv7 made from ``now`` by
    default) lets a caller name the file after it. ``cosign``, if given, is called once the bundle's
    checkpoint is signed, to have witnesses cosign it (``ledger.cosign.collect``); the bundle carries
    the cosignatures of the newest cosigned checkpoint that covers it (``sealtrail.bundle/8``), if
    any. ``retention_days`` and ``witnesses_configured`` (the settings, where the caller knows them) go
    into the compliance facts as stated, not proven (``audit.compliance``). ``state_snapshot``: whether a
    sealed state
    snapshot stands in for the state deltas before it (``audit.export.state``; default: where
    that is smaller)."""
    _refuse_early(ledger, signer, out_path)
    out_path = Path(out_path)
    now = now or datetime.now(UTC)
    created_at = format_time(now)
    bundle_id = bundle_id or uuid7(now)
    with engine.connect() as conn:
        total = count_selected(conn, filters)  # the index's count: progress only
    seal_right_edge(engine, ledger, filters)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_path.parent, prefix=f".{out_path.name}."))
    try:
        configured = None if witnesses_configured is None else list(witnesses_configured)
        stated = {"retention_days": retention_days, "witnesses_configured": configured}
        return _create(engine, ledger, signer, out_path, tmp, filters, creator, bundle_id, created_at,
                       total, progress, list(model_dirs), page_size, compresslevel, state_snapshot, cosign,
                       stated)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _create(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, tmp: Path,
            filters: ExportFilters, creator: Principal, bundle_id: str, created_at: str, total: int,
            progress: Progress | None, model_dirs: list[Path], page_size: int,
            compresslevel: int, state_snapshot: bool | None = None, cosign: Cosign | None = None,
            stated: dict[str, Any] | None = None) -> BundleSummary:
    period = Period(filters.start, filters.end)
    stats = ReportStats(facts=FactsBuilder(period))
    sp = Spools(tmp, compresslevel)
    # one snapshot for the selection: what was checked is what is written
    try:
        with _snapshot(engine) as conn:
            summaries = bracket(conn, engine, filters)
            alongside = heapq.merge(summaries.rows, refusal_rows(conn, filters), key=lambda r: r.seq)
            got = read_selection(conn, filters, sp, stats, total, progress, page_size, alongside)
            if got.decisions == 0:
                raise ExportFilterError("filters", f"no decision was recorded between {filters.start} "
                                                   f"and {filters.end} that matches every filter; "
                                                   "nothing to export")
            check_selection(summaries, got.decision_seqs, got.refusal_seqs if filters.whole_window else None)
    except BaseException:
        sp.abort()
        raise
    payloads_z, csv_z = sp.close()
    assert got.rulesets is not None and got.models is not None and got.purge_seqs is not None
    with engine.connect() as conn:
        ctx: Context = gather_context(conn, got.rulesets, got.models, got.purge_seqs, model_dirs,
                                      got.list_seqs, got.clearance_seqs, got.decision_seqs[-1] + 1)
    extra = sorted(ctx.entries, key=lambda r: r.seq)
    seqs = array("q", heapq.merge(sp.seqs, (r.seq for r in extra)))
    with engine.connect() as conn:
        state = select_state(conn, got.decision_seqs, seqs, engine, state_snapshot)
    counts = {"records": len(seqs), "decisions": got.decisions, "annotations": got.annotations,
              "context": len(ctx.entries), "summaries": summaries.count, "refusals": got.refusals,
              "payloads_present": got.present,
              "payloads_purged": got.purged,
              "by_decision": {o: stats.by_decision[o] for o in OUTCOMES}}

    def lines(z: BundleZip) -> None:
        rec_z, idx_z = deflate_spools(tmp, sp, extra, compresslevel)
        z.write_deflated("records.jsonl", rec_z)
        z.write_deflated("index.jsonl", idx_z)
        z.write_deflated("payloads.jsonl", payloads_z)
        z.write_deflated("records.csv", csv_z)
        if state.from_seq is not None:
            z.write(STATE_RECORDS, b"".join(r.record + b"\n" for r in state.rows))
            z.write(STATE_INDEX, b"".join(index_line(r.seq, r.kind, r.trace_id, r.leaf_hash, r.chain_hash)
                                          for r in state.rows))
            if state.snapshot_data is not None:
                z.write(STATE_SNAPSHOT, state.snapshot_data)

    head: dict[str, Any] = {"schema": SCREENED_BUNDLE_SCHEMA if got.screened else BUNDLE_SCHEMA,
                            "filters": filters.to_json(), "completeness": summaries.manifest()}
    if got.screened:
        head["case"] = None
    if state.from_seq is not None:  # the decisions' feature state travels too: re-derived from their messages
        head.update(schema=STATE_BUNDLE_SCHEMA, case=None, state=state.manifest())
    assert stats.facts is not None
    compliance = _Compliance(stats.facts, "window" if filters.whole_window else "selection", stated or {})
    return _write_and_seal(engine, ledger, signer, out_path, tmp, bundle_id=bundle_id, created_at=created_at,
                           creator=creator, head=head,
                           record_head={"schema": EXPORT_SCHEMA, "filters": filters.to_record()},
                           counts=counts, seqs=seqs, withheld=[(r.seq, r.leaf_hash) for r in state.rows],
                           lines=lines, ctx=ctx, compliance=compliance,
                           render=lambda m: render_report(m, stats, ctx.purge_reasons,
                                                          compliance=compliance.doc),
                           rules=sorted(set(got.rulesets.values())), models=sorted(got.models),
                           compresslevel=compresslevel, last_seq=seqs[-1], cosign=cosign)


@dataclass
class _Compliance:
    """A bundle's compliance facts (``audit.compliance``): ``facts`` is fed the decisions and
    refusals as the selection streams, then (``seal``) the history records up to the period's end;
    ``doc`` is ``compliance.json``, which ``report.html`` renders."""

    facts: FactsBuilder
    # "window": every decision and refusal of the period; "selection": the filtered decisions; "case": the
    # case's decisions (a bundle cut for one case carries no refusal)
    scope: str
    stated: dict[str, Any]
    doc: dict[str, Any] | None = None

    def seal(self, conn: Connection, history: list[tuple[int, bytes]], size: int) -> list[tuple[str, bytes]]:
        """The members: ``compliance.json``, the history records and their inclusion proofs at ``size``."""
        loads = orjson.loads
        for seq, rec in history:
            self.facts.add(seq, loads(rec))
        period = self.facts.period
        stated = stated_facts(conn, period, retention_days=self.stated.get("retention_days"),
                              witnesses_configured=self.stated.get("witnesses_configured"))
        self.doc = {"schema": COMPLIANCE_SCHEMA, "scope": self.scope, "facts": self.facts.facts(),
                    "stated": stated}
        b64 = base64.b64encode
        proofs = {"size": size, "entries": [
            {"seq": seq, "hashes": [b64(h).decode() for h in inclusion_proof(conn, seq, size)]}
            for seq, _ in history]}
        return [(COMPLIANCE_FILE, canonical_bytes(self.doc)),
                (COMPLIANCE_RECORDS, b"".join(rec + b"\n" for _, rec in history)),
                (COMPLIANCE_PROOFS, canonical_bytes(proofs))]

    def manifest(self, records: int) -> dict[str, Any]:
        """The manifest's ``compliance``."""
        return {"file": COMPLIANCE_FILE, "records_file": COMPLIANCE_RECORDS, "proofs_file": COMPLIANCE_PROOFS,
                "records": records, "scope": self.scope, "period": self.facts.period.to_json()}


@contextmanager
def _snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose reads all see one snapshot (REPEATABLE READ on PostgreSQL; SQLite's
    WAL read transaction is one)."""
    opts = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    with engine.connect().execution_options(**opts) as conn, conn.begin():
        yield conn


def _write_and_seal(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, tmp: Path, *,
                    bundle_id: str, created_at: str, creator: Principal, head: dict[str, Any],
                    record_head: dict[str, Any], counts: dict[str, Any], seqs: array[int],
                    withheld: Sequence[tuple[int, bytes]], lines: Callable[[BundleZip], None], ctx: Context,
                    render: Callable[[dict[str, Any]], bytes], rules: list[str], models: list[str],
                    compresslevel: int, last_seq: int, files: Sequence[tuple[str, bytes]] = (),
                    cosign: Cosign | None = None, compliance: _Compliance | None = None) -> BundleSummary:
    """The part of creation every selection shares (``head``: the manifest's schema and selection
    fields; ``record_head``: the ``export.created`` body's): the checkpoint (of a size past ``last_seq``),
    the multiproof of ``seqs`` and the ``withheld`` leaves, the consistency proof from the previous
    export, the ZIP (``lines`` writes the line members), the manifest and its signature; then the
    ``export.created`` record, and the file renamed into place. With ``compliance``, the period's history
    records (``audit.compliance``) and their inclusion proofs, and the facts (``sealtrail.bundle/9``)."""
    history: list[tuple[int, bytes]] = []
    if compliance is not None:
        with engine.connect() as conn:
            history = history_entries(conn, compliance.facts.period.end)
        last_seq = max(last_seq, history[-1][0] if history else -1)  # the checkpoint proves them too
    own = _checkpoint(ledger, signer, last_seq)
    if cosign is not None:
        cosign()  # the witnesses are asked about the newest checkpoint, which covers the bundle
    with engine.connect() as conn:
        prev = previous_export(conn)
        vkeys = [str(v) for (v,) in conn.exec_driver_sql(
            "SELECT vkey FROM ledger_keys ORDER BY valid_from_size")]
        cp, witnesses = _witnessed(conn, ledger, own, last_seq, prev, vkeys)
    if witnesses:
        head = {**head, "schema": WITNESSED_BUNDLE_SCHEMA, "case": head.get("case"),
                "state": head.get("state"), "witnesses": witnesses}
    size, root = cp.checkpoint.size, cp.checkpoint.root
    extra_files = list(files)
    if compliance is not None:
        with engine.connect() as conn:
            extra_files.extend(compliance.seal(conn, history, size))
        head = {**head, "schema": COMPLIANCE_BUNDLE_SCHEMA, "case": head.get("case"),
                "state": head.get("state"), "compliance": compliance.manifest(len(history))}
    b64 = base64.b64encode
    proved = array("q", heapq.merge(seqs, (s for s, _ in withheld))) if withheld else seqs
    with engine.connect() as conn:
        nodes = _nodes_bin(conn, size, proved)
        consistency: dict[str, Any] | None = None
        prev_note: str | None = None
        if prev is not None:
            old_size, old_root = int(prev["checkpoint_size"]), base64.b64decode(prev["checkpoint_root"])
            hashes = consistency_proof(conn, old_size, size) if old_size < size else []
            verify_consistency(old_size, size, hashes, old_root, root)
            consistency = {"old_size": old_size, "new_size": size, "old_root": prev["checkpoint_root"],
                           "new_root": b64(root).decode(), "hashes": [b64(h).decode() for h in hashes]}
            prev_note = conn.exec_driver_sql(
                f"SELECT note FROM ledger_checkpoints WHERE size = {old_size}").scalar()
            if prev_note is None:
                raise ExportUnavailableError(f"the checkpoint of size {old_size} the previous export used is "
                                             "not stored")
    manifest: dict[str, Any] = {
        "bundle_id": bundle_id, "created_at": created_at,
        "creator": creator.to_json(), **head, "log": {"origin": ledger.origin, "verifier_keys": vkeys},
        "checkpoint": {"size": size, "root": b64(root).decode(), "file": "checkpoint.txt"},
        "previous": prev, "counts": counts,
        "range": {"first_seq": seqs[0], "last_seq": seqs[-1],
                  "contiguous": seqs[-1] - seqs[0] + 1 == len(seqs)},
        "rules": rules, "models": models}
    zpath = tmp / "bundle.zip"
    with zpath.open("wb") as fh:
        z = BundleZip(fh, compresslevel=compresslevel)
        lines(z)
        z.write("checkpoint.txt", cp.note.encode())
        z.write("proofs/nodes.bin", nodes)
        if consistency is not None and prev_note is not None:
            z.write("proofs/consistency.json", canonical_bytes(consistency))
            z.write("checkpoints/previous.txt", prev_note.encode())
        for name, data in (*ctx.files, *extra_files):
            z.write(name, data)
        z.write("report.html", render(manifest))
        z.write("VERIFY.md", VERIFY_MD.encode())
        manifest["files"] = dict(sorted(z.files.items()))
        mbytes = canonical_bytes(manifest)
        msha = z.write("manifest.json", mbytes)
        z.files.pop("manifest.json")
        z.write("manifest.sig", sign_note(manifest_sig_text(bundle_id, msha), [signer]).encode())
        z.close()
        fh.flush()
        os.fsync(fh.fileno())
    checkpoint = {"size": size, "root": b64(root).decode()}
    body = {"bundle_id": bundle_id, "created_at": created_at,
            "creator": creator.to_json(), **record_head, "counts": counts,
            "checkpoint": checkpoint, "previous": prev, "manifest_sha256": msha, "file_name": out_path.name}
    (receipt,) = ledger.append_many([Record.from_canonical_body(EXPORT_KIND, canonical_bytes(body))])
    os.replace(zpath, out_path)
    _fsync_dir(out_path.parent)
    return BundleSummary(bundle_id, out_path, created_at, creator.to_json(), head["filters"], counts,
                         checkpoint, prev, msha, out_path.stat().st_size, receipt.seq, head.get("case"))


def create_case_bundle(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, case_id: int,
                       creator: Principal, *, now: datetime | None = None, model_dirs: Iterable[Path] = (),
                       compresslevel: int = 1, bundle_id: str | None = None,
                       cosign: Cosign | None = None, retention_days: int | None = None,
                       witnesses_configured: Sequence[str] | None = None) -> BundleSummary:
    """Write the bundle of case ``case_id`` to ``out_path`` and seal its ``export.created`` record.

    The bundle (``sealtrail.bundle/9`` with ``manifest.case`` set, docs/bundle-format.md "Case
    bundles"; its record ``sealtrail.export.created/2``) holds the decisions
    of the case's alerts, every case event about it, the deadline policies its alerts were dated
    under, its filed reports' bytes, the legal holds over them, and ``case/case.json`` (the case
    as the alert and case view states it), all proved against one checkpoint, with every other
    case event of the range proved as a leaf hash; and the compliance facts of the period the case's
    records span (``_case_period``), ``retention_days`` and ``witnesses_configured`` stated in them as
    for a window. Refuses (``ExportFilterError``, field
    ``case_id``) a case that does not exist, (field ``out``) an ``out_path`` that exists, and
    (``DerivedRowError``) a view that disagrees with the sealed records; nothing is written."""
    from audit.cases.store import catch_up  # the view current before its rows are read

    if type(case_id) is not int or case_id < 0:
        raise ExportFilterError("case_id", f"{case_id!r} is not a case id (the seq of its first alert)")
    _refuse_early(ledger, signer, out_path)
    now = now or datetime.now(UTC)
    created_at = format_time(now)
    bundle_id = bundle_id or uuid7(now)
    catch_up(engine)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_path.parent, prefix=f".{out_path.name}."))
    try:
        with _snapshot(engine) as conn:
            sel = select_case(conn, case_id)
            models = {str(orjson.loads(r.record)["record"]["model"]["sha256"]) for r in sel.decisions}
            rulesets: dict[str, str] = {}
            for r in sel.decisions:
                rules = orjson.loads(r.record)["record"]["rules"]
                rulesets[f"{rules['ruleset_id']}@{rules['version']}"] = str(rules["module_sha256"])
            purges = {p.purge_seq for p in sel.payloads.values()
                      if p.data is None and p.purge_seq is not None}
            screenings = [b["screening"] for b in (orjson.loads(r.record)["record"] for r in sel.decisions)
                          if b.get("screening", {}).get("lists")]
            lists = {int(x["seq"]) for s in screenings for x in s["lists"]}
            cleared = {int(c["clearance_seq"]) for s in screenings for c in s.get("cleared", ())}
            upto = max((r.seq for r in sel.decisions), default=-1) + 1
            ctx = gather_context(conn, rulesets, models, purges, list(model_dirs), lists, cleared, upto)
        configured = None if witnesses_configured is None else list(witnesses_configured)
        stated = {"retention_days": retention_days, "witnesses_configured": configured}
        return _write_case(engine, ledger, signer, out_path, tmp, sel, ctx, creator, bundle_id, created_at,
                           sorted(set(rulesets.values())), sorted(models), compresslevel, cosign, stated)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _case_period(case_id: int, upto: int, rows: Sequence[tuple[int, dict[str, Any]]]) -> Period:
    """The period of a case bundle's compliance facts: from the first to the last ``recorded_at`` of the
    records it carries in the case's search range ``[case_id, upto]`` (the case's first decision, and its
    last record as the view was current), that instant included. The verifier derives it again from the
    same lines (``audit.bundle.compliance``); the entry at ``upto`` itself is not carried, so it could
    not. Context entries outside the range (a purge sealed later) do not stretch it."""
    ats = [str(env["recorded_at"]) for seq, env in rows if case_id <= seq <= upto]
    return covering(min(ats), max(ats))  # the case's first decision is always carried


def _write_case(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, tmp: Path,
                sel: CaseSelection, ctx: Context, creator: Principal, bundle_id: str, created_at: str,
                rules: list[str], models: list[str], compresslevel: int, cosign: Cosign | None = None,
                stated: dict[str, Any] | None = None) -> BundleSummary:
    rows = sorted({r.seq: r for r in (*sel.rows, *ctx.entries)}.values(), key=lambda r: r.seq)
    envs = [orjson.loads(r.record) for r in rows]
    period = _case_period(sel.case_id, sel.upto, [(r.seq, env) for r, env in zip(rows, envs, strict=True)])
    stats = ReportStats(facts=FactsBuilder(period))  # fed the case's decisions: a case has no refusal
    for gone in sel.payloads.values():
        if gone.data is None and gone.purge_seq is not None:
            stats.add_purged(gone.sha256, gone.purge_seq)
    records, index, pays, csv_rows = [], [], [], [csv_header()]
    named: set[str] = set()
    present = purged = 0
    for r, env in zip(rows, envs, strict=True):
        records.append(r.record + b"\n")
        index.append(index_line(r.seq, r.kind, r.trace_id, r.leaf_hash, r.chain_hash))
        sha = env.get("payload_sha256")
        if sha is not None and sha not in named and r.kind != LIST_KIND:  # a list's bytes: lists/<sha>
            named.add(sha)
            p = sel.payloads.get(sha)
            if p is None:
                raise ExportUnavailableError(f"entry {r.seq}: payload {sha} was not read (context entry with "
                                             "a payload?)")
            if p.data is not None:
                pays.append(payload_line(sha, p.data))
                present += 1
            else:
                assert p.purge_seq is not None
                pays.append(purged_line(sha, p.purge_seq))
                purged += 1
        if r.kind == "decision":
            state = "none" if sha is None else ("present" if sel.payloads[sha].data is not None else "purged")
            n = sel.annotations.get(r.seq, 0)
            csv_rows.append(csv_line(csv_row(r.seq, env, state, n)).encode())
            stats.add(r.seq, env, n)
    seqs = array("q", (r.seq for r in rows))
    c = sel.counts
    counts = {"records": len(rows), "decisions": len(sel.decisions), "annotations": c["annotations"],
              "context": len(ctx.entries), "summaries": 0, "refusals": 0, "case_events": c["case_events"],
              "policies": c["policies"], "holds": c["holds"], "payloads_present": present,
              "payloads_purged": purged, "by_decision": {o: stats.by_decision[o] for o in OUTCOMES}}
    case = {"case_id": sel.case_id, "file": CASE_FILE, "alerts": len(sel.doc.alerts),
            "events": len(sel.doc.events), "withheld": len(sel.doc.withheld), "from_seq": sel.doc.from_seq,
            "to_seq": sel.doc.to_seq}

    def lines(z: BundleZip) -> None:
        z.write("records.jsonl", b"".join(records))
        z.write("index.jsonl", b"".join(index))
        z.write("payloads.jsonl", b"".join(pays))
        z.write("records.csv", b"".join(csv_rows))

    # written as format 9 (_write_and_seal sets the schema with the compliance facts); manifest.case says it
    # extends format 5, or 6 where its decisions were screened (their lists travel as in format 6)
    head = {"schema": COMPLIANCE_BUNDLE_SCHEMA, "filters": None, "completeness": None, "case": case}
    assert stats.facts is not None
    compliance = _Compliance(stats.facts, "case", stated or {})
    return _write_and_seal(engine, ledger, signer, out_path, tmp, bundle_id=bundle_id, created_at=created_at,
                           creator=creator, head=head,
                           record_head={"schema": CASE_EXPORT_SCHEMA, "filters": None,
                                        "case": {"case_id": sel.case_id, "to_seq": sel.upto}},
                           counts=counts, seqs=seqs, withheld=sel.doc.withheld, lines=lines, ctx=ctx,
                           render=lambda m: render_report(m, stats, ctx.purge_reasons, case=sel.report,
                                                          compliance=compliance.doc),
                           rules=rules, models=models, compresslevel=compresslevel,
                           last_seq=max(seqs[-1], sel.upto), files=[(CASE_FILE, sel.doc.to_bytes())],
                           cosign=cosign, compliance=compliance)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_exports(engine: Engine) -> list[dict[str, Any]]:
    """Every ``export.created`` record, oldest first: ``{seq, recorded_at, record}``."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT seq, record FROM ledger_entries WHERE kind = '{EXPORT_KIND}' "
                                    "ORDER BY seq").all()
    out = []
    for seq, rec in rows:
        env = orjson.loads(bytes(rec))
        out.append({"seq": int(seq), "recorded_at": env["recorded_at"], "record": env["record"]})
    return out
