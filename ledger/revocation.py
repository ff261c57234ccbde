"""Key revocation: which signed checkpoints a log's key history still vouches for.

A compromised signing key is first rotated away (``ledger.key_rotation``), then revoked by a sealed
``ledger.key_revocation`` record, endorsed by the key active when it is sealed:

    {"endorsement": b64, "endorser_vkey": vkey, "from_size": N, "reason": "...", "revoked_vkey": vkey}

``endorsement`` is the endorser's Ed25519 signature over ``REVOCATION_CONTEXT || revoked_vkey "\\n"
|| decimal N "\\n" || reason "\\n"``. From tree size N on, a checkpoint the revoked key signed is no
evidence: N is normally the size at which the key was rotated away, earlier if it was stolen earlier.

Pure functions over texts: no database, no clock. ``ledger verify`` and the follower/witness both
decide with ``verify_checkpoint_note``; a process holding only a bundle's key history and the
revocation records it was given can call it the same way.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.checkpoint import Checkpoint
from ledger.errors import KeyFileError, NoteError, RefusedError
from ledger.note import NoteVerifier, open_note, parse_note

__all__ = [
    "REVOCATION_CONTEXT",
    "REVOCATION_KIND",
    "KeyPeriod",
    "KeyRevocation",
    "RevokedKeyError",
    "checkpoint_acceptable",
    "revocation_message",
    "verify_checkpoint_note",
]

REVOCATION_KIND = "ledger.key_revocation"
REVOCATION_CONTEXT = b"sealtrail key revocation v1\n"
MAX_REASON = 1000


class RevokedKeyError(NoteError):
    """A checkpoint whose only vouching signature is by a key revoked at its size."""

    def __init__(self, message: str, revocation: KeyRevocation, size: int) -> None:
        super().__init__(message)
        self.revocation = revocation
        self.size = size


class KeyPeriod(Protocol):
    """One key of a log's history (``ledger.keys.KeyValidity`` is one): signs alone from
    ``valid_from_size`` until the next key's."""

    @property
    def vkey(self) -> str: ...

    @property
    def valid_from_size(self) -> int: ...


def revocation_message(revoked_vkey: str, from_size: int, reason: str) -> bytes:
    """The bytes the endorsing key signs."""
    return REVOCATION_CONTEXT + f"{revoked_vkey}\n{from_size}\n{reason}\n".encode()


def check_reason(reason: str) -> str:
    """A revocation reason: one non-empty line of at most ``MAX_REASON`` characters (else
    ``RefusedError``)."""
    if not isinstance(reason, str) or not reason.strip():
        raise RefusedError("a revocation needs a reason (one line of text)")
    if len(reason) > MAX_REASON or any(ord(c) < 0x20 for c in reason):
        raise RefusedError(f"the revocation reason must be one line of at most {MAX_REASON} characters")
    return reason


@dataclass(frozen=True)
class KeyRevocation:
    """One sealed ``ledger.key_revocation`` record (``seq`` is where the log holds it)."""

    revoked_vkey: str
    from_size: int
    reason: str
    endorser_vkey: str
    endorsement: bytes
    seq: int

    @classmethod
    def from_record(cls, body: Mapping[str, Any], seq: int) -> KeyRevocation:
        """Parse a record body (the envelope's ``record``); ``KeyFileError`` naming what is wrong.
        The endorsement is checked too (``verify_endorsement``)."""
        try:
            revoked, endorser = str(body["revoked_vkey"]), str(body["endorser_vkey"])
            from_size, reason = body["from_size"], body["reason"]
            sig = base64.b64decode(str(body["endorsement"]), validate=True)
        except KeyError as exc:
            raise KeyFileError(f"key revocation at seq {seq} has no {exc.args[0]!r}") from exc
        except (binascii.Error, ValueError) as exc:
            raise KeyFileError(f"key revocation at seq {seq}: endorsement is not base64") from exc
        if type(from_size) is not int or from_size < 1:
            raise KeyFileError(f"key revocation at seq {seq}: from_size must be a tree size >= 1")
        try:
            rev = cls(revoked, from_size, check_reason(reason), endorser, sig, seq)
        except RefusedError as exc:
            raise KeyFileError(f"key revocation at seq {seq}: {exc}") from exc
        rev.verify_endorsement()
        return rev

    def to_record(self) -> dict[str, Any]:
        """The record body to seal."""
        return {"revoked_vkey": self.revoked_vkey, "from_size": self.from_size, "reason": self.reason,
                "endorser_vkey": self.endorser_vkey,
                "endorsement": base64.b64encode(self.endorsement).decode()}

    def verify_endorsement(self) -> None:
        """``KeyFileError`` unless the endorser's signature over this revocation holds."""
        endorser = NoteVerifier.from_vkey(self.endorser_vkey)
        NoteVerifier.from_vkey(self.revoked_vkey)
        if endorser.vkey == self.revoked_vkey:
            raise KeyFileError(f"key revocation at seq {self.seq}: a key cannot revoke itself")
        if not endorser.verify(revocation_message(self.revoked_vkey, self.from_size, self.reason),
                               self.endorsement):
            raise KeyFileError(f"key revocation at seq {self.seq}: the endorsement by "
                               f"{self.endorser_vkey} does not verify")


