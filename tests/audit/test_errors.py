"""The audit layer's one exception tree, and the old flat module paths kept for one version."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
import warnings

import pytest

import audit
from audit import _moved
from audit.errors import AuditError, BundleError, QueryError, TraceNotFoundError
from ledger.errors import VerificationError


def _audit_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(audit.__path__, "audit.") if m.name != "audit._moved"]


def test_every_audit_exception_descends_from_audit_error() -> None:
    strays = []
    for name in _audit_modules():
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name
                    and not issubclass(obj, AuditError)):
                strays.append(f"{name}.{obj.__qualname__}")
    assert strays == []


def test_every_audit_exception_is_defined_in_audit_errors() -> None:
    """One tree in one module: api/problems.py and the CLI map it without hunting."""
    elsewhere = [f"{name}.{obj.__qualname__}" for name in _audit_modules() if name != "audit.errors"
                 for obj in vars(importlib.import_module(name)).values()
                 if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name
                 and not obj.__name__.startswith("_")]
    assert elsewhere == []


def test_bundle_errors_are_still_verification_errors_and_queries_still_value_errors() -> None:
    assert issubclass(BundleError, VerificationError)
    assert issubclass(QueryError, ValueError)
    assert issubclass(TraceNotFoundError, AuditError)


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_old_module_path_gives_the_new_module_with_a_warning(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        mod = importlib.import_module(old)
    assert mod is importlib.import_module(new)


def test_old_from_import_of_a_public_name_works_in_a_fresh_interpreter() -> None:
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    from audit.verify_bundle import verify_bundle\nexcept DeprecationWarning as w:\n"
            "    print('warned', w)\n"
            "warnings.simplefilter('ignore')\n"
            "from audit.verify_bundle import verify_bundle\n"
            "from audit.bundle.verify import verify_bundle as v\n"
            "print(verify_bundle is v)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "warned audit.verify_bundle moved to audit.bundle.verify" in out
    assert out.strip().endswith("True")


def test_an_unknown_old_path_is_still_an_import_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("audit.no_such_module")
