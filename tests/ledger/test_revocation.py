"""Key revocation after a compromise: the sealed record, what ledger verify then refuses, the pure
check a follower calls, the published vector, and the CLI's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import migrations
from api.cli import app
from ledger import DamageError, KeyFileError, NoteError, NoteSigner, Record
from ledger.checkpoint import Checkpoint
from ledger.database import initialise, open_engine, open_ledger
from ledger.errors import RefusedError
from ledger.keys import (
    FileKeyStore,
    KeyValidity,
    key_history,
    key_revocations,
    load_signer,
    revoke_key,
    rotate_key_file,
)
from ledger.revocation import (
    KeyRevocation,
    RevokedKeyError,
    checkpoint_acceptable,
    verify_checkpoint_note,
)
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db

VECTOR = Path(__file__).parents[1] / "vectors" / "key-revocation-v1" / "vector.json"


@pytest.fixture
def key_file(sqlite_db: Db, tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "signing.key"
    engine = sqlite_db.engine()
    migrations.upgrade(engine)
    initialise(engine, path, ORIGIN).ledger.engine.dispose()
    return path


def test_a_forged_checkpoint_of_a_stolen_key_is_refused_after_rotation_and_revocation(
        sqlite_db: Db, key_file: Path) -> None:
    lg = open_ledger(open_engine(sqlite_db.url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(20)])
    lg.checkpoint()
    stolen = load_signer(key_file)  # the thief's copy
    rot = rotate_key_file(lg, key_file)
    done = revoke_key(lg, FileKeyStore(key_file), stolen.verifier.vkey, "key file copied by an intruder")
    assert done.revocation.from_size == rot.seq + 1
    lg.append_many([Record("test.event", {"n": i}) for i in range(3)])
    good = lg.checkpoint()
    history, revs = key_history(lg.engine), key_revocations(lg.engine)
    assert revs == [done.revocation]
    forged = Checkpoint(ORIGIN, lg.size() + 5, bytes(32)).sign([stolen]).note
    assert not checkpoint_acceptable(forged, history, revs)
    with pytest.raises(RevokedKeyError, match="revoked from size") as info:
        verify_checkpoint_note(forged, history, revs)
    assert info.value.revocation.seq == done.revocation.seq
    assert checkpoint_acceptable(good.note, history, revs, origin=ORIGIN)
    assert not checkpoint_acceptable(good.note, history, revs, origin="another/log")
    # stored in the database by someone with write access: verify refuses it, naming the revocation
    report = verify_ledger(lg.engine, [stolen.verifier], workers=1)
    assert report.revoked_keys[0]["reason"] == "key file copied by an intruder"
    at_size = Checkpoint(ORIGIN, lg.size(), bytes(32)).sign([stolen]).note
    with pytest.raises(DamageError) as dmg:
        verify_ledger(lg.engine, workers=1, witnessed=[at_size])
    assert dmg.value.kind == "revoked key" and stolen.verifier.vkey in str(dmg.value)
    lg.engine.dispose()


def test_an_earlier_revocation_point_disowns_the_old_keys_checkpoints_from_there(
        sqlite_db: Db, key_file: Path) -> None:
    lg = open_ledger(open_engine(sqlite_db.url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(4)])
    lg.checkpoint()  # size 5, by the old key
    lg.append_many([Record("test.event", {"n": i}) for i in range(4)])
    early = lg.checkpoint()  # size 9, by the old key: after the theft
    old = load_signer(key_file)
    rotate_key_file(lg, key_file)
    history = key_history(lg.engine)
    done = revoke_key(lg, FileKeyStore(key_file), old.verifier.vkey, "stolen at size 6", from_size=6)
    assert done.disowned_checkpoints == [9]
    assert not checkpoint_acceptable(early.note, history, [done.revocation])
    with pytest.raises(DamageError, match="revoked from size 6") as info:
        verify_ledger(lg.engine, workers=1)
    assert info.value.kind == "revoked key" and info.value.seq == 8
    lg.engine.dispose()


def test_revocations_that_make_no_sense_are_refused(sqlite_db: Db, key_file: Path) -> None:
    lg = open_ledger(open_engine(sqlite_db.url), key_file)
    keys = FileKeyStore(key_file)
    first = load_signer(key_file).verifier.vkey
    with pytest.raises(RefusedError, match="is the active signing key: rotate it away first"):
        revoke_key(lg, keys, first, "too early")
    rot = rotate_key_file(lg, key_file)
    with pytest.raises(RefusedError, match="not one of the ledger's keys"):
        revoke_key(lg, keys, NoteSigner.generate("other").verifier.vkey, "x")
    with pytest.raises(RefusedError, match=f"from 1 .* to {rot.seq + 1}"):
        revoke_key(lg, keys, first, "late", from_size=rot.seq + 5)
    with pytest.raises(RefusedError, match="needs a reason"):
        revoke_key(lg, keys, first, "  ")
    with pytest.raises(RefusedError, match="one line"):
        revoke_key(lg, keys, first, "two\nlines")
    revoke_key(lg, keys, first, "compromised")
    with pytest.raises(RefusedError, match="already revoked"):
        revoke_key(lg, keys, first, "again")
    assert verify_ledger(lg.engine, workers=1).revoked_keys[0]["vkey"] == first
    lg.engine.dispose()


def test_a_revocation_record_with_a_bad_endorsement_is_refused() -> None:
    vec = json.loads(VECTOR.read_text())
    body = dict(vec["record"]["record"])
    assert KeyRevocation.from_record(body, vec["seq"]).to_record() == body
    body["from_size"] = body["from_size"] - 1
    with pytest.raises(KeyFileError, match="does not verify"):
        KeyRevocation.from_record(body, vec["seq"])
    with pytest.raises(KeyFileError, match="no 'reason'"):
        KeyRevocation.from_record({k: v for k, v in vec["record"]["record"].items() if k != "reason"}, 3)
    with pytest.raises(KeyFileError, match="from_size must be"):
        KeyRevocation.from_record({**vec["record"]["record"], "from_size": "3"}, 3)


def test_the_published_vector_decides_as_recorded() -> None:
    vec = json.loads(VECTOR.read_text())
    history = [KeyValidity(k["vkey"], k["valid_from_size"]) for k in vec["history"]]
    revs = [KeyRevocation.from_record(vec["record"]["record"], vec["seq"])]
    for case in vec["checkpoints"]:
        assert checkpoint_acceptable(case["note"], history, revs) is case["acceptable"], case["why"]
    with pytest.raises(NoteError):
        verify_checkpoint_note("not a note", history, revs)


def test_cli_revoke_reports_json_and_keeps_the_exit_codes(sqlite_db: Db, key_file: Path) -> None:
    runner = CliRunner()
    base = ["--db", sqlite_db.url, "--keys", str(key_file.parent)]
    first = load_signer(key_file).verifier.vkey
    refused = runner.invoke(app, ["keys", "revoke", "--vkey", first, "--reason", "x", *base, "--json"])
    assert refused.exit_code == 1, refused.output
    assert json.loads(refused.stdout)["ok"] is False
    rotated = runner.invoke(app, ["keys", "rotate", *base, "--json"])
    assert rotated.exit_code == 0, rotated.output
    ok = runner.invoke(app, ["keys", "revoke", "--vkey", first, "--reason", "laptop stolen", *base, "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["ok"] is True and doc["revoked_vkey"] == first
    assert doc["from_size"] == json.loads(rotated.stdout)["seq"] + 1
    usage = runner.invoke(app, ["keys", "revoke", "--reason", "x", *base, "--json"])
    assert usage.exit_code == 2
