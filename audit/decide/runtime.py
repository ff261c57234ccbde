"""Everything one deciding process holds open, assembled from settings and closed in order.

Start-up order matters: the ledger first (fail early on a missing key or schema), then the
model (checked against its card and registered in the ledger), the active rule module (the
shipped pack is bootstrapped on a fresh ledger, flagged as such), then the velocity windows
rebuilt from the ledger's recent decisions, so that a restarted process computes the same
features as the one that stopped, and the account-risk state rebuilt from every sealed decision
record (``audit.state.account_risk_replay``), under the policy the settings state
(``account_risk_*`` fields, defaults where absent; a bad value refuses to start). Only then does
the batcher accept work.

The settings are any object with the fields of ``RuntimeSettings`` (``api.config.Settings`` is
one); the runtime keeps it as given, so a caller reads its own fields back from ``settings``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from typing_extensions import TypeVar

from audit.decide.account_risk import AccountRiskPolicy
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.service import DecisionService
from audit.decide.types import Decision, Submission
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex, catch_up
from audit.state import snapshot as velocity_snapshot
from audit.state.account_risk_replay import AccountRiskReport, rebuild_account_risk
from audit.state.replay import ReplayReport
from inference.backends import Backend, load_backend
from inference.batcher import Priority
from inference.features import FeatureExtractor
from inference.model import ModelFiles
from ledger import database
from ledger.append import CheckpointPolicy, Ledger
from wasm_rules import Sandbox

__all__ = ["Runtime", "RuntimeSettings", "open_runtime"]

log = logging.getLogger(__name__)


class RuntimeSettings(Protocol):
    """What a runtime is opened from: where the ledger is, and how the process decides."""

    @property
    def db(self) -> str:
        """SQLAlchemy URL of a migrated ledger database."""
        ...

    @property
    def key_file(self) -> Path:
        """The ledger's signing key (0600)."""
        ...

    @property
    def checkpoint_every(self) -> int:
        """Sign a checkpoint after this many entries ..."""
        ...

    @property
    def checkpoint_seconds(self) -> float:
        """... or after this long."""
        ...

    @property
    def backend(self) -> str:
        """Model backend: numpy | onnxruntime | cupy | tensorrt."""
        ...

    @property
    def max_batch(self) -> int:
        """The largest batch the pipeline runs."""
        ...

    @property
    def decision_timeout_ms(self) -> float:
        """Queue deadline before a decision is sealed as a fail-safe HOLD."""
        ...

    @property
    def velocity_snapshot_file(self) -> Path:
        """Where the velocity windows are saved at a clean stop (mode 0600: it names accounts)."""
        ...


# The settings type the runtime was opened with; a bare ``Runtime`` annotation means Runtime[Any]
# (PEP 696 default), so code that names only ``Runtime`` reads its own fields off ``settings``.
S = TypeVar("S", bound=RuntimeSettings, default=Any)


class _Windows:
    """Where the velocity windows were last rebuilt from the ledger: the pipeline's ``rebuild``."""

    def __init__(self, engine: Engine, origin: str, covered: int, ledger: Ledger) -> None:
        self._engine, self._origin, self._ledger = engine, origin, ledger
        self.covered = covered  # ledger size the windows were last replayed up to

    def rebuild(self) -> tuple[FeatureExtractor, int]:
        """After a failed commit: the windows again from the ledger, and the size they cover (called
        by the pipeline).

        Not while the signing key is unusable (``KeyFileError`` at once): a replay takes seconds,
        and every batch would pay it only to fail at its commit again."""
        self._ledger.require_signer()
        r = velocity_snapshot.restore(None, self._engine, self._origin)
        self.covered = r.covered
        return r.extractor, r.covered


