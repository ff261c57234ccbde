"""Account-risk snapshots: a restart loads the sealed account risk and applies only the decisions
after it, with the state a rebuild of the whole log gives; a file that is not the sealed state
(or was sealed under another policy, or for another ledger) is refused and account risk rebuilt;
``ledger verify --state-roots`` recomputes every sealed root and names a forged one; the format
holds to its vector."""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState, RiskEvent
from audit.decide.runtime import Runtime
from audit.errors import DerivedRowError, StateSnapshotError
from audit.query.verify import verify_index
from audit.state.account_risk_replay import apply_records, rebuild_account_risk
from audit.state.risk_snapshot import risk_file, seal_risk
from audit.state.risk_snapshot_body import RiskState, parse_risk_snapshot
from ledger import database
from ledger.jcs import canonical_bytes
from tests.audit.test_runtime import Settings, settings, subs
from tests.audit.test_state_snapshot_restart import _crash
from tests.conftest import Db

VECTOR = Path(__file__).resolve().parents[1] / "vectors" / "account-risk-snapshot-v1"


@dataclass(frozen=True)
class Every(Settings):
    state_snapshot_every: int = 100
    account_risk_half_life_hours: int | None = None


def _every(db: Db, tmp: Path, every: int = 100) -> Every:
    s = settings(db, tmp)
    return Every(db=s.db, keys=s.keys, state_snapshot_every=every)


def _kinds(url: str, kind: str) -> list[int]:
    engine = database.open_engine(url)
    try:
        with engine.connect() as conn:
            return [int(s) for (s,) in conn.exec_driver_sql(
                f"SELECT seq FROM ledger_entries WHERE kind = '{kind}' ORDER BY seq")]
    finally:
        engine.dispose()


def _rebuilt(url: str, policy: AccountRiskPolicy | None = None) -> tuple[Any, ...]:
    """The account risk a rebuild of the whole log gives, as its fingerprint."""
    engine = database.open_engine(url)
    try:
        return rebuild_account_risk(engine, policy or AccountRiskPolicy())[0].fingerprint()
    finally:
        engine.dispose()


def _stop(rt: Runtime[Every]) -> None:
    """Close without sealing anything more (what ``_crash`` leaves, for a runtime that decided nothing)."""
    rt.service.close()
    rt._snapshots._thread.shutdown()
    rt.sandbox.close()
    rt.scorer.close()
    rt.engine.dispose()


def test_a_restart_after_a_crash_loads_the_sealed_account_risk_and_applies_only_the_tail(
        db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path)
    batch = subs(61, 150)
    rt = Runtime.open(s)
    assert rt.account_risk_snapshot is None  # a fresh ledger: nothing to start from
    for i in range(0, 150, 50):
        rt.service.decide(batch[i:i + 50], timeout_s=60)
    live = rt.pipeline.account_risk.fingerprint()
    _crash(rt)  # sealed after 100 decisions; the last 50 after it
    (periodic,) = _kinds(s.db, "state.account-risk")
    assert risk_file(s.velocity_snapshot_file).exists()
    resumed = Runtime.open(s)
    try:
        sealed = resumed.account_risk_snapshot
        assert sealed is not None and sealed.seq == periodic
        report = resumed.account_risk
        assert report is not None and (report.applied, report.mismatched) == (50, 0)
        held = resumed.pipeline.account_risk.fingerprint()
        assert held == live == _rebuilt(s.db)  # bit for bit what the whole log gives
        assert held[3] == 150 and len(held[4]) > 0  # 150 decisions applied, accounts at risk
    finally:
        resumed.close()  # the tail, sealed at the stop
    first, at_stop = _kinds(s.db, "state.account-risk")
    assert first == periodic
    again = Runtime.open(s)
    try:
        assert again.account_risk_snapshot is not None and again.account_risk_snapshot.seq == at_stop
        assert again.account_risk is not None and again.account_risk.applied == 0
    finally:
        again.close()  # no decision since: nothing more is sealed
    assert _kinds(s.db, "state.account-risk") == [periodic, at_stop]
    engine = database.open_engine(s.db)
    try:
        derived = verify_index(engine, state_roots=True)
        assert (derived.account_risk_snapshots, derived.account_risk_roots_recomputed) == (2, 2)
        assert derived.to_json()["account_risk_snapshots"] == 2
    finally:
        engine.dispose()