def _active(history: Sequence[KeyPeriod], size: int) -> KeyPeriod:
    chosen: KeyPeriod | None = None
    for period in history:
        if period.valid_from_size <= size:
            chosen = period
    if chosen is None:
        raise NoteError(f"no key of the log's history is valid at size {size}")
    return chosen


def _revoked_at(revocations: Sequence[KeyRevocation], vkey: str, size: int) -> KeyRevocation | None:
    hits = [r for r in revocations if r.revoked_vkey == vkey and r.from_size <= size]
    return min(hits, key=lambda r: r.from_size) if hits else None


def verify_checkpoint_note(note: str, history: Sequence[KeyPeriod], revocations: Sequence[KeyRevocation],
                           *, origin: str | None = None) -> Checkpoint:
    """The checkpoint of ``note`` if the log's key history vouches for it at its size; else raise.

    Acceptable: signed (validly) by the key active at the checkpoint's size in ``history`` (keys
    oldest first, each valid from its ``valid_from_size``), that key not revoked at that size by any
    of ``revocations``, and for ``origin`` if given. ``RevokedKeyError`` when the note's vouching
    signature is by a revoked key (at or after its revocation point, or a retired key signing past
    its rotation); ``NoteError`` for any other failure. Revocations are taken as given: check them
    (``KeyRevocation.from_record`` does) and that they come from the log before calling this."""
    if not history:
        raise NoteError("an empty key history vouches for nothing")
    text, sigs = parse_note(note)
    try:
        claimed = Checkpoint.from_text(text)
    except NoteError as exc:
        raise NoteError(f"not a checkpoint: {exc}") from exc
    size = claimed.size
    active = _active(history, size)
    revoked = _revoked_at(revocations, active.vkey, size)
    if revoked is not None:
        raise RevokedKeyError(
            f"checkpoint at size {size} is vouched for only by {active.vkey}, revoked from size "
            f"{revoked.from_size} (seq {revoked.seq}: {revoked.reason})", revoked, size)
    key = NoteVerifier.from_vkey(active.vkey)
    try:
        open_note(note, [key])
    except NoteError as exc:
        # name a revoked or retired key that signed it: the usual forgery after a theft
        for period in history:
            if period.vkey == active.vkey:
                continue
            other = NoteVerifier.from_vkey(period.vkey)
            if not any(s.name == other.name and s.key_id == other.key_id for s in sigs):
                continue
            try:
                open_note(note, [other])
            except NoteError:
                continue
            rev = _revoked_at(revocations, other.vkey, size)
            if rev is not None:
                raise RevokedKeyError(
                    f"checkpoint at size {size} is signed by {other.vkey}, revoked from size "
                    f"{rev.from_size} (seq {rev.seq}: {rev.reason}), not by {active.vkey}, the "
                    "key at that size", rev, size) from exc
            raise NoteError(f"checkpoint at size {size} is signed by {other.vkey}, which is not the "
                            f"log's key at that size ({active.vkey})") from exc
        raise NoteError(f"checkpoint at size {size} is not signed by {active.vkey}, the log's key at "
                        f"that size: {exc}") from exc
    if origin is not None and claimed.origin != origin:
        raise NoteError(f"checkpoint is for {claimed.origin!r}, not {origin!r}")
    return claimed


def checkpoint_acceptable(note: str, history: Sequence[KeyPeriod],
                          revocations: Sequence[KeyRevocation], *, origin: str | None = None) -> bool:
    """``verify_checkpoint_note`` as a yes/no: whether the key history vouches for ``note``."""
    try:
        verify_checkpoint_note(note, history, revocations, origin=origin)
    except (NoteError, KeyFileError):
        return False
    return True
