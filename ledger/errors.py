"""The ledger's exception tree: every error a caller can see derives from ``LedgerError``.

Errors carry the evidence a person needs (the seq, the sizes, the hashes); the API and CLI
map them to exit codes and HTTP statuses in one place.
"""

from __future__ import annotations

__all__ = [
    "ConsistencyError",
    "DamageError",
    "EntryNotFoundError",
    "InclusionError",
    "KeyFileError",
    "LedgerError",
    "LedgerUnavailableError",
    "LegalHoldError",
    "NotCoveredError",
    "NoteError",
    "RecordError",
    "RefusedError",
    "SchemaError",
    "VerificationError",
]


class LedgerError(Exception):
    """Base class of every error raised by ``ledger``."""


class RecordError(LedgerError):
    """A record handed to the ledger cannot be sealed (not JSON, bad kind, ...)."""


class RefusedError(LedgerError):
    """A request was refused as given (unknown hold, unknown payload, concurrent change)."""


class SchemaError(LedgerError):
    """The database has no ledger tables, or is not migrated to the code's revision."""


class LedgerUnavailableError(LedgerError):
    """The database cannot be reached or refused the commit; nothing was written."""


class EntryNotFoundError(LedgerError):
    """No entry has the seq or trace id asked for."""


class NotCoveredError(LedgerError):
    """The entry is newer than the latest signed checkpoint, and the caller asked not to sign one."""


class KeyFileError(LedgerError):
    """A signing-key file is missing, malformed or readable by others."""


class LegalHoldError(LedgerError):
    """A purge was refused because a legal hold covers the payload."""


class VerificationError(LedgerError):
    """Base class of every "this does not verify" outcome."""


class NoteError(VerificationError):
    """A signed note or checkpoint is malformed or its signature does not verify."""


class InclusionError(VerificationError):
    """An inclusion proof does not lead to the expected root."""


class ConsistencyError(VerificationError):
    """A consistency proof does not connect the two tree heads."""


class DamageError(VerificationError):
    """Stored ledger data does not match what it claims; ``seq`` is the first bad entry."""

    def __init__(self, kind: str, seq: int | None, detail: str) -> None:
        self.kind = kind
        self.seq = seq
        self.detail = detail
        where = f"seq {seq}" if seq is not None else "ledger"
        super().__init__(f"{kind} at {where}: {detail}")

    def __reduce__(self) -> tuple[type[DamageError], tuple[str, int | None, str]]:
        return (type(self), (self.kind, self.seq, self.detail))  # crosses process boundaries
