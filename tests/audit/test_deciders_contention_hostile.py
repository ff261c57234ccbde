"""Several deciders under contention, screening first: a batch is searched in the lists before any
lock and keeps that search when it is prepared again, the clearances read when it is prepared; a
decider stays on the sequencer lock while others commit and leaves it once they stop; a catch-up
applies only the fields account risk reads. Each test holds the log to what a user or an examiner
would check: the records one process would seal, latency stages that add up, a clearance in force
for every hit a record says it cleared, and account risk equal to its rebuild."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.decide import pipeline as pipeline_module
from audit.decide.account_risk import AccountRiskError, AccountRiskPolicy, AccountRiskState
from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules, Decision, Submission
from audit.export import ExportFilters, create_bundle
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from audit.screening.clearance import approve_clearance, clearances, propose_clearance, revoke_clearance
from audit.screening.screener import Screener
from audit.state.account_risk_replay import apply_records, rebuild_account_risk, risk_fields
from inference.backends import Backend, load_backend
from inference.model import ModelFiles
from inference.screening.screen import Screening
from inference.state_store import features_state_bytes
from ledger import NoteSigner
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.audit.screening.test_clearance import ALICE, ALL, BOB, TODAY
from tests.audit.screening.test_screening_decisions import message, record, seal
from tests.audit.test_many_deciders import _entries, _same, _translator
from tests.audit.test_pipeline import bodies, make_pipeline, submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

LISTED = "KOVALEV ALEKSANDR"
PASSPORT = "CCPT/RU/7201234567"  # the listed passport: an identifier match, never cleared
SCREEN_US = 5000  # what each payment's screening takes on the fake clock


def _other(db: Db, signer: NoteSigner) -> Ledger:
    """Another process's handle on the same log."""
    return Ledger(db.engine(), signer)


def _numpy() -> Backend:
    return load_backend("numpy", ModelFiles.open().weights_path)


def _decider(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, *,
             clock: Callable[[], float] | None = None) -> Pipeline:
    """A decider with a screener of its own that looks at the lists and clearances before each batch."""
    kw: dict[str, Any] = {} if clock is None else {"clock": clock}
    return Pipeline(ledger, _numpy(), ActiveRules.of(sandbox.load(pack_wasm)),
                    screener=Screener(ledger.engine, check_every_s=0.0, background=False), index=TraceIndex(),
                    **kw)


