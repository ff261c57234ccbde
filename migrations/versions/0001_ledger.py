"""Ledger tables and the database-side append-only guards (SQLite and PostgreSQL).

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import os
import re

from alembic import context, op

from ledger.store import APPEND_ONLY, TABLES

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION sealtrail_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'sealtrail: % on % refused: the ledger is append-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END
$$
"""


_PG_PURGE_ONLY = """
CREATE OR REPLACE FUNCTION sealtrail_payload_purge_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR OLD.data IS NULL OR NEW.data IS NOT NULL
     OR NEW.sha256 IS DISTINCT FROM OLD.sha256 OR NEW.first_seq IS DISTINCT FROM OLD.first_seq
     OR NEW.stored_at IS DISTINCT FROM OLD.stored_at THEN
    RAISE EXCEPTION 'sealtrail: % on ledger_payloads refused: payloads may only be purged', TG_OP
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$$
"""
_SQLITE_PURGE_ONLY = (
    "CREATE TRIGGER ledger_payloads_purge_only BEFORE UPDATE ON ledger_payloads "
    "WHEN OLD.data IS NULL OR NEW.data IS NOT NULL OR NEW.sha256 IS NOT OLD.sha256 "
    "OR NEW.first_seq IS NOT OLD.first_seq OR NEW.stored_at IS NOT OLD.stored_at "
    "BEGIN SELECT RAISE(ABORT, 'sealtrail: ledger_payloads may only be purged'); END"
)


def _app_role() -> str | None:
    role = context.get_x_argument(as_dictionary=True).get("app_role") or os.environ.get(
        "SEALTRAIL_APP_ROLE"
    )
    if role and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", role):
        raise ValueError(f"application role name {role!r} is not a plain SQL identifier")
    return role or None


def upgrade() -> None:
    bind = op.get_bind()
    for table in TABLES:
        table.create(bind)
    if bind.dialect.name == "sqlite":
        for name in APPEND_ONLY:
            for op_name in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {name}_no_{op_name.lower()} BEFORE {op_name} ON {name} "
                    f"BEGIN SELECT RAISE(ABORT, 'sealtrail: {op_name} on {name} refused: "
                    "the ledger is append-only'); END"
                )
        op.execute(
            "CREATE TRIGGER ledger_payloads_no_delete BEFORE DELETE ON ledger_payloads "
            "BEGIN SELECT RAISE(ABORT, 'sealtrail: ledger_payloads may only be purged'); END"
        )
        op.execute(_SQLITE_PURGE_ONLY)
    elif bind.dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        for name in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {name}_append_only BEFORE UPDATE OR DELETE ON {name} "
                "FOR EACH ROW EXECUTE FUNCTION sealtrail_refuse_change()"
            )
            op.execute(
                f"CREATE TRIGGER {name}_no_truncate BEFORE TRUNCATE ON {name} "
                "FOR EACH STATEMENT EXECUTE FUNCTION sealtrail_refuse_change()"
            )
        op.execute(_PG_PURGE_ONLY)
        op.execute(
            "CREATE TRIGGER ledger_payloads_purge_only BEFORE UPDATE OR DELETE ON ledger_payloads "
            "FOR EACH ROW EXECUTE FUNCTION sealtrail_payload_purge_only()"
        )
        role = _app_role()
        if role:
            tables = ", ".join(APPEND_ONLY)
            op.execute(f"REVOKE ALL ON {tables}, ledger_payloads FROM {role}")
            op.execute(f"GRANT SELECT, INSERT ON {tables} TO {role}")
            op.execute(f"GRANT SELECT, INSERT, UPDATE ON ledger_payloads TO {role}")
    else:
        raise RuntimeError(f"sealtrail supports SQLite and PostgreSQL, not {bind.dialect.name}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for name in APPEND_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {name}_append_only ON {name}")
            op.execute(f"DROP TRIGGER IF EXISTS {name}_no_truncate ON {name}")
        op.execute("DROP TRIGGER IF EXISTS ledger_payloads_purge_only ON ledger_payloads")
        op.execute("DROP FUNCTION IF EXISTS sealtrail_refuse_change()")
        op.execute("DROP FUNCTION IF EXISTS sealtrail_payload_purge_only()")
    for table in reversed(TABLES):
        table.drop(bind)
