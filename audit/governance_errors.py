"""The refusals of rule governance, one tree under ``GovernanceError``.

The API maps each to an HTTP status in one place (``api/problems.py``); every one is raised
before anything is written, or inside the sealing transaction, which then writes nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CasesFailedError", "DuplicateRulesetError", "FourEyesError", "GovernanceError",
    "GovernanceRecordError", "ModuleIntegrityError", "NoActiveRulesetError", "RulesetRefusedError",
    "StateError", "UnknownRulesetError",
]


class GovernanceError(Exception):
    """Base of every refusal by rule governance; nothing was written when one is raised."""


class RulesetRefusedError(GovernanceError):
    """The ruleset does not parse, compile or fit the pipeline (API: 422). ``rule_id``,
    ``line`` and ``column`` are set when the compiler named them."""

    def __init__(self, message: str, *, rule_id: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.rule_id, self.line, self.column = rule_id, line, column


class CasesFailedError(RulesetRefusedError):
    """The ruleset's own test cases fail; ``failures`` names each (line, case, what differed)."""

    def __init__(self, message: str, failures: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.failures = failures


class DuplicateRulesetError(GovernanceError):
    """A ruleset with this ``id@version`` was already proposed (or bootstrapped)."""


class UnknownRulesetError(GovernanceError):  # deliberately not a LookupError: see Governance._append
    """No ruleset with this id was ever proposed."""


class StateError(GovernanceError):
    """The step does not follow from the ruleset's state (not proposed, already approved,
    not approved, already active, or a stated module SHA-256 that is not this one's)."""


class FourEyesError(GovernanceError):
    """The approver is the proposer (same certificate fingerprint or same subject DN)."""


class NoActiveRulesetError(GovernanceError):
    """No ruleset is active: bootstrap the default pack or activate an approved one."""


class GovernanceRecordError(GovernanceError):
    """The governance records cannot be derived: one is malformed, or breaks the rules (a
    self-approval, an unapproved activation) because it was appended around Governance.
    Fail-closed: nothing governed proceeds until an operator looks (API: 500)."""


class ModuleIntegrityError(GovernanceError):
    """The module bytes in a record do not hash to the SHA-256 the record states."""
