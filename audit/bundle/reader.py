"""Reading a bundle ZIP safely: member names and sizes checked, files streamed and hashed.

Nothing here trusts the bundle: names that could escape a directory, duplicates, encryption,
unknown compression and bomb-like sizes are refused before a byte is inflated, and every read
is bounded by the member's declared size and a per-file cap. ``BundleManifest.parse`` turns
``manifest.json`` into frozen types, naming the first field that is not what
``docs/bundle-format.md`` says.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from audit.errors import BundleMalformed, BundleTampered, BundleUnreadable

__all__ = [
    "BUNDLE_SCHEMA",
    "BUNDLE_SCHEMAS",
    "BundleArchive",
    "BundleManifest",
    "CaseSelection",
    "Completeness",
    "ComplianceSection",
    "Counts",
    "Limits",
    "LineStream",
    "Previous",
    "StateSection",
]

BUNDLE_SCHEMA = "sealtrail.bundle/9"
# every version this verifier reads
BUNDLE_SCHEMAS = ("sealtrail.bundle/1", "sealtrail.bundle/2", "sealtrail.bundle/3", "sealtrail.bundle/4",
                  "sealtrail.bundle/5", "sealtrail.bundle/6", "sealtrail.bundle/7", "sealtrail.bundle/8",
                  BUNDLE_SCHEMA)
MANIFEST, SIGNATURE = "manifest.json", "manifest.sig"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_NAME = re.compile(r"[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Caps that keep a hostile bundle from exhausting memory or time."""

    max_total_bytes: int = 64 << 30  # all members together, inflated
    max_ratio: int = 200  # inflated / compressed, for members above ``ratio_floor``
    ratio_floor: int = 1 << 20
    max_small_file: int = 64 << 20  # any file read whole (manifest, notes, modules, weights)
    max_manifest: int = 512 << 20
    max_line: int = 16 << 20  # one record or index line
    max_failures: int = 100


class BundleArchive:
    """An open bundle whose member list passed the safety checks; read members through it."""

    def __init__(self, path: str | Path, limits: Limits) -> None:
        self.path, self.limits = str(path), limits
        try:
            self._zf = zipfile.ZipFile(path)
            infos = self._zf.infolist()
        except FileNotFoundError:
            raise BundleUnreadable(f"no such file: {path}") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise BundleUnreadable(f"not a readable ZIP file: {exc}", file=self.path) from None
        self.sizes: dict[str, int] = {}
        total = 0
        for info in infos:
            name = info.filename
            _check_name(name)
            if name in self.sizes:
                raise BundleMalformed("the ZIP holds this name twice", kind="zip.duplicate", file=name)
            if info.flag_bits & 0x1:
                raise BundleMalformed("encrypted members are refused", kind="zip.encrypted", file=name)
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise BundleMalformed(f"compression method {info.compress_type} is not stored or deflate",
                                      kind="zip.compression", file=name)
            if (info.file_size > limits.ratio_floor
                    and info.file_size > limits.max_ratio * max(info.compress_size, 1)):
                raise BundleMalformed(f"inflates {info.compress_size:,} bytes to {info.file_size:,} "
                                      f"(more than {limits.max_ratio}x): refused as a ZIP bomb",
                                      kind="zip.bomb", file=name)
            total += info.file_size
            self.sizes[name] = info.file_size
        if total > limits.max_total_bytes:
            raise BundleMalformed(f"members declare {total:,} bytes inflated, more than the "
                                  f"{limits.max_total_bytes:,} allowed", kind="zip.bomb", file=self.path)

    def close(self) -> None:
        self._zf.close()

    def __enter__(self) -> BundleArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, name: str) -> IO[bytes]:
        if name not in self.sizes:
            raise BundleTampered("a file the bundle needs is missing", kind="file.missing", file=name)
        try:
            return self._zf.open(name)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
            raise BundleMalformed(f"cannot read the member: {exc}", kind="zip.read", file=name) from None

    def read(self, name: str, cap: int | None = None) -> bytes:
        """The whole member (at most ``cap`` bytes, default ``max_small_file``)."""
        cap = self.limits.max_small_file if cap is None else cap
        if self.sizes.get(name, 0) > cap:
            raise BundleMalformed(f"is {self.sizes[name]:,} bytes, more than the {cap:,} allowed",
                                  kind="file.too_big", file=name)
        return b"".join(self.chunks(name))

    def chunks(self, name: str) -> Iterator[bytes]:
        """The member's bytes in chunks; a stream longer than declared, or damaged, is refused."""
        left = self.sizes.get(name, 0)
        with self._open(name) as f:
            try:
                while chunk := f.read(_CHUNK):
                    left -= len(chunk)
                    if left < 0:
                        raise BundleMalformed("inflates past its declared size", kind="zip.bomb", file=name)
                    yield chunk
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
                raise BundleMalformed(f"damaged member: {exc}", kind="zip.read", file=name) from None

    def sha256(self, name: str) -> str:
        h = hashlib.sha256()
        for chunk in self.chunks(name):
            h.update(chunk)
        return h.hexdigest()


