"""Hostile cases around signing keys and private files: checkpoints held across a rotation (a
genuine one verifies, one signed by a key that was not active at its size does not, whoever is
pinned), a key the ledger's rotation records do not endorse is never taken up by a running
process, and the SQLite database is created readable by its owner only."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import migrations
from ledger import DamageError, KeyFileError, NoteSigner, Record, store
from ledger.append import ROTATION_CONTEXT, Ledger
from ledger.database import initialise, open_engine, open_ledger
from ledger.errors import LedgerUnavailableError
from ledger.keys import load_signer
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger

# -- checkpoints held across a rotation ----------------------------------------------------------


def _rotated(db: Db, signer: NoteSigner) -> tuple[Ledger, str, NoteSigner, int]:
    """A ledger with 20 entries, a checkpoint an examiner kept, then a rotation and 10 more."""
    lg = make_ledger(db, signer)
    lg.append_many([Record("decision", {"n": i}) for i in range(20)])
    held = lg.checkpoint().note
    new = NoteSigner.generate(ORIGIN)
    seq = lg.rotate_key(new).seq
    lg.append_many([Record("decision", {"after": i}) for i in range(10)])
    lg.checkpoint()
    return lg, held, new, seq


def _stored_notes(lg: Ledger) -> list[str]:
    with lg.engine.connect() as conn:
        return [str(n) for (n,) in conn.exec_driver_sql("SELECT note FROM ledger_checkpoints")]


def test_a_checkpoint_held_from_before_a_rotation_still_verifies(db: Db, signer: NoteSigner) -> None:
    lg, held, new, _ = _rotated(db, signer)
    assert held in _stored_notes(lg)  # byte-identical to its row
    # pinned: the current key (what `ledger verify` takes from the key file), the genesis key, both
    for pinned in ([new.verifier], [signer.verifier], [signer.verifier, new.verifier]):
        report = verify_ledger(lg.engine, pinned, workers=1, witnessed=[held])
        assert report.keys == [signer.verifier.vkey, new.verifier.vkey]
    lg.engine.dispose()


def test_a_retired_key_cannot_vouch_for_a_size_after_its_retirement(db: Db, signer: NoteSigner) -> None:
    lg, _, new, seq = _rotated(db, signer)
    genuine = lg.checkpoint()
    assert genuine.checkpoint.size > seq + 1
    # the very size and root of the log, signed with the retired key (a copy from keys/retired/)
    forged = genuine.checkpoint.sign([signer]).note
    for pinned in ([signer.verifier], [signer.verifier, new.verifier], [new.verifier]):
        with pytest.raises(DamageError) as info:
            verify_ledger(lg.engine, pinned, workers=1, witnessed=[forged])
        assert info.value.kind == "forged checkpoint"
        assert f"not signed by {new.verifier.vkey}, the ledger's key at that size" in str(info.value)
    assert verify_ledger(lg.engine, [signer.verifier], workers=1, witnessed=[genuine.note]).size
    lg.engine.dispose()


def test_the_new_key_cannot_vouch_for_a_size_before_it_was_active(db: Db, signer: NoteSigner) -> None:
    lg, held, new, _ = _rotated(db, signer)
    from ledger.checkpoint import SignedCheckpoint

    early = SignedCheckpoint.parse_unverified(held).checkpoint
    backdated = early.sign([new]).note  # a true root, but signed by a key not yet in use then
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [new.verifier], workers=1, witnessed=[backdated])
    assert info.value.kind == "forged checkpoint" and signer.verifier.vkey in str(info.value)
    lg.engine.dispose()


def test_a_held_checkpoint_of_another_log_or_no_size_is_refused(db: Db, signer: NoteSigner) -> None:
    lg, held, _, _ = _rotated(db, signer)
    from ledger.checkpoint import Checkpoint, SignedCheckpoint

    cp = SignedCheckpoint.parse_unverified(held).checkpoint
    other = Checkpoint("other.example/log", cp.size, cp.root).sign([signer]).note
    empty = Checkpoint(ORIGIN, 0, cp.root).sign([signer]).note
    for note, says in ((other, "not this log"), (empty, "no ledger key is valid at size 0"),
                       ("not a note", "no blank line")):
        with pytest.raises(DamageError, match=says) as info:
            verify_ledger(lg.engine, [signer.verifier], workers=1, witnessed=[note])
        assert info.value.kind == "forged checkpoint"
    lg.engine.dispose()


# -- a key the ledger's records do not endorse is never taken up ---------------------------------


@pytest.fixture
def key_file(db: Db, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "keys" / "signing.key"
    engine = db.engine()
    migrations.upgrade(engine)
    initialise(engine, path, ORIGIN).ledger.engine.dispose()
    yield path


def test_a_key_row_without_an_endorsement_is_never_signed_with(db: Db, key_file: Path) -> None:
    running = open_ledger(open_engine(db.url), key_file)
    current = load_signer(key_file)
    intruder = NoteSigner.generate(ORIGIN)
    with running.engine.connect() as conn:  # someone with write access to the database ...
        size, chain = store.tail(conn)
        assert chain is not None
        # endorsed by the intruder's own key, not by the key it claims to rotate away from
        endorse = intruder.sign(ROTATION_CONTEXT + intruder.verifier.vkey.encode() + b"\n")
        body = (b'{"endorsement":"' + base64.b64encode(endorse) + b'","new_vkey":"'
                + intruder.verifier.vkey.encode() + b'","old_vkey":"'
                + current.verifier.vkey.encode() + b'"}')
        tid = "01890a5d-ac96-774b-bcce-b302099a8057"
        rec = (b'{"kind":"ledger.key_rotation","record":' + body
               + b',"recorded_at":"2026-12-02T00:00:00.000000Z","trace_id":"' + tid.encode() + b'","v":1}')
        leaf = hashlib.sha256(b"\x00" + rec).digest()
        p = store.param(conn)
        conn.exec_driver_sql(
            "INSERT INTO ledger_entries (seq, kind, record, leaf_hash, chain_hash, recorded_at, trace_id)"
            f" VALUES ({', '.join([p] * 7)})",
            (size, "ledger.key_rotation", rec, leaf, hashlib.sha256(chain + leaf).digest(),
             "2026-12-02T00:00:00.000000Z", tid))
        conn.exec_driver_sql(
            "INSERT INTO ledger_keys (vkey, name, key_id, public_key, valid_from_size, introduced_seq)"
            f" VALUES ({', '.join([p] * 6)})",
            (intruder.verifier.vkey, intruder.name, intruder.verifier.key_id.hex(),
             intruder.verifier.public_key, size + 1, size))
        conn.commit()
    key_file.write_text(intruder.skey + "\n")  # ... and a key store that holds the intruder's key
    with pytest.raises(KeyFileError, match=re.escape(f"is not endorsed by {current.verifier.vkey}")):
        running.append(Record("decision", {"n": 1}))
    with pytest.raises(KeyFileError, match="not endorsed"):
        running.require_signer()
    with pytest.raises(KeyFileError, match="not endorsed"):
        running.checkpoint()
    assert running.size() == size + 1  # nothing signed or written after the planted row
    running.engine.dispose()


# -- the database file: owner only ---------------------------------------------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, so a file created without an explicit mode comes out 0644."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_database_and_its_wal_are_owner_only(tmp_path: Path, umask_022: None) -> None:
    db = tmp_path / "sealtrail.db"
    engine = open_engine(f"sqlite:///{db}", create_file=True)  # what `sealtrail init` does
    migrations.upgrade(engine)
    lg = initialise(engine, tmp_path / "keys" / "signing.key", ORIGIN).ledger
    lg.append(Record("decision", {"n": 1}, payload=b'{"originator":"a payment"}'))
    with engine.connect() as conn:  # a connection open: the WAL and shared-memory files exist
        conn.exec_driver_sql("SELECT count(*) FROM ledger_payloads").scalar()
        files = {p.name: _mode(p) for p in tmp_path.iterdir() if p.name.startswith("sealtrail.db")}
    assert files == {"sealtrail.db": 0o600, "sealtrail.db-wal": 0o600, "sealtrail.db-shm": 0o600,
                     "sealtrail.db-writer.lock": 0o600}  # the writers' turn (empty)
    engine.dispose()


def test_an_existing_readable_database_is_left_as_it_is_with_a_warning(
    tmp_path: Path, umask_022: None, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "shared.db"
    engine = open_engine(f"sqlite:///{db}", create_file=True)
    migrations.upgrade(engine)
    engine.dispose()
    db.chmod(0o644)  # made by an older version, or copied
    with caplog.at_level(logging.WARNING, logger="ledger.store"):
        open_engine(f"sqlite:///{db}").dispose()
        open_engine(f"sqlite:///{db}").dispose()
    assert _mode(db) == 0o644  # never chmod-ed behind the operator's back
    warnings = [r.getMessage() for r in caplog.records if r.name == "ledger.store"]
    assert len(warnings) == 1 and f"{db} (0644)" in warnings[0] and "chmod 600" in warnings[0]


def test_a_database_in_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "absent" / "sealtrail.db"
    with pytest.raises(LedgerUnavailableError, match=re.escape(f"cannot create database file {db}")):
        open_engine(f"sqlite:///{db}", create_file=True)
    assert not db.parent.exists()
