"""The decision query index (``audit.query.index``): traces, fired rules, account keys, annotations.

Derived rows, written in the same transaction as the ledger entries and rebuildable from them
(``audit.query.index.catch_up``); append-only like the ledger's tables all the same (UPDATE,
DELETE and, on PostgreSQL, TRUNCATE refused), so the index cannot be quietly edited either.
The tables are spelled out here rather than imported: migrations import only ``ledger``, and a
revision must keep creating what it created when it was written.
``tests/audit/test_trace_index.py`` checks them against ``audit.query.index.metadata``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import os
import re

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# seq as in ledger_entries: on SQLite a 64-bit INTEGER PRIMARY KEY is the rowid itself
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TABLES = ("audit_traces", "audit_trace_rules", "audit_trace_accounts", "audit_annotations")


def _app_role() -> str | None:
    role = context.get_x_argument(as_dictionary=True).get("app_role") or os.environ.get(
        "SEALTRAIL_APP_ROLE"
    )
    if role and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", role):
        raise ValueError(f"application role name {role!r} is not a plain SQL identifier")
    return role or None


def _create_tables() -> None:
    op.create_table(
        "audit_traces",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=False),
        sa.Column("trace_id", sa.String(36), nullable=False),
        sa.Column("recorded_at", sa.String(27), nullable=False, comment="the envelope's, UTC µs"),
        sa.Column("event_at", sa.String(27), nullable=False, comment="the record's 'at'"),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("score", sa.Double, nullable=True),
        sa.Column("fail_safe", sa.String(32), nullable=True, comment="reason code of a fail-safe HOLD"),
        sa.Column("fired", sa.Text, nullable=False, comment="fired rule ids, comma-separated"),
        sa.Column("principal_fp", sa.String(64), nullable=False, comment="SHA-256 of the client certificate"),
        sa.Column("principal_subject", sa.Text, nullable=False),
        sa.Column("ruleset_id", sa.String(64), nullable=False),
        sa.Column("ruleset_version", sa.Text, nullable=False),
        sa.Column("module_sha256", sa.String(64), nullable=False),
    )
    op.create_index("ix_audit_traces_trace_id", "audit_traces", ["trace_id"], unique=True)
    op.create_index("ix_audit_traces_recorded_at_seq", "audit_traces", ["recorded_at", "seq"])
    op.create_index("ix_audit_traces_decision_seq", "audit_traces", ["decision", "seq"])
    op.create_index("ix_audit_traces_principal_fp_seq", "audit_traces", ["principal_fp", "seq"])
    op.create_index("ix_audit_traces_principal_subject_seq", "audit_traces", ["principal_subject", "seq"])
    op.create_index("ix_audit_traces_score_seq", "audit_traces", ["score", "seq"])
    op.create_table(
        "audit_trace_rules",
        sa.Column("rule_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "audit_trace_accounts",
        sa.Column("account_key", sa.String(64), primary_key=True,
                  comment="account_key(): SHA-256, never the account"),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "audit_annotations",
        sa.Column("target_seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_audit_annotations_seq", "audit_annotations", ["seq"], unique=True)


def upgrade() -> None:
    bind = op.get_bind()
    _create_tables()
    if bind.dialect.name == "sqlite":
        for name in TABLES:
            for op_name in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {name}_no_{op_name.lower()} BEFORE {op_name} ON {name} "
                    f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {op_name} on {name} refused: "
                    "the index is append-only (rebuild it instead)'); END"
                )
    elif bind.dialect.name == "postgresql":
        # sealtrail_refuse_change() comes with revision 0001
        for name in TABLES:
            op.execute(
                f"CREATE TRIGGER {name}_append_only BEFORE UPDATE OR DELETE ON {name} "
                "FOR EACH ROW EXECUTE FUNCTION sealtrail_refuse_change()"
            )
            op.execute(
                f"CREATE TRIGGER {name}_no_truncate BEFORE TRUNCATE ON {name} "
                "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()"
            )
        role = _app_role()
        if role:
            tables = ", ".join(TABLES)
            op.execute(f"REVOKE ALL ON {tables} FROM {role}")
            op.execute(f"GRANT SELECT, INSERT ON {tables} TO {role}")
    else:
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")


def downgrade() -> None:
    bind = op.get_bind()
    for name in TABLES:
        if bind.dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {name}_append_only ON {name}")
            op.execute(f"DROP TRIGGER IF EXISTS {name}_no_truncate ON {name}")
        else:
            op.execute(f"DROP TRIGGER IF EXISTS {name}_no_update")
            op.execute(f"DROP TRIGGER IF EXISTS {name}_no_delete")
    for name in reversed(TABLES):
        op.drop_table(name)
