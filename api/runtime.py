"""Everything one serving process holds open, assembled from settings and closed in order.

Start-up order matters: the ledger first (fail early on a missing key or schema), then the
model (checked against its card and registered in the ledger), the active rule module (the
shipped pack is bootstrapped on a fresh ledger, flagged as such), then the velocity windows
rebuilt from the ledger's recent decisions, so that a restarted process computes the same
features as the one that stopped. Only then does the batcher accept work.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from api import ops
from api.config import Settings
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.service import DecisionService
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex, catch_up
from audit.state import snapshot as velocity_snapshot
from audit.state.replay import ReplayReport
from inference.backends import Backend, load_backend
from inference.features import FeatureExtractor
from inference.model import ModelFiles
from ledger import store
from ledger.append import Ledger
from wasm_rules import Sandbox

__all__ = ["Runtime"]


@dataclass
class Runtime:
    settings: Settings
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

    @classmethod
    def open(cls, s: Settings, *, operator: str = "sealtrail-serve") -> Runtime:
        engine = ops.engine_for(s)
        ledger = ops.open_ledger(s, engine)
        local = Principal.local(operator)
        model = ModelFiles.open()
        scorer = load_backend(s.backend, model.weights_path, model.onnx_path)
        sandbox = Sandbox()
        try:
            register_model(ledger, model, local)
            governance = Governance(ledger)
            governance.bootstrap_default(principal=local)
            rules = governance.load_active(sandbox)
            restored = velocity_snapshot.restore(s.velocity_snapshot_file, engine, ledger.origin)
            catch_up(engine)  # decisions sealed before the index existed (or restored) become searchable
            index = TraceIndex()
            pipeline = Pipeline(ledger, scorer, rules, extractor=restored.extractor, index=index)
            service = DecisionService(pipeline, max_batch=s.max_batch,
                                      timeout_s=s.decision_timeout_ms / 1000)
        except BaseException:
            sandbox.close()
            scorer.close()
            raise
        rt = cls(s, engine, ledger, sandbox, scorer, model, governance, pipeline, service, restored.report,
                 restored.from_snapshot)
        rt._velocity_base = (restored.covered, 0)
        pipeline.rebuild = rt._rebuild_velocity
        return rt

    # (ledger size the windows were last rebuilt at, service.decided then): see close()
    _velocity_base: tuple[int, int] = (0, 0)

    def _rebuild_velocity(self) -> FeatureExtractor:
        """After a failed commit: the windows again from the ledger (called by the pipeline)."""
        r = velocity_snapshot.restore(None, self.engine, self.ledger.origin)
        self._velocity_base = (r.covered, self.service.decided)
        return r.extractor

    _activate_lock = threading.Lock()

    def reload_rules(self) -> None:
        """Make the ledger's active ruleset the one the next batch uses (atomic between batches)."""
        with self._activate_lock:
            self.pipeline.activate(self.governance.load_active(self.sandbox))

    def ledger_state(self) -> tuple[int, int | None]:
        """(size, creation time of the newest checkpoint in µs since the epoch) for /metrics."""
        with self.engine.connect() as conn:
            size, _, _, _, cp_at = store.head(conn)
        return size, cp_at or None

    def close(self) -> None:
        self.service.close()
        self._save_velocity()
        self.sandbox.close()
        self.scorer.close()
        self.engine.dispose()

    def _save_velocity(self) -> None:
        """Save the windows if they are exactly the replay of the ledger as it is now: every
        decision sealed since they were rebuilt is one this process made."""
        path = self.settings.velocity_snapshot_file
        if self.pipeline.velocity_stale:
            return
        base, decided_then = self._velocity_base
        try:
            size = velocity_snapshot.ledger_size(self.engine)
            ours = self.service.decided - decided_then
            if velocity_snapshot.decisions_between(self.engine, base, size) != ours:
                return  # another process sealed decisions too: the next start replays instead
            velocity_snapshot.save(path, self.engine, self.ledger.origin, self.pipeline.extractor.state, size)
        except (OSError, SQLAlchemyError) as exc:  # a snapshot is an optimisation: never fail a stop
            logging.getLogger(__name__).warning("velocity snapshot not saved: %s", exc)


