"""The sequencer: ``Ledger.append_many`` seals a batch in one durable transaction.

One writer per log at a time (SQLite ``BEGIN IMMEDIATE``; PostgreSQL transaction-scoped
advisory lock), so threads and processes appending together never fork the chain, leave a
gap or reuse a seq. The caller gets receipts only after the commit returned.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import NamedTuple

import orjson
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from ledger import store
from ledger.checkpoint import Checkpoint, SignedCheckpoint
from ledger.errors import (
    DamageError,
    KeyFileError,
    LedgerError,
    LedgerUnavailableError,
    RecordError,
)
from ledger.fencing import Fence
from ledger.merkle import CompactRange, perfect_subtrees
from ledger.note import NoteSigner, NoteVerifier
from ledger.records import Receipt, Record, format_time, now_utc, seal, seal_many

__all__ = ["ROTATION_CONTEXT", "CheckpointPolicy", "KeySource", "Ledger", "LedgerStatus", "Tail",
           "check_handover"]

log = logging.getLogger(__name__)

ZERO_CHAIN = bytes(32)
ROTATION_CONTEXT = b"sealtrail key rotation v1\n"
Effect = Callable[[Connection, list[Receipt]], None]
Tail = Callable[[Connection, int], Record | Sequence[Record]]
"""Given the sequencer's connection and the seq the first of them will get, the record (or records,
in order) to seal last."""
Build = Callable[[Connection, int], Sequence[Record]]
"""Given the sequencer's connection and the seq the first will get, the records to seal (made under
the lock: nothing else commits meanwhile)."""
KeySource = Callable[[str], NoteSigner]
"""Given the vkey the ledger now signs with, its signer from the key store, or ``KeyFileError``."""


@dataclass(frozen=True)
class CheckpointPolicy:
    """Sign a checkpoint when ``every_entries`` are unsealed or ``every_seconds`` have passed."""

    every_entries: int = 1000
    every_seconds: float = 60.0


class LedgerStatus(NamedTuple):
    """The log at one moment: its size and its newest checkpoint (size, when it was signed)."""

    size: int
    checkpoint_size: int
    checkpoint_at_us: int | None  # µs since the epoch; None before any checkpoint


def _us(t: datetime) -> int:
    return int(t.timestamp()) * 1_000_000 + t.microsecond


class Ledger:
    """An append-only Merkle log in one database schema, signed with one active key."""

    def __init__(
        self,
        engine: Engine,
        signer: NoteSigner | None,
        *,
        policy: CheckpointPolicy | None = None,
        clock: Callable[[], datetime] = now_utc,
        key_source: KeySource | None = None,
    ) -> None:
        """``key_source``, if given, is where a rotation done by another process (or replica) is
        picked up: when the ledger's active key is no longer ``signer``'s, the new signer is taken
        from it, once the rotation records chain the new key to this one (see ``_adopt``)."""
        store.require_schema(engine)
        self.engine = engine
        self.policy = policy or CheckpointPolicy()
        self.clock = clock
        self._signer = signer
        self._key_source = key_source
        self._key_problem: KeyFileError | None = None  # the last signing-key failure, until one works
        self._lock = threading.Lock()
        self._cache: tuple[int, bytes, list[bytes]] | None = None
        self.held_s = 0.0  # wall seconds this process held the sequencer lock (commits, builds), in all
        self.commits = 0  # commits this process made
        with self._read() as conn:
            genesis = conn.exec_driver_sql(
                "SELECT record FROM ledger_entries WHERE seq = 0"
            ).scalar()
            key_row = conn.exec_driver_sql(
                "SELECT vkey FROM ledger_keys ORDER BY valid_from_size DESC LIMIT 1"
            ).scalar()
            # after a failover, writers of the old primary must not append (ledger.fencing)
            self.fence = Fence.at_open(conn)
        if genesis is None or key_row is None:
            raise LedgerError("ledger has no genesis record (run 'sealtrail init')")

        self.origin: str = orjson.loads(genesis)["record"]["origin"]
        if signer is not None and signer.verifier.vkey != key_row and key_source is not None:
            # opened in the middle of a rotation (the key file not yet swapped), or after one
            self._signer = signer = key_source(key_row)
        if signer is not None and signer.verifier.vkey != key_row:
            raise KeyFileError(
                f"the key file holds {signer.verifier.vkey}, "
                f"but the ledger's active signing key is {key_row}"
            )

    @property
    def active_vkey(self) -> str:
        """The ledger's active signing key now (its newest key record), whichever process rotated
        it; this process signs with it from its next commit on."""
        with self._read() as conn:
            vkey = conn.exec_driver_sql(
                "SELECT vkey FROM ledger_keys ORDER BY valid_from_size DESC LIMIT 1").scalar()
        if vkey is None:
            raise LedgerError("ledger has no keys (run 'sealtrail init')")
        return str(vkey)

    # -- set-up -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        engine: Engine,
        signer: NoteSigner,
        origin: str,
        *,
        policy: CheckpointPolicy | None = None,
        clock: Callable[[], datetime] = now_utc,
    ) -> Ledger:
        """Write the genesis record (origin and first key) and the first checkpoint."""
        store.require_schema(engine)
        if not origin or "\n" in origin:
            raise LedgerError("the log origin must be one non-empty line")
        now = clock()
        with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn, conn.begin():
            store.lock_sequencer(conn)
            if store.tail(conn)[0] != 0:
                raise LedgerError("ledger already initialised")
            ts = format_time(now)
            body = {"origin": origin, "vkey": signer.verifier.vkey, "stratum": store.STRATUM}
            tid, rec, _ = seal(Record("ledger.genesis", body), ts)
            leaf = hashlib.sha256(b"\x00" + rec).digest()
            chain = hashlib.sha256(ZERO_CHAIN + leaf).digest()
            store.insert_rows(conn, store.entries, _ENTRY_COLS,
                              [(0, "ledger.genesis", rec, leaf, chain, ts, tid)])
            _insert_key(conn, signer.verifier, 1, 0)
            cp = Checkpoint(origin, 1, leaf).sign([signer])
            _insert_checkpoint(conn, cp, signer, _us(now))
        return cls(engine, signer, policy=policy, clock=clock)

    @contextmanager
    def _writer(self, lease_ms: int | None = None) -> Iterator[Connection]:
        """A transaction holding the log's single-writer lock; commits on normal exit."""
        with (
            store.writer_turn(self.engine),
            self.engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn,
            conn.begin(),
        ):
            store.lock_sequencer(conn, lease_ms)
            self.fence.check(conn)  # FencedError, nothing written: a standby, or an old primary's writer
            yield conn

    def _read(self) -> Connection:
        try:
            return self.engine.connect()
        except DBAPIError as exc:
            raise LedgerUnavailableError(f"cannot reach the ledger database: {exc.orig}") from exc

    # -- appending ----------------------------------------------------------------------

    def append(self, record: Record) -> Receipt:
        return self.append_many([record])[0]

    def append_many(self, records: Sequence[Record], *, alongside: Effect | None = None,
                    tail: Tail | None = None, build: Build | None = None) -> list[Receipt]:
        """Seal ``records`` in order, in one transaction; durable when this returns.

        ``alongside(conn, receipts)``, if given, runs inside that same transaction once the
        entries are written: a layer above keeps derived rows (a query index) in step with the
        log, or recheck a state transition under the sequencer lock. It may read the ledger's
        tables (entries before ``receipts[0].seq`` are the log as it was) and MUST NOT write them;
        if it raises, nothing is written.

        ``tail(conn, seq)``, if given, is asked under the sequencer lock for one more record (or a
        sequence of them), sealed last from ``seq`` on (the seq after ``records``): records whose
        bodies depend on the log as it is when the batch commits (a link to the newest entry of a
        kind, the seqs the batch got). Their receipts are the last ones returned (``alongside``
        gets those of ``records`` only). Same rules as ``alongside``: it may read, MUST NOT write;
        if it raises, nothing is written.

        ``build(conn, seq)``, if given (``records`` then empty), makes the records under the
        sequencer lock, from seq ``seq`` on: a writer whose records depend on every entry before
        them (a decider catching its state up with other deciders' commits) holds the lock while it
        makes them, so that none commits in between. Same rules as ``tail``.

        Every entry of one commit carries one ``recorded_at``, never earlier than the last
        entry's: ``recorded_at`` does not decrease along the log (a clock that stepped back, or
        another writer that stamped later and committed first, gets the log's last time).

        Kinds ``ledger.*`` are the ledger's own (genesis, key rotation, purges, holds) and
        are refused here: only the ledger's own methods may write them."""
        for i, r in enumerate(records):
            if isinstance(r.kind, str) and r.kind.startswith("ledger."):
                raise RecordError(f"record {i}: kind {r.kind!r} is reserved for the ledger itself")
        if build is not None and records:
            raise RecordError("give the records or a build that makes them, not both")
        return self._commit(records, alongside, tail=tail, build=build)

    def _commit(
        self,
        records: Sequence[Record],
        effect: Effect | None = None,
        extra_signers: Sequence[NoteSigner] = (),
        force_checkpoint: bool = False,
        before: Callable[[Connection], None] | None = None,
        adopt: bool = True,
        tail: Tail | None = None,
        build: Build | None = None,
    ) -> list[Receipt]:
        if self._signer is None:
            raise KeyFileError("this ledger was opened without its signing key (read-only)")
        if not records and tail is None and build is None:
            return []
        now = self.clock()
        ts = format_time(now)
        now_us = _us(now)
        sealed = seal_many(records, ts)
        # Hash the leaves before taking the sequencer lock: other writers wait less.
        leaves = [hashlib.sha256(b"\x00" + rec).digest() for _, rec, _ in sealed]
        sha = hashlib.sha256
        with self._lock:
            held = time.perf_counter()
            try:
                with self._writer(None if build is None else store.SEQUENCER_BUILD_LEASE_MS) as conn:
                    held = time.perf_counter()  # the lock is ours from here (waiting is not holding)
                    size, chain, active, cp_size, cp_at, last_at = store.head(conn)
                    self._check_active_key(conn, active, adopt)
                    if before is not None:
                        before(conn)  # checks that must see the log as it was, under the lock
                    if build is not None:
                        records = list(build(conn, size))
                        for i, r in enumerate(records):
                            if isinstance(r.kind, str) and r.kind.startswith("ledger."):
                                raise RecordError(f"record {i}: kind {r.kind!r} is reserved for the ledger")
                        sealed = seal_many(records, ts)
                        leaves = [sha(b"\x00" + rec).digest() for _, rec, _ in sealed]
                    if last_at is not None and last_at > ts:  # rare: sealed again under the lock
                        ts = last_at
                        sealed = seal_many(records, ts)
                        leaves = [sha(b"\x00" + rec).digest() for _, rec, _ in sealed]
                    batch = list(records)
                    if tail is not None:
                        got = tail(conn, size + len(records))
                        last = [got] if isinstance(got, Record) else list(got)
                        for r in last:
                            if isinstance(r.kind, str) and r.kind.startswith("ledger."):
                                raise RecordError(f"tail record: kind {r.kind!r} is reserved for the ledger")
                        more = seal_many(last, ts)
                        sealed = [*sealed, *more]
                        leaves = [*leaves, *(sha(b"\x00" + one[1]).digest() for one in more)]
                        batch += last
                    cr = self._compact_range(conn, size, chain)
                    prev = chain or ZERO_CHAIN
                    chains: list[bytes] = []
                    push = chains.append
                    for leaf in leaves:
                        prev = sha(prev + leaf).digest()
                        push(prev)
                    seqs = range(size, size + len(batch))
                    tids = [t for t, _, _ in sealed]
                    stamp = repeat(ts)
                    rows = list(zip(seqs, [r.kind for r in batch], [e for _, e, _ in sealed],
                                    leaves, chains, stamp, tids, strict=False))
                    # tuple.__new__ builds each NamedTuple in C: a third of the loop's cost
                    receipts: list[Receipt] = list(map(
                        tuple.__new__, repeat(Receipt), zip(seqs, tids, leaves, chains, stamp, strict=False)))
                    pay_rows = [(d, r.payload, seq, now_us) for (_, _, d), r, seq
                                in zip(sealed, batch, seqs, strict=True) if d is not None]
                    node_rows = cr.extend(leaves, store.STRATUM)
                    store.insert_rows(conn, store.entries, _ENTRY_COLS, rows)
                    store.insert_rows(conn, store.nodes, ("level", "idx", "hash"), node_rows)
                    _insert_payloads(conn, pay_rows)
                    if effect is not None:
                        effect(conn, receipts[:len(records)])
                    self._maybe_checkpoint(conn, cr, now_us, extra_signers, force_checkpoint,
                                           (cp_size, cp_at))
            except IntegrityError as exc:
                raise RecordError(f"refused by the database (duplicate trace id?): {exc.orig}") from exc
            except LookupError as exc:
                raise DamageError("missing Merkle node", None, f"cannot extend the tree: {exc}") from exc
            except DBAPIError as exc:
                raise LedgerUnavailableError(f"ledger commit failed, nothing written: {exc.orig}") from exc
            finally:
                self.held_s += time.perf_counter() - held
            self.commits += 1
            self._cache = (cr.size, prev, list(cr.hashes))
        return receipts

    def _check_active_key(self, conn: Connection, active: str | None, adopt: bool = True) -> None:
        """Under the sequencer lock: another replica may have rotated the key meanwhile. If so,
        take the new key up (``adopt``) or refuse; never sign with a key whose retirement is sealed."""
        assert self._signer is not None
        if active == self._signer.verifier.vkey:
            return
        if not adopt or active is None:
            raise KeyFileError(
                f"the ledger's active signing key is now {active}; this process holds "
                f"{self._signer.verifier.vkey} (rotated elsewhere? reload the key file)")
        self._adopt(conn, active)

    def _adopt(self, conn: Connection, active: str) -> None:
        """Sign with ``active`` from now on: the ledger's rotation records must chain it to the key
        this process holds (each endorsed by the one before), and the key source must hold it.
        ``KeyFileError`` otherwise, remembered so that ``require_signer`` fails fast until fixed."""
        assert self._signer is not None
        held = self._signer.verifier.vkey
        try:
            if self._key_source is None:
                raise KeyFileError(
                    f"the ledger's active signing key is now {active}; this process holds "
                    f"{held} (rotated elsewhere? reload the key file)")
            check_handover(conn, held, active)
            signer = self._key_source(active)
            if signer.verifier.vkey != active:  # a key source that does not keep its contract
                raise KeyFileError(f"the key store gave {signer.verifier.vkey}, not {active}")
        except KeyFileError as exc:
            self._key_problem = exc
            raise
        self._signer = signer
        self._key_problem = None
        log.warning("signing key rotated elsewhere: now signing with %s (was %s)", active, held)

    def require_signer(self) -> None:
        """Raise ``KeyFileError`` now if this process cannot sign for the ledger: a caller checks
        before work that is wasted without a commit (the serving runtime, before it replays its
        velocity windows).

        Free while signing works. After a signing-key failure each call looks again at the
        ledger's newest key and the key source, so the process recovers once the key is back."""
        if self._signer is None:
            raise KeyFileError("this ledger was opened without its signing key (read-only)")
        if self._key_problem is None:
            return
        with self._lock, self._read() as conn:
            active = store.head(conn)[2]
            if active is not None and active == self._signer.verifier.vkey:
                self._key_problem = None
                return
            self._check_active_key(conn, active)

    def _compact_range(self, conn: Connection, size: int, chain: bytes | None) -> CompactRange:
        if self._cache is not None and self._cache[0] == size and self._cache[1] == chain:
            return CompactRange(size, list(self._cache[2]))
        wanted = perfect_subtrees(0, size)
        got = store.perfect_hashes(conn, wanted)
        return CompactRange(size, [got[w] for w in wanted])

    def _maybe_checkpoint(
        self,
        conn: Connection,
        cr: CompactRange,
        now_us: int,
        extra: Sequence[NoteSigner],
        force: bool,
        last: tuple[int, int],
    ) -> SignedCheckpoint | None:
        last_size, last_at = last
        if cr.size == last_size:
            return None
        due = (
            force
            or cr.size - last_size >= self.policy.every_entries
            or now_us - last_at >= self.policy.every_seconds * 1_000_000
        )
        if not due:
            return None
        assert self._signer is not None
        cp = Checkpoint(self.origin, cr.size, cr.root()).sign([self._signer, *extra])
        _insert_checkpoint(conn, cp, self._signer, now_us)
        return cp

    # -- checkpoints and keys -----------------------------------------------------------

    def checkpoint(self) -> SignedCheckpoint:
        """Sign a checkpoint of the current size now (or return the one already there)."""
        if self._signer is None:
            raise KeyFileError("this ledger was opened without its signing key (read-only)")
        with self._lock, self._writer() as conn:
            size, chain, active, cp_size, cp_at, _ = store.head(conn)
            self._check_active_key(conn, active)
            cr = self._compact_range(conn, size, chain)
            self._maybe_checkpoint(conn, cr, _us(self.clock()), (), True, (cp_size, cp_at))
        latest = self.latest_checkpoint()
        assert latest is not None
        return latest

    def latest_checkpoint(self) -> SignedCheckpoint | None:
        with self._read() as conn:
            note = conn.exec_driver_sql(
                "SELECT note FROM ledger_checkpoints ORDER BY size DESC LIMIT 1"
            ).scalar()
        return None if note is None else SignedCheckpoint.parse_unverified(note)

    def size(self) -> int:
        with self._read() as conn:
            return store.tail(conn)[0]

    def status(self) -> LedgerStatus:
        """Size and newest checkpoint in one read (for monitoring: how much is unsealed, since when)."""
        with self._read() as conn:
            size, _, _, cp_size, cp_at, _ = store.head(conn)
        return LedgerStatus(size, cp_size, cp_at or None)

    def rotate_key(self, new: NoteSigner) -> Receipt:
        """Record the rotation (endorsed by the old key) and co-sign a checkpoint with both.

        From the size that includes the rotation record on, ``new`` signs alone.
        """
        old = self._signer
        if old is None:
            raise KeyFileError("rotating needs the current signing key")
        if new.verifier.vkey == old.verifier.vkey:
            raise KeyFileError("the new key is the current key")
        endorsement = old.sign(ROTATION_CONTEXT + new.verifier.vkey.encode() + b"\n")
        body = {
            "old_vkey": old.verifier.vkey,
            "new_vkey": new.verifier.vkey,
            "endorsement": base64.b64encode(endorsement).decode(),
        }

        def effect(conn: Connection, receipts: list[Receipt]) -> None:
            _insert_key(conn, new.verifier, receipts[-1].seq + 1, receipts[-1].seq)
            self._signer = new  # the checkpoint for this batch is signed by new (+ old)

        try:
            # adopt=False: rotating away from a key another process already retired is refused
            (receipt,) = self._commit([Record("ledger.key_rotation", body)], effect, [old], True,
                                      adopt=False)
        except BaseException:
            self._signer = old
            raise
        return receipt


