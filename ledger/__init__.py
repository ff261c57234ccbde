"""sealtrail's append-only Merkle ledger: storage, proofs, checkpoints and verification.

Knows nothing of decisions, rules or models: it seals JSON records and proves it did.

The package's face needs no database: errors, records, checkpoints and signed notes. Code that
reads or writes a log imports the module that does it (``from ledger.append import Ledger``,
``ledger.verify``, ``ledger.proofs``, ``ledger.database``), so that importing ``ledger.errors``
or the Merkle and note code (as the offline bundle verifier does) never loads SQLAlchemy.
"""

from __future__ import annotations

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

__all__ = [
    "Checkpoint",
    "ConsistencyError",
    "DamageError",
    "InclusionError",
    "KeyFileError",
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
]
