"""Attacks a review found, each now caught: reserved kinds, a forged handover to the pinned
key, rewritten history behind deleted checkpoints, stale replicas after a rotation, stray
payload rows, and look-alike payload keys inside a record."""

from __future__ import annotations

import base64
import hashlib

import pytest
from sqlalchemy import Connection

from ledger import DamageError, KeyFileError, NoteSigner, Record, RecordError, store
from ledger.append import ROTATION_CONTEXT, Ledger
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger


def test_callers_cannot_write_the_ledgers_own_kinds(ledger: Ledger) -> None:
    for kind in ("ledger.legal_hold", "ledger.key_rotation", "ledger.payload_purge"):
        with pytest.raises(RecordError, match="reserved for the ledger"):
            ledger.append(Record(kind, {"payloads": 5}))
    assert verify_ledger(ledger.engine, workers=1).size == 1


def test_a_payload_key_inside_the_record_is_not_a_payload(ledger: Ledger) -> None:
    ledger.append(Record("decision", {"payload_sha256": "ab" * 32, "x": "é"}))
    ledger.append(Record("decision", {"n": 1}, payload=b"raw"))
    report = verify_ledger(ledger.engine, workers=1)
    assert report.payloads_present == 1


def _forge_handover(conn: Connection, forger: NoteSigner, target: NoteSigner) -> None:
    """What the review's attack A did: a rotation record to the examiner's key, endorsed by
    the forger's key, with no checkpoint the examiner's key signed."""
    size, chain = store.tail(conn)
    endorse = forger.sign(ROTATION_CONTEXT + target.verifier.vkey.encode() + b"\n")
    ts = "2026-12-02T00:00:00.000000Z"
    tid = "01890a5d-ac96-774b-bcce-b302099a8057"
    body = (b'{"endorsement":"' + base64.b64encode(endorse) + b'","new_vkey":"'
            + target.verifier.vkey.encode() + b'","old_vkey":"' + forger.verifier.vkey.encode()
            + b'"}')
    rec = (b'{"kind":"ledger.key_rotation","record":' + body + b',"recorded_at":"' + ts.encode()
           + b'","trace_id":"' + tid.encode() + b'","v":1}')
    leaf = hashlib.sha256(b"\x00" + rec).digest()
    p = store.param(conn)
    conn.exec_driver_sql(
        "INSERT INTO ledger_entries (seq, kind, record, leaf_hash, chain_hash, recorded_at, "
        f"trace_id) VALUES ({', '.join([p] * 7)})",
        (size, "ledger.key_rotation", rec, leaf, hashlib.sha256(chain + leaf).digest(), ts, tid))
    conn.exec_driver_sql(
        "INSERT INTO ledger_keys (vkey, name, key_id, public_key, valid_from_size, introduced_seq)"
        f" VALUES ({', '.join([p] * 6)})",
        (target.verifier.vkey, target.name, target.verifier.key_id.hex(),
         target.verifier.public_key, size + 1, size))


def test_a_forged_handover_to_the_pinned_key_is_caught(db: Db, signer: NoteSigner) -> None:
    forger = NoteSigner.generate(ORIGIN)
    lg = make_ledger(db, forger)  # the whole ledger is the forger's
    lg.append_many([Record("decision", {"n": i}) for i in range(5)])
    with lg.engine.connect() as conn:
        _forge_handover(conn, forger, signer)
        conn.commit()
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [signer.verifier], workers=1)
    assert info.value.kind == "bad key rotation" and "co-signed" in str(info.value)


def test_history_rewritten_behind_deleted_checkpoints_fails_a_held_checkpoint(
    db: Db, signer: NoteSigner
) -> None:
    lg = make_ledger(db, signer, every=5)
    lg.append_many([Record("decision", {"n": i, "decision": "HOLD"}) for i in range(20)])
    held = lg.checkpoint().note  # the examiner keeps this one
    with lg.engine.connect() as conn:
        from tests.ledger.test_tamper import _drop_guards, _rehash_from, _row

        _drop_guards(conn)
        conn.exec_driver_sql("DELETE FROM ledger_checkpoints WHERE size > 1")
        rec = bytes(_row(conn, 7)[2]).replace(b'"HOLD"', b'"ALLOW"')
        _rehash_from(conn, 7, rec)
        conn.commit()
    assert verify_ledger(lg.engine, [signer.verifier], workers=1).unsealed_entries == 20
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [signer.verifier], workers=1, witnessed=[held])
    assert info.value.kind == "forked log"
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [signer.verifier], workers=1, max_unsealed=5)
    assert info.value.kind == "unsealed tail"


def test_a_replica_with_the_retired_key_may_not_sign(db: Db, signer: NoteSigner) -> None:
    a = make_ledger(db, signer)
    b = Ledger(a.engine, signer)  # another replica, opened before the rotation
    a.rotate_key(NoteSigner.generate(ORIGIN))
    with pytest.raises(KeyFileError, match="rotated elsewhere"):
        b.append(Record("decision", {"n": 1}))
    with pytest.raises(KeyFileError, match="rotated elsewhere"):
        b.checkpoint()
    assert verify_ledger(a.engine, [signer.verifier], workers=1).size == 2


def test_a_payload_row_outside_the_log_is_caught(ledger: Ledger) -> None:
    ledger.append(Record("decision", {"n": 1}, payload=b"raw"))
    with ledger.engine.connect() as conn:
        p = store.param(conn)
        conn.exec_driver_sql(
            f"INSERT INTO ledger_payloads (sha256, data, first_seq, stored_at) VALUES ({p}, {p}, {p}, {p})",
            ("cd" * 32, b"FAKE", 10**12, 0))
        conn.commit()
    with pytest.raises(DamageError) as info:
        verify_ledger(ledger.engine, workers=1)
    assert info.value.kind == "stray payload"
