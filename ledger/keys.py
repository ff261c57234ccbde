"""Signing-key files: the Ed25519 private key lives in a 0600 file, never in the database.

The file holds the C2SP signer-key text ``PRIVATE+KEY+name+keyid+base64(0x01 || seed)``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.errors import KeyFileError
from ledger.note import NoteSigner

__all__ = ["KEY_FILE_NAME", "generate_key_file", "load_signer", "replace_key_file"]

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
