"""The bytes of a bundle's files: a ZIP writer that hashes as it streams, the per-line
encodings of ``index.jsonl`` / ``payloads.jsonl``, and the text of ``VERIFY.md``.

Line encoders write RFC 8785 directly (keys in order, no spaces; strings through orjson, whose
escaping is JCS's), so a million lines cost no canonicaliser calls.
"""

from __future__ import annotations

import base64
import hashlib
import queue
import re
import shutil
import threading
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = ["VERIFY_MD", "BundleZip", "Deflated", "Deflater", "deflate_chunks", "deflate_part",
           "digest_chunks", "index_line", "payload_line", "purged_line"]

_NAME = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
_BIG = 1 << 30  # members that may pass 2 GiB need ZIP64 headers from the start


class BundleZip:
    """A ZIP being written, one member at a time; ``files`` maps each name to its SHA-256 (hex)
    computed over exactly the bytes written."""

    def __init__(self, fileobj: IO[bytes], *, compresslevel: int = 1) -> None:
        self._zip = zipfile.ZipFile(fileobj, "w", zipfile.ZIP_DEFLATED, compresslevel=compresslevel,
                                    allowZip64=True)
        self.files: dict[str, str] = {}
        self.sizes: dict[str, int] = {}

    def write(self, name: str, data: bytes) -> str:
        return self.write_chunks(name, (data,), len(data))

    def write_chunks(self, name: str, chunks: Iterable[bytes], size_hint: int = 0) -> str:
        """Stream ``chunks`` into member ``name``; returns (and records) its SHA-256."""
        if not _NAME.fullmatch(name) or ".." in name.split("/") or name in self.files:
            raise ValueError(f"bad or duplicate bundle member name {name!r}")
        h = hashlib.sha256()
        n = 0
        with self._zip.open(name, "w", force_zip64=size_hint >= _BIG) as out:
            for chunk in chunks:
                h.update(chunk)
                out.write(chunk)
                n += len(chunk)
        self.files[name] = h.hexdigest()
        self.sizes[name] = n
        return self.files[name]

    def write_deflated(self, name: str, d: Deflated) -> str:
        """Put the member ``d`` (compressed beforehand) in as ``name``; returns its SHA-256."""
        if not _NAME.fullmatch(name) or ".." in name.split("/") or name in self.files:
            raise ValueError(f"bad or duplicate bundle member name {name!r}")
        zip64 = d.size >= _BIG or d.csize + 2 > zipfile.ZIP64_LIMIT
        # zipfile has no public way to add deflated bytes: open the member as usual, copy the
        # bytes under it and give the handle their CRC and sizes. The stream was sync-flushed,
        # not finished: closing appends the handle's own (empty) final block, and rewrites the
        # local header from the figures given.
        w: Any = self._zip.open(name, "w", force_zip64=zip64)
        try:
            for part in d.parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, w._fileobj, 1 << 20)
            w._crc, w._file_size, w._compress_size = d.crc, d.size, d.csize
        finally:
            w.close()
        self.files[name] = d.sha256
        self.sizes[name] = d.size
        return d.sha256

    def close(self) -> None:
        self._zip.close()


@dataclass(frozen=True)
class Deflated:
    """A member's bytes as raw deflate in the files ``parts``, one stream once concatenated
    (each part sync-flushed, not finished), with the SHA-256 (hex), CRC-32 and size of the bytes
    themselves and the compressed size."""

    parts: tuple[Path, ...]
    sha256: str
    crc: int
    size: int
    csize: int


