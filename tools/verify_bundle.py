#!/usr/bin/env python3
"""Independent verifier for sealtrail export bundles (docs/bundle-format.md, docs/formats.md).

Written from those two pages alone: it imports nothing of sealtrail, only the Python standard
library and the ``cryptography`` package, so an examiner can read it in one sitting and run it
beside (or instead of) ``sealtrail export verify``. It checks the cryptographic evidence of a
bundle of any format 1 to 9:

1. ``manifest.sig``: a C2SP signed note (Ed25519) by a pinned key over the manifest's SHA-256;
2. every file's SHA-256 against ``manifest.files`` (nothing unlisted, nothing missing), and the
   content-addressed files (``rules/<sha>.wasm``, ``models/<sha>/weights.npz``, ``lists/<sha>``)
   against their names;
3. ``checkpoint.txt`` (C2SP tlog-checkpoint): its signature, origin, size and root;
4. every record's inclusion in the checkpoint's RFC 6962 tree, through the multiproof
   ``proofs/nodes.bin``: the root recomputed, then each leaf's RFC 9162 audit path checked (with a
   case bundle's withheld leaves, and format 7's state lines, ``state/records.jsonl``);
5. the chain hashes of records whose seqs are consecutive; payload hashes and purge records;
   the consistency proof from the previous export's checkpoint;
6. witness cosignatures on the checkpoint (C2SP tlog-cosignature, Ed25519): those of the witnesses
   given, and (format 8) each one ``manifest.witnesses`` lists, by the key and at the time it states;
7. (format 9, a window or, with ``manifest.case``, one case) each history record
   ``compliance/records.jsonl`` carries, by its RFC 9162 inclusion proof (``compliance/proofs.json``)
   in the checkpoint's tree; ``compliance.json``'s hash is step 2's.

It does not replay or re-derive decisions, prove the completeness of a selection or recompute the
compliance facts of ``compliance.json`` from the records: that needs
the parsers, the feature code, the rule sandbox and the model, which ``sealtrail export verify``
does. Exit 0: all held; 1: a check
failed (each failure names its file and seq); 2: usage error or unreadable file.

    python tools/verify_bundle.py BUNDLE.zip --trusted-key VKEY [--witness-key VKEY]... [--json]
"""

from __future__ import annotations

import argparse
import base64
import binascii
import bisect
import hashlib
import itertools
import json
import re
import sys
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["Failure", "Report", "Vkey", "leaf_hash", "main", "node_hash", "open_note", "subtree_roots",
           "verify_bundle", "verify_consistency", "verify_cosignature", "verify_inclusion"]

SCHEMAS = {f"sealtrail.bundle/{v}": v for v in range(1, 10)}
SIG_TITLE = "sealtrail bundle manifest v1"
NOTE_KEY, COSIGNATURE_KEY = 0x01, 0x04  # C2SP signed-note and tlog-cosignature key types
UNPINNED = ("NO TRUSTED KEY PINNED: the signatures were checked against the keys the bundle itself "
            "names. This proves the bundle is consistent, NOT who made it. Pin the bank's key.")
_DASH = "\u2014 "
_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")
_HEX64 = re.compile(r"[0-9a-f]{64}")
# files whose name states their SHA-256
_ADDRESSED = re.compile(r"rules/([0-9a-f]{64})\.wasm|models/([0-9a-f]{64})/weights\.npz|lists/([0-9a-f]{64})")


class VerifyError(Exception):
    """A bundle, note or key that cannot be read as the documents say."""


@dataclass(frozen=True)
class Failure:
    check: str
    file: str | None
    seq: int | None
    detail: str

    def text(self) -> str:
        where = " ".join(x for x in (self.file, None if self.seq is None else f"seq {self.seq}") if x)
        return f"FAIL [{self.check}] {where + ': ' if where else ''}{self.detail}"


