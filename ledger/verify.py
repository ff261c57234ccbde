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
from ledger.checkpoint import Checkpoint
from ledger.errors import DamageError, KeyFileError, NoteError
from ledger.note import NoteVerifier, open_note
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

    def active(self, size: int) -> NoteVerifier:
        for valid_from, v in reversed(self.keys):
            if valid_from <= size:
                return v
        raise DamageError("forged checkpoint", None, f"no ledger key is valid at size {size}")

    def replay(self, seq: int, kind: str, body: dict[str, Any]) -> None:
        if seq == 0:
            if kind != "ledger.genesis":
                raise DamageError("bad genesis", 0, f"first record is {kind!r}")
            self.origin = str(body.get("origin", ""))
            self.keys.append((1, _vkey(body.get("vkey"), 0)))
        elif kind == "ledger.key_rotation":
            old, new = _vkey(body.get("old_vkey"), seq), _vkey(body.get("new_vkey"), seq)
            if not self.keys or old != self.keys[-1][1]:
                raise DamageError("bad key rotation", seq, "rotates away from a key not in use")
            try:
                sig = base64.b64decode(str(body.get("endorsement")), validate=True)
            except ValueError as exc:
                raise DamageError("bad key rotation", seq, "endorsement is not base64") from exc
            if not old.verify(ROTATION_CONTEXT + new.vkey.encode() + b"\n", sig):
                raise DamageError("bad key rotation", seq, "the old key did not endorse the new")
            self.keys.append((seq + 1, new))
        elif kind == "ledger.payload_purge":
            for sha in body.get("payloads", []):
                self.purge_listed[str(sha)] = seq


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
) -> VerifyReport:
    """Recompute and check everything; raise ``DamageError`` at the first damage found."""
    store.require_schema(engine)
    started = time.perf_counter()
    report = VerifyReport()
    with engine.connect() as conn:
        size, _ = store.tail(conn)
        first = conn.exec_driver_sql("SELECT min(seq) FROM ledger_entries").scalar()
        cps = [(int(s), bytes(r), str(n)) for s, r, n in conn.exec_driver_sql(
            "SELECT size, root, note FROM ledger_checkpoints ORDER BY size")]
        stored_keys = [(int(f), str(v)) for f, v in conn.exec_driver_sql(
            "SELECT valid_from_size, vkey FROM ledger_keys ORDER BY valid_from_size")]
        node_extent = conn.exec_driver_sql(
            "SELECT level, max(idx) FROM ledger_nodes GROUP BY level").fetchall()
    if size == 0 or first != 0:
        raise DamageError("missing entry" if size == 0 or (first or 0) > 0 else "unexpected entry",
                          0, f"the ledger's entries start at seq {first}, not 0")
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, 4)
    results = _scan_all(engine, size, [s for s, _, _ in cps], n_workers, progress)

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
    for level, max_idx in node_extent:
        if (int(max_idx) + 1) << int(level) > size:
            raise DamageError("stray Merkle node", int(max_idx) << int(level),
                              f"level {level}, index {max_idx} lies beyond the log")
    for res in results:
        report.payloads_present += res.payloads_present
        for sha, first, purge_seq in res.purged:
            if history.purge_listed.get(sha) != purge_seq:
                raise DamageError("payload erased without a purge record", first,
                                  f"payload {sha} is gone but no ledger.payload_purge lists it")
            report.purged.append(PurgedPayload(sha, first, purge_seq))
    derived = [(f, v.vkey) for f, v in history.keys]
    if stored_keys != derived:
        raise DamageError("substituted key", None,
                          f"ledger_keys holds {stored_keys}, the ledger's records say {derived}")
    _conclude(report, history, size, last, trusted)
    report.seconds = time.perf_counter() - started
    return report


def _conclude(report: VerifyReport, history: _History, size: int, last: int,
              trusted: Sequence[NoteVerifier]) -> None:
    report.origin = history.origin
    report.size = size
    report.keys = [v.vkey for _, v in history.keys]
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
