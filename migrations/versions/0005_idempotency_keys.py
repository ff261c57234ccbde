"""Idempotency keys (``audit.decide.idempotency``): the first decision of each (principal, key).

A derived table like the query index: written in the same transaction as the decision it
derives from, under the ledger's sequencer lock, and checked row by row against the sealed
records by ``ledger verify`` (each keyed record seals ``idempotency.key_sha256``). Append-only
like the index (UPDATE, DELETE and, on PostgreSQL, TRUNCATE refused); the app role may SELECT
and INSERT only. The table is spelled out here rather than imported: a revision must keep
creating what it created when it was written.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TABLE = "audit_idempotency_keys"
GRANTS: Grants = {TABLE: ("SELECT", "INSERT")}  # frozen: what this revision grants


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        TABLE,
        sa.Column("principal_fp", sa.String(64), primary_key=True,
                  comment="the record's principal fingerprint_sha256 ('' for offline runs)"),
        sa.Column("key_sha256", sa.String(64), primary_key=True, comment="SHA-256 of the key's text"),
        sa.Column("seq", sa.BigInteger, nullable=False, comment="the first decision sealed under the key"),
        sa.Column("request_sha256", sa.String(64), nullable=False,
                  comment="that decision's input.transaction_sha256"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_audit_idempotency_keys_seq", TABLE, ["seq"], unique=True)
    if bind.dialect.name == "sqlite":
        for op_name in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {TABLE}_no_{op_name.lower()} BEFORE {op_name} ON {TABLE} "
                f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {op_name} on {TABLE} refused: "
                "the table is append-only (rebuild it instead)'); END"
            )
    elif bind.dialect.name == "postgresql":
        # sealtrail_refuse_change() comes with revision 0001
        op.execute(f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
                   "FOR EACH ROW EXECUTE FUNCTION sealtrail_refuse_change()")
        op.execute(f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()")
        role = resolve(context.get_x_argument(as_dictionary=True).get("app_role"))
        if role:
            grant(bind, role, GRANTS)
    else:
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}")
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_no_truncate ON {TABLE}")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_no_update")
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_no_delete")
    op.drop_table(TABLE)
