"""Everything one deciding process holds open, assembled from settings and closed in order.

Start-up order matters: the ledger first (fail early on a missing key or schema), then the
model (checked against its card and registered in the ledger), the active rule module (the
shipped pack is bootstrapped on a fresh ledger, flagged as such), then the velocity windows
rebuilt from the ledger's recent decisions, so that a restarted process computes the same
features as the one that stopped, and the account-risk state: the sealed snapshot in the file
beside the velocity snapshot with the decision records after it applied, else rebuilt from every
sealed decision record (``audit.state.risk_snapshot``), under the policy the settings state
(``account_risk_*`` fields, defaults where absent; a bad value refuses to start), and the index of
the sanctions lists in force (``audit.screening.screener``; a list sealed later is indexed beside
the batches and swapped in whole; ``screening_max_age_days``, where set, makes a list older than
that a finding on the decisions that use it). Only then does the batcher accept work.

State snapshots: every ``state_snapshot_every`` decisions this process sealed (a settings field,
default ``STATE_SNAPSHOT_EVERY`` where absent; 0: at a clean stop only) and at a clean stop, the
feature state is sealed as a ``state.snapshot`` (``audit.state.sealed``) and written to the
velocity snapshot file, and the account-risk state as a ``state.account-risk`` written to the file
beside it, which a restart then trusts against the sealed roots. Account risk is also sealed on
its own every ``account_risk_snapshot_every`` decisions (default ``ACCOUNT_RISK_SNAPSHOT_EVERY``;
0: with the feature state only): it has no window, and its copy is cheap. The state is read
between batches (nothing in flight: the pipeline's state is the log's up to this process's last
commit); the batcher waits while it is copied, the tree, the seal and the file are made beside
it on one thread.

The settings are any object with the fields of ``RuntimeSettings`` (``api.config.Settings`` is
one); the runtime keeps it as given, so a caller reads its own fields back from ``settings``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol

from sqlalchemy import Engine
from typing_extensions import TypeVar

from audit.decide.account_risk import AccountRiskPolicy
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.service import DecisionService
from audit.decide.types import Decision, Submission
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex, catch_up
from audit.screening.screener import Screener
from audit.state import snapshot as velocity_snapshot
from audit.state.account_risk_replay import AccountRiskReport
from audit.state.delta import DELTA_KIND, parse_delta
from audit.state.replay import ReplayReport, decision_pages
from audit.state.risk_snapshot import RestoredRisk, restore_account_risk, risk_file, save_risk
from audit.state.risk_snapshot_body import RiskState, SealedRiskSnapshot
from audit.state.sealed import SealedSnapshot
from inference.backends import Backend, load_backend
from inference.batcher import Priority
from inference.features import FeatureExtractor
from inference.model import ModelFiles
from inference.screening.screen import DEFAULT_BUDGET
from ledger import database
from ledger.append import CheckpointPolicy, Ledger
from wasm_rules import Sandbox

__all__ = ["ACCOUNT_RISK_SNAPSHOT_EVERY", "STATE_SNAPSHOT_EVERY", "Runtime", "RuntimeSettings",
           "open_runtime"]

log = logging.getLogger(__name__)

# Decisions between sealed state snapshots; by default none between clean stops: copying the state
# pauses the batcher (seconds for a state of 100,000 accounts), and a pause longer than the decision
# deadline turns the payments queued behind it into fail-safe HOLDs.
STATE_SNAPSHOT_EVERY = 0
# Decisions between sealed account-risk snapshots taken on their own: account risk has no window, so
# without one a start after a crash applies every decision since the last clean stop. Its copy is
# a dict of the accounts at risk (milliseconds), so it is on by default.
ACCOUNT_RISK_SNAPSHOT_EVERY = 100_000
# An idle decider catches up with the others' commits this often (Pipeline.catch_up), so that the
# request that ends its idle spell does not pay for all of them (one indexed read when none).
CATCH_UP_IDLE_S = 0.05


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

    def __init__(self, engine: Engine, origin: str, covered: int, ledger: Ledger, from_seq: int = 0) -> None:
        self._engine, self._origin, self._ledger = engine, origin, ledger
        self.covered = covered  # ledger size the windows were last replayed up to
        self.from_seq = from_seq  # the state is an empty one caught up from this seq

    def rebuild(self) -> tuple[FeatureExtractor, int, int | None]:
        """After a failed commit: the windows again from the ledger, the size they cover and the seq
        they were caught up from, None where deltas alone do not give them (called by the pipeline).

        Not while the signing key is unusable (``KeyFileError`` at once): a replay takes seconds,
        and every batch would pay it only to fail at its commit again."""
        self._ledger.require_signer()
        r = velocity_snapshot.restore(None, self._engine, self._origin)
        self.covered, self.from_seq = r.covered, r.from_seq
        return r.extractor, r.covered, r.origin


_Mark = tuple[int, int, bool, tuple[int, ...]]  # covered size, from_seq, after a commit of ours, counters


class _Snapshots:
    """When and how the runtime seals its feature state (see the module's docstring).

    A *mark* notes, between batches, the ledger size the pipeline's state is the log's up to and
    the pipeline's counters then; the state is snapshotted only while those counters are unchanged
    (no batch, catch-up, rollback or rebuild moved the state since)."""

    def __init__(self, pipeline: Pipeline, ledger: Ledger, windows: _Windows, path: Path, every: int,
                 restored: velocity_snapshot.Restored, risk: RestoredRisk, risk_every: int = 0) -> None:
        self._pipeline, self._ledger, self._windows, self._path = pipeline, ledger, windows, path
        self._risk_path = risk_file(path)
        self.risk_sealed: SealedRiskSnapshot | None = risk.sealed  # the newest sealed or restored
        self.every, self.risk_every = every, risk_every
        self._since = 0  # decisions sealed here since the last snapshot was taken
        self._risk_since = 0  # the same for account risk (sealed with each feature snapshot, or alone)
        self._mark: _Mark | None = (restored.covered, restored.from_seq, False, self._counters())
        self.sealed: SealedSnapshot | None = restored.sealed  # the newest sealed or restored
        self._job: Future[None] | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sealtrail-state-snapshot")

    def _counters(self) -> tuple[int, ...]:
        p = self._pipeline
        ex = p.extractor  # and what shows a state advanced beside the pipeline, in O(1)
        g = ex.graph.graph
        return (p.sealed, p.caught_up, p.rolled_back, p.sealed_at_rebuild, p.superseded, id(ex),
                int(p.velocity_stale), len(ex.state), ex.state.watermark, g.edges_logged, g.watermark or 0)

    def after_batch(self, decisions: Sequence[Decision]) -> None:
        """The service's ``after_batch``: note the mark, and snapshot every ``every`` decisions."""
        try:
            seqs = [d.seq for d in decisions if not getattr(d, "replayed", False)]
            if not seqs or self._pipeline.velocity_stale:
                return
            # a commit of ours: its decisions, then its summary and state delta (checked when sealed)
            self._mark = (max(seqs) + 3, self._windows.from_seq, True, self._counters())
            self._since += len(seqs)
            self._risk_since += len(seqs)
            features = bool(self.every) and self._since >= self.every
            risk = bool(self.risk_every) and self._risk_since >= self.risk_every
            if (features or risk) and (self._job is None or self._job.done()):
                self._take(features)
        except Exception:  # a snapshot is an optimisation: never fail a batch
            log.exception("state snapshot not taken")

    def after_catch_up(self) -> None:
        """The service's ``after_catch_up``: the state is the log's up to the pipeline's covered
        size, caught up from others' commits (not after a commit of ours)."""
        covered = self._pipeline.covered
        if covered is not None and not self._pipeline.velocity_stale:
            self._mark = (covered, self._windows.from_seq, False, self._counters())

    def _take(self, features: bool = True) -> Future[None] | None:
        """Copy the state at the mark (the batcher waits) and seal and write it on the snapshot thread:
        the feature state and account risk, or (``features`` False) account risk alone."""
        mark = self._mark
        if mark is None or mark[3] != self._counters():
            return None
        covered, from_seq, ours, _ = mark
        sealed, risk_sealed = self.sealed, self.risk_sealed
        policy = self._pipeline.account_risk.policy
        # that very state is sealed already where no decision came after the seq a snapshot covers
        features_done = not features or (sealed is not None and sealed.from_seq == from_seq
                                         and self._unchanged(sealed.covers_seq, covered))
        risk_done = risk_sealed is not None and risk_sealed.policy == policy and self._unchanged(
            risk_sealed.covers_seq, covered)
        if features_done and risk_done:
            return None
        data = None if features_done else velocity_snapshot.keyed_state_bytes(self._ledger.engine,
                                                                              self._pipeline.extractor)
        risk = None if risk_done else RiskState.of(self._pipeline.account_risk)
        if mark[3] != self._counters():  # the state moved meanwhile (a caller beside the service)
            return None
        if features:
            self._since = 0
        self._risk_since = 0
        self._job = self._thread.submit(self._seal, data, risk, policy, covered, from_seq, ours)
        return self._job

    def _unchanged(self, covers_seq: int, covered: int) -> bool:
        """Whether no decision sits after ``covers_seq`` in the first ``covered`` entries."""
        between = velocity_snapshot.decisions_between
        return covers_seq < covered and between(self._ledger.engine, covers_seq + 1, covered) == 0

    def _seal(self, data: bytes | None, risk: RiskState | None, policy: AccountRiskPolicy, covered: int,
              from_seq: int, ours: bool) -> None:
        try:
            if ours and not self._our_commit(covered):
                log.warning("state snapshot not sealed: seq %d is not this process's state delta",
                            covered - 1)
                return
        except Exception as exc:
            log.warning("state snapshot not sealed: %s", exc)
            return
        if data is not None:
            try:
                sealed = velocity_snapshot.seal(self._ledger, data, covered, from_seq, self._pipeline.decider)
                self.sealed = sealed
                velocity_snapshot.write(self._path, self._ledger.engine, self._ledger.origin, data, sealed)
                log.info("state snapshot of seq %d sealed at seq %d (%d accounts)", sealed.covers_seq,
                         sealed.seq, sealed.accounts)
            except Exception as exc:  # a snapshot is an optimisation: log, never fail the process
                log.warning("state snapshot not sealed or not written: %s", exc)
        if risk is not None:
            try:
                self.risk_sealed = got = save_risk(self._risk_path, self._ledger, risk, policy, covered,
                                                   self._pipeline.decider)
                log.info("account-risk snapshot of seq %d sealed at seq %d (%d accounts)", got.covers_seq,
                         got.seq, got.accounts)
            except Exception as exc:  # the same: the next start rebuilds account risk from the whole log
                log.warning("account-risk snapshot not sealed or not written: %s", exc)

    def _our_commit(self, covered: int) -> bool:
        """Whether the entry at ``covered - 1`` is the state delta this pipeline sealed with its last
        commit (the one the mark was taken after)."""
        for page in decision_pages(self._ledger.engine, covered - 1, covered, DELTA_KIND):
            for seq, env in page:
                d = parse_delta(seq, env.get("record"))
                return d.decider == self._pipeline.decider
        return False

    def close(self) -> None:
        """At a clean stop (the service closed): the state at the mark sealed and written, if it
        still is the state at the mark; then the snapshot thread ends."""
        try:
            if self._job is not None:
                self._job.result()
            job = self._take()
            if job is not None:
                job.result()
        except Exception as exc:
            log.warning("state snapshot not taken at the stop: %s", exc)
        finally:
            self._thread.shutdown(wait=True)


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
    _snapshots: _Snapshots = field(repr=False)
    _closed: bool = field(default=False, repr=False)
    account_risk: AccountRiskReport | None = None  # what the account-risk rebuild read at start
    account_risk_snapshot: SealedRiskSnapshot | None = None  # where account risk began (None: the whole log)
    screener: Screener | None = None  # the sanctions lists in force, indexed

    @classmethod
    def open(cls, s: S, *, operator: str = "sealtrail-serve") -> Runtime[S]:
        """Open the ledger at ``s.db`` and everything that decides into it.

        ``operator`` names the local principal that registers the model and bootstraps the
        shipped ruleset on a fresh ledger. Raises ``SchemaError`` / ``KeyFileError`` (ledger),
        ``ModelRegistryError`` / ``GovernanceError`` / ``AccountRiskError`` (audit; the last for a
        bad ``account_risk_*`` setting), ``InferenceError``, ``RuleError``."""
        policy = AccountRiskPolicy.from_settings(s)  # refused before anything is opened
        every = getattr(s, "state_snapshot_every", None)
        every = STATE_SNAPSHOT_EVERY if every is None else every
        if type(every) is not int or every < 0:
            raise ValueError(f"state_snapshot_every is a number of decisions (0: at a clean stop only), "
                             f"not {every!r}")
        risk_every = getattr(s, "account_risk_snapshot_every", None)
        risk_every = ACCOUNT_RISK_SNAPSHOT_EVERY if risk_every is None else risk_every
        if type(risk_every) is not int or risk_every < 0:
            raise ValueError(f"account_risk_snapshot_every is a number of decisions (0: with the state "
                             f"snapshots only), not {risk_every!r}")
        max_age = getattr(s, "screening_max_age_days", None)
        if max_age is not None and (type(max_age) is not int or max_age < 0):
            raise ValueError(f"screening_max_age_days is a number of days (0: no limit), not {max_age!r}")
        budget = getattr(s, "screening_budget", None)
        budget = DEFAULT_BUDGET if budget is None else budget
        if type(budget) is not int or budget < 1:
            raise ValueError(f"screening_budget is a positive number of units, not {budget!r}")
        engine = database.open_engine(s.db)
        try:
            # the key store the settings name (a pkcs11: token, or the key file), where they name one
            ledger = database.open_ledger(engine, getattr(s, "signing_key_store", s.key_file),
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
            windows = _Windows(engine, ledger.origin, restored.covered, ledger, restored.from_seq)
            restored_risk = restore_account_risk(risk_file(s.velocity_snapshot_file), engine, ledger.origin,
                                                 policy, size=restored.covered)
            risk = restored_risk.state
            screener = Screener(engine, max_age_days=max_age, budget=budget)
            screener.refresh(wait=True)
            pipeline = Pipeline(ledger, scorer, rules, extractor=restored.extractor, index=TraceIndex(),
                                rebuild=windows.rebuild, account_risk=risk, covered=restored.covered,
                                screener=screener, state_from=restored.origin)
            pipeline.rules_source = lambda: governance.load_active(sandbox)  # another decider activated
            service = DecisionService(pipeline, max_batch=s.max_batch,
                                      timeout_s=s.decision_timeout_ms / 1000, catch_up_idle_s=CATCH_UP_IDLE_S)
            snapshots = _Snapshots(pipeline, ledger, windows, s.velocity_snapshot_file, every, restored,
                                   restored_risk, risk_every)
            service.after_batch = snapshots.after_batch
            service.after_catch_up = snapshots.after_catch_up
        except BaseException:
            sandbox.close()
            scorer.close()
            engine.dispose()
            raise
        return cls(s, engine, ledger, sandbox, scorer, model, governance, pipeline, service, restored.report,
                   restored.from_snapshot, windows, snapshots, account_risk=restored_risk.report,
                   account_risk_snapshot=restored_risk.sealed, screener=screener)

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
        """Finish what is queued, seal and save the feature state (a ``state.snapshot`` and the
        velocity snapshot file) and account risk (a ``state.account-risk`` and its file), release
        the sandbox, model and database. A second call does nothing; deciding after it is refused."""
        if self._closed:
            return
        self._closed = True
        self.service.close()
        self._snapshots.close()
        self.sandbox.close()
        self.scorer.close()
        self.engine.dispose()

    def __enter__(self) -> Runtime[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

def open_runtime(settings: S, *, operator: str = "sealtrail-serve") -> Runtime[S]:
    """``Runtime.open``: the scoring path's one entry point (see docs/python-api.md)."""
    return Runtime.open(settings, operator=operator)
