"""Regulator export bundles (docs/bundle-format.md, ``sealtrail.bundle/1``): creation.

``create_bundle`` streams the selected decisions (``audit.export_select``), the annotations that
refer to them and their context (governance, model registration and purge entries) into a ZIP,
with payloads, rule modules, model files, the signed checkpoint, the multiproof, the
consistency proof from the previous export, a report, ``manifest.json`` (every file's SHA-256,
computed while writing) and ``manifest.sig``; then seals an ``export.created`` record.

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
import bisect
import csv
import heapq
import io
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.canonical import canonical_bytes
from audit.export_context import Context, gather_context, previous_export
from audit.export_files import (
    VERIFY_MD,
    BundleZip,
    Deflated,
    Deflater,
    deflate_chunks,
    deflate_part,
    digest_chunks,
    index_line,
    payload_line,
    purged_line,
)
from audit.export_report import CSV_HEADER, ReportStats, csv_header, csv_row, render_report
from audit.export_select import (
    EntryRow,
    ExportError,
    ExportFilterError,
    ExportFilters,
    ExportUnavailableError,
    count_selected,
    iter_pages,
)
from audit.principal import Principal
from ledger import Ledger, NoteSigner, Record, store
from ledger.checkpoint import SignedCheckpoint
from ledger.merkle import verify_consistency
from ledger.multiproof import encode_nodes, frontier
from ledger.multiproof_store import subtree_hashes
from ledger.note import sign_note
from ledger.proofs import consistency_proof
from ledger.records import format_time
from wasm_rules import OUTCOMES

__all__ = ["BUNDLE_SCHEMA", "EXPORT_KIND", "EXPORT_SCHEMA", "BundleSummary", "ExportError",
           "ExportFilterError", "ExportFilters", "ExportUnavailableError", "create_bundle", "list_exports",
           "manifest_sig_text", "uuid7"]

BUNDLE_SCHEMA = "sealtrail.bundle/1"
EXPORT_KIND = "export.created"
EXPORT_SCHEMA = "sealtrail.export.created/1"
Progress = Callable[[int, int], None]


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


_CSV_FIELDS = len(CSV_HEADER)


class _Spools:
    """The four members that grow together while the ledger is read: ``records`` and ``index``
    spooled raw (the context entries go in among them at the end), with the end offset of
    every line; ``payloads.jsonl`` and ``records.csv`` final already, so compressed on worker
    threads as they come."""

    def __init__(self, directory: Path, compresslevel: int) -> None:
        self.dir = directory
        self.records = (directory / "records").open("wb", buffering=1 << 20)
        self.index = (directory / "index").open("wb", buffering=1 << 20)
        self.rec_ends = array("q")
        self.idx_ends = array("q")
        self._rec_at = 0
        self._idx_at = 0
        self.payloads = Deflater(directory / "payloads.z", compresslevel)
        self.csv = Deflater(directory / "csv.z", compresslevel)
        self.csv.write(csv_header())
        self.seqs = array("q")  # every seq of records (decisions and annotations), ascending

    def entry(self, row: EntryRow) -> None:
        rec = row.record + b"\n"
        idx = index_line(row.seq, row.kind, row.trace_id, row.leaf_hash, row.chain_hash)
        self.records.write(rec)
        self.index.write(idx)
        self._rec_at += len(rec)
        self._idx_at += len(idx)
        self.rec_ends.append(self._rec_at)
        self.idx_ends.append(self._idx_at)
        self.seqs.append(row.seq)

    def csv_rows(self, rows: list[list[str]]) -> None:
        """Rows as ``csv.writer`` (minimal quoting, CRLF) writes them: joined by hand where no
        field needs quotes (no comma beyond the separators, no quote, CR or LF)."""
        out: list[str] = []
        buf = io.StringIO(newline="")
        w = csv.writer(buf, lineterminator="\r\n")
        seps = _CSV_FIELDS - 1
        for fields in rows:
            line = ",".join(fields)
            if line.count(",") == seps and '"' not in line and "\r" not in line and "\n" not in line:
                out.append(line)
                out.append("\r\n")
            else:
                buf.seek(0)
                buf.truncate()
                w.writerow(fields)
                out.append(buf.getvalue())
        self.csv.write("".join(out).encode())

    def close(self) -> tuple[Deflated, Deflated]:
        """Close the raw spools; the compressed payloads and csv members."""
        self.records.close()
        self.index.close()
        return self.payloads.finish(), self.csv.finish()

    def abort(self) -> None:
        self.records.close()
        self.index.close()
        self.payloads.abort()
        self.csv.abort()


@dataclass
class _Pass:
    """What reading the selection learned."""

    decisions: int = 0
    annotations: int = 0
    present: int = 0
    purged: int = 0
    rulesets: dict[str, str] | None = None  # "id@version" -> module sha256
    models: set[str] | None = None
    purge_seqs: set[int] | None = None


def _annotations(conn: Connection, page: list[EntryRow]) -> list[tuple[int, EntryRow]]:
    p = store.param(conn)
    wanted = {r.seq for r in page}
    rows = conn.exec_driver_sql(
        "SELECT a.target_seq, e.seq, e.kind, e.record, e.leaf_hash, e.chain_hash, e.trace_id "
        "FROM audit_annotations a JOIN ledger_entries e ON e.seq = a.seq "
        f"WHERE a.target_seq >= {p} AND a.target_seq <= {p}", (page[0].seq, page[-1].seq)).all()
    return [(int(t), EntryRow(int(s), k, bytes(r), bytes(lh), bytes(ch), tid))
            for t, s, k, r, lh, ch, tid in rows if int(t) in wanted]


def _payload_rows(conn: Connection, shas: list[str]) -> dict[str, tuple[bytes | None, int | None]]:
    p = store.param(conn)
    out: dict[str, tuple[bytes | None, int | None]] = {}
    for i in range(0, len(shas), 500):
        chunk = shas[i:i + 500]
        for sha, data, pseq in conn.exec_driver_sql(
                f"SELECT sha256, data, purge_seq FROM ledger_payloads WHERE sha256 IN "
                f"({', '.join([p] * len(chunk))})", tuple(chunk)).all():
            out[str(sha)] = (None if data is None else bytes(data), None if pseq is None else int(pseq))
    return out


def _page_payloads(conn: Connection, page: list[EntryRow],
                   want: list[str]) -> dict[str, tuple[bytes | None, int | None]]:
    """The payload rows ``want`` of ``page``. Where the page is dense in seqs (an unfiltered
    selection), one range scan of the payloads first stored by its entries (rows in insertion
    order, so read in order), then lookups by digest for the rest (payloads first stored
    earlier); else lookups by digest only."""
    if page[-1].seq - page[0].seq >= 2 * len(page):
        return _payload_rows(conn, want)
    p = store.param(conn)
    wanted = set(want)
    out: dict[str, tuple[bytes | None, int | None]] = {}
    for sha, data, pseq in conn.exec_driver_sql(
            f"SELECT sha256, data, purge_seq FROM ledger_payloads "
            f"WHERE first_seq >= {p} AND first_seq <= {p}", (page[0].seq, page[-1].seq)).all():
        if str(sha) in wanted:
            out[str(sha)] = (None if data is None else bytes(data), None if pseq is None else int(pseq))
    rest = [sha for sha in want if sha not in out]
    if rest:
        out.update(_payload_rows(conn, rest))
    return out


_PAYLOAD_AT = b'{"kind":"decision","payload_sha256":"'


def _payload_sha(row: EntryRow) -> str | None:
    """The envelope's payload SHA-256, read off its fixed place in the JCS bytes."""
    rec = row.record
    if rec.startswith(_PAYLOAD_AT):
        return rec[len(_PAYLOAD_AT):len(_PAYLOAD_AT) + 64].decode()
    sha = orjson.loads(rec).get("payload_sha256")
    return None if sha is None else str(sha)


