"""Writes the key-revocation vector: a ledger whose genesis key is rotated away and revoked from an
earlier size, the sealed ``ledger.key_revocation`` record, the key history, and checkpoint notes
with whether the history and the revocation vouch for them (kept for the record, not run by the
tests; run from the repository root: .venv/bin/python tests/vectors/key-revocation-v1/make_vector.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson

import migrations
from ledger import Record
from ledger.checkpoint import Checkpoint
from ledger.database import initialise, open_engine, open_ledger
from ledger.keys import FileKeyStore, key_history, load_signer, revoke_key, rotate_key_file

HERE = Path(__file__).parent
ORIGIN = "vector.sealtrail/log"

with tempfile.TemporaryDirectory() as tmp:
    url, key_file = f"sqlite:///{tmp}/ledger.db", Path(tmp) / "keys" / "signing.key"
    engine = open_engine(url, create_file=True)
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    lg = open_ledger(open_engine(url), key_file)
    lg.append_many([Record("test.event", {"n": i}) for i in range(4)])
    early = lg.checkpoint()  # size 5: before the theft
    lg.append_many([Record("test.event", {"n": i}) for i in range(4)])
    late = lg.checkpoint()  # size 9: after the theft
    old = load_signer(key_file)
    rotate_key_file(lg, key_file)
    done = revoke_key(lg, FileKeyStore(key_file), old.verifier.vkey, "key file copied at size 7",
                      from_size=7)
    new = lg.checkpoint()
    with lg.engine.connect() as conn:
        record = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE seq = ?",
                                      (done.revocation.seq,)).scalar_one()
    forged = Checkpoint(ORIGIN, new.checkpoint.size + 3, bytes(32)).sign([old]).note
    vector = {
        "origin": ORIGIN,
        "seq": done.revocation.seq,
        "record": orjson.loads(record),
        "history": [{"vkey": k.vkey, "valid_from_size": k.valid_from_size}
                    for k in key_history(lg.engine)],
        "checkpoints": [
            {"note": early.note, "acceptable": True, "why": "old key, before the revocation point"},
            {"note": late.note, "acceptable": False,
             "why": "old key alone, at or after the revocation point"},
            {"note": new.note, "acceptable": True, "why": "the active key"},
            {"note": forged, "acceptable": False, "why": "the stolen key, past its rotation"},
        ],
    }
    lg.engine.dispose()
(HERE / "vector.json").write_text(json.dumps(vector, indent=2, ensure_ascii=False) + "\n")
