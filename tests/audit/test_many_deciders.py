"""Several deciders on one log: each catches its state up from what the others sealed, a commit
prepared on a state another decider got ahead of is refused by the database and prepared again,
and the records are bit for bit those of one process deciding the same batches in the same order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide import log_tip
from audit.decide import pipeline as pipeline_module
from audit.decide.account_secret import load_keyer, load_state_key
from audit.decide.pipeline import Pipeline
from audit.decide.service import DecisionService
from audit.decide.types import ActiveRules, Submission
from audit.query.verify import verify_index
from audit.state.replay import catch_up
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState, key_id
from ledger import LedgerUnavailableError, NoteSigner
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.audit.test_pipeline import make_pipeline, submissions
from tests.audit.test_trace_index import indexed_pipeline
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

VOLATILE = ("latency_us", "decider")  # how long a stage took, and which process sealed the commit


def _open(db: Db, signer: NoteSigner) -> Ledger:
    """A second process's handle on the same log."""
    return Ledger(db.engine(), signer)


def _entries(ledger: Ledger) -> list[tuple[str, dict[str, Any]]]:
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT kind, record FROM ledger_entries WHERE seq > 0 "
                                    "ORDER BY seq").all()
    return [(str(k), orjson.loads(r)["record"]) for k, r in rows
            if k in ("decision", "decision.summary", "state.delta")]


def _translator(ours: Ledger, theirs: Ledger, subs: Sequence[Submission]) -> dict[str, str]:
    """Their keyed identifiers (and key ids) as ours: two ledgers key accounts under secrets of
    their own, so records are compared after renaming every keyed account one to one."""
    k1, k2 = load_keyer(ours.engine), load_keyer(theirs.engine)
    s1, s2 = VelocityState(load_state_key(ours.engine)), VelocityState(load_state_key(theirs.engine))
    names: dict[str, str] = {k2.key_id: k1.key_id, str(s2.key_id): str(s1.key_id)}
    for sub in subs:
        for party in (sub.transaction.originator, sub.transaction.beneficiary):
            for a in {party.account, party.iban} - {None}:
                assert a is not None
                names[k2.key(a)] = k1.key(a)
                names[s2.account_id(a)] = s1.account_id(a)
    features = FeatureExtractor(state=s2)  # the state's own ids: the accounts as features key them
    ids: list[Any] = []
    features.extract([s.transaction for s in subs], [s.received_at for s in subs], ids)
    mirror: list[Any] = []
    FeatureExtractor(state=s1).extract([s.transaction for s in subs], [s.received_at for s in subs], mirror)
    for (o2, b2, _, _), (o1, b1, _, _) in zip(ids, mirror, strict=True):
        for a, b in ((o2, o1), (b2, b1)):
            if a is not None:
                names[a] = b
    return names


def _renamed(doc: Any, names: dict[str, str]) -> Any:
    if isinstance(doc, dict):
        return {k: _renamed(v, names) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_renamed(v, names) for v in doc]
    if isinstance(doc, str):
        return names.get(doc, doc)
    return doc


def _same(kind: str, a: dict[str, Any], b: dict[str, Any], names: dict[str, str]) -> None:
    want, got = _renamed(a, names), _renamed(b, names)
    if kind == "decision.summary":
        for doc in (want, got):
            doc.pop("prev")  # the link names a leaf hash, over recorded_at
            for e in doc["entries"]:
                e["accounts"].sort()  # sorted keys: sorted again once renamed
    assert got == want, kind


def _batches(subs: list[Submission], size: int) -> list[list[Submission]]:
    return [subs[i:i + size] for i in range(0, len(subs), size)]


def _shared_share(batches: list[list[Submission]], who: list[int]) -> float:
    """Of the payments, the share that touch an account whose last payment another decider decided."""
    last: dict[str, int] = {}
    touched = total = 0
    for batch, w in zip(batches, who, strict=True):
        for s in batch:
            accts = [p.account for p in (s.transaction.originator, s.transaction.beneficiary) if p.account]
            total += 1
            touched += any(a in last and last[a] != w for a in accts)
        for s in batch:
            for p in (s.transaction.originator, s.transaction.beneficiary):
                if p.account:
                    last[p.account] = w
    return touched / total


