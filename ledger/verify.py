"""Full verification of a stored ledger: every leaf, chain link, node, root and signature.

The log is cut into aligned ranges that ``scan.py`` recomputes side by side (one process per
core); this module then checks what needs the whole history in order: the key history from
the ledger's own genesis and rotation records, every checkpoint signature and root, purge
records, the ``ledger_keys`` table and the pinned trusted key. Returns a report, or raises
``DamageError`` naming the first bad seq and the kind of damage. Nothing here writes.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from ledger import store
from ledger.append import ROTATION_CONTEXT
from ledger.checkpoint import Checkpoint, SignedCheckpoint
from ledger.cosign import check_cosignature_rows
from ledger.errors import DamageError, KeyFileError, NoteError
from ledger.keys import KeyValidity
from ledger.note import NoteVerifier, open_note
from ledger.revocation import REVOCATION_KIND, KeyRevocation, RevokedKeyError, verify_checkpoint_note
from ledger.scan import CHUNK, ScanResult, scan_range, scan_range_at

__all__ = ["PurgedPayload", "VerifyReport", "verify_ledger"]

_PIECE = 4 * CHUNK  # 65,536 entries: the unit of parallel work and of progress


@dataclass(frozen=True)
class PurgedPayload:
    sha256: str
    first_seq: int
    purge_seq: int


@dataclass
class VerifyReport:
    origin: str = ""
    size: int = 0
    checkpoints: int = 0
    latest_checkpoint_size: int = 0
    unsealed_entries: int = 0
    keys: list[str] = field(default_factory=list)
    revoked_keys: list[dict[str, Any]] = field(default_factory=list)
    cosignatures: int = 0  # witness cosignatures stored (ledger_cosignatures), each checked
    witnesses: dict[str, int] = field(default_factory=dict)  # witness vkey -> largest size it cosigned
    trusted_key: str | None = None
    payloads_present: int = 0
    purged: list[PurgedPayload] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "verified": True,
            "origin": self.origin,
            "size": self.size,
            "checkpoints": self.checkpoints,
            "latest_checkpoint_size": self.latest_checkpoint_size,
            "unsealed_entries": self.unsealed_entries,
            "keys": self.keys,
            "revoked_keys": self.revoked_keys,
            "cosignatures": self.cosignatures,
            "witnesses": self.witnesses,
            "trusted_key": self.trusted_key,
            "payloads_present": self.payloads_present,
            "payloads_purged": [p.__dict__ for p in self.purged],
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
        }


def _vkey(text: Any, seq: int) -> NoteVerifier:
    try:
        return NoteVerifier.from_vkey(str(text))
    except KeyFileError as exc:
        raise DamageError("bad key record", seq, str(exc)) from exc


class _History:
    """What the ledger's own records say, replayed in seq order."""

    def __init__(self) -> None:
        self.origin = ""
        self.keys: list[tuple[int, NoteVerifier]] = []  # (valid from size, key)
        self.purge_listed: dict[str, int] = {}
        self.rotations: list[tuple[int, NoteVerifier, NoteVerifier]] = []
        self.revocations: list[KeyRevocation] = []

    def active(self, size: int) -> NoteVerifier:
        for valid_from, v in reversed(self.keys):
            if valid_from <= size:
                return v
        raise DamageError("forged checkpoint", None, f"no ledger key is valid at size {size}")

    def revoked(self, note: str, size: int, where: int | None) -> None:
        """``DamageError("revoked key")`` if ``note`` is vouched for only by a key revoked at
        ``size`` (or signed by a revoked key instead of the key in force there)."""
        if not self.revocations:
            return
        periods = [KeyValidity(v.vkey, f) for f, v in self.keys]
        try:
            verify_checkpoint_note(note, periods, self.revocations)
        except RevokedKeyError as exc:
            raise DamageError("revoked key", where, str(exc)) from exc
        except NoteError:
            return  # not a revocation matter: the caller's own check names it

    def replay(self, seq: int, kind: str, body: dict[str, Any]) -> None:
        try:
            self._replay(seq, kind, body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DamageError("malformed record", seq, f"{kind} record: {exc!r}") from exc

    def _replay(self, seq: int, kind: str, body: dict[str, Any]) -> None:
        if seq == 0:
            if kind != "ledger.genesis":
                raise DamageError("bad genesis", 0, f"first record is {kind!r}")
            self.origin = str(body["origin"])
            self.keys.append((1, _vkey(body["vkey"], 0)))
        elif kind == "ledger.key_rotation":
            old, new = _vkey(body["old_vkey"], seq), _vkey(body["new_vkey"], seq)
            if not self.keys or old != self.keys[-1][1]:
                raise DamageError("bad key rotation", seq, "rotates away from a key not in use")
            try:
                sig = base64.b64decode(str(body["endorsement"]), validate=True)
            except ValueError as exc:
                raise DamageError("bad key rotation", seq, "endorsement is not base64") from exc
            if not old.verify(ROTATION_CONTEXT + new.vkey.encode() + b"\n", sig):
                raise DamageError("bad key rotation", seq, "the old key did not endorse the new")
            self.keys.append((seq + 1, new))
            self.rotations.append((seq, old, new))
        elif kind == REVOCATION_KIND:
            self._revocation(seq, body)
        elif kind == "ledger.payload_purge":
            listed = body["payloads"]
            if not isinstance(listed, list):
                raise TypeError("payloads is not a list")
            for sha in listed:
                self.purge_listed.setdefault(str(sha), seq)  # the first purge is the one


    def _revocation(self, seq: int, body: dict[str, Any]) -> None:
        try:
            rev = KeyRevocation.from_record(body, seq)
        except KeyFileError as exc:
            raise DamageError("bad key revocation", seq, str(exc)) from exc
        vkeys = [v.vkey for _, v in self.keys]
        if not vkeys or rev.endorser_vkey != vkeys[-1]:
            raise DamageError("bad key revocation", seq,
                              f"endorsed by {rev.endorser_vkey}, not by the active key {vkeys[-1:]}")
        if rev.revoked_vkey not in vkeys[:-1]:
            raise DamageError("bad key revocation", seq,
                              f"revokes {rev.revoked_vkey}, not a key the ledger rotated away from")
        i = vkeys.index(rev.revoked_vkey)
        start, until = self.keys[i][0], self.keys[i + 1][0]
        if not start <= rev.from_size <= until:
            raise DamageError("bad key revocation", seq,
                              f"revocation point {rev.from_size} lies outside the key's period "
                              f"({start}..{until})")
        self.revocations.append(rev)


def _pieces(size: int) -> list[tuple[int, int]]:
    return [(a, min(a + _PIECE, size)) for a in range(0, size, _PIECE)]


def _scan_all(
    engine: Engine, size: int, cp_sizes: list[int], workers: int,
    progress: Callable[[int], None] | None,
) -> list[ScanResult]:
    pieces = _pieces(size)
    results: list[ScanResult] = []
    if workers <= 1 or len(pieces) <= 1:
        with engine.connect() as conn:
            for a, b in pieces:
                results.append(scan_range_at(conn, a, b, cp_sizes))
                if progress:
                    progress(b)
        return results
    url = engine.url.render_as_string(hide_password=False)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(scan_range, url, a, b, cp_sizes) for a, b in pieces]
        for fut in futures:
            results.append(fut.result())
            if progress:
                progress(results[-1].end)
    return results