@dataclass(frozen=True)
class RiskEvery(Settings):
    state_snapshot_every: int = 0
    account_risk_snapshot_every: int = 50


def test_account_risk_is_sealed_on_its_own_every_so_many_decisions_and_a_crash_restart_starts_there(
        db: Db, tmp_path: Path) -> None:
    base = settings(db, tmp_path)
    s = RiskEvery(db=base.db, keys=base.keys)
    batch = subs(65, 170)
    rt = Runtime.open(s)
    for i in range(0, 170, 40):  # 40, 80 (sealed: 50 or more since), 120, 160 (sealed), 170
        rt.service.decide(batch[i:i + 40], timeout_s=60)
        job = rt._snapshots._job
        if job is not None:
            job.result()
    _crash(rt)
    assert _kinds(s.db, "state.snapshot") == []  # the feature state is sealed at a clean stop only
    first, second = _kinds(s.db, "state.account-risk")
    resumed = Runtime.open(s)
    try:
        assert not resumed.velocity_from_snapshot  # features: the window replayed, as without a snapshot
        assert resumed.account_risk_snapshot is not None and resumed.account_risk_snapshot.seq == second
        assert resumed.account_risk is not None and resumed.account_risk.applied == 10
        assert resumed.pipeline.account_risk.fingerprint() == _rebuilt(s.db)
    finally:
        _stop(resumed)
    engine = database.open_engine(s.db)
    try:
        derived = verify_index(engine, state_roots=True)
        assert (derived.account_risk_snapshots, derived.account_risk_roots_recomputed) == (2, 2)
        assert first < second
    finally:
        engine.dispose()


def test_a_bad_account_risk_snapshot_interval_refuses_to_start(db: Db, tmp_path: Path) -> None:
    base = settings(db, tmp_path)
    with pytest.raises(ValueError, match="account_risk_snapshot_every"):
        Runtime.open(RiskEvery(db=base.db, keys=base.keys, account_risk_snapshot_every=-1))


