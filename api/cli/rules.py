"""``sealtrail rules compile|test|inspect``: compile, test and inspect rule modules (a thin face
over wasm_rules). A refused ruleset, cases file or module exits 1.

Files are read up to the rule layer's own limits (``MAX_RULESET_BYTES``, ``MAX_CASES_BYTES``,
the sandbox's module size), never whole before the check. ``wasm_rules``, wasmtime and numpy
are imported in the command bodies so that ``sealtrail --help`` does not load them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import JsonOpt, emit, emit_failed, err, out

__all__ = ["read_capped", "rules_app"]

rules_app = typer.Typer(no_args_is_help=True, help="Compile, test and inspect rule modules.")

FileArg = Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)]


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, or ``RulesetError`` naming the limit if it holds more than ``limit``."""
    from wasm_rules.errors import RulesetError

    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise RulesetError(f"{path}: the {what} is over {limit:,} bytes (the limit)")
    return data


@rules_app.command("compile")
def rules_compile(
    pack: FileArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="where to write the module")],
    as_json: JsonOpt = False,
) -> None:
    """Compile a ruleset TOML into an ABI v1 WebAssembly module."""
    from wasm_rules import compile_ruleset, manifest_of, parse_ruleset
    from wasm_rules.language import MAX_RULESET_BYTES

    ruleset = parse_ruleset(read_capped(pack, MAX_RULESET_BYTES, "ruleset"))
    module = compile_ruleset(ruleset)
    output.write_bytes(module)
    doc = {"module": str(output), "sha256": hashlib.sha256(module).hexdigest(),
           "size": len(module), "manifest": manifest_of(ruleset)}
    emit(doc, as_json, lambda: out.print(
        f"{output}: {len(module):,} bytes, sha256 {doc['sha256']}\n"
        f"ruleset {ruleset.id} {ruleset.version}: {len(ruleset.rules)} rules over "
        f"{len(ruleset.features)} features", markup=False))


@rules_app.command("test")
def rules_test(pack: FileArg, cases: FileArg, as_json: JsonOpt = False) -> None:
    """Run a pack's cases through the compiled module in the sandbox (and the reference)."""
    import numpy as np

    from wasm_rules import Sandbox, compile_ruleset, parse_ruleset
    from wasm_rules.cases import MAX_CASES_BYTES, check_cases, parse_cases, rows_of
    from wasm_rules.language import MAX_RULESET_BYTES
    from wasm_rules.reference import evaluate_rows

    ruleset = parse_ruleset(read_capped(pack, MAX_RULESET_BYTES, "ruleset"))
    module = compile_ruleset(ruleset)
    parsed = parse_cases(read_capped(cases, MAX_CASES_BYTES, "cases file"), ruleset.features,
                         {r.id for r in ruleset.rules})
    rows = rows_of(parsed, ruleset.features)
    with Sandbox() as sb, sb.load(module) as mod:
        batch = mod.evaluate(rows)
        results = check_cases(parsed, batch, mod.manifest)
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
    if failed or not agree:
        doc |= {"error": "cases_failed", "message": f"{len(failed)} of {len(results)} case(s) failed"
                + ("" if agree else "; the reference evaluator disagrees with the module")}

    def human() -> None:
        for r in failed:
            err.print(f"FAIL line {r.case.line} {r.case.name!r}: {r.explain()}", markup=False)
        if not agree:
            err.print("FAIL the reference evaluator disagrees with the module", markup=False)
        out.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")

    if failed or not agree:
        emit_failed(doc, as_json, human)
    emit(doc, as_json, human)


@rules_app.command("inspect")
def rules_inspect(
    module: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                           help="a module: WebAssembly binary, or text (.wat)")],
    as_json: JsonOpt = False,
) -> None:
    """Show a module's manifest, exports, imports, size and SHA-256 (without running it).

    A module in the text format (``.wat``) is encoded first, as the sandbox would need it; the
    size and SHA-256 are then those of the encoded binary (``"encoded_from": "wat"``)."""
    import wasmtime

    from wasm_rules import RuleError
    from wasm_rules.binary import custom_sections
    from wasm_rules.compiler import MAX_MODULE_BYTES
    from wasm_rules.errors import ModuleRejectedError
    from wasm_rules.sandbox import Manifest

    data = read_capped(module, MAX_MODULE_BYTES, "module")
    encoded_from = None
    if not data.startswith(b"\0asm"):
        try:
            data = bytes(wasmtime.wat2wasm(data.decode("utf-8")))
        except (UnicodeDecodeError, wasmtime.WasmtimeError) as exc:
            raise ModuleRejectedError(f"{module}: neither a WebAssembly binary module nor WebAssembly "
                                      f"text: {str(exc).splitlines()[0] if str(exc) else exc}") from None
        encoded_from = "wat"
    try:
        wm = wasmtime.Module(wasmtime.Engine(), data)
        sections = sorted(custom_sections(data))
    except wasmtime.WasmtimeError as exc:
        raise ModuleRejectedError(f"not a valid WebAssembly module: {exc}") from None
    try:
        manifest: dict[str, Any] | None = Manifest.from_module(data).raw
        problem = None
    except RuleError as exc:
        manifest, problem = None, str(exc)
    doc: dict[str, Any] = {
        "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
        "imports": [f"{i.module}.{i.name}" for i in wm.imports],
        "exports": [{"name": e.name, "kind": type(e.type).__name__} for e in wm.exports],
        "custom_sections": sections, "manifest": manifest, "manifest_problem": problem,
        "encoded_from": encoded_from,
    }

    def human() -> None:
        out.print(f"sha256   {doc['sha256']}" + ("  (of the encoded .wat)" if encoded_from else "")
                  + f"\nsize     {len(data):,} bytes")
        out.print(f"imports  {', '.join(doc['imports']) or 'none'}", markup=False)
        out.print(f"exports  {', '.join(e['name'] for e in doc['exports'])}", markup=False)
        if manifest:
            out.print(f"ruleset  {manifest['ruleset_id']} {manifest['version']} "
                      f"({manifest.get('compiler', '?')}), source sha256 "
                      f"{manifest.get('source_sha256', '?')}", markup=False)
            for r in manifest["rules"]:
                out.print(f"  {r['id']:<36} {r['outcome']:<7} {r['reason']}", markup=False)
        else:
            out.print(f"manifest missing or malformed: {problem}", markup=False)

    emit(doc, as_json, human)
