"""The decision pipeline: sealed before answered, fail-safe on faults, replayable, restartable."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
import pytest
import rfc8785
from sqlalchemy import Engine, select

from audit.decide.account_secret import load_state_key
from audit.decide.explanation import is_explained
from audit.decide.fixed_point import quantise_rows
from audit.decide.pipeline import Pipeline
from audit.decide.record import DECISION_SCHEMA, DecisionInputs, body_score, decision_body, features_from_body
from audit.decide.types import ActiveRules, Submission
from audit.state.replay import catch_up, replay_decisions, window_start_seq
from inference.backends import load_backend
from inference.features import FeatureExtractor, features_sha256
from inference.messages import MessageError
from inference.model import ModelFiles
from inference.schema import FEATURE_NAMES, FEATURE_SCHEMA, feature_digits
from inference.screening.features import UNSCREENED
from inference.simulate import SimConfig, simulate
from inference.state_store import features_state_bytes, read_features_state
from inference.velocity import VelocityState
from ledger import LedgerUnavailableError, store
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger
from tests.wasm_rules.guests import MANIFEST, guest
from wasm_rules import OUTCOMES, Sandbox, SandboxLimits

PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"
PRINCIPAL = {"subject": "CN=sealtrail-scorer,O=sealtrail dev", "sans": ["URI:spiffe://sealtrail.dev/role/scorer"],
             "issuer": "CN=sealtrail dev CA", "fingerprint_sha256": "ab" * 32, "serial": "01"}


def submissions(n: int, seed: int = 5) -> list[Submission]:
    sims = simulate(SimConfig(seed=seed, n_normal=n, n_accounts=150, days=3))
    out = []
    for s in sims:
        (sub,) = Submission.parse(s.transaction.canonical_bytes(), "json", PRINCIPAL, s.at)
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def make_pipeline(ledger: Ledger, sandbox: Sandbox, wasm: bytes,
                  rebuild: Callable[[], FeatureExtractor] | None = None) -> Pipeline:
    files = ModelFiles.open()
    scorer = load_backend("numpy", files.weights_path)
    return Pipeline(ledger, scorer, ActiveRules.of(sandbox.load(wasm)), rebuild=rebuild)


def bodies(engine: Engine) -> list[tuple[int, dict, bytes | None]]:  # type: ignore[type-arg]
    e, p = store.entries, store.payloads
    with engine.connect() as conn:
        rows = conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == "decision").order_by(e.c.seq)).all()
        data = dict(conn.execute(select(p.c.sha256, p.c.data)).all())
    out = []
    for seq, rec in rows:
        env = orjson.loads(rec)
        out.append((seq, env, data.get(env.get("payload_sha256"))))
    return out


@pytest.mark.requirement("BSA-1010.410-records")
def test_a_batch_is_sealed_with_everything_invariant_3_asks(db: Db, signer, sandbox, pack_wasm) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(db, signer)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    subs = submissions(300)
    decisions = pipe.decide(subs)
    assert len(decisions) == len(subs)
    records = bodies(ledger.engine)
    assert [s for s, _, _ in records] == [d.seq for d in decisions]
    files = ModelFiles.open()
    module = pipe.rules.module
    explained = 0
    for d, sub, (_, env, raw) in zip(decisions, subs, records, strict=True):
        body = env["record"]
        assert env["trace_id"] == d.trace_id and env["kind"] == "decision"
        assert raw == sub.raw and env["payload_sha256"] == hashlib.sha256(sub.raw).hexdigest()
        assert body["schema"] == DECISION_SCHEMA and body["principal"] == PRINCIPAL
        assert body["input"]["transaction_sha256"] == sub.transaction.sha256
        assert body["model"] == {"sha256": files.model_sha256, "backend": "numpy", "precision": "fp32"}
        assert body["rules"] == {"module_sha256": module.sha256, "ruleset_id": "aml_core",
                                 "version": module.manifest.version}
        assert body["decision"] == d.decision and [h["id"] for h in body["fired"]] == [h.id for h in d.fired]
        assert set(body["latency_us"]) == {"queue", "features", "screening", "model", "rules", "explain"}
        values, score = features_from_body(body)
        assert features_sha256(np.array(values)) == body["features"]["sha256"]
        assert d.score is not None and score == d.score
        assert d.explanation is not None and body["explanation"] == d.explanation.to_json()
        assert (body["explanation"] is not None) == is_explained(d.score, d.decision)
        explained += body["explanation"] is not None
    assert explained  # the simulated laundering is scored high or held: its reasons are recorded
    outcomes = {d.decision for d in decisions}
    assert "ALLOW" in outcomes and outcomes - {"ALLOW"}  # simulated laundering trips something
    verify_ledger(ledger.engine, [signer.verifier])


@pytest.mark.requirement("FATF-R11-reconstruct")
def test_replay_reproduces_every_outcome_and_score(sqlite_db: Db, signer, sandbox, pack_wasm) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    pipe.decide(submissions(400))
    module = sandbox.load(pack_wasm)
    model = load_backend("numpy", ModelFiles.open().weights_path)
    recs = [env["record"] for _, env, _ in bodies(ledger.engine)]
    rows = [features_from_body(b) for b in recs]
    feats = np.array([v for v, _ in rows])
    scores = np.array([s for _, s in rows])
    assert np.max(np.abs(model.predict(feats) - scores)) <= 1e-4  # DESIGN invariant 6
    result = module.evaluate(np.hstack([feats, scores[:, None]]))
    for i, b in enumerate(recs):
        assert OUTCOMES[int(result.outcomes[i])] == b["decision"]
        assert result.fired_rules(i, module.manifest) == [h["id"] for h in b["fired"]]


def test_a_sandbox_fault_is_a_recorded_fail_safe_hold(sqlite_db: Db, signer) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    # a module that loops forever: its fuel runs out mid-batch
    loop = ('(func (export "evaluate") (param $n i32) (result i32) '
            '(loop $forever (br $forever)) (i32.const 0))')
    wasm = guest(loop, manifest={**MANIFEST, "features": ["model_score"]})
    with Sandbox(SandboxLimits(deadline_ms=2000)) as sb:
        pipe = make_pipeline(ledger, sb, wasm)
        decisions = pipe.decide(submissions(20))
    assert {d.decision for d in decisions} == {"HOLD"}
    assert all(d.fail_safe and d.fail_safe.startswith("SANDBOX_FAULT") for d in decisions)
    recs = [env["record"] for _, env, _ in bodies(ledger.engine)]
    assert len(recs) == len(decisions) and all(r["fail_safe"].startswith("SANDBOX_FAULT") for r in recs)


def test_deadline_expired_requests_are_recorded_as_hold_without_a_score(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                        pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    subs = submissions(30)
    subs = [Submission(s.raw, s.transaction, s.message_format, s.principal, s.received_at, expired=i % 3 == 0)
            for i, s in enumerate(subs)]
    decisions = pipe.decide(subs)
    for s, d in zip(subs, decisions, strict=True):
        if s.expired:
            assert (d.decision, d.fail_safe, d.score, d.fired) == ("HOLD", "DEADLINE_EXCEEDED", None, ())
        else:
            assert d.fail_safe is None and d.score is not None


class BrokenModel:
    name = "numpy"
    model_sha256 = "00" * 32

    def predict(self, rows: np.ndarray) -> np.ndarray:
        raise RuntimeError("device lost")


def test_a_model_failure_leaves_the_score_missing_and_the_pack_holds_for_review(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox, pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    pipe = Pipeline(ledger, BrokenModel(), ActiveRules.of(sandbox.load(pack_wasm)))
    decisions = pipe.decide(submissions(10))
    assert all(d.score is None and d.fail_safe == "MODEL_ERROR: RuntimeError: device lost" for d in decisions)
    assert all(d.decision != "ALLOW" and "MODEL_SCORE_MISSING" in [h.id for h in d.fired] for d in decisions)


class FailingLedger:
    def __init__(self, inner: Ledger) -> None:
        self.inner, self.fail = inner, True

    @property
    def engine(self) -> Engine:  # the pipeline reads the account secret of its summaries there
        return self.inner.engine

    def append_many(self, records, *, alongside=None, tail=None):  # type: ignore[no-untyped-def]
        if self.fail:
            raise LedgerUnavailableError("database is locked")
        return self.inner.append_many(records, alongside=alongside, tail=tail)


def _never_rebuilt() -> FeatureExtractor:
    raise AssertionError("the windows were replayed from the ledger: the failed batch alone "
                         "should have been taken back")


def _as_replayed(pipe: Pipeline, engine: Engine, *parts: list[Submission]) -> None:
    """The pipeline's windows are bit for bit those of a fresh process replaying the ledger, and
    the feature rows the ledger holds are those a process that saw only ``parts`` computes."""
    assert pipe.extractor.state.snapshot() == _rebuilt(engine).state.snapshot()
    fresh = FeatureExtractor()
    want = np.vstack([fresh.extract([s.transaction for s in p], [s.received_at for s in p]) for p in parts])
    want = np.hstack([want, np.tile(UNSCREENED, (len(want), 1))])  # screened against no list
    want = quantise_rows(want, feature_digits(FEATURE_SCHEMA))[0]  # the record's fixed units
    got = np.array([features_from_body(env["record"])[0] for _, env, _ in bodies(engine)])
    np.testing.assert_array_equal(got, want)


def test_ledger_down_means_no_decision_and_only_the_failed_batch_is_taken_back(  # type: ignore[no-untyped-def]
        db: Db, signer, sandbox, pack_wasm) -> None:
    ledger = make_ledger(db, signer)
    subs = submissions(200)
    a, b, c = subs[:100], subs[100:150], subs[150:]
    flaky = FailingLedger(ledger)
    pipe = make_pipeline(flaky, sandbox, pack_wasm, rebuild=_never_rebuilt)  # type: ignore[arg-type]
    flaky.fail = False
    pipe.decide(a)
    flaky.fail = True
    with pytest.raises(LedgerUnavailableError):
        pipe.decide(b)  # never answered, never recorded
    assert len(bodies(ledger.engine)) == 100 and pipe.velocity_stale
    flaky.fail = False
    got = pipe.decide(c)  # on the windows of a alone: b's additions taken back, nothing replayed
    assert len(got) == len(c) and not pipe.velocity_stale
    assert (pipe.sealed, pipe.sealed_at_rebuild, pipe.rolled_back) == (100 + len(c), 0, 1)
    _as_replayed(pipe, ledger.engine, a, c)
    # not trivially equal: c's accounts have history in a, and b's transactions touched them too
    counts = np.array([features_from_body(env["record"])[0] for _, env, _ in bodies(ledger.engine)[100:]])
    assert np.nanmax(counts[:, FEATURE_NAMES.index("orig_count_7d")]) > 1
    touched = {s.transaction.originator.iban for s in b} & {s.transaction.originator.iban for s in c}
    assert touched - {None}


def test_without_a_rebuild_the_batch_after_a_failed_commit_is_decided_all_the_same(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox, pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    flaky = FailingLedger(ledger)
    pipe = make_pipeline(flaky, sandbox, pack_wasm)  # type: ignore[arg-type]
    subs = submissions(60)
    with pytest.raises(LedgerUnavailableError, match="database is locked"):
        pipe.decide(subs[:30])
    flaky.fail = False
    assert len(pipe.decide(subs[30:])) == len(subs) - 30
    _as_replayed(pipe, ledger.engine, subs[30:])


@pytest.mark.parametrize("rebuild", [True, False])
def test_when_taking_back_fails_the_windows_are_rebuilt_or_every_batch_refused(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox, pack_wasm, monkeypatch: pytest.MonkeyPatch, caplog,
        rebuild: bool) -> None:
    ledger = make_ledger(sqlite_db, signer)
    flaky = FailingLedger(ledger)
    pipe = make_pipeline(flaky, sandbox, pack_wasm,  # type: ignore[arg-type]
                         rebuild=(lambda: _rebuilt(ledger.engine)) if rebuild else None)
    subs = submissions(90)
    flaky.fail = False
    pipe.decide(subs[:30])
    flaky.fail = True
    with pytest.raises(LedgerUnavailableError):
        pipe.decide(subs[30:60])

    def broken(*_: object) -> None:
        raise RuntimeError("rollback bug")

    monkeypatch.setattr(pipe.extractor.state, "rollback", broken)
    flaky.fail = False
    if rebuild:
        assert len(pipe.decide(subs[60:])) == len(subs) - 60
        assert pipe.sealed_at_rebuild == 30 and "taking back 1 uncommitted batch(es) failed" in caplog.text
        _as_replayed(pipe, ledger.engine, subs[:30], subs[60:])
    else:
        for _ in range(2):
            with pytest.raises(LedgerUnavailableError, match="no rebuild is configured"):
                pipe.decide(subs[60:])
        assert len(bodies(ledger.engine)) == 30 and pipe.sealed == 30


def _rebuilt(engine: Engine) -> FeatureExtractor:
    """A fresh process's state: the sealed state deltas applied; the same bits as the messages
    replayed one by one under the ledger's state key."""
    key = load_state_key(engine)
    fe = FeatureExtractor(state=VelocityState(key))
    report = catch_up(engine, fe, window_start_seq(engine))
    assert report.from_deltas == report.replayed
    by_message = FeatureExtractor(state=VelocityState(key))
    replay_decisions(engine, by_message, window_start_seq(engine))
    assert features_state_bytes(fe) == features_state_bytes(by_message)
    return fe


