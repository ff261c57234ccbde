"""wasm_rules: a rule language compiled to WebAssembly and a wasmtime sandbox that runs it.

Knows nothing of the ledger or inference: feature rows (float64) in, outcomes and fired-rule
bitsets out, deterministically, with no way to reach the outside world.
"""

from __future__ import annotations

from wasm_rules.compiler import ABI_VERSION, compile_ruleset, manifest_of
from wasm_rules.errors import (
    AbiError,
    DeadlineError,
    FuelExhaustedError,
    ModuleRejectedError,
    RuleError,
    RulesetError,
    RuleSyntaxError,
    SandboxFault,
    TrapError,
)
from wasm_rules.language import OUTCOMES, Ruleset, parse_ruleset
from wasm_rules.sandbox import BatchResult, Manifest, RuleModule, Sandbox, SandboxLimits

__all__ = [
    "ABI_VERSION",
    "OUTCOMES",
    "AbiError",
    "BatchResult",
    "DeadlineError",
    "FuelExhaustedError",
    "Manifest",
    "ModuleRejectedError",
    "RuleError",
    "RuleModule",
    "RuleSyntaxError",
    "Ruleset",
    "RulesetError",
    "Sandbox",
    "SandboxFault",
    "SandboxLimits",
    "TrapError",
    "compile_ruleset",
    "manifest_of",
    "parse_ruleset",
]
