"""The rule layer's exception tree: everything a caller can see derives from ``RuleError``."""

from __future__ import annotations

__all__ = [
    "AbiError",
    "DeadlineError",
    "FuelExhaustedError",
    "ModuleRejectedError",
    "RuleError",
    "RuleSyntaxError",
    "RulesetError",
    "SandboxFault",
    "TrapError",
]


class RuleError(Exception):
    """Base class of every error raised by ``wasm_rules``."""


class RulesetError(RuleError):
    """The ruleset file is malformed (TOML, missing keys, duplicate ids, bad outcome, ...)."""

    field: str | None = None  # the key at fault where one is named: "ruleset.version", "rules[2].id"


class RuleSyntaxError(RulesetError):
    """A ``when`` expression is refused; names the rule, line and column and the reason."""

    def __init__(self, rule_id: str, line: int, column: int, reason: str) -> None:
        self.rule_id, self.line, self.column, self.reason = rule_id, line, column, reason
        super().__init__(f"rule {rule_id}, line {line}, column {column}: {reason}")

    def __reduce__(self) -> tuple[type[RuleSyntaxError], tuple[str, int, int, str]]:
        return (type(self), (self.rule_id, self.line, self.column, self.reason))


class ModuleRejectedError(RuleError):
    """A module is refused at load: it imports something, is too large, or is not wasm."""


class SandboxFault(RuleError):
    """A module failed while evaluating a batch; the pipeline records SANDBOX_FAULT."""

    cause = "sandbox fault"


class AbiError(SandboxFault):
    """The module does not keep the ABI v1 contract (exports, layout or results)."""

    cause = "ABI violation"


class TrapError(SandboxFault):
    """The guest trapped (unreachable, out-of-bounds access, division, ...)."""

    cause = "trap"


class FuelExhaustedError(SandboxFault):
    """The batch used more fuel than its budget."""

    cause = "fuel exhausted"


class DeadlineError(SandboxFault):
    """The batch ran past its wall-clock (epoch) deadline."""

    cause = "deadline passed"
