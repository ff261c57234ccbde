"""Feature state (velocity windows and transaction graph) saved to a file, sealed in the ledger
by its Merkle root, so that a restart applies only the entries after it.

Rebuilding the state applies the state deltas of every decision of the last 30 days
(``audit.state.replay.catch_up``; decisions sealed before the ledger held deltas are replayed from
their messages): fine for thousands, slow for millions. So the runtime saves its state now and
then (every ``state_snapshot_every`` decisions and at a clean stop, ``audit.decide.runtime``):
it seals a ``state.snapshot`` record (``audit.state.sealed``: the root of the per-account tree of
``audit.state.tree``, the seq it covers, where the state was caught up from) and then writes the
state to this file. ``restore`` trusts the file only if the root it recomputes from it is the
root of a sealed snapshot of the same seq, state key and origin of the state; it then applies the
entries after that seq. A process killed between the seal and the write leaves the older file,
followed by a longer catch-up; never a wrong state.

File: one JSON line ``{"schema", "origin", "size", "chain", "from_seq", "root", "sealed_seq"}``
(``size``: the ledger size the state covers, ``covers_seq + 1``; ``chain``: the chain hash of its
last entry; ``sealed_seq``: where its ``state.snapshot`` sits) then the extractor's
``sealtrail.feature-state/1`` bytes (``inference.state_store``: velocity windows, then graph),
replaced atomically. Files of earlier versions are not used: the state is replayed and the next
save writes the current version. ``sealtrail.velocity-snapshot/3`` (trusted by chain hash alone,
nothing sealed) and ``/2`` (windows alone) are left to be replaced; ``/1``, which names accounts
in clear, is deleted at once.

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
from audit.errors import StateSnapshotError
from audit.state.replay import ReplayReport, catch_up, ledger_size, window_start_seq
from audit.state.sealed import SealedSnapshot, find_sealed, seal_snapshot
from audit.state.tree import StateTree, state_tree
from inference.errors import FeatureError
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes, read_features_state, write_atomically
from inference.velocity import KEY_BYTES, VelocityState, key_id
from ledger import store
from ledger.append import Ledger

__all__ = ["KEY_FILE_NAME", "SNAPSHOT_SCHEMA", "Restored", "chain_at_size", "decisions_between", "key_file",
           "keyed_state_bytes", "ledger_size", "load_key", "restore", "save", "seal", "write"]

log = logging.getLogger(__name__)

SNAPSHOT_SCHEMA = "sealtrail.velocity-snapshot/4"  # windows and graph, keyed, its root sealed
_SCHEMA_CHAINED = "sealtrail.velocity-snapshot/3"  # trusted by chain hash alone: not used, replaced
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
    from_seq: int = 0  # the state is an empty one caught up from this seq (a sealed snapshot's says)
    sealed: SealedSnapshot | None = None  # the sealed snapshot the file was checked against

    @property
    def origin(self) -> int | None:
        """``from_seq`` where the state is the sealed deltas from there alone (what a state delta
        seals as ``state_from``); None where the catch-up also replayed decisions from their
        payloads (sealed without a delta, or under another state key) or missed a purged one:
        then no holder of the deltas alone computes the same state, and the deltas say so."""
        r = self.report
        return self.from_seq if r.replayed == r.from_deltas and not r.missing_payload \
            and not r.foreign_deltas else None


def chain_at_size(engine: Engine, size: int) -> str | None:
    """The chain hash (hex) of the ledger's first ``size`` entries: what a state file names the
    history it describes by (None for none, or where the entry is not there)."""
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


def keyed_state_bytes(engine: Engine, extractor: FeatureExtractor) -> bytes:
    """The extractor's ``sealtrail.feature-state/1`` bytes, its accounts keyed under the ledger's
    state key (a state held in clear is hashed as it is written). ``OSError`` if the state is
    keyed under another key."""
    key = load_state_key(engine)
    state = extractor.state
    body = features_state_bytes(extractor)
    if state.key_id is None:  # hash every account and counterparty, in the windows and the graph
        keyed, graph = read_features_state(body, key)
        body = features_state_bytes(FeatureExtractor(state=keyed, graph=graph))
    elif state.key_id != key_id(key):
        raise OSError(f"the velocity windows are keyed under {state.key_id}, not under the ledger's "
                      "state key")
    return body


def seal(ledger: Ledger, data: bytes, covered: int, from_seq: int, decider: str) -> SealedSnapshot:
    """Seal the state ``data`` (``keyed_state_bytes``) as the state after the first ``covered``
    entries, caught up from ``from_seq`` (the caller vouches for both); the sealed record.
    ``StateSnapshotError`` if the state is not keyed under the ledger's state key."""
    kid = key_id(load_state_key(ledger.engine))
    return seal_snapshot(ledger, state_tree(data, kid), covered - 1, from_seq, decider)


def write(path: Path, engine: Engine, origin: str, data: bytes, sealed: SealedSnapshot) -> None:
    """Replace the file at ``path`` with the state ``data`` that ``sealed`` seals."""
    size = sealed.covers_seq + 1
    head = {"origin": origin, "size": size, "chain": chain_at_size(engine, size), "from_seq": sealed.from_seq,
            "root": sealed.root.hex(), "sealed_seq": sealed.seq, "schema": SNAPSHOT_SCHEMA}
    write_atomically(path, orjson.dumps(head) + b"\n" + data)


