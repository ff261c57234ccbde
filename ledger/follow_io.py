"""What ``ledger.follow`` reads and keeps: the primary's checkpoints (from its database or its HTTP
API), the records replicated to the standby, and the follower's state directory.

The standby is only read. The state directory is the follower's own: ``state.json`` (replaced
atomically: written beside, fsync-ed, renamed, the directory fsync-ed), ``evidence/`` (the notes
behind each alarm), and ``lock`` (one follower per directory).
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from ledger import store
from ledger.append import check_handover
from ledger.errors import ConsistencyError, KeyFileError, LedgerError, VerificationError
from ledger.follow import Alarm, FollowState, SourceUnavailableError, StateError, UntrustedKeysError
from ledger.keys import key_revocations
from ledger.note import NoteVerifier
from ledger.proofs import consistency_proof, prove_consistency
from ledger.revocation import KeyRevocation

if TYPE_CHECKING:
    import httpx

__all__ = ["CHUNK", "DbPrimary", "DbReplica", "HttpPrimary", "StateDir"]

CHUNK = 65_536  # leaf hashes read per query: 2 MiB, however long the log


def _unavailable(what: str, exc: DBAPIError) -> SourceUnavailableError:
    return SourceUnavailableError(f"{what}: {' '.join(str(exc.orig).split())}")


class DbPrimary:
    """The primary's checkpoints read straight from its database (``ledger_checkpoints``)."""

    def __init__(self, engine: Engine) -> None:
        store.require_schema(engine)
        self.engine = engine

    def latest(self) -> str:
        try:
            with self.engine.connect() as conn:
                note = conn.exec_driver_sql(
                    "SELECT note FROM ledger_checkpoints ORDER BY size DESC LIMIT 1").scalar()
        except DBAPIError as exc:
            raise _unavailable("the primary's database", exc) from exc
        if note is None:
            raise SourceUnavailableError("the primary's database holds no checkpoint yet")
        return str(note)

    def size(self) -> int | None:
        try:
            with self.engine.connect() as conn:
                return store.tail(conn)[0]
        except DBAPIError as exc:
            raise _unavailable("the primary's database", exc) from exc

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        try:
            return prove_consistency(self.engine, old, new).hashes
        except DBAPIError as exc:
            raise _unavailable("the primary's database", exc) from exc
        except VerificationError:
            raise  # the primary's own store does not make its roots: evidence of a fork
        except LedgerError as exc:
            raise SourceUnavailableError(f"the primary refuses the proof: {exc}") from exc


class HttpPrimary:
    """The primary's checkpoints from its HTTP API (``GET /v1/ledger/checkpoint`` and
    ``/v1/ledger/consistency``), through ``client`` (mutual TLS, a role allowed both)."""

    def __init__(self, client: httpx.Client, base_url: str) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")

    def _get(self, path: str, params: dict[str, int] | None = None) -> httpx.Response:
        import httpx

        url = f"{self.base_url}{path}"
        try:
            r = self.client.get(url, params=params)
        except httpx.HTTPError as exc:
            raise SourceUnavailableError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
        if r.status_code != 200:
            detail = " ".join(r.text[:300].split())
            raise SourceUnavailableError(f"GET {url} answered {r.status_code}: {detail}")
        return r

    def latest(self) -> str:
        return self._get("/v1/ledger/checkpoint").text

    def size(self) -> int | None:
        return None  # the API tells the size only through its checkpoints

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        r = self._get("/v1/ledger/consistency", {"old": old, "new": new})
        try:
            doc = r.json()
            items = doc["hashes"]
            if not isinstance(items, list) or not all(isinstance(h, str) for h in items):
                raise TypeError("hashes is not a list of strings")
            return [base64.b64decode(h, validate=True) for h in items]
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ConsistencyError(f"the primary's consistency proof is malformed: {exc}") from exc


