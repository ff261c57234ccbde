"""Fixtures shared by the HTTP API tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.test_fail_closed import Served, in_process
from tests.conftest import Db


@pytest.fixture
def served(db: Db, tmp_path: Path) -> Iterator[Served]:
    """The app in process over a fresh ledger (``db``: SQLite, and PostgreSQL where CI has it)."""
    with in_process(db, tmp_path) as (client, rt, s):
        yield Served(client, rt, s)
