"""Webhook delivery state of the held-payment outcomes (``audit.cases.delivery``).

One row per configured endpoint: the seq of the last outcome its receiver acknowledged, the
retry state, why it is disabled if it is, and the lease of the deliverer working it. Operational
state, not evidence: the outcomes are sealed records and the deliverer only reads them. The
app role may insert and update a row, never delete one (an endpoint's cursor is kept, so a
removed and re-added endpoint resumes where it stopped). Spelled out here rather than imported
from ``audit.cases.delivery``: a revision must keep creating what it created when written.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

GRANTS: Grants = {"audit_outcome_deliveries": ("SELECT", "INSERT", "UPDATE")}  # frozen
_TABLE = "audit_outcome_deliveries"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")
    op.create_table(
        _TABLE,
        sa.Column("endpoint", sa.String(64), primary_key=True),
        sa.Column("url", sa.Text, nullable=False, comment="as configured when last worked"),
        sa.Column("cursor", sa.BigInteger, nullable=False,
                  comment="seq of the last outcome the receiver acknowledged"),
        sa.Column("delivered", sa.BigInteger, nullable=False, comment="outcomes acknowledged, all time"),
        sa.Column("failures", sa.Integer, nullable=False,
                  comment="failed attempts in a row at the next outcome"),
        sa.Column("next_attempt_us", sa.BigInteger, nullable=False),
        sa.Column("last_attempt_us", sa.BigInteger, nullable=True),
        sa.Column("last_status", sa.Integer, nullable=True, comment="HTTP status; null: no answer"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("disabled", sa.Text, nullable=True, comment="null: active; else why it stopped"),
        sa.Column("holder", sa.String(128), nullable=True, comment="the deliverer holding the lease"),
        sa.Column("lease_until_us", sa.BigInteger, nullable=False),
    )
    if bind.dialect.name == "sqlite":
        op.execute(f"CREATE TRIGGER {_TABLE}_no_delete BEFORE DELETE ON {_TABLE} "
                   f"BEGIN SELECT RAISE(ABORT, 'sealtrail: DELETE on {_TABLE} refused: an endpoint keeps "
                   "its cursor'); END")
    else:
        role = resolve(context.get_x_argument(as_dictionary=True).get("app_role"))
        if role:
            grant(bind, role, GRANTS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_no_delete")
    op.drop_table(_TABLE)
