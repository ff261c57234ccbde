"""Opening the ledger's database for the layers above: an engine with the ledger's durable
settings, the schema check, a ``Ledger`` with its key file, and a fresh ledger initialised.

Callers above ``ledger`` (the CLI, the server) use these and never ``ledger.store``, whose tables
and statements stay the ledger's own business. Creating the tables is the migrations' job
(``migrations.upgrade``), run before ``initialise``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from ledger import store
from ledger.append import CheckpointPolicy, Ledger
from ledger.keys import generate_key_file, load_signer, signer_for
from ledger.note import NoteSigner

__all__ = ["Initialised", "initialise", "open_engine", "open_ledger", "require_schema"]



def require_schema(engine: Engine) -> None:
    """``SchemaError`` unless the ledger's tables exist at the code's revision."""
    store.require_schema(engine)


def open_engine(url: str, *, create_file: bool = False) -> Engine:
    """An engine for ``url`` with durable settings (SQLite: WAL + ``synchronous=FULL``).

    A SQLite file that does not exist is refused (``SchemaError``) unless ``create_file``."""
    return store.connect(url, create_file=create_file)


def open_ledger(engine: Engine, key_file: Path, policy: CheckpointPolicy | None = None) -> Ledger:
    """The ledger in ``engine``'s database, signing with the key at ``key_file``.

    A rotation done meanwhile by another process (``sealtrail keys rotate``, another replica) is
    picked up from ``key_file`` at the next commit, without a restart (``ledger.keys.signer_for``).
    ``SchemaError`` on an unmigrated database, ``KeyFileError`` on a missing or unsafe key file
    or one that is not the ledger's active key."""
    store.require_schema(engine)
    return Ledger(engine, load_signer(key_file), policy=policy,
                  key_source=lambda vkey: signer_for(key_file, vkey))


@dataclass(frozen=True)
class Initialised:
    """What ``initialise`` found or made."""

    ledger: Ledger
    signer: NoteSigner
    created: bool  # False: the ledger was there already (initialising twice changes nothing)


def initialise(engine: Engine, key_file: Path, origin: str) -> Initialised:
    """Make a migrated, empty database a ledger: the key file (0600, kept if it exists), the
    genesis record and the first checkpoint. On a ledger already there, only open it."""
    signer = load_signer(key_file) if key_file.exists() else generate_key_file(key_file, origin)
    with engine.connect() as conn:
        size, _ = store.tail(conn)
    if size == 0:
        return Initialised(Ledger.create(engine, signer, origin), signer, True)
    return Initialised(Ledger(engine, signer), signer, False)
