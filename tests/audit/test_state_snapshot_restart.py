"""State snapshots at a restart: the runtime seals its state every ``state_snapshot_every``
decisions and at a clean stop; a restart after a crash loads the sealed snapshot and applies only
the decisions after it; a snapshot file that is not the sealed state (one account changed, or a
head that lies) is refused and the state rebuilt, with the same features either way."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pytest

from audit.decide.runtime import Runtime
from audit.query.verify import verify_index
from inference.state_store import FEATURE_STATE_FORMAT, features_state_bytes
from ledger import database
from tests.audit.test_runtime import Settings, features_next, settings, subs
from tests.conftest import Db


@dataclass(frozen=True)
class Every(Settings):
    state_snapshot_every: int = 100


def _every(db: Db, tmp: Path, every: int = 100) -> Every:
    s = settings(db, tmp)
    return Every(db=s.db, keys=s.keys, state_snapshot_every=every)


def _snapshots(url: str) -> list[int]:
    engine = database.open_engine(url)
    try:
        with engine.connect() as conn:
            return [int(s) for (s,) in conn.exec_driver_sql(
                "SELECT seq FROM ledger_entries WHERE kind = 'state.snapshot' ORDER BY seq")]
    finally:
        engine.dispose()


def _crash(rt: Runtime[Every]) -> None:
    """Stop without a clean stop's snapshot: what a killed process leaves (its periodic one done)."""
    job = rt._snapshots._job
    if job is not None:
        job.result()
    rt.service.close()
    rt._snapshots._thread.shutdown()
    rt.sandbox.close()
    rt.scorer.close()
    rt.engine.dispose()


def _fresh(s: Every, tmp: Path) -> Runtime[Every]:
    return Runtime.open(Every(db=s.db, keys=s.keys, velocity_snapshot=tmp / "absent", state_snapshot_every=0))


def test_a_restart_after_a_crash_loads_the_periodic_snapshot_and_applies_only_the_tail(db: Db,
                                                                                     tmp_path: Path) -> None:
    s = _every(db, tmp_path)
    batch = subs(51, 150)
    rt = Runtime.open(s)
    for i in range(0, 150, 50):
        rt.service.decide(batch[i:i + 50], timeout_s=60)
    _crash(rt)  # sealed after 100 decisions; the last 50 after it
    (periodic,) = _snapshots(s.db)
    resumed = Runtime.open(s)
    fresh = _fresh(s, tmp_path)
    try:
        r = resumed.replay
        assert resumed.velocity_from_snapshot
        assert (r.replayed, r.from_deltas, r.missing_payload) == (50, 50, 0)
        assert fresh.replay.replayed == 150
        # the same bits as a replay of the whole log (both from seq 0: the log is younger than 30 days)
        want = features_state_bytes(fresh.pipeline.extractor)
        assert features_state_bytes(resumed.pipeline.extractor) == want
    finally:
        resumed.close()  # no decision since the start: the restored state, caught up, sealed at the stop
        fresh.service.close()
        fresh.engine.dispose()
    first, at_stop = _snapshots(s.db)
    assert first == periodic
    again = Runtime.open(s)
    try:
        assert again.velocity_from_snapshot and again.replay.replayed == 0
    finally:
        again.close()  # that very state is sealed already: nothing more
    assert _snapshots(s.db) == [periodic, at_stop]
    engine = database.open_engine(s.db)
    try:  # both carry the first run's from_seq on: one catch-up recomputes both roots
        report = verify_index(engine, state_roots=True)
        assert (report.state_snapshots, report.state_roots_recomputed) == (2, 2)
    finally:
        engine.dispose()


def _change_one_account(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    fs_head, _, rest = body.partition(b"\n")
    n = orjson.loads(fs_head)["velocity"]
    velocity, graph = orjson.loads(rest[:n]), rest[n:]
    velocity["accounts"][0][1] += 1  # one account's last activity, a microsecond later
    new_velocity = orjson.dumps(velocity)
    fs_head = orjson.dumps({"format": FEATURE_STATE_FORMAT, "velocity": len(new_velocity)})
    path.write_bytes(head + b"\n" + fs_head + b"\n" + new_velocity + graph)


def _lie_in_head(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    doc = orjson.loads(head)
    doc["from_seq"] += 1
    path.write_bytes(orjson.dumps(doc) + b"\n" + body)


@pytest.mark.parametrize(("damage", "said"), [
    (_change_one_account, "not the state the ledger vouches for"),
    (_lie_in_head, "caught up from seq"),
])
def test_a_snapshot_file_that_is_not_the_sealed_state_is_refused_and_the_state_rebuilt(
        db: Db, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object, said: str) -> None:
    s = _every(db, tmp_path, every=0)
    batch, probe = subs(52, 120), subs(52, 120)[:40]
    rt = Runtime.open(s)
    rt.service.decide(batch, timeout_s=60)
    rt.close()
    assert len(_snapshots(s.db)) == 1
    assert callable(damage)
    damage(s.velocity_snapshot_file)
    with caplog.at_level(logging.WARNING, logger="audit.state.snapshot"):
        resumed = Runtime.open(s)
    fresh = _fresh(s, tmp_path)
    try:
        assert not resumed.velocity_from_snapshot and resumed.replay.replayed == 120
        assert said in caplog.text
        np.testing.assert_array_equal(features_next(resumed, probe), features_next(fresh, probe))
    finally:
        resumed.service.close()
        resumed.engine.dispose()
        fresh.service.close()
        fresh.engine.dispose()


def test_a_bad_snapshot_interval_refuses_to_start(db: Db, tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=-1)
    with pytest.raises(ValueError, match="state_snapshot_every"):
        Runtime.open(s)


def _hint_past_the_ledger(path: Path) -> None:
    head, _, body = path.read_bytes().partition(b"\n")
    doc = orjson.loads(head)
    doc["sealed_seq"] = 2**63 - 1  # where to look first: no seq a ledger holds
    path.write_bytes(orjson.dumps(doc) + b"\n" + body)


def test_a_head_whose_sealed_seq_is_past_the_ledger_still_finds_the_sealed_snapshot(db: Db,
                                                                                     tmp_path: Path) -> None:
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(53, 60), timeout_s=60)
    rt.close()
    _hint_past_the_ledger(s.velocity_snapshot_file)
    resumed = Runtime.open(s)
    try:
        assert resumed.velocity_from_snapshot and resumed.replay.replayed == 0
    finally:
        resumed.close()


def test_a_snapshot_path_that_cannot_be_read_is_a_logged_rebuild(db: Db, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    s = _every(db, tmp_path, every=0)
    rt = Runtime.open(s)
    rt.service.decide(subs(54, 40), timeout_s=60)
    rt.close()
    s.velocity_snapshot_file.unlink()
    s.velocity_snapshot_file.mkdir()  # what stands there is no file
    with caplog.at_level(logging.WARNING, logger="audit.state.snapshot"):
        resumed = Runtime.open(s)
    try:
        assert not resumed.velocity_from_snapshot and resumed.replay.replayed == 40
        assert "not used" in caplog.text and str(s.velocity_snapshot_file) in caplog.text
    finally:
        resumed.service.close()
        resumed.engine.dispose()
