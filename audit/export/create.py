"""Regulator export bundles (docs/bundle-format.md, ``sealtrail.bundle/4``): creation.

``create_bundle`` streams the selected decisions (``audit.export.select``), the refusal records of
the window (when the selection is the whole window), the annotations that refer to them and their
context (governance, model registration and purge entries) into a ZIP,
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
"""

from __future__ import annotations

import base64
import heapq
import os
import shutil
import tempfile
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.decide.principal import Principal
from audit.errors import ExportFilterError, ExportUnavailableError
from audit.export.completeness import bracket, check_selection, seal_right_edge
from audit.export.context import Context, gather_context, previous_export
from audit.export.files import (
    VERIFY_MD,
    BundleZip,
)
from audit.export.report import ReportStats, render_report
from audit.export.select import ExportFilters, count_selected, refusal_rows
from audit.export.spool import Progress, Spools, deflate_spools, read_selection
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.checkpoint import SignedCheckpoint
from ledger.jcs import canonical_bytes
from ledger.merkle import verify_consistency
from ledger.multiproof import encode_nodes, frontier
from ledger.multiproof_store import subtree_hashes
from ledger.note import sign_note
from ledger.proofs import consistency_proof
from ledger.records import format_time
from wasm_rules import OUTCOMES

__all__ = [
    "BUNDLE_SCHEMA", "EXPORT_KIND", "EXPORT_SCHEMA", "BundleSummary", "ExportFilters", "create_bundle",
    "list_exports", "manifest_sig_text", "uuid7"
]

BUNDLE_SCHEMA = "sealtrail.bundle/4"
EXPORT_KIND = "export.created"
EXPORT_SCHEMA = "sealtrail.export.created/1"


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
    filters: dict[str, Any]
    counts: dict[str, Any]
    checkpoint: dict[str, Any]  # {size, root (b64)}
    previous: dict[str, Any] | None
    manifest_sha256: str
    size_bytes: int
    record_seq: int  # seq of the export.created record

    def to_json(self) -> dict[str, Any]:
        return {"bundle_id": self.bundle_id, "file": str(self.path), "created_at": self.created_at,
                "creator": self.creator, "filters": self.filters, "counts": self.counts,
                "checkpoint": self.checkpoint, "previous": self.previous,
                "manifest_sha256": self.manifest_sha256, "size_bytes": self.size_bytes,
                "record_seq": self.record_seq}


def _checkpoint(ledger: Ledger, signer: NoteSigner, last_seq: int) -> SignedCheckpoint:
    cp = ledger.latest_checkpoint()
    if cp is None or cp.checkpoint.size <= last_seq:
        cp = ledger.checkpoint()
    # never hand out a checkpoint our own key does not sign
    return SignedCheckpoint.verify(cp.note, [signer.verifier], ledger.origin)


def _nodes_bin(conn: Connection, size: int, exported: array[int]) -> bytes:
    """``proofs/nodes.bin``: the frontier subtrees of the exported seqs, with their hashes."""
    ranges = frontier(size, exported)
    got = subtree_hashes(conn, ranges)
    return encode_nodes((lo, hi, got[(lo, hi)]) for lo, hi in ranges)