def test_restart_rebuilds_the_same_windows_from_the_ledger(sqlite_db: Db, signer, sandbox, pack_wasm) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    subs = submissions(600, seed=8)
    first = make_pipeline(ledger, sandbox, pack_wasm)
    first.decide(subs[:400])
    key = load_state_key(ledger.engine)
    state, graph = read_features_state(features_state_bytes(first.extractor), key)
    running = FeatureExtractor(state=state, graph=graph)
    # a new process: the windows and the graph are rebuilt from the sealed state deltas of 30 days
    rebuilt = FeatureExtractor(state=VelocityState(key))
    report = catch_up(ledger.engine, rebuilt, window_start_seq(ledger.engine))
    assert (report.replayed, report.from_deltas, report.missing_payload) == (400, 400, 0)
    later = [s.transaction for s in subs[400:]], [s.received_at for s in subs[400:]]
    assert rebuilt.extract(*later).tobytes() == running.extract(*later).tobytes()


def test_a_purged_payload_is_reported_not_replayed(sqlite_db: Db, signer, sandbox, pack_wasm) -> None:  # type: ignore[no-untyped-def]
    from ledger.retention import purge_payloads

    ledger = make_ledger(sqlite_db, signer)
    subs = submissions(40)
    make_pipeline(ledger, sandbox, pack_wasm).decide(subs)
    first = bodies(ledger.engine)[0][1]["payload_sha256"]
    purge_payloads(ledger, [first], reason="test erasure order")
    report = replay_decisions(ledger.engine, FeatureExtractor(), 0)
    assert (report.replayed, report.missing_payload) == (len(subs) - 1, 1)


