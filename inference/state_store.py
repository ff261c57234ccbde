"""Feature state on disk: one file, replaced atomically, so a restart resumes the windows and the graph.

``save_features_state`` writes an extractor's state (``sealtrail.feature-state/1``): one JSON line
naming the format and the length of the velocity part, the ``VelocityState.snapshot()`` bytes, then
the transaction graph's ``state_bytes()``. ``load_features_state`` reads it back, and reads a file
of velocity state alone (``save_state``, as written before the graph was kept) with an empty graph.
Files are written to a temporary file in the same directory, flushed to disk and renamed over the
old one, so a crash leaves either the old state or the new one, never half of either.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import orjson

from inference.errors import FeatureError
from inference.features import FeatureExtractor
from inference.graph import GraphError, GraphFeatures
from inference.velocity import VelocityState

__all__ = [
    "FEATURE_STATE_FORMAT",
    "features_state_bytes",
    "load_features_state",
    "load_state",
    "read_features_state",
    "save_features_state",
    "save_state",
    "write_atomically",
]

FEATURE_STATE_FORMAT = "sealtrail.feature-state/1"


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


def _read(path: Path, what: str) -> bytes | None:
    """The file's bytes; None when there is no file yet; ``FeatureError`` naming it if unreadable."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FeatureError(f"cannot read {what} {path}: {exc}") from exc


def load_state(path: Path) -> VelocityState:
    """The state saved at ``path``; a fresh one when there is no file yet."""
    data = _read(path, "velocity state")
    if data is None:
        return VelocityState()
    try:
        return VelocityState.restore(data)
    except FeatureError as exc:
        raise FeatureError(f"{path}: {exc}") from exc


def features_state_bytes(extractor: FeatureExtractor) -> bytes:
    """The extractor's velocity windows and graph as one ``sealtrail.feature-state/1`` document."""
    velocity = extractor.state.snapshot()
    head = orjson.dumps({"format": FEATURE_STATE_FORMAT, "velocity": len(velocity)})
    return head + b"\n" + velocity + extractor.graph.state_bytes()


def read_features_state(data: bytes, key: bytes | None = None, *,
                        as_held: bool = False) -> tuple[VelocityState, GraphFeatures | None]:
    """The velocity state and graph of ``features_state_bytes`` output (``FeatureError`` naming what is
    wrong); bytes of velocity state alone give it and None. With ``key``, both hold accounts keyed
    under it, the accounts of a state saved in clear hashed as they load (``VelocityState.restore``).
    With ``as_held``, a keyed state loads without its key, its identifiers as they are."""
    line, nl, rest = data.partition(b"\n")
    head = None
    if nl and line.startswith(b'{"format":'):
        try:
            head = orjson.loads(line)
        except orjson.JSONDecodeError:
            head = None
    if not isinstance(head, dict) or head.get("format") != FEATURE_STATE_FORMAT:
        return VelocityState.restore(data, key, as_held=as_held), None
    size = head.get("velocity")
    if type(size) is not int or not 0 < size <= len(rest):
        raise FeatureError("feature state: the velocity part's length is missing or wrong")
    velocity = rest[:size]
    state = VelocityState.restore(velocity, key, as_held=as_held)
    clear = velocity.startswith(b'{"format":"sealtrail.velocity/1"')  # accounts in clear: key them too
    rename = state.account_id if key is not None and clear else None
    try:
        graph = GraphFeatures.restore(rest[size:], rename=rename)
    except GraphError as exc:
        raise FeatureError(f"feature state: {exc}") from None
    return state, graph


def save_features_state(path: Path, extractor: FeatureExtractor) -> int:
    """Write the extractor's windows and graph to ``path`` atomically; returns the bytes written."""
    data = features_state_bytes(extractor)
    write_atomically(path, data)
    return len(data)


def load_features_state(path: Path) -> FeatureExtractor:
    """An extractor resuming the state saved at ``path``: a fresh one when there is no file yet,
    an empty graph beside the windows of a velocity-only file."""
    data = _read(path, "feature state")
    if data is None:
        return FeatureExtractor()
    try:
        state, graph = read_features_state(data)
    except FeatureError as exc:
        raise FeatureError(f"{path}: {exc}") from exc
    return FeatureExtractor(state=state, graph=graph)
