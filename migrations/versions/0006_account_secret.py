"""The account secret of decision summaries (``audit.decide.summary``).

One row: a random 32-byte secret made here, once, under which each ``decision.summary`` record
keys the accounts of its decisions (HMAC-SHA256), so that a bundle carrying other customers'
summaries does not carry reversible account hashes. It is not derived from anything and never
changes: UPDATE and DELETE are refused (and TRUNCATE on PostgreSQL); the app role may SELECT
only. Losing it (a restore without this table) only means later summaries use a new secret:
each summary names its key (``account_key_id``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "audit_account_secret"
GRANTS: Grants = {TABLE: ("SELECT",)}  # frozen: what this revision grants


def upgrade() -> None:
    bind = op.get_bind()
    table = op.create_table(
        TABLE,
        sa.Column("id", sa.SmallInteger, primary_key=True, autoincrement=False, comment="always 1"),
        sa.Column("secret", sa.LargeBinary, nullable=False, comment="32 random bytes"),
        sa.CheckConstraint("id = 1", name="ck_audit_account_secret_one_row"),
    )
    op.bulk_insert(table, [{"id": 1, "secret": secrets.token_bytes(32)}])
    if bind.dialect.name == "sqlite":
        for op_name in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {TABLE}_no_{op_name.lower()} BEFORE {op_name} ON {TABLE} "
                f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {op_name} on {TABLE} refused: "
                "the account secret never changes'); END"
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
