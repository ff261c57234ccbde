"""Recompute one aligned range of the log: leaves, chain links, Merkle nodes, index columns.

It also notes where ``recorded_at`` steps back along seq. That is not damage (the bytes are
sealed as they are), but trace queries by time window rely on it never decreasing, which every
commit guarantees (``Ledger._commit`` takes at least the log's last time); an older writer did
not, and ``verify_ledger`` warns where one left such a step.

``verify.py`` runs several of these side by side (one per core) and stitches them together.
A range starting at ``start > 0`` trusts the stored chain hash at ``start - 1`` and the
stored nodes left of ``start`` as its starting point; the range to its left checks exactly
those, so the whole log is still recomputed from its leaves.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection

from ledger import store
from ledger.errors import DamageError
from ledger.merkle import CompactRange, perfect_subtrees

__all__ = ["CHUNK_LEVEL", "ScanResult", "scan_range", "scan_range_at"]

CHUNK_LEVEL = 14
CHUNK = 1 << CHUNK_LEVEL
ZERO_CHAIN = bytes(32)
_PAYLOAD_KEY = b',"payload_sha256":"'
_HEX64 = re.compile(rb"[0-9a-f]{64}")


@dataclass
class ScanResult:
    start: int
    end: int
    damage: DamageError | None = None
    roots: list[tuple[int, bytes]] = field(default_factory=list)
    specials: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    payloads_present: int = 0
    purged: list[tuple[str, int, int]] = field(default_factory=list)
    steps_back: int = 0  # entries whose recorded_at is earlier than the entry before them
    first_step_back: tuple[int, str, str] | None = None  # (seq, the time before it, its own time)


def _first_diff(a: Sequence[object], b: Sequence[object]) -> int:
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


class _Scanner:
    def __init__(self, conn: Connection, start: int, end: int, cp_sizes: Sequence[int]) -> None:
        self.conn = conn
        self.cur = store.raw_cursor(conn)
        self.p = store.param(conn)
        self.res = ScanResult(start, end)
        self.cps = [s for s in cp_sizes if start < s <= end]
        if start:
            self.prev = store.chain_at(conn, start - 1)
            wanted = perfect_subtrees(0, start)
            got = store.perfect_hashes(conn, wanted)
            self.cr = CompactRange(start, [got[w] for w in wanted])
            row = self.cur.execute(
                f"SELECT recorded_at FROM ledger_entries WHERE seq = {self.p}", (start - 1,)).fetchone()
            self.prev_at: str | None = None if row is None else str(row[0])  # checked by the left range
        else:
            self.prev_at = None
            self.prev = ZERO_CHAIN
            self.cr = CompactRange()

    def high_node(self, level: int, idx: int, h: bytes) -> None:
        if level % store.STRATUM:
            return
        row = self.cur.execute(
            f"SELECT hash FROM ledger_nodes WHERE level = {self.p} AND idx = {self.p}", (level, idx)
        ).fetchone()
        self._check_node(level, idx, h, None if row is None else bytes(row[0]))

    @staticmethod
    def _check_node(level: int, idx: int, h: bytes, stored: bytes | None) -> None:
        first = idx << level
        if stored is None:
            raise DamageError("missing Merkle node", first, f"level {level}, index {idx}")
        if stored != h:
            raise DamageError(
                "altered Merkle node", first,
                f"level {level}, index {idx} (seq {first}..{first + (1 << level) - 1}) "
                "does not match the entries",
            )

    def chunk(self, pos: int, hi: int) -> None:
        sha = hashlib.sha256
        rows = self.cur.execute(
            "SELECT record, leaf_hash, chain_hash, recorded_at FROM "
            f"ledger_entries WHERE seq >= {self.p} AND seq < {self.p} ORDER BY seq", (pos, hi)
        ).fetchall()
        if len(rows) != hi - pos:  # seq is a unique integer: hi - pos rows means no gap
            seqs = [int(s) for (s,) in self.cur.execute(
                f"SELECT seq FROM ledger_entries WHERE seq >= {self.p} AND seq < {self.p} "
                "ORDER BY seq", (pos, hi)).fetchall()]
            i = next((i for i, s in enumerate(seqs) if s != pos + i), len(seqs))
            raise DamageError("missing entry", pos + i, f"no entry is stored at seq {pos + i}")
        recs = [r[0] for r in rows]
        for i, x in enumerate(recs):
            if type(x) is not bytes:  # SQLite hands back TEXT that an UPDATE wrote as it is
                raise DamageError("altered record", pos + i, f"the record column holds {type(x).__name__}, "
                                  "not the sealed bytes")
        leaves = [sha(b"\x00" + x).digest() for x in recs]
        stored = [r[1] for r in rows]
        if leaves != stored:
            i = _first_diff(leaves, stored)
            raise DamageError("altered record", pos + i, "record bytes do not match the leaf hash")
        prev = self.prev
        chains = []
        for lf in leaves:
            prev = sha(prev + lf).digest()
            chains.append(prev)
        stored = [r[2] for r in rows]
        if chains != stored:
            i = _first_diff(chains, stored)
            raise DamageError(
                "broken chain", pos + i,
                "chain hash does not follow from the previous entry "
                "(an entry at or before it was inserted, removed, reordered or re-hashed)",
            )
        self.prev = prev
        self._columns(pos, hi)
        self._times(pos, [r[3] for r in rows])
        self._merkle(pos, hi, leaves)
        self._payloads(pos, hi, recs)

    def _columns(self, pos: int, hi: int) -> None:
        bad = store.first_bad_index_row(self.conn, pos, hi)
        if bad is not None:
            raise DamageError(
                "altered index column", bad,
                "kind, trace_id or recorded_at column differs from the sealed record",
            )
        for seq, kind, rec in store.specials(self.conn, pos, hi):
            try:
                body = orjson.loads(rec)["record"]
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise DamageError("malformed record", seq, str(exc)) from exc
            self.res.specials.append((seq, kind, body))

    def _times(self, pos: int, times: list[str]) -> None:
        """Count the entries whose ``recorded_at`` (checked against the sealed bytes by ``_columns``)
        is earlier than the one before; the fixed-width UTC form orders as text orders."""
        prev = self.prev_at
        self.prev_at = times[-1] if times else prev
        if all(map(operator.le, times, times[1:])) and (prev is None or not times or prev <= times[0]):
            return
        for seq, at in enumerate(times, pos):
            if prev is not None and at < prev:
                if self.res.first_step_back is None:
                    self.res.first_step_back = (seq, prev, at)
                self.res.steps_back += 1
            prev = at

    def _merkle(self, pos: int, hi: int, leaves: list[bytes]) -> None:
        sha = hashlib.sha256
        levels = [leaves]
        while len(levels[-1]) > 1:
            lv = levels[-1]
            levels.append([sha(b"\x01" + lv[i] + lv[i + 1]).digest()
                           for i in range(0, len(lv) - 1, 2)])
        for k in range(store.STRATUM, len(levels), store.STRATUM):
            got = levels[k]
            if not got:
                continue
            base = pos >> k
            rows = self.cur.execute(
                f"SELECT idx, hash FROM ledger_nodes WHERE level = {self.p} AND idx >= {self.p} "
                f"AND idx < {self.p} ORDER BY idx", (k, base, base + len(got)),
            ).fetchall()
            stored = {int(i): h.encode() if isinstance(h, str) else bytes(h) for i, h in rows}
            for j, h in enumerate(got):
                self._check_node(k, base + j, h, stored.get(base + j))
        for s in self.cps:
            if pos < s <= hi:
                tmp = self.cr.copy()
                for lvl, idx in perfect_subtrees(pos, s):
                    tmp.append_subtree(levels[lvl][idx - (pos >> lvl)], lvl)
                self.res.roots.append((s, tmp.root()))
        for lvl, idx in perfect_subtrees(pos, hi):
            self.cr.append_subtree(levels[lvl][idx - (pos >> lvl)], lvl, self.high_node)

    def _payloads(self, pos: int, hi: int, recs: list[bytes]) -> None:
        refs: dict[str, int] = {}
        for seq, rec in enumerate(recs, pos):
            # Only the envelope's own member counts: it follows '{"kind":"<kind>"' directly
            # (kinds hold no quote), so a "payload_sha256" key inside the record is ignored.
            at = rec.find(b'"', 9)
            if rec.startswith(_PAYLOAD_KEY, at + 1):
                sha = rec[at + 20 : at + 84]
                if not _HEX64.fullmatch(sha):
                    raise DamageError("malformed record", seq, "payload_sha256 is not 64 hex digits")
                refs.setdefault(sha.decode(), seq)
        p = self.p
        for sha, data, first_seq, purge_seq in self.cur.execute(
            "SELECT sha256, data, first_seq, purge_seq FROM ledger_payloads "
            f"WHERE first_seq >= {p} AND first_seq < {p}", (pos, hi),
        ).fetchall():
            if refs.pop(sha, None) != first_seq:
                raise DamageError("stray payload", int(first_seq),
                                  f"payload {sha} is not first referenced by this entry")
            if data is not None:
                if hashlib.sha256(bytes(data)).hexdigest() != sha:
                    raise DamageError("altered payload", int(first_seq), f"payload {sha} changed")
                self.res.payloads_present += 1
            else:
                self.res.purged.append((sha, int(first_seq), -1 if purge_seq is None else int(purge_seq)))
        if refs:  # referenced here, first stored earlier -- or deleted
            shas = list(refs)
            found = {r[0] for r in self.cur.execute(
                f"SELECT sha256 FROM ledger_payloads WHERE sha256 IN ({', '.join([p] * len(shas))})",
                tuple(shas),
            ).fetchall()}
            missing = sorted((refs[s], s) for s in shas if s not in found)
            if missing:
                raise DamageError("missing payload", missing[0][0], f"payload {missing[0][1]} is gone")


def scan_range_at(conn: Connection, start: int, end: int, cp_sizes: Sequence[int]) -> ScanResult:
    """Scan ``[start, end)`` (``start`` a multiple of ``CHUNK``) on an open connection."""
    try:
        s = _Scanner(conn, start, end, cp_sizes)
    except (DamageError, LookupError) as exc:
        damage = exc if isinstance(exc, DamageError) else DamageError(
            "missing Merkle node", start, str(exc))
        return ScanResult(start, end, damage=damage)
    try:
        pos = start
        while pos < end:
            hi = min((pos // CHUNK + 1) * CHUNK, end)
            s.chunk(pos, hi)
            pos = hi
    except DamageError as exc:
        s.res.damage = exc
    return s.res


def scan_range(url: str, start: int, end: int, cp_sizes: Sequence[int]) -> ScanResult:
    """Worker-process entry point: own engine, one read transaction."""
    engine = store.connect(url)
    try:
        with engine.connect() as conn:
            return scan_range_at(conn, start, end, cp_sizes)
    finally:
        engine.dispose()
