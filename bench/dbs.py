"""Fresh, durable benchmark databases: SQLite files, PostgreSQL schemas, the PostgreSQL connection."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import SQLAlchemyError

from ledger import store

PG_ENV = "SEALTRAIL_BENCH_POSTGRES_URL"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
PG_SETTINGS = ("server_version", "fsync", "synchronous_commit", "wal_sync_method")


@contextmanager
def fresh_sqlite(root: Path) -> Iterator[Engine]:
    """A durable engine (WAL, synchronous=FULL) on a new database file, deleted afterwards."""
    path = root / f"bench_{secrets.token_hex(4)}.db"
    engine = store.connect(f"sqlite:///{path}", create_file=True)
    try:
        yield engine
    finally:
        engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def pg_admin(url: str) -> tuple[Engine | None, dict[str, str]]:
    """An autocommit engine on ``url`` and the server's settings, or None and why not."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            info = {name: str(conn.exec_driver_sql(f"SHOW {name}").scalar()) for name in PG_SETTINGS}
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return None, {"server_version": f"unreachable ({reason})"}
    return engine, info


def connect_postgres(skip: bool) -> tuple[Engine | None, dict[str, str]]:
    """The PostgreSQL admin engine (URL from $SEALTRAIL_BENCH_POSTGRES_URL), unless skipped or unreachable."""
    if skip:
        return None, {"server_version": "skipped (--skip-postgres)"}
    url = os.environ.get(PG_ENV, PG_DEFAULT)
    try:
        return pg_admin(url)
    except SQLAlchemyError as exc:  # a malformed URL or a missing driver
        return None, {"server_version": f"unusable URL ({exc})"}


@contextmanager
def fresh_pg_schema(admin: Engine) -> Iterator[Engine]:
    """A durable engine whose search_path is a new schema, dropped (CASCADE) afterwards."""
    schema = f"bench_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"})
    engine = store.connect(url.render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')


def backends(admin: Engine | None) -> list[str]:
    """The backends to measure: SQLite, and PostgreSQL when ``admin`` is connected."""
    return ["sqlite", "postgresql"] if admin is not None else ["sqlite"]


@contextmanager
def fresh_db(backend: str, root: Path, admin: Engine | None) -> Iterator[Engine]:
    """A fresh, empty database of ``backend`` kind ("sqlite" files go under ``root``)."""
    if backend == "sqlite":
        with fresh_sqlite(root) as engine:
            yield engine
    else:
        assert admin is not None
        with fresh_pg_schema(admin) as engine:
            yield engine


def placeholder(engine: Engine) -> str:
    """The driver's parameter marker."""
    return "?" if engine.dialect.paramstyle == "qmark" else "%s"


def sqlite_path(engine: Engine) -> Path:
    """The database file behind a SQLite engine."""
    return Path(str(engine.url.database))
