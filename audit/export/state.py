"""The feature state a ``sealtrail.bundle/7`` carries, so that the verifier re-derives each decision
from its message (``audit.bundle.rederive``; docs/bundle-format.md, "State").

A decision's features are a function of two things: its payment, and the feature state it was
made on. That state is an empty one caught up from a seq ``F`` (the sealing decider's origin, which
its ``sealtrail.state-delta/2`` names as ``state_from``) through the state deltas of every decision
from ``F`` up to the decision (``audit.state.delta``). So the bundle carries, beside its records,
every ``state.delta`` and every ``decision.summary`` sealed from the first summary at or after the
earliest origin its decisions name, up to the delta of its last decision; the summaries' chain
proves that no commit, and so no delta, was left out between them. Entries that ``records.jsonl``
already holds (the summaries that bracket and fill the window) are not repeated.

Deltas name accounts by their keyed identifiers only, with integer times and amounts: the
decisions outside the export's filters appear only as such, never by name or with free text.

The cost: the deltas since the origin, about 150 bytes a decision before compression. A decider
that ran a year from an empty ledger carries a year of deltas; a sealed state snapshot carried with
its per-account state would bound that, and is not carried yet.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.decide.account_secret import load_state_key
from audit.decide.summary import SUMMARY_KIND
from audit.errors import StateSnapshotError
from audit.export.select import EntryRow
from audit.state.delta import DELTA_KIND, Delta, parse_delta
from audit.state.replay import catch_up
from audit.state.sealed import SNAPSHOT_KIND, SealedSnapshot, parse_snapshot
from audit.state.snapshot import keyed_state_bytes
from audit.state.tree import state_tree
from inference.features import FeatureExtractor
from inference.graph import CountedGraph, GraphFeatures
from inference.velocity import VelocityState, key_id
from ledger import store

__all__ = ["STATE_INDEX", "STATE_RECORDS", "STATE_SNAPSHOT", "StateSelection", "select_state"]

STATE_RECORDS, STATE_INDEX, STATE_SNAPSHOT = "state/records.jsonl", "state/index.jsonl", "state/snapshot.bin"
_COLS = "seq, kind, record, leaf_hash, chain_hash, trace_id"
_PAGE = 5000


@dataclass
class StateSelection:
    """What the bundle carries of the state: ``rows`` in seq order, none of them a line of
    ``records.jsonl``."""

    from_seq: int | None  # the earliest origin an exported decision's delta names (None: none names one)
    rows: list[EntryRow] = field(default_factory=list)
    deltas: int = 0
    summaries: int = 0
    unsealed: int = 0  # exported decisions whose state origin no delta states (sealed by earlier releases)
    snapshot: tuple[int, int] | None = None  # (seq, covers_seq) of the sealed snapshot carried, if one is
    snapshot_data: bytes | None = None  # its state (``sealtrail.feature-state/1``, keyed)

    def manifest(self) -> dict[str, Any]:
        snap = None if self.snapshot is None else {"covers_seq": self.snapshot[1], "file": STATE_SNAPSHOT,
                                                   "seq": self.snapshot[0]}
        return {"from_seq": self.from_seq, "records": len(self.rows), "deltas": self.deltas,
                "summaries": self.summaries, "snapshot": snap, "unsealed_origin": self.unsealed}


def _page(conn: Connection, kind: str, lo: int, hi: int | None) -> list[EntryRow]:
    """A page of the entries of ``kind`` from ``lo`` on (before ``hi``), in seq order (the
    ``(kind, seq)`` index)."""
    p = store.param(conn)
    where = f"kind = {p} AND seq >= {p}" + ("" if hi is None else f" AND seq < {p}")
    args = (kind, lo) if hi is None else (kind, lo, hi)
    page = conn.exec_driver_sql(f"SELECT {_COLS} FROM ledger_entries WHERE {where} ORDER BY seq "
                                f"LIMIT {_PAGE}", args).all()
    return [EntryRow(int(s), str(k), bytes(r), bytes(lh), bytes(ch), str(t)) for s, k, r, lh, ch, t in page]


def _rows(conn: Connection, kind: str, lo: int, hi: int) -> Iterator[EntryRow]:
    """Every entry of ``kind`` with ``lo <= seq < hi``, in seq order."""
    while page := _page(conn, kind, lo, hi):
        yield from page
        lo = page[-1].seq + 1


def _delta(row: EntryRow) -> Delta:
    return parse_delta(row.seq, orjson.loads(row.record)["record"])


def _snapshot(conn: Connection, engine: Engine, origin: int, first: int,
              end: int) -> tuple[EntryRow, SealedSnapshot, bytes] | None:
    """The latest sealed snapshot of the state caught up from ``origin`` that covers less than
    ``first``, with that state's bytes recomputed from the deltas and checked against its root
    (None: there is none, or the deltas alone do not give it). Snapshots under another state key
    than the ledger's are passed over; one whose state does not rebuild gives None (``ledger
    verify --state-roots`` names it), so no sealed snapshot can stop an export."""
    key = load_state_key(engine)
    kid = key_id(key)
    best: tuple[EntryRow, SealedSnapshot] | None = None
    for e in _rows(conn, SNAPSHOT_KIND, origin, end):
        try:
            s = parse_snapshot(e.seq, orjson.loads(e.record)["record"])
        except (StateSnapshotError, KeyError, TypeError, orjson.JSONDecodeError):
            continue  # ``ledger verify`` names it
        if s.from_seq == origin and s.covers_seq < first and s.state_key_id == kid and (
                best is None or s.covers_seq > best[1].covers_seq):
            best = (e, s)
    if best is None:
        return None
    row, sealed = best
    graph = GraphFeatures(graph=CountedGraph) if sealed.counted else None  # leaf/1: the graph/1 counts
    extractor = FeatureExtractor(state=VelocityState(key), graph=graph)
    r = catch_up(engine, extractor, origin, sealed.covers_seq + 1)
    if r.replayed != r.from_deltas or r.missing_payload or r.foreign_deltas:
        return None
    data = keyed_state_bytes(engine, extractor)
    try:
        if sealed.matches(state_tree(data, sealed.state_key_id, sealed.leaf), origin) is not None:
            return None
    except StateSnapshotError:
        return None
    return row, sealed, data


def select_state(conn: Connection, decisions: array[int], carried: array[int], engine: Engine | None = None,
                 snapshot: bool | None = None) -> StateSelection:
    """The state entries a bundle of the exported ``decisions`` (ascending seqs) carries, leaving
    out the seqs of ``carried`` (ascending: what ``records.jsonl`` holds). ``StateDeltaError``
    where a sealed delta does not follow its schema (``ledger verify`` names it too).

    With ``engine``, where every exported decision's state has one origin and a snapshot of that
    state was sealed before the first of them, the snapshot's state (its bytes, checked against
    its sealed root) stands in for the deltas before it when it is smaller (``snapshot`` True:
    whenever there is one; False: never)."""
    if not decisions:
        return StateSelection(None)
    first, last = decisions[0], decisions[-1]
    covering: list[Delta] = []  # the deltas from the first decision on, up to the one of the last
    seq = first
    while True:
        page = _page(conn, DELTA_KIND, seq, None)
        covering += [_delta(r) for r in page]
        if not page or covering[-1].first_seq + len(covering[-1].entries) > last:
            break
        seq = page[-1].seq + 1
    origins: list[int] = []
    unsealed = 0
    i = 0
    for s in decisions:  # each exported decision's delta: the first whose range reaches it
        while i < len(covering) and covering[i].first_seq + len(covering[i].entries) <= s:
            i += 1
        d = covering[i] if i < len(covering) and covering[i].first_seq <= s else None
        if d is None or d.state_from is None:
            unsealed += 1
        else:
            origins.append(d.state_from)
    if not origins:
        return StateSelection(None, unsealed=unsealed)
    origin = min(origins)
    # up to the delta of the last exported decision: nothing after it feeds a state re-derived on
    end = next((d.seq + 1 for d in covering if d.first_seq <= last < d.first_seq + len(d.entries)), last + 1)
    out = StateSelection(origin, unsealed=unsealed)
    both = heapq.merge(_rows(conn, SUMMARY_KIND, origin, end), _rows(conn, DELTA_KIND, origin, end),
                       key=lambda r: r.seq)
    rows = [r for r in both if not _held(carried, r.seq)]
    snap = None if engine is None or snapshot is False or len(set(origins)) != 1 else \
        _snapshot(conn, engine, origin, first, end)
    if snap is not None:
        row, sealed, data = snap
        before = [r for r in rows if r.seq <= sealed.covers_seq]
        if snapshot or len(data) < sum(len(r.record) for r in before):
            rows = sorted([row, *(r for r in rows if r.seq > sealed.covers_seq)], key=lambda r: r.seq)
            out.snapshot, out.snapshot_data = (sealed.seq, sealed.covers_seq), data
    out.rows = rows
    out.deltas = sum(r.kind == DELTA_KIND for r in rows)
    out.summaries = sum(r.kind == SUMMARY_KIND for r in rows)
    return out


def _held(carried: array[int], seq: int) -> bool:
    """Whether ``seq`` is a line of ``records.jsonl`` already."""
    at = bisect_left(carried, seq)
    return at < len(carried) and carried[at] == seq
