"""Proofs served from storage (strata of nodes) verify against signed checkpoints, and the proofs
the ledger hands out (``prove_inclusion``, ``prove_consistency``) are checked before they leave."""

from __future__ import annotations

import base64

import pytest

from ledger import DamageError, NoteSigner, Record
from ledger.append import Ledger
from ledger.checkpoint import Checkpoint, SignedCheckpoint
from ledger.errors import EntryNotFoundError, NotCoveredError, RefusedError
from ledger.merkle import leaf_hash, root_of, verify_consistency, verify_inclusion
from ledger.proofs import consistency_proof, inclusion_proof, prove_consistency, prove_inclusion, root_at
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger
from tests.ledger.test_tamper import _drop_guards


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


# --- the proofs handed out: checked before they leave -----------------------------------------------


def _checkpoint_root(note: str, signer: NoteSigner) -> bytes:
    return SignedCheckpoint.verify(note, [signer.verifier], ORIGIN).checkpoint.root


def test_inclusion_by_seq_and_by_trace_id_verifies_against_the_signed_checkpoint(
        grown: Ledger, signer: NoteSigner) -> None:
    grown.checkpoint()
    receipt = grown.append(Record("test.event", {"late": True}))
    before = grown.latest_checkpoint()
    assert before is not None and before.checkpoint.size <= receipt.seq
    by_seq = prove_inclusion(grown, receipt.seq)  # not covered yet: a checkpoint is signed for it
    assert by_seq.size == receipt.seq + 1 == grown.latest_checkpoint().checkpoint.size  # type: ignore[union-attr]
    assert by_seq.leaf_hash == receipt.leaf_hash
    verify_inclusion(by_seq.index, by_seq.size, by_seq.leaf_hash, list(by_seq.hashes),
                     _checkpoint_root(by_seq.checkpoint, signer))
    assert prove_inclusion(grown, receipt.trace_id) == by_seq
    assert prove_inclusion(grown, 17, sign=False).index == 17


def test_a_page_view_never_signs(grown: Ledger) -> None:
    grown.checkpoint()
    r = grown.append(Record("test.event", {"late": True}))
    with pytest.raises(NotCoveredError, match=f"entry {r.seq} is newer than the latest signed checkpoint"):
        prove_inclusion(grown, r.seq, sign=False)
    assert grown.latest_checkpoint().checkpoint.size == r.seq  # type: ignore[union-attr]


@pytest.mark.parametrize("target", [10_000, -1, 1 << 63, 10**30, "018f0000-0000-7000-8000-000000000000"])
def test_an_unknown_entry_is_not_found(grown: Ledger, target: int | str) -> None:
    with pytest.raises(EntryNotFoundError, match="no ledger entry with"):
        prove_inclusion(grown, target)


def test_consistency_proof_with_the_stored_notes(grown: Ledger, signer: NoteSigner) -> None:
    old = grown.latest_checkpoint()
    assert old is not None
    grown.append_many([Record("test.event", {"more": i}) for i in range(40)])
    new = grown.checkpoint()
    a, b = old.checkpoint.size, new.checkpoint.size
    p = prove_consistency(grown.engine, a, b)
    assert (p.old_checkpoint, p.new_checkpoint) == (old.note, new.note)
    assert p.old_root == _checkpoint_root(old.note, signer)
    assert p.new_root == _checkpoint_root(new.note, signer)
    verify_consistency(a, b, list(p.hashes), p.old_root, p.new_root)
    doc = p.to_json()
    assert list(doc) == ["old_size", "new_size", "old_root", "new_root", "hashes", "old_checkpoint",
                         "new_checkpoint"]
    assert doc["hashes"] == [base64.b64encode(h).decode() for h in p.hashes]
    unsigned = prove_consistency(grown.engine, 3, 5)  # no checkpoint at either size
    assert unsigned.old_checkpoint is None and unsigned.new_checkpoint is None


@pytest.mark.parametrize(("old", "new"), [(0, 3), (5, 4), (1, 100_000)])
def test_consistency_sizes_out_of_range_are_refused(grown: Ledger, old: int, new: int) -> None:
    with pytest.raises(RefusedError, match=r"0 < OLD <= NEW <= \d+"):
        prove_consistency(grown.engine, old, new)


def test_a_stored_checkpoint_that_signs_another_root_is_damage_not_a_proof(
        sqlite_db: Db, signer: NoteSigner) -> None:
    lg = make_ledger(sqlite_db, signer, every=10)
    lg.append_many([Record("test.event", {"n": i}) for i in range(30)])
    size = lg.latest_checkpoint().checkpoint.size  # type: ignore[union-attr]
    forged = Checkpoint(ORIGIN, size, bytes(32)).sign([signer])
    with lg.engine.connect() as conn:
        _drop_guards(conn)
        conn.exec_driver_sql("UPDATE ledger_checkpoints SET note = ? WHERE size = ?", (forged.note, size))
        conn.commit()
    with pytest.raises(DamageError, match=f"checkpoint stored for size {size} signs another root") as info:
        prove_consistency(lg.engine, 1, size)
    assert info.value.kind == "root mismatch" and info.value.seq == size - 1
    lg.engine.dispose()
