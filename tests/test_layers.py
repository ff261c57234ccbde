"""DESIGN.md's layering, enforced: ledger, wasm_rules and inference never import each other
or anything above them; audit never imports api; migrations import only ledger.

And the finer rules of the layout: ``api`` is a thin face that issues no SQL and never reaches
into ``ledger.store``; the pure computations (Merkle trees, signed notes, the rule compiler,
feature maths) touch neither the database nor the clock; the offline bundle verifier imports
and runs with SQLAlchemy and the decision path absent, as it must on an examiner's machine.
Each check has a test showing that it sees a planted violation.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PROJECT = {"ledger", "wasm_rules", "inference", "audit", "api", "migrations"}
FORBIDDEN = {
    "ledger": {"wasm_rules", "inference", "audit", "api"},
    "wasm_rules": {"ledger", "inference", "audit", "api"},
    "inference": {"ledger", "wasm_rules", "audit", "api"},
    "audit": {"api", "migrations"},
    "migrations": {"wasm_rules", "inference", "audit", "api"},
}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def imported_packages(path: Path) -> set[str]:
    tree = _tree(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & PROJECT


def imported_modules(tree: ast.Module) -> set[str]:
    """Every module an import statement names, with ``from a import b`` counted as ``a`` and
    ``a.b`` (``b`` may be a submodule: ``from ledger import store``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_or_sideways_imports(package: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(imported_packages(p) & FORBIDDEN[package])
           for p in sorted((ROOT / package).rglob("*.py"))}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import os\nfrom audit.decide import run\nimport ledger.store as s\nfrom . import y\n")
    assert imported_packages(f) == {"audit", "ledger"}


# --- api issues no SQL --------------------------------------------------------------------------

SQL_BUILDERS = {"text", "select", "insert", "update", "delete", "literal_column", "table", "column"}
SQL_CALLS = {"execute", "exec_driver_sql", "executemany"}


def sql_in(path: Path) -> list[str]:
    """What in ``path`` reaches into the database below ``ledger``'s functions: an import of
    ``ledger.store``, a SQL builder (``text``, ``select``, ``insert``...) from SQLAlchemy, a call
    of one, or a statement executed (``.execute(``, ``.exec_driver_sql(``)."""
    tree = _tree(path)
    found: list[str] = []
    if any(m == "ledger.store" or m.startswith("ledger.store.") for m in imported_modules(tree)):
        found.append("imports ledger.store")
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
            found += [f"{where}: imports sqlalchemy {a.name}" for a in node.names if a.name in SQL_BUILDERS]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in {"sqlalchemy", "sa"} and node.attr in SQL_BUILDERS:
            found.append(f"{where}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in SQL_CALLS:
                found.append(f"{where}: .{f.attr}(")
            elif isinstance(f, ast.Name) and f.id in {"text", "select", "insert"}:
                found.append(f"{where}: {f.id}(")
    return sorted(found)


def test_api_issues_no_sql_and_never_reaches_into_the_ledgers_storage() -> None:
    bad = {str(p.relative_to(ROOT)): sql_in(p) for p in sorted((ROOT / "api").rglob("*.py"))}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_sql_check_sees_sql_planted_in_the_api(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text(textwrap.dedent("""\
        import sqlalchemy as sa
        from ledger import store
        from sqlalchemy import Engine, text

        def rows(engine: Engine) -> list:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
                return conn.execute(text("SELECT 2")).all() + [sa.select(store.entries)]
        """))
    assert sql_in(f) == ["imports ledger.store", "line 3: imports sqlalchemy text",
                         "line 7: .exec_driver_sql(", "line 8: .execute(", "line 8: sa.select",
                         "line 8: text("]
    clean = tmp_path / "y.py"
    clean.write_text("from sqlalchemy import Engine\nfrom ledger.proofs import prove_consistency\n")
    assert sql_in(clean) == []


# --- pure computation reads no database and no clock -----------------------------------------------

PURE = [
    "ledger/merkle.py",
    "ledger/multiproof.py",
    "ledger/note.py",
    "ledger/checkpoint.py",
    "wasm_rules/language.py",
    "wasm_rules/compiler.py",
    "inference/features.py",  # event time comes in with the transaction, never from the clock
    "inference/velocity.py",
]
CLOCK_ATTRS = {"now", "utcnow", "today"}
TIME_FUNCS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
              "localtime", "gmtime", "ctime"}


def impurities(path: Path) -> list[str]:
    """SQLAlchemy imported or a clock read (``datetime.now``, ``date.today``, ``utcnow``,
    ``time.time`` and friends) in ``path``."""
    tree = _tree(path)
    found = [f"imports {m}" for m in sorted(imported_modules(tree)) if m.split(".")[0] == "sqlalchemy"]
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and node.attr in CLOCK_ATTRS:
            found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "time" and node.attr in TIME_FUNCS:
            found.append(f"{where}: time.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [f"{where}: from time import {a.name}" for a in node.names if a.name in TIME_FUNCS]
    return sorted(found)


def test_pure_modules_touch_neither_the_database_nor_the_clock() -> None:
    assert {p: impurities(ROOT / p) for p in PURE if impurities(ROOT / p)} == {}


def test_the_purity_check_sees_a_clock_and_a_database(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text(textwrap.dedent("""\
        import time
        from datetime import UTC, date, datetime
        from time import monotonic
        from sqlalchemy.orm import Session

        def stamp() -> tuple:
            return datetime.now(UTC), date.today(), datetime.utcnow(), time.time(), monotonic()
        """))
    assert impurities(f) == ["imports sqlalchemy.orm", "imports sqlalchemy.orm.Session",
                             "line 3: from time import monotonic", "line 7: .now", "line 7: .today",
                             "line 7: .utcnow", "line 7: time.time"]


# --- the pure modules and the offline verifier run without the database layer ----------------------

BLOCKED = ("sqlalchemy", "audit.decide.pipeline", "audit.decide.service", "ledger.append", "ledger.store")
_BLOCKER = f"""
import importlib.abc, sys
class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {BLOCKED!r}):
            raise ImportError(f"{{name}} is not installed on an examiner's machine")
        return None
sys.meta_path.insert(0, _Absent())
"""


def run_without_database(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where SQLAlchemy, ledger.store, ledger.append and the
    decision pipeline and service cannot be imported."""
    return subprocess.run([sys.executable, "-c", _BLOCKER + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_pure_modules_import_without_the_database_layer() -> None:
    mods = [p.removesuffix(".py").replace("/", ".") for p in PURE] + ["ledger.errors", "ledger.jcs"]
    mods = [m for m in mods if (ROOT / (m.replace(".", "/") + ".py")).exists()]
    res = run_without_database("".join(f"import {m}\n" for m in mods))
    assert res.returncode == 0, res.stderr


def test_the_import_check_fails_for_a_module_that_needs_the_database() -> None:
    res = run_without_database("import ledger.verify\n")
    assert res.returncode != 0 and "ImportError" in res.stderr and "examiner" in res.stderr


def test_the_offline_verifier_verifies_a_real_bundle_without_the_database_layer(tmp_path: Path) -> None:
    from ledger import NoteSigner
    from tests.audit.bundle_fixture import created_bundle, make_source
    from tests.conftest import ORIGIN, Db, make_ledger
    from wasm_rules import Sandbox

    signer = NoteSigner.generate(ORIGIN)
    with Sandbox() as sandbox:
        source = make_source(make_ledger(Db(f"sqlite:///{tmp_path / 'src.db'}", "sqlite"), signer), signer,
                             sandbox, n=8)
        bundle = created_bundle(source, tmp_path / "bundle.zip")
        source.ledger.engine.dispose()
    res = run_without_database(f"""
        import json, sys
        from datetime import UTC, datetime
        from audit.bundle import verify_bundle
        from ledger.note import NoteVerifier
        from wasm_rules import Sandbox
        with Sandbox() as sb:
            report = verify_bundle({str(bundle)!r}, [NoteVerifier.from_vkey({signer.verifier.vkey!r})],
                                   sandbox=sb, now=lambda: datetime(2026, 12, 3, 9, tzinfo=UTC))
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "sqlalchemy")
        print(json.dumps({{"report": report.to_json(), "sqlalchemy": loaded}}))
        """)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["sqlalchemy"] == []
    report = out["report"]
    assert report["pinned"] and report["decisions"] == len(source.decisions)
    assert report["replayed"] == report["rescored"] == len(source.decisions) > 0
    assert report["signed_by"] == [signer.verifier.vkey]
