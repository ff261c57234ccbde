"""Payment messages in, one canonical ``Transaction`` out: SWIFT FIN MT103/MT202/MT202COV
(also RJE files), ISO 20022 pacs.008 (001.08 and later) and JSON.

``parse_messages(data, format)`` returns, per message, either its ``Transaction`` or the
``MessageError`` that refused it (naming the message, the field and the reason), so one bad
message in a file never hides the others.
"""

from __future__ import annotations

from typing import Literal

from inference.messages.errors import MessageError
from inference.messages.transaction import R16, Agent, Identifier, Party, Transaction

__all__ = [
    "MAX_FILE_BYTES",
    "R16",
    "Agent",
    "Format",
    "Identifier",
    "MessageError",
    "Party",
    "Transaction",
    "detect_format",
    "parse_messages",
]

Format = Literal["auto", "mt", "pacs008", "json"]
MAX_FILE_BYTES = 64 * 1024 * 1024


def detect_format(data: bytes) -> Literal["mt", "pacs008", "json"]:
    """By the first meaningful bytes: ``{1:`` FIN, ``<`` XML, ``{``/``[`` JSON."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:3]
    if head.startswith(b"{1:") or head.startswith(b"\x01"):  # FIN, or a DOS-PCC frame of FIN
        return "mt"
    if head.startswith(b"<"):
        return "pacs008"
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
    if kind == "mt":
        from inference.messages.mt import parse_mt

        return list(parse_mt(data))
    try:
        if kind == "pacs008":
            from inference.messages.pacs008 import parse_pacs008

            return list(parse_pacs008(data))
        from inference.messages.json_message import parse_json

        return list(parse_json(data))
    except MessageError as exc:
        return [exc if exc.message else exc.located(f"{kind} document")]
