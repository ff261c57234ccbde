"""Deciding across a failover: the scoring path's runtime on a primary, a warm standby decider on its
hot standby (``open_runtime`` on the standby: its idle catch-up follows the replicated log), the
primary killed (``pg_ctl stop -m immediate``) and the standby promoted (``sealtrail standby promote``'s
function).

What users notice: with synchronous replication no acknowledged decision is missing from the
promoted ledger; with asynchronous replication and a standby left behind, the drill counts the
acknowledged decisions that are missing (and there are some); the promoted ledger verifies; the
standby decider decides at once on a state equal to a cold rebuild's, without rebuilding; the old
primary's runtime, once that server is back as a standby, is refused. The drill's timings are
``bench.failover``'s to report; nothing here asserts a duration.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.cli.standby import promote_database
from api.config import Settings
from api.ops import initialise
from audit.decide.types import Submission
from audit.scoring import open_runtime
from bench.failover import drill, sealed_trace_ids, state_digest
from bench.pipeline import workload
from ledger import store
from ledger.fencing import EPOCH_KIND
from tests import pg_cluster

pytestmark = pytest.mark.slow  # two PostgreSQL clusters and two or three runtimes per test


@pytest.fixture(scope="module")
def subs() -> list[Submission]:
    return workload(3000)


@pytest.fixture(autouse=True)
def clusters_can_start() -> None:
    reason = pg_cluster.unavailable()
    if reason:
        pytest.skip(f"cannot start throwaway PostgreSQL clusters: {reason}")


@pytest.mark.requirement("DORA-24-25-testing")
def test_synchronous_replication_loses_no_acknowledged_decision(subs: list[Submission],
                                                                tmp_path: Path) -> None:
    r = drill("sync", subs, tmp_path, seconds=1.5, threads=3)
    assert r.acknowledged_by_primary > 0 and r.acknowledged_by_standby > 0
    assert r.lost == 0
    assert r.verified_size > r.acknowledged_by_primary + r.acknowledged_by_standby
    assert r.warm_state_matches_cold
    assert r.fenced.startswith("FencedError (standby)")
    # nothing lost: the witness cosigns the promoted primary's checkpoint, the follower accepts it
    assert r.witness_before.startswith("cosigned") and r.witness_after.startswith("cosigned"), r
    assert r.follower_after.startswith("accepted"), r.follower_after


@pytest.mark.requirement("DORA-24-25-testing")
def test_asynchronous_replication_with_a_frozen_sender_loses_what_it_acknowledged(
        subs: list[Submission], tmp_path: Path) -> None:
    r = drill("async", subs, tmp_path, seconds=1.0, freeze_s=1.0, threads=3)
    assert r.standby_lag_bytes_at_kill is not None and r.standby_lag_bytes_at_kill > 0
    # acknowledged while the sender was frozen, never sent: the drill measures them missing
    assert 0 < r.lost < r.acknowledged_by_primary
    assert r.lost_span_s > 0
    # the promoted ledger is whole (a prefix of the old primary's) and the standby decided on it
    assert r.acknowledged_by_standby > 0
    assert r.verified_size > 0
    assert r.warm_state_matches_cold
    assert r.fenced.startswith("FencedError (standby)")
    # the loss does not pass unnoticed: the witness saw a longer history than the promoted primary
    # holds and refuses its checkpoint, and the follower beside the standby alarms
    assert r.witness_before.startswith("cosigned")
    # (smaller than what it cosigned: a rollback; larger by then: a fork its proof cannot connect)
    assert r.witness_after.startswith("ALARM"), r.witness_after
    assert r.follower_after.startswith(("ALARM ROLLBACK", "ALARM FORK")), r.follower_after


def _settings(url: str, root: Path, name: str) -> Settings:
    return Settings.model_validate({"db": url, "keys": root / "keys", "velocity_snapshot": root / name})


@pytest.fixture
def pair() -> Iterator[tuple[pg_cluster.Cluster, pg_cluster.Cluster]]:
    with pg_cluster.Cluster.create(replication=True) as primary:
        standby = primary.standby("site_b")
        primary.set_synchronous("site_b")
        primary.wait_streaming("site_b", sync=True)
        yield primary, standby


@pytest.mark.requirement("DORA-24-25-testing")
def test_the_standby_decider_is_warm_after_promotion(
        subs: list[Submission], tmp_path: Path, pair: tuple[pg_cluster.Cluster, pg_cluster.Cluster]) -> None:
    primary, standby = pair
    sa, sb = _settings(primary.url, tmp_path, "a"), _settings(standby.url, tmp_path, "b")
    initialise(sa)
    with open_runtime(sa) as ra:
        ra.decide(subs[:50], timeout_s=60)
        primary.wait_streaming("site_b", caught_up=True)
        with open_runtime(sb) as rb:  # opened on the read-only standby
            opened_at = rb.pipeline.covered
            for i in range(50, 650, 25):  # decided on the primary after the standby decider opened
                ra.decide(subs[i:i + 25], timeout_s=60)
            size = ra.ledger.size()
            deadline = time.monotonic() + 30
            while rb.pipeline.covered != size and time.monotonic() < deadline:
                time.sleep(0.01)  # the standby decider's own idle catch-up, nothing called here
            assert opened_at is not None and opened_at < size
            assert rb.pipeline.covered == size
            assert rb.pipeline.caught_up >= 600

            primary.stop(mode="immediate")
            promoted = promote_database(sb)
            assert promoted["promoted"] and promoted["timeline"] == 2 and promoted["epoch_sealed"]
            with store.connect(standby.url).connect() as conn:
                kinds = [k for (k,) in conn.exec_driver_sql(
                    f"SELECT kind FROM ledger_entries WHERE seq >= {size} ORDER BY seq")]
            assert kinds == [EPOCH_KIND]  # nothing but the epoch since the standby decider's tip

            with open_runtime(_settings(standby.url, tmp_path, "cold")) as cold:  # rebuilt from the log
                assert state_digest(rb) == state_digest(cold)
            tip = rb.ledger.size()  # the epoch, and the cold runtime's state snapshot at its clean stop
            (d,) = rb.decide(subs[700:701], timeout_s=60)
            assert d.seq == tip
            # decided on the state it kept warm: no batch refused and prepared again, no rebuild
            p = rb.pipeline
            assert (p.superseded, p.rolled_back, p.sealed_at_rebuild) == (0, 0, 0)
    assert d.trace_id in sealed_trace_ids(standby.url)
