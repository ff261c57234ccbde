"""A decision's explanation: the reason codes a ``sealtrail.decision/3`` record states.

The record's ``explanation`` is ``{"method": EXPLANATION_METHOD, "reasons": [...]}`` for a decision
the model scored at ``EXPLAIN_FROM_SCORE`` or more, or that ended REVIEW or worse whatever its
score; it is ``null`` for any other decision (allowed with a lower score, or not scored at all).
Each reason is ``{"code", "contribution_milli", "text"}``: ``inference.explain`` computes them from
the recorded feature values and the recorded model (integrated gradients; method, baseline, steps
and wording are that module's), so the bundle verifier recomputes them from the record alone
(``check_explanation``).

Why not every decision: attributions cost about 30 us a row, as much again as the features, and
an allowed payment scored low has no reason worth an officer's time; a decision that the rules
held, or that the model scored high, always has its reasons, and which decisions have them is a
rule of the record, checked on replay.

This module is pure (no database, no clock); the offline bundle verifier reads records with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from audit.errors import ExplanationError
from inference.explain import MAX_REASONS, Reason, check_reasons, explain, reasons
from inference.model import MlpModel
from ledger.jcs import canonical_bytes

__all__ = [
    "EXPLAIN_FROM_SCORE",
    "EXPLANATION_METHOD",
    "NOT_EXPLAINED",
    "Explanation",
    "ExplanationError",
    "check_explanation",
    "explain_decisions",
    "is_explained",
]

EXPLANATION_METHOD = "sealtrail.integrated-gradients/1"  # inference.explain: baseline z = 0, 32 midpoints
EXPLAIN_FROM_SCORE = 0.5  # an allowed decision scored below this has no explanation
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_NULL = b"null"
_MAX_INT = 2**53 - 1  # the integers a canonical (RFC 8785) record can hold exactly


@dataclass(frozen=True)
class Explanation:
    """What a version 3 record states as ``explanation``: its reasons, or None for ``null``."""

    reasons: tuple[Reason, ...] | None

    def to_json(self) -> dict[str, Any] | None:
        if self.reasons is None:
            return None
        return {"method": EXPLANATION_METHOD,
                "reasons": [{"code": r.code, "contribution_milli": r.contribution_milli, "text": r.text}
                            for r in self.reasons]}

    def to_jcs(self) -> bytes:
        """Its canonical bytes (RFC 8785), as the record holds them."""
        return _NULL if self.reasons is None else canonical_bytes(self.to_json())

    @classmethod
    def from_json(cls, obj: object) -> Explanation:
        """A record's ``explanation`` read back; ``ExplanationError`` names what is wrong."""
        if obj is None:
            return NOT_EXPLAINED
        if not isinstance(obj, dict) or set(obj) != {"method", "reasons"}:
            raise ExplanationError("explanation is neither null nor an object of method and reasons")
        if obj["method"] != EXPLANATION_METHOD:
            raise ExplanationError(f"explanation method {obj['method']!r} is not {EXPLANATION_METHOD}")
        items = obj["reasons"]
        if not isinstance(items, list) or len(items) > MAX_REASONS:
            raise ExplanationError(f"explanation reasons is not a list of at most {MAX_REASONS}")
        out = []
        for r in items:
            if (not isinstance(r, dict) or set(r) != {"code", "contribution_milli", "text"}
                    or type(r["code"]) is not str or not _CODE.fullmatch(r["code"])
                    or type(r["contribution_milli"]) is not int or type(r["text"]) is not str
                    or not -_MAX_INT <= r["contribution_milli"] <= _MAX_INT):
                raise ExplanationError(f"explanation reason {r!r} is not a code, an integer "
                                       f"contribution_milli (within +/-{_MAX_INT}) and a text"[:600])
            out.append(Reason(r["code"], r["contribution_milli"], r["text"]))
        return cls(tuple(out))


NOT_EXPLAINED = Explanation(None)


def is_explained(score: float | None, decision: str) -> bool:
    """Whether a decision's record states reasons (see the module)."""
    if score is None or math.isnan(score):
        return False
    return score >= EXPLAIN_FROM_SCORE or decision != "ALLOW"


def explain_decisions(model: MlpModel, rows: npt.NDArray[np.float64], scores: Sequence[float],
                      decisions: Sequence[str]) -> list[Explanation]:
    """The explanation of each decision of a batch: ``rows`` are its feature rows (the model reads
    their leading ``model.n_features`` columns), ``scores`` its scores (NaN: not scored)."""
    chosen = [i for i, (s, d) in enumerate(zip(scores, decisions, strict=True)) if is_explained(s, d)]
    out = [NOT_EXPLAINED] * len(scores)
    if chosen:
        x = rows[chosen, :model.n_features]
        attr = explain(model, x)
        names = model.feature_names
        for k, i in enumerate(chosen):
            out[i] = Explanation(tuple(reasons(names, x[k], attr[k])))
    return out


def check_explanation(model: MlpModel, row: npt.NDArray[np.float64],
                      attributions: npt.NDArray[np.float64] | None, score: float | None, decision: str,
                      recorded: object, tolerance: float) -> str | None:
    """Why a record's ``explanation`` is not the one its decision has, or None when it is.

    ``row`` holds the model's columns of the recorded values; ``attributions`` are
    ``inference.explain.explain`` of it recomputed (None when the decision is not explained).
    Reason codes must be what ``inference.explain.check_reasons`` accepts within ``tolerance``."""
    try:
        got = Explanation.from_json(recorded)
    except ExplanationError as exc:
        return str(exc)
    want = is_explained(score, decision)
    if got.reasons is None:
        return None if not want else "explanation is null, but the decision is one whose reasons are recorded"
    if not want:
        return (f"explanation states reasons, but an {decision} scored {score!r} has none (null)")
    if attributions is None:
        raise ValueError("attributions are needed to check an explained decision")
    return check_reasons(model.feature_names, row, attributions, got.reasons, tolerance)
