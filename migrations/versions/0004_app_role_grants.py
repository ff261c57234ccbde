"""PostgreSQL: the application role's grants, complete (``migrations.privileges``).

Revisions 0001 and 0003 granted the app role SELECT and INSERT on the tables they created
(UPDATE on ``ledger_payloads``) but nothing on ``alembic_version``, so every command run as
that role stopped at the schema check ("permission denied for table alembic_version"), and the
role needed USAGE on the schema granted by hand. This revision makes the role's privileges
exactly the documented set: SELECT on ``alembic_version``, SELECT and INSERT on the ledger's
append-only tables and the query index, UPDATE of the purge columns only on
``ledger_payloads``, USAGE on the schema; nothing else on these tables. It runs only with an
app role (``-x app_role=NAME`` or ``SEALTRAIL_APP_ROLE``); SQLite has no roles.

The map is frozen here: a later revision that adds a table grants it itself.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

from migrations.privileges import Grants, grant, resolve

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_APPEND = ("SELECT", "INSERT")
GRANTS: Grants = {
    "alembic_version": ("SELECT",),
    "ledger_entries": _APPEND,
    "ledger_nodes": _APPEND,
    "ledger_checkpoints": _APPEND,
    "ledger_keys": _APPEND,
    "ledger_payloads": (*_APPEND, "UPDATE (data, purged_at, purge_seq)"),
    "audit_traces": _APPEND,
    "audit_trace_rules": _APPEND,
    "audit_trace_accounts": _APPEND,
    "audit_annotations": _APPEND,
}


def _role() -> str | None:
    return resolve(context.get_x_argument(as_dictionary=True).get("app_role"))


def upgrade() -> None:
    bind = op.get_bind()
    role = _role()
    if bind.dialect.name == "postgresql" and role:
        grant(bind, role, GRANTS)


def downgrade() -> None:
    """Back to what 0001 and 0003 granted (the schema's USAGE stays: an operator may have
    granted it by hand before this revision existed)."""
    bind = op.get_bind()
    role = _role()
    if bind.dialect.name == "postgresql" and role:
        op.execute(f"REVOKE ALL ON TABLE alembic_version, ledger_payloads FROM {role}")
        op.execute(f"GRANT SELECT, INSERT, UPDATE ON TABLE ledger_payloads TO {role}")
