"""The tamper matrix: a forger with write access to the database (triggers dropped first)
does each kind of damage; ``verify_ledger`` must name the kind and the first bad seq."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection

from ledger import DamageError, NoteSigner, Record, store
from ledger.append import Ledger
from ledger.checkpoint import Checkpoint
from ledger.merkle import CompactRange
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger

N = 120  # entries after genesis; checkpoints every 10


@pytest.fixture
def forged(db: Db, signer: NoteSigner) -> Iterator[tuple[Ledger, NoteSigner]]:
    yield from _forged(db, signer)


@pytest.fixture
def sqlite_forged(sqlite_db: Db, signer: NoteSigner) -> Iterator[tuple[Ledger, NoteSigner]]:
    yield from _forged(sqlite_db, signer)


def _forged(db: Db, signer: NoteSigner) -> Iterator[tuple[Ledger, NoteSigner]]:
    lg = make_ledger(db, signer, every=10)
    for start in range(0, N, 8):
        lg.append_many([Record("test.event", {"n": i}, payload=f"raw {i}".encode())
                        for i in range(start, start + 8)])
    lg.checkpoint()
    assert verify_ledger(lg.engine, [signer.verifier], workers=1).size == N + 1
    with lg.engine.connect() as conn:
        _drop_guards(conn)
        conn.commit()
    yield lg, signer
    lg.engine.dispose()


def _drop_guards(conn: Connection) -> None:
    tables = [*store.APPEND_ONLY, "ledger_payloads"]
    if conn.dialect.name == "sqlite":
        for (name,) in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='trigger'"):
            conn.exec_driver_sql(f"DROP TRIGGER {name}")
    else:
        for t in tables:
            for trg in ("append_only", "no_truncate", "purge_only"):
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {t}_{trg} ON {t}")


def _p(conn: Connection) -> str:
    return store.param(conn)


def _row(conn: Connection, seq: int) -> tuple[Any, ...]:
    return tuple(conn.exec_driver_sql(
        "SELECT seq, kind, record, leaf_hash, chain_hash, recorded_at, trace_id "
        f"FROM ledger_entries WHERE seq = {_p(conn)}", (seq,)).one())


def _put(conn: Connection, row: tuple[Any, ...]) -> None:
    p = _p(conn)
    conn.exec_driver_sql(
        "INSERT INTO ledger_entries (seq, kind, record, leaf_hash, chain_hash, recorded_at, "
        f"trace_id) VALUES ({', '.join([p] * 7)})", row)


def _delete(conn: Connection, seq: int) -> None:
    conn.exec_driver_sql(f"DELETE FROM ledger_entries WHERE seq = {_p(conn)}", (seq,))


def damage(lg: Ledger, signer: NoteSigner) -> DamageError:
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [signer.verifier], workers=1)
    return info.value


@pytest.mark.requirement("SEC-17a4f-verify")
def test_updated_record(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        row = _row(conn, 51)
        conn.exec_driver_sql(f"UPDATE ledger_entries SET record = {_p(conn)} WHERE seq = 51",
                             (bytes(row[2]).replace(b'"n":50', b'"n":99'),))
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("altered record", 51)


def test_record_rewritten_as_text_is_damage_not_a_crash(sqlite_forged: tuple[Ledger, NoteSigner]) -> None:
    # SQLite stores what an UPDATE gives it: `record || ' '` turns the BLOB into TEXT
    lg, signer = sqlite_forged
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("UPDATE ledger_entries SET record = CAST(record AS TEXT) || ' ' WHERE seq = 33")
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("altered record", 33)
    assert "str" in str(d)


def test_merkle_node_rewritten_as_text_is_damage_not_a_crash(
        sqlite_forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = sqlite_forged
    with lg.engine.connect() as conn:
        level, idx = conn.exec_driver_sql(
            "SELECT level, idx FROM ledger_nodes ORDER BY level, idx LIMIT 1").one()
        conn.exec_driver_sql("UPDATE ledger_nodes SET hash = 'not a hash' "
                             f"WHERE level = {level} AND idx = {idx}")
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "altered Merkle node"


@pytest.mark.requirement("SEC-17a4f-verify")
def test_deleted_row(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        _delete(conn, 40)
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("missing entry", 40)


def test_inserted_row(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        rows = [_row(conn, s) for s in range(30, N + 1)]
        for s in reversed(range(30, N + 1)):
            _delete(conn, s)
        prev_chain = bytes(_row(conn, 29)[4])
        tid = "01890a5d-ac96-774b-bcce-b302099a8057"
        rec = (b'{"kind":"test.event","record":{"n":"forged"},"recorded_at":"'
               + rows[0][5].encode() + b'","trace_id":"' + tid.encode() + b'","v":1}')
        leaf = hashlib.sha256(b"\x00" + rec).digest()
        _put(conn, (30, "test.event", rec, leaf, hashlib.sha256(prev_chain + leaf).digest(),
                    rows[0][5], tid))
        for r in rows:
            _put(conn, (r[0] + 1, *r[1:]))
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("broken chain", 31)


def test_swapped_rows(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        a, b = _row(conn, 20), _row(conn, 21)
        _delete(conn, 20)
        _delete(conn, 21)
        _put(conn, (20, *b[1:]))
        _put(conn, (21, *a[1:]))
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("broken chain", 20)


@pytest.mark.requirement("SEC-17a4f-verify")
def test_truncated_tail(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        for s in range(N - 4, N + 1):
            _delete(conn, s)
        conn.exec_driver_sql(f"DELETE FROM ledger_payloads WHERE first_seq >= {N - 4}")
        conn.exec_driver_sql(f"DELETE FROM ledger_nodes WHERE idx * 16 + 15 >= {N - 4} AND level = 4")
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("truncated log", N - 4)


def _rehash_from(conn: Connection, seq: int, new_record: bytes) -> None:
    """What a forger does: rewrite one record, then every later leaf, chain and node."""
    p = _p(conn)
    rows = conn.exec_driver_sql(
        "SELECT seq, record, chain_hash FROM ledger_entries ORDER BY seq").all()
    prev = bytes(rows[seq - 1][2])
    leaves = []
    for s, rec, _ in rows:
        rec = new_record if s == seq else bytes(rec)
        leaf = hashlib.sha256(b"\x00" + rec).digest()
        leaves.append(leaf)
        if s >= seq:
            prev = hashlib.sha256(prev + leaf).digest()
            conn.exec_driver_sql(
                f"UPDATE ledger_entries SET record = {p}, leaf_hash = {p}, chain_hash = {p} "
                f"WHERE seq = {p}", (rec, leaf, prev, s))
    conn.exec_driver_sql("DELETE FROM ledger_nodes")
    nodes: list[tuple[int, int, bytes]] = []
    cr = CompactRange()
    for leaf in leaves:
        cr.append(leaf, lambda lv, ix, h: nodes.append((lv, ix, h)) if lv % 4 == 0 else None)
    conn.exec_driver_sql(f"INSERT INTO ledger_nodes (level, idx, hash) VALUES ({p}, {p}, {p})", nodes)


def test_chain_fully_rehashed_by_a_forger(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        rec = bytes(_row(conn, 50)[2]).replace(b'"n":49', b'"n":48')
        _rehash_from(conn, 50, rec)
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "root mismatch"
    assert d.seq is not None and 40 <= d.seq <= 50 and "signed at size" in str(d)


def _resign(conn: Connection, forger: NoteSigner, only_latest: bool = False) -> None:
    p = _p(conn)
    rows = conn.exec_driver_sql("SELECT size, root FROM ledger_checkpoints ORDER BY size").all()
    for size, root in rows[-1:] if only_latest else rows:
        note = Checkpoint(ORIGIN, int(size), bytes(root)).sign([forger]).note
        conn.exec_driver_sql(f"UPDATE ledger_checkpoints SET note = {p} WHERE size = {p}",
                             (note, size))


def test_forged_checkpoint(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        _resign(conn, NoteSigner.generate(ORIGIN), only_latest=True)
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "forged checkpoint" and d.seq == N


def test_checkpoint_row_edited_without_its_note(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        size = conn.exec_driver_sql(
            "SELECT min(size) FROM ledger_checkpoints WHERE size > 1").scalar_one()
        conn.exec_driver_sql(f"UPDATE ledger_checkpoints SET root = {_p(conn)} WHERE size = {size}",
                             (bytes(32),))
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "forged checkpoint" and "disagrees" in str(d)


def test_substituted_public_key(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    forger = NoteSigner.generate(ORIGIN)
    with lg.engine.connect() as conn:
        p = _p(conn)
        conn.exec_driver_sql(
            f"UPDATE ledger_keys SET vkey = {p}, key_id = {p}, public_key = {p}",
            (forger.verifier.vkey, forger.verifier.key_id.hex(), forger.verifier.public_key))
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "substituted key"
    with lg.engine.connect() as conn:
        _resign(conn, forger)  # ... and re-sign every checkpoint with the forger's key
        conn.commit()
    d = damage(lg, signer)
    assert d.kind == "forged checkpoint" and "size 1 " in str(d)


def test_wholesale_forgery_is_caught_only_by_the_pinned_key(db: Db, signer: NoteSigner) -> None:
    forger = NoteSigner.generate(ORIGIN)
    lg = make_ledger(db, forger)  # a self-consistent ledger under someone else's key
    lg.append_many([Record("test.event", {"n": i}) for i in range(30)])
    with pytest.raises(DamageError) as info:
        verify_ledger(lg.engine, [signer.verifier], workers=1)
    assert info.value.kind == "untrusted key"
    report = verify_ledger(lg.engine, workers=1)  # no pin: passes, and says why that is weak
    assert any("no trusted key pinned" in w for w in report.warnings)


def test_altered_index_column(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        conn.exec_driver_sql(
            "UPDATE ledger_entries SET trace_id = '01890a5d-ac96-774b-bcce-b302099a8057' "
            "WHERE seq = 17")
        conn.exec_driver_sql("UPDATE ledger_entries SET kind = 'ledger.legal_hold' WHERE seq = 33")
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("altered index column", 17)


def test_altered_merkle_node(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    with lg.engine.connect() as conn:
        conn.exec_driver_sql(
            f"UPDATE ledger_nodes SET hash = {_p(conn)} WHERE level = 4 AND idx = 2", (bytes(32),))
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("altered Merkle node", 32)


@pytest.mark.requirement("GDPR-17-erasure")
def test_altered_and_silently_erased_payloads(forged: tuple[Ledger, NoteSigner]) -> None:
    lg, signer = forged
    p = None
    with lg.engine.connect() as conn:
        p = _p(conn)
        conn.exec_driver_sql(f"UPDATE ledger_payloads SET data = {p} WHERE first_seq = 70",
                             (b"raw 69 but edited",))
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("altered payload", 70)
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("UPDATE ledger_payloads SET data = NULL WHERE first_seq = 70")
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("payload erased without a purge record", 70)
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("DELETE FROM ledger_payloads WHERE first_seq = 70")
        conn.commit()
    d = damage(lg, signer)
    assert (d.kind, d.seq) == ("missing payload", 70)
