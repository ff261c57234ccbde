"""The graph computes with integers only (DESIGN.md invariant 10): no true division, no float
constants, no ``math`` or numpy anywhere in ``inference/graph``, so no libm or SIMD result can
reach a value or the state, whatever CPU runs it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
SOURCES = sorted((ROOT / "inference" / "graph").glob("*.py"))


def test_sources_hold_no_true_division_float_or_libm() -> None:
    assert len(SOURCES) >= 6
    found: list[str] = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Div):
                found.append(f"{where} true division")
            elif isinstance(node, ast.Constant) and isinstance(node.value, float):
                found.append(f"{where} float constant {node.value!r}")
            elif isinstance(node, ast.Name) and node.id == "float":
                found.append(f"{where} float()")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] in ("math", "numpy", "cmath", "statistics", "decimal") for n in names):
                    found.append(f"{where} imports {names}")
    assert found == []


def test_importing_the_graph_loads_no_numpy() -> None:
    code = "import sys, inference.graph; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
