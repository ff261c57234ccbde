"""A witness (C2SP tlog-witness): cosigns a log's checkpoint only after a consistency proof from
the last checkpoint of that log it cosigned, and keeps the evidence when a log lies.

The witness is a separate party with its own key (``ledger.cosignature``): internal audit, or an
external firm. It is configured with each log it witnesses (origin and trusted signing keys, and
keys revoked from a tree size on). For each log it keeps, durably, every checkpoint it cosigned
(``(origin, size) -> root``), so it refuses:

- a checkpoint not signed by a trusted key, or signed only by a key revoked at or before its size
  (403), of an unknown log (404), or a malformed request (400);
- an ``old`` size other than the size of the last checkpoint it cosigned (409, body: that size,
  ``text/x.tlog.size``), the way a log learns where the witness stands;
- a consistency proof that does not connect the two (422). Not kept as evidence: the proof is not
  signed, so a wrong one proves nothing against the log;
- a **split view**: a checkpoint of a size it already cosigned, with another root (409). Both
  signed notes are kept as evidence (once per contradicting root), also when the witness restarted
  in between: the history lives in the state file, not in memory.

Check and update happen in one ``BEGIN IMMEDIATE`` transaction of the state file (SQLite, WAL,
``synchronous=FULL``), so two requests racing can never roll the witness back
(https://c2sp.org/tlog-witness, the A/B race), also across processes sharing the file. The
cosignature is returned only after the new checkpoint is durable.
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.checkpoint import MAX_SIZE, Checkpoint, is_decimal
from ledger.cosignature import Cosigner, add_lines
from ledger.errors import ConsistencyError, LedgerError, NoteError
from ledger.merkle import HASH_SIZE, verify_consistency
from ledger.note import NoteVerifier, Signature, parse_note

__all__ = ["MAX_PROOF_LINES", "Evidence", "LogPolicy", "Outcome", "Witness", "WitnessStateError",
           "parse_add_checkpoint"]

MAX_PROOF_LINES = 63
MAX_BODY_BYTES = 64 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cosigned (
    origin TEXT NOT NULL,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL,
    cosigned_at INTEGER NOT NULL,
    PRIMARY KEY (origin, size)
);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    detail TEXT NOT NULL,
    submitted_note TEXT NOT NULL,
    cosigned_note TEXT NOT NULL,
    received_at INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class LogPolicy:
    """One witnessed log: its origin, the keys trusted to sign it, and keys revoked from a size on."""

    origin: str
    keys: tuple[NoteVerifier, ...]
    revoked: Mapping[str, int] = field(default_factory=dict)  # vkey -> first tree size refused

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError(f"log {self.origin!r} needs at least one trusted key")


@dataclass(frozen=True)
class Outcome:
    """The witness's answer: an HTTP status, a body and its content type."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class Evidence:
    """A validly signed checkpoint the witness refused because it contradicts one it cosigned."""

    id: int
    origin: str
    kind: str  # "split-view": a checkpoint of a size it cosigned, with another root
    size: int
    detail: str
    submitted_note: str
    cosigned_note: str
    received_at: int

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "origin": self.origin, "kind": self.kind, "size": self.size,
                "detail": self.detail, "submitted_note": self.submitted_note,
                "cosigned_note": self.cosigned_note, "received_at": self.received_at}


class WitnessStateError(LedgerError):
    """The witness's state file is missing or cannot be opened."""


class BadRequest(ValueError):
    """The request body is not an add-checkpoint request."""


