"""Opening the ledger's database for the layers above: an engine with the ledger's durable
settings, the schema check, a ``Ledger`` with its key store (a key file, a PKCS#11 token), and a
fresh ledger initialised.

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
from ledger.keys import FileKeyStore, KeyStore, key_history, load_signer, signer_for
from ledger.note import NoteSigner

__all__ = ["Initialised", "active_signer", "initialise", "open_engine", "open_ledger", "require_schema"]


def require_schema(engine: Engine) -> None:
    """``SchemaError`` unless the ledger's tables exist at the code's revision."""
    store.require_schema(engine)


def open_engine(url: str, *, create_file: bool = False) -> Engine:
    """An engine for ``url`` with durable settings (SQLite: WAL + ``synchronous=FULL``).

    A SQLite file that does not exist is refused (``SchemaError``) unless ``create_file``."""
    return store.connect(url, create_file=create_file)


def open_ledger(engine: Engine, key_file: Path | KeyStore,
                policy: CheckpointPolicy | None = None) -> Ledger:
    """The ledger in ``engine``'s database, signing with the key at ``key_file`` (a key file's path)
    or in a key store (``ledger.keys.open_key_store``: a PKCS#11 token).

    A rotation done meanwhile by another process (``sealtrail keys rotate``, another replica) is
    picked up from the key store at the next commit, without a restart (``KeyStore.signer``).
    ``SchemaError`` on an unmigrated database, ``KeyFileError`` on a missing or unsafe key file,
    a token that cannot be opened, or a key that is not the ledger's active key."""
    store.require_schema(engine)
    if isinstance(key_file, Path):
        path = key_file
        return Ledger(engine, load_signer(path), policy=policy,
                      key_source=lambda vkey: signer_for(path, vkey))
    keys = key_file
    if isinstance(keys, FileKeyStore):
        return open_ledger(engine, keys.path, policy)
    return Ledger(engine, keys.signer(key_history(engine)[-1].vkey), policy=policy, key_source=keys.signer)


def active_signer(ledger: Ledger, keys: Path | KeyStore) -> NoteSigner:
    """The signer of ``ledger``'s active key from the key store (what signs an export bundle)."""
    if isinstance(keys, Path):
        return load_signer(keys)  # as before: the key file, whatever the ledger says
    return keys.signer(ledger.active_vkey)


@dataclass(frozen=True)
class Initialised:
    """What ``initialise`` found or made."""

    ledger: Ledger
    signer: NoteSigner
    created: bool  # False: the ledger was there already (initialising twice changes nothing)


def initialise(engine: Engine, key_file: Path | KeyStore, origin: str) -> Initialised:
    """Make a migrated, empty database a ledger: the key (a 0600 file, or a key pair generated in
    a PKCS#11 token; kept if it exists), the genesis record and the first checkpoint. On a ledger
    already there, only open it."""
    keys = FileKeyStore(key_file) if isinstance(key_file, Path) else key_file
    with engine.connect() as conn:
        size, _ = store.tail(conn)
    if size == 0 or isinstance(keys, FileKeyStore):
        signer = keys.load(origin) if keys.exists() else keys.generate(origin)
        if size == 0:
            return Initialised(Ledger.create(engine, signer, origin), signer, True)
        return Initialised(Ledger(engine, signer), signer, False)
    active = key_history(engine)[-1].vkey
    signer = keys.signer(active)
    return Initialised(Ledger(engine, signer, key_source=keys.signer), signer, False)
