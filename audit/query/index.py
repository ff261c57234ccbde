"""The query index of decisions: derived rows written in the same commit as the ledger entries.

``TraceIndex`` is the pipeline's ``DecisionIndex``: ``write`` runs inside the sealing
transaction (``Ledger.append_many(..., alongside=...)``), so a decision is queryable exactly
when it is durable, and a failed commit leaves no index row. Every filter of
``audit.query.traces`` has an index whose last column is ``seq``, so a filtered, newest-first page
is one index range scan.

Accounts are never stored in clear: ``audit_trace_accounts`` holds ``account_key(account)``,
an unsalted, domain-separated SHA-256 of the normalised account (the IBAN if the account is a
valid one, else the account upper-cased without spaces), for the originator (debtor) and the
beneficiary (creditor). That is pseudonymisation, not anonymisation: whoever knows an account
can compute its key, which is exactly how the filter works. The accounts themselves live only
in the purgeable payload store.

Account risk (``sealtrail.decision/2``, migration 0007): ``account_risk_milli`` is the larger
of the two accounts' risk after the decision (``account_risk.max_milli``), ``account_alert`` a
bitmask of the sides that raised an account alert (1 originator, 2 beneficiary, 0 none); both
are null for a version 1 record, which states no account risk.

The index is derived, never the truth: ``ledger verify`` checks every row against the record it
derives from (``audit.query.verify``), export selection checks the rows it relies on, and a row
already in the way of the writer (a forged one) never fails the sealing commit: the decision is
sealed, the conflict logged and counted (``TraceIndex.conflicts``) and named by verify.

The index is rebuildable: ``catch_up(engine)`` indexes every decision and
annotation entry that has no index row yet (a ledger written before the index existed, a
restore, a pipeline run without an index), reading accounts back from the payloads; a purged
payload yields no account rows (counted). The tables refuse UPDATE and DELETE like the
ledger's own (migration 0003), and catch-up only inserts (``ON CONFLICT DO NOTHING``), so it
is idempotent and safe beside live writers. Known limit: an account key written before its
payload was purged stays in the index; removing those links means recreating the index tables
(downgrade to 0002, upgrade, ``catch_up``), which then skips the purged payloads.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Double,
    Engine,
    Index,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
)
from sqlalchemy.exc import IntegrityError

from audit.decide.account_risk import AccountRisk
from audit.decide.record import DECISION_KIND, DecisionBatch, DecisionInputs, body_score
from inference.messages import Party, Transaction, parse_messages, transaction_schema_of
from inference.messages.fields import iban_or_none
from ledger import Receipt, store

if TYPE_CHECKING:
    from audit.decide.types import Submission

__all__ = ["ACCOUNT_KEY_DOMAIN", "ANNOTATION_KIND", "TABLES", "TRACE_COLUMNS", "CatchUpReport", "TraceIndex",
           "account_key", "accounts_of", "alert_mask", "annotation_target", "catch_up", "metadata",
           "payload_data", "record_rows", "trace_accounts", "trace_annotations", "trace_rules", "traces",
           "write_annotations"]

log = logging.getLogger(__name__)

ANNOTATION_KIND = "annotation"
ACCOUNT_KEY_DOMAIN = b"sealtrail.account-key/1\n"
_PAGE = 2000

metadata = MetaData()

traces = Table(
    "audit_traces",
    metadata,
    Column("seq", store.SeqType, primary_key=True, autoincrement=False),
    Column("trace_id", String(36), nullable=False),
    Column("recorded_at", String(27), nullable=False, comment="the envelope's, UTC µs"),
    Column("event_at", String(27), nullable=False, comment="the record's 'at'"),
    Column("decision", String(8), nullable=False),
    Column("score", Double, nullable=True),
    Column("fail_safe", String(32), nullable=True, comment="reason code of a fail-safe HOLD"),
    Column("fired", Text, nullable=False, comment="fired rule ids, comma-separated"),
    Column("principal_fp", String(64), nullable=False, comment="SHA-256 of the client certificate"),
    Column("principal_subject", Text, nullable=False),
    Column("ruleset_id", String(64), nullable=False),
    Column("ruleset_version", Text, nullable=False),
    Column("module_sha256", String(64), nullable=False),
    Column("account_risk_milli", BigInteger, nullable=True,
           comment="account_risk.max_milli (decision/2); null: the record states none"),
    Column("account_alert", SmallInteger, nullable=True,
           comment="sides that raised an account alert: 1 originator, 2 beneficiary, 3 both, 0 none"),
    Index("ix_audit_traces_trace_id", "trace_id", unique=True),
    Index("ix_audit_traces_recorded_at_seq", "recorded_at", "seq"),
    Index("ix_audit_traces_decision_seq", "decision", "seq"),
    Index("ix_audit_traces_principal_fp_seq", "principal_fp", "seq"),
    Index("ix_audit_traces_principal_subject_seq", "principal_subject", "seq"),
    Index("ix_audit_traces_score_seq", "score", "seq"),
    Index("ix_audit_traces_account_risk_seq", "account_risk_milli", "seq"),
    Index("ix_audit_traces_account_alert_seq", "account_alert", "seq"),
)

trace_rules = Table(
    "audit_trace_rules",
    metadata,
    Column("rule_id", String(64), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)

trace_accounts = Table(
    "audit_trace_accounts",
    metadata,
    Column("account_key", String(64), primary_key=True, comment="account_key(): SHA-256, never the account"),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)

trace_annotations = Table(
    "audit_annotations",
    metadata,
    Column("target_seq", BigInteger, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Index("ix_audit_annotations_seq", "seq", unique=True),
    sqlite_with_rowid=False,
)

TABLES = (traces, trace_rules, trace_accounts, trace_annotations)
_TRACE_COLS = tuple(c.name for c in traces.columns)
TRACE_COLUMNS = _TRACE_COLS


@lru_cache(maxsize=65536)
def account_key(account: str) -> str:
    """The index key of an account: SHA-256 hex over a domain string and the normalised account
    (its IBAN if valid, else upper-case without spaces). What a filter value is turned into."""
    normal = iban_or_none(account) or account.replace(" ", "").upper()
    return hashlib.sha256(ACCOUNT_KEY_DOMAIN + normal.encode()).hexdigest()


def _party_keys(*parties: Party) -> set[str]:
    return {account_key(p.account) for p in parties if p.account}


def _reason_code(fail_safe: str | None) -> str | None:
    return None if fail_safe is None else fail_safe.split(":", 1)[0][:32]


_ALERT_BITS = {"originator": 1, "beneficiary": 2}


def alert_mask(alerts: Iterable[str]) -> int:
    """``account_alert``: 1 for the originator, 2 for the beneficiary, summed."""
    return sum(_ALERT_BITS.get(a, 0) for a in set(alerts))


def _risk_columns(risk: AccountRisk | None) -> tuple[int | None, int | None]:
    return (None, None) if risk is None else (risk.max_milli, alert_mask(risk.alerts))


def _recorded_risk(body: dict[str, Any]) -> tuple[Any, Any]:
    """The account-risk columns a record stands for (as stated: verify compares, never trusts)."""
    risk = body.get("account_risk")
    if not isinstance(risk, dict):
        return None, None
    alerts = risk.get("alerts")
    names = [a for a in alerts if isinstance(a, str)] if isinstance(alerts, list) else []
    return risk.get("max_milli"), alert_mask(names)


def _trace_row(seq: int, trace_id: str, recorded_at: str, at: str, decision: str, score: float | None,
               fail_safe: str | None, fired: Iterable[str], principal: dict[str, Any], ruleset_id: str,
               version: str, module: str, risk: tuple[Any, Any] = (None, None)) -> tuple[Any, ...]:
    return (seq, trace_id, recorded_at, at, decision, score, _reason_code(fail_safe), ",".join(fired),
            principal.get("fingerprint_sha256", ""), principal.get("subject", ""), ruleset_id, version,
            module, *risk)


def record_rows(seq: int, env: dict[str, Any]) -> tuple[tuple[Any, ...], list[str]]:
    """The ``audit_traces`` row and the fired rule ids (``audit_trace_rules``) that the sealed
    decision envelope ``env`` at ``seq`` stands for: what catch-up writes and what verification
    expects (the live writer builds the same from the batch; tests hold them equal)."""
    b = env["record"]
    ids = list(dict.fromkeys(h["id"] for h in b["fired"]))
    rules = b["rules"]
    return (_trace_row(seq, env["trace_id"], env["recorded_at"], b["at"], b["decision"], body_score(b),
                       b["fail_safe"], ids, b["principal"], rules["ruleset_id"], rules["version"],
                       rules["module_sha256"], _recorded_risk(b)), ids)


def annotation_target(env: dict[str, Any]) -> int:
    """The seq of the decision a sealed annotation envelope refers to."""
    return int(env["record"]["refers_to"]["seq"])


def _insert(conn: Connection, table: Table, columns: Sequence[str], rows: list[Any], *,
            skip_existing: bool = False) -> int:
    """Insert ``rows``; with ``skip_existing``, a row whose unique key is taken is skipped. How
    many rows were written (both drivers sum an executemany's row counts)."""
    if not rows:
        return 0
    if not skip_existing:
        store.insert_rows(conn, table, columns, rows)
        return len(rows)
    p = store.param(conn)
    got = conn.exec_driver_sql(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
                               f"({', '.join([p] * len(columns))}) ON CONFLICT DO NOTHING", rows)
    return int(got.rowcount)


def write_annotations(conn: Connection, pairs: Sequence[tuple[int, int]], *,
                      skip_existing: bool = False) -> int:
    """Index ``(target_seq, annotation_seq)`` pairs (inside the annotation's own commit). A row
    already there that is not ours (a forged one) does not fail the commit: it is logged and
    counted (the return value), and ``ledger verify`` names it."""
    rows = list(pairs)
    if skip_existing:
        _insert(conn, trace_annotations, ("target_seq", "seq"), rows, skip_existing=True)
        return 0
    try:
        with conn.begin_nested():
            _insert(conn, trace_annotations, ("target_seq", "seq"), rows)
        return 0
    except IntegrityError:
        pass
    _insert(conn, trace_annotations, ("target_seq", "seq"), rows, skip_existing=True)
    p = store.param(conn)
    conflicts = 0
    for target, seq in rows:
        held = [int(t) for (t,) in conn.exec_driver_sql(
            f"SELECT target_seq FROM audit_annotations WHERE seq = {p}", (seq,))]
        if held != [target]:
            conflicts += 1
            log.error("derived row conflict: audit_annotations at seq %d holds target(s) %s, not the "
                      "sealed annotation's target %d; the annotation is sealed, its index row is not "
                      "written (run 'sealtrail ledger verify'; rebuild the index to repair)",
                      seq, held, target)
    return conflicts


class TraceIndex:
    """Writes the index rows of a batch of decisions inside the ledger's sealing transaction.

    The ledger entry is the truth and the index is derived from it: a row already in the index
    where this batch's rows go (a forged one: the tables only take inserts from the writer)
    never fails the sealing commit. The batch's rows are then written around it, each row that
    could not be written is logged (``derived row conflict``, naming the seq) and counted in
    ``conflicts``, and ``ledger verify`` names the row that disagrees with its record."""

    def __init__(self) -> None:
        self.conflicts = 0  # rows of sealed decisions not written: a foreign row held their place

    def write(self, conn: Connection, subs: Sequence[Submission], inputs: Sequence[DecisionInputs],
              receipts: Sequence[Receipt]) -> None:
        """One executemany per table. The pipeline's ``DecisionBatch`` is read column by column
        (rows zipped from lists, per-batch constants repeated, a fired set's ids and a principal's
        columns made once per distinct object); any other sequence of inputs item by item."""
        if len(subs) != len(inputs) or len(subs) != len(receipts):
            raise ValueError(f"{len(subs)} submissions, {len(inputs)} inputs, {len(receipts)} receipts")
        if not isinstance(inputs, DecisionBatch):
            self._store(conn, *_item_rows(subs, inputs, receipts))
            return
        seqs: list[int] = list(map(_SEQ, receipts))
        fired_ids: dict[int, tuple[str, list[str]]] = {}  # id(hits) -> (comma-separated, unique ids)
        who: dict[int, tuple[str, str]] = {}  # id(principal) -> (fingerprint, subject)
        csv: list[str] = []
        fps: list[str] = []
        subjects: list[str] = []
        rules: list[tuple[str, int]] = []
        keep = inputs.fired, inputs.principal  # the objects whose ids key the caches stay alive
        for seq, hits, principal in zip(seqs, *keep, strict=True):
            got = fired_ids.get(id(hits))
            if got is None:
                ids = list(dict.fromkeys(h.id for h in hits))
                got = fired_ids[id(hits)] = (",".join(ids), ids)
            csv.append(got[0])
            if got[1]:
                rules += [(i, seq) for i in got[1]]
            p = who.get(id(principal))
            if p is None:
                p = who[id(principal)] = (principal.get("fingerprint_sha256", ""),
                                          principal.get("subject", ""))
            fps.append(p[0])
            subjects.append(p[1])
        scores = [None if v != v else v for v in inputs.score]  # NaN: not scored
        reasons = [None if f is None else _reason_code(f) for f in inputs.fail_safe]
        risks = inputs.account_risk
        risk_milli: Iterable[int | None] = repeat(None)
        alerts: Iterable[int | None] = repeat(None)
        if risks is not None:
            cols = [_risk_columns(r) for r in risks]
            risk_milli, alerts = [c[0] for c in cols], [c[1] for c in cols]
        rows = list(zip(seqs, map(_TRACE_ID, receipts), map(_RECORDED_AT, receipts), inputs.at,
                        inputs.decision, scores, reasons, csv, fps, subjects, repeat(inputs.ruleset_id),
                        repeat(inputs.ruleset_version), repeat(inputs.module_sha256), risk_milli, alerts))
        accounts: list[tuple[str, int]] = []
        push = accounts.append
        key = account_key
        for seq, sub in zip(seqs, subs, strict=True):
            tx = sub.transaction
            o, b = tx.originator.account, tx.beneficiary.account
            ko = key(o) if o else None
            kb = key(b) if b else None
            if ko is not None:
                push((ko, seq))
            if kb is not None and kb != ko:
                push((kb, seq))
        self._store(conn, rows, rules, accounts)

    def _store(self, conn: Connection, rows: list[tuple[Any, ...]], rules: list[tuple[str, int]],
               accounts: list[tuple[str, int]]) -> None:
        """One executemany per table, each row skipped where its unique key is already taken;
        when fewer trace rows were written than given, name each one that was not. (No savepoint:
        on the single-request path, its two statements cost more than the inserts.)"""
        written = _insert(conn, traces, _TRACE_COLS, rows, skip_existing=True)
        _insert(conn, trace_rules, ("rule_id", "seq"), rules, skip_existing=True)  # a taken key: same row
        _insert(conn, trace_accounts, ("account_key", "seq"), accounts, skip_existing=True)
        if written != len(rows):
            self.conflicts += _report_conflicts(conn, rows)


def _report_conflicts(conn: Connection, rows: list[tuple[Any, ...]]) -> int:
    """Log each trace row of ``rows`` the index does not hold as written; how many."""
    p = store.param(conn)
    seqs = [r[0] for r in rows]
    cols = ", ".join(_TRACE_COLS)
    held = {int(r[0]): tuple(r) for r in conn.exec_driver_sql(
        f"SELECT {cols} FROM audit_traces WHERE seq >= {p} AND seq <= {p}", (min(seqs), max(seqs)))}
    n = 0
    for row in rows:
        got = held.get(row[0])
        if got is not None and got == tuple(row):
            continue
        n += 1
        if got is not None:
            why = f"seq {row[0]} already holds trace {got[1]} ({got[4]})"
        else:
            other = conn.exec_driver_sql(f"SELECT seq FROM audit_traces WHERE trace_id = {p}",
                                         (row[1],)).scalar()
            why = f"trace id {row[1]} is already indexed at seq {other}"
        log.error("derived row conflict: audit_traces row of the decision sealed at seq %d not written: "
                  "%s, a row the index writer did not write; the decision is sealed (run 'sealtrail "
                  "ledger verify'; rebuild the index to repair)", row[0], why)
    return n


_SEQ, _TRACE_ID, _RECORDED_AT = itemgetter(0), itemgetter(1), itemgetter(4)  # Receipt fields


def _item_rows(subs: Sequence[Submission], inputs: Sequence[DecisionInputs], receipts: Sequence[Receipt]
               ) -> tuple[list[tuple[Any, ...]], list[tuple[str, int]], list[tuple[str, int]]]:
    """``TraceIndex.write``'s rows for inputs that are not a ``DecisionBatch``, item by item."""
    rows: list[tuple[Any, ...]] = []
    rules: list[tuple[str, int]] = []
    accounts: list[tuple[str, int]] = []
    for sub, d, r in zip(subs, inputs, receipts, strict=True):
        seq = r.seq
        ids = list(dict.fromkeys(h.id for h in d.fired))
        score = None if math.isnan(d.score) else d.score
        rows.append(_trace_row(seq, r.trace_id, r.recorded_at, d.at, d.decision, score, d.fail_safe, ids,
                               d.principal, d.ruleset_id, d.ruleset_version, d.module_sha256,
                               _risk_columns(d.account_risk)))
        rules += [(i, seq) for i in ids]
        tx = sub.transaction
        accounts += [(k, seq) for k in _party_keys(tx.originator, tx.beneficiary)]
    return rows, rules, accounts


@dataclass(frozen=True)
class CatchUpReport:
    decisions: int  # decision entries indexed by this run
    annotations: int
    missing_payload: int  # decisions indexed without account rows (payload purged or unreadable)


def _complete(engine: Engine, kind: str, table: Table) -> bool:
    """One index row per entry of ``kind``: two counts, read without taking the writer lock, so
    that a start-up never blocks the sequencer. Each count reads a whole covering index (no table
    row), so it grows with the log; a constant-time test (the newest seq on either side) would
    miss a gap in the middle, decisions sealed without the index between commits that wrote it,
    which ``catch_up`` must fill."""
    with engine.connect() as conn:
        p = store.param(conn)
        entries = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM ledger_entries WHERE kind = {p}", (kind,)).scalar_one()
        indexed = conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table.name}").scalar_one()
    return int(entries) == int(indexed)


