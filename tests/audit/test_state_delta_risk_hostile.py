"""Hostile tests of the account-risk part of ``sealtrail.state-delta/3``: deciders that catch their
account risk up from the deltas (and from the records of decisions no version 3 delta speaks for)
hold, bit for bit, what a rebuild from the decision records gives and seal what one process would,
over logs of several releases, refusals and other records between commits, catch-ups from any seq,
fail-safe decisions, payments without an account, event times out of order, days swept, a second
policy and a second account key; a catch-up that fails half-way changes nothing; ``ledger verify``
names every way a delta can misstate its records; ``parse_delta`` refuses junk with
``StateDeltaError`` alone; bundles over such logs export and verify."""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.bundle.verify import verify_bundle
from audit.decide import pipeline as pipeline_module
from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState
from audit.decide.account_secret import load_keyer, load_state_key
from audit.decide.pipeline import Pipeline
from audit.decide.refusal_seal import seal_refusal
from audit.decide.summary import AccountKeyer
from audit.decide.types import Decision, Submission
from audit.errors import DerivedRowError, StateDeltaError
from audit.export import ExportFilters, create_bundle
from audit.query.delta_check import TABLE
from audit.query.index import TraceIndex
from audit.query.verify import verify_index
from audit.state import account_risk_replay
from audit.state import snapshot as state_snapshot
from audit.state.account_risk_replay import apply_records, rebuild_account_risk, risk_bodies, risk_items
from audit.state.delta import (
    DELTA_SCHEMA,
    DELTA_SCHEMA_V1,
    DELTA_SCHEMA_V2,
    delta_body,
    entries_bytes,
    parse_delta,
)
from audit.state.replay import catch_up, delta_pages
from audit.state.risk_snapshot import seal_risk
from audit.state.risk_snapshot_body import RiskState
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState
from ledger import LedgerUnavailableError, NoteSigner, Record, store
from ledger.append import Ledger
from ledger.jcs import Jcs, canonical_bytes
from tests.audit.test_deciders_contention_hostile import _other
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_many_deciders import _entries, _renamed, _translator
from tests.audit.test_pipeline import PRINCIPAL, make_pipeline, submissions
from tests.audit.test_rederive_hostile import _v1_delta_body
from tests.audit.test_refusals import MT940, refused
from tests.audit.test_state_delta_risk import ORIG, POLICY, _v3
from tests.audit.test_trace_index import indexed_pipeline
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

EVER = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")


# ------------------------------------------------------------------------------------------ helpers


def _size(engine: Any) -> int:
    with engine.connect() as conn:
        return store.tail(conn)[0]


def _deltas(engine: Any) -> list[tuple[int, dict[str, Any]]]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT seq, record FROM ledger_entries WHERE kind = 'state.delta' "
                                    "ORDER BY seq").all()
    return [(int(s), orjson.loads(r)["record"]) for s, r in rows]


def _v2_delta_body(state_key_id: str, first_seq: int, entries: bytes, decider: str,
                   state_from: int | None = None, account_risk: bytes | None = None) -> Jcs:
    """A version 2 delta, as the release before sealed it: no ``account_risk``."""
    return delta_body(state_key_id, first_seq, entries, decider, state_from, None)


_MAKERS: dict[int, Callable[..., Jcs]] = {1: _v1_delta_body, 2: _v2_delta_body}
_SCHEMAS = {1: DELTA_SCHEMA_V1, 2: DELTA_SCHEMA_V2, 3: DELTA_SCHEMA}


@contextlib.contextmanager
def _release(version: int) -> Iterator[None]:
    """Seal the commits made inside as a decider of the release whose deltas are ``version``."""
    if version == 3:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline_module, "delta_body", _MAKERS[version])
        yield


def _without_account(sub: Submission, *sides: str) -> Submission:
    """The same payment with no account on ``sides`` (neither an account number nor an IBAN)."""
    doc = orjson.loads(sub.transaction.canonical_bytes())
    for side in sides:
        doc[side]["account"] = None
        doc[side]["iban"] = None
        doc["r16"][f"{side}_account"] = False
    (got,) = Submission.parse(orjson.dumps(doc), "json", PRINCIPAL, sub.received_at)
    assert isinstance(got, Submission), got
    for side in sides:
        assert getattr(got.transaction, side).account is None
    return got


def _to_itself(sub: Submission) -> Submission:
    """The same payment with the beneficiary's account the originator's (one account, both sides)."""
    doc = orjson.loads(sub.transaction.canonical_bytes())
    doc["beneficiary"]["account"] = doc["originator"]["account"]
    doc["beneficiary"]["iban"] = doc["originator"]["iban"]
    (got,) = Submission.parse(orjson.dumps(doc), "json", PRINCIPAL, sub.received_at)
    assert isinstance(got, Submission), got
    assert got.transaction.originator.account == got.transaction.beneficiary.account
    return got


