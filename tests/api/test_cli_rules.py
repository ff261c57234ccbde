"""``sealtrail rules compile|test|inspect``: the public contract (exit 0 ok, 1 refused/failed)."""

from __future__ import annotations

import json
from pathlib import Path

import wasmtime
from typer.testing import CliRunner

from api.cli import app

ROOT = Path(__file__).parents[2]
PACK = ROOT / "wasm_rules" / "packs" / "aml_core.toml"
CASES = ROOT / "wasm_rules" / "packs" / "aml_core_cases.jsonl"
runner = CliRunner()


def run(*args: str, code: int = 0) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.stdout


def test_compile_then_inspect(tmp_path: Path) -> None:
    out = tmp_path / "aml.wasm"
    doc = json.loads(run("rules", "compile", str(PACK), "-o", str(out), "--json"))
    assert doc["manifest"]["ruleset_id"] == "aml_core" and out.stat().st_size == doc["size"]
    info = json.loads(run("rules", "inspect", str(out), "--json"))
    assert info["sha256"] == doc["sha256"] and info["imports"] == []
    assert {"memory", "evaluate", "abi_version"} <= {e["name"] for e in info["exports"]}
    assert info["manifest"] == doc["manifest"]
    assert "STRUCTURING_ORIG_24H" in run("rules", "inspect", str(out))


def test_pack_cases_pass() -> None:
    doc = json.loads(run("rules", "test", str(PACK), str(CASES), "--json"))
    assert doc["ok"] and doc["failed"] == 0 and doc["cases"] >= 28 and doc["reference_agrees"]


def test_a_failing_case_exits_1_and_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text('{"case": "wrongly expected", "features": {"model_score": 0.99}, '
                   '"expect": {"decision": "ALLOW", "fired": []}}\n')
    doc = json.loads(run("rules", "test", str(PACK), str(bad), "--json", code=1))
    assert doc["failures"][0]["case"] == "wrongly expected"
    assert "MODEL_SCORE_BLOCK" in doc["failures"][0]["why"]
    res = runner.invoke(app, ["rules", "test", str(PACK), str(bad)])
    assert res.exit_code == 1 and "wrongly expected" in res.output


def test_a_refused_rule_exits_1_naming_rule_line_column(tmp_path: Path) -> None:
    pack = tmp_path / "bad.toml"
    pack.write_text(PACK.read_text().replace('"orig_near_threshold_count_24h >= 3 and ',
                                             '"orig_near_threshold_count_24h.bit_length() >= 3 and '))
    doc = json.loads(run("rules", "compile", str(pack), "-o", str(tmp_path / "x.wasm"), "--json",
                         code=1))
    assert doc["error"] == "RuleSyntaxError"
    assert doc["message"].startswith("rule STRUCTURING_ORIG_24H, line 1, column")
    assert not (tmp_path / "x.wasm").exists()


def test_inspect_shows_what_the_sandbox_would_refuse(tmp_path: Path) -> None:
    mod = tmp_path / "wasi.wasm"
    mod.write_bytes(wasmtime.wat2wasm(
        '(module (import "wasi_snapshot_preview1" "proc_exit" (func (param i32))))'))
    info = json.loads(run("rules", "inspect", str(mod), "--json"))
    assert info["imports"] == ["wasi_snapshot_preview1.proc_exit"] and info["manifest"] is None
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"not wasm")
    assert json.loads(run("rules", "inspect", str(junk), "--json", code=1))["ok"] is False
    assert runner.invoke(app, ["rules", "inspect", str(tmp_path / "missing.wasm")]).exit_code == 2
