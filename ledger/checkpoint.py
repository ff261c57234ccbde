"""C2SP tlog-checkpoint: the signed statement "the log has this size and this root".

Body (https://c2sp.org/tlog-checkpoint): origin line, decimal tree size, base64 root hash,
then optional extension lines; signed as a C2SP signed-note.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from ledger.errors import NoteError
from ledger.merkle import HASH_SIZE
from ledger.note import NoteSigner, NoteVerifier, open_note, sign_note

__all__ = ["MAX_SIZE", "Checkpoint", "SignedCheckpoint", "is_decimal"]

MAX_SIZE = 2**63 - 1  # a tree size (u64 in tlog-checkpoint; a signed 64-bit column in storage)


def is_decimal(text: str) -> bool:
    """``text`` is an ASCII decimal of at most 20 digits with no leading zero (``"0"`` itself is one):
    what tlog-checkpoint and tlog-witness call a decimal. ``str.isdigit`` alone takes ``'²'`` and
    ``'٥'``, and ``int()`` of thousands of digits is slow or refused."""
    return (0 < len(text) <= 20 and text.isascii() and text.isdigit()
            and (text == "0" or not text.startswith("0")))


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def to_text(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        lines.extend(self.extensions)
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str) -> Checkpoint:
        if not text.endswith("\n"):
            raise NoteError("checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise NoteError("checkpoint needs origin, size and root lines")
        origin, size_s, root_s, *ext = lines
        if not origin:
            raise NoteError("checkpoint origin line is empty")
        if not is_decimal(size_s):
            raise NoteError(f"checkpoint size {size_s[:40]!r} is not an ASCII decimal number without "
                            "leading zeroes")
        if int(size_s) > MAX_SIZE:
            raise NoteError(f"checkpoint size {size_s} is larger than a log can be (2^63 - 1)")
        try:
            root = base64.b64decode(root_s, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise NoteError("checkpoint root is not valid base64") from exc
        if len(root) != HASH_SIZE:
            raise NoteError(f"checkpoint root is {len(root)} bytes, expected {HASH_SIZE}")
        if any(not e for e in ext):
            raise NoteError("checkpoint has an empty extension line")
        return cls(origin, int(size_s), root, tuple(ext))

    def sign(self, signers: list[NoteSigner]) -> SignedCheckpoint:
        return SignedCheckpoint(self, sign_note(self.to_text(), signers))


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    note: str

    @classmethod
    def verify(
        cls, note: str, verifiers: list[NoteVerifier], origin: str | None = None
    ) -> SignedCheckpoint:
        """Open ``note`` with ``verifiers`` and parse its checkpoint; raise ``NoteError``."""
        text, _ = open_note(note, verifiers)
        cp = Checkpoint.from_text(text)
        if origin is not None and cp.origin != origin:
            raise NoteError(f"checkpoint origin {cp.origin!r} is not the log's {origin!r}")
        return cls(cp, note)

    @classmethod
    def parse_unverified(cls, note: str) -> SignedCheckpoint:
        """Parse without checking any signature (for display and forensics only)."""
        from ledger.note import parse_note

        text, _ = parse_note(note)
        return cls(Checkpoint.from_text(text), note)