@dataclass
class Runtime(Generic[S]):
    """The ledger, model, rule sandbox, governance, pipeline and decision service of one process.

    ``open`` assembles it; ``decide`` seals decisions; ``close`` (or leaving a ``with`` block)
    finishes what is queued, saves the velocity windows and releases everything, in that order.
    """

    settings: S
    engine: Engine
    ledger: Ledger
    sandbox: Sandbox
    scorer: Backend
    model: ModelFiles
    governance: Governance
    pipeline: Pipeline
    service: DecisionService
    replay: ReplayReport
    velocity_from_snapshot: bool
    _windows: _Windows = field(repr=False)
    _closed: bool = field(default=False, repr=False)
    account_risk: AccountRiskReport | None = None  # what the account-risk rebuild read at start

    @classmethod
    def open(cls, s: S, *, operator: str = "sealtrail-serve") -> Runtime[S]:
        """Open the ledger at ``s.db`` and everything that decides into it.

        ``operator`` names the local principal that registers the model and bootstraps the
        shipped ruleset on a fresh ledger. Raises ``SchemaError`` / ``KeyFileError`` (ledger),
        ``ModelRegistryError`` / ``GovernanceError`` / ``AccountRiskError`` (audit; the last for a
        bad ``account_risk_*`` setting), ``InferenceError``, ``RuleError``."""
        policy = AccountRiskPolicy.from_settings(s)  # refused before anything is opened
        engine = database.open_engine(s.db)
        try:
            ledger = database.open_ledger(engine, s.key_file,
                                          CheckpointPolicy(s.checkpoint_every, s.checkpoint_seconds))
            local = Principal.local(operator)
            model = ModelFiles.open()
            scorer = load_backend(s.backend, model.weights_path, model.onnx_path)
        except BaseException:
            engine.dispose()
            raise
        sandbox = Sandbox()
        try:
            register_model(ledger, model, local)
            governance = Governance(ledger)
            governance.bootstrap_default(principal=local)
            rules = governance.load_active(sandbox)
            restored = velocity_snapshot.restore(s.velocity_snapshot_file, engine, ledger.origin)
            catch_up(engine)  # decisions sealed before the index existed (or restored) become searchable
            windows = _Windows(engine, ledger.origin, restored.covered, ledger)
            risk, risk_report = rebuild_account_risk(engine, policy, size=restored.covered)
            pipeline = Pipeline(ledger, scorer, rules, extractor=restored.extractor, index=TraceIndex(),
                                rebuild=windows.rebuild, account_risk=risk, covered=restored.covered)
            pipeline.rules_source = lambda: governance.load_active(sandbox)  # another decider activated
            service = DecisionService(pipeline, max_batch=s.max_batch,
                                      timeout_s=s.decision_timeout_ms / 1000)
        except BaseException:
            sandbox.close()
            scorer.close()
            engine.dispose()
            raise
        return cls(s, engine, ledger, sandbox, scorer, model, governance, pipeline, service, restored.report,
                   restored.from_snapshot, windows, account_risk=risk_report)

    def decide(self, subs: Sequence[Submission], priority: Priority = Priority.P1,
               timeout_s: float | None = None) -> list[Decision]:
        """Decide and seal ``subs``; returns once every record is durable (fail-closed:
        ``LedgerUnavailableError`` and no decision if the ledger cannot commit).

        ``timeout_s`` is the queue deadline (default: ``decision_timeout_ms``); a decision whose
        deadline passes in the queue is sealed as a fail-safe HOLD (``DEADLINE_EXCEEDED``)."""
        return self.service.decide(subs, priority, timeout_s)

    _activate_lock = threading.Lock()

    def reload_rules(self) -> None:
        """Make the ledger's active ruleset the one the next batch uses (atomic between batches)."""
        with self._activate_lock:
            self.pipeline.activate(self.governance.load_active(self.sandbox))

    def ledger_state(self) -> tuple[int, int | None]:
        """(size, creation time of the newest checkpoint in µs since the epoch) for /metrics."""
        st = self.ledger.status()
        return st.size, st.checkpoint_at_us

    def index_conflicts(self) -> int:
        """Trace-index rows this process could not write because a foreign row held their place."""
        index = self.pipeline.index
        return int(getattr(index, "conflicts", 0))

    def close(self) -> None:
        """Finish what is queued, save the velocity windows, release the sandbox, model and
        database. A second call does nothing; deciding after it is refused."""
        if self._closed:
            return
        self._closed = True
        self.service.close()
        self._save_velocity()
        self.sandbox.close()
        self.scorer.close()
        self.engine.dispose()

    def __enter__(self) -> Runtime[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _save_velocity(self) -> None:
        """Save the windows if they are exactly the replay of the ledger as it is now: every
        decision sealed since they were rebuilt is one this process made."""
        path = self.settings.velocity_snapshot_file
        if self.pipeline.velocity_stale:
            return
        try:
            size = velocity_snapshot.ledger_size(self.engine)
            ours = self.pipeline.sealed - self.pipeline.sealed_at_rebuild
            if velocity_snapshot.decisions_between(self.engine, self._windows.covered, size) != ours:
                return  # another process sealed decisions too: the next start replays instead
            velocity_snapshot.save(path, self.engine, self.ledger.origin, self.pipeline.extractor, size)
        except (OSError, SQLAlchemyError) as exc:  # a snapshot is an optimisation: never fail a stop
            log.warning("velocity snapshot not saved: %s", exc)


def open_runtime(settings: S, *, operator: str = "sealtrail-serve") -> Runtime[S]:
    """``Runtime.open``: the scoring path's one entry point (see docs/python-api.md)."""
    return Runtime.open(settings, operator=operator)
