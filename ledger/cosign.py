"""The log's side of witnessing: ask each configured witness to cosign the newest checkpoint, keep the
cosignatures, and hand out checkpoints with them.

For each witness the log submits ``old <size>``, the RFC 6962 consistency proof from that size and
the signed checkpoint (https://c2sp.org/tlog-witness). ``old`` is the largest size that witness
cosigned for this log (from ``ledger_cosignatures``), or 0; a witness that stands elsewhere answers
409 with its size, and the log asks again once from there. A witness standing *ahead* of the log's
newest checkpoint is an alarm, never retried: the log lost entries that witness saw (a lossy
failover, a restore from an old backup) or someone else signs a longer history under this origin.

Network access is the caller's (``Post``): this module knows the protocol and the tables, the
``api`` layer brings the HTTP client with its mutual TLS.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from ledger import store
from ledger.checkpoint import Checkpoint, is_decimal
from ledger.cosignature import CosignerVerifier, add_lines, cosignatures
from ledger.errors import DamageError, KeyFileError, LedgerError, NoteError
from ledger.note import parse_note
from ledger.proofs import consistency_proof

__all__ = ["CosignOutcome", "Post", "WitnessEndpoint", "check_cosignature_rows", "collect", "cosigned_note",
           "newest_cosigned", "newest_witnessed", "witness_sizes", "witnesses_of"]

CLOCK_SKEW_S = 86_400  # a cosignature dated later than this past the log's clock is not stored
Post = Callable[[str, bytes], tuple[int, str, bytes]]
"""POST ``body`` to a witness's add-checkpoint URL; returns (status, content type, body). Raises
``OSError`` (or any exception) when the witness cannot be reached."""


@dataclass(frozen=True)
class WitnessEndpoint:
    """A witness the log asks: where its add-checkpoint lives, and its verifier key."""

    url: str  # the submission prefix; add-checkpoint is POSTed to <url>/add-checkpoint
    verifier: CosignerVerifier


@dataclass(frozen=True)
class CosignOutcome:
    """What one witness said about one checkpoint."""

    witness: str  # its vkey
    size: int
    ok: bool
    status: int | None  # the HTTP status of the last request; None: not reached or not asked
    detail: str
    alarm: bool = False  # the witness stands ahead of the log, or calls the checkpoint a split view

    def to_json(self) -> dict[str, object]:
        return {"witness": self.witness, "size": self.size, "ok": self.ok, "status": self.status,
                "detail": self.detail, "alarm": self.alarm}


def witness_sizes(conn: Connection) -> dict[str, int]:
    """The largest checkpoint size each witness cosigned for this log, by witness vkey."""
    return {str(w): int(s) for w, s in conn.exec_driver_sql(
        "SELECT witness, MAX(size) FROM ledger_cosignatures GROUP BY witness")}


def _request(old: int, proof: Sequence[bytes], note: str) -> bytes:
    lines = "".join(base64.b64encode(h).decode() + "\n" for h in proof)
    return f"old {old}\n{lines}\n{note}".encode()


def _ask(engine: Engine, post: Post, w: WitnessEndpoint, cp: Checkpoint, note: str,
         old: int) -> CosignOutcome:
    vkey = w.verifier.vkey
    url = w.url.rstrip("/") + "/add-checkpoint"
    cosigned = old  # the largest size this witness cosigned for this log, as the log holds it

    def refused(status: int | None, detail: str, alarm: bool = False) -> CosignOutcome:
        return CosignOutcome(vkey, cp.size, False, status, detail, alarm)

    for attempt in (1, 2):
        with engine.connect() as conn:
            proof = consistency_proof(conn, old, cp.size) if 0 < old < cp.size else []
        try:
            status, ctype, body = post(url, _request(old, proof, note))
        except Exception as exc:  # an unreachable witness is an outcome to report, not a crash
            return refused(None, f"witness not reached: {exc}")
        text = body.decode("utf-8", "replace")
        if status == 200:
            try:
                got = cosignatures(add_lines(note, text.splitlines(keepends=True)), [w.verifier])
            except NoteError as exc:
                return refused(status, f"the witness's answer is not valid: {exc}")
            if not got:
                return refused(status, "the witness answered 200 without a cosignature by its key")
            if got[0].timestamp > time.time() + CLOCK_SKEW_S:  # 2^53 and up would not fit a bundle either
                return refused(status, f"the witness's cosignature is dated {got[0].timestamp}, more than "
                                       "a day ahead of this log's clock: not stored (check its clock)")
            with engine.begin() as conn:
                p = store.param(conn)
                conn.exec_driver_sql(
                    "INSERT INTO ledger_cosignatures (size, witness, timestamp, line, received_at) "
                    f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (size, witness) DO NOTHING",
                    (cp.size, vkey, got[0].timestamp, got[0].line, int(time.time() * 1_000_000)))
            return CosignOutcome(vkey, cp.size, True, status, f"cosigned at {got[0].timestamp}")
        if status == 409 and ctype.split(";")[0].strip() == "text/x.tlog.size":
            stands = text.strip()
            if not is_decimal(stands):
                return refused(status, f"409 with a size that is not a decimal number: {stands[:40]!r}")
            at = int(stands)
            if at > cp.size:
                return refused(status, f"the witness cosigned size {at}, past this log's newest checkpoint "
                                       f"(size {cp.size}): entries it saw are missing here, or another log "
                                       "signs under this origin", alarm=True)
            if at < cosigned:  # it cosigned more of this log than it now knows of: its state rolled back
                return refused(status, f"the witness stands at size {at}, below size {cosigned} it cosigned "
                                       "for this log: it lost what it cosigned (its state restored from an "
                                       "old copy, or a new one) and could cosign another history; not "
                                       "counted until its state is restored", alarm=True)
            if at == old:  # the sizes agree, so the roots do not: it holds another tree of this log
                return refused(status, f"the witness refuses size {cp.size} from its size {at}: it cosigned "
                                       "a checkpoint of that size with another root (split view)", alarm=True)
            if attempt == 2:
                return refused(status, f"the witness moved from size {old} to {at} while asked; try again")
            old = at
            continue
        if status == 422:  # the proof from where the witness stands fails: this log is not its history
            return refused(status, f"the witness cannot connect its size {old} to size {cp.size}: this log "
                                   "does not extend the history it cosigned (a fork): "
                                   f"{text.strip()[:300]}", alarm=True)
        return refused(status, f"witness answered {status}: {text.strip()[:500]}")
    raise AssertionError("unreachable: the second attempt always returns")


def collect(engine: Engine, witnesses: Sequence[WitnessEndpoint], post: Post) -> list[CosignOutcome]:
    """Ask every witness that has not yet cosigned the newest checkpoint to cosign it.

    ``LedgerError`` when the log has no checkpoint; each witness's answer is an outcome, never an
    exception, so one witness down does not stop the others."""
    store.require_schema(engine)
    with engine.connect() as conn:
        row = conn.exec_driver_sql(
            "SELECT size, note FROM ledger_checkpoints ORDER BY size DESC LIMIT 1").first()
        if row is None:
            raise LedgerError("the ledger has no checkpoint yet (run 'sealtrail init')")
        sizes = witness_sizes(conn)
    size, note = int(row[0]), str(row[1])
    cp = Checkpoint.from_text(parse_note(note)[0])
    out: list[CosignOutcome] = []
    for w in witnesses:
        vkey = w.verifier.vkey
        have = sizes.get(vkey, 0)
        if have >= size and have:
            out.append(CosignOutcome(vkey, size, True, None, f"already cosigned size {have}"))
            continue
        out.append(_ask(engine, post, w, cp, note, have))
    return out


def cosigned_note(conn: Connection, size: int) -> str | None:
    """The checkpoint note of ``size`` with every cosignature collected for it, or None."""
    p = store.param(conn)
    note = conn.exec_driver_sql(f"SELECT note FROM ledger_checkpoints WHERE size = {p}", (size,)).scalar()
    if note is None:
        return None
    lines = [str(r[0]) for r in conn.exec_driver_sql(
        f"SELECT line FROM ledger_cosignatures WHERE size = {p} ORDER BY witness", (size,))]
    return add_lines(str(note), lines)


def newest_cosigned(conn: Connection, min_witnesses: int = 1, at_least: int = 0) -> tuple[int, str] | None:
    """``(size, note with cosignatures)`` of the newest checkpoint of at least ``at_least`` leaves that
    ``min_witnesses`` or more witnesses cosigned, or None."""
    p = store.param(conn)
    size = conn.exec_driver_sql(
        f"SELECT size FROM ledger_cosignatures WHERE size >= {p} GROUP BY size "
        f"HAVING COUNT(*) >= {p} ORDER BY size DESC LIMIT 1", (at_least, max(1, min_witnesses))).scalar()
    if size is None:
        return None
    note = cosigned_note(conn, int(size))
    return None if note is None else (int(size), note)


def newest_witnessed(engine: Engine, min_witnesses: int = 1, at_least: int = 0) -> tuple[int, str] | None:
    """``newest_cosigned`` on its own connection (for callers that hold an engine, not a connection)."""
    with engine.connect() as conn:
        return newest_cosigned(conn, min_witnesses, at_least)


def witnesses_of(conn: Connection, size: int) -> list[tuple[str, int]]:
    """``(witness vkey, cosignature timestamp)`` of every cosignature collected for ``size``, by vkey."""
    p = store.param(conn)
    return [(str(w), int(t)) for w, t in conn.exec_driver_sql(
        f"SELECT witness, timestamp FROM ledger_cosignatures WHERE size = {p} ORDER BY witness", (size,))]


def check_cosignature_rows(rows: Sequence[tuple[int, str, int, str]],
                           notes: dict[int, str]) -> dict[str, int]:
    """``ledger verify``'s check of ``ledger_cosignatures``: every row ``(size, witness vkey, timestamp,
    line)`` is a valid cosignature by that witness, at that time, of the stored checkpoint of that size.
    Returns the largest size each witness cosigned; ``DamageError`` names the first bad row."""
    newest: dict[str, int] = {}
    for size, vkey, timestamp, line in rows:
        note = notes.get(size)
        if note is None:
            raise DamageError("forged cosignature", size - 1 if size else None,
                              f"a cosignature by {vkey} is for size {size}, which has no stored checkpoint")
        try:
            witness = CosignerVerifier.from_vkey(vkey)
            found = cosignatures(add_lines(note, [line]), [witness])
        except (KeyFileError, NoteError) as exc:
            raise DamageError("forged cosignature", size - 1 if size else None,
                              f"the cosignature by {vkey} of size {size} does not verify: {exc}") from exc
        if len(found) != 1 or found[0].timestamp != timestamp or found[0].line != line:
            raise DamageError("forged cosignature", size - 1 if size else None,
                              f"the row of {vkey} at size {size} does not hold its own line "
                              f"(time {timestamp})")
        newest[vkey] = max(size, newest.get(vkey, 0))
    return newest
