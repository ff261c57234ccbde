"""Signing keys: the Ed25519 private key lives in a 0600 file, never in the database; the
ledger keeps the history of public keys (``ledger_keys``), and a rotation changes both.

The file holds the C2SP signer-key text ``PRIVATE+KEY+name+keyid+base64(0x01 || seed)``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from ledger import store
from ledger.errors import KeyFileError, LedgerError
from ledger.note import NoteSigner

if TYPE_CHECKING:
    from ledger.append import Ledger

__all__ = [
    "KEY_FILE_NAME",
    "KeyRotation",
    "KeyValidity",
    "generate_key_file",
    "key_history",
    "load_signer",
    "replace_key_file",
    "rotate_key_file",
    "signer_for",
]

KEY_FILE_NAME = "signing.key"


def _write_private(path: Path, text: str, *, exclusive: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError as exc:
        raise KeyFileError(f"{path} already exists; refusing to overwrite a signing key") from exc
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o600)


def generate_key_file(path: Path, name: str) -> NoteSigner:
    """Create a new key named ``name`` at ``path`` (mode 0600); never overwrites."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    signer = NoteSigner.generate(name)
    _write_private(path, signer.skey, exclusive=True)
    return signer


def replace_key_file(path: Path, signer: NoteSigner) -> Path:
    """Atomically install ``signer`` at ``path``; the old file moves to ``retired/``."""
    retired_dir = path.parent / "retired"
    retired_dir.mkdir(mode=0o700, exist_ok=True)
    tmp = path.with_suffix(".new")
    _write_private(tmp, signer.skey, exclusive=False)
    retired = retired_dir / f"{path.stem}-{load_signer(path).verifier.key_id.hex()}.key"
    os.replace(path, retired)
    os.replace(tmp, path)
    return retired


def load_signer(path: Path) -> NoteSigner:
    """Load the key at ``path``; refuse a file that group or others may read."""
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise KeyFileError(f"signing key file {path} does not exist (run 'sealtrail init')") from exc
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"signing key {path} is not a regular file")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"signing key {path} has mode {stat.S_IMODE(st.st_mode):04o}; "
            "it must be readable by its owner only (chmod 600)"
        )
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read signing key {path}: {exc}") from exc
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
    """A rotation done: the ledger record's seq, both public keys, where the old file went."""

    seq: int
    old_vkey: str
    new_vkey: str
    retired_file: Path


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
    return KeyRotation(receipt.seq, old.verifier.vkey, new.verifier.vkey, retired)