@pytest.mark.requirement("GDPR-17-erasure")
def test_an_erased_payload_leaves_no_hole_in_the_state_caught_up_from_deltas(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox, pack_wasm) -> None:
    from ledger.retention import purge_payloads

    ledger = make_ledger(sqlite_db, signer)
    subs = submissions(60, seed=4)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    pipe.decide(subs[:30])
    pipe.decide(subs[30:])
    purge_payloads(ledger, [env["payload_sha256"] for _, env, _ in bodies(ledger.engine)[:10]],
                   reason="test erasure order")
    fe = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    report = catch_up(ledger.engine, fe, 0)
    assert (report.replayed, report.from_deltas, report.missing_payload) == (len(subs), len(subs), 0)
    assert features_state_bytes(fe) == features_state_bytes(pipe.extractor)
    by_message = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    assert replay_decisions(ledger.engine, by_message, 0).missing_payload == 10  # the old way lost them


def test_window_start_skips_what_is_older_than_30_days(sqlite_db: Db, signer, sandbox, pack_wasm) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    make_pipeline(ledger, sandbox, pack_wasm).decide(submissions(50))
    newest = datetime.fromisoformat(bodies(ledger.engine)[-1][1]["recorded_at"].replace("Z", "+00:00"))
    with ledger.engine.connect() as conn:
        size = store.tail(conn)[0]
    assert window_start_seq(ledger.engine, newest + timedelta(days=31)) == size
    assert window_start_seq(ledger.engine, newest + timedelta(days=29)) == 0
    assert window_start_seq(ledger.engine) == 0