def _check_name(name: str) -> None:
    if not name.isascii() or not _NAME.fullmatch(name) or any(p in (".", "..") for p in name.split("/")):
        raise BundleMalformed("member name is not a relative ASCII path without '.', '..', '\\' "
                              "or a directory entry", kind="zip.path", file=repr(name))


class LineStream:
    """The lines of a member (without their newlines), hashed as they stream; ``sha256`` is
    the file's digest once the iteration ended. A last line without ``\\n`` is refused."""

    def __init__(self, bundle: BundleArchive, name: str) -> None:
        self._bundle, self.name = bundle, name
        self._hash = hashlib.sha256()
        self.sha256: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        rest = b""
        update, cap = self._hash.update, self._bundle.limits.max_line
        for chunk in self._bundle.chunks(self.name):
            update(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > cap:
                raise BundleMalformed(f"a line is longer than {cap:,} bytes", kind="line.too_long",
                                      file=self.name)
            yield from lines
        if rest:
            raise BundleMalformed("the last line has no newline", kind="line.unterminated", file=self.name)
        self.sha256 = self._hash.hexdigest()


# --- manifest.json as frozen types ---------------------------------------------------------------


@dataclass(frozen=True)
class Previous:
    bundle_id: str
    checkpoint_size: int
    checkpoint_root: bytes


@dataclass(frozen=True)
class Counts:
    records: int
    decisions: int
    annotations: int
    context: int
    payloads_present: int
    payloads_purged: int
    by_decision: dict[str, int]
    summaries: int = 0  # format 2
    refusals: int = 0  # format 3: the refusal records of the window
    case_events: int = 0  # format 5 (a case bundle): its case_event lines
    policies: int = 0  # its alert_policy lines
    holds: int = 0  # its ledger.legal_hold lines


@dataclass(frozen=True)
class Completeness:
    """``manifest.completeness`` (format 2): the summaries that bracket the window."""

    summaries: int
    first_summary_seq: int | None
    last_summary_seq: int | None
    left: int | None
    right: int | None
    account_key_id: str | None
    account_key: str | None


@dataclass(frozen=True)
class StateSection:
    """``manifest.state`` (format 7): the feature state the decisions were made on travels with
    them (``state/records.jsonl``, ``audit.bundle.rederive``)."""

    from_seq: int
    records: int
    deltas: int
    summaries: int
    unsealed_origin: int  # exported decisions whose state origin is not sealed (earlier releases)
    snapshot_seq: int | None = None  # the sealed state snapshot carried (its state in ``snapshot_file``)
    snapshot_covers: int | None = None
    snapshot_file: str | None = None


@dataclass(frozen=True)
class ComplianceSection:
    """``manifest.compliance`` (format 9): the period's compliance facts (``file``), the history records
    they are derived from with the bundle's decisions and refusals (``records_file``), and those
    records' inclusion proofs (``proofs_file``); ``audit.bundle.compliance`` checks them."""

    file: str
    records_file: str
    proofs_file: str
    records: int
    scope: str  # "window" | "selection" | "case" (a bundle cut for one case)
    start: str
    end: str


@dataclass(frozen=True)
class CaseSelection:
    """``manifest.case`` (format 5): the bundle is cut for one case (``case/case.json``)."""

    case_id: int
    file: str
    alerts: int
    events: int
    withheld: int
    from_seq: int
    to_seq: int


@dataclass(frozen=True)
class BundleManifest:
    bundle_id: str
    created_at: str
    origin: str
    verifier_keys: tuple[str, ...]
    checkpoint_size: int
    checkpoint_root: bytes
    checkpoint_file: str
    previous: Previous | None
    counts: Counts
    first_seq: int
    last_seq: int
    contiguous: bool
    rules: tuple[str, ...]
    models: tuple[str, ...]
    files: dict[str, str]
    raw: dict[str, Any]
    version: int = 1
    completeness: Completeness | None = None  # format 2; None for a case bundle
    filters: dict[str, Any] = field(default_factory=dict)  # empty for a case bundle
    case: CaseSelection | None = None  # format 5: the case the bundle is cut for
    state: StateSection | None = None  # format 7: the state its decisions were made on
    witnesses: tuple[tuple[str, int], ...] = ()  # format 8: (vkey, timestamp) of each cosignature carried
    compliance: ComplianceSection | None = None  # format 9: the period's compliance facts

    @classmethod
    def parse(cls, data: bytes) -> BundleManifest:
        """``manifest.json`` bytes as a manifest; ``BundleMalformed`` names the bad field."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise _bad(f"is not JSON: {exc}") from None
        m = _Obj(doc, "manifest")
        schema = m.text("schema")
        if schema not in BUNDLE_SCHEMAS:
            raise _bad(f"schema is {schema!r}, this verifier reads {', '.join(BUNDLE_SCHEMAS)}")
        version = BUNDLE_SCHEMAS.index(schema) + 1
        log, cp, rng, counts = m.obj("log"), m.obj("checkpoint"), m.obj("range"), m.obj("counts")
        prev_doc = doc.get("previous")
        previous = None
        if prev_doc is not None:
            p = _Obj(prev_doc, "previous")
            previous = Previous(p.text("bundle_id"), p.num("checkpoint_size"), p.b64("checkpoint_root"))
        by = counts.obj("by_decision")
        files = m.obj("files")
        listed = {k: files.hex(k) for k in files.doc}
        for name in listed:
            _check_name(name)
        bundle_id = m.text("bundle_id")
        if not _UUID.fullmatch(bundle_id):
            raise _bad(f"bundle_id {bundle_id!r} is not a lower-case UUIDv7")
        case = None
        # a bundle cut for one case (format 5; format 6, 8 or 9 when its manifest names a case): no
        # window, no summaries
        if version == 5 or (version >= 6 and doc.get("case") is not None):
            case = _case(m.obj("case"))
            for key in ("filters", "completeness"):
                if doc.get(key, ...) is not None:
                    raise _bad(f"manifest.{key} must be null in a bundle cut for a case (format 5)")
        return cls(
            bundle_id=bundle_id, created_at=m.text("created_at"), origin=log.text("origin"),
            verifier_keys=tuple(log.texts("verifier_keys")), checkpoint_size=cp.num("size"),
            checkpoint_root=cp.b64("root"), checkpoint_file=cp.text("file"), previous=previous,
            counts=Counts(counts.num("records"), counts.num("decisions"), counts.num("annotations"),
                          counts.num("context"), counts.num("payloads_present"),
                          counts.num("payloads_purged"), {k: by.num(k) for k in by.doc},
                          counts.num("summaries") if version >= 2 else 0,
                          counts.num("refusals") if version >= 3 else 0,
                          *((counts.num("case_events"), counts.num("policies"), counts.num("holds"))
                            if case is not None else (0, 0, 0))),
            first_seq=rng.num("first_seq"), last_seq=rng.num("last_seq"), contiguous=rng.flag("contiguous"),
            rules=tuple(_hexes(m.texts("rules"), "rules")), models=tuple(_hexes(m.texts("models"), "models")),
            files=listed, raw=doc, version=version,
            completeness=_completeness(m.obj("completeness")) if version >= 2 and case is None else None,
            filters={} if case is not None else _filters(m.obj("filters")), case=case,
            state=_state(m.obj("state")) if case is None and (
                version == 7 or (version >= 8 and doc.get("state") is not None)) else None,
            witnesses=_witnesses(doc.get("witnesses")) if version == 8 or (
                version >= 9 and doc.get("witnesses") is not None) else (),
            compliance=_compliance(m.obj("compliance"), case is not None) if version >= 9 else None)


def _compliance(c: _Obj, for_case: bool) -> ComplianceSection:
    """``manifest.compliance``: of a window bundle (scope ``window`` or ``selection``) or, with a case
    (scope ``case``), of the period the case's records span."""
    period = c.obj("period")
    got = ComplianceSection(c.text("file"), c.text("records_file"), c.text("proofs_file"), c.num("records"),
                            c.text("scope"), period.text("from"), period.text("to"))
    for name in (got.file, got.records_file, got.proofs_file):
        _check_name(name)
    scopes = ("case",) if for_case else ("window", "selection")
    if got.scope not in scopes:
        raise _bad(f"compliance.scope is {got.scope!r}, not {' or '.join(scopes)}"
                   f"{' in a bundle cut for a case' if for_case else ''}")
    return got


def _witnesses(doc: Any) -> tuple[tuple[str, int], ...]:
    """``manifest.witnesses`` (format 8): ``[{vkey, timestamp}]``, at least one, each vkey once."""
    if not isinstance(doc, list) or not doc:
        raise _bad("witnesses must be a non-empty list in format 8")
    out: list[tuple[str, int]] = []
    for i, item in enumerate(doc):
        w = _Obj(item, f"witnesses[{i}]")
        out.append((w.text("vkey"), w.num("timestamp")))
    if len({v for v, _ in out}) != len(out):
        raise _bad("witnesses names a witness twice")
    return tuple(out)


def _state(s: _Obj) -> StateSection:
    snap = None if s.doc.get("snapshot") is None else s.obj("snapshot")
    seq, covers, file = (None, None, None) if snap is None else (
        snap.num("seq"), snap.num("covers_seq"), snap.text("file"))
    got = StateSection(s.num("from_seq"), s.num("records"), s.num("deltas"), s.num("summaries"),
                       s.num("unsealed_origin"), seq, covers, file)
    if got.snapshot_file is not None:
        _check_name(got.snapshot_file)
    if got.deltas + got.summaries + (snap is not None) != got.records:
        raise _bad(f"manifest.state: {got.deltas} deltas, {got.summaries} summaries and "
                   f"{int(snap is not None)} snapshot are not its {got.records} records")
    return got


def _case(c: _Obj) -> CaseSelection:
    got = CaseSelection(c.num("case_id"), c.text("file"), c.num("alerts"), c.num("events"), c.num("withheld"),
                        c.num("from_seq"), c.num("to_seq"))
    _check_name(got.file)
    return got


def _filters(f: _Obj) -> dict[str, Any]:
    out: dict[str, Any] = {"from": f.text("from"), "to": f.text("to")}
    for k in ("account", "decision", "rule"):
        v = f.doc.get(k)
        if v is not None and not isinstance(v, str):
            raise _bad(f"filters.{k} is not a string or null")
        out[k] = v
    return out


def _completeness(c: _Obj) -> Completeness:
    return Completeness(c.num("summaries"), c.opt_num("first_summary_seq"), c.opt_num("last_summary_seq"),
                        c.opt_num("left"), c.opt_num("right"), c.opt_text("account_key_id"),
                        c.opt_text("account_key"))


def _bad(detail: str) -> BundleMalformed:
    return BundleMalformed(detail, kind="manifest.field", file=MANIFEST)


def _hexes(values: list[str], what: str) -> list[str]:
    for v in values:
        if not _HEX64.fullmatch(v):
            raise _bad(f"{what}: {v!r} is not a lower-case hex SHA-256")
    return values


class _Obj:
    """Typed field access on one JSON object of the manifest, errors naming the field path."""

    def __init__(self, doc: object, path: str) -> None:
        if not isinstance(doc, dict):
            raise _bad(f"{path} is not a JSON object")
        self.doc: dict[str, Any] = doc
        self.path = path

    def _get(self, key: str, types: type | tuple[type, ...], what: str) -> Any:
        if key not in self.doc:
            raise _bad(f"{self.path}.{key} is missing")
        v = self.doc[key]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in (types if isinstance(
                types, tuple) else (types,))):
            raise _bad(f"{self.path}.{key} is not {what}: {v!r}"[:300])
        return v

    def obj(self, key: str) -> _Obj:
        return _Obj(self._get(key, dict, "an object"), f"{self.path}.{key}")

    def text(self, key: str) -> str:
        return str(self._get(key, str, "a string"))

    def flag(self, key: str) -> bool:
        return bool(self._get(key, bool, "true or false"))

    def num(self, key: str) -> int:
        v = int(self._get(key, int, "an integer"))
        if v < 0:
            raise _bad(f"{self.path}.{key} is negative: {v}")
        return v

    def opt_num(self, key: str) -> int | None:
        return None if self.doc.get(key, 0) is None else self.num(key)

    def opt_text(self, key: str) -> str | None:
        return None if self.doc.get(key, "") is None else self.text(key)

    def texts(self, key: str) -> list[str]:
        v = self._get(key, list, "a list")
        if not all(isinstance(x, str) for x in v):
            raise _bad(f"{self.path}.{key} holds something that is not a string")
        return list(v)

    def hex(self, key: str) -> str:
        v = self.text(key)
        if not _HEX64.fullmatch(v):
            raise _bad(f"{self.path}.{key} is not a lower-case hex SHA-256: {v!r}")
        return v

    def b64(self, key: str) -> bytes:
        try:
            raw = base64.b64decode(self.text(key), validate=True)
        except (binascii.Error, ValueError):
            raise _bad(f"{self.path}.{key} is not base64") from None
        if len(raw) != 32:
            raise _bad(f"{self.path}.{key} is {len(raw)} bytes, not a 32-byte hash")
        return raw
