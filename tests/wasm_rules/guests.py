"""Inline WAT guests for the sandbox tests: one well-behaved ABI v1 module to start from,
and a way to swap in hostile parts."""

from __future__ import annotations

import orjson
import wasmtime

MANIFEST = {
    "abi": 1, "compiler": "test", "description": "", "feature_tables": {},
    "features": ["x"], "ruleset_id": "guest", "source_sha256": "", "version": "1",
    "rules": [{"id": "X_POSITIVE", "outcome": "HOLD", "reason": "x > 0", "severity": "low",
               "when": "x > 0"}],
}

GOOD_EVALUATE = """
  (func (export "evaluate") (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (if (f64.gt (f64.load (i32.add (i32.const 64) (i32.shl (local.get $i) (i32.const 3))))
                  (f64.const 0))
        (then
          (i32.store8 (i32.add (i32.const 8192) (local.get $i)) (i32.const 2))
          (i64.store (i32.add (i32.const 9216) (i32.shl (local.get $i) (i32.const 3)))
                     (i64.const 1)))
        (else
          (i32.store8 (i32.add (i32.const 8192) (local.get $i)) (i32.const 0))
          (i64.store (i32.add (i32.const 9216) (i32.shl (local.get $i) (i32.const 3)))
                     (i64.const 0))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (i32.const 0))
"""


def guest(
    evaluate: str = GOOD_EVALUATE,
    *,
    abi: int = 1,
    imports: str = "",
    memory: str = '(memory (export "memory") 1 1)',
    extra: str = "",
    manifest: dict[str, object] | None = None,
    getters: dict[str, str] | None = None,
    with_manifest: bool = True,
) -> bytes:
    """An ABI v1 module with one feature ``x`` and one rule (x > 0 -> HOLD), 128 rows max."""
    text = orjson.dumps(manifest or MANIFEST).decode()
    escaped = "".join(f"\\{b:02x}" for b in text.encode())
    values = {"abi_version": str(abi), "n_features": "1", "n_rules": "1", "max_rows": "128",
              "input_ptr": "64", "outcome_ptr": "8192", "fired_ptr": "9216", **(getters or {})}
    funcs = "\n".join(
        f'  (func (export "{k}") (result i32) (i32.const {v}))' if v.lstrip("-").isdigit()
        else f'  (func (export "{k}") {v})' for k, v in values.items())
    wat = f"""(module
  {imports}
  {f'(@custom "sealtrail.manifest.v1" "{escaped}")' if with_manifest else ""}
  {memory}
{funcs}
{evaluate}
{extra})"""
    return bytes(wasmtime.wat2wasm(wat))