@dataclass
class Report:
    path: str
    pinned: bool
    format: int | None = None
    bundle_id: str | None = None
    signed_by: list[str] = field(default_factory=list)
    checkpoint: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    witnesses: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def fail(self, check: str, file: str | None, detail: str, seq: int | None = None) -> None:
        self.failures.append(Failure(check, file, seq, detail))

    @property
    def verified(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {"verified": self.verified, "path": self.path, "format": self.format,
                "bundle_id": self.bundle_id, "pinned": self.pinned,
                "warnings": [] if self.pinned else [UNPINNED], "signed_by": self.signed_by,
                "checkpoint": self.checkpoint, "counts": self.counts, "witnesses": self.witnesses,
                "failures": [f.__dict__ for f in self.failures]}

    def text(self) -> str:
        c, cp = self.counts, self.checkpoint
        out = [f"bundle {self.path}: format {self.format}, id {self.bundle_id}",
               f"  manifest signed by   {', '.join(self.signed_by) or 'no trusted key'}",
               f"  files hashed         {c.get('files', 0)}",
               f"  checkpoint           size {cp.get('size')} root {cp.get('root')}",
               f"  records proved       {c.get('records', 0)} (+{c.get('withheld', 0)} withheld leaves, "
               f"+{c.get('state', 0)} state lines, {c.get('nodes', 0)} multiproof nodes)",
               f"  chain links checked  {c.get('links', 0)}",
               f"  payloads             {c.get('payloads_present', 0)} present, "
               f"{c.get('payloads_purged', 0)} purged"]
        for w in self.witnesses or [{"name": "none", "status": "no cosignature on the checkpoint"}]:
            out.append(f"  witness              {w['name']}: {w['status']}")
        if not self.pinned:
            out.insert(0, f"WARNING: {UNPINNED}")
        out += [f.text() for f in self.failures]
        out.append("VERIFIED (signatures, hashes, proofs and chain; replay not checked here)" if self.verified
                   else f"NOT VERIFIED: {len(self.failures)} failure(s)")
        return "\n".join(out)


# --- keys and signed notes (C2SP signed-note, tlog-cosignature) --------------------------------


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerifyError(f"{text[:40]!r} is not base64") from exc


@dataclass(frozen=True)
class Vkey:
    """A verifier key ``name+<8 hex key id>+base64(type || 32-byte Ed25519 public key)``."""

    name: str
    key_id: bytes
    kind: int
    public: bytes
    text: str

    @classmethod
    def parse(cls, text: str, kind: int = NOTE_KEY) -> Vkey:
        parts = text.strip().split("+", 2)  # the name holds no '+'; the base64 may
        if len(parts) != 3 or not parts[0] or any(ch.isspace() for ch in parts[0]):
            raise VerifyError(f"{text!r} is not a verifier key name+keyid+key")
        raw = _b64(parts[2])
        if len(raw) != 33 or raw[0] != kind:
            raise VerifyError(f"{text!r} is not an Ed25519 key of type 0x{kind:02x}")
        key = cls(parts[0], _key_id(parts[0], raw[0], raw[1:]), kind, raw[1:], text.strip())
        if key.key_id.hex() != parts[1]:
            raise VerifyError(f"{text!r}: key id {parts[1]} does not match its key ({key.key_id.hex()})")
        return key

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


def _key_id(name: str, kind: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:4]


def _split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The note's text and its signature lines ``(key name, base64-decoded blob)``."""
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise VerifyError("not a signed note: no blank line before the signatures, or no final newline")
    sigs = []
    for line in note[cut + 2 : -1].split("\n"):
        name, _, blob = line.removeprefix(_DASH).partition(" ")
        if not line.startswith(_DASH) or not name or " " in blob:
            raise VerifyError(f"signature line {line[:60]!r} is not '\u2014 name base64'")
        sigs.append((name, _b64(blob)))
    return note[: cut + 1], sigs


def open_note(note: str, keys: list[Vkey]) -> tuple[str, list[Vkey], list[tuple[str, bytes]]]:
    """Text, the keys whose signatures hold (at least one) and the lines of other keys.

    A signature by one of ``keys`` that does not verify is an error, as in Go's sumdb/note."""
    text, sigs = _split_note(note)
    good: list[Vkey] = []
    others = []
    for name, blob in sigs:
        key = next((k for k in keys if k.name == name and k.key_id == blob[:4]), None)
        if key is None:
            others.append((name, blob))
        elif not key.verify(text.encode(), blob[4:]):
            raise VerifyError(f"the signature by {key.text} does not verify")
        elif key not in good:
            good.append(key)
    if not good:
        raise VerifyError("no signature by a trusted key (signed by: "
                          f"{', '.join(f'{n}+{b[:4].hex()}' for n, b in sigs) or 'none'})")
    return text, good, others


def verify_cosignature(body: str, witness: Vkey, blob: bytes) -> int:
    """The time (POSIX seconds) of ``witness``'s valid cosignature/v1 ``blob`` on checkpoint ``body``."""
    if len(blob) != 4 + 8 + 64 or blob[:4] != witness.key_id:
        raise VerifyError("a cosignature is key id (4) || timestamp (8) || Ed25519 signature (64)")
    stamp = int.from_bytes(blob[4:12], "big")
    if stamp >= 1 << 63 or not witness.verify(f"cosignature/v1\ntime {stamp}\n{body}".encode(), blob[12:]):
        raise VerifyError("the cosignature does not verify")
    return stamp


# --- RFC 6962 / RFC 9162 Merkle trees ----------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def verify_inclusion(index: int, size: int, leaf: bytes, path: list[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(size1: int, size2: int, proof: list[bytes], root1: bytes, root2: bytes) -> bool:
    """RFC 9162 section 2.1.4.2 (equal sizes: an empty proof and equal roots)."""
    if size1 == size2:
        return not proof and root1 == root2
    if not 0 < size1 < size2 or not proof:
        return size1 == 0 and not proof
    path = [root1, *proof] if size1 & (size1 - 1) == 0 else list(proof)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == root1 and sr == root2


def subtree_roots(size: int, leaves: dict[int, bytes], nodes: dict[tuple[int, int], bytes]
                  ) -> tuple[dict[tuple[int, int], bytes], list[tuple[int, int]]]:
    """Every subtree hash of the tree of ``size`` the RFC 9162 recursion meets while computing the
    root from the known ``leaves`` (index -> leaf hash) and the multiproof ``nodes`` ((lo, hi) ->
    hash, used where a subtree holds no known leaf), and the subtrees it needed but lacked."""
    seqs = sorted(leaves)
    known: dict[tuple[int, int], bytes] = {}
    missing: list[tuple[int, int]] = []

    def walk(lo: int, hi: int, a: int, b: int) -> bytes:  # seqs[a:b] are the known leaves in [lo, hi)
        if a == b:
            h = nodes.get((lo, hi))
            if h is None:
                missing.append((lo, hi))
                h = bytes(32)
        elif hi - lo == 1:
            h = leaves[lo]
        else:
            mid = lo + _split(hi - lo)
            m = bisect.bisect_left(seqs, mid, a, b)
            h = node_hash(walk(lo, mid, a, m), walk(mid, hi, m, b))
        known[(lo, hi)] = h
        return h

    walk(0, size, 0, len(seqs))
    return known, missing


def audit_path(index: int, size: int, known: dict[tuple[int, int], bytes]) -> list[bytes]:
    """The RFC 9162 inclusion proof of leaf ``index`` (leaf upwards), read off ``subtree_roots``."""
    lo, hi, path = 0, size, []
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        path.append(known[(mid, hi)] if index < mid else known[(lo, mid)])
        lo, hi = (lo, mid) if index < mid else (mid, hi)
    return path[::-1]


# --- the bundle --------------------------------------------------------------------------------


def _json(data: bytes | str) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise VerifyError("a JSON object holds a key twice")
        return dict(pairs)

    try:
        return json.loads(data, object_pairs_hook=no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise VerifyError(f"not JSON: {exc}") from exc


def _lines(z: zipfile.ZipFile, name: str) -> Iterator[bytes]:
    """The lines of member ``name`` without their newlines; a last line without one is refused."""
    with z.open(name) as f:
        for line in f:
            if not line.endswith(b"\n"):
                raise VerifyError(f"{name}: the last line has no newline")
            yield line[:-1]


def _open_zip(path: str) -> zipfile.ZipFile:
    """The bundle as a ZIP whose member names are safe and unique (``OSError``, ``BadZipFile``:
    unreadable)."""
    z = zipfile.ZipFile(path)
    names = [i.filename for i in z.infolist()]
    bad = [n for n in names if not _SAFE_NAME.fullmatch(n) or any(p in (".", "..") for p in n.split("/"))]
    if bad or len(set(names)) != len(names):
        z.close()
        raise VerifyError(f"unsafe or duplicate member names: {sorted(set(bad)) or 'duplicates'}")
    return z


def verify_bundle(path: str, trusted: Sequence[Vkey], witnesses: Sequence[Vkey] = ()) -> Report:
    """Check the bundle at ``path``; ``OSError``/``zipfile.BadZipFile`` when it cannot be read."""
    report = Report(path, pinned=bool(trusted))
    try:
        z = _open_zip(path)
    except VerifyError as exc:
        report.fail("zip", path, str(exc))
        return report
    with z:
        try:
            _verify(z, list(trusted), list(witnesses), report)
        except (VerifyError, KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
                zipfile.BadZipFile) as exc:
            report.fail("format", None, f"the bundle is not as docs/bundle-format.md says: {exc!r}")
    return report


def _verify(z: zipfile.ZipFile, trusted: list[Vkey], witnesses: list[Vkey], report: Report) -> None:
    names = set(z.namelist())
    for need in ("manifest.json", "manifest.sig"):
        if need not in names:
            raise VerifyError(f"{need} is missing")
    mbytes = z.read("manifest.json")
    m = _json(mbytes)
    report.bundle_id, report.format = m["bundle_id"], SCHEMAS.get(m["schema"])
    if report.format is None:
        report.fail("manifest", "manifest.json", f"unknown schema {m['schema']!r} (this verifier reads 1-9)")
    # RFC 8785 for a manifest (integers, string keys of the Basic Multilingual Plane) is sorted keys,
    # no white space, UTF-8 and JSON's minimal escapes: what json.dumps writes with these options
    if json.dumps(m, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() != mbytes:
        report.fail("manifest", "manifest.json", "not RFC 8785 canonical JSON")
    keys = trusted or [Vkey.parse(k) for k in m["log"]["verifier_keys"]]
    # 1. manifest.sig
    try:
        text, good, _ = open_note(z.read("manifest.sig").decode(), keys)
        report.signed_by = [k.text for k in good]
        want = f"{SIG_TITLE}\n{m['bundle_id']}\n{hashlib.sha256(mbytes).hexdigest()}\n"
        if text != want:
            report.fail("manifest.signature", "manifest.sig", f"signs {text!r}, expected {want!r}")
    except (VerifyError, UnicodeDecodeError) as exc:
        report.fail("manifest.signature", "manifest.sig", str(exc))
    # 2. file hashes
    files: dict[str, str] = m["files"]
    for name in sorted(names - {"manifest.json", "manifest.sig"} - set(files)):
        report.fail("files", name, "in the ZIP but not listed in manifest.files")
    for name in sorted(set(files) - names):
        report.fail("files", name, "listed in manifest.files but not in the ZIP")
    for name in sorted(set(files) & names):
        h = hashlib.sha256()
        with z.open(name) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        if h.hexdigest() != files[name]:
            report.fail("files", name, f"hashes to {h.hexdigest()}, the manifest says {files[name]}")
        named = _ADDRESSED.fullmatch(name)
        if named and h.hexdigest() != next(g for g in named.groups() if g):
            report.fail("files", name, f"hashes to {h.hexdigest()}, not to the SHA-256 its name states")
    report.counts["files"] = len(set(files) & names)
    # 3. the checkpoint (and its witnesses)
    cp = m["checkpoint"]
    size, root = cp["size"], _b64(cp["root"])
    report.checkpoint = {"size": size, "root": cp["root"], "origin": m["log"]["origin"]}
    if cp["file"] != "checkpoint.txt":
        report.fail("manifest", "manifest.json", f"checkpoint.file is {cp['file']!r}, not checkpoint.txt")
    _checkpoint(z, cp["file"], keys, m["log"]["origin"], size, root, report, witnesses)
    _listed_witnesses(z, m, report)
    # 4. and 5. records, index, chain, multiproof, payloads
    leaves = _records(z, size, report)
    withheld = _withheld(z, m, leaves, report) | _state(z, m, leaves, size, report)
    _tree(z, size, root, leaves, withheld, report)
    if report.counts["records"] != m["counts"]["records"]:
        report.fail("manifest", "manifest.json", f"counts.records is {m['counts']['records']}, "
                    f"records.jsonl holds {report.counts['records']}")
    _previous(z, m, keys, report)
    _compliance(z, m, size, root, report)


def _compliance(z: zipfile.ZipFile, m: dict[str, Any], size: int, root: bytes, report: Report) -> None:
    """Format 9: the history records behind the compliance facts, each proved in the tree."""
    sec = m.get("compliance")
    if sec is None:
        if (report.format or 0) >= 9:  # a window bundle, or (with manifest.case) a bundle cut for one case
            report.fail("manifest", "manifest.json", "a format-9 bundle needs manifest.compliance")
        return
    names = set(z.namelist())
    if sec["records_file"] not in names or sec["proofs_file"] not in names:
        return  # step 2 reported the missing file
    proofs = _json(z.read(sec["proofs_file"]))
    lines = list(_lines(z, sec["records_file"]))
    if proofs["size"] != size or len(lines) != len(proofs["entries"]) or len(lines) != sec["records"]:
        report.fail("compliance", sec["records_file"], f"{len(lines)} record(s), {len(proofs['entries'])} "
                    f"proof(s) at size {proofs['size']}; the manifest says {sec['records']} at size {size}")
        return
    for line, proof in zip(lines, proofs["entries"], strict=True):
        path = [_b64(h) for h in proof["hashes"]]
        if not verify_inclusion(proof["seq"], size, leaf_hash(line), path, root):
            report.fail("compliance", sec["records_file"], "the record is not in the checkpoint's tree",
                        proof["seq"])
    report.counts["compliance_records"] = len(lines)


def _checkpoint(z: zipfile.ZipFile, name: str, keys: list[Vkey], origin: str, size: int, root: bytes,
                report: Report, witnesses: list[Vkey] | None = None) -> None:
    try:
        body, _, others = open_note(z.read(name).decode(), keys)
    except (VerifyError, UnicodeDecodeError, KeyError) as exc:
        report.fail("checkpoint", name, f"its signature does not hold: {exc}")
        return
    lines = body[:-1].split("\n")  # origin, size, root, extension lines
    got = (lines[0], lines[1], lines[2]) if len(lines) >= 3 else ()
    want = (origin, str(size), base64.b64encode(root).decode())
    if got != want:
        report.fail("checkpoint", name, f"states (origin, size, root) {got}, the manifest {want}")
    if witnesses is None:
        return
    for wit_name, blob in others:
        key = next((w for w in witnesses if w.name == wit_name and w.key_id == blob[:4]), None)
        entry: dict[str, Any] = {"name": wit_name, "key_id": blob[:4].hex(), "vkey": key and key.text}
        if key is None:
            entry["status"] = "signature by a key not given (--witness-key): not checked"
        else:
            try:
                stamp = verify_cosignature(body, key, blob)
                entry["time"] = _when(stamp)
                entry["key"] = key.public.hex()  # the public key: what makes witnesses distinct
                entry["status"] = f"cosigned, verified (at {entry['time']})"
            except VerifyError as exc:
                entry["status"] = f"FAILED: {exc}"
                report.fail("witness", name, f"the cosignature of {key.text} does not hold: {exc}")
        report.witnesses.append(entry)
    for w in witnesses:
        if not any(e["vkey"] == w.text for e in report.witnesses):
            report.witnesses.append({"name": w.name, "key_id": w.key_id.hex(), "vkey": w.text,
                                     "status": "no cosignature by this witness"})


def _when(stamp: int) -> str:
    """A cosignature's POSIX time as UTC, or the number itself past what a calendar shows."""
    try:
        return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{stamp} (POSIX seconds)"


def _listed_witnesses(z: zipfile.ZipFile, m: dict[str, Any], report: Report) -> None:
    """Format 8: every cosignature ``manifest.witnesses`` lists is on the checkpoint and verifies."""
    listed = m.get("witnesses")
    if report.format is None or report.format < 8:
        if listed is not None:
            report.fail("manifest", "manifest.json", "witnesses before format 8")
        return
    if listed is None and report.format >= 9:
        return  # format 9: a bundle without witnesses has no list
    if not isinstance(listed, list) or not listed:
        report.fail("manifest", "manifest.json", "format 8 needs a non-empty witnesses list")
        return
    name = m["checkpoint"]["file"]
    try:
        body, others = _split_note(z.read(name).decode())
    except (VerifyError, UnicodeDecodeError, KeyError) as exc:
        report.fail("witness", name, f"cannot read its signature lines: {exc}")
        return
    for item in listed:
        try:
            key = Vkey.parse(item["vkey"], COSIGNATURE_KEY)
        except (VerifyError, KeyError, TypeError) as exc:
            report.fail("manifest", "manifest.json", f"witnesses: {exc}")
            continue
        blobs = [b for n, b in others if n == key.name and b[:4] == key.key_id]
        try:
            stamps = [verify_cosignature(body, key, b) for b in blobs]
        except VerifyError as exc:
            report.fail("witness", name, f"the cosignature of {key.text} does not hold: {exc}")
            continue
        if item.get("timestamp") not in stamps:
            report.fail("witness", name, f"manifest.witnesses lists {key.text} at {item.get('timestamp')}; "
                        f"the checkpoint carries {stamps if stamps else 'no cosignature by it'}")


def _records(z: zipfile.ZipFile, size: int, report: Report, rec: str = "records.jsonl",
             idx: str = "index.jsonl") -> dict[int, bytes]:
    """Leaf hashes by seq; checks ``idx`` against ``rec``, seq order and the chain (and, for
    records.jsonl, the payloads its records name)."""
    leaves: dict[int, bytes] = {}
    named: set[str] = set()
    purges: dict[int, set[str]] = {}
    last, chain = -1, b""  # seq and chain hash of the line before
    links = n = 0
    pairs = itertools.zip_longest(_lines(z, rec), _lines(z, idx))
    for n, (line, ixline) in enumerate(pairs, start=1):
        if line is None or ixline is None:
            report.fail("records", idx, f"{rec} and {idx} differ in length")
            break
        try:
            env, ix = _json(line), _json(ixline)
            seq, leaf = ix["seq"], leaf_hash(line)
            if type(seq) is not int or not last < seq < size:
                raise VerifyError(f"seq {seq!r} is not ascending inside [0, {size})")
            if (ix["kind"], ix["trace_id"]) != (env["kind"], env["trace_id"]):
                report.fail("records", idx, "kind or trace_id differ from the record's", seq)
            if ix["leaf_hash"] != leaf.hex():
                report.fail("records", rec, f"the line hashes to leaf {leaf.hex()}, {idx} states "
                            f"{ix['leaf_hash']}", seq)
            if seq == last + 1:  # chain(-1) is 32 zero bytes
                links += 1
                want = hashlib.sha256((chain if seq else bytes(32)) + leaf).digest()
                if ix["chain_hash"] != want.hex():
                    report.fail("chain", idx, f"chain_hash is {ix['chain_hash']}, SHA-256(previous "
                                f"chain || leaf) is {want.hex()}", seq)
            last, chain, leaves[seq] = seq, bytes.fromhex(ix["chain_hash"]), leaf
            if env.get("payload_sha256") is not None and env["kind"] != "sanctions_list":
                named.add(env["payload_sha256"])
            if env["kind"] == "ledger.payload_purge":
                purges[seq] = set(env["record"]["payloads"])
        except (VerifyError, KeyError, TypeError, ValueError) as exc:
            report.fail("records", rec, f"line {n}: {exc!r}")
    if rec == "records.jsonl":
        report.counts.update(records=n, links=links)
        _payloads(z, named, purges, report)
    return leaves


def _state(z: zipfile.ZipFile, m: dict[str, Any], leaves: dict[int, bytes], size: int, report: Report
           ) -> dict[int, bytes]:
    """Format 7: the state lines (decision summaries and state deltas), proved beside the records."""
    if m.get("state") is None:
        return {}
    got = _records(z, size, report, "state/records.jsonl", "state/index.jsonl")
    for seq in sorted(set(got) & set(leaves)):
        report.fail("records", "state/index.jsonl", "a state line stands at the seq of a record line", seq)
    if len(got) != m["state"]["records"]:
        report.fail("manifest", "manifest.json", f"state.records is {m['state']['records']}, "
                    f"state/records.jsonl holds {len(got)}")
    report.counts["state"] = len(got)
    return {s: h for s, h in got.items() if s not in leaves}


def _payloads(z: zipfile.ZipFile, named: set[str], purges: dict[int, set[str]], report: Report) -> None:
    seen: set[str] = set()
    present = purged = 0
    for n, line in enumerate(_lines(z, "payloads.jsonl"), start=1):
        p = _json(line)
        sha, where = p["sha256"], f"payloads.jsonl line {n}"
        if sha in seen or sha not in named:
            report.fail("payloads", where, f"payload {sha} is listed twice or named by no record")
        seen.add(sha)
        if p["state"] == "present":
            present += 1
            data = p["data"].encode() if p["encoding"] == "utf-8" else _b64(p["data"])
            if hashlib.sha256(data).hexdigest() != sha:
                report.fail("payloads", where, f"the data does not hash to {sha}")
        elif p["state"] == "purged":
            purged += 1
            if sha not in purges.get(p["purge_seq"], set()):
                report.fail("payloads", where, f"purge_seq {p['purge_seq']} is no ledger.payload_purge line "
                            f"that lists {sha}")
        else:
            report.fail("payloads", where, f"state {p['state']!r} is neither present nor purged")
    for sha in sorted(named - seen):
        report.fail("payloads", "payloads.jsonl", f"payload {sha} named by a record has no line")
    report.counts.update(payloads_present=present, payloads_purged=purged)


def _withheld(z: zipfile.ZipFile, m: dict[str, Any], leaves: dict[int, bytes], report: Report
              ) -> dict[int, bytes]:
    """A case bundle's withheld leaves (format 5, or 6, 8 or 9 with a case): proved beside the records."""
    if not m.get("case"):
        return {}
    out: dict[int, bytes] = {}
    for w in _json(z.read(m["case"]["file"]))["withheld"]:
        seq, h = w["seq"], w["leaf_hash"]
        if type(seq) is not int or seq in leaves or seq in out or not _HEX64.fullmatch(h):
            report.fail("records", m["case"]["file"], "a withheld leaf repeats a seq or is no hex hash", seq)
            continue
        out[seq] = bytes.fromhex(h)
    report.counts["withheld"] = len(out)
    return out


def _tree(z: zipfile.ZipFile, size: int, root: bytes, leaves: dict[int, bytes], withheld: dict[int, bytes],
          report: Report) -> None:
    """proofs/nodes.bin: the root from the multiproof, then one RFC 9162 inclusion proof per leaf."""
    name, data = "proofs/nodes.bin", z.read("proofs/nodes.bin")
    nodes: dict[tuple[int, int], bytes] = {}
    last = 0
    if len(data) % 48:
        report.fail("inclusion", name, f"{len(data)} bytes is not a whole number of 48-byte items")
    for i in range(0, len(data) - len(data) % 48, 48):
        lo, hi = int.from_bytes(data[i : i + 8], "big"), int.from_bytes(data[i + 8 : i + 16], "big")
        if not last <= lo < hi <= size:
            report.fail("inclusion", name, f"item [{lo}, {hi}) is out of order, overlaps or leaves the tree")
        last = max(last, hi)
        nodes[(lo, hi)] = data[i + 16 : i + 48]
    report.counts["nodes"] = len(nodes)
    every = leaves | withheld
    if not every:
        report.fail("inclusion", "records.jsonl", "the bundle proves no leaf")
        return
    known, missing = subtree_roots(size, every, nodes)
    for lo, hi in missing:
        report.fail("inclusion", name, f"lacks the hash of subtree [{lo}, {hi}) the proofs need")
    for lo, hi in sorted(set(nodes) - set(known)):
        report.fail("inclusion", name, f"item [{lo}, {hi}) is not a subtree the proofs read")
    if known[(0, size)] != root:
        report.fail("inclusion", name, f"the leaves and nodes give root {known[(0, size)].hex()}, the "
                    f"checkpoint's is {root.hex()}")
    if missing:
        return
    for seq, leaf in sorted(every.items()):
        if not verify_inclusion(seq, size, leaf, audit_path(seq, size, known), root):
            report.fail("inclusion", "records.jsonl" if seq in leaves else "case/case.json",
                        "the inclusion proof does not reach the checkpoint's root", seq)


def _previous(z: zipfile.ZipFile, m: dict[str, Any], keys: list[Vkey], report: Report) -> None:
    """The previous export's checkpoint and the RFC 9162 consistency proof from it (when named)."""
    prev, files = m.get("previous"), ("checkpoints/previous.txt", "proofs/consistency.json")
    if prev is None:
        for name in set(files) & set(z.namelist()):
            report.fail("previous", name, "present although manifest.previous is null")
        return
    old_root, new = _b64(prev["checkpoint_root"]), m["checkpoint"]
    _checkpoint(z, files[0], keys, m["log"]["origin"], prev["checkpoint_size"], old_root, report)
    doc = _json(z.read(files[1]))
    stated = (doc["old_size"], doc["new_size"], doc["old_root"], doc["new_root"])
    want = (prev["checkpoint_size"], new["size"], prev["checkpoint_root"], new["root"])
    if stated != want:
        report.fail("previous", files[1], f"states {stated}, the manifest {want}")
    elif not verify_consistency(want[0], want[1], [_b64(h) for h in doc["hashes"]], old_root, _b64(want[3])):
        report.fail("previous", files[1], "the consistency proof does not hold")


# --- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Verify a sealtrail export bundle without sealtrail.")
    ap.add_argument("bundle", help="the bundle ZIP")
    ap.add_argument("--trusted-key", action="append", default=[], metavar="VKEY",
                    help="the bank's checkpoint verifier key, name+keyid+key (repeatable)")
    ap.add_argument("--witness-key", action="append", default=[], metavar="VKEY",
                    help="a witness's cosignature key (C2SP tlog-cosignature, type 0x04; repeatable)")
    ap.add_argument("--min-witnesses", type=int, default=0, metavar="N",
                    help="fail unless at least N of the given witnesses cosigned the checkpoint")
    ap.add_argument("--json", action="store_true", help="print a JSON report")
    args = ap.parse_args(argv)
    try:
        trusted = [Vkey.parse(k) for k in args.trusted_key]
        witnesses = [Vkey.parse(k, COSIGNATURE_KEY) for k in args.witness_key]
    except VerifyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        report = verify_bundle(args.bundle, trusted, witnesses)
    except (OSError, zipfile.BadZipFile) as exc:
        print(f"error: cannot read {args.bundle}: {exc}", file=sys.stderr)
        return 2
    # distinct witnesses: a line repeated, a key given twice or one key under two names is one witness
    cosigned = len({w["key"] for w in report.witnesses if "time" in w})
    if cosigned < args.min_witnesses:
        report.fail("witness", "checkpoint.txt",
                    f"{cosigned} witness cosignature(s) verified, {args.min_witnesses} required")
    if not trusted and args.json:
        print(f"WARNING: {UNPINNED}", file=sys.stderr)
    print(json.dumps(report.to_json(), indent=2) if args.json else report.text())
    return 0 if report.verified else 1


if __name__ == "__main__":
    sys.exit(main())
