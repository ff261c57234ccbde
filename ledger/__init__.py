"""sealtrail's append-only Merkle ledger: storage, proofs, checkpoints and verification.

Knows nothing of decisions, rules or models: it seals JSON records and proves it did.
"""

from __future__ import annotations

from ledger.append import CheckpointPolicy, Ledger
from ledger.checkpoint import Checkpoint, SignedCheckpoint
from ledger.errors import (
    ConsistencyError,
    DamageError,
    InclusionError,
    KeyFileError,
    LedgerError,
    LedgerUnavailableError,
    LegalHoldError,
    NoteError,
    RecordError,
    SchemaError,
    VerificationError,
)
from ledger.note import NoteSigner, NoteVerifier
from ledger.records import Receipt, Record
from ledger.verify import VerifyReport, verify_ledger

__all__ = [
    "Checkpoint",
    "CheckpointPolicy",
    "ConsistencyError",
    "DamageError",
    "InclusionError",
    "KeyFileError",
    "Ledger",
    "LedgerError",
    "LedgerUnavailableError",
    "LegalHoldError",
    "NoteError",
    "NoteSigner",
    "NoteVerifier",
    "Receipt",
    "Record",
    "RecordError",
    "SchemaError",
    "SignedCheckpoint",
    "VerificationError",
    "VerifyReport",
    "verify_ledger",
]
