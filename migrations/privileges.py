"""The application's PostgreSQL role: exactly what it may do, in one place.

The app role (``SEALTRAIL_APP_ROLE``, or ``alembic -x app_role=NAME``) is the role that
``serve``, ``score``, ``ledger verify`` and the other commands connect as. It owns nothing:
the tables, triggers and trigger functions belong to the role that runs the migrations, so the
app role cannot drop or disable a trigger, alter a table, or grant itself more. What it is
granted, table by table:

- ``alembic_version``: SELECT (the schema check every command makes at start-up).
- the ledger's append-only tables and the derived query index: SELECT and INSERT. The index
  rows are written by the application itself, in the same transaction that seals the records
  they derive from, so INSERT is the least it can hold; UPDATE, DELETE and TRUNCATE are not
  granted, and the append-only triggers refuse them for the owner too.
- ``ledger_payloads``: SELECT, INSERT, and UPDATE of ``data``, ``purged_at`` and ``purge_seq``
  only (a purge empties a payload; the purge-only trigger checks what the new row holds).
- the schema: USAGE (to see the tables), never CREATE.

No table has a sequence (every key is written by the sequencer), so none is granted.
``grant`` revokes everything else the role holds on these tables first: it is idempotent, and
a privilege added by hand does not survive the next ``sealtrail init``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from sqlalchemy import Connection

__all__ = ["HEAD", "Grants", "check_role", "grant", "resolve"]

Grants = Mapping[str, tuple[str, ...]]  # table -> privileges, as SQL ("SELECT", "UPDATE (a, b)")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_APPEND = ("SELECT", "INSERT")

# What the app role holds at the newest revision. A revision that adds a table adds it here
# (tests/api/test_app_role.py fails while a table of the schema is missing from this map) and
# grants it in its own upgrade with its own frozen map.
HEAD: Grants = {
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
    "audit_idempotency_keys": _APPEND,  # revision 0005
    "audit_account_secret": ("SELECT",),  # revision 0006: made by the migration, never written after
    # revision 0008: the alert and case view; current-state tables are updated, never deleted from
    "audit_alerts": (*_APPEND, "UPDATE"),
    "audit_cases": (*_APPEND, "UPDATE"),
    "audit_case_watermark": (*_APPEND, "UPDATE"),
    "audit_case_events": _APPEND,
    "audit_payment_outcomes": _APPEND,
    "ledger_cosignatures": _APPEND,  # revision 0009: witness cosignatures, append-only
    # revision 0010: webhook delivery state (cursor, retries, lease), updated, never deleted
    "audit_outcome_deliveries": (*_APPEND, "UPDATE"),
    "audit_outcome_delivery_scorers": (*_APPEND, "UPDATE"),  # revision 0011: a cursor per scorer
}


def resolve(explicit: str | None) -> str | None:
    """The app role: ``explicit`` (``-x app_role=``, ``sealtrail init``'s setting), else
    ``SEALTRAIL_APP_ROLE``, else none. ``ValueError`` unless it is a plain SQL identifier."""
    role = explicit or os.environ.get("SEALTRAIL_APP_ROLE")
    if role and not _IDENTIFIER.fullmatch(role):
        raise ValueError(f"application role name {role!r} is not a plain SQL identifier")
    return role or None


def check_role(conn: Connection, role: str) -> None:
    """Refuse a role that would defeat the grants: one that does not exist, a superuser, one
    that bypasses row security, or one that may act as the owner of the tables (the role
    running the migrations, or a member of it)."""
    row = conn.exec_driver_sql(
        "SELECT r.rolsuper, r.rolbypassrls, pg_has_role(r.oid, current_user, 'MEMBER') "
        "FROM pg_roles r WHERE r.rolname = %(role)s", {"role": role.lower()}
    ).first()
    if row is None:
        raise ValueError(f"application role {role!r} does not exist (CREATE ROLE {role} LOGIN first)")
    superuser, bypass, owner = row
    if superuser or bypass:
        raise ValueError(f"application role {role!r} is a superuser or bypasses row security: "
                         "it could rewrite the ledger whatever is granted")
    if owner:
        raise ValueError(f"application role {role!r} is, or may act as, the role running the migrations, "
                         "which owns the tables and their triggers: use a separate role")


def grant(conn: Connection, role: str, grants: Grants) -> None:
    """Make ``grants`` exactly what ``role`` holds on those tables (PostgreSQL), plus USAGE
    on the current schema. Runs in the caller's transaction."""
    check_role(conn, role)
    schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
    if schema is None:
        raise ValueError("no current schema: the search_path names no existing schema")
    conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {conn.dialect.identifier_preparer.quote(schema)} TO {role}")
    conn.exec_driver_sql(f"REVOKE ALL ON TABLE {', '.join(grants)} FROM {role}")  # column grants too
    for table, privileges in grants.items():
        conn.exec_driver_sql(f"GRANT {', '.join(privileges)} ON TABLE {table} TO {role}")
