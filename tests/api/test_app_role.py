"""The documented least-privilege PostgreSQL set-up, end to end: the tables migrated by the
server's superuser with ``app_role``, every command run as that role (``APP_ROLE``, a LOGIN
role connecting with its own user name in the URL).

A few tests, not the API suite a second time: the commands that open the database (``score``,
``ledger verify``, ``serve`` with a decision round trip over mutual TLS) start and work as the
role; the role holds exactly the documented privileges and is refused rewriting the ledger or
its index, or removing their guards; a database migrated before revision 0004 upgrades to the
same grants. PostgreSQL only (SQLite has no roles): skipped without SEALTRAIL_TEST_POSTGRES_URL,
which ``.ci/run`` sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.exc import DBAPIError

import migrations
from api import ops
from api.certs import create_dev_pki
from api.config import Settings
from ledger import store
from migrations import privileges
from tests.api.server_proc import ServerFiles, start
from tests.api.test_cli_score import FIN, Cli, sim_array
from tests.conftest import AppRoleDb

pytestmark = pytest.mark.postgres
JSON = {"content-type": "application/json"}


def init_as_admin(env: AppRoleDb, keys: Path) -> None:
    """``sealtrail init`` as the operator would run it: as the owner, naming the app role."""
    ops.initialise(Settings.model_validate({"db": env.admin.url, "keys": keys, "app_role": env.role}))


def grants_of(env: AppRoleDb) -> dict[str, set[str]]:
    """table -> the privileges ``env.role`` holds on it in the test's schema (column ones as
    ``UPDATE (col)``), read from the catalogue as the owner."""
    engine = env.admin.engine()
    out: dict[str, set[str]] = {}
    try:
        with engine.connect() as conn:
            tables = conn.exec_driver_sql(
                "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                "WHERE grantee = %(r)s AND table_schema = current_schema()", {"r": env.role}).all()
            columns = conn.exec_driver_sql(
                "SELECT table_name, privilege_type, column_name FROM information_schema.column_privileges "
                "WHERE grantee = %(r)s AND table_schema = current_schema()", {"r": env.role}).all()
            for t, p in tables:
                out.setdefault(t, set()).add(p)
            for t, p, c in columns:
                if p not in out.get(t, set()):  # a column privilege the table-level one does not imply
                    out.setdefault(t, set()).add(f"{p} ({c})")
    finally:
        engine.dispose()
    return out


def expected(grants: privileges.Grants) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for table, privs in grants.items():
        for p in privs:
            m = re.fullmatch(r"(\w+) \((.*)\)", p)
            out.setdefault(table, set()).update(
                [f"{m[1]} ({c.strip()})" for c in m[2].split(",")] if m else [p])
    return out


def refused(env: AppRoleDb, sql: str) -> str:
    """Run ``sql`` as the app role; it must fail with SQLSTATE 42501 (insufficient privilege).
    Returns the server's message."""
    engine = env.app.engine()
    try:
        with engine.connect() as conn, pytest.raises(DBAPIError) as info:
            conn.exec_driver_sql(sql)
    finally:
        engine.dispose()
    assert getattr(info.value.orig, "sqlstate", None) == "42501", (sql, str(info.value.orig))
    return str(info.value.orig)


def test_score_verify_and_serve_run_as_the_app_role(app_role_db: AppRoleDb, tmp_path: Path) -> None:
    env = app_role_db
    keys = tmp_path / "keys"
    init_as_admin(env, keys)
    app = Cli(env.app, keys)  # every command below connects as the app role
    doc = app.json("score", str(FIN))  # was: exit 2, permission denied for table alembic_version
    assert doc["ok"] is True and doc["count"] == 1
    items = tmp_path / "items.json"
    items.write_bytes(orjson.dumps(sim_array(5)))
    assert app.json("score", str(items))["count"] == 5
    report = app.json("ledger", "verify")
    assert report["ok"] is True and report["verified"] is True and report["size"] == app.size()
    cp = app.json("ledger", "checkpoint")  # a signed checkpoint is an INSERT the role may make
    assert cp["ok"] is True

    create_dev_pki(tmp_path / "pki")
    files = ServerFiles(tmp_path, env.app.url, keys, tmp_path / "pki")
    tx = sim_array(1, seed=9)[0]
    with start(files) as server:
        with server.client("scorer") as c:
            r = c.post("/v1/decisions", content=orjson.dumps(tx), headers=JSON)
            assert r.status_code == 200, r.text
            decided = r.json()
        with server.client("officer") as c:
            t = c.get(f"/v1/traces/{decided['trace_id']}")
            assert t.status_code == 200, t.text
            assert t.json()["record"]["trace_id"] == decided["trace_id"]
        assert server.stop() == 0, server.stderr()
    assert "permission denied" not in server.stderr()
    final = app.json("ledger", "verify")
    assert final["verified"] is True and final["size"] == app.size() > report["size"]


