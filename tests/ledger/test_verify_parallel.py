"""Verification cut into ranges in worker processes gives the same answers as one pass."""

from __future__ import annotations

import pytest

from ledger import DamageError, NoteSigner, Record, store
from ledger import verify as verify_mod
from ledger.append import Ledger
from ledger.scan import CHUNK
from ledger.verify import verify_ledger
from tests.conftest import Db, make_ledger

SIZE = 2 * CHUNK + 5_000


@pytest.fixture
def big(sqlite_db: Db, signer: NoteSigner, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setattr(verify_mod, "_PIECE", CHUNK)  # three pieces instead of one
    lg = make_ledger(sqlite_db, signer)
    body = b'{"amount":"10.00","decision":"ALLOW"}'
    for start in range(1, SIZE, 2_000):
        n = min(2_000, SIZE - start)
        lg.append_many([Record.from_canonical_body("test.event", body) for _ in range(n)])
    lg.checkpoint()
    return lg


def test_parallel_and_serial_reports_agree(big: Ledger, signer: NoteSigner) -> None:
    one = verify_ledger(big.engine, [signer.verifier], workers=1)
    two = verify_ledger(big.engine, [signer.verifier], workers=2)
    assert one.size == two.size == SIZE
    assert (one.checkpoints, one.latest_checkpoint_size) == (two.checkpoints, two.latest_checkpoint_size)


@pytest.mark.parametrize("seq", [5, CHUNK + 3, 2 * CHUNK + 4_000])
def test_damage_in_any_piece_is_named(big: Ledger, signer: NoteSigner, seq: int) -> None:
    with big.engine.connect() as conn:
        conn.exec_driver_sql("DROP TRIGGER ledger_entries_no_update")
        conn.exec_driver_sql(
            f"UPDATE ledger_entries SET record = CAST('{{}}' AS BLOB) WHERE seq = {seq}")
        conn.commit()
    with pytest.raises(DamageError) as info:
        verify_ledger(big.engine, [signer.verifier], workers=2)
    assert (info.value.kind, info.value.seq) == ("altered record", seq)


def test_a_forged_node_that_seeds_the_next_piece_is_caught(big: Ledger, signer: NoteSigner) -> None:
    """The second piece starts from stored nodes left of it; the first piece checks them."""
    with big.engine.connect() as conn:
        conn.exec_driver_sql("DROP TRIGGER ledger_nodes_no_update")
        p = store.param(conn)
        conn.exec_driver_sql(
            f"UPDATE ledger_nodes SET hash = {p} WHERE level = 12 AND idx = 3", (bytes(32),))
        conn.commit()
    with pytest.raises(DamageError) as info:
        verify_ledger(big.engine, [signer.verifier], workers=2)
    assert (info.value.kind, info.value.seq) == ("altered Merkle node", 3 << 12)
