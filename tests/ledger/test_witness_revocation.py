"""The compromise runbook drilled against a witness: a stolen signing key can extend the real log
with a forged tail whose consistency proof holds, and a witness trusting that key would cosign it;
once the key is rotated away and its revocation sealed (and cosigned), the witness configured with
the revocation refuses the forgery, while the honest log goes on being cosigned."""

from __future__ import annotations

import base64
from pathlib import Path

import migrations
from ledger import Record
from ledger.append import Ledger
from ledger.checkpoint import Checkpoint
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.database import initialise, open_engine, open_ledger
from ledger.keys import FileKeyStore, load_signer, revoke_key, rotate_key_file
from ledger.merkle import consistency_ranges, leaf_hash, root_of
from ledger.note import NoteSigner
from ledger.witness import LogPolicy, Witness
from tests.conftest import ORIGIN, Db


def _cosign(ledger: Ledger, w: Witness) -> None:
    (o,) = collect(ledger.engine, [WitnessEndpoint("https://w", w.cosigner.verifier)], w.post)
    assert o.ok, o.detail


def _forged_extension(ledger: Ledger, stolen: NoteSigner, old: int) -> bytes:
    """What a thief holding the old key submits: the real leaves, a forged tail, a valid proof."""
    with ledger.engine.connect() as conn:
        leaves = [bytes(r[0]) for r in conn.exec_driver_sql(
            "SELECT leaf_hash FROM ledger_entries ORDER BY seq")]
    leaves += [leaf_hash(f"forged payment release {i}".encode()) for i in range(4)]
    proof = [root_of(leaves[a:b]) for a, b in consistency_ranges(old, len(leaves))]
    note = Checkpoint(ORIGIN, len(leaves), root_of(leaves)).sign([stolen]).note
    lines = "".join(base64.b64encode(h).decode() + "\n" for h in proof)
    return f"old {old}\n{lines}\n{note}".encode()


def test_a_revoked_key_cannot_get_a_forged_extension_cosigned(sqlite_db: Db, tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "signing.key"
    engine = open_engine(sqlite_db.url, create_file=True)
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    ledger = open_ledger(open_engine(sqlite_db.url), key_file)
    cosigner = Cosigner.generate("audit.bank.example/witness")
    old_key = load_signer(key_file)
    witness = Witness(cosigner, [LogPolicy(ORIGIN, (old_key.verifier,))], tmp_path / "w.db")
    ledger.append_many([Record("test.event", {"n": i}) for i in range(10)])
    ledger.checkpoint()
    _cosign(ledger, witness)
    stolen = load_signer(key_file)  # the intruder's copy of the key file

    # without a revocation, the stolen key gets a forged (but consistent) tail cosigned
    naive = Witness(Cosigner.generate("naive.example/witness"), [LogPolicy(ORIGIN, (old_key.verifier,))],
                    tmp_path / "naive.db")
    _cosign(ledger, naive)
    assert naive.add_checkpoint(_forged_extension(ledger, stolen, ledger.size())).ok

    # the runbook: rotate (the rotation checkpoint is signed by both keys), tell the witness the new
    # key, revoke the old one from the rotation on (a sealed record endorsed by the new key), have
    # the checkpoint holding the revocation cosigned, then tell the witness the revocation
    rot = rotate_key_file(ledger, key_file)
    new_key = load_signer(key_file)
    witness.close()
    witness = Witness(cosigner, [LogPolicy(ORIGIN, (old_key.verifier, new_key.verifier))], tmp_path / "w.db")
    _cosign(ledger, witness)
    done = revoke_key(ledger, FileKeyStore(key_file), old_key.verifier.vkey, "key file copied by an intruder")
    ledger.checkpoint()
    _cosign(ledger, witness)
    witness.close()
    witness = Witness(cosigner, [LogPolicy(ORIGIN, (old_key.verifier, new_key.verifier),
                                           {old_key.verifier.vkey: done.revocation.from_size})],
                      tmp_path / "w.db")
    assert done.revocation.from_size == rot.seq + 1
    forged = witness.add_checkpoint(_forged_extension(ledger, stolen, ledger.size()))
    assert forged.status == 403 and f"revoked from size {rot.seq + 1}" in forged.body
    # the honest log, signed by the new key, goes on
    ledger.append_many([Record("test.event", {"n": "after"})])
    ledger.checkpoint()
    _cosign(ledger, witness)
    ledger.engine.dispose()
