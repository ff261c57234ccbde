"""Velocity state on disk: one file, replaced atomically, so a restart resumes the windows.

The file holds ``VelocityState.snapshot()`` bytes. It is written to a temporary file in the
same directory, flushed to disk and renamed over the old one, so a crash leaves either the
old state or the new one, never half of either.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from inference.errors import FeatureError
from inference.velocity import VelocityState

__all__ = ["load_state", "save_state", "write_atomically"]


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: a temporary file in the same directory, fsync, rename,
    fsync of the directory. A crash leaves the old file or the new one, never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_state(path: Path, state: VelocityState) -> int:
    """Write ``state`` to ``path`` atomically; returns the bytes written."""
    data = state.snapshot()
    write_atomically(path, data)
    return len(data)


def load_state(path: Path) -> VelocityState:
    """The state saved at ``path``; a fresh one when there is no file yet."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return VelocityState()
    except OSError as exc:
        raise FeatureError(f"cannot read velocity state {path}: {exc}") from exc
    try:
        return VelocityState.restore(data)
    except FeatureError as exc:
        raise FeatureError(f"{path}: {exc}") from exc
