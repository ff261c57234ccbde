"""The alert and case view's tables (created by migration 0008).

``audit_alerts`` and ``audit_cases`` hold each alert's and case's current state and change as
events are folded in (UPDATE is granted; ``ledger verify`` rebuilds them from the sealed
records and compares row by row). ``audit_case_events`` and ``audit_payment_outcomes`` only
grow (append-only, like the query index). ``audit_case_watermark`` is the seq the view is
current to. Every page the console or the API serves is one range scan of an index whose last
column is the row's seq (keyset pages, newest first).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, SmallInteger, String, Table, Text

__all__ = ["TABLES", "alerts", "case_events", "cases", "metadata", "payment_outcomes", "watermark"]

metadata = MetaData()

alerts = Table(
    "audit_alerts",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False, comment="the decision that opened it"),
    Column("trace_id", String(36), nullable=False),
    Column("leaf_hash", String(64), nullable=False),
    Column("opened_at", String(27), nullable=False),
    Column("outcome", String(8), nullable=False),
    Column("account_alert", SmallInteger, nullable=False),
    Column("fired", Text, nullable=False),
    Column("scorer_fp", String(64), nullable=False),
    Column("subject", String(80), nullable=False),
    Column("case_id", BigInteger, nullable=False),
    Column("policy_seq", BigInteger, nullable=False, comment="0: the built-in default policy"),
    Column("review_due", String(10), nullable=False),
    Column("filing_due", String(10), nullable=False),
    Column("ruleset", Text, nullable=False, comment="<ruleset_id>@<version> that decided"),
    Column("model_sha256", String(64), nullable=False, comment="'' if not scored by a model"),
    Column("score_ppm", Integer, nullable=True),
    Column("state", String(16), nullable=False),
    Column("is_open", SmallInteger, nullable=False),
    Column("assignee_fp", String(64), nullable=True),
    Column("assignee_subject", Text, nullable=True),
    Column("disposition", String(24), nullable=True),
    Column("closed_at", String(27), nullable=True),
    Column("closed_by", Text, nullable=True),
    Column("next_review_due", String(10), nullable=True),
    Column("qa", String(12), nullable=True),
    Column("payment", String(8), nullable=True),
    Column("pending", String(32), nullable=True),
    Column("pending_by", Text, nullable=True),
    Column("last_event_seq", BigInteger, nullable=True),
    Column("events", Integer, nullable=False),
    Index("ix_audit_alerts_open_seq", "is_open", "seq"),
    Index("ix_audit_alerts_assignee_open_seq", "assignee_fp", "is_open", "seq"),
    Index("ix_audit_alerts_open_due_seq", "is_open", "review_due", "seq"),
    Index("ix_audit_alerts_outcome_open_seq", "outcome", "is_open", "seq"),
    Index("ix_audit_alerts_case_seq", "case_id", "seq"),
    Index("ix_audit_alerts_payment_seq", "payment", "seq"),
    Index("ix_audit_alerts_qa_seq", "qa", "seq"),
)

cases = Table(
    "audit_cases",
    metadata,
    Column("case_id", BigInteger, primary_key=True, autoincrement=False,
           comment="the seq of the alert that opened it"),
    Column("subject", String(80), nullable=False),
    Column("opened_at", String(27), nullable=False),
    Column("is_open", SmallInteger, nullable=False),
    Column("alerts", Integer, nullable=False),
    Column("open_alerts", Integer, nullable=False),
    Column("assignee_fp", String(64), nullable=True),
    Column("assignee_subject", Text, nullable=True),
    Column("disposition", String(24), nullable=True),
    Column("closed_at", String(27), nullable=True),
    Column("pending", String(32), nullable=True),
    Column("pending_by", Text, nullable=True),
    Column("links", Text, nullable=False),
    Column("reports", Integer, nullable=False),
    Column("last_report", String(64), nullable=True, comment="SHA-256 of the report in force"),
    Column("last_report_seq", BigInteger, nullable=True, comment="the event that filed it"),
    Column("last_event_seq", BigInteger, nullable=True),
    Column("last_alert_seq", BigInteger, nullable=False),
    Index("ix_audit_cases_subject_case", "subject", "case_id"),
    Index("ix_audit_cases_open_case", "is_open", "case_id"),
    Index("ix_audit_cases_assignee_open_case", "assignee_fp", "is_open", "case_id"),
)

case_events = Table(
    "audit_case_events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("case_id", BigInteger, nullable=True, comment="null: the target does not exist"),
    Column("alert_seq", BigInteger, nullable=True, comment="null: an event on a case"),
    Column("action", String(16), nullable=False),
    Column("actor_fp", String(64), nullable=False),
    Column("recorded_at", String(27), nullable=False),
    Column("applied", SmallInteger, nullable=False),
    Column("why", Text, nullable=True, comment="why it did not apply"),
    Index("ix_audit_case_events_case_seq", "case_id", "seq"),
    Index("ix_audit_case_events_alert_seq", "alert_seq", "seq"),
)

payment_outcomes = Table(
    "audit_payment_outcomes",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False, comment="the event that decided it"),
    Column("alert_seq", BigInteger, nullable=False),
    Column("trace_id", String(36), nullable=False, comment="of the decision"),
    Column("scorer_fp", String(64), nullable=False),
    Column("outcome", String(8), nullable=False),
    Column("recorded_at", String(27), nullable=False),
    Index("ix_audit_payment_outcomes_scorer_seq", "scorer_fp", "seq"),
)

watermark = Table(
    "audit_case_watermark",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False, comment="the view holds every record up to this seq"),
)

TABLES = (alerts, cases, case_events, payment_outcomes, watermark)
