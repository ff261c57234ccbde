"""api.runtime: for one version, the runtime's old path gives ``audit.decide.runtime.Runtime``
with a DeprecationWarning; the API opens that runtime from its own ``Settings``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from api import ops
from api.config import Settings
from audit.decide.runtime import Runtime


def test_the_old_path_is_the_same_class_with_a_warning() -> None:
    sys.modules.pop("api.runtime", None)
    with pytest.warns(DeprecationWarning, match="audit.decide.runtime"):
        old = importlib.import_module("api.runtime")
    assert old.Runtime is Runtime


def test_the_api_settings_open_a_runtime_and_stay_readable_on_it(tmp_path: Path) -> None:
    s = Settings(db=f"sqlite:///{tmp_path / 'ledger.db'}", keys=tmp_path / "keys",
                 exports_dir=tmp_path / "out")
    ops.initialise(s)  # creates the SQLite file
    with Runtime.open(s) as rt:
        assert rt.settings is s and rt.settings.exports_dir == tmp_path / "out"
        assert rt.ledger.origin == s.origin