class _Sink:
    """Hashes, checksums, compresses and writes out, in the calling thread. hashlib, zlib and
    file writes release the GIL on big buffers, so a sink on a thread of its own runs beside
    the main one."""

    def __init__(self, path: Path, compresslevel: int) -> None:
        self.path = path
        self._out = path.open("wb")
        self._z = zlib.compressobj(compresslevel, zlib.DEFLATED, -15)
        self._h = hashlib.sha256()
        self._crc = 0
        self._n = 0
        self._cn = 0

    def write(self, data: bytes) -> None:
        self._h.update(data)
        self._crc = zlib.crc32(data, self._crc)
        self._n += len(data)
        out = self._z.compress(data)
        if out:
            self._cn += len(out)
            self._out.write(out)

    def finish(self) -> Deflated:
        out = self._z.flush(zlib.Z_SYNC_FLUSH)
        self._cn += len(out)
        self._out.write(out)
        self._out.close()
        return Deflated((self.path,), self._h.hexdigest(), self._crc, self._n, self._cn)

    def abort(self) -> None:
        self._out.close()


def deflate_chunks(path: Path, chunks: Iterable[bytes], compresslevel: int) -> Deflated:
    """``chunks`` compressed into ``path``, in this thread."""
    sink = _Sink(path, compresslevel)
    try:
        for chunk in chunks:
            sink.write(chunk)
    except BaseException:
        sink.abort()
        raise
    return sink.finish()


def deflate_part(path: Path, chunks: Iterable[bytes], compresslevel: int) -> int:
    """``chunks`` as raw deflate in ``path`` from a fresh compressor (no back-reference before
    its start), sync-flushed: such parts, concatenated in order, are one deflate stream of the
    concatenated bytes (what pigz does). Returns the compressed size."""
    z = zlib.compressobj(compresslevel, zlib.DEFLATED, -15)
    n = 0
    with path.open("wb") as out:
        for chunk in chunks:
            c = z.compress(chunk)
            n += len(c)
            out.write(c)
        c = z.flush(zlib.Z_SYNC_FLUSH)
        out.write(c)
    return n + len(c)


def digest_chunks(chunks: Iterable[bytes]) -> tuple[str, int, int]:
    """SHA-256 (hex), CRC-32 and size of the concatenated ``chunks``."""
    h = hashlib.sha256()
    crc = n = 0
    for chunk in chunks:
        h.update(chunk)
        crc = zlib.crc32(chunk, crc)
        n += len(chunk)
    return h.hexdigest(), crc, n


class Deflater:
    """A member written piecemeal and compressed on a worker thread while the caller goes on
    producing: ``write`` buffers up to 1 MiB, then queues it (at most 8 MiB waiting)."""

    def __init__(self, path: Path, compresslevel: int) -> None:
        self._sink = _Sink(path, compresslevel)
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self._buf: list[bytes] = []
        self._size = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"deflate {path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._q.get()) is not None:
            if self._error is None:
                try:
                    self._sink.write(chunk)
                except BaseException as exc:  # reported by finish; keep draining the queue
                    self._error = exc

    def write(self, data: bytes) -> None:
        self._buf.append(data)
        self._size += len(data)
        if self._size >= 1 << 20:
            self._q.put(b"".join(self._buf))
            self._buf, self._size = [], 0

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()

    def finish(self) -> Deflated:
        if self._buf:
            self._q.put(b"".join(self._buf))
            self._buf, self._size = [], 0
        self._stop()
        if self._error is not None:
            self._sink.abort()
            raise self._error
        return self._sink.finish()

    def abort(self) -> None:
        self._buf = []
        self._stop()
        self._sink.abort()


def index_line(seq: int, kind: str, trace_id: str, leaf: bytes, chain: bytes) -> bytes:
    """One ``index.jsonl`` line (with its newline)."""
    return (b'{"chain_hash":"%s","kind":%s,"leaf_hash":"%s","seq":%d,"trace_id":%s}\n'
            % (chain.hex().encode(), orjson.dumps(kind), leaf.hex().encode(), seq, orjson.dumps(trace_id)))


