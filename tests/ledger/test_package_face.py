"""The ledger package's face: light to import, and 0.1's database names kept for one version."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ledger
from ledger.append import CheckpointPolicy, Ledger
from ledger.verify import VerifyReport, verify_ledger


def test_importing_the_package_loads_no_database_code() -> None:
    code = "import sys, ledger, ledger.errors, ledger.note; print('sqlalchemy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("name", "obj"), [("Ledger", Ledger), ("CheckpointPolicy", CheckpointPolicy),
                                           ("verify_ledger", verify_ledger), ("VerifyReport", VerifyReport)])
def test_a_name_that_moved_off_the_face_still_resolves_with_a_warning(name: str, obj: object) -> None:
    with pytest.warns(DeprecationWarning, match=f"ledger.{name} moved"):
        assert getattr(ledger, name) is obj


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Store'"):
        ledger.Store  # noqa: B018