def _rebuilt(engine: Any, policy: AccountRiskPolicy | None = None,
             size: int | None = None) -> tuple[AccountRiskState, Any]:
    return rebuild_account_risk(engine, policy, size=size)


def _from_deltas(engine: Any, state: AccountRiskState, lo: int, hi: int) -> Any:
    """``state`` (the log's up to ``lo``) caught up to ``hi`` as a decider does: the deltas sealed
    there, and the records of the decisions no version 3 delta speaks for."""
    return apply_records(state, risk_items(engine, list(delta_pages(engine, lo, hi)), lo, hi))


def _features(engine: Any) -> bytes:
    fe = FeatureExtractor(state=VelocityState(load_state_key(engine)))
    catch_up(engine, fe, 0)
    return features_state_bytes(fe)


def _same_log(reference: Ledger, ledger: Ledger, subs: Sequence[Submission]) -> None:
    """``ledger`` holds the decision records, summaries and deltas one process sealed on ``reference``
    (keyed identifiers renamed: each log has a secret of its own; the decider's name and the
    latencies aside)."""
    names = _translator(reference, ledger, subs)
    ours, theirs = _entries(reference), _entries(ledger)
    assert [k for k, _ in theirs] == [k for k, _ in ours]
    for (kind, x), (_, y) in zip(ours, theirs, strict=True):
        want, got = _renamed(x, names), _renamed(y, names)
        if kind == "decision.summary":
            for doc in (want, got):
                doc.pop("prev")  # the link names a leaf hash, over recorded_at
                for e in doc["entries"]:
                    e.get("accounts", []).sort()  # sorted keys: sorted again once renamed
        assert got == want, kind


@pytest.fixture
def second(db: Db, signer: NoteSigner, ledger: Ledger) -> Iterator[Ledger]:
    lg = _other(db, signer)
    yield lg
    lg.engine.dispose()


@pytest.fixture
def reference(tmp_path: Path, signer: NoteSigner) -> Iterator[Ledger]:
    """A log of its own for one process deciding the same batches in the same order."""
    lg = make_ledger(Db(f"sqlite:///{tmp_path / 'one-process.db'}", "sqlite"), signer)
    yield lg
    lg.engine.dispose()


# ------------------------------------------------------------------------- the story of a mixed log


@dataclass
class Story:
    """Batches decided in ``order``, batch ``k`` by decider ``who[k]`` as a decider of release
    ``versions[k]``, with ``between[k]`` sealed after it (on whichever log)."""

    batches: list[list[Submission]]
    who: list[int]
    versions: list[int]
    between: dict[int, str] = field(default_factory=dict)

    @property
    def every(self) -> list[Submission]:
        return [s for b in self.batches for s in b]


def _story(seed: int, n_batches: int = 12, per: int = 8) -> Story:
    """Three days of payments; fail-safe (deadline passed) ones, ones without an account on one or
    both sides; two batches decided after the one that follows them in time (each by the other
    decider than the one before), one batch two days back in event time; commits of three releases."""
    subs = submissions(n_batches * per, seed=seed)[:n_batches * per]
    assert len(subs) == n_batches * per
    subs[3] = replace(subs[3], expired=True)
    subs[4] = _without_account(subs[4], "originator")
    subs[per + 3] = _without_account(subs[per + 3], "beneficiary")
    subs[per + 4] = _without_account(subs[per + 4], "originator", "beneficiary")
    subs[5 * per + 2] = _to_itself(subs[5 * per + 2])
    subs[3 * per + 1] = replace(subs[3 * per + 1], expired=True)
    subs[3 * per + 2] = replace(_without_account(subs[3 * per + 2], "originator"), expired=True)
    batches = [subs[i:i + per] for i in range(0, len(subs), per)]
    batches[3], batches[4] = batches[4], batches[3]  # out of order in event time
    if n_batches > 9:
        batches[8], batches[9] = batches[9], batches[8]
    batches[6] = [replace(s, received_at=s.received_at - timedelta(days=2)) for s in batches[6]]
    who = [0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0][:n_batches]
    versions = [3, 3, 2, 3, 1, 3, 2, 2, 3, 3, 1, 3][:n_batches]
    between = {1: "refusal", 2: "activation", 4: "snapshot", 7: "risk_snapshot", 9: "refusal"}
    return Story(batches, who, versions, {k: v for k, v in between.items() if k < n_batches - 1})


def _seal_between(what: str, ledger: Ledger, pipe: Pipeline) -> None:
    """Another record between two commits, sealed on ``ledger`` (``pipe``: the decider of the commit
    before it, whose state a snapshot states)."""
    if what == "refusal":
        seal_refusal(ledger, refused(MT940, "mt", True))
    elif what == "activation":
        ledger.append(Record("ruleset.activated", {"schema": "sealtrail.ruleset.activated/1", "id": "x"}))
    elif what == "snapshot":
        covered = _size(ledger.engine)
        assert pipe.covered == covered and pipe.state_from == 0
        state_snapshot.seal(ledger, state_snapshot.keyed_state_bytes(ledger.engine, pipe.extractor), covered,
                            0, pipe.decider)
    else:
        pipe.catch_up()
        seal_risk(ledger, RiskState.of(pipe.account_risk), pipe.account_risk.policy, _size(ledger.engine),
                  pipe.decider)


