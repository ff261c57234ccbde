"""One webhook cursor per endpoint and scorer (``audit.cases.delivery``).

An endpoint's outcomes are those of its scorers' payments. With one cursor for the endpoint, a
scorer added to it later (a rotated scoring certificate) never got its outcomes sealed below that
cursor. Each row here is how far one scorer's outcomes went to one endpoint: the seq of the last
one its receiver acknowledged. Operational state, not evidence, like the endpoint rows of 0010;
the app role may insert and update a row, never delete one (a scorer taken off an endpoint and
put back resumes where it stopped). Spelled out here rather than imported from
``audit.cases.delivery``: a revision must keep creating what it created when written.

``audit_outcome_deliveries.start`` keeps where an endpoint started (its ``after``, never past the
alert view's watermark when the endpoint was first worked): a scorer added later starts there.
Endpoint rows made before this revision have no scorer rows and no ``start``: the deliverer gives
each of the endpoint's scorers, as the endpoints file names them then, the endpoint's cursor, and
a scorer added after that starts at the endpoint's ``after`` as the file says it then.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

GRANTS: Grants = {"audit_outcome_delivery_scorers": ("SELECT", "INSERT", "UPDATE")}  # frozen
_TABLE = "audit_outcome_delivery_scorers"
_ENDPOINTS = "audit_outcome_deliveries"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")
    op.create_table(
        _TABLE,
        sa.Column("endpoint", sa.String(64), primary_key=True),
        sa.Column("scorer_fp", sa.String(64), primary_key=True,
                  comment="SHA-256 of the scoring certificate, lower-case hex"),
        sa.Column("cursor", sa.BigInteger, nullable=False,
                  comment="seq of this scorer's last outcome the endpoint's receiver acknowledged"),
    )
    op.add_column(_ENDPOINTS, sa.Column("start", sa.BigInteger, nullable=True,
                                        comment="seq the endpoint started after; null: made before 0011"))
    if bind.dialect.name == "sqlite":
        op.execute(f"CREATE TRIGGER {_TABLE}_no_delete BEFORE DELETE ON {_TABLE} "
                   f"BEGIN SELECT RAISE(ABORT, 'sealtrail: DELETE on {_TABLE} refused: a scorer keeps "
                   "its cursor'); END")
    else:
        role = resolve(context.get_x_argument(as_dictionary=True).get("app_role"))
        if role:
            grant(bind, role, GRANTS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_no_delete")
    with op.batch_alter_table(_ENDPOINTS) as batch:
        batch.drop_column("start")
    op.drop_table(_TABLE)