def _read_selection(conn: Connection, f: ExportFilters, sp: _Spools, stats: ReportStats, total: int,
                    progress: Progress | None, page_size: int) -> _Pass:
    res = _Pass(rulesets={}, models=set(), purge_seqs=set())
    assert res.rulesets is not None and res.models is not None and res.purge_seqs is not None
    seen: set[bytes] = set()  # payload digests already in payloads.jsonl
    purged_seen: set[bytes] = set()
    pending: list[tuple[int, EntryRow]] = []  # annotations, by seq, waiting for their place
    loads = orjson.loads
    for page in iter_pages(conn, f, page_size):
        notes: dict[int, int] = {}
        for target, row in _annotations(conn, page):
            notes[target] = notes.get(target, 0) + 1
            heapq.heappush(pending, (row.seq, row))
        want = sorted({sha for sha in map(_payload_sha, page) if sha is not None
                       and bytes.fromhex(sha) not in seen})
        stored = _page_payloads(conn, page, want) if want else {}
        rows: list[list[str]] = []
        for row in page:
            env = loads(row.record)  # one at a time: a page of live dicts would keep the GC busy
            while pending and pending[0][0] < row.seq:
                sp.entry(heapq.heappop(pending)[1])
                res.annotations += 1
            sp.entry(row)
            state = "none"
            sha = env.get("payload_sha256")
            if sha is not None:
                digest = bytes.fromhex(sha)
                if digest in seen:
                    state = "purged" if digest in purged_seen else "present"
                else:
                    if sha not in stored:
                        raise ExportUnavailableError(
                            f"entry {row.seq}: payload {sha} has no row in the payload store "
                            "(ledger damage; run 'sealtrail ledger verify')")
                    data, pseq = stored[sha]
                    seen.add(digest)
                    if data is None:
                        if pseq is None:
                            raise ExportUnavailableError(f"entry {row.seq}: payload {sha} is empty "
                                                         "without a purge record (ledger damage)")
                        sp.payloads.write(purged_line(sha, pseq))
                        purged_seen.add(digest)
                        res.purged += 1
                        res.purge_seqs.add(pseq)
                        stats.add_purged(sha, pseq)
                        state = "purged"
                    else:
                        sp.payloads.write(payload_line(sha, data))
                        res.present += 1
                        state = "present"
            n = notes.get(row.seq, 0)
            rows.append(csv_row(row.seq, env, state, n))
            stats.add(row.seq, env, n)
            b = env["record"]
            r = b["rules"]
            res.rulesets[f"{r['ruleset_id']}@{r['version']}"] = r["module_sha256"]
            res.models.add(b["model"]["sha256"])
            res.decisions += 1
        sp.csv_rows(rows)
        if progress is not None:
            progress(res.decisions, total)
    while pending:
        sp.entry(heapq.heappop(pending)[1])
        res.annotations += 1
    return res