def test_the_app_role_holds_exactly_the_documented_privileges(app_role_db: AppRoleDb,
                                                              tmp_path: Path) -> None:
    env = app_role_db
    init_as_admin(env, tmp_path / "keys")
    engine = env.admin.engine()
    try:
        with engine.connect() as conn:
            tables = set(conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").scalars())
            has_create = conn.exec_driver_sql(
                "SELECT has_schema_privilege(%(r)s, current_schema(), 'CREATE')", {"r": env.role}).scalar()
    finally:
        engine.dispose()
    assert tables == set(privileges.HEAD)  # a new table must be granted (or refused) on purpose
    assert grants_of(env) == expected(privileges.HEAD)
    assert has_create is False

    # Writes the role may make are appends; the ledger, its payloads' identity and the index
    # cannot be rewritten, and nothing guarding them can be removed.
    for sql in ("UPDATE ledger_entries SET kind = kind",
                "DELETE FROM ledger_entries",
                "TRUNCATE ledger_entries",
                "DELETE FROM ledger_checkpoints",
                "UPDATE ledger_keys SET name = name",
                "DELETE FROM ledger_payloads",
                "UPDATE ledger_payloads SET sha256 = sha256",
                "UPDATE audit_traces SET decision = 'ALLOW'",
                "DELETE FROM audit_trace_accounts",
                "TRUNCATE audit_annotations",
                "UPDATE alembic_version SET version_num = '0003'",
                "INSERT INTO alembic_version VALUES ('9999')",
                "CREATE TABLE ledger_shadow (x int)"):
        assert "permission denied" in refused(env, sql)
    for sql in ("DROP TRIGGER ledger_entries_append_only ON ledger_entries",
                "ALTER TABLE ledger_entries DISABLE TRIGGER ALL",
                "DROP TRIGGER audit_traces_append_only ON audit_traces",
                "DROP FUNCTION sealtrail_refuse_change()",
                f"ALTER TABLE ledger_entries OWNER TO {env.role}"):
        assert "must be owner" in refused(env, sql), sql


def test_a_database_migrated_before_0004_upgrades_to_the_same_grants(app_role_db: AppRoleDb,
                                                                     tmp_path: Path) -> None:
    env = app_role_db
    cfg = Config()
    cfg.set_main_option("script_location", migrations.SCRIPT_LOCATION)
    cfg.cmd_opts = type("Opts", (), {"x": [f"app_role={env.role}"]})()  # alembic -x app_role=...
    engine = env.admin.engine()
    try:
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0003")  # what 0.1 installed
            conn.commit()
        assert "alembic_version" not in grants_of(env)
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")  # 0004 alone, as on an existing database
            conn.commit()
    finally:
        engine.dispose()
    assert grants_of(env) == expected(privileges.HEAD)
    app = env.app.engine()
    try:
        store.require_schema(app)  # the check every command makes at start-up, as the role
    finally:
        app.dispose()


def test_init_grants_a_role_named_after_the_database_reached_head(app_role_db: AppRoleDb,
                                                                   tmp_path: Path) -> None:
    env = app_role_db
    engine = env.admin.engine()
    try:
        migrations.upgrade(engine)  # at head, no app role yet
        assert grants_of(env) == {}
        with engine.connect() as conn:  # and a privilege granted by hand
            conn.exec_driver_sql(f"GRANT UPDATE, DELETE ON ledger_entries TO {env.role}")
            conn.commit()
    finally:
        engine.dispose()
    init_as_admin(env, tmp_path / "keys")
    assert grants_of(env) == expected(privileges.HEAD)  # granted; the hand-made grant is gone


@pytest.mark.parametrize("bad", ["postgres", "sealtrail_no_such_role"])
def test_a_role_that_would_defeat_the_grants_is_refused(app_role_db: AppRoleDb, tmp_path: Path,
                                                        bad: str) -> None:
    engine = app_role_db.admin.engine()
    try:
        # a superuser is refused by name; a role that does not exist by the server, at the first grant
        with pytest.raises((ValueError, DBAPIError), match=r"superuser|does not exist") as info:
            migrations.upgrade(engine, app_role=bad)
        assert bad in str(info.value)
        with engine.connect() as conn:  # nothing half-done: no table was left behind
            assert not conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").all()
    finally:
        engine.dispose()
