"""Account risk in the query index: two nullable columns of ``audit_traces`` and their indexes.

``account_risk_milli`` is a ``sealtrail.decision/2`` record's ``account_risk.max_milli`` and
``account_alert`` the sides that raised an account alert (1 originator, 2 beneficiary, 3 both,
0 none); both stay null for rows of version 1 records, which state no account risk, so the rows
already written need no change (the table refuses UPDATE). Each filter gets an index whose last
column is ``seq``, as every other filter of the search has. Spelled out here rather than
imported from ``audit.query.index``: a revision must keep creating what it created when written.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = "audit_traces"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("account_risk_milli", sa.BigInteger, nullable=True,
                                   comment="account_risk.max_milli (decision/2); null: the record "
                                           "states none"))
    op.add_column(TABLE, sa.Column("account_alert", sa.SmallInteger, nullable=True,
                                   comment="sides that raised an account alert: 1 originator, 2 beneficiary, "
                                           "3 both, 0 none"))
    op.create_index("ix_audit_traces_account_risk_seq", TABLE, ["account_risk_milli", "seq"])
    op.create_index("ix_audit_traces_account_alert_seq", TABLE, ["account_alert", "seq"])


def downgrade() -> None:
    op.drop_index("ix_audit_traces_account_alert_seq", table_name=TABLE)
    op.drop_index("ix_audit_traces_account_risk_seq", table_name=TABLE)
    # ALTER TABLE ... DROP COLUMN on both dialects (SQLite >= 3.35): the table and its append-only
    # triggers stay (a batch copy of the table would lose the triggers)
    op.drop_column(TABLE, "account_alert")
    op.drop_column(TABLE, "account_risk_milli")
