"""C2SP signed-note with Ed25519: signer and verifier keys, signing and opening notes.

Format (https://c2sp.org/signed-note): a UTF-8 text ending in a newline, a blank line, then
one line per signature, ``— <name> <base64(key id (4 bytes) || signature)>``. The key id of
an Ed25519 key is the first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ledger.errors import KeyFileError, NoteError

__all__ = ["NoteSigner", "NoteVerifier", "Signature", "SigningBackend", "SoftwareKey", "key_id_of",
           "open_note", "parse_note", "parse_skey", "parse_vkey", "sign_note"]

ALG_ED25519 = 0x01
_DASH = "\u2014 "
_MAX_SIGNATURES = 100


def key_id_of(name: str, alg: int, public: bytes) -> bytes:
    """A signed-note key id: the first 4 bytes of SHA-256(name || 0x0A || alg || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public).digest()[:4]


def _key_id(name: str, public: bytes) -> bytes:
    return key_id_of(name, ALG_ED25519, public)


def parse_vkey(vkey: str, alg: int, what: str, kind: str) -> tuple[str, bytes, bytes]:
    """``(name, key id, 32-byte public key)`` of a verifier key ``name+hexkeyid+base64(alg || key)``
    (C2SP signed-note), its key id checked; ``KeyFileError`` naming ``what`` otherwise."""
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3:
        raise KeyFileError(f"{what} {vkey!r} is not name+keyid+key")
    name, hex_id, b64 = parts
    _check_name(name)
    raw = _b64decode(b64, what)
    if len(raw) != 33 or raw[0] != alg:
        raise KeyFileError(f"{what} is not {kind} (0x{alg:02x} || 32 bytes)")
    key_id = key_id_of(name, alg, raw[1:])
    if hex_id != key_id.hex():
        raise KeyFileError(f"{what} id {hex_id} does not match its key ({key_id.hex()})")
    return name, key_id, raw[1:]


def parse_skey(skey: str, alg: int, what: str, kind: str) -> tuple[str, str, bytes]:
    """``(name, hex key id, 32-byte seed)`` of a signer key ``PRIVATE+KEY+name+hexkeyid+base64(alg ||
    seed)``; the caller checks the key id against the key the seed makes."""
    parts = skey.strip().split("+", 4)
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise KeyFileError(f"{what} is not PRIVATE+KEY+name+keyid+key")
    name, hex_id, b64 = parts[2:]
    raw = _b64decode(b64, what)
    if len(raw) != 33 or raw[0] != alg:
        raise KeyFileError(f"{what} is not {kind} (0x{alg:02x} || 32 bytes)")
    return name, hex_id, raw[1:]


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise KeyFileError(f"key name {name!r} is empty or holds '+' or white space")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyFileError(f"{what} is not valid base64") from exc


@dataclass(frozen=True)
class NoteVerifier:
    """A named Ed25519 public key: what an examiner pins to check checkpoints."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def from_vkey(cls, vkey: str) -> NoteVerifier:
        """Parse ``name+hexkeyid+base64(0x01 || public key)``."""
        return cls(*parse_vkey(vkey, ALG_ED25519, "verifier key", "an Ed25519 key"))

    @property
    def vkey(self) -> str:
        raw = bytes([ALG_ED25519]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode()}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


@runtime_checkable
class SigningBackend(Protocol):
    """Where an Ed25519 private key is kept and used: a file's key in this process
    (``SoftwareKey``), a PKCS#11 token (``ledger.pkcs11.Pkcs11Key``), anything that signs.

    ``sign`` MUST return the 64-byte Ed25519 signature (RFC 8032, pure Ed25519) of ``message``
    by the key whose raw 32-byte public key is ``public_key``, or raise ``KeyFileError``."""

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte Ed25519 public key."""
        ...

    @property
    def location(self) -> str:
        """Where the private key is (for messages), never the key or a PIN."""
        ...

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of ``message``."""
        ...


class SoftwareKey:
    """An Ed25519 private key held in this process's memory (read from a 0600 key file)."""

    __slots__ = ("_private", "location", "public_key")

    def __init__(self, private: Ed25519PrivateKey, location: str = "memory") -> None:
        self._private = private
        self.location = location
        self.public_key = private.public_key().public_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def seed_unsafe(self) -> bytes:
        """The 32-byte private seed: what a key file holds. Never log or send it."""
        return self._private.private_bytes_raw()