def verify_ledger(
    engine: Engine,
    trusted: Sequence[NoteVerifier] = (),
    *,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    witnessed: Sequence[str] = (),
    max_unsealed: int | None = None,
) -> VerifyReport:
    """Recompute and check everything; raise ``DamageError`` at the first damage found.

    ``witnessed`` are signed checkpoints the examiner already holds: each must be signed by the
    key the ledger's history says was active at its size (a rotation since does not matter), and
    match the log. ``max_unsealed`` bounds how many newest entries may lack a checkpoint
    (entries no checkpoint covers are authenticated by nothing)."""
    store.require_schema(engine)
    started = time.perf_counter()
    report = VerifyReport()
    # One snapshot for everything read here (PostgreSQL: REPEATABLE READ; SQLite: one read
    # transaction), so a ledger being appended to meanwhile is seen at a single size.
    opts = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    with engine.connect().execution_options(**opts) as conn:
        size, _ = store.tail(conn)
        first = conn.exec_driver_sql("SELECT min(seq) FROM ledger_entries").scalar()
        cps = [(int(s), bytes(r), str(n)) for s, r, n in conn.exec_driver_sql(
            "SELECT size, root, note FROM ledger_checkpoints ORDER BY size")]
        stored_keys = [(int(f), str(v)) for f, v in conn.exec_driver_sql(
            "SELECT valid_from_size, vkey FROM ledger_keys ORDER BY valid_from_size")]
        cosigned = [(int(s), str(w), int(t), str(ln)) for s, w, t, ln in conn.exec_driver_sql(
            "SELECT size, witness, timestamp, line FROM ledger_cosignatures ORDER BY size, witness")]
        node_extent = conn.exec_driver_sql(
            "SELECT level, max(idx) FROM ledger_nodes GROUP BY level").fetchall()
        p = store.param(conn)
        # the lowest first_seq outside 0..size-1, in two seeks of ix_ledger_payloads_first_seq
        # (one query for both ranges, OR-ed under one ORDER BY, walks that whole index on SQLite)
        for term, bound in (("<", 0), (">=", size)):
            stray = conn.exec_driver_sql(
                f"SELECT sha256, first_seq FROM ledger_payloads WHERE first_seq {term} {p} "
                "ORDER BY first_seq LIMIT 1", (bound,)).first()
            if stray is not None:
                break
    if size == 0 or first != 0:
        raise DamageError("missing entry" if size == 0 or (first or 0) > 0 else "unexpected entry",
                          0, f"the ledger's entries start at seq {first}, not 0")
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 4)
    extra = []
    for note in witnessed:
        try:
            extra.append(SignedCheckpoint.parse_unverified(note).checkpoint.size)
        except NoteError as exc:
            raise DamageError("forged checkpoint", None, f"a witnessed checkpoint: {exc}") from exc
    sizes = sorted({s for s, _, _ in cps} | {x for x in extra if 0 < x <= size})
    results = _scan_all(engine, size, sizes, n_workers, progress)
    if stray is not None:
        raise DamageError("stray payload", int(stray[1]),
                          f"payload {stray[0]} claims a first seq outside the log (0..{size - 1})")

    damage = next((r.damage for r in results if r.damage is not None), None)
    if damage is not None:  # entries come first: the earliest damaged range names its seq
        raise damage
    history = _History()
    roots = {s: r for res in results for s, r in res.roots}
    last = 0
    for res in results:
        for seq, kind, body in res.specials:
            history.replay(seq, kind, body)
    for cp_size, root_col, note in cps:
        if cp_size > size:
            raise DamageError("truncated log", size,
                              f"a signed checkpoint covers {cp_size} entries, {size} are stored")
        key = history.active(cp_size)
        history.revoked(note, cp_size, cp_size - 1)
        try:
            text, _ = open_note(note, [key])
            cp = Checkpoint.from_text(text)
        except NoteError as exc:
            raise DamageError("forged checkpoint", cp_size - 1,
                              f"checkpoint at size {cp_size} is not signed by {key.vkey}: {exc}"
                              ) from exc
        if cp.size != cp_size or cp.root != root_col or cp.origin != history.origin:
            raise DamageError("forged checkpoint", cp_size - 1,
                              f"checkpoint row at size {cp_size} disagrees with its signed note")
        if cp.root != roots.get(cp_size):
            raise DamageError(
                "root mismatch", last,
                f"entries {last}..{cp_size - 1} do not hash to the root signed at size {cp_size} "
                "(entries re-hashed or rewritten)",
            )
        last = cp_size
        report.checkpoints += 1
    _check_key_handovers(history, {c: n for c, _, n in cps})
    report.witnesses = check_cosignature_rows(cosigned, {c: n for c, _, n in cps if c <= size})
    report.cosignatures = len(cosigned)
    _check_witnessed(witnessed, history, roots, size)
    for level, max_idx in node_extent:
        if (int(max_idx) + 1) << int(level) > size:
            raise DamageError("stray Merkle node", int(max_idx) << int(level),
                              f"level {level}, index {max_idx} lies beyond the log")
    for res in results:
        report.payloads_present += res.payloads_present
        for sha, first, purge_seq in res.purged:
            if purge_seq >= size:
                continue  # purged after this verification's snapshot: not part of this log
            if history.purge_listed.get(sha) != purge_seq:
                raise DamageError("payload erased without a purge record", first,
                                  f"payload {sha} is gone but no ledger.payload_purge lists it")
            report.purged.append(PurgedPayload(sha, first, purge_seq))
    derived = [(f, v.vkey) for f, v in history.keys]
    if stored_keys != derived:
        raise DamageError("substituted key", None,
                          f"ledger_keys holds {stored_keys}, the ledger's records say {derived}")
    _conclude(report, history, size, last, trusted)
    _warn_steps_back(report, results)
    if max_unsealed is not None and report.unsealed_entries > max_unsealed:
        raise DamageError(
            "unsealed tail", last,
            f"{report.unsealed_entries} newest entries are covered by no signed checkpoint "
            f"(more than the {max_unsealed} allowed): nothing authenticates them")
    report.seconds = time.perf_counter() - started
    return report


