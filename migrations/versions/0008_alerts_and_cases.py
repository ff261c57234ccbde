"""The alert and case view (``audit.cases``): current state of each alert and case, the events
folded into them, the held-payment outcomes, and the seq the view is current to.

Derived tables, checked row by row against the sealed records by ``ledger verify``.
``audit_alerts``, ``audit_cases`` and ``audit_case_watermark`` hold current state, so the app
role may UPDATE them (never DELETE: a row never leaves the view); ``audit_case_events`` and
``audit_payment_outcomes`` only grow and refuse UPDATE and DELETE like the query index. Spelled
out here rather than imported from ``audit.cases.tables``: a revision must keep creating what it
created when written.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_STATE = ("SELECT", "INSERT", "UPDATE")
_APPEND = ("SELECT", "INSERT")
GRANTS: Grants = {  # frozen: what this revision grants
    "audit_alerts": _STATE, "audit_cases": _STATE, "audit_case_watermark": _STATE,
    "audit_case_events": _APPEND, "audit_payment_outcomes": _APPEND,
}
_APPEND_ONLY = ("audit_case_events", "audit_payment_outcomes")


def _guard(dialect: str, table: str, ops: tuple[str, ...]) -> None:
    if dialect == "sqlite":
        for name in ops:
            op.execute(f"CREATE TRIGGER {table}_no_{name.lower()} BEFORE {name} ON {table} "
                       f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {name} on {table} refused: "
                       "rows derive from sealed records (rebuild the view instead)'); END")
    else:  # sealtrail_refuse_change() comes with revision 0001
        op.execute(f"CREATE TRIGGER {table}_guard BEFORE {' OR '.join(ops)} ON {table} "
                   "FOR EACH ROW EXECUTE FUNCTION sealtrail_refuse_change()")
        op.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")
    op.create_table(
        "audit_alerts",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False,
                  comment="the decision that opened it"),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("leaf_hash", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.String(27), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("account_alert", sa.SmallInteger, nullable=False),
        sa.Column("fired", sa.Text, nullable=False),
        sa.Column("scorer_fp", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(80), nullable=False),
        sa.Column("case_id", sa.BigInteger, nullable=False),
        sa.Column("policy_seq", sa.BigInteger, nullable=False, comment="0: the built-in default policy"),
        sa.Column("review_due", sa.String(10), nullable=False),
        sa.Column("filing_due", sa.String(10), nullable=False),
        sa.Column("ruleset", sa.Text, nullable=False, comment="<ruleset_id>@<version> that decided"),
        sa.Column("model_sha256", sa.String(64), nullable=False, comment="'' if not scored by a model"),
        sa.Column("score_ppm", sa.Integer, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("is_open", sa.SmallInteger, nullable=False),
        sa.Column("assignee_fp", sa.String(64), nullable=True),
        sa.Column("assignee_subject", sa.Text, nullable=True),
        sa.Column("disposition", sa.String(24), nullable=True),
        sa.Column("closed_at", sa.String(27), nullable=True),
        sa.Column("closed_by", sa.Text, nullable=True),
        sa.Column("next_review_due", sa.String(10), nullable=True),
        sa.Column("qa", sa.String(12), nullable=True),
        sa.Column("payment", sa.String(8), nullable=True),
        sa.Column("pending", sa.String(32), nullable=True),
        sa.Column("pending_by", sa.Text, nullable=True),
        sa.Column("last_event_seq", sa.BigInteger, nullable=True),
        sa.Column("events", sa.Integer, nullable=False),
    )
    for name, cols in (("open_seq", ["is_open", "seq"]),
                       ("assignee_open_seq", ["assignee_fp", "is_open", "seq"]),
                       ("open_due_seq", ["is_open", "review_due", "seq"]),
                       ("outcome_open_seq", ["outcome", "is_open", "seq"]), ("case_seq", ["case_id", "seq"]),
                       ("payment_seq", ["payment", "seq"]), ("qa_seq", ["qa", "seq"])):
        op.create_index(f"ix_audit_alerts_{name}", "audit_alerts", cols)
    op.create_table(
        "audit_cases",
        sa.Column("case_id", sa.BigInteger, primary_key=True, autoincrement=False,
                  comment="the seq of the alert that opened it"),
        sa.Column("subject", sa.String(80), nullable=False),
        sa.Column("opened_at", sa.String(27), nullable=False),
        sa.Column("is_open", sa.SmallInteger, nullable=False),
        sa.Column("alerts", sa.Integer, nullable=False),
        sa.Column("open_alerts", sa.Integer, nullable=False),
        sa.Column("assignee_fp", sa.String(64), nullable=True),
        sa.Column("assignee_subject", sa.Text, nullable=True),
        sa.Column("disposition", sa.String(24), nullable=True),
        sa.Column("closed_at", sa.String(27), nullable=True),
        sa.Column("pending", sa.String(32), nullable=True),
        sa.Column("pending_by", sa.Text, nullable=True),
        sa.Column("links", sa.Text, nullable=False),
        sa.Column("reports", sa.Integer, nullable=False),
        sa.Column("last_report", sa.String(64), nullable=True, comment="SHA-256 of the report in force"),
        sa.Column("last_report_seq", sa.BigInteger, nullable=True, comment="the event that filed it"),
        sa.Column("last_event_seq", sa.BigInteger, nullable=True),
        sa.Column("last_alert_seq", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_audit_cases_subject_case", "audit_cases", ["subject", "case_id"])
    op.create_index("ix_audit_cases_open_case", "audit_cases", ["is_open", "case_id"])
    op.create_index("ix_audit_cases_assignee_open_case", "audit_cases", ["assignee_fp", "is_open", "case_id"])
    op.create_table(
        "audit_case_events",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("case_id", sa.BigInteger, nullable=True, comment="null: the target does not exist"),
        sa.Column("alert_seq", sa.BigInteger, nullable=True, comment="null: an event on a case"),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("actor_fp", sa.String(64), nullable=False),
        sa.Column("recorded_at", sa.String(27), nullable=False),
        sa.Column("applied", sa.SmallInteger, nullable=False),
        sa.Column("why", sa.Text, nullable=True, comment="why it did not apply"),
    )
    op.create_index("ix_audit_case_events_case_seq", "audit_case_events", ["case_id", "seq"])
    op.create_index("ix_audit_case_events_alert_seq", "audit_case_events", ["alert_seq", "seq"])
    op.create_table(
        "audit_payment_outcomes",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False,
                  comment="the event that decided it"),
        sa.Column("alert_seq", sa.BigInteger, nullable=False),
        sa.Column("trace_id", sa.String(36), nullable=False, comment="of the decision"),
        sa.Column("scorer_fp", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("recorded_at", sa.String(27), nullable=False),
    )
    op.create_index("ix_audit_payment_outcomes_scorer_seq", "audit_payment_outcomes", ["scorer_fp", "seq"])
    op.create_table(
        "audit_case_watermark",
        sa.Column("id", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False, comment="the view holds every record up to this seq"),
    )
    op.execute("INSERT INTO audit_case_watermark (id, seq) VALUES (1, 0)")
    for table in ("audit_alerts", "audit_cases", "audit_case_watermark"):
        _guard(bind.dialect.name, table, ("DELETE",))
    for table in _APPEND_ONLY:
        _guard(bind.dialect.name, table, ("UPDATE", "DELETE"))
    if bind.dialect.name == "postgresql":
        role = resolve(context.get_x_argument(as_dictionary=True).get("app_role"))
        if role:
            grant(bind, role, GRANTS)


def downgrade() -> None:
    bind = op.get_bind()
    for table in ("audit_alerts", "audit_cases", "audit_case_watermark", *_APPEND_ONLY):
        if bind.dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {table}_guard ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_update")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        op.drop_table(table)
