"""Key history and rotation: the ledger keeps every public key, the rotation swaps the key file
only after the rotation record is durable, and an interrupted rotation is never overwritten."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import migrations
from ledger import KeyFileError, LedgerError, NoteSigner, Record
from ledger.database import initialise, open_engine, open_ledger
from ledger.keys import KeyValidity, key_history, load_signer, rotate_key_file
from ledger.note import parse_note
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db


@pytest.fixture
def key_file(db: Db, tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "signing.key"
    engine = db.engine()
    migrations.upgrade(engine)
    initialise(engine, path, ORIGIN).ledger.engine.dispose()
    return path


def test_rotation_swaps_the_key_file_and_extends_the_history(db: Db, key_file: Path) -> None:
    old = load_signer(key_file)
    lg = open_ledger(open_engine(db.url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(5)])
    r = rotate_key_file(lg, key_file)
    new = load_signer(key_file)
    assert r.old_vkey == old.verifier.vkey != r.new_vkey == new.verifier.vkey
    assert r.retired_file.parent == key_file.parent / "retired"
    assert load_signer(r.retired_file).verifier == old.verifier
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert not key_file.with_suffix(".key.pending").exists()
    assert key_history(lg.engine) == [KeyValidity(old.verifier.vkey, 1),
                                      KeyValidity(new.verifier.vkey, r.seq + 1)]
    lg.append(Record("test.event", {"after": True}))  # the open ledger signs with the new key now
    assert verify_ledger(lg.engine, [old.verifier], workers=1).keys == [r.old_vkey, r.new_vkey]
    lg.engine.dispose()


def test_an_interrupted_rotation_is_left_for_a_person_to_inspect(db: Db, key_file: Path) -> None:
    pending = key_file.with_suffix(".key.pending")
    pending.write_text("PRIVATE+KEY+left+over\n")
    lg = open_ledger(open_engine(db.url), key_file)
    with pytest.raises(KeyFileError, match="an earlier rotation was interrupted"):
        rotate_key_file(lg, key_file)
    assert pending.read_text() == "PRIVATE+KEY+left+over\n"
    assert [k.vkey for k in key_history(lg.engine)] == [load_signer(key_file).verifier.vkey]
    lg.engine.dispose()


def test_history_of_a_migrated_but_empty_database_says_to_init(sqlite_db: Db) -> None:
    engine = sqlite_db.engine()
    migrations.upgrade(engine)
    with pytest.raises(LedgerError, match=r"ledger has no keys yet \(run 'sealtrail init'\)"):
        key_history(engine)


def test_initialise_twice_changes_nothing_and_keeps_the_key(db: Db, key_file: Path) -> None:
    first = load_signer(key_file)
    again = initialise(open_engine(db.url), key_file, "another/origin")
    assert again.created is False and again.signer.verifier == first.verifier
    assert again.ledger.origin == ORIGIN and again.ledger.size() == 1
    again.ledger.engine.dispose()


def test_opening_with_a_key_that_is_not_the_ledgers_is_refused(db: Db, key_file: Path,
                                                                tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    other.write_text(NoteSigner.generate(ORIGIN).skey + "\n")
    other.chmod(0o600)
    engine = open_engine(db.url)
    with pytest.raises(KeyFileError, match="active signing key"):
        open_ledger(engine, other)
    engine.dispose()


# -- a rotation done by another process: picked up at the next commit, no restart ----------------


def _signers_of(note: str) -> set[str]:
    """The key ids (hex) of a signed note's signature lines."""
    _, sigs = parse_note(note)
    return {s.key_id.hex() for s in sigs}


def test_a_running_ledger_picks_up_a_rotation_done_by_another_process(db: Db, key_file: Path) -> None:
    first = load_signer(key_file)
    running = open_ledger(open_engine(db.url), key_file)  # a server, opened before the rotation
    running.append(Record("test.event", {"n": 0}))
    operator = open_ledger(open_engine(db.url), key_file)  # `sealtrail keys rotate`
    r = rotate_key_file(operator, key_file)
    operator.engine.dispose()
    new = load_signer(key_file)
    receipt = running.append(Record("test.event", {"n": 1}))  # was KeyFileError until a restart
    assert receipt.seq == r.seq + 1 and running.active_vkey == new.verifier.vkey
    cp = running.checkpoint()
    assert cp.checkpoint.size == r.seq + 2
    assert _signers_of(cp.note) == {new.verifier.key_id.hex()}  # the new key alone, not the retired
    report = verify_ledger(running.engine, [first.verifier], workers=1)
    assert report.keys == [first.verifier.vkey, new.verifier.vkey]
    running.engine.dispose()


def test_between_the_rotations_commit_and_the_file_swap_the_pending_key_signs(db: Db, key_file: Path) -> None:
    running = open_ledger(open_engine(db.url), key_file)
    operator = open_ledger(open_engine(db.url), key_file)
    new = NoteSigner.generate(ORIGIN)
    pending = key_file.with_suffix(".key.pending")
    pending.write_text(new.skey + "\n")
    pending.chmod(0o600)
    operator.rotate_key(new)  # committed; the key file still holds the old key
    running.append(Record("test.event", {"n": 1}))
    assert running.active_vkey == new.verifier.vkey
    assert _signers_of(running.checkpoint().note) == {new.verifier.key_id.hex()}
    # and a process started in that same moment opens with the pending key
    started = open_ledger(open_engine(db.url), key_file)
    assert started.active_vkey == new.verifier.vkey
    started.append(Record("test.event", {"n": 2}))
    for lg in (running, operator, started):
        lg.engine.dispose()


def test_a_retired_key_put_back_is_refused_and_nothing_is_written(db: Db, key_file: Path) -> None:
    running = open_ledger(open_engine(db.url), key_file)
    old_text = key_file.read_text()
    operator = open_ledger(open_engine(db.url), key_file)
    r = rotate_key_file(operator, key_file)
    operator.engine.dispose()
    new_text = key_file.read_text()
    key_file.write_text(old_text)  # someone restores the retired key from a backup
    size = running.size()
    with pytest.raises(KeyFileError, match="no key file holds the ledger's active signing key") as info:
        running.append(Record("test.event", {"n": 1}))
    assert r.old_vkey in str(info.value)  # says what it found instead
    assert running.size() == size
    with pytest.raises(KeyFileError):
        running.require_signer()  # fails fast from now on, before any work
    key_file.write_text(new_text)  # the operator puts the right key back
    running.require_signer()
    running.append(Record("test.event", {"n": 2}))
    assert running.active_vkey == r.new_vkey
    verify_ledger(running.engine, workers=1)
    running.engine.dispose()


def test_a_second_rotation_from_a_stale_process_is_refused_and_leaves_no_pending_key(
    db: Db, key_file: Path
) -> None:
    a = open_ledger(open_engine(db.url), key_file)
    b = open_ledger(open_engine(db.url), key_file)
    rotate_key_file(a, key_file)
    with pytest.raises(KeyFileError, match="rotated elsewhere"):
        rotate_key_file(b, key_file)  # b would seal "rotates away from a key not in use"
    assert len(key_history(a.engine)) == 2
    assert not key_file.with_suffix(".key.pending").exists()
    verify_ledger(a.engine, workers=1)
    for lg in (a, b):
        lg.engine.dispose()
