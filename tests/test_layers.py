"""DESIGN.md's layering, enforced: ledger, wasm_rules and inference never import each other
or anything above them; audit never imports api; migrations import only ledger."""

from __future__ import annotations

import ast
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


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & PROJECT


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_or_sideways_imports(package: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(imported_packages(p) & FORBIDDEN[package])
           for p in sorted((ROOT / package).rglob("*.py"))}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import os\nfrom audit.decide import run\nimport ledger.store as s\nfrom . import y\n")
    assert imported_packages(f) == {"audit", "ledger"}
