"""What goes into and comes out of the decision pipeline: submissions, decisions, the active
rule module, and the two narrow interfaces it calls (a model scorer, a derived-row index).

Kept apart from the pipeline so that code which only reads decisions (replay, the bundle verifier)
needs none of the batch logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from audit.decide.account_risk import AccountRisk
from audit.decide.explanation import Explanation
from audit.decide.record import DecisionInputs, IdempotencyKey, RuleHit
from inference.messages import Format, MessageError, Transaction, detect_format, parse_messages
from inference.schema import FEATURE_SCHEMA, rule_feature_names
from ledger import Receipt
from wasm_rules import RuleModule

if TYPE_CHECKING:  # a signature only: the offline bundle verifier imports this module without SQLAlchemy
    from sqlalchemy import Connection

__all__ = ["ActiveRules", "Decision", "DecisionIndex", "Scorer", "Submission", "scorer_precision"]


class DecisionIndex(Protocol):
    """Derived rows kept beside the ledger (``audit.query.index``), written in the same commit.
    ``inputs`` is an ``audit.decide.record.DecisionBatch``: items made on demand, columns read as is."""

    def write(self, conn: Connection, subs: Sequence[Submission], inputs: Sequence[DecisionInputs],
              receipts: Sequence[Receipt]) -> None: ...


class Scorer(Protocol):
    """What the pipeline needs of a model backend (``inference.backends.Backend``). A scorer may
    also state ``precision`` (``inference.precision``), which the record then seals
    (``scorer_precision``); one that does not has its records sealed as version 5."""

    name: str
    model_sha256: str

    def predict(self, rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...


def scorer_precision(scorer: object) -> str | None:
    """The precision ``scorer`` states it computes at (None: it states none); ValueError for one
    that is not a non-empty string."""
    got = getattr(scorer, "precision", None)
    if got is not None and (type(got) is not str or not got):
        raise ValueError(f"a scorer's precision is a name such as fp32 or fp16, not {got!r}")
    return got


@dataclass(frozen=True)
class ActiveRules:
    """A loaded rule module and how its feature columns map onto the rows it reads."""

    module: RuleModule
    columns: tuple[int, ...]  # index into rule_feature_names(schema) for each of the module's features

    @classmethod
    def of(cls, module: RuleModule, schema: str = FEATURE_SCHEMA) -> ActiveRules:
        """The module over rows of feature schema ``schema`` (this build's, or a record's own on
        replay); ValueError when it reads a feature that schema does not have."""
        names = rule_feature_names(schema)
        unknown = [f for f in module.manifest.features if f not in names]
        if unknown:
            raise ValueError(f"rule module {module.manifest.ruleset_id} reads features {schema} "
                             f"does not have: {', '.join(unknown)}")
        return cls(module, tuple(names.index(f) for f in module.manifest.features))


@dataclass(frozen=True)
class Submission:
    """One transaction to decide, as it arrived."""

    raw: bytes  # the message bytes; stored as the record's purgeable payload
    transaction: Transaction
    message_format: str  # mt | pacs008 | json
    principal: dict[str, Any]  # audit.decide.principal.Principal.to_json()
    received_at: datetime  # event time for the features (UTC)
    expired: bool = False  # its deadline passed in the queue: record a fail-safe HOLD
    queue_us: int = 0
    idempotency: IdempotencyKey | None = None  # sealed in its record (audit.decide.idempotency)

    @classmethod
    def parse(cls, raw: bytes, message_format: Format, principal: dict[str, Any],
              received_at: datetime) -> list[Submission | MessageError]:
        """One submission per message in ``raw`` (or the error that refused it). Each keeps the
        whole ``raw`` as its payload; replay finds its transaction again by SHA-256."""
        fmt: str = message_format
        if message_format == "auto":
            fmt = detect_format(raw)
        elif message_format == "iso20022":  # which ISO message, by its namespace (else refused as pacs.008)
            kind = detect_format(raw) if raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"<" else "pacs008"
            fmt = kind if kind not in ("mt", "json") else "pacs008"
        return [m if isinstance(m, MessageError) else cls(raw, m, fmt, principal, received_at)
                for m in parse_messages(raw, fmt)]  # type: ignore[arg-type]


@dataclass(frozen=True)
class Decision:
    trace_id: str
    seq: int
    leaf_hash: str  # hex
    recorded_at: str
    decision: str
    score: float | None
    fired: tuple[RuleHit, ...]
    fail_safe: str | None
    latency_us: dict[str, int] = field(default_factory=dict)
    replayed: bool = False  # an earlier decision of the same payment, returned again (idempotency)
    account_risk: AccountRisk | None = None  # its accounts' risk and any account alert (decision/2)
    explanation: Explanation | None = None  # its reason codes (decision/3); None: not stated
