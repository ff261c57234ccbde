"""docs/compliance.md cannot drift from the tests: every test a row cites exists where it says,
carries the row's ``requirement`` marker and is not skipped or xfailed unconditionally; every
requirement a marker names is a row, and every test marked with a row's id is cited in it. And
under CI a skipped or xfailed requirement test fails (the hook in tests/conftest.py).

Read with ``ast``, not by collecting the suite: the whole check takes well under a second."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "compliance.md"
REQUIREMENT_ID = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Za-z0-9.]+)+")
ROW = re.compile(r"^\|\s*`(?P<id>[^`]+)`\s*\|(?P<rest>.*)\|\s*$")
TEST_ID = re.compile(r"`(?P<path>tests/[\w/]+\.py)::(?P<name>\w+(?:::\w+)?)`")


@dataclass(frozen=True)
class Row:
    requirement: str
    tests: tuple[str, ...]
    line: int


def rows(text: str) -> list[Row]:
    """The map's rows: a table row whose first cell is a requirement id in backticks."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = ROW.match(line)
        if m and REQUIREMENT_ID.fullmatch(m["id"]):
            cells = m["rest"].split("|")
            tests = tuple(f"{t['path']}::{t['name']}" for t in TEST_ID.finditer(cells[-1]))
            out.append(Row(m["id"], tests, n))
    return out


@cache
def the_map() -> tuple[Row, ...]:
    return tuple(rows(MAP.read_text(encoding="utf-8")))


@cache
def module(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)


# --------------------------------------------------------------------------- reading markers


def _mark(node: ast.expr) -> tuple[str, ast.Call | None] | None:
    """``pytest.mark.NAME`` or ``pytest.mark.NAME(...)`` as (NAME, the call), else None."""
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call else node
    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark" and isinstance(target.value.value, ast.Name)
            and target.value.value.id == "pytest"):
        return target.attr, call
    return None


def _marks(nodes: list[ast.expr]) -> Iterator[tuple[str, ast.Call | None]]:
    for node in nodes:
        got = _mark(node)
        if got:
            yield got


def requirement_ids(decorators: list[ast.expr]) -> list[str]:
    ids = []
    for name, call in _marks(decorators):
        if name == "requirement":
            assert call is not None and call.args and not call.keywords, \
                "requirement takes the ids as positional strings"
            for arg in call.args:
                assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), \
                    f"requirement ids are string literals, not {ast.unparse(arg)}"
                ids.append(arg.value)
    return ids


def _always(call: ast.Call | None, keyword: str) -> bool:
    """Whether a skipif/xfail holds regardless of the run: no condition, or a constant true one."""
    if call is None:
        return True
    cond: Any = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == keyword), None)
    if cond is None:
        return True
    return isinstance(cond, ast.Constant) and bool(cond.value)


def unconditional_skips(decorators: list[ast.expr]) -> list[str]:
    found = []
    for name, call in _marks(decorators):
        if name == "skip" or (name == "skipif" and _always(call, "condition")) or (
                name == "xfail" and _always(call, "condition")):
            found.append(f"pytest.mark.{name}")
    return found


