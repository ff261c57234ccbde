"""Signing keys: the Ed25519 private key lives in a key store, never in the database; the
ledger keeps the history of public keys (``ledger_keys``), and a rotation changes both.

Two key stores (``KeyStore``, chosen by ``open_key_store``): a 0600 file holding the C2SP
signer-key text ``PRIVATE+KEY+name+keyid+base64(0x01 || seed)`` (``FileKeyStore``), or a PKCS#11
token named by a ``pkcs11:`` URI (``ledger.pkcs11.Pkcs11KeyStore``), whose keys never leave it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson
from sqlalchemy import Connection, Engine

from ledger import store
from ledger.errors import KeyFileError, LedgerError, RefusedError
from ledger.note import NoteSigner
from ledger.records import Record
from ledger.revocation import REVOCATION_KIND, KeyRevocation, check_reason, revocation_message

if TYPE_CHECKING:
    from ledger.append import Ledger

__all__ = [
    "KEY_FILE_NAME",
    "FileKeyStore",
    "KeyRotation",
    "KeyStore",
    "KeyValidity",
    "Revoked",
    "generate_key_file",
    "key_history",
    "key_revocations",
    "load_signer",
    "open_key_store",
    "read_private",
    "replace_key_file",
    "revoke_key",
    "rotate_key_file",
    "signer_for",
    "write_private",
]

KEY_FILE_NAME = "signing.key"


def write_private(path: Path, text: str, *, exclusive: bool, what: str = "a signing key") -> None:
    """Write ``text`` and a newline to ``path`` with mode 0600, synced; with ``exclusive``, refuse
    (``KeyFileError``) to overwrite an existing file. For every secret sealtrail keeps in a file."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError as exc:
        raise KeyFileError(f"{path} already exists; refusing to overwrite {what}") from exc
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o600)


def generate_key_file(path: Path, name: str) -> NoteSigner:
    """Create a new key named ``name`` at ``path`` (mode 0600); never overwrites."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    signer = NoteSigner.generate(name)
    write_private(path, signer.skey, exclusive=True)
    return signer


def replace_key_file(path: Path, signer: NoteSigner) -> Path:
    """Atomically install ``signer`` at ``path``; the old file moves to ``retired/``."""
    retired_dir = path.parent / "retired"
    retired_dir.mkdir(mode=0o700, exist_ok=True)
    tmp = path.with_suffix(".new")
    write_private(tmp, signer.skey, exclusive=False)
    retired = retired_dir / f"{path.stem}-{load_signer(path).verifier.key_id.hex()}.key"
    os.replace(path, retired)
    os.replace(tmp, path)
    return retired


def read_private(path: Path, what: str, missing: str, encoding: str = "ascii") -> str:
    """The text of the secret file ``path`` (``what``: "signing key", "PIN file", ...), refused
    (``KeyFileError``) when it is missing (``missing``: what to run), not a regular file, or
    readable by group or others."""
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise KeyFileError(f"{what} file {path} does not exist ({missing})") from exc
    except OSError as exc:
        raise KeyFileError(f"{what} file {path} cannot be read: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"{what} {path} is not a regular file")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}; "
            "it must be readable by its owner only (chmod 600)"
        )
    try:
        return path.read_text(encoding=encoding)
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read {what} {path}: {exc}") from exc


def load_signer(path: Path) -> NoteSigner:
    """Load the key at ``path``; refuse a file that group or others may read."""
    text = read_private(path, "signing key", "run 'sealtrail init'")
    try:
        return NoteSigner.from_skey(text)
    except KeyFileError as exc:
        raise KeyFileError(f"{path}: {exc}") from exc


def _pending(path: Path) -> Path:
    """Where a rotation writes the new key before it commits (``signing.key.pending``)."""
    return path.with_suffix(".key.pending")


def signer_for(path: Path, vkey: str) -> NoteSigner:
    """The signer of the ledger's active key ``vkey`` from the key store at ``path``: a running
    process picks a rotation up through this (``Ledger(key_source=...)``).

    The key file, or, while a rotation is between its commit and the file swap, the pending key
    beside it; read as file, pending, file, so a swap happening meanwhile is seen one way or the
    other. ``KeyFileError`` if none holds ``vkey``. ``retired/`` is never read."""
    pending = _pending(path)
    seen: list[str] = []
    for candidate in (path, pending, path):
        try:
            signer = load_signer(candidate)
        except KeyFileError as exc:
            if candidate == pending and not pending.exists():
                continue  # no rotation under way: the usual case
            note = str(exc)
        else:
            if signer.verifier.vkey == vkey:
                return signer
            note = f"{candidate} holds {signer.verifier.vkey}"
        if note not in seen:
            seen.append(note)
    raise KeyFileError(f"no key file holds the ledger's active signing key {vkey} "
                       f"({'; '.join(seen)}); was it rotated with another key file?")


@dataclass(frozen=True)
class KeyValidity:
    """One key of the log's history: it signs alone from tree size ``valid_from_size`` on."""

    vkey: str
    valid_from_size: int