def _change_one_account(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    doc = orjson.loads(body)
    doc["accounts"][0][1] += 1  # one account's risk, a milli-point more
    path.write_bytes(head + b"\n" + orjson.dumps(doc))


def _lie_in_head(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    doc = orjson.loads(head)
    doc["covers_seq"] -= 3  # the state of another seq
    path.write_bytes(orjson.dumps(doc) + b"\n" + body)


def _another_ledger(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    doc = orjson.loads(head)
    doc["origin"] = "elsewhere.example/log"
    path.write_bytes(orjson.dumps(doc) + b"\n" + body)


def _garbage(path: Path) -> None:
    head, _, _ = path.read_bytes().partition(b"\n")
    path.write_bytes(head + b"\n" + b'{"format": "sealtrail.account-risk-state/1", "accounts": [[1, 2]]')


@pytest.mark.parametrize(("damage", "half_life", "said"), [
    (_change_one_account, None, "not the state the ledger vouches for"),
    (_lie_in_head, None, "does not hold the history"),
    (_another_ledger, None, "elsewhere.example/log"),
    (_garbage, None, "not JSON"),
    (None, 100, "policy"),  # the file as sealed; the process decides under another policy
])
def test_a_file_that_is_not_the_sealed_state_is_refused_and_account_risk_rebuilt(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any, half_life: int | None,
        said: str) -> None:
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(62, 120), timeout_s=60)
    rt.close()
    assert len(_kinds(s.db, "state.account-risk")) == 1
    if damage is not None:
        damage(risk_file(s.velocity_snapshot_file))
    policy = AccountRiskPolicy() if half_life is None else AccountRiskPolicy(half_life_hours=half_life)
    s2 = Every(db=s.db, keys=s.keys, state_snapshot_every=0, account_risk_half_life_hours=half_life)
    with caplog.at_level(logging.WARNING, logger="audit.state.risk_snapshot"):
        resumed = Runtime.open(s2)
    try:
        assert resumed.account_risk_snapshot is None
        assert resumed.account_risk is not None and resumed.account_risk.applied == 120  # the whole log
        assert said in caplog.text
        assert resumed.pipeline.account_risk.fingerprint() == _rebuilt(s.db, policy)
    finally:
        _stop(resumed)


def forge(state: RiskState) -> RiskState:
    """``state`` with its first account a point riskier."""
    key, (milli, hour) = next(iter(sorted(state.accounts.items())))
    return replace(state, accounts={**state.accounts, key: (milli + 1000, hour)})


def _seal_changed(db: Db, tmp: Path, seed: int, n: int,
                  change: Callable[[RiskState], RiskState]) -> tuple[Every, int, Runtime[Every]]:
    """A runtime that decided ``n`` payments and sealed ``change`` of its account risk as its state:
    the settings, that record's seq and the runtime (still open)."""
    s = _every(db, tmp, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(seed, n), timeout_s=60)
    covered = rt.pipeline.covered
    assert covered is not None
    risk = rt.pipeline.account_risk
    bad = seal_risk(rt.ledger, change(RiskState.of(risk)), risk.policy, covered, "forger/1/00000000")
    return s, bad.seq, rt


def test_ledger_verify_names_an_account_risk_snapshot_whose_root_the_log_does_not_give(
        db: Db, tmp_path: Path) -> None:
    s, bad, rt = _seal_changed(db, tmp_path, 63, 80, forge)
    rt.close()  # seals the true state at the stop beside it
    engine = database.open_engine(s.db)
    try:
        quick = verify_index(engine)  # without --state-roots: parsed and in place, roots not recomputed
        assert (quick.account_risk_snapshots, quick.account_risk_roots_recomputed) == (2, 0)
        with pytest.raises(DerivedRowError) as got:
            verify_index(engine, state_roots=True)
        (finding,) = got.value.findings
        assert finding[:2] == ("state.account-risk", bad) and "root" in finding[2]
    finally:
        engine.dispose()


def test_ledger_verify_names_an_account_risk_snapshot_keyed_under_another_secret(db: Db,
                                                                                 tmp_path: Path) -> None:
    s, bad, rt = _seal_changed(db, tmp_path, 64, 30, lambda state: replace(state, account_key_id="0" * 16))
    _stop(rt)
    engine = database.open_engine(s.db)
    try:
        with pytest.raises(DerivedRowError) as got:
            verify_index(engine)
        (finding,) = got.value.findings
        assert finding[:2] == ("state.account-risk", bad) and "0000000000000000" in finding[2]
    finally:
        engine.dispose()


def test_a_batch_assessed_and_discarded_leaves_no_key_id_in_the_committed_state() -> None:
    state = AccountRiskState()
    pending = state.assess([RiskEvent(400_000, "a" * 32, "b" * 32, 5000)], "0123456789abcdef")
    state.discard(pending)  # refused or failed: the log holds nothing of it
    held = RiskState.of(state)
    assert (held.account_key_id, held.applied, held.accounts) == (None, 0, {})
    assert held.root() == RiskState.of(AccountRiskState()).root()


# --- the format ------------------------------------------------------------------------------------

def _vector() -> tuple[dict[str, Any], AccountRiskState]:
    expected = orjson.loads((VECTOR / "expected.json").read_bytes())
    policy = AccountRiskPolicy.from_json(expected["policy"])
    state = AccountRiskState(policy)
    rows = [orjson.loads(line) for line in (VECTOR / "records.jsonl").read_bytes().splitlines() if line]
    report = apply_records(state, [(r["seq"], r["body"]) for r in rows])
    assert (report.applied, report.mismatched, report.unreadable) == (200, 0, 0)
    return expected, state


def test_the_vector_applies_to_its_sealed_body_root_and_state() -> None:
    expected, state = _vector()
    held = RiskState.of(state)
    body = orjson.loads(expected["body"])
    assert len(held.accounts) == expected["accounts"] == 12  # the twelve that went quiet were swept
    assert held.root().hex() == expected["root"] == body["root"]
    assert held.leaves()[0].decode() == expected["first_leaf"]
    assert hashlib.sha256(held.to_bytes()).hexdigest() == expected["state_sha256"]
    sealed = parse_risk_snapshot(201, body)
    assert canonical_bytes(body).decode() == expected["body"]
    assert sealed.matches(held, state.policy) is None
    back = RiskState.from_bytes(held.to_bytes()).into(state.policy)
    assert back.fingerprint() == state.fingerprint()


def test_a_state_that_differs_in_any_part_does_not_match_the_sealed_one() -> None:
    expected, state = _vector()
    held = RiskState.of(state)
    sealed = parse_risk_snapshot(201, orjson.loads(expected["body"]))
    key, (milli, hour) = next(iter(sorted(held.accounts.items())))
    changes = {
        "root": RiskState(held.account_key_id, held.hour, held.swept_day, held.applied,
                          {**held.accounts, key: (milli, hour + 1)}),
        "accounts": RiskState(held.account_key_id, held.hour, held.swept_day, held.applied,
                              {k: v for k, v in held.accounts.items() if k != key}),
        "decisions applied": RiskState(held.account_key_id, held.hour, held.swept_day, held.applied + 1,
                                       held.accounts),
        "keyed under": RiskState("f" * 16, held.hour, held.swept_day, held.applied, held.accounts),
    }
    for said, other in changes.items():
        diff = sealed.matches(other, state.policy)
        assert diff is not None and said in diff
    diff = sealed.matches(held, AccountRiskPolicy(half_life_hours=25))
    assert diff is not None and "policy" in diff


@pytest.mark.parametrize(("change", "said"), [
    (lambda b: b.pop("root"), "fields"),
    (lambda b: b.update(root="ab" * 31), "root is not 64 hex"),
    (lambda b: b.update(covers_seq=201), "covers_seq 201 is not a seq before it"),
    (lambda b: b.update(applied=-1), "counts"),
    (lambda b: b.update(account_key_id="XYZ"), "account_key_id"),
    (lambda b: b.update(hour=1.5), "hour and swept_day"),
    (lambda b: b.update(leaf="sealtrail.account-risk-leaf/9"), "leaf"),
    (lambda b: b["policy"].update(half_life_hours=0), "half_life_hours"),
    (lambda b: b.update(schema="sealtrail.account-risk-snapshot/2"), "schema"),
    (lambda b: b.update(decider="two words"), "decider"),
])
def test_a_snapshot_body_that_breaks_the_schema_is_refused_naming_what(change: Any, said: str) -> None:
    body = copy.deepcopy(orjson.loads(orjson.loads((VECTOR / "expected.json").read_bytes())["body"]))
    change(body)
    with pytest.raises(StateSnapshotError, match=said):
        parse_risk_snapshot(201, body)


@pytest.mark.parametrize(("doc", "said"), [
    ({"format": "sealtrail.account-risk-state/1"}, "not a sealtrail.account-risk-state/1 object"),
    ({"account_key_id": None, "accounts": [["b" * 32, 1, 2], ["a" * 32, 1, 2]], "applied": 2,
      "format": "sealtrail.account-risk-state/1", "hour": 2, "swept_day": 0}, "out of key order"),
    ({"account_key_id": None, "accounts": [["a" * 32, 1, 2], ["a" * 32, 1, 2]], "applied": 2,
      "format": "sealtrail.account-risk-state/1", "hour": 2, "swept_day": 0}, "repeated"),
    ({"account_key_id": None, "accounts": [["A" * 32, 1, 2]], "applied": 1,
      "format": "sealtrail.account-risk-state/1", "hour": 2, "swept_day": 0}, "32 hex"),
    ({"account_key_id": None, "accounts": [["a" * 32, -1, 2]], "applied": 1,
      "format": "sealtrail.account-risk-state/1", "hour": 2, "swept_day": 0}, "milli"),
    ({"account_key_id": None, "accounts": [], "applied": True,
      "format": "sealtrail.account-risk-state/1", "hour": 2, "swept_day": 0}, "applied"),
])
def test_a_state_file_body_that_breaks_its_format_is_refused_naming_what(doc: dict[str, Any],
                                                                          said: str) -> None:
    with pytest.raises(StateSnapshotError, match=said):
        RiskState.from_bytes(orjson.dumps(doc))
