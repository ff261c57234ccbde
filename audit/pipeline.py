"""The decision pipeline: one batch -> features -> model -> one sandboxed rule call -> one commit.

``Pipeline.decide(submissions)`` returns decisions only after their records are durable in
the ledger (fail-closed): if the commit fails it raises ``LedgerUnavailableError`` and no
decision exists. Faults inside the batch do not crash it: a sandbox fault makes every
decision of the batch a recorded fail-safe HOLD (``SANDBOX_FAULT``), a model failure leaves
the score missing (the pack's ``MODEL_SCORE_MISSING`` rule then holds the payment for
review, and the record says ``MODEL_ERROR``), and a request whose deadline passed in the
queue is recorded as a fail-safe HOLD (``DEADLINE_EXCEEDED``) without being scored.

Every recorded transaction, scored or not, advances the velocity windows in ledger order, so
replaying the ledger's recent decisions rebuilds the same state (``rebuild_velocity``). When a
commit fails after the windows advanced, the pipeline marks them stale and rebuilds them from
the ledger before the next batch.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from audit.canonical import canonical_bytes
from audit.record import (
    DECISION_KIND,
    FAIL_SAFE_DECISION,
    DecisionInputs,
    RuleHit,
    decision_body,
)
from inference.features import FeatureExtractor, features_sha256
from inference.messages import Format, MessageError, Transaction, detect_format, parse_messages
from inference.schema import FEATURE_SCHEMA, RULE_FEATURE_NAMES
from ledger import Ledger, LedgerUnavailableError, Receipt, Record
from ledger.records import format_time
from wasm_rules import OUTCOMES, RuleModule, SandboxFault

__all__ = ["ActiveRules", "Decision", "DecisionIndex", "Pipeline", "Scorer", "Submission"]

F64 = np.float64


class DecisionIndex(Protocol):
    """Derived rows kept beside the ledger (``audit.trace_index``), written in the same commit."""

    def write(self, conn: Connection, subs: Sequence[Submission], inputs: Sequence[DecisionInputs],
              receipts: Sequence[Receipt]) -> None: ...


class Scorer(Protocol):
    """What the pipeline needs of a model backend (``inference.backends.Backend``)."""

    name: str
    model_sha256: str

    def predict(self, rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...


@dataclass(frozen=True)
class ActiveRules:
    """A loaded rule module and how its feature columns map onto ours."""

    module: RuleModule
    columns: tuple[int, ...]  # index into RULE_FEATURE_NAMES for each of the module's features

    @classmethod
    def of(cls, module: RuleModule) -> ActiveRules:
        unknown = [f for f in module.manifest.features if f not in RULE_FEATURE_NAMES]
        if unknown:
            raise ValueError(f"rule module {module.manifest.ruleset_id} reads features this pipeline "
                             f"does not produce: {', '.join(unknown)}")
        return cls(module, tuple(RULE_FEATURE_NAMES.index(f) for f in module.manifest.features))


@dataclass(frozen=True)
class Submission:
    """One transaction to decide, as it arrived."""

    raw: bytes  # the message bytes; stored as the record's purgeable payload
    transaction: Transaction
    message_format: str  # mt | pacs008 | json
    principal: dict[str, Any]  # audit.principal.Principal.to_json()
    received_at: datetime  # event time for the features (UTC)
    expired: bool = False  # its deadline passed in the queue: record a fail-safe HOLD
    queue_us: int = 0

    @classmethod
    def parse(cls, raw: bytes, message_format: Format, principal: dict[str, Any],
              received_at: datetime) -> list[Submission | MessageError]:
        """One submission per message in ``raw`` (or the error that refused it). Each keeps the
        whole ``raw`` as its payload; replay finds its transaction again by SHA-256."""
        fmt = detect_format(raw) if message_format == "auto" else message_format
        return [m if isinstance(m, MessageError) else cls(raw, m, fmt, principal, received_at)
                for m in parse_messages(raw, fmt)]


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


def _us(t0: float, t1: float) -> int:
    return round((t1 - t0) * 1e6)


class Pipeline:
    """Decides batches; one instance per ledger (it owns the velocity state)."""

    def __init__(self, ledger: Ledger, scorer: Scorer, rules: ActiveRules, *,
                 extractor: FeatureExtractor | None = None,
                 index: DecisionIndex | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ledger = ledger
        self.scorer = scorer
        self._rules = rules
        self.extractor = extractor if extractor is not None else FeatureExtractor()
        self._clock = clock
        self.index = index
        self._lock = threading.Lock()  # one batch at a time: the windows advance in ledger order
        self.velocity_stale = False
        self.rebuild: Callable[[], FeatureExtractor] | None = None  # set by the service

    @property
    def rules(self) -> ActiveRules:
        return self._rules

    def activate(self, rules: ActiveRules) -> None:
        """Switch rule modules; the next batch uses the new one, a running batch the old one."""
        self._rules = rules

    def decide(self, subs: Sequence[Submission]) -> list[Decision]:
        """Decide and seal ``subs`` in one commit; returns only once the records are durable."""
        if not subs:
            return []
        with self._lock:
            if self.velocity_stale:
                if self.rebuild is None:
                    raise LedgerUnavailableError("velocity state is stale after a failed commit and "
                                                 "no rebuild is configured")
                self.extractor = self.rebuild()
                self.velocity_stale = False
            try:
                return self._decide(subs)
            except LedgerUnavailableError:
                self.velocity_stale = True
                raise

    def _decide(self, subs: Sequence[Submission]) -> list[Decision]:
        clock, rules, n = self._clock, self._rules, len(subs)
        t0 = clock()
        rows = self.extractor.extract([s.transaction for s in subs], [s.received_at for s in subs])
        t1 = clock()
        live = np.array([not s.expired for s in subs])
        scores = np.full(n, math.nan)
        model_error = None
        if live.any():
            try:
                scores[live] = self.scorer.predict(rows[live])
            except Exception as exc:  # any backend failure: score missing, recorded, never a crash
                model_error = f"MODEL_ERROR: {type(exc).__name__}: {exc}"
        t2 = clock()
        manifest = rules.module.manifest
        outcomes = np.full(n, OUTCOMES.index(FAIL_SAFE_DECISION), dtype=np.uint8)
        fired_words: npt.NDArray[np.uint64] | None = None
        fuel = 0
        sandbox_fault = None
        if live.any():
            full = np.hstack([rows, scores[:, None]])[live][:, rules.columns]
            try:
                result = rules.module.evaluate(full)
                outcomes[live] = result.outcomes
                fired_words = np.zeros((n, result.fired.shape[1]), dtype=np.uint64)
                fired_words[live] = result.fired
                fuel = result.fuel_used
            except SandboxFault as exc:
                sandbox_fault = f"SANDBOX_FAULT: {type(exc).__name__}: {exc}"
        t3 = clock()
        stage = {"features": _us(t0, t1), "model": _us(t1, t2), "rules": _us(t2, t3)}
        tables = self.extractor.tables.ids
        records, meta = [], []
        for i, s in enumerate(subs):
            tx = s.transaction
            if s.expired:
                hits: tuple[RuleHit, ...] = ()
                why: str | None = "DEADLINE_EXCEEDED"
            elif sandbox_fault is not None:
                hits, why = (), sandbox_fault
            else:
                hits = self._hits(manifest, fired_words, i)
                why = model_error
            row = rows[i]
            inputs = DecisionInputs(
                at=format_time(s.received_at.astimezone(UTC)), principal=s.principal,
                message_format=s.message_format, message_type=tx.message_type, reference=tx.reference,
                raw_sha256=tx.raw_sha256, transaction_sha256=tx.sha256, feature_schema=FEATURE_SCHEMA,
                feature_values=row.tolist(), features_sha256=features_sha256(row), tables=tables,
                model_sha256=self.scorer.model_sha256, backend=self.scorer.name, score=float(scores[i]),
                module_sha256=rules.module.sha256, ruleset_id=manifest.ruleset_id,
                ruleset_version=manifest.version, decision=OUTCOMES[int(outcomes[i])], fired=hits,
                fail_safe=why, fuel=fuel, batch_size=n, latency_us={"queue": s.queue_us, **stage})
            records.append(Record.from_canonical_body(DECISION_KIND, canonical_bytes(decision_body(inputs)),
                                                      payload=s.raw))
            meta.append(inputs)
        t4 = clock()
        index = self.index
        alongside = None if index is None else (lambda conn, rs: index.write(conn, subs, meta, rs))
        receipts = self.ledger.append_many(records, alongside=alongside)
        t5 = clock()
        after = {**stage, "seal": _us(t3, t4), "ledger": _us(t4, t5), "total": _us(t0, t5)}
        return [Decision(r.trace_id, r.seq, r.leaf_hash.hex(), r.recorded_at, m.decision,
                         None if math.isnan(m.score) else m.score, m.fired, m.fail_safe,
                         {"queue": subs[i].queue_us, **after})
                for i, (r, m) in enumerate(zip(receipts, meta, strict=True))]

    @staticmethod
    def _hits(manifest: Any, words: npt.NDArray[np.uint64] | None, i: int) -> tuple[RuleHit, ...]:
        if words is None:
            return ()
        row = words[i]
        if not row.any():
            return ()
        return tuple(RuleHit(r.id, r.outcome, r.reason) for k, r in enumerate(manifest.rules)
                     if int(row[k // 64]) >> (k % 64) & 1)