def _warn_steps_back(report: VerifyReport, results: Sequence[ScanResult]) -> None:
    """A warning where ``recorded_at`` decreases along seq (sealed so; not damage)."""
    steps = sum(r.steps_back for r in results)
    first = next((r.first_step_back for r in results if r.first_step_back is not None), None)
    if first is None:
        return
    seq, before, at = first
    report.warnings.append(
        f"recorded_at steps back in time at {steps} entr{'y' if steps == 1 else 'ies'}, first at seq {seq} "
        f"({at}, after {before} at seq {seq - 1}): trace queries by time (since, until) assume it never "
        "decreases and may leave out entries near such a step; every commit now takes at least the log's "
        "last time, so only entries an older writer sealed can do this")


def _check_key_handovers(history: _History, notes: dict[int, str]) -> None:
    """Every key is vouched for by a checkpoint it signed itself: the genesis key the one of
    size 1; each rotation the one right after it, signed by the old and the new key."""
    first = history.keys[0][1]
    try:
        open_note(notes[1], [first])
    except (KeyError, NoteError) as exc:
        raise DamageError("forged checkpoint", 0,
                          f"no checkpoint of size 1 signed by the genesis key {first.vkey}") from exc
    for seq, old, new in history.rotations:
        note = notes.get(seq + 1)
        try:
            if note is None:
                raise NoteError("missing")
            for key in (old, new):
                open_note(note, [key])
        except NoteError as exc:
            raise DamageError(
                "bad key rotation", seq,
                f"the rotation to {new.vkey} has no checkpoint of size {seq + 1} co-signed by "
                f"the old and the new key ({exc})") from exc


