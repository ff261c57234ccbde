"""The held-out generator is unreachable from the training code and shares none of its output."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from inference.heldout import DOMAIN, HeldoutConfig, generate
from inference.simulate import SimConfig, simulate

ROOT = Path(__file__).resolve().parents[3]
TRAINING = ("inference/train.py", "inference/simulate.py", "inference/simulate_population.py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            module = "." * node.level + node.module
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "import_module",
            "__import__",
        ):
            names.update(str(a.value) for a in node.args if isinstance(a, ast.Constant))
    return names


def _module_path(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _closure(start: str) -> set[str]:
    """Every repository module reachable by imports from ``start`` (a path under ROOT)."""
    seen: set[str] = set()
    todo = [ROOT / start]
    while todo:
        path = todo.pop()
        key = str(path.relative_to(ROOT))
        if key in seen:
            continue
        seen.add(key)
        for name in _imports(path):
            if name.split(".")[0] in ("inference", "ledger", "wasm_rules", "audit", "api"):
                found = _module_path(name)
                if found is not None:
                    todo.append(found)
    return seen


def test_training_code_never_imports_or_names_the_heldout_generator() -> None:
    for start in TRAINING:
        reached = _closure(start)
        assert "inference/train.py" in reached or start != "inference/train.py"
        assert not [m for m in reached if "heldout" in m], start
        for m in reached:
            text = (ROOT / m).read_text()
            for mention in (
                "inference.heldout",
                "inference/heldout",
                "import heldout",
                DOMAIN,
                "sealtrail.heldout",
            ):
                assert mention not in text, (m, mention)


@pytest.mark.requirement("SR11-7-validation")
def test_the_heldout_generator_does_not_import_the_training_simulator() -> None:
    for path in sorted((ROOT / "inference" / "heldout").glob("*.py")):
        assert not [n for n in _imports(path) if n.startswith("inference.simulate")], path.name


def test_the_scan_would_see_an_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from inference.heldout import generate\nimport importlib\n"
        "importlib.import_module('inference.heldout')\n"
    )
    assert {"inference.heldout", "inference.heldout.generate"} <= _imports(probe)


def test_the_same_seed_gives_different_traffic_from_the_training_simulator() -> None:
    for seed in (1, 7):
        ours = generate(HeldoutConfig(seed=seed, n_accounts=1_000, days=7, density=0.1))
        theirs = simulate(SimConfig(seed=seed, n_accounts=1_000, days=7, n_normal=600))
        ours_ids = {(x.transaction.originator.account, x.transaction.amount) for x in ours}
        theirs_ids = {(x.transaction.originator.account, x.transaction.amount) for x in theirs}
        assert not ours_ids & theirs_ids
        assert not {x.transaction.sha256 for x in ours} & {x.transaction.sha256 for x in theirs}
