"""Reading the alert and case view: the officer's queue, one alert, the list of cases, a case with
its history, and the held-payment outcomes feed for the payment system.

Every page is a keyset page (an opaque cursor names the last row, bound to the filter it was
issued for), served by one range scan of an index of ``audit.cases.tables``; a page costs the
same at the first and at the thousandth. Each read first brings the view current
(``catch_up``: nothing to do, and no lock, when no record was sealed since). A bad filter value
or cursor raises ``CaseError`` naming the field (the API answers 422).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from dataclasses import asdict, dataclass, fields
from datetime import date
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, RowMapping, Select, and_, select, tuple_

from audit.cases.state import ALERT_OUTCOMES, AlertState, CaseState, is_seq
from audit.cases.store import alert_from_row, case_from_row, catch_up
from audit.cases.tables import alerts, case_events, cases, payment_outcomes
from audit.errors import CaseError, CaseNotFoundError
from audit.query.index import ANNOTATION_KIND, trace_annotations, trace_rules
from audit.query.traces import AnnotationView
from ledger import store

__all__ = ["CASE_VIEWS", "MAX_LIMIT", "VIEWS", "AlertFilter", "AlertPage", "CaseAlert", "CaseDetail",
           "CaseEvent", "CaseFilter", "CasePage", "OutcomePage", "alert_page", "case_detail", "case_page",
           "get_alert", "outcome_item", "outcomes_since"]

VIEWS = ("open", "mine", "unassigned", "overdue", "closed", "qa", "all")
CASE_VIEWS = ("open", "mine", "unassigned", "closed", "all")
MAX_LIMIT = 500
_CURSOR = re.compile(r"a1\.(\d{4}-\d{2}-\d{2}|-)\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{8})")
_CASE_CURSOR = re.compile(r"c1\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{8})")
_RULE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
log = logging.getLogger(__name__)


def _opened(cursor: str, pattern: re.Pattern[str], fingerprint: str) -> tuple[str, ...]:
    """The positions a cursor this service issued holds (its groups but the last), checked against
    the filter's ``fingerprint``; ``CaseError`` naming ``cursor`` otherwise. The last group is the
    fingerprint, the one before it a seq."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise CaseError("cursor", "is not a cursor this service issued") from None
    m = pattern.fullmatch(raw)
    if m is None or not is_seq(int(m.groups()[-2])):
        raise CaseError("cursor", "is not a cursor this service issued")
    if m.groups()[-1] != fingerprint:
        raise CaseError("cursor", "was issued for a different filter")
    return m.groups()[:-1]


