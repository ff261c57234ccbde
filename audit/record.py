"""The decision record (``sealtrail.decision/1``): what one sealed decision binds.

The ledger envelope adds ``trace_id`` (UUIDv7), ``recorded_at`` and ``payload_sha256`` (the raw
message, kept apart so that it can be purged); this body binds the rest of DESIGN.md
invariant 3: who asked (X.509 principal), the input (raw and canonical transaction hashes),
the features (values and SHA-256, with the reference tables), the model (SHA-256 and
backend), the score, the rule module (SHA-256, ruleset id and version), the outcome (decision,
fired rules with reasons, fuel) and the stage latencies. No personal data from the payment is
in it: names and accounts stay in the purgeable payload.

Feature values are JSON numbers, ``null`` for a missing value (NaN); JSON round-trips float64
exactly, so replaying the rule module on the recorded values reproduces the outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["DECISION_KIND", "DECISION_SCHEMA", "FAIL_SAFE_DECISION", "DecisionInputs", "RuleHit",
           "decision_body", "features_from_body"]

DECISION_KIND = "decision"
DECISION_SCHEMA = "sealtrail.decision/1"
FAIL_SAFE_DECISION = "HOLD"


@dataclass(frozen=True)
class RuleHit:
    id: str
    outcome: str
    reason: str


@dataclass(frozen=True)
class DecisionInputs:
    """Everything one record states, gathered by the pipeline."""

    at: str  # event time the features used (UTC, microseconds, Z)
    principal: dict[str, Any]
    message_format: str
    message_type: str
    reference: str
    raw_sha256: str
    transaction_sha256: str
    feature_schema: str
    feature_values: list[float]  # NaN for missing
    features_sha256: str
    tables: dict[str, str]
    model_sha256: str
    backend: str
    score: float  # NaN when the model did not score
    module_sha256: str
    ruleset_id: str
    ruleset_version: str
    decision: str
    fired: tuple[RuleHit, ...]
    fail_safe: str | None  # why the decision is a fail-safe HOLD, or None
    fuel: int  # fuel the rule module used for the whole batch
    batch_size: int
    latency_us: dict[str, int]


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def decision_body(d: DecisionInputs) -> dict[str, Any]:
    """The record body as a JSON object (canonicalised by the caller)."""
    return {
        "schema": DECISION_SCHEMA,
        "at": d.at,
        "principal": d.principal,
        "input": {"format": d.message_format, "message_type": d.message_type, "reference": d.reference,
                  "raw_sha256": d.raw_sha256, "transaction_sha256": d.transaction_sha256},
        "features": {"schema": d.feature_schema, "values": [_num(v) for v in d.feature_values],
                     "sha256": d.features_sha256, "tables": d.tables},
        "model": {"sha256": d.model_sha256, "backend": d.backend},
        "score": _num(d.score),
        "rules": {"module_sha256": d.module_sha256, "ruleset_id": d.ruleset_id,
                  "version": d.ruleset_version},
        "decision": d.decision,
        "fired": [{"id": h.id, "outcome": h.outcome, "reason": h.reason} for h in d.fired],
        "fail_safe": d.fail_safe,
        "fuel": d.fuel,
        "batch_size": d.batch_size,
        "latency_us": d.latency_us,
    }


def features_from_body(body: dict[str, Any]) -> tuple[list[float], float]:
    """The recorded feature values and score, ``null`` back to NaN (for replay)."""
    values = [math.nan if v is None else float(v) for v in body["features"]["values"]]
    score = body["score"]
    return values, math.nan if score is None else float(score)
