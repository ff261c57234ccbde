"""``sealtrail rules ...``: compile, test and inspect rule modules (a thin face over wasm_rules)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import orjson
import typer
import wasmtime

from api.output import JsonOpt, emit, err, out
from wasm_rules import RuleError, Sandbox, compile_ruleset, manifest_of, parse_ruleset
from wasm_rules.binary import custom_sections
from wasm_rules.cases import check_cases, parse_cases, rows_of
from wasm_rules.reference import evaluate_rows
from wasm_rules.sandbox import Manifest

rules_app = typer.Typer(no_args_is_help=True, help="Compile, test and inspect rule modules.")

FileArg = Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)]


def _refuse(exc: Exception, as_json: bool) -> None:
    if as_json:
        doc = {"ok": False, "error": type(exc).__name__, "message": str(exc)}
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    err.print(f"error: {exc}", markup=False)
    raise typer.Exit(1)


@rules_app.command("compile")
def rules_compile(
    pack: FileArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="where to write the module")],
    as_json: JsonOpt = False,
) -> None:
    """Compile a ruleset TOML into an ABI v1 WebAssembly module."""
    try:
        ruleset = parse_ruleset(pack.read_bytes())
        module = compile_ruleset(ruleset)
    except RuleError as exc:
        _refuse(exc, as_json)
        return
    output.write_bytes(module)
    doc = {"module": str(output), "sha256": hashlib.sha256(module).hexdigest(),
           "size": len(module), "manifest": manifest_of(ruleset)}
    emit(doc, as_json, lambda: out.print(
        f"{output}: {len(module):,} bytes, sha256 {doc['sha256']}\n"
        f"ruleset {ruleset.id} {ruleset.version}: {len(ruleset.rules)} rules over "
        f"{len(ruleset.features)} features"))


@rules_app.command("test")
def rules_test(pack: FileArg, cases: FileArg, as_json: JsonOpt = False) -> None:
    """Run a pack's cases through the compiled module in the sandbox (and the reference)."""
    try:
        ruleset = parse_ruleset(pack.read_bytes())
        module = compile_ruleset(ruleset)
        parsed = parse_cases(cases.read_bytes(), ruleset.features, {r.id for r in ruleset.rules})
        rows = rows_of(parsed, ruleset.features)
        with Sandbox() as sb, sb.load(module) as mod:
            batch = mod.evaluate(rows)
            results = check_cases(parsed, batch, mod.manifest)
    except RuleError as exc:
        _refuse(exc, as_json)
        return
    ref_out, ref_fired = evaluate_rows(ruleset, rows)  # the same rows, outside the sandbox
    agree = bool(np.array_equal(ref_out, batch.outcomes) and np.array_equal(ref_fired, batch.fired))
    failed = [r for r in results if not r.ok]
    doc: dict[str, Any] = {
        "ok": not failed and agree, "cases": len(results), "failed": len(failed),
        "reference_agrees": agree,
        "failures": [{"line": r.case.line, "case": r.case.name, "decision": r.decision,
                      "fired": sorted(r.fired), "expected_decision": r.case.decision,
                      "expected_fired": sorted(r.case.fired), "why": r.explain()}
                     for r in failed],
    }

    def human() -> None:
        for r in failed:
            err.print(f"FAIL line {r.case.line} {r.case.name!r}: {r.explain()}", markup=False)
        if not agree:
            err.print("FAIL the reference evaluator disagrees with the module", markup=False)
        out.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")

    emit(doc, as_json, human)
    if failed or not agree:
        raise typer.Exit(1)


@rules_app.command("inspect")
def rules_inspect(module: FileArg, as_json: JsonOpt = False) -> None:
    """Show a module's manifest, exports, imports, size and SHA-256 (without running it)."""
    data = module.read_bytes()
    try:
        wm = wasmtime.Module(wasmtime.Engine(), data)
    except wasmtime.WasmtimeError as exc:
        _refuse(RuleError(f"not a valid WebAssembly module: {exc}"), as_json)
        return
    try:
        manifest: dict[str, Any] | None = Manifest.from_module(data).raw
        problem = None
    except RuleError as exc:
        manifest, problem = None, str(exc)
    doc: dict[str, Any] = {
        "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
        "imports": [f"{i.module}.{i.name}" for i in wm.imports],
        "exports": [{"name": e.name, "kind": type(e.type).__name__} for e in wm.exports],
        "custom_sections": sorted(custom_sections(data)), "manifest": manifest,
        "manifest_problem": problem,
    }

    def human() -> None:
        out.print(f"sha256   {doc['sha256']}\nsize     {len(data):,} bytes")
        out.print(f"imports  {', '.join(doc['imports']) or 'none'}")
        out.print(f"exports  {', '.join(e['name'] for e in doc['exports'])}")
        if manifest:
            out.print(f"ruleset  {manifest['ruleset_id']} {manifest['version']} "
                      f"({manifest.get('compiler', '?')}), source sha256 "
                      f"{manifest.get('source_sha256', '?')}")
            for r in manifest["rules"]:
                out.print(f"  {r['id']:<36} {r['outcome']:<7} {r['reason']}", markup=False)
        else:
            out.print(f"manifest missing or malformed: {problem}")

    emit(doc, as_json, human)