def _overtaken(monkeypatch: pytest.MonkeyPatch, pipe: Pipeline, meanwhile: Callable[[], object]) -> None:
    """Once, after ``pipe`` prepared its next batch and before it commits, run ``meanwhile`` (another
    decider's commit): that batch is refused and prepared again under the sequencer lock."""
    real = pipe._prepare
    done: list[bool] = []

    def prepared_then_overtaken(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if not done:
            done.append(True)
            meanwhile()
        return out
    monkeypatch.setattr(pipe, "_prepare", prepared_then_overtaken)


def _stages_add_up(d: Decision) -> None:
    """Every stage of a decision's latency is non-negative and, with the wait and the ledger's time,
    adds up to its total (each rounded to the microsecond on its own)."""
    lat = d.latency_us
    assert {"features", "screening", "model", "rules", "seal", "wait", "ledger", "total"} <= set(lat), lat
    assert all(v >= 0 for v in lat.values()), lat
    parts = sum(v for k, v in lat.items() if k not in ("queue", "total"))
    assert abs(parts - lat["total"]) <= 4, lat


def _same_log(reference: Ledger, ledger: Ledger, subs: Sequence[Submission]) -> None:
    names = _translator(reference, ledger, subs)
    ours, theirs = _entries(reference), _entries(ledger)
    assert [k for k, _ in theirs] == [k for k, _ in ours]
    for (kind, a), (_, b) in zip(ours, theirs, strict=True):
        _same(kind, a, b, names)


def _hits(ledger: Ledger, d: Decision) -> tuple[list[str], list[str]]:
    """The entry ids a decision's record names as hits, and those it names as cleared."""
    scr = record(ledger, d)["screening"]
    return [h["entry_id"] for h in scr["hits"]], [h["entry_id"] for h in scr.get("cleared", ())]


@pytest.fixture
def reference(tmp_path: Path, signer: NoteSigner) -> Iterator[Ledger]:
    lg = make_ledger(Db(f"sqlite:///{tmp_path / 'one-process.db'}", "sqlite"), signer)
    yield lg
    lg.engine.dispose()


# --------------------------------------------------------------------------- one process's records


def test_three_deciders_with_hits_clearances_and_a_refused_batch_seal_what_one_process_seals(
        db: Db, signer: NoteSigner, ledger: Ledger, reference: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A list in force, name and identifier hits, a deadline passed, a clearance approved and later
    revoked between batches, one batch refused (another decider committed after its catch-up) and
    prepared again on the screening it had: the log holds, bit for bit, what one process deciding
    the same batches in the log's order seals, and each decider's account risk is its rebuild."""
    monkeypatch.setattr(pipeline_module, "_CONTENDED_S", 3600.0)  # a stays contended: every batch locked
    expired = replace(message(6, LISTED), expired=True)
    batches = {
        0: [message(0), message(1, LISTED), message(2, orig_id=PASSPORT)],
        1: [message(3, LISTED), message(4, "Александр Ковалев"), expired, message(5, bank="TEHRIRTHXXX")],
        2: [message(7), message(8, LISTED)],
        3: [message(9, LISTED), message(10)],
        4: [message(11, LISTED)],
        5: [message(12, LISTED), message(13)],
        6: [message(14, LISTED), message(15, orig_id=PASSPORT)],
    }
    every = [s for b in batches.values() for s in b]

    def clear(lg: Ledger, held: Decision) -> int:
        c = propose_clearance(lg, held.trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31", ALICE,
                              "date of birth 1984: another person", today=TODAY)
        approve_clearance(lg, c.seq, BOB, "passport copy checked")
        return c.seq

    # one process, in the order the log below ends up holding: 0, clearance, 1, 3, 2, 4, revocation, 5, 6
    seal(reference)
    one = _decider(reference, sandbox, pack_wasm)
    cseq = clear(reference, one.decide(batches[0])[1])
    for k in (1, 3, 2, 4):
        one.decide(batches[k])
    revoke_clearance(reference, cseq, ALICE, "new information from the FIU")
    for k in (5, 6):
        one.decide(batches[k])

    seal(ledger)
    second, third = _other(db, signer), _other(db, signer)
    a, b, c = (_decider(lg, sandbox, pack_wasm) for lg in (ledger, second, third))
    got = {0: a.decide(batches[0])}
    assert got[0][1].decision == "HOLD" and got[0][2].decision == "BLOCK"
    cseq = clear(second, got[0][1])
    got[1] = b.decide(batches[1])
    _overtaken(monkeypatch, a, lambda: got.__setitem__(3, c.decide(batches[3])))
    got[2] = a.decide(batches[2])
    assert (a.superseded, a.locked) == (1, 1) and got[3][-1].seq < got[2][0].seq
    got[4] = c.decide(batches[4])
    revoke_clearance(third, cseq, ALICE, "new information from the FIU")
    got[5] = b.decide(batches[5])
    got[6] = a.decide(batches[6])
    assert (a.superseded, a.locked) == (1, 2)  # contended: prepared under the lock, nothing refused
    assert (b.superseded, c.superseded) == (0, 0)

    # what an officer reads: the clearance cleared the name while in force, never an identifier
    assert _hits(ledger, got[1][0]) == ([], ["B-1"]) and _hits(ledger, got[1][1]) == ([], ["B-1"])
    assert got[1][2].fail_safe == "DEADLINE_EXCEEDED" and _hits(ledger, got[1][2]) == ([], [])
    assert got[1][3].decision == "BLOCK"
    for k in (2, 3, 4):
        assert _hits(ledger, got[k][1 if k == 2 else 0]) == ([], ["B-1"])
    assert _hits(ledger, got[5][0]) == (["B-1"], []) and got[5][0].decision == "HOLD"  # revoked before it
    assert _hits(ledger, got[6][0]) == (["B-1"], []) and got[6][1].decision == "BLOCK"
    for ds in got.values():
        for d in ds:
            _stages_add_up(d)
    _same_log(reference, ledger, every)
    verify_ledger(ledger.engine, [signer.verifier])

    rebuilt, report = rebuild_account_risk(ledger.engine)
    assert report.mismatched == 0 and report.unreadable == 0 and report.applied == len(every)
    for p in (a, b, c):
        p.catch_up()
        assert p.account_risk.fingerprint() == rebuilt.fingerprint()
    assert features_state_bytes(a.extractor) == features_state_bytes(b.extractor) == \
        features_state_bytes(c.extractor)
    second.engine.dispose()
    third.engine.dispose()


# --------------------------------------------------------------------------- a clearance revoked meanwhile


@pytest.mark.parametrize("path", ["superseded", "contended", "unlocked"])
def test_a_clearance_revoked_before_a_batch_prepared_under_the_lock_clears_nothing_in_it(
        path: str, db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log holds the revocation, then the decision: one process deciding in that order holds the
    payment, and the bundle verifier accepts a cleared hit only if its clearance was in force at the
    decision's seq. A batch prepared under the sequencer lock can see the clearances as they are then."""
    op = ALICE  # as a runtime starts: the shipped pack and model on record, then the list
    Governance(ledger).bootstrap_default(principal=op)
    register_model(ledger, ModelFiles.open(), op, backends=["numpy"])
    seal(ledger)
    monkeypatch.setattr(pipeline_module, "_CONTENDED_S", 3600.0)
    second = _other(db, signer)
    a, b = _decider(ledger, sandbox, pack_wasm), _decider(second, sandbox, pack_wasm)
    (held,) = a.decide([message(1, LISTED)])
    c = propose_clearance(second, held.trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31", ALICE,
                          "another person", today=TODAY)
    approve_clearance(second, c.seq, BOB, "checked")
    assert a.decide([message(2, LISTED)])[0].decision == "ALLOW"  # cleared while in force

    def revoke() -> None:
        if clearances(second.engine)[0].revoked_seq is None:
            revoke_clearance(second, c.seq, ALICE, "new information from the FIU")
    if path == "superseded":  # revoked and another decider commits after a's batch was prepared
        def revoke_then_commit() -> None:
            revoke()
            b.decide([message(3)])
        _overtaken(monkeypatch, a, revoke_then_commit)
    elif path == "unlocked":  # revoked alone after a's batch was prepared outside the lock: no state moved
        _overtaken(monkeypatch, a, revoke)
    else:  # a prepares under the lock; the revocation is sealed after its screening, before that lock
        _overtaken(monkeypatch, a, lambda: b.decide([message(3)]))
        a.decide([message(4)])
        assert a.locked == 1
        real = a._screened

        def screened_then_revoked(subs: Sequence[Submission]) -> Any:
            out = real(subs)
            revoke()
            return out
        monkeypatch.setattr(a, "_screened", screened_then_revoked)
    (d,) = a.decide([message(5, LISTED)])
    assert a.locked == (2 if path == "contended" else 1)  # the unlocked batch: refused at its commit
    (now,) = clearances(ledger.engine)
    assert now.revoked_seq is not None and now.revoked_seq < d.seq  # the log: revoked, then this decision
    for cleared in record(ledger, d)["screening"].get("cleared", ()):  # the bundle verifier's own rule
        assert now.clears(date(2026, 12, 1), d.seq), f"cleared by {cleared['clearance_seq']}, revoked before"
    assert d.decision == "HOLD"  # what one process deciding in the log's order seals
    out = tmp_path / "b.zip"
    create_bundle(ledger.engine, ledger, signer, out, ExportFilters.of(*ALL), ALICE)
    verify_bundle(out, [signer.verifier], sandbox=sandbox)
    second.engine.dispose()


# --------------------------------------------------------------------------- screening that fails


@pytest.mark.parametrize("path", ["unlocked", "contended"])
def test_a_screening_that_raises_writes_nothing_changes_no_state_and_the_next_batch_is_sealed_as_by_one(
        path: str, db: Db, signer: NoteSigner, ledger: Ledger, reference: Ledger, sandbox: Sandbox,
        pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_module, "_CONTENDED_S", 3600.0)
    first, theirs, mine, again = ([message(0), message(1, LISTED)], [message(2)], [message(3, LISTED)],
                                  [message(4), message(5, LISTED), message(6)])
    seal(ledger)
    second = _other(db, signer)
    a, b = _decider(ledger, sandbox, pack_wasm), _decider(second, sandbox, pack_wasm)
    a.decide(first)
    if path == "contended":
        _overtaken(monkeypatch, a, lambda: b.decide(theirs))
        a.decide(mine)
        assert (a.superseded, a.locked) == (1, 1)
    else:
        b.decide(theirs)
        a.decide(mine)
        assert (a.superseded, a.locked) == (0, 0)
    order = [first, theirs, mine, again]  # the log's order either way
    size, state, risk = ledger.size(), features_state_bytes(a.extractor), a.account_risk.fingerprint()
    counters = (a.locked, a.superseded, a.rolled_back, a.caught_up, a.sealed, a.covered)
    real_screen = pipeline_module.screen  # type: ignore[attr-defined]

    def broken(tx: Any, *args: Any, **kw: Any) -> Screening:
        if str(tx.reference).endswith("05"):
            raise RuntimeError("list index corrupted")
        return real_screen(tx, *args, **kw)
    monkeypatch.setattr(pipeline_module, "screen", broken)
    with pytest.raises(RuntimeError, match="list index corrupted"):
        a.decide(again)
    assert ledger.size() == size  # nothing written
    assert features_state_bytes(a.extractor) == state and a.account_risk.fingerprint() == risk
    assert (a.locked, a.superseded, a.rolled_back, a.caught_up, a.sealed, a.covered) == counters
    assert not a._pending and not a.velocity_stale
    monkeypatch.setattr(pipeline_module, "screen", real_screen)
    got = a.decide(again)
    assert a.locked == counters[0] + (path == "contended")
    assert _hits(ledger, got[1]) == (["B-1"], []) and got[1].decision == "HOLD"
    seal(reference)
    one = _decider(reference, sandbox, pack_wasm)
    for batch in order:
        one.decide(batch)
    _same_log(reference, ledger, [s for batch in order for s in batch])
    second.engine.dispose()


# --------------------------------------------------------------------------- latency stages


@pytest.mark.parametrize("path", ["unlocked", "superseded"])
def test_latency_stages_count_the_early_screening_once_and_add_up_to_the_total(
        path: str, db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock where screening a payment takes 5 ms and anything else 1 us a reading: the
    screening stage holds each payment's 5 ms once (a batch prepared again is not screened again), no
    stage is negative, and the stages add up to the total."""
    now = [1000.0]

    def clock() -> float:
        now[0] += 1e-6
        return now[0]
    real_screen = pipeline_module.screen  # type: ignore[attr-defined]

    def slow(tx: Any, *args: Any, **kw: Any) -> Screening:
        now[0] += SCREEN_US / 1e6
        return real_screen(tx, *args, **kw)
    seal(ledger)
    second = _other(db, signer)
    a, b = _decider(ledger, sandbox, pack_wasm, clock=clock), _decider(second, sandbox, pack_wasm)
    a.decide([message(0)])
    if path == "superseded":
        _overtaken(monkeypatch, a, lambda: b.decide([message(1)]))
    monkeypatch.setattr(pipeline_module, "screen", slow)
    batch = [message(2), message(3, LISTED), replace(message(4), expired=True), message(5)]
    got = a.decide(batch)
    assert (a.superseded, a.locked) == ((1, 1) if path == "superseded" else (0, 0))
    live = sum(not s.expired for s in batch)
    for d in got:
        _stages_add_up(d)
        lat = d.latency_us
        assert live * SCREEN_US <= lat["screening"] < live * SCREEN_US + 1000, lat  # once, not twice
        assert lat["total"] >= lat["screening"] + lat["features"] + lat["model"] + lat["rules"]
        assert record(ledger, d)["latency_us"]["screening"] == lat["screening"]
    if path == "superseded":
        assert got[0].latency_us["wait"] == 0  # prepared at its turn, under the lock
    second.engine.dispose()


# --------------------------------------------------------------------------- the contended spell


def test_a_decider_stays_locked_while_others_commit_and_leaves_the_lock_once_they_stop(
        db: Db, signer: NoteSigner, ledger: Ledger, reference: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(pipeline_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(pipeline_module, "_CONTENDED_S", 10.0)
    subs = submissions(60, seed=41)
    part = [subs[i:i + 5] for i in range(0, 60, 5)]
    second = _other(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    order: list[list[Submission]] = []

    def by(p: Pipeline, batch: list[Submission]) -> list[Decision]:
        order.append(batch)
        return p.decide(batch)

    by(a, part[0])
    by(b, part[1])
    real = a._prepare
    _overtaken(monkeypatch, a, lambda: by(b, part[3]))
    a.decide(part[2])
    order.append(part[2])
    monkeypatch.setattr(a, "_prepare", real)
    assert (a.superseded, a.locked) == (1, 1)  # contended until 110
    now[0] = 105.0
    seen = a.caught_up
    by(a, part[4])
    assert (a.locked, a.caught_up) == (2, seen)  # alone meanwhile: the spell is not extended
    by(b, part[5])
    now[0] = 109.0
    by(a, part[6])
    assert (a.locked, a.caught_up) == (3, seen + 5)  # met b's commit under the lock: contended until 119
    now[0] = 115.0
    by(a, part[7])
    assert a.locked == 4  # past the first spell, within the extended one
    now[0] = 119.5
    for k in (8, 9, 10):
        by(a, part[k])
        now[0] += 100.0
    assert (a.locked, a.superseded) == (4, 1)  # nobody else committed: back to preparing outside the lock
    size = ledger.size()
    assert a.decide([]) == [] and ledger.size() == size and a.locked == 4
    by(b, part[11])  # b was never refused: it caught a up before each of its batches
    assert (b.superseded, b.locked) == (0, 0)
    one = make_pipeline(reference, sandbox, pack_wasm)
    for batch in order:
        one.decide(batch)
    _same_log(reference, ledger, subs)
    second.engine.dispose()


# --------------------------------------------------------------------------- account risk caught up


_ONES = AccountRiskPolicy(half_life_hours=1, threshold_milli=1000, score_milli=1, missing_score_milli=1,
                          review_milli=1, hold_milli=1, block_milli=1)  # every value but one is 1


def _policy_doc(body: dict[str, Any]) -> dict[str, Any]:
    policy = body["account_risk"]["policy"]
    assert isinstance(policy, dict)
    return policy


@pytest.mark.parametrize(("field", "value"), [
    (("half_life_hours",), True), (("half_life_hours",), 1.0), (("threshold_milli",), 1000.0),
    (("score_milli",), True), (("missing_score_milli",), 1.0), (("outcome_milli", "REVIEW"), True),
    (("outcome_milli", "HOLD"), 1.0), (("outcome_milli", "BLOCK"), True), (("outcome_milli", "BLOCK"), 1.0)])
def test_a_caught_up_record_stating_its_policy_in_bools_or_floats_is_refused_though_one_equal_is_held(
        field: tuple[str, ...], value: object, sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox,
        pack_wasm: bytes) -> None:
    ledger = make_ledger(sqlite_db, signer)
    rules = ActiveRules.of(sandbox.load(pack_wasm))
    pipe = Pipeline(ledger, _numpy(), rules, account_risk=AccountRiskState(_ONES))
    pipe.decide(submissions(6, seed=42)[:6])
    sealed = [(s, env["record"]) for s, env, _ in bodies(ledger.engine)]
    state = AccountRiskState(_ONES)
    report = apply_records(state, [(s, risk_fields(b)) for s, b in sealed[:-1]])  # the policy now held
    held = AccountRiskPolicy.from_json(_ONES.to_json())
    assert AccountRiskPolicy.from_json(_policy_doc(sealed[0][1])) is held
    assert (report.applied, report.unreadable) == (5, 0)
    before = state.fingerprint()
    seq, body = sealed[-1]
    forged = orjson.loads(orjson.dumps(body))
    doc = _policy_doc(forged)
    for name in field[:-1]:
        doc = doc[name]
    assert doc[field[-1]] == value and type(doc[field[-1]]) is int  # equal to what is held, another type
    doc[field[-1]] = value
    got = apply_records(state, [(seq, risk_fields(forged))])
    assert (got.applied, got.unreadable) == (0, 1) and state.fingerprint() == before
    with pytest.raises(AccountRiskError):
        AccountRiskPolicy.from_json(_policy_doc(forged))
    ledger.engine.dispose()


@pytest.mark.parametrize("allow", [False, 0.0])
def test_a_policy_stating_allow_as_a_bool_or_a_float_is_refused(allow: object) -> None:
    doc = AccountRiskPolicy().to_json()
    AccountRiskPolicy.from_json(doc)  # held
    doc["outcome_milli"] = {**doc["outcome_milli"], "ALLOW": allow}
    with pytest.raises(AccountRiskError):
        AccountRiskPolicy.from_json(doc)


def test_risk_fields_keep_every_field_account_risk_reads_and_nothing_else_changes_the_result(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """The slimmed bodies a catch-up holds give the state the whole bodies give, record by record, for
    the fields it keeps; a body that is no object, or one missing a field it reads, fares the same."""
    ledger = make_ledger(sqlite_db, signer)
    make_pipeline(ledger, sandbox, pack_wasm).decide(submissions(40, seed=43)[:40])
    sealed = [(s, env["record"]) for s, env, _ in bodies(ledger.engine)]
    odd: list[tuple[int, Any]] = [(10_000, ["not", "an", "object"]), (10_001, None),
                                  (10_002, {k: v for k, v in sealed[0][1].items() if k != "decision"}),
                                  (10_003, {**sealed[1][1], "at": "not a time"})]
    whole, slim = AccountRiskState(), AccountRiskState()
    r1 = apply_records(whole, [*sealed, *odd])
    r2 = apply_records(slim, [(s, risk_fields(b)) for s, b in [*sealed, *odd]])
    assert whole.fingerprint() == slim.fingerprint()
    assert (r1.applied, r1.without_risk, r1.unreadable, r1.mismatched) == \
        (r2.applied, r2.without_risk, r2.unreadable, r2.mismatched) == (40, 2, 2, 0)
    assert risk_fields(["x"]) == ["x"] and risk_fields(None) is None
    ledger.engine.dispose()