def create_bundle(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, filters: ExportFilters,
                  creator: Principal, *, now: datetime | None = None, progress: Progress | None = None,
                  model_dirs: Iterable[Path] = (), page_size: int = 5000, compresslevel: int = 1,
                  bundle_id: str | None = None) -> BundleSummary:
    """Write the bundle of ``filters`` to ``out_path`` and seal its ``export.created`` record.

    Refuses (``ExportFilterError``, field ``filters``) a selection with no decision, (field
    ``out``) an ``out_path`` that exists, and (``DerivedRowError``, naming the table and seq) a
    selection through a trace-index row that disagrees with its sealed record; nothing is written.
    ``signer`` must be the ledger's active key. ``bundle_id`` (a UUIDv7 made from ``now`` by
    default) lets a caller name the file after it."""
    if signer.verifier.vkey != ledger.active_vkey:
        raise ExportUnavailableError(f"the key given is {signer.verifier.vkey}; the ledger's active "
                                     f"key is {ledger.active_vkey}")
    out_path = Path(out_path)
    if out_path.exists():
        raise ExportFilterError("out", f"{out_path} exists; refusing to overwrite a bundle")
    now = now or datetime.now(UTC)
    created_at = format_time(now)
    bundle_id = bundle_id or uuid7(now)
    with engine.connect() as conn:
        total = count_selected(conn, filters)  # the index's count: progress only
    seal_right_edge(engine, ledger, filters)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_path.parent, prefix=f".{out_path.name}."))
    try:
        return _create(engine, ledger, signer, out_path, tmp, filters, creator, bundle_id, created_at,
                       total, progress, list(model_dirs), page_size, compresslevel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _create(engine: Engine, ledger: Ledger, signer: NoteSigner, out_path: Path, tmp: Path,
            filters: ExportFilters, creator: Principal, bundle_id: str, created_at: str, total: int,
            progress: Progress | None, model_dirs: list[Path], page_size: int,
            compresslevel: int) -> BundleSummary:
    stats = ReportStats()
    sp = Spools(tmp, compresslevel)
    # one snapshot for the selection: what was checked is what is written
    opts = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    try:
        with engine.connect().execution_options(**opts) as conn, conn.begin():
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
        ctx: Context = gather_context(conn, got.rulesets, got.models, got.purge_seqs, model_dirs)
        prev = previous_export(conn)
    extra = sorted(ctx.entries, key=lambda r: r.seq)
    seqs = array("q", heapq.merge(sp.seqs, (r.seq for r in extra)))
    cp = _checkpoint(ledger, signer, seqs[-1])
    size, root = cp.checkpoint.size, cp.checkpoint.root
    b64 = base64.b64encode
    with engine.connect() as conn:
        nodes = _nodes_bin(conn, size, seqs)
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
        vkeys = [str(v) for (v,) in conn.exec_driver_sql(
            "SELECT vkey FROM ledger_keys ORDER BY valid_from_size")]
    counts = {"records": len(seqs), "decisions": got.decisions, "annotations": got.annotations,
              "context": len(ctx.entries), "summaries": summaries.count, "refusals": got.refusals,
              "payloads_present": got.present,
              "payloads_purged": got.purged,
              "by_decision": {o: stats.by_decision[o] for o in OUTCOMES}}
    manifest: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA, "bundle_id": bundle_id, "created_at": created_at,
        "creator": creator.to_json(),
        "filters": filters.to_json(), "log": {"origin": ledger.origin, "verifier_keys": vkeys},
        "checkpoint": {"size": size, "root": b64(root).decode(), "file": "checkpoint.txt"},
        "previous": prev, "counts": counts, "completeness": summaries.manifest(),
        "range": {"first_seq": seqs[0], "last_seq": seqs[-1],
                  "contiguous": seqs[-1] - seqs[0] + 1 == len(seqs)},
        "rules": sorted(set(got.rulesets.values())), "models": sorted(got.models)}
    rec_z, idx_z = deflate_spools(tmp, sp, extra, compresslevel)
    zpath = tmp / "bundle.zip"
    with zpath.open("wb") as fh:
        z = BundleZip(fh, compresslevel=compresslevel)
        z.write_deflated("records.jsonl", rec_z)
        z.write_deflated("index.jsonl", idx_z)
        z.write_deflated("payloads.jsonl", payloads_z)
        z.write_deflated("records.csv", csv_z)
        z.write("checkpoint.txt", cp.note.encode())
        z.write("proofs/nodes.bin", nodes)
        if consistency is not None and prev_note is not None:
            z.write("proofs/consistency.json", canonical_bytes(consistency))
            z.write("checkpoints/previous.txt", prev_note.encode())
        for name, data in ctx.files:
            z.write(name, data)
        z.write("report.html", render_report(manifest, stats, ctx.purge_reasons))
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
    body = {"schema": EXPORT_SCHEMA, "bundle_id": bundle_id, "created_at": created_at,
            "creator": creator.to_json(), "filters": filters.to_record(), "counts": counts,
            "checkpoint": checkpoint, "previous": prev, "manifest_sha256": msha, "file_name": out_path.name}
    (receipt,) = ledger.append_many([Record.from_canonical_body(EXPORT_KIND, canonical_bytes(body))])
    os.replace(zpath, out_path)
    _fsync_dir(out_path.parent)
    return BundleSummary(bundle_id, out_path, created_at, creator.to_json(), filters.to_json(), counts,
                         checkpoint, prev, msha, out_path.stat().st_size, receipt.seq)


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