def _play(story: Story, deciders: Sequence[Pipeline], ledgers: Sequence[Ledger]) -> list[list[Decision]]:
    out = []
    for k, batch in enumerate(story.batches):
        w = story.who[k] % len(deciders)
        with _release(story.versions[k]):
            out.append(deciders[w].decide(batch))
        if k in story.between:
            _seal_between(story.between[k], ledgers[w], deciders[w])
    return out


# ----------------------------------------------------------------------- deciders and one process


def test_two_deciders_on_a_log_of_three_releases_seal_what_one_process_seals_and_hold_the_rebuild(
        ledger: Ledger, second: Ledger, reference: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """Commits of versions 1, 2 and 3 interleaved by two deciders, with a refusal, an activation, a
    feature-state snapshot and an account-risk snapshot between them, fail-safe decisions, payments
    without an account, batches out of event-time order and three days swept: the log holds bit for
    bit what one process seals (each record's ``account_risk`` included), each decider's account
    risk is the rebuild's, and ``ledger verify`` passes."""
    story = _story(seed=61)
    one = make_pipeline(reference, sandbox, pack_wasm)
    _play(story, [one], [reference])
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    got = _play(story, [a, b], [ledger, second])
    assert [d["schema"] for _, d in _deltas(ledger.engine)] == [_SCHEMAS[v] for v in story.versions]
    assert sum(d.fail_safe is not None for ds in got for d in ds) == 3
    assert a.caught_up > 0 and b.caught_up > 0
    # what the deltas state: no points for a fail-safe decision, null for a side without an account,
    # one account on both sides; and the other decider decided batches earlier in event time
    stated: dict[int, list[Any]] = {}
    for _, body in _deltas(ledger.engine):
        for i, e in enumerate(body.get("account_risk", {}).get("entries", [])):
            stated[body["first_seq"] + i] = e
    flat = [d for ds in got for d in ds]
    fail_safe = [stated[d.seq] for d in flat if d.fail_safe is not None and d.seq in stated]
    assert fail_safe and all(p == 0 for _, _, p in fail_safe)
    assert any(o is None for o, _, _ in stated.values()) and any(b is None for _, b, _ in stated.values())
    assert any(o is not None and o == b for o, b, _ in stated.values())
    assert min(s.received_at for s in story.batches[4]) < max(s.received_at for s in story.batches[3])
    assert story.who[3] != story.who[4] and story.who[5] != story.who[6]
    _same_log(reference, ledger, story.every)
    rebuilt, report = _rebuilt(ledger.engine)
    assert (report.applied, report.mismatched, report.unreadable) == (len(story.every), 0, 0)
    assert rebuilt.swept_day is not None and rebuilt.swept_day > min(
        d.received_at for d in story.every).timestamp() // 86400  # days were swept
    for p in (a, b):
        p.catch_up()
        assert p.account_risk.fingerprint() == rebuilt.fingerprint()
        assert features_state_bytes(p.extractor) == _features(ledger.engine)
    # one process holds the same (its accounts keyed under its log's own secret)
    assert one.account_risk.fingerprint()[1:4] == rebuilt.fingerprint()[1:4]
    assert len(one.account_risk) == len(rebuilt)
    fresh = AccountRiskState()
    _from_deltas(ledger.engine, fresh, 0, _size(ledger.engine))
    assert fresh.fingerprint() == rebuilt.fingerprint()
    report_v = verify_index(ledger.engine)
    assert report_v.state_deltas == len(story.batches)


def _mixed_log(ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes,
               seed: int = 62) -> tuple[Story, Pipeline, Pipeline]:
    story = _story(seed=seed, n_batches=8, per=6)
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    _play(story, [a, b], [ledger, second])
    return story, a, b


@pytest.mark.parametrize("page", [2000, 2])
def test_account_risk_caught_up_from_any_seq_to_any_seq_is_the_rebuild(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch,
        page: int) -> None:
    """The state of the first ``lo`` entries (a rebuild) caught up to ``hi`` from the deltas sealed
    there, for every ``lo`` (in the middle of a commit's decisions, at its summary, at its delta, on
    a refusal or a snapshot, on commits of each release) and many ``hi``, the deltas and records read
    in one page or in pages of two: the rebuild of the first ``hi``, bit for bit."""
    import audit.state.replay as replay_module

    _mixed_log(ledger, second, sandbox, pack_wasm)
    monkeypatch.setattr(replay_module, "_PAGE", page)
    engine = ledger.engine
    size = _size(engine)
    prefix = {k: _rebuilt(engine, size=k)[0].fingerprint() for k in range(size + 1)}
    assert prefix[size] == _rebuilt(engine)[0].fingerprint()
    for lo in range(size + 1):
        for hi in sorted({size, *range(lo, size + 1, 7)}):
            state, _ = _rebuilt(engine, size=lo)
            _from_deltas(engine, state, lo, hi)
            assert state.fingerprint() == prefix[hi], (lo, hi)


@pytest.mark.parametrize("where", ["mid_v3", "mid_v2", "mid_v1", "at_summary", "at_delta"])
def test_a_decider_whose_state_ends_inside_a_commit_catches_up_to_the_rebuild_and_seals_no_mismatch(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes, where: str) -> None:
    """A decider handed the state of the log up to a seq inside a commit (its feature state caught
    up there, its account risk rebuilt there) catches up with the rest and holds the rebuild; the
    records it seals next state the account risk a rebuild computes for them (none mismatched)."""
    story, a, b = _mixed_log(ledger, second, sandbox, pack_wasm, seed=63)
    engine = ledger.engine
    deltas = [(seq, parse_delta(seq, d)) for seq, d in _deltas(engine)]
    version = {"mid_v3": 3, "mid_v2": 2, "mid_v1": 1}.get(where, 3)
    seq, d = [(s, d) for s, d in deltas if d.version == version][-1]
    at = {"at_summary": seq - 1, "at_delta": seq}.get(where, d.first_seq + len(d.entries) // 2)
    ex = FeatureExtractor(state=VelocityState(load_state_key(engine)))
    catch_up(engine, ex, 0, at)
    risk, _ = _rebuilt(engine, size=at)
    c = Pipeline(ledger, a.scorer, a.rules, extractor=ex, account_risk=risk, covered=at, index=TraceIndex())
    c.catch_up()
    full, report = _rebuilt(engine)
    assert report.mismatched == 0
    assert c.account_risk.fingerprint() == full.fingerprint()
    assert features_state_bytes(c.extractor) == _features(engine)
    more = submissions(20, seed=64)[:12]
    c.decide(more[:6])
    b.decide(more[6:])
    for p in (a, b, c):
        p.catch_up()
    after, report = _rebuilt(engine)
    assert report.mismatched == 0 and report.applied == len(story.every) + 12
    assert a.account_risk.fingerprint() == b.account_risk.fingerprint() == c.account_risk.fingerprint() \
        == after.fingerprint()
    verify_index(engine)


def test_a_decider_under_another_half_life_and_one_under_the_default_each_hold_their_rebuild(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """One decider decides under a half-life of two hours (its records and deltas state that
    policy), the other under the default, over days: each catches the other's commits up under the
    policy they state and holds the rebuild under its own policy; records and deltas agree
    (``ledger verify``), and the deltas give what the records give under either policy."""
    short = AccountRiskPolicy(half_life_hours=2)
    a = indexed_pipeline(ledger, sandbox, pack_wasm)
    b = Pipeline(second, a.scorer, a.rules, account_risk=AccountRiskState(short), covered=0,
                 index=TraceIndex())
    story = _story(seed=65, n_batches=10, per=6)
    _play(story, [a, b], [ledger, second])
    engine = ledger.engine
    policies = {d["account_risk"]["policy"]["half_life_hours"] for _, d in _deltas(engine)
                if "account_risk" in d}
    assert policies == {2, 336}
    for p in (a, b):
        p.catch_up()
        want, report = _rebuilt(engine, p.account_risk.policy)  # (the other's records may differ from it:
        assert report.unreadable == 0  # each state sweeps the accounts its own policy forgets)
        assert p.account_risk.fingerprint() == want.fingerprint()
        fresh = AccountRiskState(p.account_risk.policy)
        _from_deltas(engine, fresh, 0, _size(engine))
        assert fresh.fingerprint() == want.fingerprint()
    assert a.account_risk.fingerprint() != b.account_risk.fingerprint()  # the policies do differ
    verify_index(engine)


def test_commits_under_another_account_key_are_passed_over_alike_from_deltas_and_from_records(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """A log whose first commits key accounts under another account secret (one since made again):
    the deltas of the commits under the ledger's key and under the other are applied, or passed
    over, exactly as their records are, from any seq; the decider that keys under the first key
    holds the rebuild."""
    old = AccountKeyer(bytes(range(32)))
    like = make_pipeline(ledger, sandbox, pack_wasm)
    a = Pipeline(ledger, like.scorer, like.rules, keyer=old, index=TraceIndex())
    subs = submissions(40, seed=66)[:36]
    a.decide(subs[:6])
    a.decide(subs[6:12])
    start = _size(ledger.engine)
    ex = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, ex, 0, start)
    b = Pipeline(second, a.scorer, a.rules, extractor=ex, account_risk=AccountRiskState(), covered=start,
                 index=TraceIndex())
    b.decide(subs[12:18])  # under the ledger's key now
    with _release(2):
        b.decide(subs[18:24])
    a.decide(subs[24:30])  # the first decider passes the others' over and goes on under its key
    b.decide(subs[30:])
    kids = {d["account_risk"]["account_key_id"] for _, d in _deltas(ledger.engine) if "account_risk" in d}
    assert kids == {old.key_id, load_keyer(ledger.engine).key_id} and len(kids) == 2
    engine = ledger.engine
    size = _size(engine)
    full, report = _rebuilt(engine)
    assert full.account_key_id == old.key_id and report.unreadable == 18 and report.applied == 18
    a.catch_up()
    assert a.account_risk.fingerprint() == full.fingerprint()
    for lo in range(0, size + 1, 3):
        state, _ = _rebuilt(engine, size=lo)
        got = _from_deltas(engine, state, lo, size)
        assert state.fingerprint() == full.fingerprint(), lo
        want = apply_records(_rebuilt(engine, size=lo)[0], risk_bodies(engine, lo, size))
        assert (got.applied, got.unreadable) == (want.applied, want.unreadable), lo


# ------------------------------------------------------------------------- a catch-up that fails


def _snapshot(p: Pipeline) -> tuple[Any, bytes, int | None]:
    return p.account_risk.fingerprint(), features_state_bytes(p.extractor), p.covered


@pytest.mark.parametrize("fails", ["reading_records", "applying_features", "reading_deltas"])
def test_a_catch_up_that_fails_half_way_changes_nothing_and_the_next_one_is_right(
        ledger: Ledger, second: Ledger, reference: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """The other decider sealed commits of versions 3, 2, 3, 1, 3 since: the database fails while
    the records of the earlier releases' decisions are read, or while the third delta is applied
    to the features, or while the second page of deltas is read. The batch fails, neither account
    risk nor the feature state moved, and the next batch catches up once and seals what one process
    seals."""
    subs = submissions(60, seed=67)[:42]
    batches = [subs[i:i + 6] for i in range(0, 42, 6)]
    versions = [3, 3, 2, 3, 1, 3, 3]
    one = make_pipeline(reference, sandbox, pack_wasm)
    for v, batch in zip(versions, batches, strict=True):
        with _release(v):
            one.decide(batch)
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    a.decide(batches[0])
    for v, batch in zip(versions[1:6], batches[1:6], strict=True):
        with _release(v):
            b.decide(batch)
    before = _snapshot(a)
    calls: list[int] = []

    def boom() -> None:
        calls.append(1)
        raise LedgerUnavailableError("connection reset mid catch-up")

    if fails == "reading_records":
        real_bodies = account_risk_replay.risk_bodies

        def failing_bodies(engine: Any, lo: int, hi: int | None = None) -> Iterator[tuple[int, Any]]:
            for n, item in enumerate(real_bodies(engine, lo, hi)):
                if n == 2:
                    boom()
                yield item
        monkeypatch.setattr(account_risk_replay, "risk_bodies", failing_bodies)
    elif fails == "applying_features":
        real_advance = a.extractor.advance
        seen: list[int] = []

        def failing_advance(entries: Any) -> int:
            seen.append(1)
            if len(seen) == 3:
                boom()
            return real_advance(entries)
        monkeypatch.setattr(a.extractor, "advance", failing_advance)
    else:
        import audit.state.replay as replay_module
        real_pages = replay_module.decision_pages

        def failing_pages(engine: Any, lo: int, hi: int | None = None, kind: str = "decision") -> Any:
            for n, page in enumerate(real_pages(engine, lo, hi, kind)):
                if kind == "state.delta" and n == 1:
                    boom()
                yield page
        monkeypatch.setattr(replay_module, "_PAGE", 2)  # pages of two deltas: a second page to fail on
        monkeypatch.setattr(replay_module, "decision_pages", failing_pages)
    with pytest.raises(LedgerUnavailableError, match="mid catch-up"):
        a.decide(batches[6])
    assert calls
    assert _snapshot(a) == before  # nothing moved, nothing half-applied
    monkeypatch.undo()
    a.decide(batches[6])
    assert a.caught_up == 30
    _same_log(reference, ledger, subs)
    rebuilt, report = _rebuilt(ledger.engine)
    assert report.mismatched == 0 and a.account_risk.fingerprint() == rebuilt.fingerprint()
    assert features_state_bytes(a.extractor) == _features(ledger.engine)


# ------------------------------------------------------------------------------- ledger verify


def _forge_part(edit: Callable[[dict[str, Any], list[Any]], int]) -> Callable[[list[Any]], bytes]:
    """A ``risk_bytes`` that states the batch's account risk with ``edit`` made (it returns the
    index of the entry it changed, -1 for the part as a whole)."""
    real = pipeline_module.risk_bytes  # type: ignore[attr-defined]

    def forged(results: list[Any]) -> bytes:
        doc = orjson.loads(real(results))
        _FORGED.append(edit(doc, results))
        return canonical_bytes(doc)
    return forged


_FORGED: list[int] = []


def _both_sides(doc: dict[str, Any], results: list[Any]) -> int:
    return next(i for i, (o, b, p) in enumerate(doc["entries"]) if o and b and o != b and p > 0)


def _swapped(doc: dict[str, Any], results: list[Any]) -> int:
    i = _both_sides(doc, results)
    o, b, p = doc["entries"][i]
    doc["entries"][i] = [b, o, p]
    return i


def _one_side_dropped(doc: dict[str, Any], results: list[Any]) -> int:
    i = _both_sides(doc, results)
    doc["entries"][i][1] = None
    return i


def _another_account(doc: dict[str, Any], results: list[Any]) -> int:
    i = _both_sides(doc, results)
    doc["entries"][i][0] = "f" * 32
    return i


def _points_for_a_fail_safe(doc: dict[str, Any], results: list[Any]) -> int:
    i = next(i for i, (_, _, p) in enumerate(doc["entries"]) if p == 0)
    doc["entries"][i][2] = 25_000
    return i


def _other_key(doc: dict[str, Any], results: list[Any]) -> int:
    doc["account_key_id"] = "0123456789abcdef"
    return 0


def _other_policy(doc: dict[str, Any], results: list[Any]) -> int:
    doc["policy"]["half_life_hours"] += 1
    return 0


@pytest.mark.parametrize("edit", [_swapped, _one_side_dropped, _another_account, _points_for_a_fail_safe,
                                  _other_key, _other_policy], ids=lambda f: f.__name__.strip("_"))
def test_a_delta_misstating_its_records_account_risk_fails_verify_naming_the_delta_and_decision(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch,
        edit: Callable[[dict[str, Any], list[Any]], int]) -> None:
    """Sides swapped, a side left out, another account, points for a fail-safe decision, another
    account key id, another policy: ``ledger verify`` names the delta, the entry and its decision
    (deciders catch their account risk up from the delta, not from the record)."""
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = submissions(30, seed=68)[:24]
    subs[14] = replace(subs[14], expired=True)
    pipe.decide(subs[:12])
    verify_index(ledger.engine)
    _FORGED.clear()
    monkeypatch.setattr(pipeline_module, "risk_bytes", _forge_part(edit))
    got = pipe.decide(subs[12:])
    monkeypatch.undo()
    (i,) = _FORGED
    for page in (1000, 5):  # the delta's decisions in one page of verify's, and across three
        with pytest.raises(DerivedRowError) as err:
            verify_index(ledger.engine, page=page, workers=1)
        ((_, seq, detail),) = [f for f in err.value.findings if f[0] == TABLE]
        assert seq == got[-1].seq + 2
        assert f"account_risk entry {i}" in detail and f"the decision at seq {got[i].seq}" in detail


def test_a_delta_entry_for_a_decision_whose_record_states_no_account_risk_fails_verify(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = submissions(20, seed=69)[:12]
    pipe.decide(subs[:6])
    real = pipeline_module.decision_bodies  # type: ignore[attr-defined]

    def without_risk(*args: Any, **kw: Any) -> list[Jcs]:
        bodies = real(*args, **kw)
        doc = orjson.loads(bodies[2])
        doc["account_risk"] = None  # a record that states none (as a version 1 record would not)
        return [*bodies[:2], canonical_bytes(doc), *bodies[3:]]
    monkeypatch.setattr(pipeline_module, "decision_bodies", without_risk)
    got = pipe.decide(subs[6:])
    monkeypatch.undo()
    with pytest.raises(DerivedRowError) as err:
        verify_index(ledger.engine)
    found = [f for f in err.value.findings if f[0] == TABLE]
    assert [(s, "no account_risk" in d and f"the decision at seq {got[2].seq}" in d) for _, s, d in found] \
        == [(got[-1].seq + 2, True)]


def test_a_commit_whose_stated_points_its_scores_do_not_give_cannot_put_deciders_off_the_rebuild_unnoticed(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A decider (a faulty release, or a misconfigured one) seals a commit whose records, and delta
    alike, state seven milli-points more than each record's score and outcome give. The rebuild an
    examiner runs computes the points from the records (and counts those records mismatched); a
    decider catching up from the delta takes the stated points. Either both end on the same state,
    or ``ledger verify`` names the commit: never a silent split between the deciders and the rebuild."""
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    subs = submissions(40, seed=70)[:30]
    b.decide(subs[:10])
    real = pipeline_module.points_milli  # type: ignore[attr-defined]
    monkeypatch.setattr(pipeline_module, "points_milli", lambda *args: real(*args) + 7)
    a.decide(subs[10:20])
    monkeypatch.undo()
    b.catch_up()
    rebuilt, report = _rebuilt(ledger.engine, b.account_risk.policy)
    assert report.mismatched == 10  # the rebuild sees the records disagree with their scores
    assert b.account_risk.fingerprint() != rebuilt.fingerprint()  # the decider took the stated points
    with pytest.raises(DerivedRowError) as err:  # and ledger verify names the commit that states them
        verify_index(ledger.engine)
    found = [d for t, _, d in err.value.findings if t == "state.delta"]
    assert len(found) == 1 and "not what its score, outcome and fail_safe give" in found[0]


@pytest.mark.parametrize("versions", [(1, 3), (2, 3, 2, 3), (3, 1, 2, 3), (3, 2), (1, 2, 1)],
                         ids=lambda v: "-".join(map(str, v)))
def test_verify_passes_an_honest_log_of_every_version_mix_and_its_deltas_give_the_rebuild(
        ledger: Ledger, second: Ledger, sandbox: Sandbox, pack_wasm: bytes,
        versions: tuple[int, ...]) -> None:
    a, b = indexed_pipeline(ledger, sandbox, pack_wasm), indexed_pipeline(second, sandbox, pack_wasm)
    subs = submissions(40, seed=71)[:5 * len(versions)]
    for k, v in enumerate(versions):
        with _release(v):
            (a, b)[k % 2].decide(subs[5 * k:5 * k + 5])
        if k == 0:
            seal_refusal(ledger, refused(MT940, "mt", True))
    assert [d["schema"] for _, d in _deltas(ledger.engine)] == [_SCHEMAS[v] for v in versions]
    report = verify_index(ledger.engine)
    assert report.state_deltas == len(versions)
    assert verify_index(ledger.engine, page=3, workers=1).state_deltas == len(versions)  # pages mid-commit
    rebuilt, _ = _rebuilt(ledger.engine)
    fresh = AccountRiskState()
    _from_deltas(ledger.engine, fresh, 0, _size(ledger.engine))
    for p in (a, b):
        p.catch_up()
        assert p.account_risk.fingerprint() == rebuilt.fingerprint() == fresh.fingerprint()


# ------------------------------------------------------------------------------------ parse_delta


_JUNK: list[Any] = [None, True, False, 0, -1, 1.5, 2**64, -(2**63), 10**300, float("inf"), "", "x" * 33, [],
                    {}, [[]], {"a": 1}, [None, None, 0], ORIG.upper(), ORIG + "\n", " " + ORIG[1:], "0" * 31,
                    "0" * 32]


@pytest.mark.parametrize("value", _JUNK, ids=repr)
@pytest.mark.parametrize("where", ["part", "account_key_id", "entries", "entry", "originator", "beneficiary",
                                   "points", "policy", "policy_id", "half_life", "outcomes", "review",
                                   "floor"])
def test_parse_delta_refuses_junk_in_the_account_risk_part_with_a_state_delta_error_alone(
        where: str, value: Any) -> None:
    body = _v3()
    part = body["account_risk"]
    policy = part["policy"]
    if where == "part":
        body["account_risk"] = value
    elif where in ("account_key_id", "entries", "policy"):
        part[where] = value
    elif where == "entry":
        part["entries"][1] = value
    elif where in ("originator", "beneficiary", "points"):
        part["entries"][0][("originator", "beneficiary", "points").index(where)] = value
    elif where == "policy_id":
        policy["id"] = value
    elif where == "half_life":
        policy["half_life_hours"] = value
    elif where == "outcomes":
        policy["outcome_milli"] = value
    elif where == "review":
        policy["outcome_milli"]["REVIEW"] = value
    else:
        policy["floor_milli"] = value
    try:
        d = parse_delta(13, body)
    except StateDeltaError as exc:
        assert "state delta at seq 13" in str(exc)
        return
    # what it accepts is well formed: 32 lower-case hex digits or null, a non-negative integer, a policy
    assert d.account_risk is not None
    for o, b, points in d.account_risk.entries:
        assert all(x is None or (len(x) == 32 and x == x.lower() and int(x, 16) >= 0) for x in (o, b))
        assert type(points) is int and points >= 0
    if where != "points":  # (a non-negative integer of points is one, whatever its size)
        valid = {("review", 0), ("entry", (None, None, 0))}
        valid |= {(side, v) for side in ("originator", "beneficiary") for v in (None, "0" * 32, ORIG)}
        assert (where, tuple(value) if isinstance(value, list) else value) in valid, (where, value)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
                     | st.text(max_size=40) | st.sampled_from([ORIG, "0123456789abcdef", DELTA_SCHEMA]),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                         st.sampled_from(["account_key_id", "entries", "policy", "id", "outcome_milli",
                                          "ALLOW", "REVIEW", "x"]), inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(part=_JSON, entries=_JSON, policy=_JSON, pick=st.integers(0, 2))
def test_parse_delta_never_raises_anything_but_state_delta_error_on_any_json(
        part: Any, entries: Any, policy: Any, pick: int) -> None:
    body = _v3()
    if pick == 0:
        body["account_risk"] = part
    elif pick == 1:
        body["account_risk"]["entries"] = entries if not isinstance(entries, list) else [entries, entries]
    else:
        body["account_risk"]["policy"] = policy if not isinstance(policy, dict) else {**POLICY, **policy}
    with contextlib.suppress(StateDeltaError):
        parse_delta(13, body)


# ----------------------------------------------------------------------------------------- bundles


def test_bundles_of_a_two_decider_log_of_three_releases_export_and_verify(
        ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    """A log of version 3, 2 and 1 deltas sealed by two deciders (a refusal between): the whole log
    and a window in its middle export and verify; every decision re-derives but those of a version 1
    delta (counted by reason, as before), and the state lines carry the version 3 deltas whole."""
    a = governed_pipeline(ledger, sandbox)
    b = Pipeline(second, a.scorer, a.rules, index=TraceIndex())
    subs = submissions(50, seed=72)[:42]
    versions = [3, 2, 3, 1, 3, 3, 2]
    got = []
    for k, v in enumerate(versions):
        with _release(v):
            got.append((a, b)[k % 2].decide(subs[6 * k:6 * k + 6]))
        if k == 2:
            seal_refusal(ledger, refused(MT940, "mt", True))
    verify_index(ledger.engine)
    full = create_bundle(ledger.engine, ledger, signer, tmp_path / "full.zip", ExportFilters.of(*EVER),
                         OFFICER).path
    report = verify_bundle(full, [signer.verifier], sandbox=sandbox)
    assert report.decisions == len(subs)
    assert report.rederived == len(subs) - 6 and list(report.not_rederived.values()) == [6]
    assert report.account_risk_checked == len(subs)
    with zipfile.ZipFile(full) as z:
        carried = [orjson.loads(line)["record"] for line in z.read("state/records.jsonl").splitlines()]
    assert [d for d in carried if "first_seq" in d] == [body for _, body in _deltas(ledger.engine)]
    assert [d["schema"] for d in carried if "first_seq" in d] == [_SCHEMAS[v] for v in versions]
    window = create_bundle(ledger.engine, ledger, signer, tmp_path / "window.zip",
                           ExportFilters.of(got[4][0].recorded_at, got[6][0].recorded_at), OFFICER).path
    report = verify_bundle(window, [signer.verifier], sandbox=sandbox)
    assert report.decisions == 12 and report.rederived == 12


def _state_lines(n_deltas: int, per: int, risk: bool) -> tuple[list[bytes], list[bytes], int]:
    """The state lines of a bundle (``state/records.jsonl`` and ``state/index.jsonl``) holding
    ``n_deltas`` deltas of ``per`` decisions over 400 accounts, with or without account risk."""
    import hashlib
    import random

    rng = random.Random(7)
    state_ids = [hashlib.sha256(b"%d" % i).hexdigest() for i in range(400)]
    risk_ids = [hashlib.sha256(b"r%d" % i).hexdigest()[:32] for i in range(400)]
    recs, idx = [], []
    seq = 1
    for k in range(n_deltas):
        first, seq = seq, seq + per + 1
        picks = [(rng.randrange(400), rng.randrange(400)) for _ in range(per)]
        ents = [(state_ids[o], state_ids[b], 1_767_000_000_000_000 + 1000 * (k * per + i), 100 + i)
                for i, (o, b) in enumerate(picks)]
        part = None if not risk else canonical_bytes({
            "account_key_id": "0123456789abcdef", "policy": POLICY,
            "entries": [[risk_ids[o], risk_ids[b], 12_345] for o, b in picks]})
        body = orjson.loads(delta_body("fedcba9876543210", first, entries_bytes(ents), "h/1/abcd0123", 0,
                                       part))
        env = canonical_bytes({"kind": "state.delta", "record": body, "trace_id": f"t{seq}"})
        recs.append(bytes(env))
        leaf = hashlib.sha256(b"\x00" + env).hexdigest()
        idx.append(orjson.dumps({"seq": seq, "kind": "state.delta", "trace_id": f"t{seq}",
                                 "chain_hash": "00" * 32, "leaf_hash": leaf}))
        seq += 2  # not consecutive: no chain to link
    return recs, idx, seq


def test_the_offline_verifier_holds_version_3_state_lines_in_about_the_memory_of_version_2_ones() -> None:
    """``audit.bundle.rederive.read_state`` holds a bundle's deltas for the whole re-derivation,
    packed (24 bytes an entry, each account identifier once however many entries name it: a
    million decisions fit). The same deltas with their account-risk part held must not cost many
    times that: an examiner's machine that verified a bundle of an earlier release must verify it."""
    import gc
    import tracemalloc

    from audit.bundle.rederive import read_state

    class Found:
        def __init__(self) -> None:
            self.errors: list[Any] = []

        def add(self, e: Any) -> None:
            self.errors.append(e)

    held = {}
    for risk in (False, True):
        recs, idx, size = _state_lines(200, 50, risk)
        found = Found()
        gc.collect()
        tracemalloc.start()
        out = read_state(recs, idx, size, found)
        gc.collect()
        held[risk] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert found.errors == [] and len(out.deltas) == 200
        del out
    assert held[True] <= 2 * held[False], held