def _check_witnessed(witnessed: Sequence[str], history: _History, roots: dict[int, bytes],
                     size: int) -> None:
    """Each held checkpoint must carry the signature of the key that was active at its size, as
    the ledger's own key history proves it (genesis key, then each rotation endorsed by the key
    before it; ``_conclude`` ties that history to the pinned key). So a note kept from before a
    rotation verifies after it, and a retired key cannot vouch for a size after its retirement."""
    for note in witnessed:
        try:
            claimed = SignedCheckpoint.parse_unverified(note).checkpoint
        except NoteError as exc:
            raise DamageError("forged checkpoint", None, f"a witnessed checkpoint: {exc}") from exc
        if claimed.origin != history.origin:
            raise DamageError("forged checkpoint", None,
                              f"witnessed checkpoint is for {claimed.origin!r}, not this log")
        key = history.active(claimed.size)
        history.revoked(note, claimed.size, None)
        try:
            text, _ = open_note(note, [key])
            cp = Checkpoint.from_text(text)
        except NoteError as exc:
            raise DamageError("forged checkpoint", None,
                              f"a witnessed checkpoint of size {claimed.size} is not signed by "
                              f"{key.vkey}, the ledger's key at that size: {exc}") from exc
        if cp.size > size:
            raise DamageError("truncated log", size,
                              f"a witnessed checkpoint covers {cp.size} entries, {size} are stored")
        if roots.get(cp.size) != cp.root:
            raise DamageError("forked log", cp.size - 1,
                              f"the log's root at size {cp.size} differs from the witnessed one")


def _conclude(report: VerifyReport, history: _History, size: int, last: int,
              trusted: Sequence[NoteVerifier]) -> None:
    report.origin = history.origin
    report.size = size
    report.keys = [v.vkey for _, v in history.keys]
    report.revoked_keys = [{"vkey": r.revoked_vkey, "from_size": r.from_size, "seq": r.seq,
                            "reason": r.reason, "endorser_vkey": r.endorser_vkey}
                           for r in history.revocations]
    report.latest_checkpoint_size = last
    report.unsealed_entries = size - last
    if report.unsealed_entries:
        report.warnings.append(
            f"{report.unsealed_entries} newest entries are not yet covered by a signed checkpoint"
        )
    if trusted:
        pinned = [t.vkey for t in trusted if t.vkey in report.keys]
        if not pinned:
            raise DamageError("untrusted key", None,
                              f"none of the ledger's keys {report.keys} is the pinned trusted key")
        report.trusted_key = pinned[0]
    else:
        report.warnings.append(
            "no trusted key pinned: signatures were checked against the keys the ledger records "
            "about itself, which a forger who rewrote everything could also replace"
        )
