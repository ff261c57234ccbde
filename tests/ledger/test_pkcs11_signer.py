"""Checkpoint signing keys in a PKCS#11 token (SoftHSM2 in a throwaway directory): the ledger signs
through the token, rotation generates the next key inside it and another process picks it up, the
private key cannot be read out, and every way of pointing at the wrong thing says what is wrong.

SoftHSM reads its token directory once, when a process first loads it, so the tokens are made for
the whole session before any test loads the module."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import migrations
from ledger import KeyFileError, Record
from ledger.checkpoint import Checkpoint
from ledger.database import initialise, open_engine, open_ledger
from ledger.keys import key_history, open_key_store, revoke_key
from ledger.note import NoteVerifier, open_note
from ledger.pkcs11 import Pkcs11KeyStore, Pkcs11Uri, rotated_label
from ledger.revocation import verify_checkpoint_note
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db

MODULE = "/usr/lib/softhsm/libsofthsm2.so"
TOKEN, PIN = "sealtrail-test", "20250601"
HAVE = shutil.which("softhsm2-util") is not None and Path(MODULE).is_file()

pytestmark = [
    pytest.mark.softhsm,
    pytest.mark.skipif(not HAVE and not os.environ.get("CI"),
                       reason="SoftHSM2 is not installed (make test installs it with .ci/softhsm; "
                              "CI requires it)"),
]


@dataclass(frozen=True)
class Hsm:
    conf: Path

    def uri(self, label: str, token: str = TOKEN) -> str:
        return f"pkcs11:token={token};object={label}?module-path={MODULE}"


@pytest.fixture(scope="session")
def hsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hsm]:
    assert HAVE, "SoftHSM2 is required in CI (see .ci/softhsm)"
    pytest.importorskip("pkcs11") if not os.environ.get("CI") else __import__("pkcs11")
    root = tmp_path_factory.mktemp("softhsm")
    (root / "tokens").mkdir()
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {root / 'tokens'}\nobjectstore.backend = file\n"
                    "log.level = ERROR\n")
    before = os.environ.get("SOFTHSM2_CONF")
    os.environ["SOFTHSM2_CONF"] = str(conf)
    subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", TOKEN, "--pin", PIN,
                    "--so-pin", "87654321"], check=True, capture_output=True)
    yield Hsm(conf)
    if before is None:
        os.environ.pop("SOFTHSM2_CONF", None)
    else:
        os.environ["SOFTHSM2_CONF"] = before


def _ledger_with_hsm(db: Db, hsm: Hsm, label: str) -> tuple[Pkcs11KeyStore, Db]:
    keys = open_key_store(hsm.uri(label), pin=PIN)
    assert isinstance(keys, Pkcs11KeyStore)
    engine = db.engine()
    migrations.upgrade(engine)
    initialise(engine, keys, ORIGIN).ledger.engine.dispose()
    return keys, db


def test_the_ledger_signs_checkpoints_in_the_token_and_they_verify_with_the_public_key(
        sqlite_db: Db, hsm: Hsm) -> None:
    keys, db = _ledger_with_hsm(sqlite_db, hsm, "sign")
    lg = open_ledger(open_engine(db.url), keys)
    lg.append_many([Record("test.event", {"n": i}) for i in range(7)])
    cp = lg.checkpoint()
    (vkey,) = [k.vkey for k in key_history(lg.engine)]
    text, good = open_note(cp.note, [NoteVerifier.from_vkey(vkey)])
    assert good[0].vkey == vkey and Checkpoint.from_text(text).size == 8
    assert verify_ledger(lg.engine, [NoteVerifier.from_vkey(vkey)], workers=1).checkpoints >= 2
    lg.engine.dispose()


def test_the_private_key_cannot_be_read_out_of_the_token(sqlite_db: Db, hsm: Hsm) -> None:
    keys, _ = _ledger_with_hsm(sqlite_db, hsm, "sealed")
    assert keys.private_key_attributes("sealed") == {"sensitive": True, "extractable": False,
                                                     "never_extractable": True}
    signer = keys.load(ORIGIN)
    assert not signer.extractable
    with pytest.raises(KeyFileError, match="cannot be extracted"):
        _ = signer.skey
    import pkcs11

    lib = pkcs11.lib(MODULE)
    # no PIN: the store's session logged this process in already (PKCS#11 login is per process)
    with lib.get_token(token_label=TOKEN).open() as s, pytest.raises(pkcs11.AttributeSensitive):
        s.get_key(object_class=pkcs11.ObjectClass.PRIVATE_KEY, label="sealed")[pkcs11.Attribute.VALUE]


_APPEND_AFTER_ROTATION = """
import sys
from ledger import Record
from ledger.database import open_engine, open_ledger
from ledger.keys import open_key_store
lg = open_ledger(open_engine(sys.argv[1]), open_key_store(sys.argv[2], pin=sys.argv[3]))
lg.append(Record("test.event", {"from": "another process"}))
print(lg.checkpoint().note, end="")
"""


def test_rotation_in_the_token_is_picked_up_by_a_running_ledger_and_by_another_process(
        sqlite_db: Db, hsm: Hsm) -> None:
    keys, db = _ledger_with_hsm(sqlite_db, hsm, "rot")
    running = open_ledger(open_engine(db.url), keys)  # opened before the rotation
    old = running.active_vkey
    rotator = open_ledger(open_engine(db.url), keys)
    rotator.append(Record("test.event", {"before": True}))
    r = keys.rotate(rotator)
    new = NoteVerifier.from_vkey(r.new_vkey)
    assert r.old_vkey == old and r.retired_file is None
    assert r.new_location == str(Pkcs11Uri.parse(hsm.uri(rotated_label("rot", new))))
    assert keys.private_key_attributes(rotated_label("rot", new))["extractable"] is False
    # the running instance signs its next checkpoint with the new key, no restart
    running.append(Record("test.event", {"after": True}))
    note = running.checkpoint().note
    open_note(note, [new])
    with pytest.raises(Exception, match="no signature by a trusted key"):
        open_note(note, [NoteVerifier.from_vkey(old)])
    # a second process with the same URI finds the rotated key by its label
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", _APPEND_AFTER_ROTATION, db.url, hsm.uri("rot"), PIN],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    open_note(done.stdout, [new])
    report = verify_ledger(running.engine, [NoteVerifier.from_vkey(old)], workers=1)
    assert report.keys == [old, r.new_vkey]
    running.engine.dispose()
    rotator.engine.dispose()


def test_a_file_key_moves_into_the_token_by_rotation(sqlite_db: Db, hsm: Hsm, tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "signing.key"
    engine = sqlite_db.engine()
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    lg = open_ledger(open_engine(sqlite_db.url), key_file)
    hsm_keys = open_key_store(hsm.uri("moved"), pin=PIN)
    r = hsm_keys.rotate(lg)
    lg.engine.dispose()
    # from now on the key file is not the ledger's key: a process must use the token
    with pytest.raises(KeyFileError, match="active signing key"):
        open_ledger(open_engine(sqlite_db.url), key_file)
    again = open_ledger(open_engine(sqlite_db.url), hsm_keys)
    again.append(Record("test.event", {"in": "hsm"}))
    open_note(again.checkpoint().note, [NoteVerifier.from_vkey(r.new_vkey)])
    assert verify_ledger(again.engine, workers=1).keys == [r.old_vkey, r.new_vkey]
    again.engine.dispose()


def test_a_wrong_pin_is_refused_naming_the_token(sqlite_db: Db, hsm: Hsm) -> None:
    keys, _ = _ledger_with_hsm(sqlite_db, hsm, "pin")
    wrong = open_key_store(hsm.uri("pin"), pin="00000000")
    with pytest.raises(KeyFileError, match=f"token '{TOKEN}'.*refused the PIN"):
        wrong.load(ORIGIN)
    assert keys.exists()  # the right PIN still works after the wrong one


def test_a_missing_token_or_key_says_which(hsm: Hsm) -> None:
    with pytest.raises(KeyFileError, match="no PKCS#11 token labelled 'no-such-token'"):
        open_key_store(hsm.uri("k", token="no-such-token"), pin=PIN).load(ORIGIN)
    with pytest.raises(KeyFileError, match="holds no Ed25519 private key labelled 'absent'"):
        open_key_store(hsm.uri("absent"), pin=PIN).load(ORIGIN)
    with pytest.raises(KeyFileError, match=r"module /nowhere/lib\.so does not exist"):
        open_key_store(f"pkcs11:token={TOKEN};object=x?module-path=/nowhere/lib.so", pin=PIN).load(ORIGIN)


def test_the_uri_is_parsed_strictly_and_never_carries_a_pin(tmp_path: Path) -> None:
    u = Pkcs11Uri.parse(f"pkcs11:token=my%20hsm;object=log-key?module-path={MODULE}")
    assert (u.token, u.object, u.module_path) == ("my hsm", "log-key", MODULE)
    assert Pkcs11Uri.parse(str(u)) == u
    with pytest.raises(KeyFileError, match="PIN in the pkcs11: URI is refused"):
        Pkcs11Uri.parse(f"pkcs11:token=t;object=o?module-path={MODULE}&pin-value=1234")
    with pytest.raises(KeyFileError, match="has no object"):
        Pkcs11Uri.parse(f"pkcs11:token=t?module-path={MODULE}")
    with pytest.raises(KeyFileError, match="'slot-id' is not understood"):
        Pkcs11Uri.parse(f"pkcs11:token=t;object=o;slot-id=3?module-path={MODULE}")
    with pytest.raises(KeyFileError, match="no PIN"):
        Pkcs11KeyStore(f"pkcs11:token=t;object=o?module-path={MODULE}")
    pin = tmp_path / "pin"
    pin.write_text("1234\n")
    pin.chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        Pkcs11KeyStore(f"pkcs11:token=t;object=o?module-path={MODULE}&pin-source=file:{pin}")


def test_a_pin_file_unlocks_the_token(sqlite_db: Db, hsm: Hsm, tmp_path: Path) -> None:
    _ledger_with_hsm(sqlite_db, hsm, "pinfile")
    pin = tmp_path / "pin"
    pin.write_text(PIN + "\n")
    pin.chmod(0o600)
    keys = open_key_store(hsm.uri("pinfile") + f"&pin-source=file:{pin}")
    assert keys.load(ORIGIN).verifier.vkey == key_history(sqlite_db.engine())[0].vkey


def test_compromise_drill_stolen_key_rotated_away_and_revoked(sqlite_db: Db, hsm: Hsm,
                                                              tmp_path: Path) -> None:
    """A file key is stolen (copied), the operator rotates it away into the HSM and revokes it; a
    checkpoint the thief signs for a later size is refused by ledger verify and the pure check."""
    key_file = tmp_path / "keys" / "signing.key"
    engine = sqlite_db.engine()
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    lg = open_ledger(open_engine(sqlite_db.url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(10)])
    lg.checkpoint()
    stolen = open_key_store(key_file).load(ORIGIN)  # the thief's copy
    keys = open_key_store(hsm.uri("drill"), pin=PIN)
    rot = keys.rotate(lg)
    lg.engine.dispose()
    lg = open_ledger(open_engine(sqlite_db.url), keys)
    done = revoke_key(lg, keys, stolen.verifier.vkey, "signing.key copied off host-3")
    assert done.revocation.from_size == rot.seq + 1 and done.disowned_checkpoints == []
    lg.append_many([Record("test.event", {"n": i}) for i in range(5)])
    lg.checkpoint()
    report = verify_ledger(lg.engine, workers=1)
    assert report.revoked_keys[0]["vkey"] == stolen.verifier.vkey
    history = key_history(lg.engine)
    revocations = [done.revocation]
    size = lg.size()
    root = lg.latest_checkpoint()
    assert root is not None
    forged = Checkpoint(ORIGIN, size, bytes(32)).sign([stolen]).note
    with pytest.raises(Exception, match="revoked from size") as info:
        verify_checkpoint_note(forged, history, revocations)
    assert stolen.verifier.vkey in str(info.value)
    assert verify_checkpoint_note(root.note, history, revocations).size == root.checkpoint.size
    with pytest.raises(Exception, match="revoked key") as damage:
        verify_ledger(lg.engine, workers=1, witnessed=[forged])
    assert "signing.key copied off host-3" in str(damage.value)
    lg.engine.dispose()
