"""C2SP tlog-cosignature/v1 with Ed25519: a witness's timestamped statement about a checkpoint.

A cosignature says "as of this time, this is the largest tree head of this log that I have
verified to be consistent with everything I saw of it before" (https://c2sp.org/tlog-cosignature).
It is a signed-note signature line added to the checkpoint's note:

    — <witness name> base64(key id (4 bytes) || timestamp (u64, big-endian) || signature (64 bytes))

The key id is the first 4 bytes of SHA-256(name || 0x0A || 0x04 || public key); the 0x04 keeps a
witness key apart from a log's signing key (0x01) even under the same name. The signed message is
``cosignature/v1``, ``time <timestamp>`` and then the whole checkpoint body, each line ending in a
newline. A verifier configured with a witness's verifier key (``name+keyid+base64(0x04 || key)``)
picks that witness's line out of a note and ignores every other line.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import KeyFileError, NoteError
from ledger.note import key_id_of, parse_note, parse_skey, parse_vkey

__all__ = [
    "ALG_COSIGNATURE_V1",
    "Cosignature",
    "Cosigner",
    "CosignerVerifier",
    "add_lines",
    "cosignatures",
    "cosigned_message",
]

ALG_COSIGNATURE_V1 = 0x04
_DASH = "\u2014 "
_MAX_TIMESTAMP = 2**63 - 1


def _key_id(name: str, public: bytes) -> bytes:
    return key_id_of(name, ALG_COSIGNATURE_V1, public)


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise KeyFileError(f"witness name {name!r} is empty or holds '+' or white space")


def cosigned_message(body: str, timestamp: int) -> bytes:
    """What a witness signs: the header line, the time line and the checkpoint body."""
    if not 0 <= timestamp <= _MAX_TIMESTAMP:
        raise NoteError(f"cosignature timestamp {timestamp} is out of range")
    return f"cosignature/v1\ntime {timestamp}\n{body}".encode()


@dataclass(frozen=True)
class CosignerVerifier:
    """A witness's public key, as the log and examiners pin it."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def from_vkey(cls, vkey: str) -> CosignerVerifier:
        """Parse ``name+hexkeyid+base64(0x04 || public key)``."""
        return cls(*parse_vkey(vkey, ALG_COSIGNATURE_V1, "witness key", "a cosignature/v1 key"))

    @property
    def vkey(self) -> str:
        raw = bytes([ALG_COSIGNATURE_V1]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode()}"

    def verify(self, body: str, timestamp: int, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(
                signature, cosigned_message(body, timestamp))
        except (InvalidSignature, ValueError, NoteError):
            return False
        return True


class Cosigner:
    """A witness's private key: it cosigns checkpoints it has checked."""

    __slots__ = ("_private", "name", "verifier")

    def __init__(self, name: str, private: Ed25519PrivateKey) -> None:
        _check_name(name)
        self.name = name
        self._private = private
        public = private.public_key().public_bytes_raw()
        self.verifier = CosignerVerifier(name, _key_id(name, public), public)

    @classmethod
    def generate(cls, name: str) -> Cosigner:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_skey(cls, skey: str) -> Cosigner:
        """Parse ``PRIVATE+KEY+name+hexkeyid+base64(0x04 || seed)``."""
        name, hex_id, seed = parse_skey(skey, ALG_COSIGNATURE_V1, "witness key", "a cosignature/v1 seed")
        cosigner = cls(name, Ed25519PrivateKey.from_private_bytes(seed))
        if cosigner.verifier.key_id.hex() != hex_id:
            raise KeyFileError(f"witness key id {hex_id} does not match its key")
        return cosigner

    @property
    def skey(self) -> str:
        raw = bytes([ALG_COSIGNATURE_V1]) + self._private.private_bytes_raw()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{base64.b64encode(raw).decode()}"

    def cosign(self, body: str, timestamp: int) -> str:
        """The signature line (ending in a newline) cosigning the checkpoint ``body`` at ``timestamp``."""
        signature = self._private.sign(cosigned_message(body, timestamp))
        blob = self.verifier.key_id + struct.pack(">Q", timestamp) + signature
        return f"{_DASH}{self.name} {base64.b64encode(blob).decode()}\n"


@dataclass(frozen=True)
class Cosignature:
    """One witness's valid cosignature found in a note."""

    witness: CosignerVerifier
    timestamp: int
    line: str  # the signature line as it stands in the note, newline included


def cosignatures(note: str, witnesses: Sequence[CosignerVerifier]) -> list[Cosignature]:
    """The valid cosignatures in ``note`` by ``witnesses``, at most one per witness (the newest).

    Lines by other keys (the log's own signature, witnesses not pinned) are ignored. A line that
    claims a pinned witness's name and key id but does not verify is an error (``NoteError``): it is
    a forgery or damage, never something to skip quietly."""
    body, sigs = parse_note(note)
    known = {(w.name, w.key_id): w for w in witnesses}
    found: dict[CosignerVerifier, Cosignature] = {}
    for sig in sigs:
        w = known.get((sig.name, sig.key_id))
        if w is None:
            continue
        if len(sig.signature) != 8 + 64:
            raise NoteError(f"cosignature of {w.vkey} is {len(sig.signature)} bytes, expected 72")
        (timestamp,) = struct.unpack(">Q", sig.signature[:8])
        if not w.verify(body, timestamp, sig.signature[8:]):
            raise NoteError(f"cosignature by {w.vkey} does not verify")
        blob = sig.key_id + sig.signature
        line = f"{_DASH}{sig.name} {base64.b64encode(blob).decode()}\n"
        if w not in found or found[w].timestamp < timestamp:
            found[w] = Cosignature(w, timestamp, line)
    return list(found.values())


def add_lines(note: str, lines: Sequence[str]) -> str:
    """``note`` with the signature ``lines`` appended, each once (lines already there are skipped)."""
    parse_note(note)  # a well-formed note to add to
    have = set(note.split("\n"))
    extra = []
    for line in lines:
        if not line.startswith(_DASH) or not line.endswith("\n") or "\n" in line[:-1]:
            raise NoteError(f"{line!r} is not one signature line")
        if line[:-1] not in have:
            have.add(line[:-1])
            extra.append(line)
    return note + "".join(extra)
