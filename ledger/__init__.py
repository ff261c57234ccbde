"""sealtrail's append-only Merkle ledger: storage, proofs, checkpoints and verification.

Knows nothing of decisions, rules or models: it seals JSON records and proves it did.

The package's face needs no database: errors, records, checkpoints and signed notes. Code that
reads or writes a log imports the module that does it (``from ledger.append import Ledger``,
``ledger.verify``, ``ledger.proofs``, ``ledger.database``), so that importing ``ledger.errors``
or the Merkle and note code (as the offline bundle verifier does) never loads SQLAlchemy.

``ledger.Ledger``, ``ledger.CheckpointPolicy``, ``ledger.verify_ledger`` and ``ledger.VerifyReport``
were on the package's face in 0.1; for one version they still resolve, importing their module on
first use with a ``DeprecationWarning`` (``_DEPRECATED``). They go in the next version.
"""

from __future__ import annotations

import importlib
import warnings

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

# 0.1's names that need the database, by the module that now holds them (see the docstring).
_DEPRECATED = {"Ledger": "ledger.append", "CheckpointPolicy": "ledger.append",
               "verify_ledger": "ledger.verify", "VerifyReport": "ledger.verify"}


def __getattr__(name: str) -> object:  # PEP 562: a deprecation path, not a lazy re-export
    module = _DEPRECATED.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    warnings.warn(f"ledger.{name} moved: import it from {module} (the package face needs no database)",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