def _following(pipe: Pipeline, sandbox: Sandbox, wasm: bytes) -> list[ActiveRules]:
    """Make ``pipe`` load the rules again when it meets an activation; the list of those loaded."""
    loaded: list[ActiveRules] = []

    def active() -> ActiveRules:
        loaded.append(ActiveRules.of(sandbox.load(wasm)))
        return loaded[-1]
    pipe.rules_source = active
    return loaded


@pytest.fixture
def reference(tmp_path: Path, signer: NoteSigner) -> Iterator[Ledger]:
    lg = make_ledger(Db(f"sqlite:///{tmp_path / 'one-process.db'}", "sqlite"), signer)
    yield lg
    lg.engine.dispose()


def test_interleaved_deciders_seal_what_one_process_seals(db: Db, signer: NoteSigner, ledger: Ledger,
                                                          reference: Ledger, sandbox: Sandbox,
                                                          pack_wasm: bytes) -> None:
    subs = submissions(160, seed=21)
    batches = _batches(subs, 7)
    who = [i % 2 for i in range(len(batches))]  # A, B, A, B, ...
    assert _shared_share(batches, who) >= 0.5
    one = make_pipeline(reference, sandbox, pack_wasm)
    for b in batches:
        one.decide(b)
    second = _open(db, signer)
    deciders = [indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)]
    for b, w in zip(batches, who, strict=True):
        deciders[w].decide(b)
    # each caught up with every batch the other decided before its own last one
    others = [sum(len(b) for b, w in zip(batches, who, strict=True) if w != x) for x in (0, 1)]
    assert [d.caught_up for d in deciders] == [others[x] - (len(batches[-1]) if who[-1] != x else 0)
                                              for x in (0, 1)]
    names = _translator(reference, ledger, subs)
    ours, theirs = _entries(reference), _entries(ledger)
    assert [k for k, _ in theirs] == [k for k, _ in ours]
    for (kind, a), (_, b) in zip(ours, theirs, strict=True):
        _same(kind, a, b, names)
    assert [d["decider"] for k, d in theirs if k == "state.delta"] == [deciders[w].decider for w in who]
    final = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, final, 0)
    deciders[who[-1] ^ 1].decide([])  # nothing: an empty batch neither catches up nor writes
    assert features_state_bytes(deciders[who[-1]].extractor) == features_state_bytes(final)
    verify_ledger(ledger.engine, [signer.verifier])
    assert verify_index(ledger.engine).state_deltas == len(batches)
    second.engine.dispose()


