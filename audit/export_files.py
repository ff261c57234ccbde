"""The bytes of a bundle's files: a ZIP writer that hashes as it streams, the per-line
encodings of ``index.jsonl`` / ``payloads.jsonl``, and the text of ``VERIFY.md``.

Line encoders write RFC 8785 directly (keys in order, no spaces; strings through orjson, whose
escaping is JCS's), so a million lines cost no canonicaliser calls.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import orjson

__all__ = ["VERIFY_MD", "BundleZip", "index_line", "payload_line", "purged_line"]

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

    def close(self) -> None:
        self._zip.close()


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

This is a sealtrail export bundle, format `sealtrail.bundle/1`. It holds sealed AML decision
records exactly as the bank's ledger stores them, with the proofs that they are in that ledger,
and everything needed to re-derive each decision (rule modules, model weights).

## With sealtrail

    sealtrail export verify BUNDLE.zip --trusted-key VKEY

`VKEY` is the bank's checkpoint verifier key, obtained from the bank through a channel you
trust (not from this bundle: `manifest.json` lists keys, but a forger would list his own).
Exit code 0 means every check below held; any failure names the record (seq, trace id) and why.

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

`report.html` and `records.csv` are for reading; they are covered by the file hashes only.
"""
