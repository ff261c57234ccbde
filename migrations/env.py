"""Alembic environment: runs on a connection handed in by ``sealtrail init`` or on a URL."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from ledger.store import connect, metadata

config = context.config
target_metadata = metadata


def _run(conn: Connection) -> None:
    context.configure(connection=conn, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        _run(conn)
        return
    url = config.get_main_option("sqlalchemy.url") or os.environ.get(
        "SEALTRAIL_DB", "sqlite:///./sealtrail.db"
    )
    engine = connect(url, create_file=True)
    with engine.connect() as c:
        _run(c)
        c.commit()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("sealtrail migrations run online only (they create triggers per dialect)")
run_migrations_online()
