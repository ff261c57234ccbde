"""Finding decisions: filtered, newest-first pages over the trace index, and one trace in full.

``query_traces(engine, TraceFilter(...))`` returns a page in seq-descending order with an
opaque cursor for the next one (keyset pagination on seq: a page costs the same at the first
decision as at the ten-millionth). Each filter reads one index of ``audit.query.index``
whose last column is seq; a time window becomes a range of seqs first (two seeks: recorded_at
never decreases along seq), so it bounds that index's range instead of sorting the window.
A bad filter value or cursor raises :class:`QueryError` naming the field (the API answers 422).
``get_trace`` reads the ledger itself: the exact sealed bytes, the payload (or that it was
purged) and the annotations that refer to the trace; ``get_traces`` reads many that way in a
few statements (a page that shows many decisions).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from sqlalchemy import CompoundSelect, Engine, Select, literal_column, select, union_all

from audit.errors import QueryError
from audit.query.index import account_key, trace_accounts, trace_annotations, trace_rules, traces
from ledger import store
from wasm_rules import OUTCOMES

__all__ = [
    "MAX_LIMIT", "AnnotationView", "TraceDetail", "TraceFilter", "TracePage", "TraceSummary",
    "checked_limit", "get_trace", "get_traces", "parse_time", "principal_key", "query_traces", "time_text",
    "time_window"
]

MAX_LIMIT = 1000
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_RULE_ID = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_MAX_RISK = 2**62  # milli-points: any account_risk_milli an index column holds
_CURSOR = re.compile(rb"t1\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{8})")
_ALERT_MASKS = (1, 2, 3)  # account_alert: originator 1, beneficiary 2, both 3


def time_text(t: datetime) -> str:
    """The index's time text for an aware ``t`` (strftime would not zero-pad a year before 1000)."""
    return t.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(value: str | datetime | None, name: str) -> str | None:
    """A query's time bound as the index's sortable text; ``QueryError`` naming ``name`` if it is not
    an ISO 8601 time with a UTC offset."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise QueryError(name, f"{value!r} is not an ISO 8601 time") from None
    if not isinstance(value, datetime):
        raise QueryError(name, "must be an ISO 8601 time")
    if value.tzinfo is None:
        raise QueryError(name, "must carry a UTC offset (e.g. 2026-12-02T11:22:18Z)")
    try:
        return time_text(value)
    except OverflowError:
        raise QueryError(name, "is out of range in UTC") from None


def time_window(since: str | datetime | None, until: str | datetime | None) -> tuple[str | None, str | None]:
    """A filter's ``[since, until)`` as index time text (``parse_time``), until after since."""
    start, end = parse_time(since, "since"), parse_time(until, "until")
    if start is not None and end is not None and end <= start:
        raise QueryError("until", "must be later than since")
    return start, end


def principal_key(principal: str | None) -> str | None:
    """A filter's principal: a certificate SHA-256 fingerprint (lower-cased) or a subject DN."""
    if principal is None:
        return None
    if not isinstance(principal, str) or not principal.strip():
        raise QueryError("principal", "must be a certificate fingerprint or a subject DN")
    return principal.lower() if _HEX64.fullmatch(principal) else principal