def key_history(engine: Engine) -> list[KeyValidity]:
    """Every signing key the ledger has had, oldest first (the last one is the active key)."""
    store.require_schema(engine)
    with engine.connect() as conn:
        history = [KeyValidity(v, f) for v, f in store.key_history(conn)]
    if not history:
        raise LedgerError("ledger has no keys yet (run 'sealtrail init')")
    return history


@dataclass(frozen=True)
class KeyRotation:
    """A rotation done: the ledger record's seq, both public keys, where the old file went (a key
    file; None for a PKCS#11 key, which stays in its token) and where the new key is."""

    seq: int
    old_vkey: str
    new_vkey: str
    retired_file: Path | None
    new_location: str = ""


def rotate_key_file(ledger: Ledger, path: Path) -> KeyRotation:
    """Rotate ``ledger``'s signing key to a new one and install it at ``path``.

    The new key is written first (``<name>.key.pending``, 0600), then the rotation is committed,
    then the key file is swapped (the old one moves to ``retired/``): a crash in between leaves
    the pending key on disk, never a ledger that expects a key nobody has. ``KeyFileError`` if a
    pending key is already there (an interrupted rotation to look at first)."""
    old = load_signer(path)
    new = NoteSigner.generate(old.name)
    pending = _pending(path)
    if pending.exists():
        raise KeyFileError(f"{pending} exists: an earlier rotation was interrupted; inspect it")
    fd = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(new.skey + "\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        receipt = ledger.rotate_key(new)
    except KeyFileError:
        pending.unlink()  # refused before anything was written (another process rotated first)
        raise
    retired = replace_key_file(path, new)
    pending.unlink()
    return KeyRotation(receipt.seq, old.verifier.vkey, new.verifier.vkey, retired, str(path))


class KeyStore(Protocol):
    """Where a ledger's signing keys are kept: a key file, a PKCS#11 token.

    ``signer`` is the ``Ledger(key_source=...)`` contract: it MUST return the signer whose verifier
    key is ``vkey`` or raise ``KeyFileError``, never another key. No method may write a private key
    anywhere but the store itself."""

    @property
    def location(self) -> str:
        """The store for messages and reports (a path, a URI): never a key or a PIN."""
        ...

    def exists(self) -> bool:
        """Whether the store holds its (first) key: ``sealtrail init`` makes one if not."""
        ...

    def load(self, name: str) -> NoteSigner:
        """The store's key now, as a signer named ``name`` where the store does not record names."""
        ...

    def signer(self, vkey: str) -> NoteSigner:
        """The signer of ``vkey`` (the ledger's active key), or ``KeyFileError``."""
        ...

    def generate(self, name: str) -> NoteSigner:
        """A new first key named ``name`` in the store; never replaces one."""
        ...

    def rotate(self, ledger: Ledger) -> KeyRotation:
        """A new key in the store, its rotation sealed in ``ledger`` (endorsed by the current key)."""
        ...


class FileKeyStore:
    """The signing key in a 0600 file (``KEYS/signing.key``); rotation retires it to ``retired/``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"FileKeyStore({self.location!r})"

    def exists(self) -> bool:
        return self.path.exists()

    def load(self, name: str) -> NoteSigner:
        """The key file's key (the file records its own name; ``name`` is not used)."""
        return load_signer(self.path)

    def signer(self, vkey: str) -> NoteSigner:
        return signer_for(self.path, vkey)

    def generate(self, name: str) -> NoteSigner:
        return generate_key_file(self.path, name)

    def rotate(self, ledger: Ledger) -> KeyRotation:
        return rotate_key_file(ledger, self.path)


def open_key_store(spec: str | Path, *, pin: str | None = None) -> KeyStore:
    """The key store ``spec`` names: a ``pkcs11:`` URI (RFC 7512; ``pin`` or the URI's pin-source
    unlocks it), else the path of a key file. ``KeyFileError`` on a URI that cannot be used."""
    text = str(spec)
    if text.startswith("pkcs11:"):
        from ledger.pkcs11 import Pkcs11KeyStore

        return Pkcs11KeyStore(text, pin)
    if not text:
        raise KeyFileError("empty key store: give a key file path or a pkcs11: URI")
    return FileKeyStore(Path(text))



def _revocations(conn: Connection) -> list[KeyRevocation]:
    size = store.tail(conn)[0]
    found = []
    for seq, kind, rec in store.specials(conn, 0, size):
        if kind == REVOCATION_KIND:
            found.append(KeyRevocation.from_record(orjson.loads(rec)["record"], seq))
    return found


def key_revocations(engine: Engine) -> list[KeyRevocation]:
    """Every ``ledger.key_revocation`` the ledger holds, in seq order (endorsements checked;
    ``ledger verify`` checks that each endorser was the active key when it was sealed)."""
    store.require_schema(engine)
    with engine.connect() as conn:
        return _revocations(conn)


@dataclass(frozen=True)
class Revoked:
    """A revocation sealed: the record, and the sizes of the ledger's own stored checkpoints it
    disowns (signed by the revoked key alone at or after ``from_size``; ``ledger verify`` now
    refuses them: non-empty only when the revocation point precedes the rotation)."""

    revocation: KeyRevocation
    disowned_checkpoints: list[int] = field(default_factory=list)


def revoke_key(ledger: Ledger, keys: KeyStore, revoked_vkey: str, reason: str,
               from_size: int | None = None) -> Revoked:
    """Seal a ``ledger.key_revocation`` of ``revoked_vkey``, endorsed by the active key (from
    ``keys``): checkpoints it signed from tree size ``from_size`` on (default: the size at which it
    was rotated away) are refused by ``ledger verify`` and ``verify_checkpoint_note``.

    ``RefusedError`` for a key not in the history, the active key (rotate it away first), a
    ``from_size`` outside the key's period, or a key already revoked from that size or earlier;
    ``KeyFileError`` if the key store cannot sign with the active key."""
    from ledger.note import NoteVerifier

    reason = check_reason(reason)
    revoked_vkey = NoteVerifier.from_vkey(revoked_vkey).vkey
    active = ledger.active_vkey
    endorser = keys.signer(active)
    with ledger.engine.connect() as conn:
        history = store.key_history(conn)
    point = _revocation_point(history, revoked_vkey, active, from_size)
    rev = KeyRevocation(revoked_vkey, point, reason, active,
                        endorser.sign(revocation_message(revoked_vkey, point, reason)), -1)
    disowned: list[int] = []

    def recheck(conn: Connection) -> None:  # under the sequencer lock: the log as it is now
        head = store.head(conn)[2]
        if head != active:
            raise RefusedError(f"the active key changed to {head} meanwhile; revoke again")
        hist = store.key_history(conn)
        _revocation_point(hist, revoked_vkey, active, point)
        for earlier in _revocations(conn):
            if earlier.revoked_vkey == revoked_vkey and earlier.from_size <= point:
                raise RefusedError(f"{revoked_vkey} is already revoked from size {earlier.from_size} "
                                   f"(seq {earlier.seq})")
        upto = hist[[v for v, _ in hist].index(revoked_vkey) + 1][1]  # where it was rotated away
        p = store.param(conn)
        disowned.extend(int(s) for (s,) in conn.exec_driver_sql(
            f"SELECT size FROM ledger_checkpoints WHERE size >= {p} AND size < {p} ORDER BY size",
            (point, upto)))

    (receipt,) = ledger._commit([Record(REVOCATION_KIND, rev.to_record())], before=recheck,
                                force_checkpoint=True)
    return Revoked(replace(rev, seq=receipt.seq), disowned)


def _revocation_point(history: list[tuple[str, int]], revoked: str, active: str,
                      from_size: int | None) -> int:
    """The revocation point for ``revoked``: ``from_size`` checked against its period in the key
    history, or, if None, the size at which it was rotated away."""
    vkeys = [v for v, _ in history]
    if revoked not in vkeys:
        raise RefusedError(f"{revoked} is not one of the ledger's keys ({', '.join(vkeys)})")
    if revoked == active or revoked == vkeys[-1]:
        raise RefusedError(f"{revoked} is the active signing key: rotate it away first "
                           "('sealtrail keys rotate'), then revoke it")
    i = vkeys.index(revoked)
    start, rotated_away = history[i][1], history[i + 1][1]
    if from_size is None:
        return rotated_away
    if type(from_size) is not int or not start <= from_size <= rotated_away:
        raise RefusedError(f"the revocation point must be a tree size from {start} (where {revoked} "
                           f"started signing) to {rotated_away} (where it was rotated away), not "
                           f"{from_size}")
    return from_size