def _unindexed(conn: Connection, kind: str, table: Table, after: int) -> list[tuple[int, bytes]]:
    p = store.param(conn)
    return [(int(s), bytes(r)) for s, r in conn.exec_driver_sql(
        f"SELECT e.seq, e.record FROM ledger_entries e WHERE e.kind = {p} AND e.seq > {p} AND NOT EXISTS "
        f"(SELECT 1 FROM {table.name} x WHERE x.seq = e.seq) ORDER BY e.seq LIMIT {_PAGE}",
        (kind, after))]


def accounts_of(body: dict[str, Any], raw: bytes | None) -> set[str] | None:
    """The account keys of a decision body's transaction, read from its payload ``raw``; None
    where the payload is gone (purged) or no transaction in it is the sealed one."""
    if raw is None:
        return None
    want = body["input"]["transaction_sha256"]
    schema = transaction_schema_of(body["input"].get("parser"))
    parsed = parse_messages(raw, body["input"]["format"])
    tx = next((t for t in parsed if isinstance(t, Transaction) and t.sha256_of(schema) == want), None)
    return None if tx is None else _party_keys(tx.originator, tx.beneficiary)


def payload_data(conn: Connection, wanted: Sequence[str]) -> dict[str, bytes | None]:
    """The stored payloads of ``wanted`` digests (None: purged; absent: no row), 500 a query."""
    data: dict[str, bytes | None] = {}
    p = store.param(conn)
    for i in range(0, len(wanted), 500):
        chunk = list(wanted[i:i + 500])
        data.update((str(h), None if d is None else bytes(d)) for h, d in conn.exec_driver_sql(
            f"SELECT sha256, data FROM ledger_payloads WHERE sha256 IN ({', '.join([p] * len(chunk))})",
            tuple(chunk)))
    return data


