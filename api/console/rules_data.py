"""What the rules pages show beyond a ruleset's view: its recorded source, refusals as inline
errors, who may approve, and its test cases re-run on the recorded module (writing nothing).

The rules pages call ``audit.governance.service`` for every step; this module only reads (the proposal
record, the shipped packs) and runs cases in a short-lived sandbox, so the ledger is untouched.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.auth import Caller
from audit.errors import CasesFailedError, GovernanceError, RulesetRefusedError
from audit.governance import service as gov
from wasm_rules import RuleError, Sandbox
from wasm_rules.cases import check_cases, parse_cases, rows_of

__all__ = ["PACKS", "Approval", "CaseRow", "CaseRun", "approval", "compile_errors", "file_line",
           "run_cases", "shipped_cases"]

PACKS = Path(gov.DEFAULT_PACK).parent
MAX_CASES = 10_000  # a run is a page view's work: bounded
_WHEN = re.compile(r"\s*when\s*=\s*(\"\"\"|''')?\s*$")


def shipped_cases(view: gov.RulesetView) -> tuple[str, str] | None:
    """(name, text) of the shipped cases file whose SHA-256 the ruleset's proposal recorded, if any."""
    if view.cases is None:
        return None
    for path in sorted(PACKS.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8")
        if hashlib.sha256(text.encode()).hexdigest() == view.cases.get("sha256"):
            return f"wasm_rules/packs/{path.name}", text
    return None


def file_line(source: str, rule_id: str, line: int) -> int | None:
    """The line of ``source`` holding line ``line`` of rule ``rule_id``'s ``when`` expression
    (the compiler counts within the expression); None when the rule cannot be found."""
    try:  # the compiler may name the line after the last (an expression cut short): clamp to it
        rules = tomllib.loads(source).get("rules", [])
        when = next(str(r["when"]) for r in rules if isinstance(r, dict) and r.get("id") == rule_id)
        line = max(1, min(line, when.count("\n") + 1))
    except (tomllib.TOMLDecodeError, RecursionError, StopIteration, KeyError):
        return None  # (RecursionError: unreachable, the source passed MAX_TOML_NESTING to get here)
    lines = source.splitlines()
    ident = re.compile(rf"\s*id\s*=\s*([\"']){re.escape(rule_id)}\1\s*(#.*)?$")
    start = next((i for i, text in enumerate(lines) if ident.match(text)), None)
    if start is None:
        return None
    for i in range(start + 1, len(lines)):
        if lines[i].lstrip().startswith("[["):
            return None
        if lines[i].lstrip().startswith("when"):
            bare_opening = _WHEN.match(lines[i]) is not None  # the expression starts on the next line
            return i + line + (1 if bare_opening else 0)
    return None


def compile_errors(exc: GovernanceError, source: str) -> list[dict[str, Any]]:
    """A refusal as rows a person can act on: rule, line (in the file when it can be placed)
    and message; failed test cases one row each."""
    if isinstance(exc, CasesFailedError):
        return [{"rule": None, "line": f.get("line"), "where": "cases", "column": None,
                 "message": f"case {f.get('case')!r}: {f.get('why')}" if f.get("case") else str(f.get("why"))}
                for f in exc.failures[:50]]
    if isinstance(exc, RulesetRefusedError) and exc.rule_id is not None and exc.line is not None:
        at = file_line(source, exc.rule_id, exc.line)
        return [{"rule": exc.rule_id, "line": at if at is not None else exc.line,
                 "where": "source" if at is not None else "when expression", "column": exc.column,
                 "message": str(exc)}]
    field = getattr(exc, "field", None)
    return [{"rule": getattr(exc, "rule_id", None), "line": getattr(exc, "line", None),
             "where": f"source.{field}" if field else "source",
             "column": getattr(exc, "column", None), "message": str(exc)}]


@dataclass(frozen=True)
class Approval:
    """Whether the caller sees the Approve button, and why not when it is the proposer."""

    show: bool
    is_proposer: bool


def approval(caller: Caller, view: gov.RulesetView, may_approve: bool) -> Approval:
    """Four-eyes on the page: only a proposed ruleset, only an approver, never its proposer
    (same certificate or same subject, as governance decides); the server refuses it anyway."""
    proposer = {"subject": view.proposed.subject, "fingerprint_sha256": view.proposed.fingerprint_sha256,
                "spki_sha256": view.proposed.spki_sha256}
    mine = not view.bootstrapped and gov.same_person(proposer, gov.recorded_principal(caller.principal))
    return Approval(may_approve and view.status == "proposed" and not view.bootstrapped and not mine, mine)


@dataclass(frozen=True)
class CaseRow:
    line: int
    name: str
    ok: bool
    expected: str
    got: str
    expected_fired: tuple[str, ...]
    fired: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class CaseRun:
    """The cases as run on the ruleset's recorded module: one row each, and the file's SHA-256."""

    rows: tuple[CaseRow, ...]
    sha256: str
    recorded_sha256: str | None

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.rows)

    @property
    def same_file(self) -> bool:
        return self.recorded_sha256 is not None and self.sha256 == self.recorded_sha256


def run_cases(module: bytes, text: str, recorded_sha256: str | None) -> CaseRun:
    """Run ``text`` (cases JSONL) on ``module`` in a fresh sandbox; ``RuleError`` if the file
    does not parse against the module's features and rules. Nothing is recorded."""
    with Sandbox() as sb, sb.load(module) as mod:
        m = mod.manifest
        cases = parse_cases(text, m.features, {r.id for r in m.rules})
        if len(cases) > MAX_CASES:
            raise RuleError(f"{len(cases):,} cases; the console runs at most {MAX_CASES:,} at a time")
        results = check_cases(cases, mod.evaluate(rows_of(cases, m.features)), m)
    rows = tuple(CaseRow(r.case.line, r.case.name, r.ok, r.case.decision, r.decision,
                         tuple(sorted(r.case.fired)), tuple(sorted(r.fired)), r.explain()) for r in results)
    return CaseRun(rows, hashlib.sha256(text.encode()).hexdigest(), recorded_sha256)