def test_a_commit_another_decider_got_ahead_of_is_refused_and_prepared_again(
        db: Db, signer: NoteSigner, ledger: Ledger, reference: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    subs = submissions(60, seed=22)
    first, cut_in, last = subs[:20], subs[20:40], subs[40:]
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    a.decide(first)
    real = a._prepare
    done = threading.Event()

    def prepared_then_overtaken(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if not done.is_set():  # after a's catch-up and prepare, before its commit: b commits
            done.set()
            b.decide(cut_in)
        return out
    monkeypatch.setattr(a, "_prepare", prepared_then_overtaken)
    got = a.decide(last)
    assert (a.superseded, a.locked, a.caught_up, a.rolled_back) == (1, 1, len(cut_in), 1)
    assert [d.seq for d in got] == list(range(got[0].seq, got[0].seq + len(last)))
    one = make_pipeline(reference, sandbox, pack_wasm)  # the order the log holds: first, cut_in, last
    for batch in (first, cut_in, last):
        one.decide(batch)
    names = _translator(reference, ledger, subs)
    for (kind, x), (_, y) in zip(_entries(reference), _entries(ledger), strict=True):
        _same(kind, x, y, names)
    verify_ledger(ledger.engine, [signer.verifier])
    second.engine.dispose()


def test_a_decider_that_stopped_reading_the_log_while_alone_is_refused_once_another_commits(
        db: Db, signer: NoteSigner, ledger: Ledger, reference: Ledger, sandbox: Sandbox,
        pack_wasm: bytes) -> None:
    """Alone for a while, a decider stops reading the log before each batch (its own commits are
    the log); the first batch prepared after another decider committed is refused by the commit's
    fence, caught up and prepared again, and the log holds what one process would have sealed."""
    subs = submissions(80, seed=24)
    alone, cut_in, after = subs[:40], subs[40:50], subs[50:]
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    reads = 0
    real_catch_up = a._catch_up

    def counted() -> None:
        nonlocal reads
        reads += 1
        real_catch_up()
    a._catch_up = counted  # type: ignore[method-assign]
    for i in range(0, len(alone), 2):
        a.decide(alone[i:i + 2])
    assert reads < len(alone) // 2 and a.superseded == 0  # it stopped reading before each batch
    b.decide(cut_in)
    got = a.decide(after[:3])
    assert (a.superseded, a.locked, a.caught_up) == (1, 1, len(cut_in))
    for i in range(3, len(after), 3):  # contended a while: prepared under the lock, nothing refused
        a.decide(after[i:i + 3])
    assert a.superseded == 1 and len(got) == 3
    one = make_pipeline(reference, sandbox, pack_wasm)  # the same batches in the order the log holds
    for batch in [alone[i:i + 2] for i in range(0, len(alone), 2)] + [cut_in] + [
            after[i:i + 3] for i in range(0, len(after), 3)]:
        one.decide(batch)
    names = _translator(reference, ledger, subs)
    ours = [e for e in _entries(reference) if e[0] == "decision"]
    theirs = [e for e in _entries(ledger) if e[0] == "decision"]
    assert len(ours) == len(theirs) == len(subs)
    for (kind, x), (_, y) in zip(ours, theirs, strict=True):
        _same(kind, x, y, names)
    verify_ledger(ledger.engine, [signer.verifier])
    second.engine.dispose()


def test_a_decider_whose_commit_is_refused_even_under_the_lock_writes_nothing(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    subs = submissions(30, seed=23)
    a = make_pipeline(ledger, sandbox, pack_wasm)
    a.decide(subs[:10])
    size = ledger.size()
    real = log_tip.fence  # the database's check, against a tip no log ever ends at: always another's
    monkeypatch.setattr(pipeline_module, "fence",
                        lambda conn, first, _tip, since, *rest: real(conn, first, -1, since, *rest))
    with pytest.raises(LedgerUnavailableError, match="another decider sealed"):
        a.decide(subs[10:])  # refused, then refused again under the lock: never sealed on a wrong state
    assert ledger.size() == size and (a.superseded, a.locked) == (1, 1)
    monkeypatch.undo()
    assert len(a.decide(subs[10:])) == len(subs) - 10  # the windows were taken back each time
    fresh = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, fresh, 0)
    assert features_state_bytes(fresh) == features_state_bytes(a.extractor)
    assert a.extractor.state.key_id == key_id(load_state_key(ledger.engine))


def test_two_deciders_under_load_in_threads_lose_nothing_and_end_on_the_same_state(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    subs = submissions(400, seed=24)[:400]
    second = _open(db, signer)
    deciders = [indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)]
    work = [_batches(subs[:200], 5), _batches(subs[200:], 5)]
    got: list[list[Any]] = [[], []]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            for b in work[i]:
                got[i] += deciders[i].decide(b)
        except BaseException as exc:  # reported below: a failure must not hide as a short count
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and [len(g) for g in got] == [200, 200]
    assert len({d.seq for g in got for d in g}) == 400  # every decision answered holds its own seq
    verify_ledger(ledger.engine, [signer.verifier])
    report = verify_index(ledger.engine)
    assert (report.decisions, report.state_deltas) == (400, 80)
    for d in deciders:
        d.decide([])
    fresh = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, fresh, 0)
    for d in deciders:  # each catches up with the other's tail when it next decides
        d._catch_up()
        assert features_state_bytes(d.extractor) == features_state_bytes(fresh)
    assert sum(d.caught_up for d in deciders) >= 200  # they did interleave
    second.engine.dispose()


def test_a_ruleset_another_decider_activated_is_loaded_before_the_next_batch(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    from ledger import Record

    subs = submissions(30, seed=25)
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    loaded = _following(b, sandbox, pack_wasm)
    b.decide(subs[:5])
    a.decide(subs[5:10])
    assert loaded == []  # decisions alone change no rules
    ledger.append(Record("ruleset.activated", {"schema": "sealtrail.ruleset.activated/1", "id": "x"}))
    a.decide(subs[10:15])
    b.decide(subs[15:20])
    assert len(loaded) == 1 and b.rules is loaded[0]
    b.decide(subs[20:25])
    assert len(loaded) == 1  # once per activation met
    second.engine.dispose()


def test_a_ruleset_activated_between_catch_up_and_commit_refuses_the_commit_on_the_old_rules(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger import Record

    subs = submissions(30, seed=26)
    a = make_pipeline(ledger, sandbox, pack_wasm)
    loaded = _following(a, sandbox, pack_wasm)
    a.decide(subs[:10])
    other = _open(db, signer)
    real = a._prepare

    def prepared_then_activated(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if not loaded and a.superseded == 0:  # after a's catch-up and prepare: another decider activates
            other.append(Record("ruleset.activated", {"schema": "sealtrail.ruleset.activated/1", "id": "y"}))
        return out
    monkeypatch.setattr(a, "_prepare", prepared_then_activated)
    got = a.decide(subs[10:20])
    assert (a.superseded, a.locked, len(loaded)) == (1, 1, 1) and a.rules is loaded[0]
    with ledger.engine.connect() as conn:
        kinds = [k for (k,) in conn.exec_driver_sql(
            f"SELECT kind FROM ledger_entries WHERE seq >= {got[0].seq - 1} ORDER BY seq")]
    assert kinds[0] == "ruleset.activated"
    assert kinds[1:] == ["decision"] * 10 + ["decision.summary", "state.delta"]
    other.engine.dispose()


def test_a_catch_up_that_fails_half_way_is_taken_back_not_applied_twice(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:

    subs = submissions(80, seed=27)
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    a.decide(subs[:10])
    for i in range(10, 50, 10):
        b.decide(subs[i:i + 10])  # four commits of b's for a to catch up with
    real = a.extractor.advance
    applied: list[int] = []

    def failing(*args: Any, **kw: Any) -> Any:
        applied.append(1)
        if len(applied) == 3:  # two deltas applied, then the third fails half-way
            raise LedgerUnavailableError("connection reset")
        return real(*args, **kw)
    monkeypatch.setattr(a.extractor, "advance", failing)
    with pytest.raises(LedgerUnavailableError, match="connection reset"):
        a.decide(subs[50:60])
    monkeypatch.undo()
    a.decide(subs[50:60])
    fresh = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, fresh, 0)
    assert features_state_bytes(a.extractor) == features_state_bytes(fresh)
    assert a.caught_up == 40
    second.engine.dispose()


def test_an_idle_decider_catches_up_with_the_others_before_its_next_request(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """A decider that had nothing to do while another sealed (a worker whose clients stayed away)
    catches up while idle, so the request that ends its idle spell does not pay for every commit
    of the spell (seconds after a busy one: past the request's deadline)."""
    subs = submissions(90, seed=31)
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    b.decide(subs[:10])
    service = DecisionService(b, catch_up_idle_s=0.01)
    try:
        a.decide(subs[10:50])
        a.decide(subs[50:80])
        deadline = time.monotonic() + 10
        while b.caught_up < 70 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.caught_up == 70 and b.superseded == 0  # both of a's commits, without a request
        assert b.catch_up() == 0  # nothing new: one indexed read
        got = service.decide(subs[80:])
        assert b.caught_up == 70 and b.superseded == 0 and len(got) == len(subs[80:])
    finally:
        service.close()
    assert a.catch_up() == len(subs[80:])  # b's last commit: both at the same seq, the same bits
    assert features_state_bytes(a.extractor) == features_state_bytes(b.extractor)
    second.engine.dispose()


def test_catch_up_leaves_a_pipeline_with_a_batch_in_flight_alone(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    pipe = make_pipeline(ledger, sandbox, pack_wasm)
    pipe.decide(submissions(5, seed=32))
    with pipe._lock:  # another call holds the pipeline (a batch being prepared)
        assert pipe.catch_up() == 0