def payload_line(sha256: str, data: bytes) -> bytes:
    """A present payload's ``payloads.jsonl`` line: UTF-8 text where it is, else base64."""
    try:
        text, encoding = data.decode("utf-8"), b"utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(data).decode(), b"base64"
    return b'{"data":%s,"encoding":"%s","sha256":"%s","state":"present"}\n' % (
        orjson.dumps(text), encoding, sha256.encode())


def purged_line(sha256: str, purge_seq: int) -> bytes:
    return b'{"purge_seq":%d,"sha256":"%s","state":"purged"}\n' % (purge_seq, sha256.encode())


def read_chunks(path: Path, size: int = 1 << 20) -> Iterable[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


VERIFY_MD = """\
# Verifying this bundle

This is a sealtrail export bundle, format `sealtrail.bundle/4` (a time window),
`sealtrail.bundle/5` (one case: see "A bundle cut for one case" below), `sealtrail.bundle/6`
(either, with the sanctions lists its decisions were screened against) or `sealtrail.bundle/7` (a
time window that also carries the feature state its decisions were made on: see "Decisions made
again from their messages" below). It holds sealed AML
decision records exactly as the bank's ledger stores them, with the proofs that they are in that
ledger, everything needed to re-derive each decision (rule modules, model weights), the sealed
decision summaries around its time window that prove no decision matching its filters was left out,
and (for a selection of the whole window) the sealed refusals of the screening requests refused in
that window, which the same summaries prove complete.

## With sealtrail

    sealtrail export verify BUNDLE.zip --trusted-key VKEY

`VKEY` is the bank's checkpoint verifier key, obtained from the bank through a channel you
trust (not from this bundle: `manifest.json` lists keys, but a forger would list his own).
Exit code 0 means every check below held; any failure names the record (seq, trace id) and why.
Steps 1 to 8 can also be checked without sealtrail's code by `tools/verify_bundle.py` in
sealtrail's source (one file: the Python standard library and `cryptography`).

## By hand, or in an independent verifier

The normative description is the bundle format page shipped with sealtrail
(`docs/bundle-format.md`). In short:

1. `manifest.sig` is a C2SP signed note (Ed25519) whose text is
   `sealtrail bundle manifest v1`, the bundle id and the hex SHA-256 of `manifest.json`, one per
   line. Check the signature with the pinned key and the hash against `manifest.json`.
2. `manifest.json` (RFC 8785 JSON) lists every other file with its SHA-256 in `files`; refuse any
   file not listed and any listed file missing or with another hash.
3. `checkpoint.txt` is a C2SP tlog-checkpoint (origin, tree size, base64 root) signed by the same key.
4. Each line of `records.jsonl` is one sealed ledger entry (RFC 8785). Its leaf hash is
   SHA-256(0x00 || line without its newline) (RFC 6962); `index.jsonl` states the seq of each line.
5. `proofs/nodes.bin` holds 48-byte items `lo (u64 BE) || hi (u64 BE) || hash`: the hashes of the
   subtrees `[lo, hi)` of the checkpoint's tree that hold no exported leaf but whose sibling does.
   From the exported leaves and these, recompute the RFC 9162 root of size `checkpoint.size`; it
   must equal the checkpoint's root. That proves every record (an inclusion proof for each).
6. `proofs/consistency.json` (when the manifest names a previous export) is an RFC 9162
   consistency proof from that export's checkpoint (`checkpoints/previous.txt`) to this one.
7. Where consecutive lines of `index.jsonl` have consecutive seqs, check
   `chain_hash = SHA-256(previous chain_hash || leaf_hash)`.
8. `payloads.jsonl` holds each raw message (or states that it was purged, naming the
   `ledger.payload_purge` record that did it); its SHA-256 is the record's `payload_sha256`.
9. Replay: run each decision's recorded features and score through
   `rules/<module_sha256>.wasm` (a WebAssembly module with no imports) and the features through
   the numpy model in `models/<model_sha256>/weights.npz`; outcome and fired rules must match
   exactly, the score within 1e-4.
10. Completeness: the `decision.summary` lines (each speaks for the entries just before it:
   outcome, fired rule ids, keyed account hashes) form one chain (`prev` = seq and leaf hash of
   the summary before), the first recorded before the window (`completeness.left`), the last at
   or after its end (`completeness.right`), those between inside it. Every summarised decision
   inside the window that passes the filters must be a decision line of the bundle, and every
   decision line must be spoken for by its summary. A summary may also speak for a refusal
   (`{"refusal": kind}`, summary version 2): when the filters are the time window alone, every
   such refusal inside the window must be a refusal line of the bundle, and every refusal line
   must be spoken for by its summary.
11. Refusals (`kind` `refusal`, body `sealtrail.refusal/1` or `/2`): where the payload is present, parse
   it again with sealtrail's message parser as the record's `request` says; it must be refused
   the same way (same kind, fault count and faults, quoted values read as `'…'`). A payload that
   now parses is a replay mismatch (`replay.refusal`).

`report.html` and `records.csv` are for reading; they are covered by the file hashes only.

## Decisions made again from their messages (format 7)

`manifest.state` names the seq `F` the decisions' feature state was caught up from.
`state/records.jsonl` and `state/index.jsonl` are ledger entries as in step 4 (the decision
summaries and state deltas from `F` on, and a `state.snapshot` with `state/snapshot.bin` when
`manifest.state.snapshot` is set); their leaves are proved in step 5 with the records. The summaries
form one chain from `F` (or the snapshot) on, and each summary of decisions is followed by its state
delta: no state was left out. For each decision whose payload is present, parse the payload again,
catch a feature state up from its delta's `state_from` through the deltas (or start from the
snapshot's state, whose tree must give the sealed root), compute the features with the accounts
as the delta's keyed identifiers, and require the record's `features.scaled` exactly; replay (step
9) and the screening done again then check the score, rules and hits on those very features.

## A bundle cut for one case (format 5)

`manifest.case` names the case; `filters` and `completeness` are null and there are no summaries.
`records.jsonl` holds the decisions that opened the case's alerts, the `alert_policy` records
their deadlines were dated under, every `case_event` record about the case (it targets the case
or one of its alerts, or links another case to it; a filed report's bytes are its payload), the
`ledger.legal_hold` records over them, annotations and context as above. `case/case.json`
states the case's row, its alerts, every carried event (applied or not, and why) and the payment
outcomes, and lists as `withheld` (seq and leaf hash) every other `case_event` record of the
seqs searched: these are leaves of the multiproof too (step 5 includes them), so they are proved
without their content, another case's rationale, being disclosed.

12. Re-run the case fold (docs/cases.md: an alert opens per alerting decision, joins its
   subject's open case, moves by each event) over the decisions, policies and events in seq
   order; it must give exactly the rows `case/case.json` states. Every carried event must be
   about the case and listed there, every listed one carried; every decision must open an alert
   of the case. Each `file_report` event's payload hashes to the `report` it states.
13. That no withheld leaf is about the case is the bank's signed statement: ask the bank to open
   any of them (hand over the record bytes), and check that SHA-256(0x00 || bytes) is the leaf and
   that the record is a case event of another case.

## Compliance facts (format 9)

A `sealtrail.bundle/9` bundle (a time window, or one case with `manifest.case` set) carries the
compliance facts of its period in `compliance.json` (keys and their rotations and revocations, legal
holds in force, purges, ruleset approvals, the decisions' outcomes and refusals), shown in
`report.html`. The period is the window, or for a case the span of its records: from the earliest to
one microsecond after the latest `recorded_at` of the `records.jsonl` lines in the case's search
range. `compliance/records.jsonl` holds the history records the facts are read from (seq 0 to the
period's end), each proved by its inclusion proof in `compliance/proofs.json`; `sealtrail export
verify` recomputes the facts from them and the decisions (and refusals) of `records.jsonl`, and
fails where `compliance.json` or the page says otherwise.
"""