def parse_add_checkpoint(body: bytes) -> tuple[int, list[bytes], str]:
    """``(old size, consistency proof, checkpoint note)`` from an add-checkpoint request body."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"request body is {len(body)} bytes, at most {MAX_BODY_BYTES} allowed")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("request body is not UTF-8") from exc
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise BadRequest("request body has no empty line before the checkpoint")
    lines = head.split("\n")
    first = lines[0]
    if not first.startswith("old "):
        raise BadRequest("request body does not start with an 'old <size>' line")
    old_s = first[4:]
    if not is_decimal(old_s) or int(old_s) > MAX_SIZE:
        raise BadRequest(f"old size {old_s[:40]!r} is not an ASCII decimal (at most 2^63 - 1) without "
                         "leading zeroes")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise BadRequest(f"consistency proof has {len(lines) - 1} lines, at most {MAX_PROOF_LINES} allowed")
    proof: list[bytes] = []
    for i, line in enumerate(lines[1:]):
        try:
            h = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"consistency proof line {i + 1} is not base64") from exc
        if len(h) != HASH_SIZE:
            raise BadRequest(f"consistency proof line {i + 1} is {len(h)} bytes, expected {HASH_SIZE}")
        proof.append(h)
    return int(old_s), proof, note


def _size_outcome(size: int) -> Outcome:
    """409 with the size of the last cosigned checkpoint, as tlog-witness says."""
    return Outcome(409, f"{size}\n", "text/x.tlog.size")


class Witness:
    """The witness's logic over its state file; thread-safe, and safe across processes."""

    def __init__(self, cosigner: Cosigner, logs: Sequence[LogPolicy], state: Path, *,
                 clock: Callable[[], float] = time.time, create: bool = True) -> None:
        """``create=False`` refuses (``WitnessStateError``) a state file that is not there: a witness
        that lost its state would cosign what contradicts what it cosigned before, so only the set-up
        (``sealtrail witness init``) makes a new one."""
        self.cosigner = cosigner
        self.logs = {p.origin: p for p in logs}
        if len(self.logs) != len(logs):
            raise ValueError("two witnessed logs have the same origin")
        self.state = state
        self.clock = clock
        self._lock = threading.Lock()
        if state.is_dir():
            raise WitnessStateError(f"the witness state {state} is a directory, not its state file")
        if not create and not state.exists():
            raise WitnessStateError(
                f"the witness state file {state} does not exist: a witness that lost its state would "
                "cosign a history contradicting the one it cosigned; restore the file (or, for a new "
                "witness, run 'sealtrail witness init')")
        state.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(state, isolation_level=None, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise WitnessStateError(f"the witness state file {state} cannot be opened: {exc}") from exc
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- add-checkpoint ---------------------------------------------------------------------

    def add_checkpoint(self, body: bytes) -> Outcome:
        """Answer one ``POST add-checkpoint`` request (https://c2sp.org/tlog-witness)."""
        try:
            old, proof, note = parse_add_checkpoint(body)
            text, sigs = parse_note(note)
            cp = Checkpoint.from_text(text)
        except (BadRequest, NoteError) as exc:
            return Outcome(400, f"{exc}\n")
        policy = self.logs.get(cp.origin)
        if policy is None:
            return Outcome(404, f"unknown log {cp.origin!r}\n")
        refusal = self._check_signatures(policy, cp, text, sigs)
        if refusal is not None:
            return Outcome(403, refusal + "\n")
        if old > cp.size:
            return Outcome(400, f"old size {old} is larger than the checkpoint's size {cp.size}\n")
        if (old == 0 or old == cp.size) and proof:
            return Outcome(400, "a consistency proof from size 0, or between equal sizes, must be empty\n")
        with self._lock:
            return self._add(policy, old, proof, note, cp)

    def _check_signatures(self, policy: LogPolicy, cp: Checkpoint, text: str,
                          sigs: Sequence[Signature]) -> str | None:
        """None if a trusted, unrevoked key signed the checkpoint; else why not."""
        message = text.encode()
        good: list[NoteVerifier] = []
        for sig in sigs:
            for v in policy.keys:
                if v.name == sig.name and v.key_id == sig.key_id:
                    if not v.verify(message, sig.signature):
                        return f"signature by {v.vkey} does not verify"
                    good.append(v)
        if not good:
            return f"no signature by a key trusted for {cp.origin!r}"
        live = [v for v in good if cp.size < policy.revoked.get(v.vkey, cp.size + 1)]
        if not live:
            revoked = ", ".join(f"{v.vkey} (revoked from size {policy.revoked[v.vkey]})" for v in good)
            return f"checkpoint of size {cp.size} is signed only by revoked keys: {revoked}"
        return None

    def _add(self, policy: LogPolicy, old: int, proof: list[bytes], note: str, cp: Checkpoint) -> Outcome:
        db = self._db
        now = int(self.clock())
        db.execute("BEGIN IMMEDIATE")
        try:
            same = db.execute("SELECT root, note FROM cosigned WHERE origin = ? AND size = ?",
                              (cp.origin, cp.size)).fetchone()
            if same is not None and bytes(same[0]) != cp.root:
                self._evidence(cp, "split-view", f"size {cp.size} was cosigned with root "
                               f"{base64.b64encode(bytes(same[0])).decode()}", note, same[1], now)
                db.execute("COMMIT")
                latest = self._latest_size(cp.origin)
                return _size_outcome(latest)
            row = db.execute("SELECT size, root, note FROM cosigned WHERE origin = ? "
                             "ORDER BY size DESC LIMIT 1", (cp.origin,)).fetchone()
            latest, latest_root = (0, b"") if row is None else (int(row[0]), bytes(row[1]))
            if old != latest:
                db.execute("ROLLBACK")
                return _size_outcome(latest)
            if latest:
                try:
                    verify_consistency(latest, cp.size, proof, latest_root, cp.root)
                except ConsistencyError as exc:
                    # not evidence: the proof is not signed, anyone can send a wrong one for a good
                    # checkpoint; only two signed checkpoints that contradict each other are
                    db.execute("ROLLBACK")
                    return Outcome(422, f"consistency proof from size {latest} does not verify: {exc}\n")
            stamp = max(now, self._last_stamp(cp.origin))  # never older than a cosignature given
            if cp.size != latest or row is None:
                db.execute("INSERT INTO cosigned (origin, size, root, note, cosigned_at) "
                           "VALUES (?, ?, ?, ?, ?)", (cp.origin, cp.size, cp.root, note, stamp))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return Outcome(200, self.cosigner.cosign(cp.to_text(), stamp))

    def _last_stamp(self, origin: str) -> int:
        got = self._db.execute("SELECT MAX(cosigned_at) FROM cosigned WHERE origin = ?", (origin,)).fetchone()
        return 0 if got is None or got[0] is None else int(got[0])

    def _latest_size(self, origin: str) -> int:
        got = self._db.execute("SELECT MAX(size) FROM cosigned WHERE origin = ?", (origin,)).fetchone()
        return 0 if got is None or got[0] is None else int(got[0])

    def _evidence(self, cp: Checkpoint, kind: str, detail: str, note: str, cosigned_note: str,
                  now: int) -> None:
        """Keep a contradicting checkpoint once per (size, root): a log retrying it, or the same note with
        other signature lines added, is not new evidence."""
        root_line = cp.to_text().split("\n")[2]
        for (kept,) in self._db.execute("SELECT submitted_note FROM evidence WHERE origin = ? AND kind = ? "
                                        "AND size = ?", (cp.origin, kind, cp.size)):
            if str(kept).split("\n")[2] == root_line:
                return
        self._db.execute(
            "INSERT INTO evidence (origin, kind, size, detail, submitted_note, cosigned_note, received_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (cp.origin, kind, cp.size, detail, note, cosigned_note, now))

    def post(self, url: str, body: bytes) -> tuple[int, str, bytes]:
        """This witness answering ``body`` in process: a ``ledger.cosign.Post`` (drills, tests, a log
        and a witness in one process). ``url`` is not read."""
        del url
        o = self.add_checkpoint(body)
        return o.status, o.content_type, o.body.encode()

    # -- reading ------------------------------------------------------------------------------

    def latest(self, origin: str) -> str | None:
        """The newest checkpoint of ``origin`` this witness cosigned, its cosignature added, or None."""
        with self._lock:
            row = self._db.execute("SELECT note, cosigned_at FROM cosigned WHERE origin = ? "
                                   "ORDER BY size DESC LIMIT 1", (origin,)).fetchone()
        if row is None:
            return None
        note = str(row[0])
        return add_lines(note, [self.cosigner.cosign(parse_note(note)[0], int(row[1]))])

    def evidence(self, origin: str | None = None) -> list[Evidence]:
        """Every refused, validly signed checkpoint that contradicts a cosigned one, oldest first."""
        query = ("SELECT id, origin, kind, size, detail, submitted_note, cosigned_note, received_at "
                 "FROM evidence")
        args: tuple[str, ...] = ()
        if origin is not None:
            query += " WHERE origin = ?"
            args = (origin,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id", args).fetchall()
        return [Evidence(int(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]), str(r[6]),
                         int(r[7])) for r in rows]
