"""Everything one serving process holds open, assembled from settings and closed in order.

Start-up order matters: the ledger first (fail early on a missing key or schema), then the
model (checked against its card and registered in the ledger), the active rule module (the
shipped pack is bootstrapped on a fresh ledger, flagged as such), then the velocity windows
rebuilt from the ledger's recent decisions, so that a restarted process computes the same
features as the one that stopped. Only then does the batcher accept work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sqlalchemy import Engine

from api import ops
from api.config import Settings
from audit.governance import Governance
from audit.models_registry import register_model
from audit.pipeline import Pipeline
from audit.principal import Principal
from audit.service import DecisionService
from audit.trace_index import TraceIndex, catch_up
from audit.velocity_replay import ReplayReport, replay_decisions, window_start_seq
from inference.backends import Backend, load_backend
from inference.features import FeatureExtractor
from inference.model_files import ModelFiles
from ledger import Ledger, store
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
            extractor = FeatureExtractor()
            replay = replay_decisions(engine, extractor, window_start_seq(engine))
            catch_up(engine)  # decisions sealed before the index existed (or restored) become searchable
            index = TraceIndex()
            pipeline = Pipeline(ledger, scorer, rules, extractor=extractor, index=index)
            pipeline.rebuild = lambda: _rebuilt(engine)
            service = DecisionService(pipeline, max_batch=s.max_batch,
                                      timeout_s=s.decision_timeout_ms / 1000)
        except BaseException:
            sandbox.close()
            scorer.close()
            raise
        return cls(s, engine, ledger, sandbox, scorer, model, governance, pipeline, service, replay)

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
        self.sandbox.close()
        self.scorer.close()
        self.engine.dispose()


def _rebuilt(engine: Engine) -> FeatureExtractor:
    extractor = FeatureExtractor()
    replay_decisions(engine, extractor, window_start_seq(engine))
    return extractor
