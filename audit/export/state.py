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

import orjson
from sqlalchemy import Connection

from audit.decide.summary import SUMMARY_KIND
from audit.export.select import EntryRow
from audit.state.delta import DELTA_KIND, Delta, parse_delta
from ledger import store

__all__ = ["STATE_INDEX", "STATE_RECORDS", "StateSelection", "select_state"]

STATE_RECORDS, STATE_INDEX = "state/records.jsonl", "state/index.jsonl"
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

    def manifest(self) -> dict[str, int | None]:
        return {"from_seq": self.from_seq, "records": len(self.rows), "deltas": self.deltas,
                "summaries": self.summaries, "unsealed_origin": self.unsealed}


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


def select_state(conn: Connection, decisions: array[int], carried: array[int]) -> StateSelection:
    """The state entries a bundle of the exported ``decisions`` (ascending seqs) carries, leaving
    out the seqs of ``carried`` (ascending: what ``records.jsonl`` holds). ``StateDeltaError``
    where a sealed delta does not follow its schema (``ledger verify`` names it too)."""
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
    for r in heapq.merge(_rows(conn, SUMMARY_KIND, origin, end), _rows(conn, DELTA_KIND, origin, end),
                         key=lambda r: r.seq):
        at = bisect_left(carried, r.seq)
        if at < len(carried) and carried[at] == r.seq:  # a line of records.jsonl already
            continue
        out.rows.append(r)
        if r.kind == DELTA_KIND:
            out.deltas += 1
        else:
            out.summaries += 1
    return out
