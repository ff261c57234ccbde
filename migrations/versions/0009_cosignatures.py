"""Witness cosignatures of the log's checkpoints (C2SP tlog-cosignature/v1), as the log collected them.

One row per (checkpoint size, witness): the witness's verifier key, the cosignature's timestamp and
its signature line. Rows only grow: a cosignature is evidence signed by someone else, so the table
refuses UPDATE, DELETE and TRUNCATE like the ledger's own tables, and ``ledger verify`` checks every
row against the checkpoint of its size. Spelled out here rather than imported from
``ledger.store``: a revision must keep creating what it created when written.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

GRANTS: Grants = {"ledger_cosignatures": ("SELECT", "INSERT")}  # frozen: what this revision grants
_TABLE = "ledger_cosignatures"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")
    seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        _TABLE,
        sa.Column("size", seq, primary_key=True, autoincrement=False,
                  comment="the size of the checkpoint cosigned (a row of ledger_checkpoints)"),
        sa.Column("witness", sa.Text, primary_key=True, comment="the witness's verifier key (vkey)"),
        sa.Column("timestamp", sa.BigInteger, nullable=False, comment="the cosignature's time, POSIX s"),
        sa.Column("line", sa.Text, nullable=False, comment="the signature line, as the witness gave it"),
        sa.Column("received_at", sa.BigInteger, nullable=False, comment="µs since the epoch"),
    )
    if bind.dialect.name == "sqlite":
        for name in ("UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER {_TABLE}_no_{name.lower()} BEFORE {name} ON {_TABLE} "
                       f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {name} on {_TABLE} refused: "
                       "cosignatures are append-only'); END")
    else:  # sealtrail_refuse_change() comes with revision 0001
        op.execute(f"CREATE TRIGGER {_TABLE}_guard BEFORE UPDATE OR DELETE ON {_TABLE} "
                   "FOR EACH ROW EXECUTE FUNCTION sealtrail_refuse_change()")
        op.execute(f"CREATE TRIGGER {_TABLE}_no_truncate BEFORE TRUNCATE ON {_TABLE} "
                   "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()")
        role = resolve(context.get_x_argument(as_dictionary=True).get("app_role"))
        if role:
            grant(bind, role, GRANTS)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_guard ON {_TABLE}")
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_no_truncate ON {_TABLE}")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_no_update")
        op.execute(f"DROP TRIGGER IF EXISTS {_TABLE}_no_delete")
    op.drop_table(_TABLE)
