"""Payment messages in, one canonical ``Transaction`` out: SWIFT FIN MT103/MT202/MT202COV
(also RJE and DOS-PCC files; ``mt103``/``mt202`` when the caller names the type, which also reads a
text block without headers), ISO 20022 pacs.008, pacs.009, pacs.004, pain.001 and JSON.

``parse_messages(data, format)`` returns, per message, either its ``Transaction`` or the
``MessageError`` that refused it (naming the message, the field and the reason), so one bad
message in a file never hides the others.
"""

from __future__ import annotations

import re
from typing import Literal

from inference.messages.errors import MessageError
from inference.messages.findings import CODES as FINDING_CODES
from inference.messages.findings import Finding
from inference.messages.transaction import (
    R16,
    TRANSACTION_SCHEMAS,
    Agent,
    Identifier,
    Original,
    Party,
    Transaction,
)

__all__ = [
    "FINDING_CODES",
    "FORMATS",
    "MAX_FILE_BYTES",
    "PARSER",
    "R16",
    "Agent",
    "Finding",
    "Format",
    "Identifier",
    "Kind",
    "MessageError",
    "Original",
    "Party",
    "Transaction",
    "detect_format",
    "parse_messages",
    "transaction_schema_of",
]

# The parsers' version, sealed in each decision record (``input.parser``): what read the message and
# which canonical form its ``transaction_sha256`` is of. Records without it were read by version 1.
PARSER = "sealtrail.messages/2"
_PARSER_SCHEMAS = {"sealtrail.messages/1": TRANSACTION_SCHEMAS[1], PARSER: TRANSACTION_SCHEMAS[2]}


def transaction_schema_of(parser: str | None) -> str:
    """The transaction schema whose hash a record read by ``parser`` holds (None: version 1)."""
    schema = _PARSER_SCHEMAS.get(parser or "sealtrail.messages/1")
    if schema is None:
        raise ValueError(f"unknown parser version {parser!r}")
    return schema

_FIN_START = re.compile(rb"\{[1-5]:|:[0-9]{2}[A-Z]?:")
Format = Literal["auto", "mt", "mt103", "mt202", "pacs008", "pacs009", "pacs004", "pain001", "iso20022",
                 "json"]
Kind = Literal["mt", "pacs008", "pacs009", "pacs004", "pain001", "iso20022", "json"]
FORMATS: tuple[str, ...] = ("auto", "mt", "mt103", "mt202", "pacs008", "pacs009", "pacs004", "pain001",
                           "iso20022", "json")
_STATED_MT = {"mt103": "103", "mt202": "202"}  # FIN with the type named: also a text block without headers
_ISO_KINDS = {b"pacs.008": "pacs008", b"pacs.009": "pacs009", b"pacs.004": "pacs004", b"pain.001": "pain001"}
_ISO_NS = re.compile(rb"(?:urn:iso:std:iso:20022:tech:xsd:|/)(pacs\.00[489]|pain\.001)\.[0-9]{3}\.")
MAX_FILE_BYTES = 64 * 1024 * 1024


def detect_format(data: bytes) -> Kind:
    """By the first meaningful bytes: ``{1:`` FIN, ``<`` XML, ``{``/``[`` JSON. XML is told apart by
    the Document's namespace (pacs.008, pacs.009, pacs.004, pain.001); another is read as pacs.008,
    which refuses it naming the message it is."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:5]
    if head.startswith(b"\x01") or _FIN_START.match(head):  # FIN (a block, or a bare text block's
        return "mt"  # first field, refused for want of headers), or a DOS-PCC frame of FIN
    if head.startswith(b"<"):
        m = _ISO_NS.search(data, 0, 1 << 20)
        return _ISO_KINDS[m.group(1)] if m else "pacs008"  # type: ignore[return-value]
    if head[:1] in (b"{", b"["):
        return "json"
    raise MessageError("neither SWIFT FIN ('{1:'), ISO 20022 XML ('<') nor JSON", field="format")


def parse_messages(data: bytes, fmt: Format = "auto") -> list[Transaction | MessageError]:
    """Every message in ``data`` as a Transaction, or the error that refused it."""
    if len(data) > MAX_FILE_BYTES:
        return [MessageError(f"input is {len(data):,} bytes, more than {MAX_FILE_BYTES:,}",
                             field="file")]
    try:
        kind = detect_format(data) if fmt == "auto" else fmt
    except MessageError as exc:
        return [exc]
    if kind == "mt" or kind in _STATED_MT:
        from inference.messages.mt import parse_mt

        return list(parse_mt(data, _STATED_MT.get(kind)))
    try:
        if kind == "json":
            from inference.messages.json_message import parse_json

            return list(parse_json(data))
        return list(_parse_iso(data, kind))
    except MessageError as exc:
        return [exc if exc.message else exc.located(f"{kind} document")]


def _parse_iso(data: bytes, kind: str) -> list[Transaction]:
    if kind == "iso20022":
        m = _ISO_NS.search(data, 0, 1 << 20)
        kind = _ISO_KINDS[m.group(1)] if m else "pacs008"
    if kind == "pacs004":
        from inference.messages.pacs004 import parse_pacs004

        return parse_pacs004(data)
    if kind == "pain001":
        from inference.messages.pain001 import parse_pain001

        return parse_pain001(data)
    from inference.messages.pacs008 import parse_transfers

    return parse_transfers(data, "pacs.009" if kind == "pacs009" else "pacs.008")
