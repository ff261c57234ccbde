"""Rule governance (draft -> proposed -> approved by another principal -> active) and the model registry.

Every step is a sealed ledger record; the state of every ruleset is derived from those records.
"""

from audit.governance.service import (
    ACTIVATED,
    APPROVED,
    BOOTSTRAPPED,
    DEFAULT_PACK,
    KINDS,
    PROPOSED,
    Governance,
    RulesetView,
    Step,
    same_person,
)

__all__ = [
    "ACTIVATED", "APPROVED", "BOOTSTRAPPED", "DEFAULT_PACK", "KINDS", "PROPOSED", "Governance",
    "RulesetView", "Step", "same_person",
]