def checked_limit(limit: int) -> int:
    """A page size in 1..MAX_LIMIT."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise QueryError("limit", f"{limit!r} is not an integer in 1..{MAX_LIMIT}")
    return limit


def _score(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise QueryError(name, f"{value!r} is not a number in [0, 1]")
    return float(value)


@dataclass(frozen=True)
class TraceFilter:
    """What an officer asks for; every given field must match (AND). Values are checked and
    normalised on construction: times to the ledger's UTC µs form, fingerprints to lower case."""

    since: str | datetime | None = None  # recorded_at >= since
    until: str | datetime | None = None  # recorded_at < until
    decision: str | None = None  # ALLOW | REVIEW | HOLD | BLOCK
    rule_id: str | None = None  # a rule that fired
    account: str | None = None  # originator or beneficiary account, in clear (hashed here, never stored)
    principal: str | None = None  # certificate SHA-256 fingerprint (hex) or RFC 4514 subject
    score_min: float | None = None
    score_max: float | None = None
    limit: int = 100
    cursor: str | None = None
    account_risk_min_milli: int | None = None  # account_risk.max_milli >= this (decision/2 records only)
    account_alert: bool = False  # only decisions that raised an account alert

    def __post_init__(self) -> None:
        put = object.__setattr__
        since, until = time_window(self.since, self.until)
        put(self, "since", since)
        put(self, "until", until)
        if self.decision is not None and self.decision not in OUTCOMES:
            raise QueryError("decision", f"{self.decision!r} is not one of {', '.join(OUTCOMES)}")
        rule = self.rule_id
        if rule is not None and (not isinstance(rule, str) or not _RULE_ID.fullmatch(rule)):
            raise QueryError("rule_id", f"{self.rule_id!r} is not a rule id ({_RULE_ID.pattern})")
        account = self.account
        if account is not None and (not isinstance(account, str) or not account.replace(" ", "")):
            raise QueryError("account", "must be a non-empty account number or IBAN")
        put(self, "principal", principal_key(self.principal))
        put(self, "score_min", _score(self.score_min, "score_min"))
        put(self, "score_max", _score(self.score_max, "score_max"))
        if self.score_min is not None and self.score_max is not None and self.score_min > self.score_max:
            raise QueryError("score_max", "must not be below score_min")
        checked_limit(self.limit)
        risk = self.account_risk_min_milli
        if risk is not None and (type(risk) is not int or not 0 <= risk <= _MAX_RISK):
            raise QueryError("account_risk_min_milli", f"{risk!r} is not an integer in 0..{_MAX_RISK} "
                             "(milli-points)")
        if type(self.account_alert) is not bool:
            raise QueryError("account_alert", f"{self.account_alert!r} is not true or false")
        if self.cursor is not None:
            self.after_seq()  # refuse a bad cursor now, not at query time

    def _fingerprint(self) -> str:
        """What a cursor is bound to: the filter without limit and cursor."""
        d = asdict(self)
        del d["limit"], d["cursor"]
        for name in ("account_risk_min_milli", "account_alert"):  # cursors issued before them still hold
            if d[name] is None or d[name] is False:
                del d[name]
        return hashlib.sha256(orjson.dumps(d, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]

    def after_seq(self) -> int | None:
        """The seq the cursor points below, or None for the first page."""
        if self.cursor is None:
            return None
        try:
            raw = base64.urlsafe_b64decode(self.cursor + "=" * (-len(self.cursor) % 4))
        except (binascii.Error, ValueError):
            raise QueryError("cursor", "is not a cursor this service issued") from None
        m = _CURSOR.fullmatch(raw)
        if m is None or not isinstance(self.cursor, str):
            raise QueryError("cursor", "is not a cursor this service issued")
        if m.group(2).decode() != self._fingerprint():
            raise QueryError("cursor", "was issued for a different filter")
        return int(m.group(1))

    def cursor_after(self, seq: int) -> str:
        token = f"t1.{seq}.{self._fingerprint()}".encode()
        return base64.urlsafe_b64encode(token).rstrip(b"=").decode()


@dataclass(frozen=True)
class TraceSummary:
    seq: int
    trace_id: str
    recorded_at: str
    event_at: str
    decision: str
    score: float | None
    fail_safe: str | None  # reason code (SANDBOX_FAULT, MODEL_ERROR, DEADLINE_EXCEEDED) or None
    fired: tuple[str, ...]
    principal_subject: str
    principal_fp: str
    ruleset_id: str
    ruleset_version: str
    module_sha256: str
    account_risk_milli: int | None = None  # account_risk.max_milli; None: the record states none
    account_alerts: tuple[str, ...] = ()  # the sides that raised an account alert


@dataclass(frozen=True)
class TracePage:
    items: list[TraceSummary]
    next_cursor: str | None  # None on the last page


def _window_seqs(f: TraceFilter) -> tuple[Any, Any]:
    """The window ``[since, until)`` as seq bounds ``(lo, hi)``, inclusive, each a scalar
    subquery that seeks ``ix_audit_traces_recorded_at_seq`` once (None: that side is open).

    recorded_at never decreases along seq (``ledger.append``), so the decisions recorded in the
    window are exactly those from the first recorded at or after ``since`` to the last recorded
    before ``until``: a page is then a range of a seq-ordered index, where a filter on
    recorded_at would sort the whole window (SQLite) or walk every newer row (PostgreSQL). A
    bound with no decision on its side is NULL, which no seq passes: the page is empty, as it
    must be."""
    w = traces.alias("w")  # not correlated with the page's own audit_traces
    lo = hi = None
    if f.since is not None:
        lo = (select(w.c.seq).where(w.c.recorded_at >= f.since)
              .order_by(w.c.recorded_at, w.c.seq).limit(1).scalar_subquery())
    if f.until is not None:
        hi = (select(w.c.seq).where(w.c.recorded_at < f.until)
              .order_by(w.c.recorded_at.desc(), w.c.seq.desc()).limit(1).scalar_subquery())
    return lo, hi


def _page_query(f: TraceFilter, dialect: str) -> Select[Any] | CompoundSelect[Any]:
    """One page of ``f`` (and one row more) as one statement for ``dialect``'s planner."""
    t = traces
    q = select(*t.c)
    # The table whose index drives the scan gives the order and the keyset: a page is then a
    # descending range scan of that index with a primary-key lookup per row.
    # With both an account and a rule, the account drives: an account's decisions are few, a rule's
    # may be most of the log, and a scan down the rule's index for a page of the account's reads
    # every decision the rule fired on (SQLite, which sealtrail never gives statistics, chose it).
    # A hub account's page is read down its own decisions: at most its history, never the log's.
    order = t.c.seq
    if f.account is not None:
        a = trace_accounts.alias("a")
        q = q.join(a, a.c.seq == t.c.seq).where(a.c.account_key == account_key(f.account))
        order = a.c.seq
    if f.rule_id is not None:
        r = trace_rules.alias("r")
        q = q.join(r, r.c.seq == order).where(r.c.rule_id == f.rule_id)
        if f.account is None:
            order = r.c.seq
    lo, hi = _window_seqs(f)
    after = f.after_seq()
    # Each seq bound goes on the ordering column and, where that is a joined table's, on
    # audit_traces too: implied by the join, but said outright, otherwise PostgreSQL may
    # merge-join by walking audit_traces down from the newest row (deep pages grow slow).
    for col in (order,) if order is t.c.seq else (order, t.c.seq):
        if lo is not None:
            q = q.where(col >= lo)
        if hi is not None:
            q = q.where(col <= hi)
        if after is not None:
            q = q.where(col < after)
    if f.decision is not None:
        q = q.where(t.c.decision == f.decision)
    if f.principal is not None:
        col = t.c.principal_fp if _HEX64.fullmatch(f.principal) else t.c.principal_subject
        q = q.where(col == f.principal)
    if f.score_min is not None:
        q = q.where(t.c.score >= f.score_min)
    if f.score_max is not None:
        q = q.where(t.c.score <= f.score_max)
    if f.account_risk_min_milli is not None:
        q = q.where(t.c.account_risk_milli >= f.account_risk_min_milli)
    n = f.limit + 1
    if f.account_alert and order is t.c.seq:
        # Driven by (account_alert, seq), IN (1, 2, 3) is three ranges whose union is in no
        # index's order: a page would sort every alerted decision. One branch per value, each in
        # seq order, merged, reads one page: SQLite merges the plain branches (MERGE (UNION
        # ALL)); PostgreSQL (15) only merges (Merge Append) subqueries each ordered and limited.
        branches = [q.where(t.c.account_alert == k) for k in _ALERT_MASKS]
        if dialect == "sqlite":
            return union_all(*branches).order_by(literal_column("seq").desc()).limit(n)
        u = union_all(*(b.order_by(t.c.seq.desc()).limit(n).subquery().select() for b in branches)).subquery()
        return select(u).order_by(u.c.seq.desc()).limit(n)
    if f.account_alert:  # a rule's or an account's index drives the scan: a filter on its rows
        q = q.where(t.c.account_alert.in_(_ALERT_MASKS))
    return q.order_by(order.desc()).limit(n)


def _summary(row: Any) -> TraceSummary:
    score = row.score
    return TraceSummary(int(row.seq), row.trace_id, row.recorded_at, row.event_at, row.decision,
                        None if score is None or math.isnan(score) else float(score), row.fail_safe,
                        tuple(row.fired.split(",")) if row.fired else (), row.principal_subject,
                        row.principal_fp, row.ruleset_id, row.ruleset_version, row.module_sha256,
                        None if row.account_risk_milli is None else int(row.account_risk_milli),
                        _sides(row.account_alert))


def _sides(mask: int | None) -> tuple[str, ...]:
    m = mask or 0
    return tuple(name for bit, name in ((1, "originator"), (2, "beneficiary")) if m & bit)


def query_traces(engine: Engine, f: TraceFilter) -> TracePage:
    """One page of the decisions matching ``f``, newest first."""
    with engine.connect() as conn:
        rows = conn.execute(_page_query(f, conn.dialect.name)).all()
    items = [_summary(r) for r in rows[:f.limit]]
    more = len(rows) > f.limit
    return TracePage(items, f.cursor_after(items[-1].seq) if more else None)


@dataclass(frozen=True)
class AnnotationView:
    seq: int
    trace_id: str
    recorded_at: str
    body: dict[str, Any]  # the sealtrail.annotation/1 record


@dataclass(frozen=True)
class TraceDetail:
    seq: int
    trace_id: str
    kind: str
    recorded_at: str
    leaf_hash: str  # hex
    chain_hash: str  # hex
    record: bytes  # the exact sealed envelope bytes (hash them: SHA-256(0x00 || record) = leaf_hash)
    body: dict[str, Any]  # the envelope's "record" member
    payload_sha256: str | None
    payload: bytes | None
    payload_state: Literal["none", "present", "purged", "absent"]  # absent: hash sealed, no row (damage)
    annotations: tuple[AnnotationView, ...] = field(default=())
    # index columns (trace_id, kind, recorded_at) that differ from the sealed envelope: damage
    mismatches: tuple[str, ...] = field(default=())


def get_trace(engine: Engine, trace_id: str) -> TraceDetail | None:
    """A trace by id with its sealed bytes, payload and annotations; None if there is none."""
    if not isinstance(trace_id, str) or not _UUID.fullmatch(trace_id):
        raise QueryError("trace_id", f"{trace_id!r} is not a UUID")
    e, p = store.entries, store.payloads
    with engine.connect() as conn:
        row = conn.execute(select(e.c.seq, e.c.kind, e.c.record, e.c.leaf_hash, e.c.chain_hash,
                                  e.c.recorded_at).where(e.c.trace_id == trace_id.lower())).first()
        if row is None:
            return None
        record = bytes(row.record)
        env = orjson.loads(record)
        digest = env.get("payload_sha256")
        payload: bytes | None = None
        state: Literal["none", "present", "purged", "absent"] = "none"
        if digest is not None:
            got = conn.execute(select(p.c.data).where(p.c.sha256 == digest)).first()
            state = "absent" if got is None else "purged" if got.data is None else "present"
            payload = None if got is None or got.data is None else bytes(got.data)
        a = trace_annotations
        notes = conn.execute(select(e.c.seq, e.c.trace_id, e.c.recorded_at, e.c.record)
                             .join(a, a.c.seq == e.c.seq).where(a.c.target_seq == row.seq)
                             .order_by(a.c.seq)).all()
    columns = {"trace_id": trace_id.lower(), "kind": row.kind, "recorded_at": row.recorded_at}
    mismatches = tuple(k for k, v in columns.items() if env.get(k) != v)
    return TraceDetail(int(row.seq), trace_id.lower(), row.kind, row.recorded_at, bytes(row.leaf_hash).hex(),
                       bytes(row.chain_hash).hex(), record, env["record"], digest, payload, state,
                       tuple(AnnotationView(int(n.seq), n.trace_id, n.recorded_at,
                                            orjson.loads(n.record)["record"]) for n in notes), mismatches)


_BATCH = 500  # ids a statement of ``get_traces`` asks for (well under any driver's parameter limit)


def get_traces(engine: Engine, trace_ids: Iterable[str]) -> dict[str, TraceDetail]:
    """The traces of ``trace_ids`` by lower-cased id, each as ``get_trace`` reads it, in a few
    statements (three per 500 ids) instead of three per trace. An id with no trace, or that is not
    a UUID (``get_trace`` would raise ``QueryError``), has no key."""
    wanted = list(dict.fromkeys(t.lower() for t in trace_ids if isinstance(t, str) and _UUID.fullmatch(t)))
    e, p, a = store.entries, store.payloads, trace_annotations
    out: dict[str, TraceDetail] = {}
    with engine.connect() as conn:
        for i in range(0, len(wanted), _BATCH):
            rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record, e.c.leaf_hash, e.c.chain_hash,
                                       e.c.recorded_at, e.c.trace_id)
                                .where(e.c.trace_id.in_(wanted[i:i + _BATCH]))).all()
            if not rows:
                continue
            envs = {r.seq: orjson.loads(bytes(r.record)) for r in rows}
            digests = list({d for env in envs.values() if (d := env.get("payload_sha256")) is not None})
            stored: dict[str, bytes | None] = {}
            for j in range(0, len(digests), _BATCH):
                stored.update((g.sha256, None if g.data is None else bytes(g.data)) for g in conn.execute(
                    select(p.c.sha256, p.c.data).where(p.c.sha256.in_(digests[j:j + _BATCH]))))
            notes: dict[int, list[AnnotationView]] = {}
            for n in conn.execute(select(a.c.target_seq, e.c.seq, e.c.trace_id, e.c.recorded_at, e.c.record)
                                  .join(a, a.c.seq == e.c.seq).where(a.c.target_seq.in_(list(envs)))
                                  .order_by(a.c.seq)):
                notes.setdefault(int(n.target_seq), []).append(
                    AnnotationView(int(n.seq), n.trace_id, n.recorded_at, orjson.loads(n.record)["record"]))
            for row in rows:
                env = envs[row.seq]
                digest = env.get("payload_sha256")
                payload: bytes | None = None
                state: Literal["none", "present", "purged", "absent"] = "none"
                if digest is not None:
                    payload = stored.get(digest)
                    state = "absent" if digest not in stored else "purged" if payload is None else "present"
                tid = row.trace_id
                columns = {"trace_id": tid, "kind": row.kind, "recorded_at": row.recorded_at}
                mismatches = tuple(k for k, v in columns.items() if env.get(k) != v)
                out[tid] = TraceDetail(int(row.seq), tid, row.kind, row.recorded_at,
                                       bytes(row.leaf_hash).hex(), bytes(row.chain_hash).hex(),
                                       bytes(row.record), env["record"], digest, payload, state,
                                       tuple(notes.get(int(row.seq), ())), mismatches)
    return out
