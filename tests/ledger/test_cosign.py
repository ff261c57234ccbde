"""The log's side of witnessing on both databases: cosignatures collected are append-only, checked
by ``ledger verify`` row by row, and a forged or misplaced row is damage naming its size."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from ledger import DamageError, NoteSigner, Record
from ledger.append import Ledger
from ledger.cosign import WitnessEndpoint, collect, cosigned_note, newest_cosigned, witness_sizes
from ledger.cosignature import Cosigner, cosignatures
from ledger.verify import verify_ledger
from ledger.witness import LogPolicy, Witness
from tests.conftest import ORIGIN, Db, make_ledger


@pytest.fixture
def witnessed(ledger: Ledger, signer: NoteSigner, tmp_path: Path) -> tuple[Ledger, Witness]:
    policy = [LogPolicy(ORIGIN, (signer.verifier,))]
    w = Witness(Cosigner.generate("w.example/witness"), policy, tmp_path / "w.db")
    endpoint = [WitnessEndpoint("https://w", w.cosigner.verifier)]
    for n in (5, 9):
        ledger.append_many([Record("test.event", {"i": i}) for i in range(n)])
        ledger.checkpoint()
        (o,) = collect(ledger.engine, endpoint, w.post)
        assert o.ok, o.detail
    return ledger, w


def test_collected_cosignatures_verify_and_are_served(witnessed: tuple[Ledger, Witness]) -> None:
    ledger, w = witnessed
    vkey = w.cosigner.verifier.vkey
    with ledger.engine.connect() as conn:
        assert witness_sizes(conn) == {vkey: 15}
        got = newest_cosigned(conn)
        first = cosigned_note(conn, 6)
    assert got is not None and got[0] == 15 and first is not None
    assert len(cosignatures(got[1], [w.cosigner.verifier])) == 1
    report = verify_ledger(ledger.engine)
    assert (report.cosignatures, report.witnesses) == (2, {vkey: 15})
    # nothing new to cosign: the witness is not asked again
    (o,) = collect(ledger.engine, [WitnessEndpoint("https://w", w.cosigner.verifier)], w.post)
    assert o.ok and o.status is None and "already cosigned" in o.detail


def test_cosignatures_are_append_only(witnessed: tuple[Ledger, Witness]) -> None:
    ledger, _ = witnessed
    for sql in ("UPDATE ledger_cosignatures SET timestamp = 1", "DELETE FROM ledger_cosignatures"):
        with pytest.raises(DBAPIError), ledger.engine.begin() as conn:
            conn.exec_driver_sql(sql)


def test_a_forged_cosignature_row_is_damage(witnessed: tuple[Ledger, Witness]) -> None:
    ledger, w = witnessed
    forger = Cosigner.generate("w.example/witness")  # the witness's name, another key
    ledger.append(Record("test.event", {"i": "later"}))
    size = ledger.checkpoint().checkpoint.size  # a checkpoint the witness never saw
    with ledger.engine.connect() as conn:
        note = cosigned_note(conn, size)
    assert note is not None
    line = forger.cosign(note.split("\n\n")[0] + "\n", 1_800_000_000)
    with ledger.engine.begin() as conn:  # a row claiming the real witness cosigned it
        conn.exec_driver_sql(
            "INSERT INTO ledger_cosignatures (size, witness, timestamp, line, received_at) "
            f"VALUES ({size}, '{w.cosigner.verifier.vkey}', 1800000000, '{line}', 0)")
    with pytest.raises(DamageError, match="forged cosignature") as damage:
        verify_ledger(ledger.engine)
    assert damage.value.seq == size - 1


def test_a_cosignature_of_a_size_never_signed_is_damage(witnessed: tuple[Ledger, Witness]) -> None:
    ledger, w = witnessed
    body = f"{ORIGIN}\n7\n{'A' * 43}=\n"
    line = w.cosigner.cosign(body, 1_800_000_000)
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO ledger_cosignatures (size, witness, timestamp, line, received_at) "
            f"VALUES (7, '{w.cosigner.verifier.vkey}', 1800000000, '{line}', 0)")
    with pytest.raises(DamageError, match="no stored checkpoint") as damage:
        verify_ledger(ledger.engine)
    assert damage.value.seq == 6


def test_a_log_that_does_not_extend_what_the_witness_cosigned_is_an_alarm(
        db: Db, signer: NoteSigner, tmp_path: Path) -> None:
    """Two ledgers under one key and origin (a failover that lost entries, then grew past them):
    the second's checkpoint cannot be connected to the witness's, and the log calls it a fork."""
    first = make_ledger(db, signer)
    policy = [LogPolicy(ORIGIN, (signer.verifier,))]
    w = Witness(Cosigner.generate("w.example/witness"), policy, tmp_path / "w.db")
    endpoint = [WitnessEndpoint("https://w", w.cosigner.verifier)]
    first.append_many([Record("test.event", {"i": i}) for i in range(6)])
    first.checkpoint()
    assert collect(first.engine, endpoint, w.post)[0].ok
    second = make_ledger(Db(f"sqlite:///{tmp_path / 'second.db'}", "sqlite"), signer)
    second.append_many([Record("test.event", {"j": i}) for i in range(12)])
    second.checkpoint()
    (o,) = collect(second.engine, endpoint, w.post)
    assert (o.ok, o.alarm, o.status) == (False, True, 422) and "a fork" in o.detail
    assert w.evidence() == []  # a failed proof is no signed contradiction: the log's alarm says it
