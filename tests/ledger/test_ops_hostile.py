"""Hostile tests of the follower, fencing, backups and key revocation.

Each ``test_bug_*`` reproduces a way around the evidence (or a crash) a hostile review found in the
follower, now fixed: it fails if the defect comes back. Each ``test_holds_*`` is an attack that was
refused from the start and must stay refused."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

import migrations
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.backup import BackupMismatchError, prove_extends
from ledger.checkpoint import Checkpoint
from ledger.database import initialise, open_engine, open_ledger
from ledger.errors import DamageError, RefusedError
from ledger.follow import FollowState, Round, SourceUnavailableError, StateError, follow_round
from ledger.follow_io import DbPrimary, DbReplica
from ledger.keys import FileKeyStore, load_signer, revoke_key, rotate_key_file
from ledger.merkle import CompactRange
from ledger.revocation import REVOCATION_KIND, KeyRevocation, revocation_message
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger
from tests.ledger.test_follow import STALL, T0, grow, new_ledger


def file_copy(lg: Ledger, tmp_path: Path, name: str) -> Path:
    src = Path(str(lg.engine.url.database))
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
    dst = tmp_path / f"{name}.db"
    shutil.copy(src, dst)
    return dst


class Offering:
    """A primary (its HTTP API, say) publishing a chosen note and proving from a chosen ledger."""

    def __init__(self, note: str, proofs: Ledger | None = None) -> None:
        self.note, self.proofs = note, proofs

    def latest(self) -> str:
        return self.note

    def size(self) -> int | None:
        return None  # the API does not tell

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        if self.proofs is None:
            raise SourceUnavailableError("no proofs here")
        return DbPrimary(self.proofs.engine).consistency(old, new)


def run(state: FollowState | None, primary: object, replica: object, signer: NoteSigner,
        now: float) -> Round:
    return follow_round(state, primary, replica, [signer.verifier], now=now,  # type: ignore[arg-type]
                        stall_after=STALL)


# --------------------------------------------------------------------------- follow: findings


def test_bug_follow_a_standby_key_read_failure_escapes_the_round_instead_of_a_stall(
        tmp_path: Path, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standby answers size() and origin(), then drops the connection while its key history is
    read: ``DbReplica.keys`` raises ``SourceUnavailableError`` which ``follow_round`` does not catch
    (it catches it around size/origin and the leaf reads only). The loop form dies; ``--once``
    exits 2 (configuration) instead of 1 with a STALL alarm."""
    primary = new_ledger(tmp_path, "primary", signer)
    grow(primary, 4)
    replica = DbReplica(primary.engine)
    first = run(None, DbPrimary(primary.engine), replica, signer, T0)
    assert first.ok and first.state is not None
    grow(primary, 3)

    def dropped(conn: object) -> list[tuple[str, int]]:
        raise OperationalError("SELECT vkey ...", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr("ledger.follow_io.store.key_history", dropped)
    r = run(first.state, DbPrimary(primary.engine), replica, signer, T0 + 1)  # raises today
    assert [str(a.kind) for a in r.alarms] == ["STALL"]


def test_bug_follow_accepts_a_checkpoint_larger_than_the_primarys_own_log_and_stays_silent(
        tmp_path: Path, signer: NoteSigner) -> None:
    """Whoever holds the signing key and may INSERT into the primary's ``ledger_checkpoints`` (the
    append-only triggers allow inserts) plants a signed checkpoint of a size the log will not reach
    for years, with a made-up root. ``DbPrimary.latest`` always serves the largest size, so a
    follower starting on that primary accepts it "on its signature alone", although the same
    primary says its log holds 10 entries, and stays silent round after round: the standby keeps
    growing (no standby STALL), the accepted size is never behind (no checkpoint STALL), and no
    real checkpoint is ever looked at again."""
    primary = new_ledger(tmp_path, "primary", signer)
    grow(primary, 9)
    far = Checkpoint(ORIGIN, 1_000_000, b"\x42" * 32).sign([signer])
    with primary.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO ledger_checkpoints (size, root, note, key_id, created_at) VALUES (?, ?, ?, ?, ?)",
            (1_000_000, b"\x42" * 32, far.note, signer.verifier.key_id.hex(), int(time.time() * 1e6)))
    p, standby = DbPrimary(primary.engine), DbReplica(primary.engine)
    alarms: list[str] = []
    state: FollowState | None = None
    for i in range(6):
        r = run(state, p, standby, signer, T0 + i * (STALL + 1))
        alarms += [str(a.kind) for a in r.alarms]
        state = r.state
        primary.append_many([Record("test.event", {"round": i, "j": j}) for j in range(5)])
        primary.checkpoint()  # the honest checkpoints go on being signed, never looked at
    assert state is None or state.accepted.checkpoint.size < 1_000_000  # never accepted
    assert alarms and set(alarms) == {"FORK"}, alarms  # raised every round it is served


