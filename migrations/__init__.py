"""Alembic migrations: the only way ledger tables and their append-only guards are created."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from migrations import privileges

SCRIPT_LOCATION = str(Path(__file__).resolve().parent)

__all__ = ["SCRIPT_LOCATION", "upgrade"]


def upgrade(engine: Engine, *, app_role: str | None = None) -> None:
    """Bring ``engine``'s database to the newest revision (idempotent).

    On PostgreSQL with an app role (``app_role``, else ``SEALTRAIL_APP_ROLE``), the role's
    grants are then made exactly ``privileges.HEAD`` even when no revision ran: a database
    already at the newest revision gets a role named later, and loses what was granted by hand."""
    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if app_role:
        cfg.cmd_opts = type("Opts", (), {"x": [f"app_role={app_role}"]})()
    role = privileges.resolve(app_role)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        if role and conn.dialect.name == "postgresql":
            privileges.grant(conn, role, privileges.HEAD)
        conn.commit()