class NoteSigner:
    """A named Ed25519 signing key: a 0600 file's key or one kept in a PKCS#11 token (a
    ``SigningBackend``); never in the database."""

    __slots__ = ("backend", "name", "verifier")

    def __init__(self, name: str, private: Ed25519PrivateKey | SigningBackend) -> None:
        _check_name(name)
        self.name = name
        backend = SoftwareKey(private) if isinstance(private, Ed25519PrivateKey) else private
        public = backend.public_key
        if not isinstance(public, bytes) or len(public) != 32:
            raise KeyFileError(f"the key at {backend.location} is not an Ed25519 key (32-byte public key)")
        self.backend: SigningBackend = backend
        self.verifier = NoteVerifier(name, _key_id(name, public), public)

    @classmethod
    def generate(cls, name: str) -> NoteSigner:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_skey(cls, skey: str) -> NoteSigner:
        """Parse ``PRIVATE+KEY+name+hexkeyid+base64(0x01 || seed)``."""
        name, hex_id, seed = parse_skey(skey, ALG_ED25519, "signer key", "an Ed25519 seed")
        signer = cls(name, Ed25519PrivateKey.from_private_bytes(seed))
        if signer.verifier.key_id.hex() != hex_id:
            raise KeyFileError(f"signer key id {hex_id} does not match its key")
        return signer

    @property
    def extractable(self) -> bool:
        """Whether ``skey`` can give the private key (a software key), or it never leaves its token."""
        return isinstance(self.backend, SoftwareKey)

    @property
    def skey(self) -> str:
        """The C2SP signer-key text of a software key; ``KeyFileError`` for a key that cannot leave
        its token (PKCS#11)."""
        if not isinstance(self.backend, SoftwareKey):
            raise KeyFileError(f"the private key of {self.verifier.vkey} is kept at "
                               f"{self.backend.location} and cannot be extracted (no signer-key text)")
        b64 = base64.b64encode(bytes([ALG_ED25519]) + self.backend.seed_unsafe()).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{b64}"

    def sign(self, message: bytes) -> bytes:
        return self.backend.sign(message)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise NoteError("note text holds a control character")


def sign_note(text: str, signers: list[NoteSigner]) -> str:
    """The signed note: ``text``, a blank line, one signature line per signer."""
    _check_text(text)
    if not signers:
        raise NoteError("a note needs at least one signer")
    message = text.encode()
    lines = [text, "\n"]
    for s in signers:
        blob = s.verifier.key_id + s.sign(message)
        lines.append(f"{_DASH}{s.name} {base64.b64encode(blob).decode()}\n")
    return "".join(lines)


def parse_note(note: str) -> tuple[str, list[Signature]]:
    """Split a signed note into its text and signature lines; checks no signature."""
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    _check_text(text)
    if not block.endswith("\n"):
        raise NoteError("signature block must end with a newline")
    sigs: list[Signature] = []
    for line in block[:-1].split("\n"):
        if not line.startswith(_DASH):
            raise NoteError(f"signature line {line!r} does not start with '\u2014 '")
        fields = line[len(_DASH) :].split(" ")
        if len(fields) != 2 or not fields[0]:
            raise NoteError(f"signature line {line!r} is not '\u2014 name base64'")
        try:
            blob = base64.b64decode(fields[1], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise NoteError(f"signature of {fields[0]!r} is not valid base64") from exc
        if len(blob) < 5:
            raise NoteError(f"signature of {fields[0]!r} is too short")
        sigs.append(Signature(fields[0], blob[:4], blob[4:]))
    if len(sigs) > _MAX_SIGNATURES:
        raise NoteError(f"note has {len(sigs)} signatures, at most {_MAX_SIGNATURES} allowed")
    return text, sigs


def open_note(note: str, verifiers: list[NoteVerifier]) -> tuple[str, list[NoteVerifier]]:
    """Return the text and the verifiers whose signatures hold; raise if none holds.

    Signatures by unknown keys are ignored; a signature by a known key that fails is an error.
    """
    text, sigs = parse_note(note)
    message = text.encode()
    known = {(v.name, v.key_id): v for v in verifiers}
    good: list[NoteVerifier] = []
    for sig in sigs:
        v = known.get((sig.name, sig.key_id))
        if v is None:
            continue
        if not v.verify(message, sig.signature):
            raise NoteError(f"signature by {v.vkey} does not verify")
        if v not in good:
            good.append(v)
    if not good:
        names = ", ".join(f"{s.name}+{s.key_id.hex()}" for s in sigs) or "none"
        raise NoteError(f"no signature by a trusted key (signed by: {names})")
    return text, good