_Piece = tuple[int, int] | bytes  # a byte range of a spool, or a line of its own


def _pieces(ends: array[int], extra: list[tuple[int, bytes]], seqs: array[int]) -> list[_Piece]:
    """A spool's lines (whose seqs are ``seqs`` and end offsets ``ends``) with the ``extra``
    lines put in seq order: as spool ranges and extra lines."""
    out: list[_Piece] = []
    at = 0
    for seq, line in extra:
        k = bisect.bisect_left(seqs, seq)  # spooled lines before this one
        upto = ends[k - 1] if k else 0
        if upto > at:
            out.append((at, upto))
            at = upto
        out.append(line)
    total = ends[-1] if ends else 0
    if total > at:
        out.append((at, total))
    return out


def _split(pieces: list[_Piece], parts: int) -> list[list[_Piece]]:
    """``pieces`` cut into about ``parts`` runs of equal spool bytes."""
    total = sum(p[1] - p[0] for p in pieces if isinstance(p, tuple))
    step = max(1, -(-total // parts))
    segs: list[list[_Piece]] = [[]]
    room = step
    for p in pieces:
        if isinstance(p, bytes):
            segs[-1].append(p)
            continue
        lo, hi = p
        while lo < hi:
            if room == 0:
                segs.append([])
                room = step
            take = min(room, hi - lo)
            segs[-1].append((lo, lo + take))
            lo += take
            room -= take
    return [s for s in segs if s]


def _read(spool: Path, pieces: list[_Piece]) -> Iterator[bytes]:
    """The bytes of ``pieces``, in chunks of at most 1 MiB."""
    with spool.open("rb", buffering=0) as f:
        for p in pieces:
            if isinstance(p, bytes):
                yield p
                continue
            lo, hi = p
            f.seek(lo)
            while lo < hi:
                chunk = f.read(min(1 << 20, hi - lo))
                if not chunk:
                    raise OSError(f"{spool} ends before offset {hi}")
                lo += len(chunk)
                yield chunk


def _deflate_spools(tmp: Path, sp: _Spools, extra: list[EntryRow],
                    compresslevel: int) -> tuple[Deflated, Deflated]:
    """``records.jsonl`` and ``index.jsonl``, compressed on two threads (zlib and hashlib release
    the GIL): records in four parts concatenated afterwards, hashed in order beside them."""
    rec_extra = [(r.seq, r.record + b"\n") for r in extra]
    idx_extra = [(r.seq, index_line(r.seq, r.kind, r.trace_id, r.leaf_hash, r.chain_hash)) for r in extra]
    rec_pieces = _pieces(sp.rec_ends, rec_extra, sp.seqs)
    idx_pieces = _pieces(sp.idx_ends, idx_extra, sp.seqs)
    rec_spool, idx_spool = tmp / "records", tmp / "index"
    segs = _split(rec_pieces, 4)
    paths = tuple(tmp / f"records.{i}.z" for i in range(len(segs)))
    with ThreadPoolExecutor(2, thread_name_prefix="deflate") as pool:
        parts = [pool.submit(deflate_part, path, _read(rec_spool, seg), compresslevel)
                 for path, seg in zip(paths, segs, strict=True)]
        idx_f = pool.submit(deflate_chunks, tmp / "index.z", _read(idx_spool, idx_pieces), compresslevel)
        rec_h = pool.submit(digest_chunks, _read(rec_spool, rec_pieces))
        sha, crc, n = rec_h.result()
        rec_z = Deflated(paths, sha, crc, n, sum(f.result() for f in parts))
        idx_z = idx_f.result()
    rec_spool.unlink()
    idx_spool.unlink()
    return rec_z, idx_z


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

    Refuses (``ExportFilterError``, field ``filters``) a selection with no decision, and
    (field ``out``) an ``out_path`` that exists. ``signer`` must be the ledger's active key.
    ``bundle_id`` (a UUIDv7 made from ``now`` by default) lets a caller name the file after it."""
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
        total = count_selected(conn, filters)
    if total == 0:
        raise ExportFilterError("filters", f"no decision was recorded between {filters.start} and "
                                           f"{filters.end} that matches every filter; nothing to export")
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
    sp = _Spools(tmp, compresslevel)
    try:
        with engine.connect() as conn:
            got = _read_selection(conn, filters, sp, stats, total, progress, page_size)
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
              "context": len(extra), "payloads_present": got.present, "payloads_purged": got.purged,
              "by_decision": {o: stats.by_decision[o] for o in OUTCOMES}}
    manifest: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA, "bundle_id": bundle_id, "created_at": created_at,
        "creator": creator.to_json(),
        "filters": filters.to_json(), "log": {"origin": ledger.origin, "verifier_keys": vkeys},
        "checkpoint": {"size": size, "root": b64(root).decode(), "file": "checkpoint.txt"},
        "previous": prev, "counts": counts,
        "range": {"first_seq": seqs[0], "last_seq": seqs[-1],
                  "contiguous": seqs[-1] - seqs[0] + 1 == len(seqs)},
        "rules": sorted(set(got.rulesets.values())), "models": sorted(got.models)}
    rec_z, idx_z = _deflate_spools(tmp, sp, extra, compresslevel)
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