def test_submissions_from_a_file_keep_the_detected_format_and_refusals() -> None:
    vec = Path(__file__).parents[1] / "vectors" / "messages" / "mt" / "rje_two.fin"
    raw = vec.read_bytes()
    at = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    subs = Submission.parse(raw, "auto", PRINCIPAL, at)
    assert [type(s) for s in subs] == [Submission, Submission]
    assert all(isinstance(s, Submission) and s.message_format == "mt" and s.raw == raw for s in subs)
    bad = Submission.parse(raw.replace(b"CHF100000,00", b"CHF100000.00"), "mt", PRINCIPAL, at)
    assert isinstance(bad[0], MessageError) and isinstance(bad[1], Submission)


class GappyExtractor(FeatureExtractor):
    """Real rows with some values missing (NaN), as an unknown currency or party gives them."""

    def extract(self, transactions, at):  # type: ignore[no-untyped-def]
        rows = super().extract(transactions, at)
        rows[::7, 0] = rows[::11, 3:5] = np.nan
        return rows


class CapturingIndex:
    """Keeps what the pipeline hands a DecisionIndex, inside the sealing transaction."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, DecisionInputs]] = []

    def write(self, conn, subs, inputs, receipts) -> None:  # type: ignore[no-untyped-def]
        assert len(subs) == len(inputs) == len(receipts)
        self.seen += [(r.seq, d) for d, r in zip(inputs, receipts, strict=True)]


def test_every_sealed_body_is_the_rfc8785_bytes_of_what_the_index_is_told(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                          pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    index = CapturingIndex()
    files = ModelFiles.open()
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path),
                    ActiveRules.of(sandbox.load(pack_wasm)), index=index, extractor=GappyExtractor())
    subs = submissions(600, seed=11)
    other = {**PRINCIPAL, "subject": "CN=other \"scorer\" é, O=x\u2028y", "sans": []}
    subs = [replace(s, expired=i % 17 == 0, queue_us=i * 37,
                    principal=dict(PRINCIPAL) if i % 3 else other if i % 5 == 0 else s.principal)
            for i, s in enumerate(subs)]
    half = len(subs) // 2
    pipe.decide(subs[:half])
    pipe.decide(subs[half:])
    pipe.scorer = BrokenModel()  # NaN scores: null in the record
    pipe.decide(subs[:50])
    e = store.entries
    with ledger.engine.connect() as conn:
        stored = dict(conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == "decision")).all())
    assert len(index.seen) == len(stored) == len(subs) + 50
    for seq, d in index.seen:
        body = orjson.loads(stored[seq])["record"]
        want = rfc8785.dumps(decision_body(d))
        assert orjson.dumps(body, option=orjson.OPT_SORT_KEYS) == orjson.dumps(orjson.loads(want),
                                                                              option=orjson.OPT_SORT_KEYS)
        assert bytes(stored[seq]).index(want) > 0  # the very bytes, inside the envelope
    assert any(math.isnan(v) for _, d in index.seen for v in d.feature_values)
    assert {d.fail_safe for _, d in index.seen} >= {None, "DEADLINE_EXCEEDED",
                                                     "MODEL_ERROR: RuntimeError: device lost"}


class GatedLedger:
    """A ledger whose commits wait for the test to open a gate, then fail or go through."""

    def __init__(self, inner: Ledger) -> None:
        self.inner, self.fail = inner, False
        self.entered, self.gate = threading.Event(), threading.Event()
        self.calls = 0

    @property
    def engine(self) -> Engine:  # the pipeline reads the account secret of its summaries there
        return self.inner.engine

    def append_many(self, records, *, alongside=None, tail=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail:
            raise LedgerUnavailableError("disk full")
        return self.inner.append_many(records, alongside=alongside, tail=tail)


def test_batches_from_two_threads_commit_in_the_order_their_windows_advanced(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                              pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    subs = submissions(400)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    batches = iter([subs[k:k + 50] for k in range(0, len(subs), 50)])
    taken = threading.Lock()

    def caller() -> None:
        while True:
            with taken:
                batch = next(batches, None)
            if batch is None:
                return
            for d in pipe.decide(batch):
                assert d.seq > 0  # answered only with its receipt

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sealed = [env["record"] for _, env, _ in bodies(ledger.engine)]
    assert len(sealed) == len(subs)
    by_hash = {s.transaction.sha256: s for s in subs}
    in_ledger_order = [by_hash[b["input"]["transaction_sha256"]] for b in sealed]
    # One pipeline deciding the batches one by one in the order the ledger holds them gives the
    # very same features and outcomes: the windows advanced in ledger order.
    reference = make_pipeline(make_ledger(Db(sqlite_db.url.replace("ledger.db", "ref.db"), "sqlite"), signer),
                              sandbox, pack_wasm)
    for k in range(0, len(subs), 50):
        for d, b in zip(reference.decide(in_ledger_order[k:k + 50]), sealed[k:k + 50], strict=True):
            assert (d.decision, d.score) == (b["decision"], body_score(b))
    ref_bodies = [env["record"] for _, env, _ in bodies(reference.ledger.engine)]
    assert [b["features"]["sha256"] for b in ref_bodies] == [b["features"]["sha256"] for b in sealed]
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_failed_commit_fails_the_batch_prepared_behind_it_and_both_are_taken_back(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox, pack_wasm) -> None:
    ledger = make_ledger(sqlite_db, signer)
    subs = submissions(300)
    reference = make_pipeline(make_ledger(Db(sqlite_db.url.replace("ledger.db", "ref.db"), "sqlite"), signer),
                              sandbox, pack_wasm)
    want = reference.decide(subs[:100]) + reference.decide(subs[200:])
    gated = GatedLedger(ledger)
    pipe = make_pipeline(gated, sandbox, pack_wasm, rebuild=_never_rebuilt)  # type: ignore[arg-type]
    gated.gate.set()
    pipe.decide(subs[:100])
    gated.gate.clear()
    gated.entered.clear()
    gated.fail = True
    errors: list[BaseException | None] = []

    def first() -> None:
        try:
            pipe.decide(subs[100:150])  # its commit waits at the gate, then fails
        except LedgerUnavailableError as exc:
            errors.append(exc)

    t = threading.Thread(target=first)
    t.start()
    assert gated.entered.wait(10)
    behind = threading.Thread(target=lambda: errors.append(_raises(pipe, subs[150:200])))
    behind.start()  # prepared on windows that count subs[100:150], which will never be recorded
    deadline = time.monotonic() + 10
    while pipe._tickets < 3 and time.monotonic() < deadline:  # the second batch is prepared
        time.sleep(0.001)
    assert pipe._tickets == 3
    gated.gate.set()
    t.join()
    behind.join()
    assert len(errors) == 2 and all(isinstance(e, LedgerUnavailableError) for e in errors)
    assert gated.calls == 2 and len(bodies(ledger.engine)) == 100  # the second never reached the ledger
    gated.fail = False
    got = pipe.decide(subs[200:])  # both batches' additions taken back first, nothing replayed
    assert [(d.decision, d.score) for d in got] == [(d.decision, d.score) for d in want[100:]]
    assert pipe.rolled_back == 2
    _as_replayed(pipe, ledger.engine, subs[:100], subs[200:])


def _raises(pipe: Pipeline, subs: list[Submission]) -> BaseException | None:
    try:
        pipe.decide(subs)
    except BaseException as exc:
        return exc
    return None


MT103 = Path(__file__).parents[1] / "vectors" / "messages" / "mt" / "mt103_jpy_33b.fin"


def test_a_beneficiary_iban_failing_its_check_digits_is_decided_and_reviewed(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                               pack_wasm) -> None:
    """Read liberally, decide strictly: the payment is decided, its finding is a sealed feature,
    and the pack reviews it; the same message with a valid IBAN does not fire the rule."""
    ledger = make_ledger(sqlite_db, signer)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    good = MT103.read_bytes()
    bad = good.replace(b"/DE89370400440532013000", b"/DE89370400440532013001")
    bad = bad.replace(b":20:JP-77", b":20:JP-78")
    subs = [s for raw in (good, bad) for s in Submission.parse(raw, "mt", PRINCIPAL, at)]
    assert all(isinstance(s, Submission) for s in subs)
    ok, reviewed = pipe.decide(subs)  # type: ignore[arg-type]
    assert "BENEFICIARY_IBAN_INVALID" not in [h.id for h in ok.fired]
    assert reviewed.decision in ("REVIEW", "HOLD", "BLOCK")
    assert "BENEFICIARY_IBAN_INVALID" in [h.id for h in reviewed.fired]
    (_, env, _), (_, env_bad, _) = bodies(ledger.engine)
    for e, flag in ((env, 0.0), (env_bad, 1.0)):
        f = e["record"]["features"]
        assert f["schema"] == "sealtrail.features/7"
        named = dict(zip(FEATURE_NAMES, features_from_body(e["record"])[0], strict=True))
        assert named["bene_iban_invalid"] == flag and named["finding_count"] == flag


def test_one_replay_batch_reads_each_record_by_its_own_feature_schema(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                      pack_wasm) -> None:
    """Records sealed under sealtrail.features/1 (a bundle written before features/2) and records
    decided now replay side by side; a features/1 record claiming the new pack's module cannot."""
    import zipfile

    from audit.bundle.replay import Replayer

    v3 = Path(__file__).parents[1] / "vectors" / "bundle-v3" / "bundle.zip"
    with zipfile.ZipFile(v3) as z:
        old = [orjson.loads(x) for x in z.read("records.jsonl").splitlines()]
        blobs = {n.split("/")[1].removesuffix(".wasm"): z.read(n) for n in z.namelist()
                 if n.endswith((".wasm", "weights.npz"))}
    old = [r for r in old if r["kind"] == "decision"]
    assert old and {r["record"]["features"]["schema"] for r in old} == {"sealtrail.features/1"}
    ledger = make_ledger(sqlite_db, signer)
    make_pipeline(ledger, sandbox, pack_wasm).decide(submissions(40))
    new = [env for _, env, _ in bodies(ledger.engine)]
    blobs[hashlib.sha256(pack_wasm).hexdigest()] = pack_wasm
    weights = ModelFiles.open().weights_path.read_bytes()
    blobs[hashlib.sha256(weights).hexdigest()] = weights
    replayer = Replayer(sandbox, blobs.__getitem__, blobs.__getitem__)
    errors = []
    for i, env in enumerate([*old, *new]):
        errors += replayer.add(i, env["trace_id"], env["record"])
    errors += replayer.flush()
    assert errors == [] and replayer.replayed == len(old) + len(new)
    forged = orjson.loads(orjson.dumps(old[0]["record"]))
    forged["rules"]["module_sha256"] = hashlib.sha256(pack_wasm).hexdigest()
    replayer.add(0, old[0]["trace_id"], forged)
    (miss,) = replayer.flush()
    assert miss.kind == "replay.module" and "sealtrail.features/1 does not have: finding_count" in miss.detail