def test_bug_follow_never_alarms_on_a_forked_checkpoint_beyond_a_standby_that_grows_slowly(
        tmp_path: Path, signer: NoteSigner) -> None:
    """A primary (key holder) publishes a fork far ahead of the log, proved consistent with the
    accepted checkpoint by its own proof. The standby keeps replicating the real (slower) log: the
    fork is never compared with the replicated records, and no STALL comes either, since the
    standby moves every round. docs/follow.md: "A standby that does not catch up raises STALL"."""
    primary = new_ledger(tmp_path, "primary", signer)
    grow(primary, 9)
    first = run(None, DbPrimary(primary.engine), DbReplica(primary.engine), signer, T0)
    assert first.ok and first.state is not None and first.state.accepted.checkpoint.size == 10
    evil_path = file_copy(primary, tmp_path, "evil")  # the same first 10 entries
    evil = Ledger(Db(f"sqlite:///{evil_path}", "sqlite").engine(), signer)
    grow(evil, 990, tag="forged")  # size 1000: another history after 10
    forged = evil.latest_checkpoint()
    assert forged is not None and forged.checkpoint.size == 1000
    standby = DbReplica(primary.engine)
    state, alarms = first.state, []
    for i in range(1, 8):
        grow(primary, 3, tag="real")  # the real log grows, the standby with it
        r = run(state, Offering(forged.note, evil), standby, signer, T0 + i * (STALL - 1))
        alarms += [str(a.kind) for a in r.alarms]
        state = r.state
    assert state is not None and state.accepted.checkpoint.size == 1000
    assert alarms, "a fork 990 entries ahead of a growing standby raised no alarm in 35 minutes"


def test_bug_follow_forgeries_ahead_of_a_stopped_standby_never_alarm(
        tmp_path: Path, signer: NoteSigner) -> None:
    """Notes signed by no trusted key at all, for a size past the standby, are only "waiting for a
    key rotation" (a note, no BAD_SIGNATURE, no evidence kept). If the standby stands at the
    accepted size (a compromised primary stops streaming to it), ``known`` ignores the offered
    size, so neither STALL fires: the follower reports all good forever."""
    primary = new_ledger(tmp_path, "primary", signer)
    size = grow(primary, 9)
    frozen = DbReplica(Db(f"sqlite:///{file_copy(primary, tmp_path, 'standby')}", "sqlite").engine())
    first = run(None, DbPrimary(primary.engine), frozen, signer, T0)
    assert first.ok and first.state is not None and first.state.accepted.checkpoint.size == size
    stranger = NoteSigner.generate(ORIGIN)  # same name, not the log's key
    forged = Checkpoint(ORIGIN, size + 50, b"\x13" * 32).sign([stranger])
    state, alarms, notes = first.state, [], []
    for i in range(1, 6):
        r = run(state, Offering(forged.note), frozen, signer, T0 + i * (STALL + 1))
        alarms += [str(a.kind) for a in r.alarms]
        notes += list(r.notes)
        state = r.state
    assert any("waiting for it to replicate a key rotation" in n for n in notes)
    assert alarms, "a forged checkpoint was offered for 25 minutes and nothing alarmed"


def _revoked_setup(tmp_path: Path) -> tuple[Ledger, NoteSigner, str]:
    """A ledger whose first key signed a checkpoint at size 9, then was rotated away and revoked
    from size 6 (stolen then). Returns the ledger, the old key, and that disowned note."""
    db = Db(f"sqlite:///{tmp_path / 'revoked.db'}", "sqlite")
    key_file = tmp_path / "keys" / "signing.key"
    engine = db.engine()
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    lg = open_ledger(open_engine(db.url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(8)])
    disowned = lg.checkpoint()  # size 9, by the old key
    old = load_signer(key_file)
    rotate_key_file(lg, key_file)
    done = revoke_key(lg, FileKeyStore(key_file), old.verifier.vkey, "stolen at size 6", from_size=6)
    assert done.disowned_checkpoints == [9]
    grow(lg, 3)
    return lg, old, disowned.note


def test_bug_follow_accepts_a_checkpoint_signed_only_by_a_revoked_key(tmp_path: Path) -> None:
    """ledger.revocation says the follower decides with ``verify_checkpoint_note``; ``follow``
    never reads the revocations. A fresh follower offered the checkpoint that the revoked key
    signed at size 9 (from_size 6) accepts it as its baseline and keeps it in state.json: the note
    it would later hand on as ``accepted.note`` is one ``ledger verify --checkpoint`` refuses."""
    lg, old, disowned = _revoked_setup(tmp_path)
    with pytest.raises(DamageError, match="revoked"):
        verify_ledger(lg.engine, workers=1, witnessed=[disowned])
    standby = DbReplica(lg.engine)  # the standby holds the revocation record
    r = run(None, Offering(disowned), standby, old, T0)
    assert [str(a.kind) for a in r.alarms] == ["BAD_SIGNATURE"], (r.alarms, r.notes)
    assert r.state is None


