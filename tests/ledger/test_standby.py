"""A ledger on PostgreSQL streaming replication: the standby holds the primary's log (by proof), and
after a promotion the fence (``ledger.fencing``) keeps writers of the old primary from appending.

Clusters are the test's own (``tests.pg_cluster``: a primary and a hot standby on two ports of this
machine); skipped only where no cluster can start here, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import migrations
from ledger import NoteSigner, Record, store
from ledger.append import CheckpointPolicy, Ledger
from ledger.errors import LedgerError, LedgerUnavailableError
from ledger.fencing import EPOCH_KIND, FencedError, newest_epoch, seal_epoch
from ledger.merkle import verify_consistency
from ledger.proofs import prove_consistency
from ledger.replication import promote, status
from ledger.verify import verify_ledger
from tests import pg_cluster
from tests.conftest import ORIGIN, Db

STANDBY = "site_b"


@pytest.fixture
def pair() -> Iterator[tuple[pg_cluster.Cluster, pg_cluster.Cluster]]:
    """A primary streaming to hot standby ``site_b`` (asynchronous), both started."""
    reason = pg_cluster.unavailable()
    if reason:
        pytest.skip(f"cannot start throwaway PostgreSQL clusters: {reason}")
    with pg_cluster.Cluster.create(replication=True) as primary:
        standby = primary.standby(STANDBY)
        primary.wait_streaming(STANDBY)
        yield primary, standby


def note(i: object) -> Record:
    return Record("note", {"i": i})


def opened(url: str, signer: NoteSigner) -> Ledger:
    return Ledger(store.connect(url), signer, policy=CheckpointPolicy(4, 3600))


def created(url: str, signer: NoteSigner) -> Ledger:
    engine = store.connect(url, create_file=True)
    migrations.upgrade(engine)
    return Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(4, 3600))


@pytest.mark.slow
@pytest.mark.requirement("SEC-17a4f-backup")
def test_the_standby_holds_the_primarys_log_by_proof(pair: tuple[pg_cluster.Cluster, pg_cluster.Cluster],
                                                      signer: NoteSigner) -> None:
    primary, standby = pair
    ledger = created(primary.url, signer)
    for i in range(3):
        ledger.append_many([note(f"{i}.{k}") for k in range(5)])
    early = ledger.checkpoint()
    ledger.append_many([note(k) for k in range(7)])
    held = ledger.checkpoint()
    primary.wait_streaming(STANDBY, caught_up=True)

    replica = store.connect(standby.url)
    report = verify_ledger(replica, [signer.verifier], witnessed=[early.note, held.note], max_unsealed=0)
    assert report.size == held.checkpoint.size == ledger.size()
    # the standby's own tree proves the primary's earlier checkpoint a prefix of its latest one
    proof = prove_consistency(replica, early.checkpoint.size, held.checkpoint.size)
    verify_consistency(early.checkpoint.size, held.checkpoint.size, proof.hashes, early.checkpoint.root,
                       held.checkpoint.root)
    seen = status(replica)
    assert (seen.in_recovery, seen.size, seen.replay_lag_bytes) == (True, ledger.size(), 0)
    assert [s.name for s in status(ledger.engine).standbys] == [STANDBY]


@pytest.mark.slow
@pytest.mark.requirement("DORA-11-12-recovery")
def test_after_a_promotion_writers_of_the_old_primary_are_fenced(
        pair: tuple[pg_cluster.Cluster, pg_cluster.Cluster], signer: NoteSigner) -> None:
    primary, standby = pair
    old = created(primary.url, signer)  # began on the old primary, timeline 1
    # a writer configured with both sites, connecting to whichever takes writes (libpq failover)
    both = (f"postgresql+psycopg://postgres@/postgres?host=127.0.0.1:{primary.port}"
            f"&host=127.0.0.1:{standby.port}&target_session_attrs=read-write")
    roaming = opened(both, signer)
    old.append_many([note(k) for k in range(5)])
    roaming.append(note("roaming"))
    primary.wait_streaming(STANDBY, caught_up=True)
    follower = opened(standby.url, signer)  # a warm standby's writer: began on the standby

    with pytest.raises(FencedError, match="in recovery") as refused:
        follower.append(note("on the standby"))
    assert refused.value.reason == "standby"
    assert isinstance(refused.value, LedgerUnavailableError)  # the API's 503: try the other site

    primary.stop(mode="immediate")
    assert promote(store.connect(standby.url)) is True
    sealer = opened(standby.url, signer)
    sealed = seal_epoch(sealer)
    assert (sealed.timeline, sealed.created) == (2, True)
    assert seal_epoch(sealer).seq == sealed.seq  # once per timeline
    size = sealer.size()

    # the warm standby's writer follows its database into the new timeline
    assert follower.append(note("after the promotion")).seq == size
    # a writer that began on the old primary, now reaching the new one: its state may hold what
    # the new primary lost, so it must restart
    roaming.engine.dispose()
    with pytest.raises(FencedError, match="restart the process") as refused:
        roaming.append(note("roaming again"))
    got = refused.value
    assert (got.reason, got.epoch, got.epoch_seq) == ("superseded", 2, sealed.seq)

    # the old primary comes back as a primary: whoever has seen the new timeline is refused there
    primary.start()
    primary.set_synchronous("")
    roaming.engine.dispose()  # libpq tries the old primary first, and it takes writes
    with pytest.raises(FencedError, match="superseded primary") as refused:
        roaming.append(note("on the fork"))
    assert refused.value.reason == "old_timeline"
    # ... but a writer that never saw the new primary is not: a split view, for the follower to catch
    assert opened(primary.url, signer).append(note("split")).seq == size - 1
    with store.connect(primary.url).connect() as conn:
        assert newest_epoch(conn) is None

    # the drill's way: the old primary re-made a standby of the new one; its old writers are refused
    primary.follow(standby, slot="site_a")
    with pytest.raises(FencedError, match="in recovery"):
        old.append(note("old"))
    nothing = verify_ledger(store.connect(standby.url), [signer.verifier])
    assert nothing.size == size + 1
    with store.connect(standby.url).connect() as conn:
        kinds = [k for (k,) in conn.exec_driver_sql("SELECT kind FROM ledger_entries ORDER BY seq")]
    assert kinds.count(EPOCH_KIND) == 1 and "roaming again" not in str(kinds)


def test_a_writer_that_saw_a_newer_timeline_is_refused_on_an_older_one(db: Db, signer: NoteSigner) -> None:
    ledger = created(db.url, signer)
    ledger.append(note(1))
    ledger.fence.seen = 99  # as if it had committed on a primary promoted 98 times since
    if db.dialect == "sqlite":  # no replication, no timelines: nothing to fence, no epoch to seal
        ledger.append(note(2))
        with pytest.raises(LedgerError, match="SQLite"):
            seal_epoch(ledger)
        assert status(ledger.engine).in_recovery is False
        return
    with pytest.raises(FencedError, match=r"timeline 1, but .* timeline 99") as refused:
        ledger.append(note(2))
    assert refused.value.reason == "old_timeline"
    with pytest.raises(FencedError):
        ledger.checkpoint()  # a checkpoint of a fork is refused too
    assert ledger.size() == 2