@dataclass(frozen=True)
class AlertFilter:
    """Which alerts, in which order. ``view``: ``open`` (default), ``mine`` (assigned to ``me``,
    open), ``unassigned`` (open), ``overdue`` (open, review due before ``today``; most overdue
    first), ``closed``, ``qa`` (closed, drawn for quality assurance and not reviewed yet: ``qa``
    is ``due``), ``all``. ``order``: ``newest`` (default) or ``oldest`` first (not for
    ``overdue``, which is always most overdue first)."""

    view: str = "open"
    outcome: str | None = None
    rule: str | None = None
    case_id: int | None = None
    me: str | None = None  # the officer's certificate fingerprint, for ``mine``
    order: str = "newest"
    limit: int = 50
    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise CaseError("view", f"{self.view!r} is not one of {', '.join(VIEWS)}")
        if self.outcome is not None and self.outcome not in ("ALLOW", *ALERT_OUTCOMES):
            raise CaseError("outcome", f"{self.outcome!r} is not one of ALLOW, {', '.join(ALERT_OUTCOMES)}")
        if self.rule is not None and not _RULE.fullmatch(self.rule):
            raise CaseError("rule", "is not a rule id")
        if self.case_id is not None and not is_seq(self.case_id):
            raise CaseError("case_id", "must be a case id")
        if self.view == "mine" and not self.me:
            raise CaseError("view", "mine needs the officer's certificate")
        if self.order not in ("newest", "oldest"):
            raise CaseError("order", f"{self.order!r} is not newest or oldest")
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_LIMIT:
            raise CaseError("limit", f"must be 1 to {MAX_LIMIT}")
        if self.cursor is not None:
            self.position()

    def _fingerprint(self) -> str:
        d = asdict(self)
        del d["limit"], d["cursor"]
        return hashlib.sha256(orjson.dumps(d, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]

    def position(self) -> tuple[str | None, int] | None:
        """The (review due, seq) the cursor names; None for the first page."""
        if self.cursor is None:
            return None
        due, seq = _opened(self.cursor, _CURSOR, self._fingerprint())
        return (None if due == "-" else due), int(seq)

    def cursor_after(self, a: AlertState) -> str:
        due = a.review_due if self.view == "overdue" else "-"
        token = f"a1.{due}.{a.seq}.{self._fingerprint()}".encode()
        return base64.urlsafe_b64encode(token).decode().rstrip("=")


@dataclass(frozen=True)
class AlertPage:
    items: list[AlertState]
    next_cursor: str | None


def _alert_query(f: AlertFilter, today: str, dialect: str = "postgresql") -> Select[Any]:
    a = alerts
    # With a rule, the trace index's (rule_id, seq) key must lead the plan. SQLite (sealtrail runs
    # no ANALYZE there) would otherwise pick a view column's index and read the whole view before
    # sorting (measured by bench.console: 271 ms for a first page over 1M alerts, 2 ms with this);
    # "+ 0" / "|| ''" leave the values alone and take those columns out of its choice. PostgreSQL
    # plans well with its statistics and worse without the indexes, so it keeps the columns bare.
    hide = f.rule is not None and dialect == "sqlite"

    def num(c: Any) -> Any:
        return c + 0 if hide else c

    def text(c: Any) -> Any:
        return c.concat("") if hide else c

    conds: list[Any] = []
    if f.view in ("open", "mine", "unassigned", "overdue"):
        conds.append(num(a.c.is_open) == 1)
    elif f.view == "closed":
        conds.append(num(a.c.is_open) == 0)
    elif f.view == "qa":
        # "due" is set only by closing and cleared by reopening: no is_open term, so that
        # ix_audit_alerts_qa_seq (qa, seq) serves the filter and the order alone
        conds.append(text(a.c.qa) == "due")
    if f.view == "mine":
        conds.append(text(a.c.assignee_fp) == f.me)
    elif f.view == "unassigned":
        conds.append(a.c.assignee_fp.is_(None))
    elif f.view == "overdue":
        conds.append(a.c.review_due < today)
    if f.outcome is not None:
        conds.append(text(a.c.outcome) == f.outcome)
    if f.case_id is not None:
        conds.append(a.c.case_id == f.case_id)
    pos = f.position()
    seq_col = a.c.seq
    q = select(a)
    if f.rule is not None:  # the trace index's (rule_id, seq) key walks the rule's decisions
        r = trace_rules
        q = q.join(r, and_(r.c.seq == a.c.seq, r.c.rule_id == f.rule))
        seq_col = r.c.seq
    if f.view == "overdue":
        if pos is not None:  # a row comparison: the index seeks to the cursor instead of filtering
            due, seq = pos
            conds.append(tuple_(a.c.review_due, a.c.seq) > tuple_(due, seq))
        return q.where(*conds).order_by(a.c.review_due, seq_col).limit(f.limit + 1)
    if pos is not None:
        newest = f.order == "newest"
        conds.append(seq_col < pos[1] if newest else seq_col > pos[1])
        if f.rule is not None:  # bound the alert's own seq too, or its scan starts at the newest alert
            conds.append(a.c.seq < pos[1] if newest else a.c.seq > pos[1])
    return q.where(*conds).order_by(seq_col.desc() if f.order == "newest" else seq_col).limit(f.limit + 1)


def alert_page(engine: Engine, f: AlertFilter, *, today: date) -> AlertPage:
    """One page of alerts for ``f``; ``today`` (UTC) decides what is overdue."""
    catch_up(engine)
    with engine.connect() as conn:
        got = [alert_from_row(r) for r in conn.execute(_alert_query(f, today.isoformat(), conn.dialect.name))]
    more = len(got) > f.limit
    items = got[:f.limit]
    return AlertPage(items, f.cursor_after(items[-1]) if more else None)


def get_alert(engine: Engine, seq: int) -> AlertState:
    """The alert opened by the decision at ``seq``; ``CaseNotFoundError`` (field ``seq``) if none."""
    if not is_seq(seq):
        raise CaseError("seq", "must be the seq of the decision that opened the alert")
    catch_up(engine)
    with engine.connect() as conn:
        row = conn.execute(select(alerts).where(alerts.c.seq == seq)).first()
    if row is None:
        raise CaseNotFoundError("seq", f"no alert at seq {seq}")
    return alert_from_row(row)


@dataclass(frozen=True)
class CaseFilter:
    """Which cases, newest (highest case id) first. ``view``: ``open`` (default: any alert of it
    open), ``mine`` (open, the case assigned to ``me``), ``unassigned`` (open, the case assigned
    to nobody), ``closed``, ``all``. A case's assignee is the one its last case-level ``assign``
    named; assigning one of its alerts does not assign the case."""

    view: str = "open"
    me: str | None = None  # the officer's certificate fingerprint, for ``mine``
    limit: int = 50
    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.view not in CASE_VIEWS:
            raise CaseError("view", f"{self.view!r} is not one of {', '.join(CASE_VIEWS)}")
        if self.view == "mine" and not self.me:
            raise CaseError("view", "mine needs the officer's certificate")
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_LIMIT:
            raise CaseError("limit", f"must be 1 to {MAX_LIMIT}")
        if self.cursor is not None:
            self.position()

    def _fingerprint(self) -> str:
        d = {"view": self.view, "me": self.me}
        return hashlib.sha256(orjson.dumps(d, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]

    def position(self) -> int | None:
        """The case id the cursor names (the last of the previous page); None for the first page."""
        if self.cursor is None:
            return None
        (case_id,) = _opened(self.cursor, _CASE_CURSOR, self._fingerprint())
        return int(case_id)

    def cursor_after(self, c: CaseState) -> str:
        token = f"c1.{c.case_id}.{self._fingerprint()}".encode()
        return base64.urlsafe_b64encode(token).decode().rstrip("=")


@dataclass(frozen=True)
class CasePage:
    items: list[CaseState]
    next_cursor: str | None


def _case_query(f: CaseFilter) -> Select[Any]:
    c = cases
    conds: list[Any] = []
    if f.view in ("open", "mine", "unassigned"):
        conds.append(c.c.is_open == 1)
    elif f.view == "closed":
        conds.append(c.c.is_open == 0)
    if f.view == "mine":
        conds.append(c.c.assignee_fp == f.me)
    elif f.view == "unassigned":
        conds.append(c.c.assignee_fp.is_(None))
    pos = f.position()
    if pos is not None:
        conds.append(c.c.case_id < pos)
    return select(c).where(*conds).order_by(c.c.case_id.desc()).limit(f.limit + 1)


def case_page(engine: Engine, f: CaseFilter) -> CasePage:
    """One page of cases for ``f``, newest first (keyset on the case id)."""
    catch_up(engine)
    with engine.connect() as conn:
        got = [case_from_row(r) for r in conn.execute(_case_query(f))]
    more = len(got) > f.limit
    items = got[:f.limit]
    return CasePage(items, f.cursor_after(items[-1]) if more else None)


@dataclass(frozen=True)
class CaseEvent:
    """One sealed event of a case's history, with the officer's words as sealed."""

    seq: int
    recorded_at: str
    alert_seq: int | None
    action: str
    applied: bool
    why: str | None
    principal: dict[str, Any]
    rationale: str | None
    assignee: dict[str, Any] | None
    disposition: str | None
    link: int | None
    report: str | None
    verdict: str | None = None  # a qa_review's: AGREE or DISAGREE


@dataclass(frozen=True)
class CaseAlert(AlertState):
    """An alert as its case shows it: the alert, and the annotations officers sealed on the
    decision that opened it, oldest first (case state: only those who may read the case read them)."""

    annotations: tuple[AnnotationView, ...] = ()


_ALERT_NAMES = tuple(f.name for f in fields(AlertState))  # the view's columns CaseAlert takes


@dataclass(frozen=True)
class CaseDetail:
    case: CaseState
    alerts: list[AlertState]  # each a CaseAlert (typed as its base, which the CLI's alert table takes)
    events: list[CaseEvent]

    def annotations_of(self, a: AlertState) -> tuple[AnnotationView, ...]:
        """The annotations sealed on the decision that opened ``a`` (one of this case's alerts)."""
        return a.annotations if isinstance(a, CaseAlert) else ()


def _annotations(conn: Connection, case_id: int) -> dict[int, list[AnnotationView]]:
    """The annotations of every decision of the case, by the decision's seq, oldest first: one
    query through the index of annotations (``audit_annotations``), however many alerts the case
    holds. A row that lists a record under a decision it does not refer to (damage: ``ledger
    verify`` names it) is left out, so no annotation shows under another decision."""
    e, n = store.entries, trace_annotations
    joined = alerts.join(n, n.c.target_seq == alerts.c.seq).join(e, e.c.seq == n.c.seq)
    rows = conn.execute(select(n.c.target_seq, e.c.seq, e.c.trace_id, e.c.recorded_at, e.c.kind, e.c.record)
                        .select_from(joined).where(alerts.c.case_id == case_id).order_by(n.c.seq)).all()
    out: dict[int, list[AnnotationView]] = {}
    for r in rows:
        body = orjson.loads(r.record).get("record")
        refers = body.get("refers_to") if isinstance(body, dict) else None
        if (r.kind != ANNOTATION_KIND or not isinstance(body, dict) or not isinstance(refers, dict)
                or refers.get("seq") != r.target_seq):
            log.warning("audit_annotations lists seq %d under decision %d, which it does not annotate; "
                        "left out (run ledger verify)", r.seq, r.target_seq)
            continue
        note = AnnotationView(int(r.seq), r.trace_id, r.recorded_at, body)
        out.setdefault(int(r.target_seq), []).append(note)
    return out


def _case_alert(m: RowMapping, notes: dict[int, list[AnnotationView]]) -> CaseAlert:
    """An ``audit_alerts`` row as a CaseAlert, built once (a case may hold a thousand alerts)."""
    return CaseAlert(**{k: m[k] for k in _ALERT_NAMES}, annotations=tuple(notes.get(m["seq"], ())))


def case_detail(engine: Engine, case_id: int) -> CaseDetail:
    """A case, its alerts (oldest first) each with the annotations of its decision, and every
    sealed event about it, in seq order."""
    if not is_seq(case_id):
        raise CaseError("case_id", "must be a case id")
    catch_up(engine)
    e = store.entries
    with engine.connect() as conn:
        row = conn.execute(select(cases).where(cases.c.case_id == case_id)).first()
        if row is None:
            raise CaseNotFoundError("case_id", f"no case {case_id}")
        notes = _annotations(conn, case_id)
        members: list[AlertState] = [_case_alert(r._mapping, notes) for r in conn.execute(
            select(alerts).where(alerts.c.case_id == case_id).order_by(alerts.c.seq))]
        evs = conn.execute(select(case_events, e.c.record).join(e, e.c.seq == case_events.c.seq)
                           .where(case_events.c.case_id == case_id).order_by(case_events.c.seq)).all()
    events = []
    for ev in evs:
        body = orjson.loads(ev.record)["record"]
        events.append(CaseEvent(int(ev.seq), ev.recorded_at, ev.alert_seq, ev.action, bool(ev.applied),
                                ev.why, body.get("principal", {}), body.get("rationale"),
                                body.get("assignee"), body.get("disposition"), body.get("link"),
                                body.get("report"), body.get("verdict")))
    return CaseDetail(case_from_row(row), members, events)


@dataclass(frozen=True)
class OutcomePage:
    """Held payments decided after a cursor, in ledger order; ``next_cursor`` to ask from next."""

    items: list[dict[str, Any]]
    next_cursor: int


def outcomes_since(engine: Engine, after: int, *, scorer_fp: str | None, limit: int = 100) -> OutcomePage:
    """Payment outcomes sealed after seq ``after``, oldest first; with ``scorer_fp``, only those
    of decisions that principal asked for (a payment system sees its own payments only)."""
    if not is_seq(after):
        raise CaseError("after", "must be a seq (0 for the beginning)")
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise CaseError("limit", f"must be 1 to {MAX_LIMIT}")
    catch_up(engine)
    o = payment_outcomes
    q = select(o).where(o.c.seq > after)
    if scorer_fp is not None:
        q = q.where(o.c.scorer_fp == scorer_fp)
    with engine.connect() as conn:
        rows = conn.execute(q.order_by(o.c.seq).limit(limit)).all()
    items = [outcome_item(r) for r in rows]
    return OutcomePage(items, items[-1]["seq"] if items else after)


def outcome_item(r: Any) -> dict[str, Any]:
    """One row of ``audit_payment_outcomes`` as the payment system reads it: an item of
    ``GET /v1/outcomes``, and the ``data`` of its webhook message (``audit.cases.delivery``)."""
    return {"seq": int(r.seq), "trace_id": r.trace_id, "outcome": r.outcome, "alert_seq": int(r.alert_seq),
            "recorded_at": r.recorded_at}