def _index_decisions(conn: Connection, page: list[tuple[int, bytes]]) -> int:
    envs = [(seq, orjson.loads(rec)) for seq, rec in page]
    data = payload_data(conn, sorted({env["payload_sha256"] for _, env in envs if "payload_sha256" in env}))
    rows, rules, accounts, missing = [], [], [], 0
    for seq, env in envs:
        row, ids = record_rows(seq, env)
        rows.append(row)
        rules += [(i, seq) for i in ids]
        keys = accounts_of(env["record"], data.get(env.get("payload_sha256", "")))
        if keys is None:
            missing += 1
        else:
            accounts += [(k, seq) for k in keys]
    _insert(conn, traces, _TRACE_COLS, rows, skip_existing=True)
    _insert(conn, trace_rules, ("rule_id", "seq"), rules, skip_existing=True)
    _insert(conn, trace_accounts, ("account_key", "seq"), accounts, skip_existing=True)
    return missing


def catch_up(engine: Engine) -> CatchUpReport:
    """Index every decision and annotation entry that has no index row yet (idempotent; on an
    empty index this is the rebuild). One transaction per page of entries."""
    counts = {DECISION_KIND: 0, ANNOTATION_KIND: 0}
    missing = 0
    for kind, table in ((DECISION_KIND, traces), (ANNOTATION_KIND, trace_annotations)):
        if _complete(engine, kind, table):
            continue  # the usual start-up: every entry was indexed in its own commit
        after = -1
        while True:
            with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn, conn.begin():
                page = _unindexed(conn, kind, table, after)
                if not page:
                    break
                if kind == DECISION_KIND:
                    missing += _index_decisions(conn, page)
                else:
                    pairs = [(annotation_target(orjson.loads(rec)), seq) for seq, rec in page]
                    write_annotations(conn, pairs, skip_existing=True)
            counts[kind] += len(page)
            after = page[-1][0]
    return CatchUpReport(counts[DECISION_KIND], counts[ANNOTATION_KIND], missing)