def _body_skips(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A ``pytest.skip(...)`` / ``pytest.xfail(...)`` statement at the top of the body runs always."""
    found = []
    for stmt in fn.body:
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute)
                and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id == "pytest"
                and stmt.value.func.attr in ("skip", "xfail")):
            found.append(f"pytest.{stmt.value.func.attr}() in its body")
    return found


def module_marks(tree: ast.Module) -> list[ast.expr]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in stmt.targets):
            value = stmt.value
            return list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]
    return []


def find(path: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope: list[ast.stmt] = module(path).body
    *classes, func = name.split("::")
    for cls in classes:
        found = next((s for s in scope if isinstance(s, ast.ClassDef) and s.name == cls), None)
        if found is None:
            return None
        scope = found.body
    funcs = (s for s in scope if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef))
    return next((s for s in funcs if s.name == func), None)


def marked_tests() -> dict[str, set[str]]:
    """Every test function under tests/ that carries a requirement marker -> its ids."""
    out: dict[str, set[str]] = {}
    for file in sorted((ROOT / "tests").rglob("test_*.py")):
        path = file.relative_to(ROOT).as_posix()
        if "requirement" not in file.read_text(encoding="utf-8"):
            continue
        tree = module(path)
        on_module = requirement_ids(module_marks(tree))

        _visit(out, tree.body, f"{path}::", on_module)
    return out


def _visit(out: dict[str, set[str]], body: list[ast.stmt], prefix: str, inherited: list[str]) -> None:
    for s in body:
        if isinstance(s, ast.ClassDef):
            _visit(out, s.body, f"{prefix}{s.name}::", inherited + requirement_ids(s.decorator_list))
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name.startswith("test"):
            ids = inherited + requirement_ids(s.decorator_list)
            if ids:
                out[f"{prefix}{s.name}"] = set(ids)


# --------------------------------------------------------------------------- the map against the tests


def test_the_map_has_rows_with_unique_ids_each_citing_tests() -> None:
    got = the_map()
    assert len(got) >= 25
    ids = [r.requirement for r in got]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert [f"line {r.line}: {r.requirement}" for r in got if not r.tests] == []
    for regime in ("SEC-17a4f", "FINRA-4511", "BSA-1020.320", "BSA-1010.410", "OFAC-501.601", "FATF-R10",
                   "FATF-R11", "FATF-R16", "FATF-R20", "FATF-R21", "EU-AMLR", "EU-TFR", "GDPR-17",
                   "GDPR-22", "DORA", "SR11-7"):
        assert any(i.startswith(regime) for i in ids), f"no row for {regime}"


def test_every_cited_test_exists_is_collected_and_carries_its_rows_marker() -> None:
    problems = []
    for row in the_map():
        for test in row.tests:
            path, name = test.split("::", 1)
            where = f"docs/compliance.md line {row.line} ({row.requirement}) cites {test}"
            if not Path(path).name.startswith("test_") or not name.split("::")[-1].startswith("test"):
                problems.append(f"{where}: pytest does not collect that name")
                continue
            if not (ROOT / path).is_file():
                problems.append(f"{where}: no such file")
                continue
            fn = find(path, name)
            if fn is None:
                problems.append(f"{where}: no such test in the file")
                continue
            tree = module(path)
            marks = fn.decorator_list + module_marks(tree)
            if row.requirement not in requirement_ids(marks):
                problems.append(f'{where}: add @pytest.mark.requirement("{row.requirement}") to it')
            for skip in unconditional_skips(marks) + _body_skips(fn):
                problems.append(f"{where}: it never runs ({skip})")
    assert problems == []


def test_every_requirement_marker_is_a_row_that_cites_the_test() -> None:
    cited: dict[str, set[str]] = {}
    for row in the_map():
        for test in row.tests:
            cited.setdefault(test, set()).add(row.requirement)
    rows_ids = {r.requirement for r in the_map()}
    problems = []
    for test, ids in sorted(marked_tests().items()):
        for i in sorted(ids - rows_ids):
            problems.append(f"{test} is marked {i!r}, which docs/compliance.md has no row for")
        for i in sorted((ids & rows_ids) - cited.get(test, set())):
            problems.append(f"{test} is marked {i!r} but that row does not cite it")
    assert problems == []


# --------------------------------------------------------------------------- the checker itself


SAMPLE = """\
| id | requirement | provides | must do | asserts | tests |
|---|---|---|---|---|---|
| `FATF-R16-originator` | R.16 | a | b | x | `tests/a/test_x.py::test_one`, `tests/a/test_x.py::test_2` |
| `not an id` | x | x | x | x | `tests/a/test_x.py::test_three` |
| `GDPR-22-human-review` | Art. 22 | alerts | review | opens | `tests/b/test_y.py::TestK::test_k` |
"""


def test_rows_are_read_from_the_tables_first_and_last_cells() -> None:
    assert rows(SAMPLE) == [
        Row("FATF-R16-originator", ("tests/a/test_x.py::test_one", "tests/a/test_x.py::test_2"), 3),
        Row("GDPR-22-human-review", ("tests/b/test_y.py::TestK::test_k",), 5)]


def _decorators(src: str) -> list[ast.expr]:
    fn = ast.parse(src + "def test_f() -> None: ...\n").body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn.decorator_list


@pytest.mark.parametrize(("src", "skips"), [
    ("@pytest.mark.skip(reason='later')\n", ["pytest.mark.skip"]),
    ("@pytest.mark.skip\n", ["pytest.mark.skip"]),
    ("@pytest.mark.xfail(reason='bug')\n", ["pytest.mark.xfail"]),
    ("@pytest.mark.xfail(True, reason='bug')\n", ["pytest.mark.xfail"]),
    ("@pytest.mark.skipif(True, reason='x')\n", ["pytest.mark.skipif"]),
    ("@pytest.mark.skipif(sys.platform == 'win32', reason='x')\n", []),
    ("@pytest.mark.xfail(condition=OLD, reason='x')\n", []),
    ("@pytest.mark.slow\n@pytest.mark.parametrize('a', [1])\n", []),
])
def test_unconditional_skips_and_xfails_are_told_from_conditional_ones(src: str, skips: list[str]) -> None:
    assert unconditional_skips(_decorators(src)) == skips


def test_requirement_ids_are_read_from_stacked_and_multiple_markers() -> None:
    src = '@pytest.mark.requirement("A-1", "B-2")\n@pytest.mark.slow\n@pytest.mark.requirement("C-3")\n'
    assert requirement_ids(_decorators(src)) == ["A-1", "B-2", "C-3"]
    with pytest.raises(AssertionError, match="string literals"):
        requirement_ids(_decorators("@pytest.mark.requirement(NAME)\n"))


# --------------------------------------------------------------------------- the CI hook


class _Item:
    nodeid = "tests/x/test_y.py::test_z"

    def __init__(self, *ids: str) -> None:
        self.ids = ids

    def iter_markers(self, name: str) -> Iterator[pytest.Mark]:
        if name == "requirement" and self.ids:
            yield pytest.mark.requirement(*self.ids).mark


def _run_hook(item: _Item, report: pytest.TestReport) -> pytest.TestReport:
    gen = conftest.pytest_runtest_makereport(item, None)  # type: ignore[arg-type]
    next(gen)
    with pytest.raises(StopIteration) as done:
        gen.send(report)
    result = done.value.value
    assert isinstance(result, pytest.TestReport)
    return result


def _report(outcome: Literal["passed", "skipped"], *, when: Literal["setup", "call"] = "setup",
            wasxfail: str | None = None) -> pytest.TestReport:
    longrepr = ("tests/conftest.py", 40, "Skipped: SEALTRAIL_TEST_POSTGRES_URL is not set") \
        if outcome == "skipped" else None
    r = pytest.TestReport(_Item.nodeid, ("tests/x/test_y.py", 1, "test_z"), {}, outcome, longrepr, when)
    if wasxfail is not None:
        r.wasxfail = wasxfail
    return r


@pytest.mark.parametrize("env", ["CI", "SEALTRAIL_FULL_SUITE"])
def test_under_ci_a_skipped_requirement_test_fails_naming_the_requirement(
        monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SEALTRAIL_FULL_SUITE", raising=False)
    monkeypatch.setenv(env, "1")
    got = _run_hook(_Item("FATF-R16-originator", "TFR-8"), _report("skipped"))
    assert got.outcome == "failed"
    assert "FATF-R16-originator, TFR-8" in str(got.longrepr) and "POSTGRES_URL" in str(got.longrepr)
    got = _run_hook(_Item("GDPR-22-human-review"), _report("skipped", when="call", wasxfail="known bug"))
    assert got.outcome == "failed" and "xfail (known bug)" in str(got.longrepr)
    assert not hasattr(got, "wasxfail")
    passed = _run_hook(_Item("GDPR-22-human-review"), _report("passed", when="call"))
    assert passed.outcome == "passed"


@pytest.mark.parametrize("ci", [None, "", "0", "false"])
def test_outside_ci_or_without_a_requirement_a_skip_stays_a_skip(monkeypatch: pytest.MonkeyPatch,
                                                                 ci: str | None) -> None:
    monkeypatch.delenv("SEALTRAIL_FULL_SUITE", raising=False)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert _run_hook(_Item("FATF-R16-originator"), _report("skipped")).outcome == "skipped"
    monkeypatch.setenv("CI", "true")
    assert _run_hook(_Item(), _report("skipped")).outcome == "skipped"
