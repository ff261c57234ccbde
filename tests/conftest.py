"""Database fixtures: every test gets its own SQLite file or its own PostgreSQL schema.

When SEALTRAIL_TEST_POSTGRES_URL is set (CI sets it), the PostgreSQL variants run and fail
loudly if the server is unreachable; without it they are skipped with that reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import Engine, create_engine

import migrations
from ledger import NoteSigner, store
from ledger.append import CheckpointPolicy, Ledger

PG_URL = os.environ.get("SEALTRAIL_TEST_POSTGRES_URL")
ORIGIN = "test.sealtrail/log"


@dataclass
class Db:
    url: str
    dialect: str

    def engine(self) -> Engine:
        return store.connect(self.url, create_file=True)


def _sqlite(tmp_path: Path) -> Iterator[Db]:
    yield Db(f"sqlite:///{tmp_path / 'ledger.db'}", "sqlite")


def _postgres() -> Generator[Db, None, None]:
    if not PG_URL:
        pytest.skip(reason="SEALTRAIL_TEST_POSTGRES_URL is not set (CI sets it)")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # fails the test if the server is unreachable
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield Db(f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}", "postgresql")
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    """A fresh, empty database of each dialect."""
    gen = _sqlite(tmp_path) if request.param == "sqlite" else _postgres()
    yield from gen


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Db]:
    yield from _sqlite(tmp_path)


@pytest.fixture
def signer() -> NoteSigner:
    return NoteSigner.generate(ORIGIN)


def make_ledger(db: Db, signer: NoteSigner, every: int = 1000) -> Ledger:
    engine = db.engine()
    migrations.upgrade(engine)
    return Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(every, 3600))


@pytest.fixture
def ledger(db: Db, signer: NoteSigner) -> Iterator[Ledger]:
    lg = make_ledger(db, signer)
    yield lg
    lg.engine.dispose()


# --------------------------------------------------------------------------- the app role (PostgreSQL)

APP_ROLE = "sealtrail_app_test"


@dataclass
class AppRoleDb:
    """One fresh PostgreSQL schema seen twice: ``admin`` connects as the server's superuser (it
    runs the migrations and owns the tables), ``app`` as ``APP_ROLE``, a LOGIN role with no
    privilege but what the migrations grant it."""

    admin: Db
    app: Db
    role: str = APP_ROLE


def _ensure_app_role() -> None:
    """Create ``APP_ROLE`` if missing, and make sure it is a plain LOGIN role (trust auth on
    127.0.0.1 lets it connect without a password). It is left in the cluster between runs: it
    owns nothing, and every grant it holds lives in a test's schema, dropped with the schema."""
    assert PG_URL
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"DO $$ BEGIN CREATE ROLE {APP_ROLE} LOGIN; "
                "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$")
            conn.exec_driver_sql(f"ALTER ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                                 "NOBYPASSRLS NOINHERIT")
    finally:
        admin.dispose()


@pytest.fixture
def app_role_db() -> Iterator[AppRoleDb]:
    """A fresh, empty PostgreSQL schema and a URL for each of the two roles (not migrated:
    the test migrates it as ``admin`` with ``app_role=APP_ROLE``)."""
    from sqlalchemy.engine import make_url

    gen = _postgres()  # skips without SEALTRAIL_TEST_POSTGRES_URL
    admin = next(gen)
    try:
        _ensure_app_role()
        app_url = make_url(admin.url).set(username=APP_ROLE, password=None)
        yield AppRoleDb(admin, Db(app_url.render_as_string(hide_password=False), "postgresql"))
    finally:
        gen.close()


# --------------------------------------------------------------------------- the compliance map runs in CI


def _full_suite() -> bool:
    """CI (``CI``, or ``SEALTRAIL_FULL_SUITE`` as ``.ci/run`` and ``make test-all`` set it)."""
    return any(os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")
               for name in ("CI", "SEALTRAIL_FULL_SUITE"))


_ReportWrapper = Generator[None, pytest.TestReport, pytest.TestReport]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> _ReportWrapper:
    """Under CI a test backing a row of docs/compliance.md (a ``requirement`` marker) that is skipped
    or xfailed fails instead, naming its requirements: a map entry never silently stops running."""
    report = yield
    ids = [str(i) for m in item.iter_markers("requirement") for i in m.args]
    xfail = hasattr(report, "wasxfail")
    if not (ids and _full_suite() and (report.skipped or xfail)):
        return report
    why = f"xfail ({report.wasxfail})" if xfail else f"skipped ({_skip_reason(report)})"
    report.outcome = "failed"
    report.longrepr = (f"{item.nodeid} backs requirement {', '.join(sorted(set(ids)))} of docs/compliance.md "
                       f"and must run in CI, but was {why}")
    if xfail:
        del report.wasxfail
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)
