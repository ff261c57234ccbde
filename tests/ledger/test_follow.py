"""The follower's checks: each round against the last accepted checkpoint and the standby's
replicated records, with the primary and the standby as real SQLite ledgers (a copy of a file is
a standby that stopped replicating there) and the clock passed in."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.checkpoint import Checkpoint
from ledger.follow import (
    FollowState,
    Round,
    SourceUnavailableError,
    StateError,
    follow_round,
)
from ledger.follow_io import DbPrimary, DbReplica, StateDir
from tests.conftest import ORIGIN, Db, make_ledger

T0 = 1_800_000_000.0
STALL = 300.0


def new_ledger(tmp_path: Path, name: str, signer: NoteSigner) -> Ledger:
    return make_ledger(Db(f"sqlite:///{tmp_path / name}.db", "sqlite"), signer)


def grow(lg: Ledger, n: int, tag: str = "a") -> int:
    """Append ``n`` records and sign a checkpoint; the new size."""
    lg.append_many([Record("test.event", {"tag": tag, "i": i}) for i in range(n)])
    return lg.checkpoint().checkpoint.size


def copy_of(lg: Ledger, tmp_path: Path, name: str) -> DbReplica:
    """A standby frozen where ``lg`` is now."""
    src = Path(str(lg.engine.url.database))
    dst = tmp_path / f"{name}.db"
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
    shutil.copy(src, dst)
    return DbReplica(Db(f"sqlite:///{dst}", "sqlite").engine())


class Offering:
    """A primary that publishes a chosen note, and proves from a real ledger."""

    def __init__(self, note: str, proofs: Ledger | None = None, size: int | None = None) -> None:
        self.note, self.proofs, self._size = note, proofs, size

    def latest(self) -> str:
        return self.note

    def size(self) -> int | None:
        return self._size

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        if self.proofs is None:
            raise SourceUnavailableError("no proofs here")
        return DbPrimary(self.proofs.engine).consistency(old, new)


class Down:
    def latest(self) -> str:
        raise SourceUnavailableError("connection refused")

    def size(self) -> int | None:
        raise SourceUnavailableError("connection refused")

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        raise SourceUnavailableError("connection refused")


@pytest.fixture
def primary(tmp_path: Path, signer: NoteSigner) -> Ledger:
    return new_ledger(tmp_path, "primary", signer)


def run(state: FollowState | None, primary: object, replica: object, signer: NoteSigner,
        now: float = T0) -> Round:
    return follow_round(state, primary, replica, [signer.verifier], now=now,  # type: ignore[arg-type]
                        stall_after=STALL)


def kinds(r: Round) -> list[str]:
    return [str(a.kind) for a in r.alarms]


def test_growing_checkpoints_are_accepted_and_checked_against_the_replicated_records(
        primary: Ledger, signer: NoteSigner) -> None:
    p, standby = DbPrimary(primary.engine), DbReplica(primary.engine)
    r = run(None, p, standby, signer)
    assert r.ok and r.new and r.state is not None and r.state.accepted.checkpoint.size == 1
    assert r.checked_against_replica == 1 and r.lag == 0
    sizes: list[int] = []
    for n in (10, 7, 300):
        size = grow(primary, n)
        r = run(r.state, p, standby, signer, T0 + len(sizes) + 1)
        assert r.ok, r.alarms
        assert r.new and r.checked_against_replica == size
        assert r.state is not None and r.state.leaves.size == size
        sizes.append(r.state.accepted.checkpoint.size)
    assert sizes == [11, 18, 318]
    assert r.state is not None
    again = run(r.state, p, standby, signer, T0 + 10)  # nothing new: fine, not new
    assert again.ok and not again.new and again.state is not None
    assert again.state.accepted_at == r.state.accepted_at == T0 + 3


def test_a_lagging_standby_is_reported_and_the_proof_comes_from_the_primary(
        primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    p = DbPrimary(primary.engine)
    grow(primary, 5)
    first = run(None, p, DbReplica(primary.engine), signer)
    lagging = copy_of(primary, tmp_path, "standby")  # stands at 6 entries
    size = grow(primary, 20)
    r = run(first.state, p, lagging, signer, T0 + 1)
    assert r.ok and r.new and r.state is not None and r.state.accepted.checkpoint.size == size
    assert r.replica_size == 6 and r.lag == size - 6
    assert r.checked_against_replica is None
    assert any("the standby lags" in n for n in r.notes)
    # once the standby has the records, the accepted root is checked against them
    caught_up = run(r.state, p, DbReplica(primary.engine), signer, T0 + 2)
    assert caught_up.ok and caught_up.checked_against_replica == size


@pytest.mark.requirement("DORA-24-25-testing")
def test_an_older_checkpoint_is_a_rollback(primary: Ledger, signer: NoteSigner) -> None:
    old_note = primary.latest_checkpoint()
    assert old_note is not None
    grow(primary, 10)
    r = run(None, DbPrimary(primary.engine), DbReplica(primary.engine), signer)
    r2 = run(r.state, Offering(old_note.note), DbReplica(primary.engine), signer, T0 + 1)
    assert kinds(r2) == ["ROLLBACK"]
    (alarm,) = r2.alarms
    assert alarm.accepted is not None and alarm.offered is not None
    assert (alarm.accepted.size, alarm.offered.size) == (11, 1)
    assert alarm.offered_note == old_note.note and alarm.accepted_note == r.state.accepted.note  # type: ignore[union-attr]
    assert r2.state is not None and r2.state.accepted.checkpoint.size == 11  # the accepted one stays


def test_same_size_other_root_and_an_inconsistent_larger_tree_are_forks(
        primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    other = new_ledger(tmp_path, "other", signer)  # same origin, same key, other records
    grow(primary, 9)
    grow(other, 9, tag="b")
    standby = DbReplica(primary.engine)
    r = run(None, DbPrimary(primary.engine), standby, signer)
    same_size = other.latest_checkpoint()
    assert same_size is not None and same_size.checkpoint.size == 10
    fork = run(r.state, Offering(same_size.note), standby, signer, T0 + 1)
    assert kinds(fork) == ["FORK"] and "different roots" in fork.alarms[0].detail
    grow(other, 5, tag="b")
    larger = run(r.state, DbPrimary(other.engine), standby, signer, T0 + 2)
    assert kinds(larger) == ["FORK"]
    (alarm,) = larger.alarms
    assert "does not extend the accepted one of size 10" in alarm.detail and "the primary" in alarm.detail
    assert alarm.offered is not None and alarm.offered.size == 15
    assert larger.state is not None and larger.state.accepted.checkpoint.size == 10


def test_a_root_the_replicated_records_do_not_make_is_a_fork(
        primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    other = new_ledger(tmp_path, "other", signer)
    grow(primary, 9)
    grow(other, 4, tag="b")
    r = run(None, DbPrimary(other.engine), DbReplica(primary.engine), signer)
    assert kinds(r) == ["FORK"]
    (alarm,) = r.alarms
    assert "the primary signed a tree the replicated records do not make" in alarm.detail
    assert alarm.replicated is not None and alarm.offered is not None
    assert alarm.replicated.size == alarm.offered.size == 5 and alarm.replicated.root != alarm.offered.root
    assert r.state is None  # nothing accepted


def test_bad_signatures_and_untrusted_keys_alarm(primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    standby = DbReplica(primary.engine)
    stranger = NoteSigner.generate(ORIGIN)
    forged = Checkpoint(ORIGIN, 1, primary.latest_checkpoint().checkpoint.root).sign([stranger])  # type: ignore[union-attr]
    r = run(None, Offering(forged.note), standby, signer)
    assert kinds(r) == ["BAD_SIGNATURE"] and "not signed by" in r.alarms[0].detail and r.state is None
    note = primary.latest_checkpoint().note  # type: ignore[union-attr]
    lines = note.split("\n")
    lines[2] = "A" * 43 + "="  # another root under the same signature
    r = run(None, Offering("\n".join(lines)), standby, signer)
    assert kinds(r) == ["BAD_SIGNATURE"] and "does not verify" in r.alarms[0].detail
    r = run(None, Offering("not a note"), standby, signer)
    assert kinds(r) == ["BAD_SIGNATURE"] and "malformed" in r.alarms[0].detail
    r = follow_round(None, DbPrimary(primary.engine), standby, [stranger.verifier], now=T0, stall_after=STALL)
    assert kinds(r) == ["BAD_SIGNATURE"] and "is a pinned key" in r.alarms[0].detail
    elsewhere = Checkpoint("other.example/log", 1, bytes(32)).sign([signer])
    r = run(None, Offering(elsewhere.note), standby, signer)
    assert kinds(r) == ["BAD_SIGNATURE"] and "'other.example/log'" in r.alarms[0].detail


def test_a_rotated_key_is_trusted_through_its_endorsement(primary: Ledger, signer: NoteSigner) -> None:
    p, standby = DbPrimary(primary.engine), DbReplica(primary.engine)
    r = run(None, p, standby, signer)
    new = NoteSigner.generate(ORIGIN)
    primary.rotate_key(new)
    size = grow(primary, 3)
    r = run(r.state, p, standby, signer, T0 + 1)  # the old key pinned: the new one chains from it
    assert r.ok and r.state is not None and r.state.accepted.checkpoint.size == size
    # a checkpoint the retired key signs for a size after its retirement is refused
    late = Checkpoint(ORIGIN, size, r.state.accepted.checkpoint.root).sign([signer])
    r2 = run(r.state, Offering(late.note), standby, signer, T0 + 2)
    assert kinds(r2) == ["BAD_SIGNATURE"]


def test_stalls_alarm_after_the_configured_time(primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    p = DbPrimary(primary.engine)
    r = run(None, p, DbReplica(primary.engine), signer)
    primary.append_many([Record("test.event", {"i": i}) for i in range(3)])  # grows, no checkpoint
    quiet = run(r.state, p, DbReplica(primary.engine), signer, T0 + 10)
    assert quiet.ok and quiet.state is not None and quiet.state.behind_since == T0 + 10
    late = run(quiet.state, p, DbReplica(primary.engine), signer, T0 + 10 + STALL + 1)
    assert kinds(late) == ["STALL"] and "no new checkpoint for 301 s" in late.alarms[0].detail
    # a checkpoint ends it
    primary.checkpoint()
    assert run(late.state, p, DbReplica(primary.engine), signer, T0 + 400).ok

    frozen = copy_of(primary, tmp_path, "frozen")
    s = run(None, p, frozen, signer, T0).state
    grow(primary, 5)
    s1 = run(s, p, frozen, signer, T0 + 1)
    assert s1.ok
    s2 = run(s1.state, p, frozen, signer, T0 + 2 + STALL)
    assert kinds(s2) == ["STALL"] and "the standby has stood at 4 entries" in s2.alarms[0].detail
    assert s2.lag == 5

    down = run(s2.state, Down(), frozen, signer, T0 + 1000)
    assert "STALL" in kinds(down) and any("the primary does not answer" in a.detail for a in down.alarms)


def test_the_state_round_trips_and_a_corrupt_one_is_refused(primary: Ledger, signer: NoteSigner,
                                                             tmp_path: Path) -> None:
    grow(primary, 12)
    r = run(None, DbPrimary(primary.engine), DbReplica(primary.engine), signer)
    assert r.state is not None
    doc = json.loads(json.dumps(r.state.to_json()))
    back = FollowState.from_json(doc)
    assert back == r.state and back.leaves.hashes == r.state.leaves.hashes
    for broken in ({**doc, "version": 2}, {**doc, "accepted_size": 3}, {**doc, "accepted_note": "x"},
                   {**doc, "leaves": {"size": 3, "hashes": []}}, {**doc, "replica_since": "soon"},
                   {**doc, "leaves": {"size": 1, "hashes": ["zz"]}}, [1, 2]):
        with pytest.raises(StateError):
            FollowState.from_json(broken)
    sd = StateDir(tmp_path / "follow")
    with sd:
        assert sd.load() is None
        sd.save(r.state)
        assert sd.load() == r.state
        with pytest.raises(StateError, match="another follower holds"):
            StateDir(sd.path).lock()
        sd.file.write_text('{"version": 1, "origin": ')
        with pytest.raises(StateError, match=r"state\.json is not JSON"):
            sd.load()


def test_evidence_keeps_both_notes_once(primary: Ledger, signer: NoteSigner, tmp_path: Path) -> None:
    old = primary.latest_checkpoint()
    grow(primary, 3)
    r = run(None, DbPrimary(primary.engine), DbReplica(primary.engine), signer)
    r2 = run(r.state, Offering(old.note), DbReplica(primary.engine), signer, T0 + 1)  # type: ignore[union-attr]
    sd = StateDir(tmp_path / "follow")
    where = sd.keep_evidence(r2.alarms[0], T0 + 1)
    assert where is not None and where.name.startswith("ROLLBACK-1-")
    assert (where / "offered.note").read_text() == old.note  # type: ignore[union-attr]
    assert (where / "accepted.note").read_text() == r.state.accepted.note  # type: ignore[union-attr]
    doc = json.loads((where / "alarm.json").read_text())
    assert doc["kind"] == "ROLLBACK" and doc["accepted"]["size"] == 4 and doc["offered"]["size"] == 1
    assert sd.keep_evidence(r2.alarms[0], T0 + 99) == where  # once per note
    assert json.loads((where / "alarm.json").read_text())["first_seen"] == doc["first_seen"]


def test_the_database_sources_on_each_dialect(db: Db, signer: NoteSigner, tmp_path: Path) -> None:
    """PostgreSQL where CI has it: the primary's checkpoints and the standby's leaves, keys and
    proofs read through the same statements as on SQLite (a standby of that same database here)."""
    lg = make_ledger(db, signer)
    try:
        p, standby = DbPrimary(lg.engine), DbReplica(lg.engine)
        r = run(None, p, standby, signer)
        lg.rotate_key(NoteSigner.generate(ORIGIN))
        sizes = []
        for i, n in enumerate((40, 3)):
            sizes.append(grow(lg, n))
            r = run(r.state, p, standby, signer, T0 + i + 1)
            assert r.ok, r.alarms
            assert r.state is not None and r.state.accepted.checkpoint.size == sizes[-1]
            assert r.checked_against_replica == sizes[-1]
        assert sizes == [42, 45]
        assert p.size() == standby.size() == sizes[-1] and standby.origin() == ORIGIN
        assert next(k.vkey for _, k in standby.keys([signer.verifier])) == signer.verifier.vkey
        chunks = list(standby.leaf_hashes(0, sizes[-1]))
        assert sum(len(c) for c in chunks) == sizes[-1]
    finally:
        lg.engine.dispose()
