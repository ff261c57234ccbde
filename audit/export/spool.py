"""The selection pass of bundle creation: the ledger read once, page by page, into spools.

``read_selection`` streams the selected decisions and the annotations that refer to them into
``Spools`` (``records``/``index`` spooled raw with their line end offsets; ``payloads.jsonl`` and
``records.csv`` compressed on worker threads as they grow); ``deflate_spools`` then merges the
context entries in by byte range and compresses ``records.jsonl`` (in parts) and ``index.jsonl``
on two threads. Used by ``audit.export.create``; see its docstring for the whole of creation.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from sqlalchemy import Connection

from audit.errors import ExportUnavailableError
from audit.export.files import (
    Deflated,
    Deflater,
    deflate_chunks,
    deflate_part,
    digest_chunks,
    index_line,
    payload_line,
    purged_line,
)
from audit.export.report import ReportStats, csv_header, csv_line, csv_row
from audit.export.select import EntryRow, ExportFilters, annotation_index, iter_pages, window_bounds
from ledger import store

__all__ = ["Progress", "Spools", "deflate_spools", "payload_rows", "read_selection"]

Progress = Callable[[int, int], None]


class Spools:
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
        self.seqs = array("q")  # every seq of records (decisions, annotations, summaries), ascending

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
        """Rows as ``audit.export.report.csv_line`` writes them (RFC 4180, CRLF, formula-like
        cells neutralised)."""
        self.csv.write("".join(map(csv_line, rows)).encode())

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
    list_seqs: set[int] = field(default_factory=set)  # sanctions_list records the decisions name
    clearance_seqs: set[int] = field(default_factory=set)  # good-guy clearances the decisions name
    screened: int = 0  # decisions screened against at least one list (sealtrail.decision/5)
    decision_seqs: array[int] = field(default_factory=lambda: array("q"))  # ascending
    refusals: int = 0
    refusal_seqs: array[int] = field(default_factory=lambda: array("q"))  # ascending


def _annotations(conn: Connection, page: list[EntryRow],
                 notes_of: dict[int, list[int]]) -> list[tuple[int, EntryRow]]:
    """``(target seq, annotation entry)`` of every sealed annotation of ``page``'s decisions."""
    wanted = [(r.seq, s) for r in page for s in notes_of.get(r.seq, ())]
    if not wanted:
        return []
    p = store.param(conn)
    seqs = [s for _, s in wanted]
    got: dict[int, EntryRow] = {}
    for i in range(0, len(seqs), 500):
        chunk = seqs[i:i + 500]
        for s, k, r, lh, ch, tid in conn.exec_driver_sql(
                "SELECT seq, kind, record, leaf_hash, chain_hash, trace_id FROM ledger_entries "
                f"WHERE seq IN ({', '.join([p] * len(chunk))})", tuple(chunk)):
            got[int(s)] = EntryRow(int(s), k, bytes(r), bytes(lh), bytes(ch), tid)
    return [(t, got[s]) for t, s in wanted]


def payload_rows(conn: Connection, shas: list[str]) -> dict[str, tuple[bytes | None, int | None]]:
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
        return payload_rows(conn, want)
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
        out.update(payload_rows(conn, rest))
    return out


_PAYLOAD_AT = b'{"kind":"decision","payload_sha256":"'


def _payload_sha(row: EntryRow) -> str | None:
    """The envelope's payload SHA-256, read off its fixed place in the JCS bytes."""
    rec = row.record
    if rec.startswith(_PAYLOAD_AT):
        return rec[len(_PAYLOAD_AT):len(_PAYLOAD_AT) + 64].decode()
    sha = orjson.loads(rec).get("payload_sha256")
    return None if sha is None else str(sha)


def read_selection(conn: Connection, f: ExportFilters, sp: Spools, stats: ReportStats, total: int,
                    progress: Progress | None, page_size: int,
                    alongside: Iterator[EntryRow] | None = None) -> _Pass:
    """The selection into the spools; ``alongside`` (ascending seqs, none a selected decision's:
    the decision summaries and the window's refusals) goes in among the records in seq order, a
    refusal's payload line where it is first named."""
    res = _Pass(rulesets={}, models=set(), purge_seqs=set())
    assert res.rulesets is not None and res.models is not None and res.purge_seqs is not None
    seen: set[bytes] = set()  # payload digests already in payloads.jsonl
    purged_seen: set[bytes] = set()
    pending: list[tuple[int, EntryRow]] = []  # annotations, by seq, waiting for their place
    alongside = alongside if alongside is not None else iter(())
    other = next(alongside, None)
    loads = orjson.loads
    bounds = window_bounds(conn, f)
    notes_of = annotation_index(conn, *bounds) if bounds[0] <= bounds[1] else {}

    def put_other(row: EntryRow) -> None:
        sp.entry(row)
        if row.kind != "refusal":
            return
        stats.add_refusal(row.seq, row.record)
        res.refusals += 1
        res.refusal_seqs.append(row.seq)
        sha = _payload_sha(row)
        if sha is None or bytes.fromhex(sha) in seen:
            return
        got = payload_rows(conn, [sha]).get(sha)
        if got is None:
            raise ExportUnavailableError(f"entry {row.seq}: payload {sha} has no row in the payload store "
                                         "(ledger damage; run 'sealtrail ledger verify')")
        data, pseq = got
        seen.add(bytes.fromhex(sha))
        if data is not None:
            sp.payloads.write(payload_line(sha, data))
            res.present += 1
        elif pseq is None:
            raise ExportUnavailableError(f"entry {row.seq}: payload {sha} is empty without a purge record "
                                         "(ledger damage)")
        else:
            sp.payloads.write(purged_line(sha, pseq))
            purged_seen.add(bytes.fromhex(sha))
            res.purged += 1
            res.purge_seqs.add(pseq)  # type: ignore[union-attr]
            stats.add_purged(sha, pseq)

    for page in iter_pages(conn, f, page_size, bounds):
        if not page:
            continue
        notes: dict[int, int] = {}
        for target, row in _annotations(conn, page, notes_of):
            notes[target] = notes.get(target, 0) + 1
            heapq.heappush(pending, (row.seq, row))
        want = sorted({sha for sha in map(_payload_sha, page) if sha is not None
                       and bytes.fromhex(sha) not in seen})
        stored = _page_payloads(conn, page, want) if want else {}
        rows: list[list[str]] = []
        for row in page:
            env = loads(row.record)  # one at a time: a page of live dicts would keep the GC busy
            while other is not None and other.seq < row.seq:
                while pending and pending[0][0] < other.seq:
                    sp.entry(heapq.heappop(pending)[1])
                    res.annotations += 1
                put_other(other)
                other = next(alongside, None)
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
            scr = b.get("screening")
            if scr is not None and scr["lists"]:
                res.screened += 1
                res.list_seqs.update(int(x["seq"]) for x in scr["lists"])
                res.clearance_seqs.update(int(c["clearance_seq"]) for c in scr.get("cleared", ()))
            res.decisions += 1
            res.decision_seqs.append(row.seq)
        sp.csv_rows(rows)
        if progress is not None:
            progress(res.decisions, total)
    while other is not None:
        while pending and pending[0][0] < other.seq:
            sp.entry(heapq.heappop(pending)[1])
            res.annotations += 1
        put_other(other)
        other = next(alongside, None)
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


def deflate_spools(tmp: Path, sp: Spools, extra: list[EntryRow],
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
