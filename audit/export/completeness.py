"""The summaries a bundle carries to prove its selection complete (``sealtrail.bundle/2``).

The decisions of a time window are bracketed by the ``decision.summary`` chain
(``audit.decide.summary``): ``left`` is the newest summary recorded before the window, ``right``
the oldest recorded at or after its end, and every summary between them (recorded inside it)
goes into the bundle with both neighbours. Since ``recorded_at`` never decreases along the log,
these summaries speak for every decision recorded in the window. Before reading, an empty
summary is sealed when the log holds none recorded at or after the window's end (a window that
ended before now then always has its right neighbour; one that ends later is proven only up to
that summary's time, and the bundle says so).

The exporter checks its own selection against the summaries before writing anything: a decision
a summary says the filters select that the selection did not pick (or the reverse) refuses the
export naming the seq (``DerivedRowError``, table ``decision.summary``): the verifier would fail
such a bundle. Refusals likewise (``sealtrail.bundle/4``): where the selection is the whole window,
the refusals it picked must be exactly those the version 2 summaries inside the window speak for
(refusals sealed before the first version 2 summary of the bracket are not summarised: not judged).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.decide.account_secret import read_keyer, sealing_tail
from audit.decide.summary import (
    SUMMARY_KIND,
    SUMMARY_SCHEMA_V1,
    AccountKeyer,
    Summary,
    entry_matches,
    parse_summary,
)
from audit.errors import DerivedRowError, ExportUnavailableError, SummaryError
from audit.export.select import EntryRow, ExportFilters
from ledger import store
from ledger.append import Ledger
from ledger.jcs import Jcs

__all__ = ["Bracket", "bracket", "check_selection", "seal_right_edge"]

_COLS = "seq, kind, record, leaf_hash, chain_hash, trace_id"
_PAGE = 64  # summaries of 1,024 decisions are ~120 kB each: a page stays ~8 MB
_ENTRY_START = b'{"accounts":'
_V1 = b'"schema":"' + SUMMARY_SCHEMA_V1.encode() + b'"'
_REFUSAL_ENTRY = b'{"refusal":'


def _keyer(engine: Engine) -> AccountKeyer:
    with engine.connect() as conn:
        return read_keyer(conn)


def seal_right_edge(engine: Engine, ledger: Ledger, f: ExportFilters) -> int | None:
    """Seal an empty summary unless one recorded at or after ``f.end`` exists; its seq, or None."""
    p = "?" if engine.dialect.name == "sqlite" else "%s"
    with engine.connect() as conn:
        newest = conn.exec_driver_sql(
            f"SELECT recorded_at FROM ledger_entries WHERE kind = {p} ORDER BY seq DESC LIMIT 1",
            (SUMMARY_KIND,)).scalar()
    if newest is not None and str(newest) >= f.end:
        return None
    keyer = _keyer(engine)
    (receipt,) = ledger.append_many([], tail=sealing_tail(keyer.key_id, Jcs(b"[]")))
    return receipt.seq


@dataclass
class Bracket:
    """The summaries ``left`` .. ``right`` (inclusive; either may be None) and what they select.
    ``rows`` streams them (a page at a time: bounded memory however many), tallying as it goes."""

    left: int | None = None
    right: int | None = None
    account_key_id: str | None = None  # the secret the account filter was keyed under
    account_key: str | None = None
    expected: array[int] = field(default_factory=lambda: array("q"))  # decision seqs they select
    covered_from: int | None = None  # first decision seq any summary of the bundle speaks for
    refusals: array[int] = field(default_factory=lambda: array("q"))  # refusal seqs they speak for, inside
    refusals_from: int | None = None  # seq of the first version 2 summary (refusals summarised from there)
    unkeyed: int = 0  # summaries under another secret: their account filter cannot be applied
    count: int = 0
    first: int | None = None
    last: int | None = None
    rows: Iterator[EntryRow] = field(default_factory=lambda: iter(()))

    def manifest(self) -> dict[str, Any]:
        return {"summaries": self.count, "first_summary_seq": self.first, "last_summary_seq": self.last,
                "left": self.left, "right": self.right, "account_key_id": self.account_key_id,
                "account_key": self.account_key}


def _first_seq_at(conn: Connection, t: str) -> int:
    """The first seq recorded at or after ``t`` (the log's size if none is): a binary search of
    the entries by seq, one primary-key lookup a step, since recorded_at never decreases along
    the log. The entries have no index on recorded_at, and the trace index is not trusted here.
    A missing entry counts as before ``t``: a seq too high only lets the caller's search read
    further back; one too low would hide the summary it looks for."""
    p = store.param(conn)
    lo, hi = 0, store.tail(conn)[0]
    while lo < hi:
        mid = (lo + hi) // 2
        at = conn.exec_driver_sql(f"SELECT recorded_at FROM ledger_entries WHERE seq = {p}", (mid,)).scalar()
        if at is None or str(at) < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bracket(conn: Connection, engine: Engine, f: ExportFilters) -> Bracket:
    """The bracketing summaries of ``f``'s window, read in ``conn``'s snapshot as ``rows`` is
    consumed (in seq order)."""
    p = store.param(conn)
    # The newest summary before the window lies before its first entry: found from there, the
    # search reads one index row, not every summary sealed since the window began.
    left = conn.exec_driver_sql(
        f"SELECT seq FROM ledger_entries WHERE kind = {p} AND seq < {p} AND recorded_at < {p} "
        "ORDER BY seq DESC LIMIT 1", (SUMMARY_KIND, _first_seq_at(conn, f.start), f.start)).scalar()
    right = conn.exec_driver_sql(
        f"SELECT seq FROM ledger_entries WHERE kind = {p} AND seq > {p} AND recorded_at >= {p} "
        "ORDER BY seq LIMIT 1", (SUMMARY_KIND, -1 if left is None else int(left), f.end)).scalar()
    b = Bracket(left=None if left is None else int(left), right=None if right is None else int(right))
    if f.account is not None:
        keyer = _keyer(engine)
        b.account_key_id, b.account_key = keyer.key_id, keyer.key(f.account)
    b.rows = _rows(conn, f, b)
    return b


def _rows(conn: Connection, f: ExportFilters, b: Bracket) -> Iterator[EntryRow]:
    p = store.param(conn)
    every = f.decision is None and f.rule is None and f.account is None
    after = -1 if b.left is None else b.left - 1
    top = sys.maxsize if b.right is None else b.right
    while True:
        page = conn.exec_driver_sql(
            f"SELECT {_COLS} FROM ledger_entries WHERE kind = {p} AND seq > {p} AND seq <= {p} "
            f"ORDER BY seq LIMIT {_PAGE}", (SUMMARY_KIND, after, top)).all()
        for s, k, rec, leaf, chain, tid in page:
            row = EntryRow(int(s), str(k), bytes(rec), bytes(leaf), bytes(chain), str(tid))
            b.count += 1
            b.first = row.seq if b.first is None else b.first
            b.last = row.seq
            inside = row.seq != b.left and row.seq != b.right
            if b.refusals_from is None and _V1 not in row.record:  # the first version 2 summary
                b.refusals_from = _parsed(row).first_seq
            if every and b.covered_from is not None and _REFUSAL_ENTRY not in row.record:
                # Only time filters: every entry inside is selected, so only their number is needed.
                # Each entry starts '{"accounts":' and those bytes cannot occur inside a JCS string
                # (its quotes would be escaped): counting them is exact, and skips parsing ~120 kB
                # per summary (~3.5 us an entry). ledger verify and the bundle verifier parse them all.
                # A summary holding a refusal entry ('{"refusal":', as exact) is parsed below.
                n = row.record.count(_ENTRY_START)
                if inside:
                    b.expected.extend(range(row.seq - n, row.seq))
                yield row
                continue
            summ = _parsed(row)
            if b.covered_from is None:
                b.covered_from = summ.first_seq
            if inside:
                b.expected.extend(_selected(summ, f, b))
                b.refusals.extend(summ.first_seq + i for i, e in enumerate(summ.entries)
                                  if e.refusal is not None)
            yield row
        if len(page) < _PAGE:
            return
        after = int(page[-1][0])


def _parsed(row: EntryRow) -> Summary:
    try:
        return parse_summary(row.seq, orjson.loads(row.record)["record"])
    except (SummaryError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise ExportUnavailableError(f"{exc} (ledger damage; run 'sealtrail ledger verify')") from exc


def _selected(summ: Summary, f: ExportFilters, b: Bracket) -> list[int]:
    key = None
    if f.account is not None:
        if summ.account_key_id != b.account_key_id:
            b.unkeyed += 1
            return []
        key = b.account_key
    return [summ.first_seq + i for i, e in enumerate(summ.entries)
            if entry_matches(e, decision=f.decision, rule=f.rule, account_key=key)]


def check_selection(b: Bracket, selected: array[int], refusals: array[int] | None = None) -> None:
    """Refuse a selection (ascending seqs) that disagrees with the summaries where they speak for
    it; call it once ``b.rows`` was consumed. Both are ascending arrays: equal in one C compare in
    the usual case, walked side by side only to name the first difference. ``refusals``: the
    refusal seqs the selection carries (None: it carries none, so none is checked)."""
    if refusals is not None and b.refusals_from is not None:
        picked_refusals = refusals[bisect_left(refusals, b.refusals_from):]
        if picked_refusals != b.refusals:
            missing, extra = _first_differences(b.refusals, picked_refusals)
            if missing is not None:
                raise DerivedRowError(SUMMARY_KIND, missing, "the sealed summary says a refusal recorded in "
                                      "the window was sealed here, but the selection did not pick it (run "
                                      "'sealtrail ledger verify')")
            raise DerivedRowError(SUMMARY_KIND, extra or 0, "the selection picked this refusal, which no "
                                  "sealed summary inside the window speaks for (run 'sealtrail ledger "
                                  "verify')")
    if b.covered_from is None:
        return
    picked = selected[bisect_left(selected, b.covered_from):]
    if not b.unkeyed and picked == b.expected:
        return
    missing, extra = _first_differences(b.expected, picked)
    if b.unkeyed:  # the account filter cannot be applied there: only that none expected is missing
        extra = None
    if missing is not None:
        raise DerivedRowError(SUMMARY_KIND, missing, "the sealed summary says this decision passes the "
                              "filters, but the selection did not pick it (run 'sealtrail ledger verify')")
    if extra is not None:
        raise DerivedRowError(SUMMARY_KIND, extra, "the selection picked this decision, which its "
                              "sealed summary says does not pass the filters (run 'sealtrail ledger verify')")


def _first_differences(want: array[int], got: array[int]) -> tuple[int | None, int | None]:
    """The first seq of ``want`` not in ``got``, and of ``got`` not in ``want`` (both ascending)."""
    missing = extra = None
    i = j = 0
    while i < len(want) and j < len(got) and (missing is None or extra is None):
        a, c = want[i], got[j]
        if a == c:
            i += 1
            j += 1
        elif a < c:
            missing = a if missing is None else missing
            i += 1
        else:
            extra = c if extra is None else extra
            j += 1
    if missing is None and i < len(want):
        missing = want[i]
    if extra is None and j < len(got):
        extra = got[j]
    return missing, extra
