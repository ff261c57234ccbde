"""The decision pipeline: one batch -> features -> model -> one sandboxed rule call -> one commit.

``Pipeline.decide(submissions)`` returns decisions only after their records are durable in
the ledger (fail-closed): if the commit fails it raises ``LedgerUnavailableError`` and no
decision exists. Faults inside the batch do not crash it: a sandbox fault makes every
decision of the batch a recorded fail-safe HOLD (``SANDBOX_FAULT``), a model failure leaves
the score missing (the pack's ``MODEL_SCORE_MISSING`` rule then holds the payment for
review, and the record says ``MODEL_ERROR``), and a request whose deadline passed in the
queue is recorded as a fail-safe HOLD (``DEADLINE_EXCEEDED``) without being scored.

Each commit seals, after the batch's decisions, its ``decision.summary`` (``audit.decide.summary``:
outcome, fired rule ids and keyed accounts of each, linked to the summary before it under the
sequencer lock), which lets an export bundle prove its selection complete, and then its
``state.delta`` (``audit.state.delta``: what each decision advanced the feature state by, accounts
keyed under the ledger's state key), from which any process of the ledger catches its state up.
The pipeline's feature state is therefore always keyed under the ledger's state key: a state
given in clear is keyed at the first batch, one under another key is refused.

Every recorded transaction, scored or not, advances the velocity windows in ledger order, so
replaying the ledger's recent decisions rebuilds the same state (``audit.state.replay``). Each
batch journals what it adds to the windows (``VelocityState.begin_journal``); when a commit
fails after the windows advanced, the pipeline marks them stale and, before the next batch,
takes back exactly what the batches that were not committed added (the failed one and any
prepared behind it): the windows are again the replay of the ledger, at the cost of the failed
batches alone, never a replay of the whole window.

Each decision also adds risk points to its originator's and beneficiary's keyed accounts
(``audit.decide.account_risk``); the record states both accounts' risk and any account alert.
The account-risk state changes only when a batch commits: a batch is assessed over the committed
state and the batches prepared before it on the same windows, applied once the ledger holds it,
and forgotten if its commit fails or is refused, so the state is always the rebuild of the ledger
(``audit.state.account_risk_replay``) with nothing to take back.

Each batch is screened against the sanctions lists in force (``screener``,
``audit.screening.screener``: one set of list versions per batch): every party, agent and line of
free text (``inference.screening``), the screening columns of ``sealtrail.features/7`` appended to
the extracted ones, and the lists and hits stated in the record (version 5, ``screening``). A
request whose deadline passed in the queue is not screened, and its record says so. Without a
screener, or with no list in force, the columns say "not screened" (NaN) and the record names no
list. A name hit on a party whose account a good-guy clearance in force covers
(``audit.screening.clearance``) is named in the record as cleared and raises no column. The lists'
search reads no decision state, so it runs before the batch takes any lock and is kept if the batch
is prepared again; the clearances are applied when the batch is prepared.

When the scorer carries its model (every ``inference.backends`` backend does), each decision the
model scored high or the rules held also records its reason codes (``audit.decide.explanation``),
attributed on the numpy reference model whatever backend scored, and the record is version 3.
A scorer that states the precision it computes at (``precision``: every ``inference.backends``
backend does) has it sealed in each record's ``model`` (version 6).

Several pipelines (processes, hosts) may decide into one log (``audit.decide.log_tip``). Before a
batch is prepared, with none of its own in flight, a pipeline catches its feature state and its
account risk up with what the others sealed since (their state deltas; the decision records of
commits whose delta states no account risk, sealed by an earlier release); its
commit is then refused by the database, nothing written, if another pipeline committed after that
catch-up, and the batch is taken back, caught up and prepared again (``superseded`` counts them).
Whichever pipelines decide, every record is the one a single pipeline deciding the same batches
in the same log order would have sealed. A ruleset activation another pipeline sealed is met by
the catch-up, and the rules are loaded again (``rules_source``) before the batch is prepared.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from audit.decide.account_risk import AccountRiskState, Pending, RiskEvent, event_hour, points_milli
from audit.decide.account_secret import load_keyer, load_state_key
from audit.decide.explanation import Explanation, explain_decisions
from audit.decide.fixed_point import quantise_rows, quantise_scores
from audit.decide.idempotency import with_keys
from audit.decide.log_tip import StateSuperseded, activations_between, fence, newest_delta
from audit.decide.record import (
    DECISION_KIND,
    FAIL_SAFE_DECISION,
    DecisionBatch,
    DecisionColumns,
    DecisionInputs,
    RuleHit,
    decision_bodies,
    jcs_fired,
)
from audit.decide.summary import SUMMARY_KIND, AccountKeyer, entries_jcs, summary_body
from audit.decide.types import ActiveRules, Decision, DecisionIndex, Scorer, Submission, scorer_precision
from audit.errors import StateDeltaError
from audit.screening.clearance import party_of
from audit.screening.clearance_state import Clearance
from audit.screening.evidence import ScreeningEvidence
from audit.screening.screener import InForce, Screener
from audit.state.account_risk_replay import apply_records, risk_bodies, risk_items
from audit.state.delta import DELTA_KIND, decider_name, delta_body, entries_bytes, risk_bytes
from audit.state.replay import catch_up, delta_pages
from inference.features import FeatureExtractor, StateDelta
from inference.graph import GraphFeatures
from inference.messages import PARSER, Transaction
from inference.model import MlpModel
from inference.schema import FEATURE_SCHEMA, SCREENING_NAMES, feature_digits
from inference.screening.features import UNSCREENED, screening_values
from inference.screening.screen import DEFAULT_BUDGET, Hit, Screening, screen
from inference.state_store import features_state_bytes, read_features_state
from inference.velocity import Journal, VelocityState, key_id
from ledger import LedgerUnavailableError, Record, store
from ledger.append import Ledger
from ledger.jcs import Jcs, canonical_bytes
from ledger.records import format_time
from wasm_rules import OUTCOMES, SandboxFault

__all__ = ["Pipeline"]

F64 = np.float64
_DIGITS = feature_digits(FEATURE_SCHEMA)  # the fixed units a version 4 record states each column in
log = logging.getLogger(__name__)
_Hits = tuple[tuple[RuleHit, ...], Jcs]  # fired rules, and the canonical bytes of the record's "fired"


def _us(t0: float, t1: float) -> int:
    return round((t1 - t0) * 1e6)


class Pipeline:
    """Decides batches; one instance per ledger (it owns the velocity state).

    After a failed commit the windows count batches the ledger does not hold; before the next
    batch the pipeline takes back what those batches added (their journals). ``rebuild``, which
    returns the velocity windows replayed from the ledger, is only the fallback where that is
    impossible (a state that keeps no journal); without it, every batch after such a failure is
    then refused (``LedgerUnavailableError``)."""

    def __init__(self, ledger: Ledger, scorer: Scorer, rules: ActiveRules, *,
                 extractor: FeatureExtractor | None = None,
                 index: DecisionIndex | None = None,
                 rebuild: Callable[[], FeatureExtractor | tuple[FeatureExtractor, int]
                                   | tuple[FeatureExtractor, int, int | None]] | None = None,
                 keyer: AccountKeyer | None = None,
                 account_risk: AccountRiskState | None = None,
                 covered: int | None = None,
                 decider: str | None = None,
                 screener: Screener | None = None,
                 state_from: int | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """``keyer`` keys the accounts of the ``decision.summary`` sealed with each batch (and of
        account risk); by default the ledger's own (``audit.decide.account_secret``), read at the
        first batch. ``account_risk`` is the state rebuilt from the ledger
        (``audit.state.account_risk_replay``); by default an empty one under the default policy,
        right only for a ledger that holds no decision yet. ``covered`` is the ledger size the
        feature state and account risk given are the rebuild of (by default: 0 when neither is
        given, else the size at the first batch); what other deciders seal after it is caught up
        before each batch. ``screener`` gives the sanctions lists each batch is screened against
        (None: not screened). ``decider`` names this pipeline in the state delta of each commit
        (default: host name, process id and a random tag). ``state_from`` is the seq the given
        feature state was caught up from, starting empty (sealed in each state delta; by default 0
        when the pipeline starts on nothing, else not known). ``rebuild`` may
        return the extractor alone (taken to cover the ledger as it is when it returns), with the
        size it covers, or with that size and the seq it was caught up from."""
        self.ledger = ledger
        self._keyer = keyer
        self.scorer = scorer
        self.screener = screener
        model = getattr(scorer, "model", None)
        self._explain_model = model if isinstance(model, MlpModel) else None  # None: version 2 records
        self._rules = rules
        self.extractor = extractor if extractor is not None else FeatureExtractor()
        self.account_risk = account_risk if account_risk is not None else AccountRiskState()
        self._clock = clock
        self.index = index
        # called with the rows the model scored, each batch (api: the feature drift on /metrics); it must
        # not raise, and costs the batch's own time
        self.on_scored: Callable[[npt.NDArray[F64]], None] | None = None
        self._lock = threading.Lock()  # one batch at a time prepares: the windows advance in ledger order
        self._state = threading.Lock()  # guards velocity_stale and _epoch together
        self._epoch = 0  # bumped when the windows went stale; a batch prepared before is refused
        self._tickets = 0  # batches prepared so far; each commits in its ticket's turn
        self._committing = 0  # the ticket whose turn it is to commit
        self._turn = threading.Condition()
        self.velocity_stale = False
        self._rebuild = rebuild
        if covered is None and extractor is None and account_risk is None:
            covered = 0  # both start empty: the state of no entry, caught up with the whole log at first
        self._covered = covered  # ledger size the feature state and account risk are the rebuild of
        # where the feature state was caught up from, starting empty (sealed in each state delta):
        # 0 for a pipeline that starts on an empty ledger with nothing given; None when not known
        self.state_from: int | None = state_from if state_from is not None else 0 if covered == 0 else None
        self.decider = decider if decider is not None else decider_name()
        self._tip: int | None = None  # seq of the newest state delta the state includes
        self._tip_read = False  # _tip is read from the ledger at the first batch
        self._superseded: set[int] = set()  # epochs that ended because another decider committed first
        self.superseded = 0  # batches refused because another decider committed first, then prepared again
        self.caught_up = 0  # decisions of other deciders applied to the state
        self._quiet = 0  # catch-up reads in a row that found the log as this pipeline left it
        # the ledger's active rules, loaded again when a catch-up meets an activation another decider
        # sealed (the runtime's governance); None: activations are not followed
        self.rules_source: Callable[[], ActiveRules] | None = None
        self.locked = 0  # batches prepared under the sequencer lock (after another decider got ahead)
        self._contended_until = 0.0  # time.monotonic() until which batches are prepared under the lock
        self.sealed = 0  # decisions this pipeline sealed
        self.sealed_at_rebuild = 0  # self.sealed when the windows were last rebuilt (0: as given)
        self.rolled_back = 0  # batches whose additions to the windows were taken back (not committed)
        self._pending: dict[int, Journal | None] = {}  # ticket -> its journal, until it commits
        self._journals_usable = True  # False once taking one back failed: then only a rebuild will do
        self._state_key: tuple[bytes, str] | None = None  # the ledger's state key and its id, read once
        self._fired_cache: dict[object, Any] = {}  # bitset words -> (hits, canonical "fired")
        self._principals: dict[object, Jcs] = {}  # plain principal -> canonical bytes

    @property
    def covered(self) -> int | None:
        """The ledger size the feature state and account risk are the log's up to, when no batch
        is in flight (None: not read yet)."""
        return self._covered

    @property
    def rules(self) -> ActiveRules:
        return self._rules

    def activate(self, rules: ActiveRules) -> None:
        """Switch rule modules; the next batch uses the new one, a running batch the old one."""
        self._rules = rules

    def decide(self, subs: Sequence[Submission]) -> list[Decision]:
        """Decide and seal ``subs`` in one commit; returns only once the records are durable.

        Thread-safe, and it pays to call it from two threads: batches are prepared (features,
        model, rules, records) one at a time and committed one at a time in that same order, so
        one batch's records are built while the one before it commits.

        A batch another decider got ahead of is prepared again under the sequencer lock (caught
        up, prepared and committed while no other decider can commit), and so is every batch until
        ``_CONTENDED_S`` seconds pass in which none of them met another decider's commit: under
        contention the deciders take turns instead of preparing batches that would be refused."""
        if not subs:
            return []
        # the lists' search reads no decision state: done here, outside every lock (deciders screen side
        # by side, none holds the sequencer for it), and kept if the batch is prepared again; the
        # clearances are applied when the batch is prepared (``_screen``), as the ledger has them then
        screened = self._screened(subs)
        if time.monotonic() < self._contended_until:
            return self._decide_locked(subs, screened)
        try:
            return self._decide_once(subs, screened)
        except StateSuperseded:
            self.superseded += 1
            self._quiet = 0
            self._contended_until = time.monotonic() + _CONTENDED_S
            return self._decide_locked(subs, screened)

    def catch_up(self) -> int:
        """Bring the feature state and account risk up to the log now, if no batch of ours is in
        flight and no other call holds the pipeline; how many decisions of others it applied (0 if
        busy or already up to date). For a decider with nothing to do: catching up then keeps its
        next batch from paying for every commit the others made meanwhile (after a long idle
        spell, seconds: longer than a request's deadline)."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            with self._state:
                if self._pending or self.velocity_stale:
                    return 0
            before = self.caught_up
            self._keyed_state()
            self._catch_up()
            return self.caught_up - before
        finally:
            self._lock.release()

    def _decide_locked(self, subs: Sequence[Submission], screened: _Screened) -> list[Decision]:
        """Catch up, prepare and commit ``subs`` under the sequencer lock (``Ledger.append_many``
        ``build``), in this pipeline's ticket order; no other batch of ours prepares meanwhile."""
        with self._lock:
            ticket = self._tickets
            self._tickets += 1
            self.locked += 1
            return self._seal(subs, None, ticket, 0, make=lambda: self._make_locked(subs, screened, ticket))

    def _make_locked(self, subs: Sequence[Submission], screened: _Screened,
                     ticket: int) -> tuple[_Prepared, int]:
        """Under ``_lock`` and the sequencer lock, at ``ticket``'s turn (every batch of ours before it
        committed or failed): the batch prepared on the state caught up with the whole log."""
        before = self.caught_up
        prepared, journal, epoch = self._prepare_on_state(subs, screened, catch_up=True)
        if self.caught_up > before:  # others still commit: a batch prepared outside the lock would be refused
            self._contended_until = time.monotonic() + _CONTENDED_S
        with self._state:
            self._pending[ticket] = journal
        return prepared, epoch

    def _prepare_on_state(self, subs: Sequence[Submission], screened: _Screened,
                          catch_up: bool) -> tuple[_Prepared, Journal | None, int]:
        """Under ``_lock``: the windows recovered if stale and keyed, caught up with the log (if
        ``catch_up``, or when no batch of ours is in flight), then advanced by ``subs`` under a
        journal; the batch prepared on them, its journal, and the epoch it was prepared in."""
        with self._state:
            stale, epoch = self.velocity_stale, self._epoch
        if stale:  # every batch prepared on the stale windows fails or is refused (see _seal)
            self._recover()
            with self._state:
                self.velocity_stale = False
                epoch = self._epoch
        state_key_id = self._keyed_state()
        with self._state:
            idle = not self._pending  # no batch of ours in flight: the state is the log's up to _covered
        # Idle, the state ends where this pipeline's last commit left the log. Another decider may
        # have committed since; the commit's fence would then refuse the batch (prepared again,
        # caught up, under the lock). So once reads keep finding nobody else, they are skipped.
        if catch_up or not self._tip_read or (idle and self._quiet < _QUIET_READS):
            self._catch_up()
        t0 = self._clock()
        state = self.extractor.state
        journal = state.begin_journal() if isinstance(state, VelocityState) else None
        deltas: list[StateDelta] = []
        try:  # the windows advance: from here on, no commit means stale windows
            txs, ats = [s.transaction for s in subs], [s.received_at for s in subs]
            rows = self.extractor.extract(txs, ats, deltas)
            prepared = self._prepare(subs, rows, screened, t0, epoch,
                                     (state_key_id, entries_bytes(deltas), self.state_from))
        except BaseException:
            if journal is None or not self._take_back([journal]):  # the latest batch: back at once
                self._invalidate(epoch)
            raise
        finally:
            if journal is not None:
                state.end_journal()
        return prepared, journal, epoch

    def _decide_once(self, subs: Sequence[Submission], screened: _Screened) -> list[Decision]:
        with self._lock:  # one batch at a time advances the windows: the order of the ledger
            prepared, journal, epoch = self._prepare_on_state(subs, screened, catch_up=False)
            ticket = self._tickets
            self._tickets += 1
            with self._state:
                self._pending[ticket] = journal
        return self._seal(subs, prepared, ticket, epoch)

    def _keyed_state(self) -> str:
        """Under ``_lock``: the id of the ledger's state key, the extractor's state keyed under it
        (a state in clear is keyed now; ``StateDeltaError`` for one under another key)."""
        if self._state_key is None:
            key = load_state_key(self.ledger.engine)
            self._state_key = (key, key_id(key))
        key, kid = self._state_key
        ex = self.extractor
        state = ex.state
        if not isinstance(state, VelocityState):
            raise StateDeltaError("the pipeline seals state deltas: its feature state must be a "
                                  "VelocityState")
        if state.key_id == kid:
            return kid
        if state.key_id is not None:
            raise StateDeltaError(f"the feature state is keyed under {state.key_id}, not under the ledger's "
                                  f"state key {kid}: its deltas would not apply to the ledger's state")
        if len(state) == 0 and ex.graph.graph.accounts == 0:
            self.extractor = FeatureExtractor(ex.tables, VelocityState(key), GraphFeatures(ex.graph.config))
        else:  # a state built in clear (a caller's replay): every account keyed, values unchanged
            keyed, graph = read_features_state(features_state_bytes(ex), key)
            self.extractor = FeatureExtractor(ex.tables, keyed, graph)
        return kid

    def _catch_up(self) -> None:
        """Under ``_lock``, no batch of ours in flight: apply what other deciders sealed since the
        state was last brought up to the log (their state deltas, and their decision records to the
        account risk), and note the newest delta the state now ends with."""
        engine = self.ledger.engine
        if not self._tip_read:
            with engine.connect() as conn:
                if self._covered is None:
                    self._covered = store.tail(conn)[0]
                self._tip = newest_delta(conn, self._covered)
            self._tip_read = True
        covered = self._covered
        assert covered is not None
        with engine.connect() as conn:
            end = store.tail(conn)[0]
            if end == covered:
                self._quiet += 1
                return
            self._quiet = 0
            activated = activations_between(conn, covered, end)
        if activated and self.rules_source is not None:  # another decider activated a ruleset
            self._rules = self.rules_source()  # before the state moves: a failure here changes nothing
        # every read that can fail before anything changes; the features' part journaled, taken back
        # whole if it fails half-way (never applied twice by the next catch-up). Account risk comes
        # from the same deltas (version 3; the records of decisions no such delta speaks for)
        pages = list(delta_pages(engine, covered, end))
        risk = risk_items(engine, pages, covered, end)
        state = self.extractor.state
        journal = state.begin_journal() if isinstance(state, VelocityState) else None
        try:
            report = catch_up(engine, self.extractor, covered, end, pages=pages)
        except BaseException:
            if journal is not None:
                state.end_journal()
                if self._take_back([journal]):
                    raise
            self._invalidate(self._epoch)  # could not take it back: rebuilt before the next batch
            raise
        if journal is not None:
            state.end_journal()
        apply_records(self.account_risk, risk)  # in memory: the decisions' own sealed account risk
        if report.replayed != report.from_deltas or report.missing_payload or report.foreign_deltas:
            self.state_from = None  # payloads fed the state too: the deltas alone no longer give it
        self.caught_up += report.replayed
        if report.last_delta is not None:
            self._tip = report.last_delta
        self._covered = report.to_seq

    def _recover(self) -> None:
        """Under ``_lock``, the windows stale: take back what every batch not committed added
        (each is refused or failed: it was prepared on the stale windows); else rebuild them."""
        with self._state:
            pending, self._pending = self._pending, {}
        journals = [pending[t] for t in sorted(pending)]
        if (self._journals_usable and all(j is not None for j in journals)
                and self._take_back([j for j in journals if j is not None])):
            return
        if self._rebuild is None:
            with self._state:
                self._pending = pending  # still to take back: the next batch tries again
            raise LedgerUnavailableError("velocity state is stale after a failed commit and "
                                         "no rebuild is configured")
        got = self._rebuild()
        if isinstance(got, tuple):
            before = self._covered
            extractor, covered = got[0], got[1]
            self.state_from = got[2] if len(got) > 2 else None
            if before is not None and covered > before:  # other deciders' decisions it holds
                risk = list(risk_bodies(self.ledger.engine, before, covered))
                apply_records(self.account_risk, risk)
            self.extractor, self._covered = extractor, covered
            self._tip_read = False  # the newest delta before the size it covers, read at the catch-up
        else:
            self.extractor = got
            self.state_from = None
            self._covered, self._tip_read = None, False  # it covers the ledger as it is now
        self.sealed_at_rebuild = self.sealed  # no batch commits meanwhile: every one failed
        self._journals_usable = True

    def _take_back(self, journals: list[Journal]) -> bool:
        """Undo what ``journals`` (the latest, in order) added to the windows; False if it cannot."""
        try:
            self.extractor.state.rollback(journals)
        except Exception:  # a bug, never expected: the windows are rebuilt from the ledger instead
            log.exception("velocity windows: taking back %d uncommitted batch(es) failed", len(journals))
            self._journals_usable = False
            return False
        self.rolled_back += len(journals)
        return True

    def _invalidate(self, epoch: int) -> None:
        """The windows of ``epoch`` counted a batch the ledger does not hold: recover before the
        next batch (``_recover``), and fail every batch already prepared on them."""
        with self._state:
            if self._epoch == epoch:
                self._epoch += 1
                self.velocity_stale = True

    def _seal(self, subs: Sequence[Submission], prepared: _Prepared | None, ticket: int, epoch: int,
              make: Callable[[], tuple[_Prepared, int]] | None = None) -> list[Decision]:
        """Commit in ticket order (the order the windows advanced in); a batch prepared on windows
        that a failed commit made stale is refused, never committed. Without ``prepared``, ``make``
        prepares the batch under the sequencer lock and says on which epoch."""
        clock = self._clock
        t_ready = clock()
        with self._turn:
            while self._committing != ticket:
                self._turn.wait()
        got: list[_Prepared] = [] if prepared is None else [prepared]
        try:
            t4 = clock()
            if prepared is not None:
                with self._state:
                    refused = self._epoch != epoch
                    superseded = epoch in self._superseded
                if refused:
                    if superseded:
                        raise StateSuperseded(None, None)
                    raise LedgerUnavailableError("an earlier batch's commit failed and this batch's "
                                                 "features counted it; nothing written")

            def build(conn: Any, seq: int) -> list[Record]:
                nonlocal epoch, t_ready, t4
                assert make is not None
                p, epoch = make()
                got.append(p)
                t_ready = t4 = clock()  # prepared under the lock, at its turn: no wait to count
                return p.records

            def alongside(conn: Any, receipts: list[Any]) -> None:
                index, meta = self.index, got[0].meta
                effect = None if index is None else (lambda c, rs: index.write(c, subs, meta, rs))
                effect = with_keys(subs, effect)  # idempotency keys: checked and written under the lock
                if effect is not None:
                    effect(conn, receipts)

            def tail(conn: Any, seq: int) -> list[Record]:
                p = got[0]
                n = len(p.records)
                # first (nothing inserted yet): no other decider committed, and no ruleset was
                # activated, since this batch's state and rules
                prev = fence(conn, seq - n, self._tip, self._covered, p.cleared_at, p.used)
                return _commit_tail(p.key_id, p.summary, n, *p.deltas, self.decider, prev)(seq)
            if prepared is not None:
                sealed = self.ledger.append_many(prepared.records, alongside=alongside, tail=tail)
            else:
                sealed = self.ledger.append_many([], alongside=alongside, tail=tail, build=build)
            prepared = got[0]
            n = len(prepared.records)
            receipts = sealed[:n]
            if len(sealed) > n + 1:  # decisions, summary, delta: the state now ends with this delta
                self._tip = sealed[n + 1].seq
            self._covered = sealed[-1].seq + 1  # still this batch's turn: one writer
            self.sealed += len(receipts)  # still this batch's turn: one writer
            self.account_risk.commit(prepared.risk)  # in the ledger: its points count from now on
            with self._state:
                self._pending.pop(ticket, None)  # in the ledger: its additions stay
        except BaseException as exc:
            if got:
                self.account_risk.discard(got[0].risk)  # not in the ledger: its points never counted
            if isinstance(exc, StateSuperseded):
                with self._state:
                    self._superseded.add(epoch)
                    if len(self._superseded) > 64:  # bounded: batches of an epoch that old are long gone
                        self._superseded.discard(min(self._superseded))
            self._invalidate(epoch)
            raise
        finally:
            with self._turn:
                self._committing += 1
                self._turn.notify_all()
        t5 = clock()
        t0, stage, outs, fired, why = prepared.t0, prepared.stage, prepared.outs, prepared.fired, prepared.why
        after = {**stage, "seal": _us(t0, t_ready) - sum(stage.values()), "wait": _us(t_ready, t4),
                 "ledger": _us(t4, t5), "total": _us(t0, t5)}
        score_list, risks, said = prepared.scores, prepared.risk.results, prepared.explanations
        return [Decision(r.trace_id, r.seq, r.leaf_hash.hex(), r.recorded_at, outs[i],
                         None if math.isnan(score_list[i]) else score_list[i], fired[i][0], why[i],
                         {"queue": subs[i].queue_us, **after}, account_risk=risks[i],
                         explanation=None if said is None else said[i])
                for i, r in enumerate(receipts)]

    def _prepare(self, subs: Sequence[Submission], rows: npt.NDArray[F64], screened: _Screened, t0: float,
                 epoch: int, deltas: _StateDeltas) -> _Prepared:
        """Model, rules, account risk and the records of a batch whose feature rows are ``rows``
        and whose lists' search is ``screened``.

        The rows and then the scores are first put in the fixed units a version 4 record states
        (``audit.decide.fixed_point``): the model, the rules and account risk read exactly the
        numbers the record holds."""
        clock, rules, n = self._clock, self._rules, len(subs)
        ts = clock()
        cols, evidence, cleared_at = self._screen(subs, screened)
        rows, scaled = quantise_rows(np.hstack([rows, cols]), _DIGITS)
        t1 = clock()
        live = np.array([not s.expired for s in subs])
        scores = np.full(n, math.nan)
        model_error = None
        if live.any():
            try:
                scores[live] = self.scorer.predict(rows[live])
            except Exception as exc:  # any backend failure: score missing, recorded, never a crash
                model_error = f"MODEL_ERROR: {type(exc).__name__}: {exc}"
            else:
                scores = quantise_scores(scores)[0]
                if self.on_scored is not None:
                    self.on_scored(rows[live])
        t2 = clock()
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
        stage = {"features": _us(t0, ts), "screening": screened.us + _us(ts, t1), "model": _us(t1, t2),
                 "rules": _us(t2, t3)}
        outs = [OUTCOMES[k] for k in outcomes.tolist()]
        explanations = None
        if self._explain_model is not None:
            explanations = explain_decisions(self._explain_model, rows, scores.tolist(), outs)
            stage["explain"] = _us(t3, clock())
        if sandbox_fault is not None or fired_words is None:
            fired: list[_Hits] = [_NO_HITS] * n
        else:
            fired = self._fired(rules, fired_words)
        why = [("DEADLINE_EXCEEDED" if s.expired else sandbox_fault if sandbox_fault is not None
                else model_error) for s in subs]
        for i, s in enumerate(subs):
            if s.expired:
                fired[i] = _NO_HITS
        keyer = self._keyer
        if keyer is None:
            keyer = self._keyer = load_keyer(self.ledger.engine)
        risk = self._assess(subs, scores, outs, why, keyer, epoch)
        try:
            prepared = self._finish(subs, rows, scaled, scores, outs, fired, why, fuel, stage, rules, keyer,
                                    risk,
                                    # the batch's start moved back by the screening done before its state
                                    # was taken: the stages, screening included, add up to the total
                                    t0 - screened.us / 1e6, explanations, deltas, evidence)
        except BaseException:
            self.account_risk.discard(risk)
            raise
        if cleared_at is None:
            return prepared
        used = frozenset(seq for ev in evidence for _, seq in ev.cleared)
        return replace(prepared, cleared_at=cleared_at, used=used)

    def _screened(self, subs: Sequence[Submission]) -> _Screened:
        """Each submission searched in the lists in force (None for one whose deadline passed), and
        the microseconds it took: a function of the submissions and the lists alone, never of the
        decision state, so it needs no lock."""
        t = self._clock()
        in_force: InForce | None = None if self.screener is None else self.screener.current()
        index = None if in_force is None else in_force.index
        if in_force is None or index is None:
            return _Screened(None, [], _us(t, self._clock()))
        budget = self.screener.budget if self.screener is not None else DEFAULT_BUDGET
        found = [None if s.expired else screen(s.transaction, index, budget=budget) for s in subs]
        return _Screened(in_force, found, _us(t, self._clock()))

    def _screen(self, subs: Sequence[Submission],
                screened: _Screened) -> tuple[npt.NDArray[F64], list[ScreeningEvidence], int | None]:
        """The screening columns of each submission (one row each) and what its record states, from
        the lists' search (``_screened``) with the clearances in force now: a batch prepared under
        the sequencer lock reads them as the ledger has them then, a revocation sealed since the
        search included. Third: the seq of the newest clearance record the batch's cleared hits were
        checked against (None: it cleared none), which its commit checks is still the newest."""
        n = len(subs)
        in_force = screened.in_force
        cols = np.empty((n, len(SCREENING_NAMES)), dtype=F64)
        evidence: list[ScreeningEvidence] = []
        cleared_at: int | None = None
        if in_force is None:
            cols[:] = UNSCREENED
            none = ScreeningEvidence((), ())
            return cols, [_EXPIRED if s.expired else none for s in subs], None
        refs = in_force.refs
        max_age = self.screener.max_age_days if self.screener is not None else None
        budget = self.screener.budget if self.screener is not None else DEFAULT_BUDGET
        stale: dict[object, tuple[str, ...]] = {}
        plain: dict[tuple[str, ...], ScreeningEvidence] = {}  # no hit: one object (and its bytes) a batch
        # the clearances as the ledger has them, read once a batch, when a payment is first about to
        # clear a hit: every payment of the batch is checked against that one reading, whose seq the
        # commit's fence checks is still the newest (two readings would let a revocation sealed
        # between them through for the payments checked against the first)
        reading: list[tuple[int, Mapping[tuple[str, str, str], tuple[Clearance, ...]]]] = []

        def clearances() -> tuple[int, Mapping[tuple[str, str, str], tuple[Clearance, ...]]]:
            if not reading:
                reading.append(self.screener.cleared_as_of() if self.screener is not None
                               else (in_force.covers, in_force.cleared))
            return reading[0]

        for i, s in enumerate(subs):
            got = screened.found[i]
            if got is None:  # its deadline passed in the queue
                cols[i] = UNSCREENED
                evidence.append(_EXPIRED)
                continue
            day = s.received_at.astimezone(UTC).date()  # the record's day: its time is stated in UTC
            findings = stale.get(day)
            if findings is None:
                findings = stale[day] = in_force.stale(day, max_age)
            cleared: tuple[tuple[Hit, int], ...] = ()
            if in_force.cleared and got.hits:
                got, cleared = self._cleared(s.transaction, got, in_force, day, clearances)
                if cleared:
                    cleared_at = clearances()[0]
            cols[i] = screening_values(got)
            if got.stopped is not None:  # version 7: where it stopped, and a word for the officer
                said = (*findings, f"not screened in full: screening stopped in {got.stopped} at its budget "
                                   f"of {budget:,} units (a free text of very many listed words)")
                evidence.append(ScreeningEvidence(refs, got.hits, said, cleared, got.stopped, got.budget))
            elif got.hits or cleared:
                evidence.append(ScreeningEvidence(refs, got.hits, findings, cleared))
            else:
                ev = plain.get(findings)
                if ev is None:
                    ev = plain[findings] = ScreeningEvidence(refs, (), findings)
                evidence.append(ev)
        return cols, evidence, cleared_at

    def _cleared(self, tx: Transaction, got: Screening, in_force: InForce, day: date,
                 clearances: Callable[[], tuple[int, Mapping[tuple[str, str, str], tuple[Clearance, ...]]]],
                 ) -> tuple[Screening, tuple[tuple[Hit, int], ...]]:
        """``got`` without the name hits a clearance in force on ``day`` covers, and those hits, as
        ``clearances()`` (the batch's one reading of the ledger's clearances) has them."""
        keyer = self._keyer
        if keyer is None:
            keyer = self._keyer = load_keyer(self.ledger.engine)
        kept: list[Hit] = []
        gone: list[tuple[Hit, int]] = []
        for h in got.hits:
            party = party_of(tx, h.where) if h.basis == "name" else None
            by = None
            if party is not None and party.account:
                key = (keyer.key(party.account), h.list_name, h.entry_id)
                if key in in_force.cleared:  # about to clear: as the ledger has the clearances now
                    now = clearances()[1]
                    by = next((c for c in now.get(key, ()) if c.key_id == keyer.key_id and c.clears(day)),
                              None)
            if by is None:
                kept.append(h)
            else:
                gone.append((h, by.seq))
        return replace(got, hits=tuple(kept)), tuple(gone)

    def _assess(self, subs: Sequence[Submission], scores: npt.NDArray[F64], outs: list[str],
                why: list[str | None], keyer: AccountKeyer, epoch: int) -> Pending:
        """The batch's account risk, pending until its commit (``AccountRiskState.assess``)."""
        policy = self.account_risk.policy
        events = []
        for i, s in enumerate(subs):
            tx = s.transaction
            o, b = tx.originator.account, tx.beneficiary.account
            score = float(scores[i])
            events.append(RiskEvent(event_hour(s.received_at), keyer.key(o) if o else None,
                                    keyer.key(b) if b else None,
                                    points_milli(policy, None if math.isnan(score) else score, outs[i],
                                                 why[i])))
        return self.account_risk.assess(events, keyer.key_id, epoch)

    def _finish(self, subs: Sequence[Submission], rows: npt.NDArray[F64], scaled: npt.NDArray[np.int64],
                scores: npt.NDArray[F64],
                outs: list[str], fired: list[_Hits], why: list[str | None], fuel: int, stage: dict[str, int],
                rules: ActiveRules, keyer: AccountKeyer, risk: Pending, t0: float,
                explanations: list[Explanation] | None, deltas: _StateDeltas,
                evidence: list[ScreeningEvidence]) -> _Prepared:
        """The records and summary of a batch assessed for account risk."""
        records, meta = self._bodies(subs, rows, scaled, scores, outs, fired, why, fuel, stage, rules, risk,
                                     explanations, evidence)
        ids: dict[int, Jcs] = {}  # id(hits) -> canonical array of its rule ids
        for hits, _ in fired:
            if id(hits) not in ids:
                ids[id(hits)] = canonical_bytes([h.id for h in hits])
        txs = [s.transaction for s in subs]
        summary = entries_jcs(outs, [ids[id(h)] for h, _ in fired],
                              [keyer.keys((tx.originator.account, tx.beneficiary.account)) for tx in txs])
        return _Prepared(t0, stage, records, meta, outs, scores.tolist(), fired, why, keyer.key_id, summary,
                         risk, explanations, (*deltas, risk_bytes(risk.results)))

    def _fired(self, rules: ActiveRules, words: npt.NDArray[np.uint64]) -> list[_Hits]:
        """Each row's fired rules and their canonical ``fired`` array, by the row's bitset words
        (each rule's ``{id, outcome, reason}`` is canonicalised once per module and set of hits)."""
        cache = self._fired_cache
        if cache.get(_MODULE) is not rules.module or len(cache) > 4096:
            cache.clear()
            cache[_MODULE] = rules.module
        manifest = rules.module.manifest
        out: list[_Hits] = []
        for row in map(tuple, words.tolist()):
            got = cache.get(row)
            if got is None:
                hits = tuple(RuleHit(r.id, r.outcome, r.reason) for k, r in enumerate(manifest.rules)
                             if row[k // 64] >> (k % 64) & 1)
                got = cache[row] = (hits, jcs_fired(hits))
            out.append(got)
        return out

    def _bodies(self, subs: Sequence[Submission], rows: npt.NDArray[F64], scaled: npt.NDArray[np.int64],
                scores: npt.NDArray[F64],
                outs: list[str], fired: list[_Hits], why: list[str | None],
                fuel: int, stage: dict[str, int], rules: ActiveRules, risk: Pending,
                explanations: list[Explanation] | None,
                evidence: list[ScreeningEvidence]) -> tuple[list[Record], DecisionBatch]:
        """The batch's records (bodies from ``audit.decide.record.decision_bodies``, a batch at a
        time) and their ``DecisionInputs``, made only if asked for."""
        n = len(subs)
        manifest = rules.module.manifest
        tables = self.extractor.tables.ids
        ats = _times([s.received_at for s in subs])
        score_list: list[float] = scores.tolist()
        risks = risk.results
        precision = scorer_precision(self.scorer)

        def inputs(i: int) -> DecisionInputs:
            s, tx = subs[i], subs[i].transaction
            return DecisionInputs(
                at=ats[i], principal=s.principal, message_format=s.message_format,
                message_type=tx.message_type, reference=tx.reference, raw_sha256=tx.raw_sha256,
                transaction_sha256=tx.sha256, feature_schema=FEATURE_SCHEMA, feature_values=rows[i].tolist(),
                features_sha256=shas[i], tables=tables, model_sha256=self.scorer.model_sha256,
                backend=self.scorer.name, score=score_list[i], module_sha256=rules.module.sha256,
                ruleset_id=manifest.ruleset_id, ruleset_version=manifest.version, decision=outs[i],
                fired=fired[i][0], fail_safe=why[i], fuel=fuel, batch_size=n,
                latency_us={"queue": s.queue_us, **stage}, idempotency=s.idempotency, parser=PARSER,
                account_risk=risks[i], explanation=None if explanations is None else explanations[i],
                fixed_point=True, screening=evidence[i], precision=precision)

        le = np.ascontiguousarray(rows, dtype="<f8")
        width = le.shape[1] * 8
        flat = le.tobytes()
        sha = hashlib.sha256
        shas = [sha(flat[i * width:(i + 1) * width]).hexdigest() for i in range(n)]  # = features_sha256(row)
        shared = DecisionInputs(
            at="", principal={}, message_format="", message_type="", reference="", raw_sha256="",
            transaction_sha256="", feature_schema=FEATURE_SCHEMA, feature_values=[0.0] * len(_DIGITS),
            features_sha256="",
            tables=tables, model_sha256=self.scorer.model_sha256, backend=self.scorer.name, score=0.0,
            module_sha256=rules.module.sha256, ruleset_id=manifest.ruleset_id,
            ruleset_version=manifest.version, decision="", fired=(), fail_safe=None, fuel=fuel, batch_size=n,
            latency_us={"queue": 0, **stage}, parser=PARSER, fixed_point=True, screening=evidence[0],
            precision=precision)
        txs = [s.transaction for s in subs]
        principals: dict[int, Jcs] = {}  # by identity: a batch usually shares one principal object
        for s in subs:
            if id(s.principal) not in principals:
                principals[id(s.principal)] = self._principal_bytes(s.principal)
        cols = DecisionColumns(
            at=ats, decision=outs, fail_safe=why, feature_values=rows, features_sha256=shas,
            fired=[f[1] for f in fired], message_format=[s.message_format for s in subs],
            message_type=[tx.message_type for tx in txs], raw_sha256=[tx.raw_sha256 for tx in txs],
            reference=[tx.reference for tx in txs], transaction_sha256=[tx.sha256 for tx in txs],
            principal=[principals[id(s.principal)] for s in subs], score=score_list,
            queue_us=[s.queue_us for s in subs],
            idempotency=[s.idempotency for s in subs] if any(s.idempotency for s in subs) else None,
            account_risk=risks, explanation=explanations, scaled_values=scaled,
            screening=_screening_bytes(evidence),
            stopped=[ev.stopped is not None for ev in evidence] if any(ev.stopped for ev in evidence)
            else None)
        # Every body comes from the ledger's own encoder (ledger.jcs: canonical_bytes, or a template
        # filled with its pieces), so the ledger need not parse it again (Record.from_jcs).
        records = [Record.from_jcs(DECISION_KIND, body, payload=s.raw)
                   for body, s in zip(decision_bodies(shared, cols, inputs), subs, strict=True)]
        meta = DecisionBatch(inputs, at=ats, principal=[s.principal for s in subs], decision=outs,
                             score=score_list, fired=[f[0] for f in fired], fail_safe=why,
                             ruleset_id=manifest.ruleset_id, ruleset_version=manifest.version,
                             module_sha256=rules.module.sha256, account_risk=risks)
        return records, meta

    def _principal_bytes(self, principal: dict[str, Any]) -> Jcs:
        """Canonical bytes of a principal; remembered by content when it is plain strings."""
        key = _plain_key(principal)
        if key is None:
            return canonical_bytes(principal)
        got = self._principals.get(key)
        if got is None:
            if len(self._principals) >= 1024:
                self._principals.clear()
            got = self._principals[key] = canonical_bytes(principal)
        return got


# the state key's id, the canonical entries of the batch's state delta, and where the state the batch
# was prepared on was caught up from (None: not known)
_StateDeltas = tuple[str, bytes, int | None]  # state key id, the entries' bytes, the state's origin
_Deltas = tuple[str, bytes, int | None, bytes]  # and the account-risk part (``risk_bytes``)


class _Screened(NamedTuple):
    """A batch searched in the lists in force (``Pipeline._screened``), and the microseconds it took."""

    in_force: InForce | None  # None: no list in force (or no screener)
    found: list[Screening | None]  # each submission's search; None: not screened (its deadline passed)
    us: int


@dataclass(frozen=True)
class _Prepared:
    """A batch decided but not yet sealed."""

    t0: float
    stage: dict[str, int]
    records: list[Record]
    meta: DecisionBatch
    outs: list[str]
    scores: list[float]
    fired: list[_Hits]
    why: list[str | None]
    key_id: str  # the account secret's id, and the batch's canonical summary entries
    summary: Jcs
    risk: Pending  # the batch's account risk, applied when it commits
    explanations: list[Explanation] | None  # None: the scorer has no model to attribute to
    deltas: _Deltas
    cleared_at: int | None = None  # the newest clearance record its cleared hits were checked against
    used: frozenset[int] = frozenset()  # the clearances (their proposals' seqs) its cleared hits name


def _commit_tail(key_id: str, summary: Jcs, n: int, state_key_id: str, deltas: bytes, state_from: int | None,
                 account_risk: bytes, decider: str,
                 prev: tuple[int, bytes] | None) -> Callable[[int], list[Record]]:
    """The records sealed after a commit's ``n`` decisions, under the sequencer lock: its summary
    at ``seq`` (linked to ``prev``, the newest summary before the batch), then its state delta
    for the decisions before it."""
    def tail(seq: int) -> list[Record]:
        delta = delta_body(state_key_id, seq - n, deltas, decider, state_from, account_risk)
        return [Record.from_jcs(SUMMARY_KIND, summary_body(key_id, summary, prev)),
                Record.from_jcs(DELTA_KIND, delta)]
    return tail


_EXPIRED = ScreeningEvidence((), (), ("not screened: the request's deadline passed in the queue",))


def _screening_bytes(evidence: list[ScreeningEvidence]) -> list[Jcs]:
    """Each record's canonical ``screening``; those without hits share the bytes of their kind."""
    plain: dict[int, Jcs] = {}  # id of an evidence without hits -> its bytes (a batch shares a few)
    out = []
    for ev in evidence:
        if ev.hits:
            out.append(ev.to_jcs())
            continue
        got = plain.get(id(ev))
        if got is None:
            got = plain[id(ev)] = ev.to_jcs()
        out.append(got)
    return out


_QUIET_READS = 16  # catch-up reads in a row that found nobody else: the next idle batches skip the read
_CONTENDED_S = 1.0  # after another decider got ahead, or committed before a batch prepared under the lock,
# batches are prepared under the lock this long
_NO_HITS: _Hits = ((), Jcs(b"[]"))
_MODULE = ("module",)  # the fired cache's entry naming the module it holds hits for
_EPOCH64 = np.datetime64(0, "us")
_YEAR_1000_US, _YEAR_10000_US = -30610224000000000, 253402300800000000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _times(times: list[datetime]) -> list[str]:
    """``format_time`` of each time, in one numpy call (it is ~4 us a call otherwise)."""
    try:
        stamps = [(t - _EPOCH) // _US for t in times]
    except TypeError:  # a naive time: format_time says so
        return [format_time(t) for t in times]
    if not stamps or min(stamps) < _YEAR_1000_US or max(stamps) >= _YEAR_10000_US:
        return [format_time(t) for t in times]  # strftime writes years before 1000 unpadded
    text: list[str] = np.datetime_as_string(np.array(stamps, dtype="datetime64[us]"), unit="us").tolist()
    return [t + "Z" for t in text]


def _plain_key(principal: object) -> tuple[tuple[str, str | tuple[str, ...]], ...] | None:
    """A principal that is a dict of exact strings (or lists of them) as a hashable key; None else."""
    if type(principal) is not dict:
        return None
    items: list[tuple[str, str | tuple[str, ...]]] = []
    for k, v in principal.items():
        if type(k) is not str:
            return None
        if type(v) is str:
            items.append((k, v))
        elif type(v) is list and all(type(x) is str for x in v):
            items.append((k, tuple(v)))
        else:
            return None
    return tuple(items)