def test_money_returning_to_its_sender_is_a_sealed_3_hop_cycle(sqlite_db: Db, signer, sandbox,  # type: ignore[no-untyped-def]
                                                                pack_wasm) -> None:
    """A -> B -> C -> A, each hop later than the last: the closing payment's sealed features say
    so (features/3 and later, column cycle_len), each hop that passes the whole amount on 5 hours
    after it came in says so too (features/4, the forwarding columns), and the record's hash covers
    them."""
    ledger = make_ledger(sqlite_db, signer)
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    ibans = ["DE89370400440532013000", "FR1420041010050500013M02606", "GB29NWBK60161331926819"]
    t0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    subs = []
    for i in range(3):
        raw = orjson.dumps({"message_type": "json", "reference": f"LOOP-{i}", "amount": "48000.00",
                            "currency": "EUR", "value_date": "2026-11-30",
                            "originator": {"name": f"Party {i}", "account": ibans[i], "country": ibans[i][:2],
                                           "address_lines": ["1 Main Street"]},
                            "beneficiary": {"name": f"Party {(i + 1) % 3}", "account": ibans[(i + 1) % 3],
                                            "country": ibans[(i + 1) % 3][:2]}})
        (sub,) = Submission.parse(raw, "json", PRINCIPAL, t0 + timedelta(hours=5 * i))
        assert isinstance(sub, Submission)
        subs.append(sub)
    for sub in subs:  # one batch each: the hops arrive hours apart
        pipe.decide([sub])
    values = [dict(zip(FEATURE_NAMES, features_from_body(env["record"])[0], strict=True))
              for _, env, _ in bodies(ledger.engine)]
    assert [v["cycle_len"] for v in values] == [0, 0, 3]
    assert values[2]["cycle_count"] == 1 and values[2]["orig_dormancy_days"] == 0
    assert [(v["forward_share_permille"], v["forward_delay_hours"]) for v in values] == [(0, -1), (1000, 5),
                                                                                         (1000, 5)]
    sealed = bodies(ledger.engine)
    assert all(env["record"]["features"]["schema"] == "sealtrail.features/7" for _, env, _ in sealed)
