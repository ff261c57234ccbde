"""What callers hand to the ledger and what they get back, and the sealed record bytes.

A sealed record is the RFC 8785 canonical JSON envelope
``{"kind": k, "payload_sha256": h?, "record": {...}, "recorded_at": t, "trace_id": u, "v": 1}``
where ``record`` is the kind-specific content. Its keys are already in JCS order, so the
envelope is assembled from canonical parts. The fixed-width tail (recorded_at, trace_id, v:
exactly 100 bytes) and the kind prefix let the verifier check the index columns in SQL.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
import uuid6

from ledger.errors import RecordError

__all__ = ["ENVELOPE_VERSION", "Receipt", "Record", "format_time", "seal"]

ENVELOPE_VERSION = 1
_KIND = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def format_time(t: datetime) -> str:
    """UTC, microseconds, 'Z': the only time format in sealed records."""
    if t.tzinfo is None:
        raise RecordError("timestamps must be timezone-aware")
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Record:
    """One thing to seal: a kind, a JSON object body, and optionally a raw payload.

    ``body`` is canonicalised with RFC 8785. Callers that already hold canonical bytes use
    ``Record.from_canonical_body`` (the ledger then trusts those bytes to be JCS).
    """

    kind: str
    body: Mapping[str, Any] | None = None
    trace_id: str | None = None
    payload: bytes | None = None
    body_jcs: bytes | None = None

    @classmethod
    def from_canonical_body(
        cls, kind: str, body_jcs: bytes, *, trace_id: str | None = None, payload: bytes | None = None
    ) -> Record:
        return cls(kind, None, trace_id, payload, body_jcs)

    def canonical_body(self) -> bytes:
        if self.body_jcs is not None:
            b = self.body_jcs
            if not (b[:1] == b"{" and b[-1:] == b"}"):
                raise RecordError(f"{self.kind} record: canonical body is not a JSON object")
            return b
        if not isinstance(self.body, Mapping):
            raise RecordError(f"{self.kind} record: body must be a JSON object")
        try:
            return rfc8785.dumps(dict(self.body))
        except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
            raise RecordError(f"{self.kind} record: body is not JSON-serialisable: {exc}") from exc


@dataclass(frozen=True)
class Receipt:
    """Proof of durability handed back by ``append_many``: where the record sits in the log."""

    seq: int
    trace_id: str
    leaf_hash: bytes
    chain_hash: bytes
    recorded_at: str


def seal(record: Record, recorded_at: str) -> tuple[str, bytes, str | None]:
    """(trace id, canonical envelope bytes, payload SHA-256 hex or None) for ``record``."""
    kind = record.kind
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise RecordError(f"record kind {kind!r} must match {_KIND.pattern}")
    tid = record.trace_id
    if tid is None:
        tid = str(uuid6.uuid7())
    elif not isinstance(tid, str) or not _UUID.fullmatch(tid):
        raise RecordError(f"{kind} record: trace id {tid!r} is not a lower-case UUID")
    body = record.canonical_body()
    digest = None
    parts = [b'{"kind":"', kind.encode(), b'"']
    if record.payload is not None:
        if not isinstance(record.payload, bytes | bytearray | memoryview):
            raise RecordError(f"{kind} record: payload must be bytes")
        digest = hashlib.sha256(record.payload).hexdigest()
        parts += [b',"payload_sha256":"', digest.encode(), b'"']
    parts += [
        b',"record":', body, b',"recorded_at":"', recorded_at.encode(), b'","trace_id":"',
        tid.encode(), b'","v":', str(ENVELOPE_VERSION).encode(), b"}",
    ]
    return tid, b"".join(parts), digest


def now_utc() -> datetime:
    return datetime.now(UTC)