def check_handover(conn: Connection, held: str, active: str) -> None:
    """``KeyFileError`` unless the ledger's key history runs from ``held`` to ``active`` through
    rotation records each endorsed by the key before it (what ``ledger verify`` checks in full)."""
    rows = [(str(v), int(s)) for v, s in conn.exec_driver_sql(
        "SELECT vkey, introduced_seq FROM ledger_keys ORDER BY valid_from_size")]
    vkeys = [v for v, _ in rows]
    if held not in vkeys or vkeys[-1] != active:
        raise KeyFileError(f"the ledger's key history {vkeys} does not lead from this process's key "
                           f"{held} to the active key {active}")
    prev = NoteVerifier.from_vkey(held)
    p = store.param(conn)
    for vkey, seq in rows[vkeys.index(held) + 1:]:
        row = conn.exec_driver_sql(
            f"SELECT kind, record FROM ledger_entries WHERE seq = {p}", (seq,)).first()
        endorsed = False
        if row is not None and row[0] == "ledger.key_rotation":
            try:
                body = orjson.loads(bytes(row[1]))["record"]
                endorsed = (body["old_vkey"] == prev.vkey and body["new_vkey"] == vkey
                            and prev.verify(ROTATION_CONTEXT + vkey.encode() + b"\n",
                                            base64.b64decode(body["endorsement"], validate=True)))
            except (KeyError, TypeError, ValueError):  # binascii.Error and JSONDecodeError among them
                endorsed = False
        if not endorsed:
            raise KeyFileError(f"the ledger's key {vkey} is not endorsed by {prev.vkey} (no valid "
                               f"ledger.key_rotation record at seq {seq}): not signing with it; "
                               "run 'sealtrail ledger verify'")
        prev = NoteVerifier.from_vkey(vkey)


_ENTRY_COLS = ("seq", "kind", "record", "leaf_hash", "chain_hash", "recorded_at", "trace_id")


def _insert_key(conn: Connection, v: NoteVerifier, valid_from: int, seq: int) -> None:
    store.insert_rows(
        conn, store.keys,
        ("vkey", "name", "key_id", "public_key", "valid_from_size", "introduced_seq"),
        [(v.vkey, v.name, v.key_id.hex(), v.public_key, valid_from, seq)],
    )


def _insert_checkpoint(conn: Connection, cp: SignedCheckpoint, signer: NoteSigner, at: int) -> None:
    c = cp.checkpoint
    store.insert_rows(
        conn, store.checkpoints, ("size", "root", "note", "key_id", "created_at"),
        [(c.size, c.root, cp.note, signer.verifier.key_id.hex(), at)],
    )


def _insert_payloads(conn: Connection, rows: list[tuple[str, bytes | None, int, int]]) -> None:
    if not rows:
        return
    p = store.param(conn)
    conn.exec_driver_sql(
        "INSERT INTO ledger_payloads (sha256, data, first_seq, stored_at) "
        f"VALUES ({p}, {p}, {p}, {p}) ON CONFLICT (sha256) DO NOTHING",
        rows,
    )