def save(path: Path, ledger: Ledger, extractor: FeatureExtractor, covered: int, from_seq: int,
         decider: str) -> SealedSnapshot:
    """Seal the extractor's state as the state after the first ``covered`` entries, caught up from
    ``from_seq`` (the caller vouches), then write it to ``path``; the sealed record. ``OSError``
    (the file, or a state under another key), ``StateSnapshotError``, or the ledger's errors."""
    data = keyed_state_bytes(ledger.engine, extractor)
    sealed = seal(ledger, data, covered, from_seq, decider)
    write(path, ledger.engine, ledger.origin, data, sealed)
    return sealed


def _load(path: Path, engine: Engine, origin: str,
          key: bytes) -> tuple[FeatureExtractor, int, SealedSnapshot] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, no permission: the file cannot be used, the ledger still can
        log.warning("velocity snapshot %s not used (the state is replayed from the ledger): %s", path, exc)
        return None
    line, _, body = data.partition(b"\n")
    try:
        head = orjson.loads(line)
        schema = head.get("schema") if isinstance(head, dict) else None
        if schema in (_SCHEMA_CLEAR, _SCHEMA_WINDOWS, _SCHEMA_CHAINED):
            _forget_old(path, schema)
            return None
        if schema != SNAPSHOT_SCHEMA or head.get("origin") != origin or not isinstance(head.get("size"), int):
            return None
        size, from_seq, hint = head["size"], head.get("from_seq"), head.get("sealed_seq")
        if size < 1 or size > ledger_size(engine) or head.get("chain") != chain_at_size(engine, size):
            return None  # another ledger, or history this state does not describe
        if type(from_seq) is not int or not (hint is None or type(hint) is int):
            raise StateSnapshotError("the file's head names no from_seq")
        state, graph = read_features_state(body, key)
        if graph is None:
            raise FeatureError("the snapshot holds no transaction graph")
        tree = state_tree(body, key_id(key))
        if hint is not None and hint >= ledger_size(engine):  # where to look first; past the ledger, nowhere
            hint = None
        sealed = _sealed_for(engine, tree, size - 1, from_seq, hint)
    except (orjson.JSONDecodeError, FeatureError, StateSnapshotError) as exc:
        log.warning("velocity snapshot %s not used (the state is replayed from the ledger): %s", path, exc)
        return None  # unreadable, under another key, or not the state sealed: rebuild rather than trust it
    return FeatureExtractor(state=state, graph=graph), size, sealed


def _sealed_for(engine: Engine, tree: StateTree, covers_seq: int, from_seq: int,
                hint: int | None) -> SealedSnapshot:
    """The sealed snapshot ``tree`` is, else ``StateSnapshotError`` saying why not."""
    sealed = find_sealed(engine, covers_seq, tree.root, hint)
    if sealed is None:
        raise StateSnapshotError(f"no sealed state.snapshot of seq {covers_seq} has its root "
                                 f"{tree.root.hex()[:16]}...: the file is not the state the ledger vouches "
                                 "for")
    diff = sealed.matches(tree, from_seq)
    if diff is not None:
        raise StateSnapshotError(f"the state.snapshot sealed at seq {sealed.seq} differs: {diff}")
    return sealed


def _forget_old(path: Path, schema: str) -> None:
    """A snapshot of an earlier version is not used (the windows alone, or nothing sealed); one that
    names accounts in clear is deleted at once rather than left until the next save replaces it."""
    why = "nothing of it is sealed" if schema == _SCHEMA_CHAINED else "it holds the windows without the graph"
    log.warning("velocity snapshot %s is a %s file (%s): not used, the state is replayed from the ledger",
                path, schema, why)
    if schema == _SCHEMA_CLEAR:
        try:
            path.unlink()
            log.warning("velocity snapshot %s held accounts in clear: deleted", path)
        except OSError as exc:
            log.warning("velocity snapshot %s holds accounts in clear, not deleted: %s", path, exc)


def restore(path: Path | None, engine: Engine, origin: str) -> Restored:
    """The feature state as of now, keyed under the ledger's state key: the snapshot at ``path``
    caught up with the entries after it, else the last 30 days caught up from nothing
    (``catch_up``: the sealed state deltas, payloads only for decisions without one).

    The file is used only when the root of the state it holds (``audit.state.tree``) is the root
    of a ``state.snapshot`` sealed for the same seq, state key, settings and starting seq. A
    mismatch means the file is not the state the ledger vouches for: altered or damaged on disk,
    written by a process whose seal never committed, or a state that had drifted from the sealed
    deltas. It is never trusted: a warning is logged and the state rebuilt from the ledger."""
    start = window_start_seq(engine)
    key = load_state_key(engine)
    loaded = _load(path, engine, origin, key) if path is not None else None
    covered = ledger_size(engine)
    if loaded is not None and start <= loaded[1] <= covered:
        extractor, size, sealed = loaded
        return Restored(extractor, True, covered, catch_up(engine, extractor, size, covered), sealed.from_seq,
                        sealed)
    extractor = FeatureExtractor(state=VelocityState(key))
    return Restored(extractor, False, covered, catch_up(engine, extractor, start, covered), start)
