"""Hostile guests, ABI checks and lifetimes: the host never crashes, every fault is named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import wasmtime

from tests.wasm_rules.guests import GOOD_EVALUATE, MANIFEST, guest
from wasm_rules import (
    AbiError,
    DeadlineError,
    FuelExhaustedError,
    ModuleRejectedError,
    RuleError,
    Sandbox,
    SandboxLimits,
    TrapError,
)

ROWS = np.array([[1.0], [-1.0], [0.5], [np.nan]])
LOOP = """
  (func (export "evaluate") (param $n i32) (result i32)
    (loop $forever (br $forever))
    (i32.const 0))
"""


@pytest.fixture
def sandbox() -> Sandbox:
    with Sandbox(SandboxLimits(deadline_ms=200)) as sb:
        yield sb  # type: ignore[misc]


def test_a_well_behaved_guest_runs_and_is_reused(sandbox: Sandbox) -> None:
    mod = sandbox.load(guest())
    for _ in range(3):
        res = mod.evaluate(ROWS)
        assert res.outcomes.tolist() == [2, 0, 2, 0]
        assert res.fired[:, 0].tolist() == [1, 0, 1, 0]
        assert res.fuel_used > 0
    assert res.fired_rules(0, mod.manifest) == ["X_POSITIVE"]
    big = np.linspace(-1, 1, 1000).reshape(-1, 1)  # more rows than max_rows: several calls
    assert mod.evaluate(big).outcomes.tolist() == [2 if v > 0 else 0 for v in big[:, 0]]


def test_infinite_loop_runs_out_of_fuel_and_the_next_batch_works(sandbox: Sandbox) -> None:
    mod = sandbox.load(guest(LOOP))
    with pytest.raises(FuelExhaustedError, match="fuel"):
        mod.evaluate(ROWS)
    good = sandbox.load(guest())
    assert good.evaluate(ROWS).outcomes.tolist() == [2, 0, 2, 0]


def test_infinite_loop_with_ample_fuel_hits_the_wall_clock_deadline() -> None:
    limits = SandboxLimits(fuel_base=10**15, fuel_per_row=0, deadline_ms=100)
    with Sandbox(limits) as sb:
        mod = sb.load(guest(LOOP))
        with pytest.raises(DeadlineError, match="deadline"):
            mod.evaluate(ROWS)


def test_memory_grow_bomb_is_capped() -> None:
    bomb = """
  (func (export "evaluate") (param $n i32) (result i32)
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable)
"""
    limits = SandboxLimits(memory_bytes=4 * 1024 * 1024)
    with Sandbox(limits) as sb:
        mod = sb.load(guest(bomb, memory='(memory (export "memory") 1)'))
        with pytest.raises(TrapError, match="UNREACHABLE"):
            mod.evaluate(ROWS)
        memory_too_big = guest(memory='(memory (export "memory") 200 200)')  # 12.5 MiB
        with pytest.raises(ModuleRejectedError, match="cannot start"):
            sb.load(memory_too_big)


@pytest.mark.parametrize("body, code", [  # each must trap with its own code
    ("(i64.store (i32.const 70000) (i64.const 1)) (i32.const 0)", "MEMORY_OUT_OF_BOUNDS"),
    ("unreachable", "UNREACHABLE"),
    ("(drop (i32.div_u (i32.const 1) (i32.sub (local.get $n) (local.get $n)))) (i32.const 0)",
     "INTEGER_DIVISION_BY_ZERO"),
])
def test_traps_are_named(sandbox: Sandbox, body: str, code: str) -> None:
    mod = sandbox.load(guest(f'(func (export "evaluate") (param $n i32) (result i32) {body})'))
    with pytest.raises(TrapError, match=code):
        mod.evaluate(ROWS)


def test_wrong_abi_version_is_refused(sandbox: Sandbox) -> None:
    with pytest.raises(AbiError, match="ABI 2"):
        sandbox.load(guest(abi=2))
    manifest = {**MANIFEST, "abi": 7}
    with pytest.raises(AbiError, match="manifest declares ABI 7"):
        sandbox.load(guest(manifest=manifest))


@pytest.mark.parametrize("getters, evaluate, match", [
    ({"n_rules": "(param i32) (result i32) (i32.const 1)"}, None, "'n_rules' must be"),
    ({"max_rows": "(result i64) (i64.const 1)"}, None, "'max_rows' must be"),
    ({}, '(func (export "evaluate") (param f64) (result i32) (i32.const 0))', "'evaluate' must"),
    ({}, '(func (export "evaluate") (param i32))', "'evaluate' must"),
    ({}, '(func (export "run") (param i32) (result i32) (i32.const 0))', "'evaluate' must"),
])
def test_wrong_export_signatures_are_refused(
    sandbox: Sandbox, getters: dict[str, str], evaluate: str | None, match: str
) -> None:
    kwargs = {"evaluate": evaluate} if evaluate else {}
    with pytest.raises(AbiError, match=match):
        sandbox.load(guest(getters=getters, **kwargs))  # type: ignore[arg-type]


def test_layout_and_manifest_lies_are_refused(sandbox: Sandbox) -> None:
    with pytest.raises(AbiError, match="overlap"):
        sandbox.load(guest(getters={"outcome_ptr": "100"}))
    with pytest.raises(AbiError, match="do not fit"):
        sandbox.load(guest(getters={"fired_ptr": "65000"}))
    with pytest.raises(AbiError, match="disagree with its manifest"):
        sandbox.load(guest(getters={"n_rules": "3"}))
    with pytest.raises(AbiError, match="custom section"):
        sandbox.load(guest(with_manifest=False))


def test_a_wasi_import_is_refused(sandbox: Sandbox) -> None:
    wasi = ('(import "wasi_snapshot_preview1" "fd_write" '
            "(func (param i32 i32 i32 i32) (result i32)))")
    with pytest.raises(ModuleRejectedError, match=r"wasi_snapshot_preview1\.fd_write"):
        sandbox.load(guest(imports=wasi))
    with pytest.raises(ModuleRejectedError, match=r"env\.clock"):
        sandbox.load(guest(imports='(import "env" "clock" (func (result i64)))'))


def test_a_50_mb_module_is_refused_before_compiling(sandbox: Sandbox) -> None:
    huge = guest(extra=f'(data (i32.const 0) "{"A" * 64}")')
    padded = huge + b"\x00" + b"\x80\x80\x80\x19" + b"\x04pad" + bytes(50 * 1024 * 1024)
    with pytest.raises(ModuleRejectedError, match="more than the"):
        sandbox.load(padded)
    with pytest.raises(ModuleRejectedError, match="not a valid WebAssembly"):
        sandbox.load(b"\x00asm\x01\x00\x00\x00garbage")


def test_writing_outside_the_result_area_is_caught(sandbox: Sandbox) -> None:
    scribble = good_with("(f64.store (i32.const 64) (f64.const 42))")
    mod = sandbox.load(guest(scribble))
    with pytest.raises(AbiError, match="input rows"):
        mod.evaluate(ROWS)
    lying = good_with("(i32.store8 (i32.const 8193) (i32.const 3))")  # BLOCK, no rule fired
    with pytest.raises(AbiError, match="highest outcome"):
        sandbox.load(guest(lying)).evaluate(ROWS)
    stray_bits = good_with("(i64.store (i32.const 9216) (i64.const 6))")
    with pytest.raises(AbiError, match="beyond its rule count"):
        sandbox.load(guest(stray_bits)).evaluate(ROWS)
    nonzero = '(func (export "evaluate") (param $n i32) (result i32) (i32.const 5))'
    with pytest.raises(AbiError, match="returned 5"):
        sandbox.load(guest(nonzero)).evaluate(ROWS)


def good_with(tail: str) -> str:
    """The well-behaved evaluate with ``tail`` run just before it returns."""
    return GOOD_EVALUATE.replace("    (i32.const 0))\n", f"    {tail}\n    (i32.const 0))\n")


def test_lifetimes_and_bad_rows(sandbox: Sandbox) -> None:
    mod = sandbox.load(guest())
    with pytest.raises(RuleError, match=r"shape \(n, 1\)"):
        mod.evaluate(np.zeros((3, 2)))
    mod.close()
    with pytest.raises(RuleError, match="closed"):
        mod.evaluate(ROWS)
    sandbox.close()
    with pytest.raises(RuleError, match="closed"):
        sandbox.load(guest())


def test_the_hand_written_wat_example_is_accepted() -> None:
    wat = Path(__file__).parents[2] / "wasm_rules" / "examples" / "threshold.wat"
    with Sandbox() as sb, sb.load(bytes(wasmtime.wat2wasm(wat.read_text()))) as mod:
        res = mod.evaluate(np.array([[5000, 0.1], [20000, 0.1], [20000, 0.95], [np.nan, 0.95]]))
        assert res.outcomes.tolist() == [0, 1, 2, 2]
        assert [res.fired_rules(i, mod.manifest) for i in range(4)] == [
            [], ["LARGE_AMOUNT"], ["LARGE_AMOUNT", "HIGH_SCORE"], ["HIGH_SCORE"]]
