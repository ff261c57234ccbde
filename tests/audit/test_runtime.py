"""audit.decide.runtime: a restart computes the same features as the process that stopped, from
the velocity snapshot plus what follows it, or from the ledger alone when the snapshot cannot be
trusted; the runtime needs no more of its settings than ``RuntimeSettings`` states."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pytest

import migrations
from audit.decide import runtime
from audit.decide.principal import Principal
from audit.decide.runtime import Runtime, RuntimeSettings
from audit.decide.types import Submission
from inference.batcher import BatcherClosedError
from inference.schema import FEATURE_NAMES
from inference.simulate import SimConfig, simulate
from ledger import database
from ledger.errors import KeyFileError, SchemaError
from tests.conftest import Db

PRINCIPAL = Principal.local("test").to_json()


@dataclass(frozen=True)
class Settings:
    """Only what ``RuntimeSettings`` asks for: the runtime reads nothing else."""

    db: str
    keys: Path
    velocity_snapshot: Path | None = None
    checkpoint_every: int = 1000
    checkpoint_seconds: float = 60.0
    backend: str = "numpy"
    max_batch: int = 1024
    decision_timeout_ms: float = 250.0

    @property
    def key_file(self) -> Path:
        return self.keys / "signing.key"

    @property
    def velocity_snapshot_file(self) -> Path:
        chosen = self.velocity_snapshot
        return chosen if chosen is not None else self.keys / "velocity.snapshot"


def settings(db: Db, tmp: Path, snapshot: Path | None = None) -> Settings:
    s = Settings(db=db.url, keys=tmp / "keys", velocity_snapshot=snapshot)
    engine = database.open_engine(db.url, create_file=True)
    try:
        migrations.upgrade(engine)
        database.initialise(engine, s.key_file, "test.sealtrail/log")
    finally:
        engine.dispose()
    return s


def subs(seed: int, n: int) -> list[Submission]:
    out = []
    for sim in simulate(SimConfig(seed=seed, n_normal=n, n_accounts=100, days=3))[:n]:
        (sub,) = Submission.parse(sim.transaction.canonical_bytes(), "json", PRINCIPAL, sim.at)
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def features_next(rt: Runtime[Settings], probe: list[Submission]) -> np.ndarray:
    """The rows the runtime's windows give ``probe`` (advances only this runtime's state)."""
    return rt.pipeline.extractor.extract([s.transaction for s in probe], [s.received_at for s in probe])


def test_a_clean_restart_resumes_from_the_snapshot_with_the_same_features(db: Db, tmp_path: Path) -> None:
    s = settings(db, tmp_path)
    batch, probe = subs(31, 400), subs(31, 400)[:50]  # the probe's accounts have history
    with_history = Runtime.open(s)
    try:
        with_history.service.decide(batch, timeout_s=60)
    finally:
        with_history.close()
    assert s.velocity_snapshot_file.exists()
    assert s.velocity_snapshot_file.stat().st_mode & 0o077 == 0  # it names accounts: owner only
    resumed = Runtime.open(s)
    replayed = Runtime.open(Settings(db=db.url, keys=s.keys, velocity_snapshot=tmp_path / "none"))
    try:
        assert resumed.velocity_from_snapshot and not replayed.velocity_from_snapshot
        a, b = features_next(resumed, probe), features_next(replayed, probe)
        np.testing.assert_array_equal(a, b)
        assert np.nanmax(a[:, FEATURE_NAMES.index("orig_count_7d")]) > 1  # not trivially equal
    finally:
        resumed.service.close()
        replayed.service.close()
        resumed.engine.dispose()
        replayed.engine.dispose()


def test_decisions_after_the_snapshot_are_replayed_on_top(db: Db, tmp_path: Path) -> None:
    s = settings(db, tmp_path)
    first, second, probe = subs(32, 300), subs(33, 300), subs(32, 300)[:40]
    rt = Runtime.open(s)
    rt.service.decide(first, timeout_s=60)
    rt.close()
    other = Runtime.open(Settings(db=db.url, keys=s.keys, velocity_snapshot=tmp_path / "other.snap"))
    other.service.decide(second, timeout_s=60)  # another process seals after the snapshot
    other.close()
    resumed = Runtime.open(s)
    fresh = Runtime.open(Settings(db=db.url, keys=s.keys, velocity_snapshot=tmp_path / "absent"))
    try:
        assert resumed.velocity_from_snapshot and resumed.replay.replayed == len(second)
        np.testing.assert_array_equal(features_next(resumed, probe), features_next(fresh, probe))
    finally:
        for r in (resumed, fresh):
            r.service.close()
            r.engine.dispose()


def test_each_process_seals_the_state_of_its_own_last_commit_and_a_restart_catches_up_the_rest(
        db: Db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "CATCH_UP_IDLE_S", None)  # no catching up while idle: a stays behind
    s = settings(db, tmp_path)
    a = Runtime.open(s)
    b = Runtime.open(Settings(db=db.url, keys=s.keys, velocity_snapshot=tmp_path / "b.snap"))
    try:
        a.service.decide(subs(34, 100), timeout_s=60)
        b.service.decide(subs(35, 100), timeout_s=60)  # a's windows never saw these
    finally:
        a.close()
        b.close()
    a_head = orjson.loads(s.velocity_snapshot_file.read_bytes().partition(b"\n")[0])
    b_head = orjson.loads((tmp_path / "b.snap").read_bytes().partition(b"\n")[0])
    assert a_head["size"] < b_head["size"]  # a's state: the log up to a's commit, not b's
    resumed = Runtime.open(s)
    try:  # a's snapshot, then b's 100 decisions from their state deltas
        assert resumed.velocity_from_snapshot and resumed.replay.replayed == resumed.replay.from_deltas == 100
    finally:
        resumed.close()


def test_a_process_idle_while_another_seals_catches_up_and_its_stop_seals_the_whole_log(
        db: Db, tmp_path: Path) -> None:
    s = settings(db, tmp_path)
    a = Runtime.open(s)
    b = Runtime.open(Settings(db=db.url, keys=s.keys, velocity_snapshot=tmp_path / "b.snap"))
    try:
        a.service.decide(subs(34, 100), timeout_s=60)
        b.service.decide(subs(35, 100), timeout_s=60)
        deadline = time.monotonic() + 10
        while a.pipeline.caught_up < 100 and time.monotonic() < deadline:  # a, idle, catches up
            time.sleep(0.01)
        assert a.pipeline.caught_up == 100
    finally:
        b.close()
        a.close()
    a_head = orjson.loads(s.velocity_snapshot_file.read_bytes().partition(b"\n")[0])
    b_head = orjson.loads((tmp_path / "b.snap").read_bytes().partition(b"\n")[0])
    assert a_head["root"] == b_head["root"] and a_head["size"] <= b_head["size"]  # the same state
    resumed = Runtime.open(s)
    try:  # a's snapshot covers b's commit: nothing left to catch up
        assert resumed.velocity_from_snapshot and resumed.replay.replayed == 0
    finally:
        resumed.close()


@pytest.mark.parametrize("damage", ["garbage", "other-ledger"])
def test_an_untrustworthy_snapshot_is_ignored_and_the_ledger_replayed(db: Db, tmp_path: Path,
                                                                      damage: str) -> None:
    s = settings(db, tmp_path)
    rt = Runtime.open(s)
    rt.service.decide(subs(36, 100), timeout_s=60)
    rt.close()
    if damage == "garbage":
        s.velocity_snapshot_file.write_bytes(b'{"schema": "sealtrail.velocity-snapshot/1"\nnot json')
    else:  # a snapshot that claims a different history at the same size
        data = s.velocity_snapshot_file.read_bytes()
        head, _, body = data.partition(b"\n")
        s.velocity_snapshot_file.write_bytes(head.replace(b'"chain":"', b'"chain":"00') + b"\n" + body)
    again = Runtime.open(s)
    try:
        assert not again.velocity_from_snapshot and again.replay.replayed == 100
    finally:
        again.close()


def test_the_settings_protocol_is_all_it_needs_and_it_is_kept_as_given(db: Db, tmp_path: Path) -> None:
    s = settings(db, tmp_path)
    given: RuntimeSettings = s
    with Runtime.open(s) as rt:
        assert rt.settings is given
        decisions = rt.decide(subs(37, 20), timeout_s=60)
        assert [d.seq for d in decisions] == sorted(d.seq for d in decisions)
        assert rt.ledger_state()[0] == rt.ledger.size() > len(decisions)
    rt.close()  # a second close does nothing
    with pytest.raises(BatcherClosedError):
        rt.decide(subs(37, 1))


@pytest.mark.parametrize("damage", ["no key", "not migrated"])
def test_a_runtime_that_cannot_open_says_why(db: Db, tmp_path: Path, damage: str) -> None:
    if damage == "no key":
        s = settings(db, tmp_path)
        s.key_file.unlink()
        with pytest.raises(KeyFileError):
            Runtime.open(s)
    else:
        database.open_engine(db.url, create_file=True).dispose()
        with pytest.raises(SchemaError):
            Runtime.open(Settings(db=db.url, keys=tmp_path / "keys"))


@dataclass(frozen=True)
class Screened(Settings):
    screening_max_age_days: int | None = None


def test_the_runtime_screens_against_the_lists_sealed_and_states_a_stale_one(db: Db, tmp_path: Path) -> None:
    from datetime import date

    from audit.screening.lists import seal_list
    from tests.audit.screening.test_screening_decisions import LIST, message

    base = settings(db, tmp_path)
    s = Screened(db=base.db, keys=base.keys, screening_max_age_days=30)
    with Runtime.open(s) as rt:
        seal_list(rt.ledger, LIST, "internal-csv", "bank-exits", Principal.local("admin"), "exit list",
                  source="internal", published=date(2026, 10, 1))
        assert rt.screener is not None and rt.screener.max_age_days == 30
        rt.screener.refresh(wait=True)
        (d,) = rt.decide([message(1, "KOVALEV ALEKSANDR")])  # decided on 2026-12-01: 61 days after
        assert d.decision == "HOLD" and "SANCTIONS_NAME_STRONG" in [h.id for h in d.fired]
        with rt.engine.connect() as conn:
            raw = conn.exec_driver_sql(f"SELECT record FROM ledger_entries WHERE seq = {d.seq}").scalar_one()
        (finding,) = orjson.loads(bytes(raw))["record"]["screening"]["findings"]
        assert "bank-exits" in finding and "61 days old" in finding
    with pytest.raises(ValueError, match="screening_max_age_days"):
        Runtime.open(Screened(db=base.db, keys=base.keys, screening_max_age_days=-1))
