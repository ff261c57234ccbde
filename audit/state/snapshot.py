"""Velocity windows saved at a clean stop, bound to the exact ledger prefix they cover.

Rebuilding the windows replays every decision of the last seven days (``velocity_replay``):
fine for thousands, too slow for millions. At a clean stop the service writes its state with
the ledger size it covers and the chain hash of the last covered entry; the next start restores
it and replays only what follows. The snapshot is trusted only if the chain hash still matches
(same ledger, same history) and is written only when the state is exactly the replay of that
prefix: every decision sealed since the windows were last rebuilt is one this process made. A
process killed without a clean stop leaves the old snapshot, which no longer matches or is
followed by a longer replay — never a wrong state.

File: one JSON line ``{"schema", "origin", "size", "chain"}`` then the
``VelocityState.snapshot()`` bytes, replaced atomically.

No account identifier is written in clear (an erasure order must not leave one behind): the
windows are saved keyed (``sealtrail.velocity/2``), every account and counterparty as
HMAC-SHA256 under a 32-byte key kept in ``velocity.key`` beside the snapshot (by default the
keys directory, beside the signing key; created 0600 on first use). A snapshot written before
(schema ``sealtrail.velocity-snapshot/1``, accounts in clear) still restores: its accounts are
hashed as it loads and the file is rewritten keyed at once. A snapshot under another key (the
key file lost or replaced) is discarded, with a log line, and the windows replayed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson
from sqlalchemy import Engine

from audit.decide.record import DECISION_KIND
from audit.state.replay import ReplayReport, replay_decisions, window_start_seq
from inference.errors import FeatureError
from inference.features import FeatureExtractor
from inference.state_store import write_atomically
from inference.velocity import KEY_BYTES, VelocityState, key_id
from ledger import store

__all__ = ["KEY_FILE_NAME", "SNAPSHOT_SCHEMA", "Restored", "decisions_between", "key_file", "ledger_size",
           "load_key", "restore", "save"]

log = logging.getLogger(__name__)

SNAPSHOT_SCHEMA = "sealtrail.velocity-snapshot/2"  # the state keyed: no account in clear
_SCHEMA_CLEAR = "sealtrail.velocity-snapshot/1"  # the state with accounts in clear: read, never written
KEY_FILE_NAME = "velocity.key"


def key_file(snapshot: Path) -> Path:
    """Where the key of the snapshot at ``snapshot`` is kept: ``velocity.key`` beside it."""
    return snapshot.with_name(KEY_FILE_NAME)


def load_key(path: Path) -> bytes:
    """The 32-byte key at ``path``, created (0600, atomically: two processes get the same key)
    if there is none yet. ``OSError`` if it cannot be read or made, or is not 32 bytes."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):  # another process made one meanwhile: theirs
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise OSError(f"{path}: a velocity key is {KEY_BYTES} bytes, this file holds {len(key)}")
    return key


@dataclass(frozen=True)
class Restored:
    extractor: FeatureExtractor
    from_snapshot: bool  # False: no usable snapshot, the windows were replayed in full
    covered: int  # ledger size the state is the replay of
    report: ReplayReport


def _chain(engine: Engine, size: int) -> str | None:
    if size == 0:
        return None
    with engine.connect() as conn:
        try:
            return store.chain_at(conn, size - 1).hex()
        except LookupError:
            return None


def ledger_size(engine: Engine) -> int:
    with engine.connect() as conn:
        return store.tail(conn)[0]


def decisions_between(engine: Engine, lo: int, hi: int) -> int:
    """How many decision entries sit at seq lo..hi-1."""
    with engine.connect() as conn:
        p = store.param(conn)
        n = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM ledger_entries WHERE kind = {p} AND seq >= {p} AND seq < {p}",
            (DECISION_KIND, lo, hi)).scalar_one()
    return int(n)


def _write(path: Path, head: dict[str, object], state: VelocityState) -> None:
    write_atomically(path, orjson.dumps({**head, "schema": SNAPSHOT_SCHEMA}) + b"\n" + state.snapshot())


def save(path: Path, engine: Engine, origin: str, state: VelocityState, covered: int) -> None:
    """Write ``state`` as the replay of the first ``covered`` entries (the caller vouches), its
    accounts keyed under the key beside ``path`` (a state held in clear is hashed as it is
    written). ``OSError`` if the key cannot be had, or the state is keyed under another one."""
    key = load_key(key_file(path))
    if state.key_id is None:
        state = VelocityState.restore(state.snapshot(), key)  # hashes every account and counterparty
    elif state.key_id != key_id(key):
        raise OSError(f"the velocity windows are keyed under {state.key_id}, not under {key_file(path)}")
    _write(path, {"origin": origin, "size": covered, "chain": _chain(engine, covered)}, state)


def _load(path: Path, engine: Engine, origin: str, key: bytes | None) -> tuple[VelocityState, int] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    line, _, body = data.partition(b"\n")
    try:
        head = orjson.loads(line)
        if (not isinstance(head, dict) or head.get("schema") not in (SNAPSHOT_SCHEMA, _SCHEMA_CLEAR)
                or head.get("origin") != origin or not isinstance(head.get("size"), int)):
            return None
        size = head["size"]
        if size > ledger_size(engine) or head.get("chain") != _chain(engine, size):
            return None  # another ledger, or history this state does not describe
        state = VelocityState.restore(body, key)
    except (orjson.JSONDecodeError, FeatureError) as exc:
        log.warning("velocity snapshot %s not used (the windows are replayed from the ledger): %s", path, exc)
        return None  # unreadable, or under another key: rebuild from the ledger rather than trust it
    if key is not None and head["schema"] == _SCHEMA_CLEAR:
        try:  # written before snapshots were keyed: no account stays in clear on disk
            _write(path, head, state)
            log.warning("velocity snapshot %s held accounts in clear: rewritten keyed", path)
        except OSError as exc:
            log.warning("velocity snapshot %s holds accounts in clear, not rewritten: %s", path, exc)
    return state, size


def restore(path: Path | None, engine: Engine, origin: str) -> Restored:
    """The windows as of now: the snapshot plus the decisions after it, else a full replay.

    With ``path``, the windows are keyed under the key beside it (made if missing); without,
    they hold accounts in clear (a state ``save`` hashes as it writes)."""
    start = window_start_seq(engine)
    key = None
    if path is not None:
        try:
            key = load_key(key_file(path))
        except OSError as exc:
            log.warning("velocity key unusable (the windows are replayed and held in clear; no snapshot "
                        "will be saved): %s", exc)
    loaded = _load(path, engine, origin, key) if path is not None else None
    if loaded is not None and loaded[1] >= start:
        state, size = loaded
        extractor = FeatureExtractor(state=state)
        covered = ledger_size(engine)
        return Restored(extractor, True, covered, replay_decisions(engine, extractor, size))
    extractor = FeatureExtractor(state=VelocityState(key))
    covered = ledger_size(engine)
    return Restored(extractor, False, covered, replay_decisions(engine, extractor, start))
