"""What a bundle exports: the filters, checked, and the matching decisions oldest first, chosen
from the sealed records, never from an unverified index row.

``ExportFilters`` is the creator's request (time range required, account / decision / rule
optional), checked with the same rules as ``audit.query.traces.TraceFilter`` so a bundle selects
exactly what a trace search with the same filters finds on an intact index.

``window_bounds`` turns the time range into seq bounds: the trace index gives the first and last
seq recorded in the window (one covering scan of ``ix_audit_traces_recorded_at_seq``), then the
bounds are widened through the sealed decisions on either side until one was recorded more than
``CLOCK_SLACK`` outside the window (entries sealed before decision summaries were stamped before
the sequencer lock, so their ``recorded_at`` follows seq only nearly: concurrent writers, clock
steps; it never decreases along the log since). ``iter_pages`` then walks every sealed
decision between the bounds in keyset pages and checks, against each record, the index rows the
selection relies on (``audit.query.verify.check_decisions``): each decision's ``audit_traces`` row,
and with a rule or account filter that table's rows for it, so a deleted or rewritten row is
found, never silently skipped (``DerivedRowError`` naming the table and seq: the export refuses
and writes nothing). The filters are applied to what the records say; an account with a purged
payload can only be matched through its (unverifiable) index row. ``annotation_index`` likewise
takes the annotations of the selected decisions from the sealed annotation entries and checks
``audit_annotations`` against them. ``refusal_rows`` takes the sealed refusal entries recorded in
the window (format 3), from the entries themselves, where the selection is the whole window.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection

from audit.errors import DerivedRowError, ExportFilterError, QueryError
from audit.query.index import TRACE_COLUMNS, account_key, annotation_target, record_rows
from audit.query.traces import TraceFilter, time_text
from audit.query.verify import check_decisions, trace_row_difference
from ledger import store

__all__ = [
    "CLOCK_SLACK", "EntryRow", "ExportFilters", "annotation_index", "count_selected", "iter_pages",
    "refusal_rows", "window_bounds"
]

CLOCK_SLACK = timedelta(seconds=2)

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

    @property
    def whole_window(self) -> bool:
        """Whether only the time window filters (no account, decision or rule): only such a
        selection carries the refusals of its window."""
        return self.account is None and self.decision is None and self.rule is None

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


def count_selected(conn: Connection, f: ExportFilters) -> int:
    """How many decisions the trace index says the filters select: an estimate for progress
    only (the selection itself reads the sealed records). Counted between the first and the
    last seq the index has in the window (a seek each: recorded_at never decreases along seq),
    so a decision, rule or account filter reads its index's rows of the window only, not every
    row of that decision, rule or account ever recorded."""
    p = store.param(conn)
    first = (f"SELECT w.seq FROM audit_traces w WHERE w.recorded_at >= {p} "
             "ORDER BY w.recorded_at, w.seq LIMIT 1")
    last = (f"SELECT w.seq FROM audit_traces w WHERE w.recorded_at < {p} "
            "ORDER BY w.recorded_at DESC, w.seq DESC LIMIT 1")
    joins, terms, args = "audit_traces t", [f"t.recorded_at >= {p}", f"t.recorded_at < {p}"], [f.start, f.end]
    driving = ["t"]  # the tables whose seq the bounds go on: each index read is cut to the window
    if f.rule is not None:
        joins += " JOIN audit_trace_rules r ON r.seq = t.seq"
        terms.append(f"r.rule_id = {p}")
        args.append(f.rule)
        driving.append("r")
    if f.account is not None:
        joins += " JOIN audit_trace_accounts a ON a.seq = t.seq"
        terms.append(f"a.account_key = {p}")
        args.append(account_key(f.account))
        driving.append("a")
    for x in driving if not f.whole_window else ():  # the time alone: a range of its own index
        terms += [f"{x}.seq >= ({first})", f"{x}.seq <= ({last})"]
        args += [f.start, f.end]
    if f.decision is not None:
        terms.append(f"t.decision = {p}")
        args.append(f.decision)
    return int(conn.exec_driver_sql(f"SELECT count(*) FROM {joins} WHERE {' AND '.join(terms)}",
                                    tuple(args)).scalar_one())


def _shift(t: str, by: timedelta) -> str:
    """``t`` moved by ``by`` (past year 1 or 9999: a bound every time passes)."""
    try:
        return time_text(datetime.fromisoformat(t) + by)
    except OverflowError:
        return "" if by < timedelta(0) else "\uffff"


def _sealed_time(record: bytes) -> str:
    return str(orjson.loads(record)["recorded_at"])


def _widen(conn: Connection, seq: int, *, down: bool, stop: str) -> int:
    """From ``seq`` (exclusive), walk the sealed decisions down (or up) until one was recorded
    before (at or after) ``stop``; the last seq short of it (0 or the log's end if none is)."""
    p = store.param(conn)
    op, order = ("<", "DESC") if down else (">", "ASC")
    at = seq
    while True:
        rows = conn.exec_driver_sql(
            f"SELECT seq, record FROM ledger_entries WHERE kind = 'decision' AND seq {op} {p} "
            f"ORDER BY seq {order} LIMIT 256", (at,)).all()
        for s, rec in rows:
            t = _sealed_time(bytes(rec))
            if (t < stop) if down else (t >= stop):
                return int(s) + 1 if down else int(s) - 1
            at = int(s)
        if len(rows) < 256:
            return 0 if down else store.tail(conn)[0] - 1


def window_bounds(conn: Connection, f: ExportFilters) -> tuple[int, int]:
    """Seqs ``[lo, hi]`` that hold every sealed decision recorded in ``[f.start, f.end)`` (and
    some around them): see the module's docstring. ``lo > hi`` when the log holds no decision."""
    p = store.param(conn)
    lo, hi = conn.exec_driver_sql(
        f"SELECT min(seq), max(seq) FROM audit_traces WHERE recorded_at >= {p} AND recorded_at < {p}",
        (f.start, f.end)).one()
    if lo is None:  # none in the window by the index: start from the first decision indexed after it
        anchor = conn.exec_driver_sql(
            f"SELECT seq FROM audit_traces WHERE recorded_at >= {p} ORDER BY recorded_at, seq LIMIT 1",
            (f.start,)).scalar()
        lo = hi = store.tail(conn)[0] if anchor is None else int(anchor)
        hi = lo - 1
    lo = _widen(conn, int(lo), down=True, stop=_shift(f.start, -CLOCK_SLACK))
    hi = _widen(conn, int(hi), down=False, stop=_shift(f.end, CLOCK_SLACK))
    return lo, hi


def _seqs(conn: Connection, table: str, column: str, value: str, after: int,
          last: int) -> dict[int, set[str]]:
    p = store.param(conn)
    return {int(s): {value} for (s,) in conn.exec_driver_sql(
        f"SELECT seq FROM {table} WHERE {column} = {p} AND seq > {p} AND seq <= {p}", (value, after, last))}


_Row = tuple[int, str, bytes, bytes, bytes, str]  # seq, kind, record, leaf hash, chain hash, trace id


def _pick(rows: list[_Row], traces: dict[int, Any], rules: dict[int, set[str]] | None,
          f: ExportFilters) -> list[EntryRow]:
    """The rows of a page the filters select, each decision's index rows checked against its
    record on the way (the hot loop of an export without an account filter: one parse each)."""
    loads, picked = orjson.loads, []
    for row in rows:
        seq = row[0]
        env = loads(row[2])
        got = traces.pop(seq, None)
        want, ids = record_rows(seq, env)
        if got != want:
            raise DerivedRowError("audit_traces", seq, trace_row_difference(got, want) or "differs")
        if rules is not None:
            fired = f.rule in ids
            indexed = rules.pop(seq, None) is not None
            if fired != indexed:
                raise DerivedRowError("audit_trace_rules", seq, f"the record says {f.rule} "
                                      f"{'fired' if fired else 'did not fire'}, the index says the opposite")
            if not fired:
                continue
        if not f.start <= want[2] < f.end or (f.decision is not None and want[4] != f.decision):
            continue
        picked.append(EntryRow(*row))
    return picked


def _pick_by_account(conn: Connection, rows: list[_Row], traces: dict[int, Any],
                     rules: dict[int, set[str]] | None, accounts: dict[int, set[str]], f: ExportFilters,
                     key: str | None) -> list[EntryRow]:
    """``_pick`` with an account filter: the account rows checked against the payloads too."""
    checked = check_decisions(conn, [(r[0], r[2]) for r in rows], traces, rules, accounts,
                              only_rule=f.rule, only_account=key)
    picked = []
    for row, c in zip(rows, checked, strict=True):
        if not f.start <= c.recorded_at < f.end:
            continue
        if f.decision is not None and c.decision != f.decision:
            continue
        if f.rule is not None and f.rule not in c.rules:
            continue
        if key not in (c.indexed_accounts if c.accounts is None else c.accounts):
            continue
        picked.append(EntryRow(*row))
    return picked


def iter_pages(conn: Connection, f: ExportFilters, page: int = 5000,
               bounds: tuple[int, int] | None = None) -> Iterator[list[EntryRow]]:
    """The selected decision entries, ascending by seq, up to ``page`` at a time (a page may be
    empty), each chosen by its sealed record once the index rows the filters rely on were checked
    against it (``DerivedRowError`` at the first that differs)."""
    lo, hi = window_bounds(conn, f) if bounds is None else bounds
    p = store.param(conn)
    cols = ", ".join(f"t.{c}" for c in TRACE_COLUMNS)
    key = None if f.account is None else account_key(f.account)
    after = lo - 1
    while after < hi:
        rows = [(int(s), k, bytes(r), bytes(lh), bytes(ch), str(t))
                for s, k, r, lh, ch, t in conn.exec_driver_sql(
                    "SELECT seq, kind, record, leaf_hash, chain_hash, trace_id FROM ledger_entries "
                    f"WHERE kind = 'decision' AND seq > {p} AND seq <= {p} ORDER BY seq LIMIT {int(page)}",
                    (after, hi)).all()]
        last = rows[-1][0] if len(rows) == page else hi  # the last page answers for the rest of the range
        traces = {int(r[0]): tuple(r) for r in conn.exec_driver_sql(
            f"SELECT {cols} FROM audit_traces t WHERE t.seq > {p} AND t.seq <= {p}", (after, last)).all()}
        rules = None if f.rule is None else _seqs(conn, "audit_trace_rules", "rule_id", f.rule, after, last)
        accounts = None if key is None else _seqs(conn, "audit_trace_accounts", "account_key", key, after,
                                                  last)
        if accounts is None:
            picked = _pick(rows, traces, rules, f)
        else:
            picked = _pick_by_account(conn, rows, traces, rules, accounts, f, key)
        for name, left in (("audit_traces", traces), ("audit_trace_rules", rules or {}),
                           ("audit_trace_accounts", accounts or {})):
            if left:
                raise DerivedRowError(name, min(left), "an index row at a seq that holds no decision record "
                                                      "(forged?)")
        yield picked
        after = last


def annotation_index(conn: Connection, lo: int, hi: int) -> dict[int, list[int]]:
    """The seqs of the sealed annotations that refer to each decision seq in ``[lo, hi]`` (read
    from the annotation entries after ``lo``), once ``audit_annotations`` was checked to hold
    exactly these for that range (``DerivedRowError`` naming the first seq that differs)."""
    p = store.param(conn)
    sealed: dict[int, list[int]] = {}
    after = lo
    while True:
        rows = conn.exec_driver_sql(
            f"SELECT seq, record FROM ledger_entries WHERE kind = 'annotation' AND seq > {p} "
            "ORDER BY seq LIMIT 2000", (after,)).all()
        for s, rec in rows:
            target = annotation_target(orjson.loads(bytes(rec)))
            if lo <= target <= hi:
                sealed.setdefault(target, []).append(int(s))
        if len(rows) < 2000:
            break
        after = int(rows[-1][0])
    indexed: dict[int, list[int]] = {}
    for t, s in conn.exec_driver_sql(
            f"SELECT target_seq, seq FROM audit_annotations WHERE target_seq >= {p} AND target_seq <= {p} "
            "ORDER BY seq", (lo, hi)):
        indexed.setdefault(int(t), []).append(int(s))
    if indexed != sealed:
        want = {(s, t) for t, ss in sealed.items() for s in ss}
        got = {(s, t) for t, ss in indexed.items() for s in ss}
        seq, target = min(want ^ got)
        detail = (f"the annotation sealed at seq {seq} refers to seq {target}; the index does not say so"
                  if (seq, target) in want else
                  f"the index says seq {seq} annotates seq {target}; no sealed annotation says so")
        raise DerivedRowError("audit_annotations", seq, detail)
    return sealed


def refusal_rows(conn: Connection, f: ExportFilters) -> list[EntryRow]:
    """The sealed refusals recorded in ``[f.start, f.end)``, ascending by seq, when the filters
    select the whole window (no account, decision or rule: a refusal has none of them, and a bundle
    cut for one account must not carry other customers' refused messages); else none. Read from
    the entries (their ``recorded_at`` column is checked against each record's own time here)."""
    if not f.whole_window:
        return []
    p = store.param(conn)
    rows = conn.exec_driver_sql(
        "SELECT seq, kind, record, leaf_hash, chain_hash, trace_id FROM ledger_entries "
        f"WHERE kind = 'refusal' AND recorded_at >= {p} AND recorded_at < {p} ORDER BY seq",
        (f.start, f.end)).all()
    out = [EntryRow(int(s), str(k), bytes(r), bytes(lh), bytes(ch), str(t)) for s, k, r, lh, ch, t in rows]
    return [r for r in out if f.start <= _sealed_time(r.record) < f.end]
