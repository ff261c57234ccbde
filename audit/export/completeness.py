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
export naming the seq (``ExportUnavailableError``): the verifier would fail such a bundle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.decide.account_secret import read_keyer
from audit.decide.summary import SUMMARY_KIND, AccountKeyer, Summary, entry_matches, parse_summary, tail
from audit.errors import ExportUnavailableError, SummaryError
from audit.export.select import EntryRow, ExportFilters
from ledger import store
from ledger.append import Ledger
from ledger.jcs import Jcs

__all__ = ["Bracket", "bracket", "check_selection", "seal_right_edge"]

_COLS = "seq, kind, record, leaf_hash, chain_hash, trace_id"


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
    (receipt,) = ledger.append_many([], tail=tail(keyer.key_id, Jcs(b"[]"),
                                                  lambda conn: store.last_of_kind(conn, SUMMARY_KIND)))
    return receipt.seq


@dataclass
class Bracket:
    """The summaries ``left`` .. ``right`` (inclusive; either may be None) and what they select."""

    rows: list[EntryRow] = field(default_factory=list)
    left: int | None = None
    right: int | None = None
    account_key_id: str | None = None  # the secret the account filter was keyed under
    account_key: str | None = None
    expected: list[int] = field(default_factory=list)  # decision seqs the summaries select, ascending
    covered_from: int | None = None  # first decision seq any summary of the bundle speaks for
    unkeyed: int = 0  # summaries under another secret: their account filter cannot be applied

    def manifest(self) -> dict[str, Any]:
        first = self.rows[0].seq if self.rows else None
        last = self.rows[-1].seq if self.rows else None
        return {"summaries": len(self.rows), "first_summary_seq": first, "last_summary_seq": last,
                "left": self.left, "right": self.right, "account_key_id": self.account_key_id,
                "account_key": self.account_key}


def bracket(conn: Connection, engine: Engine, f: ExportFilters) -> Bracket:
    """The bracketing summaries of ``f``'s window, read in ``conn``'s snapshot."""
    p = store.param(conn)
    left = conn.exec_driver_sql(
        f"SELECT seq FROM ledger_entries WHERE kind = {p} AND recorded_at < {p} ORDER BY seq DESC LIMIT 1",
        (SUMMARY_KIND, f.start)).scalar()
    right = conn.exec_driver_sql(
        f"SELECT seq FROM ledger_entries WHERE kind = {p} AND seq > {p} AND recorded_at >= {p} "
        "ORDER BY seq LIMIT 1", (SUMMARY_KIND, -1 if left is None else int(left), f.end)).scalar()
    lo = -1 if left is None else int(left)
    hi_sql, args = (("", (SUMMARY_KIND, lo)) if right is None
                    else (f" AND seq <= {p}", (SUMMARY_KIND, lo, int(right))))
    b = Bracket(left=None if left is None else int(left), right=None if right is None else int(right))
    rows = conn.exec_driver_sql(
        f"SELECT {_COLS} FROM ledger_entries WHERE kind = {p} AND seq >= {p}{hi_sql} ORDER BY seq",
        args).all()
    keyer = _keyer(engine) if f.account is not None else None
    if keyer is not None:
        b.account_key_id = keyer.key_id
        b.account_key = keyer.key(f.account or "")
    for s, k, rec, leaf, chain, tid in rows:
        row = EntryRow(int(s), str(k), bytes(rec), bytes(leaf), bytes(chain), str(tid))
        b.rows.append(row)
        env = orjson.loads(row.record)
        try:
            summ = parse_summary(row.seq, env["record"])
        except SummaryError as exc:
            raise ExportUnavailableError(f"{exc} (ledger damage; run 'sealtrail ledger verify')") from exc
        if b.covered_from is None:
            b.covered_from = summ.first_seq
        if row.seq == b.left or row.seq == b.right:
            continue
        b.expected += _selected(summ, f, b)
    return b


def _selected(summ: Summary, f: ExportFilters, b: Bracket) -> list[int]:
    key = None
    if f.account is not None:
        if summ.account_key_id != b.account_key_id:
            b.unkeyed += 1
            return []
        key = b.account_key
    return [summ.first_seq + i for i, e in enumerate(summ.entries)
            if entry_matches(e, decision=f.decision, rule=f.rule, account_key=key)]


def check_selection(b: Bracket, selected: Sequence[int]) -> None:
    """Refuse a selection that disagrees with the summaries (where they speak for it)."""
    if b.covered_from is None:
        return
    picked = {s for s in selected if s >= b.covered_from}
    if b.unkeyed:  # the account filter cannot be checked there: only that no expected one is missing
        missing = set(b.expected) - picked
        extra: set[int] = set()
    else:
        missing, extra = set(b.expected) - picked, picked - set(b.expected)
    if missing:
        s = min(missing)
        raise ExportUnavailableError(f"the sealed summaries say the decision at seq {s} matches the filters, "
                                     "but the selection did not pick it (run 'sealtrail ledger verify')")
    if extra:
        s = min(extra)
        raise ExportUnavailableError(f"the selection picked the decision at seq {s}, which the sealed "
                                     "summaries say does not match the filters "
                                     "(run 'sealtrail ledger verify')")
