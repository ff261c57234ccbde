"""Rule IR -> WebAssembly (ABI v1). Emits WAT, assembles it with wasmtime, and appends the
manifest as a custom section. Pure: the same ruleset source gives byte-identical modules.

ABI v1 (see docs/rules.md, "Rule module ABI v1"): the module imports nothing and exports
``memory``, ``abi_version() -> i32`` (1), ``n_features``, ``n_rules``, ``max_rows``,
``input_ptr``, ``outcome_ptr``, ``fired_ptr`` (all ``() -> i32``) and ``evaluate(n: i32) ->
i32``, which reads ``n`` rows of little-endian f64 features at ``input_ptr`` and writes one
outcome byte per row at ``outcome_ptr`` and ``ceil(n_rules / 64)`` little-endian u64
fired-rule words per row at ``fired_ptr`` (bit k of the row's words = rule k fired);
it returns 0, or nonzero if ``n > max_rows``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from importlib.metadata import version

import orjson
import wasmtime

from wasm_rules.errors import RulesetError
from wasm_rules.language import (
    Arith,
    BoolOp,
    Call,
    Compare,
    Const,
    Expr,
    Feature,
    InSet,
    Neg,
    Not,
    Ruleset,
)

__all__ = ["ABI_VERSION", "COMPILER", "MANIFEST_SECTION", "MAX_ROWS", "compile_ruleset",
           "manifest_of"]

ABI_VERSION = 1
COMPILER = f"sealtrail-wasm_rules/1 (wasmtime {version('wasmtime')} wat2wasm)"
MAX_FUEL_PER_ROW = 20_000  # = SandboxLimits.fuel_per_row
MAX_MODULE_BYTES = 8 * 1024 * 1024  # = SandboxLimits.max_module_bytes
MANIFEST_SECTION = "sealtrail.manifest.v1"
MAX_ROWS = 4096
_PAGE = 65536
_BASE = 64


def _align(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to


def _f64(v: float) -> str:
    # Exact bits, never a decimal round trip: f64.const accepts hex floats, but reinterpret
    # of an i64 literal is the simplest byte-exact form for every value including -0.0.
    bits = struct.unpack("<q", struct.pack("<d", v))[0]
    return f"(f64.reinterpret_i64 (i64.const {bits}))"


@dataclass
class _Emitter:
    temps: int = 0
    lines: list[str] = field(default_factory=list)

    def temp(self) -> str:
        self.temps += 1
        return f"$t{self.temps - 1}"

    def num(self, e: Expr) -> str:
        if isinstance(e, Const):
            return _f64(e.value)
        if isinstance(e, Feature):
            return f"(f64.load offset={e.index * 8} (local.get $row))"
        if isinstance(e, Neg):
            return f"(f64.neg {self.num(e.operand)})"
        if isinstance(e, Arith):
            op = {"+": "add", "-": "sub", "*": "mul", "/": "div"}[e.op]
            return f"(f64.{op} {self.num(e.left)} {self.num(e.right)})"
        if isinstance(e, Call):
            if e.fn == "abs":
                return f"(f64.abs {self.num(e.args[0])})"
            acc = self.num(e.args[0])
            for a in e.args[1:]:
                acc = f"(f64.{e.fn} {acc} {self.num(a)})"
            return acc
        raise TypeError(f"not a number expression: {e!r}")

    def cond(self, e: Expr) -> str:
        if isinstance(e, Compare):
            if e.op == "!=":  # false with NaN: (a < b) or (a > b)
                a, b = self.temp(), self.temp()
                return (f"(i32.or (f64.lt (local.tee {a} {self.num(e.left)}) "
                        f"(local.tee {b} {self.num(e.right)})) "
                        f"(f64.gt (local.get {a}) (local.get {b})))")
            op = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq"}[e.op]
            return f"(f64.{op} {self.num(e.left)} {self.num(e.right)})"
        if isinstance(e, InSet):
            if not e.values:
                return "(i32.const 0)"
            x = self.temp()
            parts = [f"(f64.eq (local.tee {x} {self.num(e.operand)}) {_f64(e.values[0])})"]
            parts += [f"(f64.eq (local.get {x}) {_f64(v)})" for v in e.values[1:]]
            return _fold("i32.or", parts)
        if isinstance(e, BoolOp):
            return _fold("i32.and" if e.op == "and" else "i32.or",
                         [self.cond(x) for x in e.operands])
        if isinstance(e, Not):
            return f"(i32.eqz {self.cond(e.operand)})"
        raise TypeError(f"not a condition: {e!r}")


def _fold(op: str, parts: list[str]) -> str:
    acc = parts[0]
    for p in parts[1:]:
        acc = f"({op} {acc} {p})"
    return acc


def manifest_of(ruleset: Ruleset) -> dict[str, object]:
    """What a compiled module says about itself (canonical JSON in its custom section)."""
    return {
        "abi": ABI_VERSION,
        "compiler": COMPILER,
        "ruleset_id": ruleset.id,
        "version": ruleset.version,
        "description": ruleset.description,
        "features": list(ruleset.features),
        "feature_tables": dict(ruleset.feature_tables),
        "rules": [{"id": r.id, "outcome": r.outcome, "reason": r.reason,
                   "severity": r.severity, "when": r.when} for r in ruleset.rules],
        "source_sha256": ruleset.source_sha256,
    }


def _wat(ruleset: Ruleset, manifest: bytes) -> str:
    n_feat, n_rules = len(ruleset.features), len(ruleset.rules)
    words = (n_rules + 63) // 64
    inp = _BASE
    out = _align(inp + MAX_ROWS * n_feat * 8)
    fired = _align(out + MAX_ROWS)
    pages = (_align(fired + MAX_ROWS * words * 8, _PAGE)) // _PAGE
    em = _Emitter()
    body: list[str] = []
    most_temps = 0
    for k, rule in enumerate(ruleset.rules):
        em.temps = 0  # scratch locals are reused from rule to rule
        w, bit = divmod(k, 64)
        mask = struct.unpack("<q", struct.pack("<Q", 1 << bit))[0]
        code = rule.outcome_code
        raise_best = (f"(local.set $best (select (i32.const {code}) (local.get $best) "
                      f"(i32.gt_u (i32.const {code}) (local.get $best))))") if code else ""
        cond = em.cond(rule.expr)
        most_temps = max(most_temps, em.temps)
        body.append(f"      (if {cond} (then "
                    f"(local.set $w{w} (i64.or (local.get $w{w}) (i64.const {mask}))) "
                    f"{raise_best}))")
    locals_ = " ".join([f"(local $w{j} i64)" for j in range(words)]
                       + [f"(local $t{j} f64)" for j in range(most_temps)])
    resets = "\n".join(f"      (local.set $w{j} (i64.const 0))" for j in range(words))
    stores = "\n".join(
        f"      (i64.store offset={j * 8} (local.get $out) (local.get $w{j}))" for j in range(words))
    escaped = "".join(f"\\{b:02x}" for b in manifest)
    rules_code = "\n".join(body)
    return f"""(module
  (@custom "{MANIFEST_SECTION}" "{escaped}")
  (memory (export "memory") {pages} {pages})
  (func (export "abi_version") (result i32) (i32.const {ABI_VERSION}))
  (func (export "n_features") (result i32) (i32.const {n_feat}))
  (func (export "n_rules") (result i32) (i32.const {n_rules}))
  (func (export "max_rows") (result i32) (i32.const {MAX_ROWS}))
  (func (export "input_ptr") (result i32) (i32.const {inp}))
  (func (export "outcome_ptr") (result i32) (i32.const {out}))
  (func (export "fired_ptr") (result i32) (i32.const {fired}))
  (func (export "evaluate") (param $n i32) (result i32)
    (local $i i32) (local $row i32) (local $out i32) (local $best i32) {locals_}
    (if (i32.gt_u (local.get $n) (i32.const {MAX_ROWS})) (then (return (i32.const 1))))
    (local.set $row (i32.const {inp}))
    (local.set $out (i32.const {fired}))
    (block $done
      (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $best (i32.const 0))
{resets}
{rules_code}
      (i32.store8 (i32.add (i32.const {out}) (local.get $i)) (local.get $best))
{stores}
      (local.set $row (i32.add (local.get $row) (i32.const {n_feat * 8})))
      (local.set $out (i32.add (local.get $out) (i32.const {words * 8})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (i32.const 0)))
"""


def compile_ruleset(ruleset: Ruleset, *, max_fuel_per_row: int = MAX_FUEL_PER_ROW) -> bytes:
    """The ABI v1 module for ``ruleset``; its SHA-256 is the module's identity.

    Refused (``RulesetError``) when one row could cost more than ``max_fuel_per_row``
    instructions: a pack must not decide one way alone and fail-safe in a batch."""
    manifest = orjson.dumps(manifest_of(ruleset), option=orjson.OPT_SORT_KEYS)
    wat = _wat(ruleset, manifest)
    loop = wat[wat.index("(loop $next"):]
    per_row = loop.count("(") + 16  # every instruction of the loop body, plus its bookkeeping
    if per_row > max_fuel_per_row:
        raise RulesetError(
            f"ruleset {ruleset.id} costs about {per_row:,} instructions a row, more than the "
            f"sandbox's per-row fuel of {max_fuel_per_row:,}; split it or simplify its rules")
    module = bytes(wasmtime.wat2wasm(wat))
    if len(module) > MAX_MODULE_BYTES:
        raise RulesetError(f"ruleset {ruleset.id} compiles to {len(module):,} bytes, more than "
                           f"the sandbox accepts ({MAX_MODULE_BYTES:,})")
    return module