class DbReplica:
    """The standby's replicated records, read only (a PostgreSQL hot standby, or any copy)."""

    def __init__(self, engine: Engine) -> None:
        store.require_schema(engine)
        self.engine = engine
        self._origin: str | None = None

    def size(self) -> int:
        try:
            with self.engine.connect() as conn:
                return store.tail(conn)[0]
        except DBAPIError as exc:
            raise _unavailable("the standby's database", exc) from exc

    def origin(self) -> str:
        if self._origin is None:
            try:
                with self.engine.connect() as conn:
                    rec = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE seq = 0").scalar()
            except DBAPIError as exc:
                raise _unavailable("the standby's database", exc) from exc
            if rec is None:
                raise SourceUnavailableError("the standby holds no genesis record yet")
            try:
                self._origin = str(orjson.loads(bytes(rec))["record"]["origin"])
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise StateError(f"the standby's genesis record is malformed: {exc!r}") from exc
        return self._origin

    def keys(self, pinned: Sequence[NoteVerifier]) -> list[tuple[int, NoteVerifier]]:
        """Keys from the first pinned one on, each endorsed by the one before (``check_handover``,
        the check a signer makes before it adopts a key rotated elsewhere)."""
        try:
            with self.engine.connect() as conn:
                history = store.key_history(conn)
                vkeys = [v for v, _ in history]
                start = next((i for i, v in enumerate(vkeys) if v in {p.vkey for p in pinned}), None)
                if start is None:
                    raise UntrustedKeysError(f"none of the log's keys {vkeys} is a pinned key "
                                             f"({', '.join(p.vkey for p in pinned)})")
                check_handover(conn, vkeys[start], vkeys[-1])
        except KeyFileError as exc:
            raise UntrustedKeysError(str(exc)) from exc
        except DBAPIError as exc:
            raise _unavailable("the standby's database", exc) from exc
        return [(f, NoteVerifier.from_vkey(v)) for v, f in history[start:]]

    def revocations(self) -> list[KeyRevocation]:
        """Every sealed ``ledger.key_revocation`` replicated so far, endorsements checked."""
        try:
            return key_revocations(self.engine)
        except KeyFileError as exc:
            raise UntrustedKeysError(f"a key revocation on the standby is malformed: {exc}") from exc
        except DBAPIError as exc:
            raise _unavailable("the standby's database", exc) from exc

    def leaf_hashes(self, begin: int, end: int) -> Iterator[Sequence[bytes]]:
        p = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        try:
            with self.engine.connect() as conn:
                for lo in range(begin, end, CHUNK):
                    hi = min(lo + CHUNK, end)
                    rows = conn.exec_driver_sql(
                        f"SELECT leaf_hash FROM ledger_entries WHERE seq >= {p} AND seq < {p} ORDER BY seq",
                        (lo, hi)).fetchall()
                    if len(rows) != hi - lo:
                        raise SourceUnavailableError(
                            f"the standby holds {len(rows)} of the entries {lo}..{hi - 1} (a gap)")
                    yield [bytes(h) for (h,) in rows]
        except DBAPIError as exc:
            raise _unavailable("the standby's database", exc) from exc

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        try:
            with self.engine.connect() as conn:
                return consistency_proof(conn, old, new)
        except DBAPIError as exc:
            raise _unavailable("the standby's database", exc) from exc
        except LedgerError as exc:
            raise SourceUnavailableError(f"the standby cannot prove {old} -> {new}: {exc}") from exc


class StateDir:
    """The follower's own directory: the state file, the evidence of alarms, and its lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = path / "state.json"
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Hold the directory for this process (until ``close``); ``StateError`` if another does."""
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StateError(f"cannot use the state directory {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise StateError(f"another follower holds the state directory {self.path}") from exc
        self._lock_fd = fd

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> StateDir:
        self.lock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load(self) -> FollowState | None:
        """The state kept, or None if this directory has none yet; ``StateError`` if it is corrupt."""
        try:
            raw = self.file.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {self.file}: {exc.strerror}") from exc
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise StateError(f"{self.file} is not JSON ({exc}); move it aside to start afresh, "
                             "or restore it from a backup") from exc
        try:
            return FollowState.from_json(doc)
        except StateError as exc:
            raise StateError(f"{self.file}: {exc}; move it aside to start afresh, or restore it "
                             "from a backup") from exc

    def save(self, state: FollowState) -> None:
        """Replace the state file atomically and durably."""
        tmp = self.file.with_suffix(".json.new")
        data = json.dumps(state.to_json(), indent=1).encode() + b"\n"
        _write_durably(tmp, data)
        os.replace(tmp, self.file)
        _fsync_dir(self.path)

    def keep_evidence(self, alarm: Alarm, now: float) -> Path | None:
        """Write the offending note, the last accepted note and the alarm under
        ``evidence/<kind>-<size>-<note hash>/`` (once per note and kind); the directory, or None
        for an alarm with no offending note (a stall)."""
        if alarm.offered_note is None:
            return None  # a stall: nothing was offered
        key = hashlib.sha256(alarm.offered_note.encode()).hexdigest()[:16]
        size = alarm.offered.size if alarm.offered is not None else "malformed"
        where = self.path / "evidence" / f"{alarm.kind}-{size}-{key}"
        if where.exists():
            return where
        tmp = where.with_name(where.name + ".new")
        tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
        if alarm.offered_note is not None:
            _write_durably(tmp / "offered.note", alarm.offered_note.encode())
        if alarm.accepted_note is not None:
            _write_durably(tmp / "accepted.note", alarm.accepted_note.encode())
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        doc: dict[str, Any] = {"first_seen": stamp, **alarm.to_json()}
        _write_durably(tmp / "alarm.json", json.dumps(doc, indent=1).encode() + b"\n")
        os.replace(tmp, where)
        _fsync_dir(where.parent)
        return where


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
