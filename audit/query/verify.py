"""Derived-table verification: every row of the trace index checked against the sealed record
it derives from.

The trace index (``audit.query.index``) decides what a search finds and what an export bundle
holds, yet it is not sealed. ``verify_index`` walks the sealed decision and annotation entries
in seq order, a page at a time, beside the index tables read as streams in seq order (one
snapshot), recomputes each entry's rows with the code that writes them (``record_rows``,
``accounts_of``, ``annotation_target``) and compares: every decision has exactly its
``audit_traces`` row, its ``audit_trace_rules`` rows and the ``audit_trace_accounts`` rows of
the accounts its payload names; every annotation has exactly its ``audit_annotations`` row; no
index row stands at a seq that is not such an entry. A failure names the table, the seq and
what differed (``DerivedRowError``, a ``ledger.DamageError``: ``ledger verify`` exits 1).
The idempotency keys (``audit_idempotency_keys``) are checked in the same walk: each keyed
decision record seals its key; the table must hold, per (principal, key), exactly the first
decision sealed under it (its seq and transaction SHA-256), and a later decision under the same
key must say which seq decided it first.

Known limit: where a payload was purged, the account rows of its decision cannot be recomputed;
they are counted (``accounts_unverifiable``), not judged. ``check_decisions`` is the same check
for one page of decisions, used by export selection.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from audit.cases.verify import check_case_view
from audit.decide.account_secret import read_keyer, read_state_key
from audit.decide.idempotency import principal_fp
from audit.errors import DerivedRowError
from audit.query.delta_check import DeltaWalk
from audit.query.index import (
    TRACE_COLUMNS,
    accounts_of,
    annotation_target,
    payload_data,
    record_rows,
)
from audit.query.risk_snapshot_check import check_risk_snapshots
from audit.query.snapshot_check import check_snapshots
from audit.query.summary_check import SummaryWalk
from audit.state.account_risk_replay import risk_fields
from inference.messages import MessageError
from inference.velocity import key_id
from ledger import SchemaError

__all__ = ["MAX_FINDINGS", "Checked", "IndexReport", "check_decisions", "trace_row_difference",
           "verify_index"]

MAX_FINDINGS = 50
_PAGE = 2000
_STREAM = {"stream_results": True, "max_row_buffer": 10_000}
_TABLES = TRACES, RULES, ACCOUNTS, ANNOTATIONS = ("audit_traces", "audit_trace_rules", "audit_trace_accounts",
                                                  "audit_annotations")
KEYS = "audit_idempotency_keys"


@dataclass
class IndexReport:
    """What ``verify_index`` checked."""

    decisions: int = 0
    annotations: int = 0
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*_TABLES, KEYS), 0))  # rows checked
    accounts_unverifiable: int = 0  # decisions with a purged payload: account rows not recomputable
    summaries: int = 0  # decision summaries checked against their decisions
    unsummarised: int = 0  # decisions sealed before the first summary
    refusals: int = 0  # refusals checked against their summary entry
    refusals_unsummarised: int = 0  # refusals sealed before summaries spoke for refusals
    state_deltas: int = 0  # state deltas checked against their commits
    commits_without_delta: int = 0  # commits of decisions sealed before the first state delta
    deltas_other_key: int = 0  # state deltas under another state key than the ledger's now
    state_snapshots: int = 0  # sealed state snapshots checked (parsed, in place)
    state_roots_recomputed: int = 0  # of those, roots recomputed from the state deltas (state_roots=True)
    account_risk_snapshots: int = 0  # sealed account-risk snapshots checked (parsed, in place)
    account_risk_roots_recomputed: int = 0  # of those, roots recomputed from the decisions (state_roots=True)
    case_view: dict[str, int] = field(default_factory=dict)  # alert and case view rows checked, its watermark
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"verified": True, "decisions": self.decisions, "annotations": self.annotations,
                "rows": dict(self.rows), "accounts_unverifiable": self.accounts_unverifiable,
                "summaries": self.summaries, "unsummarised": self.unsummarised,
                "refusals": self.refusals, "refusals_unsummarised": self.refusals_unsummarised,
                "state_deltas": self.state_deltas, "commits_without_delta": self.commits_without_delta,
                "deltas_other_key": self.deltas_other_key, "state_snapshots": self.state_snapshots,
                "state_roots_recomputed": self.state_roots_recomputed,
                "account_risk_snapshots": self.account_risk_snapshots,
                "account_risk_roots_recomputed": self.account_risk_roots_recomputed,
                "case_view": dict(self.case_view),
                "seconds": round(self.seconds, 3)}


class _Findings:
    def __init__(self, cap: int) -> None:
        self.cap, self.items, self.total = cap, list[tuple[str, int, str]](), 0

    def add(self, table: str, seq: int, detail: str) -> None:
        self.total += 1
        if len(self.items) < self.cap:
            self.items.append((table, seq, detail))

    def error(self) -> DerivedRowError:
        table, seq, detail = self.items[0]
        return DerivedRowError(table, seq, detail, findings=self.items, total=self.total)


def trace_row_difference(got: Sequence[Any] | None, want: Sequence[Any]) -> str | None:
    """What differs between an ``audit_traces`` row and the one its record stands for (None: equal)."""
    if got is None:
        return "no index row for this decision (deleted?)"
    if tuple(got) == tuple(want):
        return None
    diffs = [f"{col} is {g!r} in the index, {w!r} in the record"
             for col, g, w in zip(TRACE_COLUMNS, got, want, strict=True) if g != w]
    return "; ".join(diffs) or None


def _set_difference(what: str, got: set[str], want: set[str]) -> str | None:
    if got == want:
        return None
    parts = []
    if want - got:
        parts.append(f"{what} of the record not indexed: {', '.join(sorted(k[:16] for k in want - got))}")
    if got - want:
        parts.append(f"indexed {what} not in the record: {', '.join(sorted(k[:16] for k in got - want))}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Checked:
    """One sealed decision with what its record says and what its index rows were checked to be."""

    seq: int
    recorded_at: str
    decision: str
    rules: tuple[str, ...]  # fired rule ids, as the record says
    accounts: frozenset[str] | None  # account keys its payload names; None: not recomputable (purged)
    indexed_accounts: frozenset[str]  # the account rows found for it (what stands where ``accounts`` is None)
    at: str = ""  # the event time the record states
    risk: object = None  # what account risk reads of the record (``risk_fields``; None: none)


def _accounts(body: dict[str, Any], raw: bytes | None) -> set[str] | None:
    try:
        return accounts_of(body, raw)
    except (MessageError, KeyError, TypeError, ValueError):
        return None  # a stored payload that no longer parses: nothing to recompute from


AccountsOf = Callable[[list[tuple[dict[str, Any], bytes | None]]], list[set[str] | None]]


def _accounts_many(items: list[tuple[dict[str, Any], bytes | None]]) -> list[set[str] | None]:
    """``accounts_of`` of each ``(decision body, payload)``: re-parsing the payloads is most of
    what verification costs, so ``_PoolAccounts`` runs this on worker processes."""
    return [_accounts(body, raw) for body, raw in items]


class _PoolAccounts:
    """``_accounts_many`` of a page split over worker processes, results in order."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = ProcessPoolExecutor(max_workers=workers)

    def __call__(self, items: list[tuple[dict[str, Any], bytes | None]]) -> list[set[str] | None]:
        step = max(1, -(-len(items) // (2 * self.workers)))
        parts = self.pool.map(_accounts_many, [items[i:i + step] for i in range(0, len(items), step)])
        return [keys for part in parts for keys in part]

    def close(self) -> None:
        self.pool.shutdown()


def check_decisions(conn: Connection, page: Sequence[tuple[int, bytes]], traces_rows: dict[int, Any],
                    rules: dict[int, set[str]] | None = None, accounts: dict[int, set[str]] | None = None, *,
                    only_rule: str | None = None, only_account: str | None = None,
                    found: _Findings | None = None, accounts_many: AccountsOf | None = None) -> list[Checked]:
    """Check the index rows given (by seq) of each sealed decision ``(seq, record bytes)`` of
    ``page`` against its record: the trace row always; the rule rows and account rows where
    given (None: not checked), restricted to ``only_rule`` / ``only_account`` where the caller
    read only that rule's or account's rows. Rows are popped as they are matched, so what is
    left in the dicts stands at no decision of the page. Raises ``DerivedRowError`` at the first
    difference unless ``found`` collects them. ``accounts_many`` computes the account keys of
    the page's payloads (default: here, in this process)."""
    def fail(table: str, seq: int, detail: str) -> None:
        if found is None:
            raise DerivedRowError(table, seq, detail)
        found.add(table, seq, detail)

    loads = orjson.loads
    key_sets: list[set[str] | None] = []
    if accounts is not None:
        data = payload_data(conn, sorted({sha for _, rec in page if (sha := _payload_sha(rec)) is not None}))
        items = []
        for _, rec in page:
            env = loads(rec)
            items.append(({"input": env["record"]["input"]}, data.get(str(env.get("payload_sha256", "")))))
        key_sets = (accounts_many or _accounts_many)(items)
    out: list[Checked] = []
    for i, (seq, rec) in enumerate(page):
        env = loads(rec)  # one at a time: a page of live dicts would keep the GC busy
        want, ids = record_rows(seq, env)
        if (diff := trace_row_difference(traces_rows.pop(seq, None), want)) is not None:
            fail(TRACES, seq, diff)
        if rules is not None:
            fired = set(ids) if only_rule is None else set(ids) & {only_rule}
            if diff := _set_difference("rules", rules.pop(seq, set()), fired):
                fail(RULES, seq, diff)
        keys: set[str] | None = None
        got: set[str] = set()
        if accounts is not None:
            got = accounts.pop(seq, set())
            keys = key_sets[i]
            if keys is not None:
                named = keys if only_account is None else keys & {only_account}
                if diff := _set_difference("account keys", got, named):
                    fail(ACCOUNTS, seq, diff)
        out.append(Checked(seq, env["recorded_at"], env["record"]["decision"], tuple(ids),
                           None if keys is None else frozenset(keys), frozenset(got),
                           str(env["record"]["at"]), risk_fields(env["record"])))
    return out


_PAYLOAD_AT = b'{"kind":"decision","payload_sha256":"'


def _payload_sha(rec: bytes) -> str | None:
    """The envelope's payload SHA-256: read off its fixed place in the JCS bytes where it is there."""
    if rec.startswith(_PAYLOAD_AT):
        return rec[len(_PAYLOAD_AT):len(_PAYLOAD_AT) + 64].decode()
    sha = orjson.loads(rec).get("payload_sha256")
    return None if sha is None else str(sha)


class _Stream:
    """The rows of queries each ordered by its first column (seq), read as one stream in seq
    order (several merged here: one ordered by index each, where one query for all would sort)."""

    def __init__(self, conn: Connection, *sql: str) -> None:
        its = [iter(conn.exec_driver_sql(q, None, execution_options=_STREAM)) for q in sql]
        self._it: Iterator[Any] = its[0] if len(its) == 1 else heapq.merge(*its, key=itemgetter(0))
        self._next = next(self._it, None)

    def upto(self, last: int | None) -> list[Any]:
        """The rows with seq <= ``last`` (None: every row left)."""
        out: list[Any] = []
        nxt, it = self._next, self._it
        while nxt is not None and (last is None or nxt[0] <= last):
            out.append(nxt)
            nxt = next(it, None)
        self._next = nxt
        return out


def _grouped(rows: Sequence[Any]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for seq, value in rows:
        out.setdefault(int(seq), set()).add(str(value))
    return out


def _decision_pages(conn: Connection, page: int) -> Iterator[list[tuple[int, bytes]]]:
    after = -1
    while True:
        rows = [(int(s), bytes(r)) for s, r in conn.exec_driver_sql(
            f"SELECT seq, record FROM ledger_entries WHERE kind = 'decision' AND seq > {after} "
            f"ORDER BY seq LIMIT {int(page)}")]
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _check_all_decisions(conn: Connection, report: IndexReport, found: _Findings, page: int,
                         workers: int | None) -> None:
    cols = ", ".join(TRACE_COLUMNS)
    t = _Stream(conn, f"SELECT {cols} FROM audit_traces ORDER BY seq")
    r = _Stream(conn, "SELECT seq, rule_id FROM audit_trace_rules ORDER BY seq, rule_id")
    a = _Stream(conn, "SELECT seq, account_key FROM audit_trace_accounts ORDER BY seq, account_key")
    n = report.rows
    # workers: None = one process per core (at most 4) once the ledger proves big (two full pages)
    want = workers if workers is not None else min(os.cpu_count() or 1, 4)
    pool: _PoolAccounts | None = None
    keys = _Keys()
    walk = SummaryWalk(found.add)
    deltas = DeltaWalk(found.add, _state_key_id(conn))
    summaries = _Stream(conn, *(f"SELECT seq, record, leaf_hash, kind FROM ledger_entries WHERE kind = '{k}' "
                                "ORDER BY seq" for k in ("decision.summary", "state.delta")))
    refusals = _Stream(conn, "SELECT seq, record FROM ledger_entries WHERE kind = 'refusal' ORDER BY seq")
    try:
        for rows in _decision_pages(conn, page):
            keys.add(found, rows)
            if pool is None and want > 1 and (workers is not None or report.decisions >= 2 * page):
                pool = _PoolAccounts(want)
            last = rows[-1][0]
            trace_rows = {int(x[0]): tuple(x) for x in t.upto(last)}
            rule_rows = _grouped(r.upto(last))
            account_rows = _grouped(a.upto(last))
            n[TRACES] += len(trace_rows)
            n[RULES] += sum(map(len, rule_rows.values()))
            n[ACCOUNTS] += sum(map(len, account_rows.values()))
            for c in check_decisions(conn, rows, trace_rows, rule_rows, account_rows, found=found,
                                     accounts_many=pool):
                report.accounts_unverifiable += c.accounts is None
                walk.decision(c.seq, c.recorded_at, c.decision, c.rules)
                deltas.decision(c.seq, c.at, c.risk)
            for s, rec in refusals.upto(last):
                walk.refusal(int(s), bytes(rec))
            _summaries(summaries.upto(last), walk, deltas)
            report.decisions += len(rows)
            _strays(found, trace_rows, rule_rows, account_rows)
    finally:
        if pool is not None:
            pool.close()
    _strays(found, {int(x[0]): x for x in t.upto(None)}, _grouped(r.upto(None)), _grouped(a.upto(None)))
    for s, rec in refusals.upto(None):
        walk.refusal(int(s), bytes(rec))
    _summaries(summaries.upto(None), walk, deltas)
    walk.finish()
    deltas.finish()
    report.state_deltas, report.commits_without_delta = deltas.deltas, deltas.without
    report.deltas_other_key = deltas.other_key
    report.summaries, report.unsummarised = walk.summaries, walk.unsummarised
    report.refusals, report.refusals_unsummarised = walk.refusals, walk.refusals_unsummarised
    keys.finish(conn, found, report)


def _summaries(rows: Sequence[Any], walk: SummaryWalk, deltas: DeltaWalk) -> None:
    """Summaries and state deltas, in seq order (a delta right after its commit's summary)."""
    for s, rec, leaf, kind in rows:
        if kind == "state.delta":
            deltas.delta(int(s), bytes(rec))
        else:
            deltas.summary(walk.summary(int(s), bytes(rec), bytes(leaf)), int(s))


def _state_key(conn: Connection) -> bytes | None:
    try:
        return read_state_key(conn)
    except SchemaError:
        return None


def _account_key_id(conn: Connection) -> str | None:
    try:
        return read_keyer(conn).key_id
    except SchemaError:
        return None


def _state_key_id(conn: Connection) -> str | None:
    try:
        return key_id(read_state_key(conn))
    except SchemaError:
        return None


_KEY_AT = b'"idempotency":{'  # in a keyed record's JCS bytes (a string value would escape the quote)


class _Keys:
    """The idempotency keys the sealed decisions state, and the table checked against them."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], tuple[int, str]] = {}  # (principal, key) -> (seq, transaction)

    def add(self, found: _Findings, page: Sequence[tuple[int, bytes]]) -> None:
        for seq, rec in page:
            if _KEY_AT not in rec:
                continue  # no key: records sealed before keys existed, or a message without one
            try:
                body = orjson.loads(rec)["record"]
                k = body["idempotency"]
                pair = (principal_fp(body["principal"]), str(k["key_sha256"]))
                first_seq, tx = k["first_seq"], str(body["input"]["transaction_sha256"])
            except (KeyError, TypeError, ValueError) as exc:
                found.add(KEYS, seq, f"the sealed idempotency key cannot be read: {exc!r}")
                continue
            first = self.first.get(pair)
            if first is None:
                if first_seq is not None:
                    found.add(KEYS, seq, f"the record says its key was first decided at seq {first_seq}, "
                                         "but no earlier decision holds that key")
                self.first[pair] = (seq, tx)
            elif first_seq != first[0]:
                found.add(KEYS, seq, f"a second decision under the key first decided at seq {first[0]}, "
                                     f"and its record says {first_seq!r}")

    def finish(self, conn: Connection, found: _Findings, report: IndexReport) -> None:
        for fp, key, seq, req in conn.exec_driver_sql(
                f"SELECT principal_fp, key_sha256, seq, request_sha256 FROM {KEYS} ORDER BY seq"):
            seq = int(seq)
            report.rows[KEYS] += 1
            want = self.first.pop((str(fp), str(key)), None)
            if want is None:
                found.add(KEYS, seq, f"a key row ({str(key)[:16]}) that no sealed decision's key stands for "
                                     "(forged?)")
            elif want != (seq, str(req)):
                found.add(KEYS, want[0], f"the key row says seq {seq}, transaction {str(req)[:16]}; the "
                                         f"record at seq {want[0]} first sealed the key, transaction "
                                         f"{want[1][:16]}")
        for seq, _ in sorted(self.first.values()):
            found.add(KEYS, seq, "no key row for this decision's idempotency key (deleted?)")


def _strays(found: _Findings, *tables: dict[int, Any]) -> None:
    """Index rows left over after their page: at a seq that holds no decision."""
    for name, rows in zip((TRACES, RULES, ACCOUNTS), tables, strict=True):
        for seq in sorted(rows):
            found.add(name, seq, "an index row at a seq that holds no decision record (forged?)")


def _check_annotations(conn: Connection, report: IndexReport, found: _Findings) -> None:
    entries = _Stream(conn, "SELECT seq, record FROM ledger_entries WHERE kind = 'annotation' ORDER BY seq")
    index = _Stream(conn, "SELECT seq, target_seq FROM audit_annotations ORDER BY seq, target_seq")
    for seq, rec in entries.upto(None):
        seq = int(seq)
        strays = [int(s) for s, _ in index.upto(seq - 1)]
        for s in strays:
            found.add(ANNOTATIONS, s, "an index row at a seq that holds no annotation record (forged?)")
        got = [int(tg) for _, tg in index.upto(seq)]
        report.annotations += 1
        report.rows[ANNOTATIONS] += len(got) + len(strays)
        try:
            want = annotation_target(orjson.loads(bytes(rec)))
        except (KeyError, TypeError, ValueError) as exc:
            found.add(ANNOTATIONS, seq, f"the sealed annotation names no target: {exc!r}")
            continue
        if got != [want]:
            found.add(ANNOTATIONS, seq, f"the record refers to seq {want}; the index says {got or 'nothing'}")
    for s, tg in index.upto(None):
        report.rows[ANNOTATIONS] += 1
        found.add(ANNOTATIONS, int(s), f"an index row (target {tg}) at a seq that holds no annotation record "
                                       "(forged?)")


def verify_index(engine: Engine, *, page: int = _PAGE, cap: int = MAX_FINDINGS,
                 workers: int | None = None, state_roots: bool = False) -> IndexReport:
    """Check every trace-index row against the sealed records (one snapshot); the report, or
    ``DerivedRowError`` naming up to ``cap`` differences (table, seq, what) and counting all.
    ``workers`` processes re-parse the payloads for their account keys (default: one per core,
    at most 4, once the ledger holds more than two pages of decisions; 1: this process only).
    Sealed state snapshots are parsed and checked in place; with ``state_roots`` their roots are
    recomputed from the state deltas too (``audit.query.snapshot_check``: a catch-up per run), and
    the roots of the sealed account-risk snapshots from the decision records
    (``audit.query.risk_snapshot_check``: a rebuild per policy)."""
    started = time.perf_counter()
    report = IndexReport()
    found = _Findings(cap)
    opts = {"isolation_level": "REPEATABLE READ"} if engine.dialect.name == "postgresql" else {}
    with engine.connect().execution_options(**opts) as conn, conn.begin():
        _check_all_decisions(conn, report, found, page, workers)
        _check_annotations(conn, report, found)
        view = check_case_view(conn, found.add)
        report.case_view = {"watermark": view.watermark, "alerts": view.alerts, "cases": view.cases,
                            "events": view.events, "outcomes": view.outcomes}
        state_key = _state_key(conn)
        risk_key_id = _account_key_id(conn)
    snaps = check_snapshots(engine, state_key, found.add, roots=state_roots)
    report.state_snapshots, report.state_roots_recomputed = snaps.snapshots, snaps.recomputed
    risks = check_risk_snapshots(engine, risk_key_id, found.add, roots=state_roots)
    report.account_risk_snapshots, report.account_risk_roots_recomputed = risks.snapshots, risks.recomputed
    if found.total:
        raise found.error()
    report.seconds = time.perf_counter() - started
    return report
