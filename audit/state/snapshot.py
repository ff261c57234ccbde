"""Feature state (velocity windows and transaction graph) saved at a clean stop, bound to the exact
ledger prefix it covers.

Rebuilding the state applies the state deltas of every decision of the last 30 days
(``audit.state.replay.catch_up``; decisions sealed before the ledger held deltas are replayed from
their messages): fine for thousands, slow for millions. At a clean stop the service writes its state with
the ledger size it covers and the chain hash of the last covered entry; the next start restores
it and replays only what follows. The snapshot is trusted only if the chain hash still matches
(same ledger, same history) and is written only when the state is exactly the replay of that
prefix: every decision sealed since the windows were last rebuilt is one this process made. A
process killed without a clean stop leaves the old snapshot, which no longer matches or is
followed by a longer replay — never a wrong state.

File: one JSON line ``{"schema", "origin", "size", "chain"}`` then the extractor's
``sealtrail.feature-state/1`` bytes (``inference.state_store``: velocity windows, then graph),
replaced atomically. A snapshot of the windows alone (``sealtrail.velocity-snapshot/1`` and ``/2``,
written before the graph was kept) is not used: the state is replayed, and a file of the first
kind, which names accounts in clear, is deleted at once.

No account identifier is written in clear (an erasure order must not leave one behind): the
state is held and saved keyed (``sealtrail.velocity/2`` and the graph over the same identifiers),
every account and counterparty as HMAC-SHA256 under the ledger's state key
(``audit.decide.account_secret.read_state_key``), the key its sealed state deltas are keyed under,
which every decider of the ledger derives alike. A snapshot under another key (one written under
the ``velocity.key`` file that earlier releases kept beside the signing key, or of another
ledger) is discarded, with a log line, and the state rebuilt. ``velocity.key`` is no longer read;
``load_key`` remains for tools that still hold such a file.
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

from audit.decide.account_secret import load_state_key
from audit.decide.record import DECISION_KIND
from audit.state.replay import ReplayReport, catch_up, ledger_size, window_start_seq
from inference.errors import FeatureError
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes, read_features_state, write_atomically
from inference.velocity import KEY_BYTES, VelocityState, key_id
from ledger import store

__all__ = ["KEY_FILE_NAME", "SNAPSHOT_SCHEMA", "Restored", "decisions_between", "key_file", "ledger_size",
           "load_key", "restore", "save"]

log = logging.getLogger(__name__)

SNAPSHOT_SCHEMA = "sealtrail.velocity-snapshot/3"  # windows and graph, keyed: no account in clear
_SCHEMA_CLEAR = "sealtrail.velocity-snapshot/1"  # windows alone, accounts in clear: deleted when found
_SCHEMA_WINDOWS = "sealtrail.velocity-snapshot/2"  # windows alone, keyed: not used (no graph)
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




def decisions_between(engine: Engine, lo: int, hi: int) -> int:
    """How many decision entries sit at seq lo..hi-1."""
    with engine.connect() as conn:
        p = store.param(conn)
        n = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM ledger_entries WHERE kind = {p} AND seq >= {p} AND seq < {p}",
            (DECISION_KIND, lo, hi)).scalar_one()
    return int(n)


def save(path: Path, engine: Engine, origin: str, extractor: FeatureExtractor, covered: int) -> None:
    """Write the extractor's state as the replay of the first ``covered`` entries (the caller
    vouches), its accounts keyed under the ledger's state key (a state held in clear is hashed as
    it is written). ``OSError`` if the state is keyed under another key."""
    key = load_state_key(engine)
    state = extractor.state
    body = features_state_bytes(extractor)
    if state.key_id is None:  # hash every account and counterparty, in the windows and the graph
        keyed, graph = read_features_state(body, key)
        body = features_state_bytes(FeatureExtractor(state=keyed, graph=graph))
    elif state.key_id != key_id(key):
        raise OSError(f"the velocity windows are keyed under {state.key_id}, not under the ledger's "
                      "state key")
    head = {"origin": origin, "size": covered, "chain": _chain(engine, covered), "schema": SNAPSHOT_SCHEMA}
    write_atomically(path, orjson.dumps(head) + b"\n" + body)


def _load(path: Path, engine: Engine, origin: str, key: bytes | None) -> tuple[FeatureExtractor, int] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    line, _, body = data.partition(b"\n")
    try:
        head = orjson.loads(line)
        schema = head.get("schema") if isinstance(head, dict) else None
        if schema in (_SCHEMA_CLEAR, _SCHEMA_WINDOWS):
            _forget_old(path, schema)
            return None
        if schema != SNAPSHOT_SCHEMA or head.get("origin") != origin or not isinstance(head.get("size"), int):
            return None
        size = head["size"]
        if size > ledger_size(engine) or head.get("chain") != _chain(engine, size):
            return None  # another ledger, or history this state does not describe
        state, graph = read_features_state(body, key)
        if graph is None:
            raise FeatureError("the snapshot holds no transaction graph")
    except (orjson.JSONDecodeError, FeatureError) as exc:
        log.warning("velocity snapshot %s not used (the state is replayed from the ledger): %s", path, exc)
        return None  # unreadable, or under another key: rebuild from the ledger rather than trust it
    return FeatureExtractor(state=state, graph=graph), size


def _forget_old(path: Path, schema: str) -> None:
    """A snapshot of the windows alone is not used (it holds no graph); one that names accounts in
    clear is deleted at once rather than left until the next clean stop replaces it."""
    log.warning("velocity snapshot %s holds the windows without the transaction graph (%s): not used, "
                "the state is replayed from the ledger", path, schema)
    if schema == _SCHEMA_CLEAR:
        try:
            path.unlink()
            log.warning("velocity snapshot %s held accounts in clear: deleted", path)
        except OSError as exc:
            log.warning("velocity snapshot %s holds accounts in clear, not deleted: %s", path, exc)


def restore(path: Path | None, engine: Engine, origin: str) -> Restored:
    """The windows as of now, keyed under the ledger's state key: the snapshot at ``path`` (if
    any, and usable) caught up with the entries after it, else the last 30 days caught up from
    nothing (``catch_up``: the sealed state deltas, payloads only for decisions without one)."""
    start = window_start_seq(engine)
    key = load_state_key(engine)
    loaded = _load(path, engine, origin, key) if path is not None else None
    covered = ledger_size(engine)
    if loaded is not None and start <= loaded[1] <= covered:
        extractor, size = loaded
        return Restored(extractor, True, covered, catch_up(engine, extractor, size, covered))
    extractor = FeatureExtractor(state=VelocityState(key))
    return Restored(extractor, False, covered, catch_up(engine, extractor, start, covered))