def test_bug_follow_state_whose_leaves_do_not_make_the_accepted_root_is_loaded(
        tmp_path: Path, signer: NoteSigner) -> None:
    """state.json "disagrees with itself" when the compact range of replicated leaves has the
    accepted size but another root; ``FollowState.from_json`` checks size/root/origin against the
    note (and never the note's signature) but not the leaves, so a hand-edited range is trusted
    and every later checkpoint is folded onto it."""
    primary = new_ledger(tmp_path, "primary", signer)
    other = new_ledger(tmp_path, "other", signer)
    grow(primary, 9)
    grow(other, 9, tag="b")
    r = run(None, DbPrimary(primary.engine), DbReplica(primary.engine), signer, T0)
    assert r.state is not None and r.state.leaves.size == 10
    theirs = run(None, DbPrimary(other.engine), DbReplica(other.engine), signer, T0)
    assert theirs.state is not None
    doc = r.state.to_json()
    doc["leaves"] = theirs.state.to_json()["leaves"]  # same size, another tree
    assert CompactRange(10, [bytes.fromhex(h) for h in doc["leaves"]["hashes"]]).root() \
        != r.state.accepted.checkpoint.root
    with pytest.raises(StateError):
        FollowState.from_json(doc)


# --------------------------------------------------------------------------- attacks that hold


def test_holds_backup_verify_refuses_a_fork_at_the_same_size_and_another_origin(
        tmp_path: Path, signer: NoteSigner) -> None:
    primary = new_ledger(tmp_path, "primary", signer)
    other = new_ledger(tmp_path, "other", signer)  # same origin, same key, other records
    grow(primary, 9)
    grow(other, 9, tag="b")
    fork = other.latest_checkpoint()
    assert fork is not None
    with pytest.raises(BackupMismatchError, match="does not extend"):
        prove_extends(primary.engine, fork.note)
    text = fork.checkpoint.to_text().replace(ORIGIN, "other.example/log", 1)
    elsewhere = Checkpoint.from_text(text).sign([signer])
    with pytest.raises(BackupMismatchError, match="of log"):
        prove_extends(primary.engine, elsewhere.note)
    grow(primary, 5)
    assert prove_extends(primary.engine, primary.latest_checkpoint().note).size == 15  # type: ignore[union-attr]


def test_holds_revocations_of_the_active_key_or_by_a_retired_key_are_refused(tmp_path: Path) -> None:
    lg, old, _ = _revoked_setup(tmp_path)
    active = lg.active_vkey
    keys = FileKeyStore(tmp_path / "keys" / "signing.key")
    with pytest.raises(RefusedError, match="active signing key"):
        revoke_key(lg, keys, active, "nope")
    # a revocation of the active key endorsed by the retired (stolen) key, sealed by a writer
    rev = KeyRevocation(active, 13, "the thief revokes the new key", old.verifier.vkey,
                        old.sign(revocation_message(active, 13, "the thief revokes the new key")), -1)
    lg._commit([Record(REVOCATION_KIND, rev.to_record())], force_checkpoint=True)
    with pytest.raises(DamageError, match="bad key revocation"):
        verify_ledger(lg.engine, workers=1)


def test_holds_an_epoch_newer_than_the_database_timeline_fences_old_and_new_writers(
        db: Db, signer: NoteSigner) -> None:
    """On PostgreSQL (timeline 1 here): once the log carries a ``ledger.epoch`` of a later timeline
    (as an old primary would after replicating its successor's epoch), neither the writer that
    was open nor a new ``Ledger`` opened afterwards in the same process may commit."""
    if db.dialect != "postgresql":
        pytest.skip("fencing checks PostgreSQL timelines only")
    from ledger.fencing import EPOCH_KIND, EPOCH_SCHEMA, FencedError

    lg = make_ledger(db, signer)
    try:
        lg.append(Record("test.event", {"i": 0}))
        lg._commit([Record(EPOCH_KIND, {"schema": EPOCH_SCHEMA, "timeline": 7, "lsn": "0/0",
                                        "previous": None})], force_checkpoint=True)
        with pytest.raises(FencedError) as first:
            lg.append(Record("test.event", {"i": 1}))
        assert first.value.reason == "old_timeline"
        again = Ledger(lg.engine, signer)
        with pytest.raises(FencedError) as second:
            again.append(Record("test.event", {"i": 2}))
        assert second.value.reason in {"old_timeline", "superseded"}
        size = lg.size()
        assert size == 3  # genesis, one event, the epoch: nothing after it
    finally:
        lg.engine.dispose()
