"""What a bundle exports: the filters, checked, and the matching decisions oldest first.

``ExportFilters`` is the creator's request (time range required, account / decision / rule
optional), checked with the same rules as ``audit.query.traces.TraceFilter`` so a bundle selects
exactly what a trace search with the same filters finds. ``iter_pages`` streams the matching
decision entries ascending by seq in keyset pages over the trace index: the time range is
first turned into seq bounds (one covering scan of ``ix_audit_traces_recorded_at_seq``), then
each page is one range scan of the index whose last column is seq (the rule's, the account's,
or the primary key), so a page costs the same at the start as at the millionth decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from audit.errors import ExportFilterError, QueryError
from audit.query.index import account_key
from audit.query.traces import TraceFilter
from ledger import store

__all__ = [
    "EntryRow", "ExportFilters", "count_selected", "iter_pages"
]

_FIELDS = {"since": "from", "until": "to", "rule_id": "rule", "decision": "decision", "account": "account"}


@dataclass(frozen=True)
class ExportFilters:
    """The selection, normalised: ``start``/``end`` in the ledger's UTC µs form."""

    start: str  # recorded_at >= start
    end: str  # recorded_at < end
    account: str | None = None
    decision: str | None = None
    rule: str | None = None

    @classmethod
    def of(cls, start: str | datetime | None, end: str | datetime | None, *, account: str | None = None,
           decision: str | None = None, rule: str | None = None) -> ExportFilters:
        """Check and normalise; ``ExportFilterError`` names the first bad field."""
        if start is None:
            raise ExportFilterError("from", "is required (ISO 8601 with a UTC offset)")
        if end is None:
            raise ExportFilterError("to", "is required (ISO 8601 with a UTC offset)")
        try:
            f = TraceFilter(since=start, until=end, decision=decision, rule_id=rule, account=account)
        except QueryError as exc:
            name = _FIELDS.get(exc.field, exc.field)
            message = exc.message.replace("since", "from").replace("until", "to")
            raise ExportFilterError(name, message) from None
        assert isinstance(f.since, str) and isinstance(f.until, str)
        return cls(f.since, f.until, account, decision, rule)

    def to_json(self) -> dict[str, Any]:
        """The manifest's ``filters`` (account as given)."""
        return {"from": self.start, "to": self.end, "account": self.account, "decision": self.decision,
                "rule": self.rule}

    def to_record(self) -> dict[str, Any]:
        """The ``export.created`` record's filters: the account only as its index key."""
        d = self.to_json()
        del d["account"]
        d["account_key"] = None if self.account is None else account_key(self.account)
        return d


@dataclass(frozen=True)
class EntryRow:
    seq: int
    kind: str
    record: bytes
    leaf_hash: bytes
    chain_hash: bytes
    trace_id: str


def _parts(conn: Connection, f: ExportFilters) -> tuple[str, str, list[Any], str]:
    """(FROM ... joins, WHERE terms, their arguments, the alias whose seq drives the scan)."""
    p = store.param(conn)
    plus = "+" if conn.dialect.name == "sqlite" else ""  # SQLite: filter on recorded_at, don't drive by it
    joins, terms, args, drive = "audit_traces t", [], [], "t"
    if f.rule is not None:
        joins += " JOIN audit_trace_rules r ON r.seq = t.seq"
        terms.append(f"r.rule_id = {p}")
        args.append(f.rule)
        drive = "r"
    if f.account is not None:
        joins += f" JOIN audit_trace_accounts a ON a.seq = {drive}.seq"
        terms.append(f"a.account_key = {p}")
        args.append(account_key(f.account))
        drive = "a" if drive == "t" else drive
    terms += [f"{plus}t.recorded_at >= {p}", f"{plus}t.recorded_at < {p}"]
    args += [f.start, f.end]
    if f.decision is not None:
        terms.append(f"t.decision = {p}")
        args.append(f.decision)
    return joins, " AND ".join(terms), args, drive


def _bounds(conn: Connection, f: ExportFilters) -> tuple[int, int] | None:
    p = store.param(conn)
    lo, hi = conn.exec_driver_sql(
        f"SELECT min(seq), max(seq) FROM audit_traces WHERE recorded_at >= {p} AND recorded_at < {p}",
        (f.start, f.end)).one()
    return None if lo is None else (int(lo), int(hi))


def count_selected(conn: Connection, f: ExportFilters) -> int:
    """How many decisions the filters select."""
    bounds = _bounds(conn, f)
    if bounds is None:
        return 0
    joins, where, args, drive = _parts(conn, f)
    p = store.param(conn)
    sql = f"SELECT count(*) FROM {joins} WHERE {where} AND {drive}.seq >= {p} AND {drive}.seq <= {p}"
    return int(conn.exec_driver_sql(sql, (*args, *bounds)).scalar_one())


def iter_pages(conn: Connection, f: ExportFilters, page: int = 5000) -> Iterator[list[EntryRow]]:
    """The selected decision entries, ascending by seq, ``page`` at a time."""
    bounds = _bounds(conn, f)
    if bounds is None:
        return
    joins, where, args, drive = _parts(conn, f)
    p = store.param(conn)
    sql = (f"SELECT e.seq, e.kind, e.record, e.leaf_hash, e.chain_hash, e.trace_id FROM {joins} "
           f"JOIN ledger_entries e ON e.seq = {drive}.seq WHERE {where} AND {drive}.seq > {p} "
           f"AND {drive}.seq <= {p} ORDER BY {drive}.seq LIMIT {int(page)}")
    after, hi = bounds[0] - 1, bounds[1]
    while True:
        rows = [EntryRow(int(s), k, bytes(r), bytes(lh), bytes(ch), t)
                for s, k, r, lh, ch, t in conn.exec_driver_sql(sql, (*args, after, hi)).all()]
        if not rows:
            return
        yield rows
        after = rows[-1].seq
        if len(rows) < page:
            return
