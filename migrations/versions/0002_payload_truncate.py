"""PostgreSQL: refuse TRUNCATE on ledger_payloads too (purges empty payloads one by one).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # SQLite has no TRUNCATE
        op.execute(
            "CREATE TRIGGER ledger_payloads_no_truncate BEFORE TRUNCATE ON ledger_payloads "
            "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS ledger_payloads_no_truncate ON ledger_payloads")
