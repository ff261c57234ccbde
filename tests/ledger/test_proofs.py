"""Proofs served from storage (strata of nodes) verify against signed checkpoints."""

from __future__ import annotations

import pytest

from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.merkle import leaf_hash, root_of, verify_consistency, verify_inclusion
from ledger.proofs import consistency_proof, inclusion_proof, root_at
from ledger.verify import verify_ledger


@pytest.fixture
def grown(ledger: Ledger) -> Ledger:
    for start in range(0, 300, 37):  # odd batch sizes: strata complete mid-batch
        ledger.append_many([Record("test.event", {"n": i}) for i in range(start, start + 37)])
    return ledger


def leaves(lg: Ledger) -> list[bytes]:
    with lg.engine.connect() as conn:
        return [leaf_hash(bytes(r[0])) for r in conn.exec_driver_sql(
            "SELECT record FROM ledger_entries ORDER BY seq")]


def test_every_inclusion_proof_verifies(grown: Ledger) -> None:
    ls = leaves(grown)
    with grown.engine.connect() as conn:
        for size in (1, 2, 16, 17, 255, 256, 257, len(ls)):
            root = root_of(ls[:size])
            assert root_at(conn, size) == root
            for i in range(0, size, max(1, size // 40)):
                verify_inclusion(i, size, ls[i], inclusion_proof(conn, i, size), root)


def test_every_consistency_proof_verifies(grown: Ledger) -> None:
    ls = leaves(grown)
    with grown.engine.connect() as conn:
        for a, b in [(1, 2), (7, 16), (16, 17), (100, 256), (256, 300), (3, len(ls))]:
            proof = consistency_proof(conn, a, b)
            verify_consistency(a, b, proof, root_of(ls[:a]), root_of(ls[:b]))


def test_key_rotation_keeps_old_checkpoints_verifiable(grown: Ledger, signer: NoteSigner) -> None:
    old_cp = grown.checkpoint()
    new = NoteSigner.generate(signer.name)
    receipt = grown.rotate_key(new)
    grown.append_many([Record("test.event", {"after": i}) for i in range(50)])
    grown.checkpoint()
    rotation_cp = next(c for c in _notes(grown) if c[0] == receipt.seq + 1)[1]
    assert signer.name in rotation_cp and rotation_cp.count("\u2014 ") == 2  # co-signed
    for pinned in (signer.verifier, new.verifier):  # either end of the chain of keys
        report = verify_ledger(grown.engine, [pinned], workers=1)
        assert report.keys == [signer.verifier.vkey, new.verifier.vkey]
    assert any(c[1] == old_cp.note for c in _notes(grown))
    with pytest.raises(Exception, match="active signing key"):
        Ledger(grown.engine, signer)  # the old key may no longer sign


def _notes(lg: Ledger) -> list[tuple[int, str]]:
    with lg.engine.connect() as conn:
        return [(int(s), str(n)) for s, n in conn.exec_driver_sql(
            "SELECT size, note FROM ledger_checkpoints ORDER BY size")]
