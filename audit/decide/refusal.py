"""The refusal record (``sealtrail.refusal/2``; ``/1`` still read): one screening request refused.

A request the scoring path refuses (``audit.decide.submissions.parse_submissions`` raises
``SubmissionRefusedError``; its body is empty, over the size cap or of a format that cannot be
told; or a header of the request is refused: ``Content-Type``, ``X-Priority``,
``Idempotency-Key``) is not decided, but it is sealed (DESIGN.md invariant 12): who asked (the
principal, as decision records hold it), when, in which format and how (one message or a batch,
the transaction cap), why (the refusal's kind, the reason text, each fault's index, field and
reason, at most 100, and how many in all), and the SHA-256 of the request bytes. The bytes
themselves are the record's payload, kept apart from the chain so that they can be purged like a
decision's message; a body refused before it was read (over the cap, or for a header) is sealed
without payload, and the record says so (``payload.kept``: false, ``withheld``).

Version 2 is version 1 with more kinds (``empty_body``, ``format_undetected``,
``unsupported_media_type``, ``invalid_priority``, ``invalid_idempotency_key``); ``format`` is
``auto`` where none was determined (the body was never read, or its format could not be detected).

No personal data from the request is in the body: the reasons a parser gives may quote a value
of the message (an IBAN, an amount); every quoted value is replaced by ``'…'`` (``redact``).
While the payload is kept, replaying it (``replay_refusal``) gives the full reasons again, and
an export bundle's verifier requires the same refusal (the same redacted faults).

Pure: bytes and values in, a body or a ``Record`` out; no clock, no database (the offline
bundle verifier imports it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from audit.errors import (
    OneMessageExpectedError,
    SubmissionFault,
    SubmissionRefusedError,
    TooManySubmissionsError,
)
from ledger import Record
from ledger.jcs import canonical_bytes
from ledger.records import format_time

__all__ = [
    "HEADER_KINDS", "MAX_FAULTS", "MAX_REASON", "REFUSAL_KIND", "REFUSAL_SCHEMA", "REFUSAL_SCHEMAS",
    "Refusal", "RefusalBody", "empty_body", "error_kind", "header_refused", "parse_refusal_body", "redact",
    "refusal_of", "replay_refusal", "too_large", "undetected",
]

REFUSAL_KIND = "refusal"
REFUSAL_SCHEMA = "sealtrail.refusal/2"
REFUSAL_SCHEMAS = ("sealtrail.refusal/1", REFUSAL_SCHEMA)  # every version read
MAX_FAULTS = 100  # faults named one by one (parse_submissions names no more); fault_count says all
MAX_REASON = 2000  # characters of the reason text kept (the error's sentence, redacted)
_FORMATS = frozenset({"json", "mt", "mt103", "mt202", "pacs008", "pacs009", "pacs004", "pain001", "iso20022",
                      "auto"})
_KINDS_V1 = frozenset({"message_refused", "one_message_expected", "batch_too_large", "too_large"})
HEADER_KINDS = frozenset({"unsupported_media_type", "invalid_priority", "invalid_idempotency_key"})
_KINDS = _KINDS_V1 | HEADER_KINDS | {"empty_body", "format_undetected"}
_UNREAD = HEADER_KINDS | {"too_large"}  # refused before the body was read: nothing to replay
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_REDACTED = "'…'"


def redact(text: str) -> str:
    """``text`` with every quoted value (``'...'`` or ``"..."``, as Python's repr writes one)
    replaced by ``'…'``: parsers quote the message's own values in their reasons."""
    return _QUOTED.sub(_REDACTED, text)


def error_kind(exc: SubmissionRefusedError) -> str:
    """The refusal's stable code, as the API's problem type names it."""
    if isinstance(exc, TooManySubmissionsError):
        return "batch_too_large"
    if isinstance(exc, OneMessageExpectedError):
        return "one_message_expected"
    return "message_refused"


def _fault(f: SubmissionFault) -> dict[str, Any]:
    return {"index": f.index, "field": None if f.field is None else redact(f.field),
            "reason": redact(f.message)}


@dataclass(frozen=True)
class Refusal:
    """One refused request, ready to seal: ``record()`` is its ledger record (body and payload)."""

    at: str  # when it was refused (UTC, microseconds, Z)
    principal: dict[str, Any]  # Principal.to_json()
    format: str  # json | mt | pacs008 ... (auto: none determined: a body never read, or not detected)
    batch: bool
    max_items: int | None
    via: str  # "POST /v1/decisions", "POST /v1/decisions/batch", "sealtrail score"
    kind: str  # message_refused | one_message_expected | batch_too_large | too_large
    reason: str  # redacted
    faults: tuple[dict[str, Any], ...]  # {index, field, reason}, redacted, at most MAX_FAULTS
    fault_count: int
    payload_sha256: str | None  # None: the body was never read (over the cap)
    payload_bytes: int
    payload: bytes | None  # the request bytes, sealed as the record's payload; None: not kept
    withheld: str | None = None  # why no payload is kept
    idempotency_key: bool = False  # an Idempotency-Key header came with the request

    def body(self) -> dict[str, Any]:
        """The ``sealtrail.refusal/2`` body (docs/formats.md)."""
        return {
            "schema": REFUSAL_SCHEMA, "at": self.at, "principal": self.principal,
            "request": {"via": self.via, "format": self.format, "batch": self.batch,
                        "max_items": self.max_items, "idempotency_key": self.idempotency_key},
            "refusal": {"kind": self.kind, "reason": self.reason, "faults": list(self.faults),
                        "fault_count": self.fault_count},
            "payload": {"sha256": self.payload_sha256, "bytes": self.payload_bytes,
                        "kept": self.payload is not None, "withheld": self.withheld},
        }

    def record(self) -> Record:
        """The ledger record: the body (canonical) and the request bytes as its payload."""
        return Record.from_jcs(REFUSAL_KIND, canonical_bytes(self.body()), payload=self.payload)


def _at(now: datetime | None) -> str:
    return format_time(datetime.now(UTC) if now is None else now)


def refusal_of(exc: SubmissionRefusedError, raw: bytes, *, fmt: str, principal: Mapping[str, Any],
               batch: bool, via: str, max_items: int | None, now: datetime | None = None,
               idempotency_key: bool = False) -> Refusal:
    """The refusal of ``raw`` (the request's bytes, kept as payload) that ``parse_submissions``
    refused with ``exc``, asked for with these arguments."""
    faults = tuple(_fault(f) for f in exc.faults[:MAX_FAULTS])
    return Refusal(at=_at(now), principal=dict(principal), format=fmt, batch=batch, max_items=max_items,
                   via=via, kind=error_kind(exc), reason=redact(str(exc))[:MAX_REASON], faults=faults,
                   fault_count=max(getattr(exc, "total", 0), len(exc.faults)),
                   payload_sha256=hashlib.sha256(raw).hexdigest(), payload_bytes=len(raw), payload=raw,
                   idempotency_key=idempotency_key)


def too_large(declared: int | None, cap: int, *, fmt: str, principal: Mapping[str, Any], batch: bool,
              via: str, now: datetime | None = None) -> Refusal:
    """The refusal of a body over ``cap`` bytes, refused before it was read: no payload and no
    hash (``declared``: the length the request stated, if any)."""
    size = "more than" if declared is None else f"{declared:,} bytes,"
    reason = f"body of {size} {cap:,} bytes at most; refused unread"
    return Refusal(at=_at(now), principal=dict(principal), format=fmt, batch=batch, max_items=None, via=via,
                   kind="too_large", reason=reason, faults=({"index": None, "field": None,
                                                            "reason": "too large"},),
                   fault_count=1, payload_sha256=None, payload_bytes=declared or 0, payload=None,
                   withheld="over the size cap: refused before it was read")


def header_refused(kind: str, field: str, reason: str, *, fmt: str, principal: Mapping[str, Any],
                   batch: bool, via: str, declared: int | None, idempotency_key: bool = False,
                   now: datetime | None = None) -> Refusal:
    """The refusal of a request for one of its headers (``kind``: one of ``HEADER_KINDS``), refused
    before its body was read: no payload and no hash (``declared``: the length the request stated)."""
    if kind not in HEADER_KINDS:
        raise ValueError(f"{kind!r} is not a header refusal ({', '.join(sorted(HEADER_KINDS))})")
    text = redact(reason)[:MAX_REASON]
    return Refusal(at=_at(now), principal=dict(principal), format=fmt, batch=batch, max_items=None, via=via,
                   kind=kind, reason=text, faults=({"index": None, "field": field, "reason": text},),
                   fault_count=1, payload_sha256=None, payload_bytes=declared or 0, payload=None,
                   withheld=f"refused for its {field} header before the body was read",
                   idempotency_key=idempotency_key)


def empty_body(raw: bytes, *, fmt: str, principal: Mapping[str, Any], batch: bool, via: str,
               max_items: int | None, now: datetime | None = None, idempotency_key: bool = False) -> Refusal:
    """The refusal of a body (or file) that is empty or white space only; its bytes are the payload."""
    what = "file" if via == "sealtrail score" else "body"
    return Refusal(at=_at(now), principal=dict(principal), format=fmt, batch=batch, max_items=max_items,
                   via=via, kind="empty_body", reason=f"the {what} is empty",
                   faults=({"index": None, "field": None, "reason": "empty"},), fault_count=1,
                   payload_sha256=hashlib.sha256(raw).hexdigest(), payload_bytes=len(raw), payload=raw,
                   idempotency_key=idempotency_key)


def undetected(exc: Exception, raw: bytes, *, principal: Mapping[str, Any], batch: bool, via: str,
               now: datetime | None = None) -> Refusal:
    """The refusal of ``raw`` whose format could not be detected (``detect_format`` raised ``exc``,
    a ``MessageError``); its bytes are the payload, and replaying detects nothing again."""
    why = redact(str(getattr(exc, "reason", exc)))[:MAX_REASON]
    return Refusal(at=_at(now), principal=dict(principal), format="auto", batch=batch, max_items=None,
                   via=via, kind="format_undetected", reason=why,
                   faults=({"index": None, "field": "format", "reason": why},), fault_count=1,
                   payload_sha256=hashlib.sha256(raw).hexdigest(), payload_bytes=len(raw), payload=raw)


@dataclass(frozen=True)
class RefusalBody:
    """A ``sealtrail.refusal/1`` or ``/2`` body, parsed (``parse_refusal_body``)."""

    at: str
    principal: dict[str, Any]
    via: str
    format: str
    batch: bool
    max_items: int | None
    idempotency_key: bool
    kind: str
    reason: str
    faults: tuple[dict[str, Any], ...]
    fault_count: int
    payload_sha256: str | None
    payload_bytes: int
    payload_kept: bool
    withheld: str | None
    version: int = 1

    @property
    def replayable(self) -> bool:
        """Whether the refusal can be replayed: the request's bytes were read and kept."""
        return self.payload_kept and self.kind not in _UNREAD


def _is_int(x: object) -> bool:
    return type(x) is int and x >= 0


def parse_refusal_body(body: object) -> RefusalBody:
    """``body`` as a ``RefusalBody``; ``ValueError`` naming the first thing that breaks the schema."""
    if not isinstance(body, dict) or body.get("schema") not in REFUSAL_SCHEMAS:
        raise ValueError(f"schema is not one of {', '.join(REFUSAL_SCHEMAS)}")
    version = REFUSAL_SCHEMAS.index(body["schema"]) + 1
    kinds = _KINDS_V1 if version == 1 else _KINDS
    if set(body) != {"at", "payload", "principal", "refusal", "request", "schema"}:
        raise ValueError(f"fields {sorted(body)} are not the schema's")
    at, principal, req = body["at"], body["principal"], body["request"]
    ref, pay = body["refusal"], body["payload"]
    if type(at) is not str or not _TIME.fullmatch(at):
        raise ValueError("at is not a UTC time with microseconds")
    if not isinstance(principal, dict) or type(principal.get("subject")) is not str:
        raise ValueError("principal is not a principal object")
    if (not isinstance(req, dict) or set(req) != {"via", "format", "batch", "max_items", "idempotency_key"}
            or type(req["via"]) is not str or req["format"] not in _FORMATS or type(req["batch"]) is not bool
            or not (req["max_items"] is None or _is_int(req["max_items"]))
            or type(req["idempotency_key"]) is not bool):
        raise ValueError("request is not {via, format, batch, max_items, idempotency_key}")
    if (not isinstance(ref, dict) or set(ref) != {"kind", "reason", "faults", "fault_count"}
            or ref["kind"] not in kinds or type(ref["reason"]) is not str
            or not isinstance(ref["faults"], list) or not _is_int(ref["fault_count"])
            or len(ref["faults"]) > MAX_FAULTS or ref["fault_count"] < len(ref["faults"])):
        raise ValueError("refusal is not {kind, reason, faults (at most 100), fault_count}")
    for f in ref["faults"]:
        if (not isinstance(f, dict) or set(f) != {"index", "field", "reason"}
                or not (f["index"] is None or _is_int(f["index"]))
                or not (f["field"] is None or type(f["field"]) is str) or type(f["reason"]) is not str):
            raise ValueError("a fault is not {index, field, reason}")
    if (not isinstance(pay, dict) or set(pay) != {"sha256", "bytes", "kept", "withheld"}
            or not (pay["sha256"] is None or (type(pay["sha256"]) is str and _HEX64.fullmatch(pay["sha256"])))
            or not _is_int(pay["bytes"]) or type(pay["kept"]) is not bool
            or not (pay["withheld"] is None or type(pay["withheld"]) is str)
            or pay["kept"] == (pay["withheld"] is not None) or (pay["kept"] and pay["sha256"] is None)
            or (pay["kept"] and ref["kind"] in _UNREAD)):
        raise ValueError("payload is not {sha256, bytes, kept, withheld}")
    return RefusalBody(at, principal, req["via"], req["format"], req["batch"], req["max_items"],
                       req["idempotency_key"], ref["kind"], ref["reason"], tuple(ref["faults"]),
                       ref["fault_count"], pay["sha256"], pay["bytes"], pay["kept"], pay["withheld"], version)


def replay_refusal(body: RefusalBody, payload: bytes) -> str | None:
    """Parse ``payload`` again as the refused request was parsed; None if it is refused the same
    way (same kind, same redacted faults, same count), else what differs (a payload that now
    parses, or is refused for other reasons). The payload's hash is the caller's to check."""
    from audit.decide.submissions import parse_submissions  # the scoring path's own parser

    if not body.replayable:
        return None
    if body.kind == "empty_body":
        if not payload.strip():
            return None
        return "the payload is not empty: the record says it was refused as empty"
    if body.kind == "format_undetected":
        return _replay_detection(body, payload)
    try:
        parse_submissions(payload, body.format, body.principal, batch=body.batch, max_items=body.max_items,
                          received_at=datetime(2000, 1, 1, tzinfo=UTC), keyed=False,
                          idempotency_key="replay" if body.idempotency_key else None)
    except SubmissionRefusedError as exc:
        faults = tuple(_fault(f) for f in exc.faults[:MAX_FAULTS])
        count = max(exc.total, len(exc.faults))
        if (error_kind(exc), faults, count) == (body.kind, body.faults, body.fault_count):
            return None
        return (f"refused again, but differently: {error_kind(exc)}, {count} fault(s) "
                f"({_where(faults)}); the record says {body.kind}, {body.fault_count} "
                f"({_where(body.faults)})")
    return (f"the payload now parses: the record says it was refused ({body.kind}, "
            f"{body.fault_count} fault(s))")


def _replay_detection(body: RefusalBody, payload: bytes) -> str | None:
    from inference.messages import MessageError, detect_format

    try:
        detect_format(payload)
    except MessageError as exc:
        again = redact(str(exc.reason))[:MAX_REASON]
        if again == body.reason:
            return None
        return f"refused again, but differently: {again!r}; the record says {body.reason!r}"
    return "the payload's format is now detected: the record says it could not be"


def _where(faults: Sequence[dict[str, Any]]) -> str:
    def one(f: dict[str, Any]) -> str:
        at = "" if f["index"] is None else f"[{f['index']}]"
        return f"{at}{'.' if at and f['field'] else ''}{f['field'] or ('' if at else 'body')}: {f['reason']}"
    return "; ".join(one(f) for f in faults[:3])[:400]
