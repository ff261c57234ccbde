"""Appending: receipts, durability, bad input (nothing half-written), append-only guards."""

from __future__ import annotations

import contextlib
import hashlib
import stat
from pathlib import Path

import orjson
import pytest
from sqlalchemy.exc import DBAPIError

import migrations
from ledger import LedgerUnavailableError, NoteSigner, Record, RecordError, SchemaError, store
from ledger.append import Ledger, LedgerStatus
from ledger.errors import KeyFileError
from ledger.jcs import Jcs
from ledger.keys import generate_key_file, load_signer
from ledger.merkle import leaf_hash, root_of
from ledger.verify import verify_ledger
from tests.conftest import ORIGIN, Db, make_ledger


def count(ledger: Ledger, table: str = "ledger_entries") -> int:
    with ledger.engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() or 0)


def test_receipts_are_contiguous_and_bind_the_sealed_bytes(ledger: Ledger) -> None:
    receipts = ledger.append_many([Record("test.event", {"n": i}) for i in range(25)])
    assert [r.seq for r in receipts] == list(range(1, 26))  # seq 0 is the genesis record
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT seq, record, leaf_hash, trace_id FROM ledger_entries ORDER BY seq").all()
    for r, (seq, rec, leaf, tid) in zip(receipts, rows[1:], strict=True):
        env = orjson.loads(rec)
        assert (seq, tid, bytes(leaf)) == (r.seq, r.trace_id, r.leaf_hash)
        assert env["kind"] == "test.event" and env["trace_id"] == r.trace_id
        assert env["recorded_at"] == r.recorded_at and env["v"] == 1
        assert bytes(leaf) == leaf_hash(bytes(rec))
    assert ledger.size() == 26


def test_envelope_is_rfc8785_canonical(ledger: Ledger) -> None:
    import rfc8785

    ledger.append(Record("test.event", {"z": 1, "a": [1.5, "é", None], "m": {"b": True, "a": 1e21}}))
    with ledger.engine.connect() as conn:
        rec = bytes(conn.exec_driver_sql(
            "SELECT record FROM ledger_entries WHERE seq = 1").scalar_one())
    assert rec == rfc8785.dumps(orjson.loads(rec))


def test_checkpoint_root_matches_an_independent_tree(ledger: Ledger) -> None:
    ledger.append_many([Record("test.event", {"n": i}) for i in range(40)])
    cp = ledger.checkpoint().checkpoint
    with ledger.engine.connect() as conn:
        recs = [bytes(r[0]) for r in conn.exec_driver_sql(
            "SELECT record FROM ledger_entries ORDER BY seq")]
    assert cp.size == 41 and cp.origin == ORIGIN
    assert cp.root == root_of([leaf_hash(r) for r in recs])


def test_checkpoints_follow_the_policy(db: Db, signer: NoteSigner) -> None:
    lg = make_ledger(db, signer, every=10)
    for _ in range(5):
        lg.append_many([Record("test.event", {"n": 1})] * 4)
    with lg.engine.connect() as conn:
        sizes = [int(s) for (s,) in conn.exec_driver_sql(
            "SELECT size FROM ledger_checkpoints ORDER BY size")]
    assert sizes == [1, 13]  # genesis, then the first batch leaving >= 10 entries unsealed
    assert lg.status()[:2] == (21, 13)  # 8 entries unsealed
    assert lg.checkpoint().checkpoint.size == 21  # on demand
    assert lg.checkpoint().checkpoint.size == 21  # nothing new: the same checkpoint
    assert count(lg, "ledger_checkpoints") == 3
    with lg.engine.connect() as conn:
        (signed_at,) = conn.exec_driver_sql("SELECT max(created_at) FROM ledger_checkpoints").one()
    assert lg.status() == LedgerStatus(21, 21, signed_at)


def test_reopened_ledger_continues_the_same_tree(db: Db, signer: NoteSigner) -> None:
    lg = make_ledger(db, signer)
    lg.append_many([Record("test.event", {"n": i}) for i in range(37)])
    lg.engine.dispose()
    again = Ledger(db.engine(), signer)
    again.append_many([Record("test.event", {"n": i}) for i in range(37, 70)])
    assert again.checkpoint().checkpoint.size == 71
    assert verify_ledger(again.engine, [signer.verifier], workers=1).size == 71


@pytest.mark.parametrize(
    "bad, message",
    [
        (Record("test.event", {"when": object()}), "not JSON-serialisable"),
        (Record("test.event", {"x": float("nan")}), "not JSON-serialisable"),
        (Record("Bad Kind", {"x": 1}), "kind"),
        (Record("test.event", ["not", "an", "object"]), "JSON object"),  # type: ignore[arg-type]
        (Record("test.event", {"x": 1}, trace_id="not-a-uuid"), "trace id"),
        (Record.from_canonical_body("test.event", b"[1]"), "JSON object"),
        (Record("test.event", {"x": 1}, payload="text"), "payload must be bytes"),  # type: ignore[arg-type]
    ],
)
def test_bad_records_are_refused_and_nothing_of_the_batch_is_written(
    ledger: Ledger, bad: Record, message: str
) -> None:
    before = count(ledger)
    with pytest.raises(RecordError, match=message) as info:
        ledger.append_many([Record("test.event", {"ok": 1}), bad])
    assert "record 1" in str(info.value)
    assert count(ledger) == before


def test_duplicate_trace_id_rolls_back_the_whole_batch(ledger: Ledger) -> None:
    tid = "01890a5d-ac96-774b-bcce-b302099a8057"
    ledger.append(Record("test.event", {"n": 1}, trace_id=tid))
    before = (count(ledger), count(ledger, "ledger_payloads"))
    with pytest.raises(RecordError, match="duplicate trace id"):
        ledger.append_many([Record("test.event", {"n": 2}, payload=b"p"),
                            Record("test.event", {"n": 3}, trace_id=tid)])
    assert (count(ledger), count(ledger, "ledger_payloads")) == before
    ledger.append(Record("test.event", {"n": 4}))  # the sequencer is not wedged
    assert verify_ledger(ledger.engine, workers=1).size == before[0] + 1


def test_payloads_are_stored_once_by_hash(ledger: Ledger) -> None:
    ledger.append_many([Record("test.event", {"n": i}, payload=b"same raw message") for i in range(3)])
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT sha256, data, first_seq FROM ledger_payloads").all()
    assert [(r[0], bytes(r[1]), r[2]) for r in rows] == [
        (hashlib.sha256(b"same raw message").hexdigest(), b"same raw message", 1)]


@pytest.mark.parametrize("table", ["ledger_entries", "ledger_nodes", "ledger_checkpoints", "ledger_keys"])
@pytest.mark.requirement("SEC-17a4f-audit-trail")
def test_database_refuses_update_and_delete(ledger: Ledger, table: str) -> None:
    ledger.append_many([Record("test.event", {"n": i}) for i in range(40)])
    ledger.checkpoint()
    col = {"ledger_entries": "kind", "ledger_nodes": "hash", "ledger_checkpoints": "note",
           "ledger_keys": "name"}[table]
    for sql in (f"UPDATE {table} SET {col} = {col}", f"DELETE FROM {table}"):
        with ledger.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.exec_driver_sql(sql)
    if ledger.engine.dialect.name == "postgresql":
        with ledger.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.exec_driver_sql(f"TRUNCATE {table}")


def test_payloads_may_only_be_purged(ledger: Ledger) -> None:
    ledger.append(Record("test.event", {"n": 1}, payload=b"raw"))
    if ledger.engine.dialect.name == "postgresql":
        with ledger.engine.connect() as conn, pytest.raises(DBAPIError, match="append-only"):
            conn.exec_driver_sql("TRUNCATE ledger_payloads")
    for sql in ("UPDATE ledger_payloads SET data = data", "DELETE FROM ledger_payloads",
                "UPDATE ledger_payloads SET first_seq = 5"):
        with ledger.engine.connect() as conn, pytest.raises(DBAPIError, match="purged"):
            conn.exec_driver_sql(sql)


def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="does not exist"):
        store.connect(f"sqlite:///{tmp_path / 'nope.db'}")


def test_unmigrated_schema_is_a_clear_error(tmp_path: Path, signer: NoteSigner) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 'empty.db'}", create_file=True)
    with pytest.raises(SchemaError, match="not migrated"):
        Ledger(engine, signer)


def test_unreachable_database_is_a_clear_error(signer: NoteSigner) -> None:
    engine = store.connect("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(LedgerUnavailableError, match="cannot reach"):
        Ledger(engine, signer)


def test_ledger_refuses_a_key_that_is_not_its_own(db: Db, signer: NoteSigner) -> None:
    lg = make_ledger(db, signer)
    with pytest.raises(KeyFileError, match="active signing key"):
        Ledger(lg.engine, NoteSigner.generate(ORIGIN))


def test_commit_failure_is_unavailable_and_writes_nothing(ledger: Ledger) -> None:
    """The node insert fails after the entries went in: the whole batch must roll back."""
    before = (count(ledger), ledger.size())
    with ledger.engine.connect() as conn:
        conn.exec_driver_sql("ALTER TABLE ledger_nodes RENAME TO ledger_nodes_away")
        conn.commit()
    try:
        with pytest.raises(LedgerUnavailableError, match="nothing written"):
            ledger.append_many([Record("test.event", {"n": i}) for i in range(40)])
    finally:
        with ledger.engine.connect() as conn:
            conn.exec_driver_sql("ALTER TABLE ledger_nodes_away RENAME TO ledger_nodes")
            conn.commit()
    assert (count(ledger), ledger.size()) == before
    ledger.append_many([Record("test.event", {"n": i}) for i in range(40)])
    assert verify_ledger(ledger.engine, workers=1).size == before[0] + 40


def test_key_files_are_private_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "signing.key"
    signer = generate_key_file(path, ORIGIN)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_signer(path).verifier == signer.verifier
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        generate_key_file(path, ORIGIN)
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_signer(path)
    path.chmod(0o600)
    path.write_text("PRIVATE+KEY+garbage\n")
    with pytest.raises(KeyFileError, match="signer key"):
        load_signer(path)
    with pytest.raises(KeyFileError, match="does not exist"):
        load_signer(tmp_path / "missing.key")


def test_migrations_are_idempotent_and_reversible(db: Db) -> None:
    engine = db.engine()
    migrations.upgrade(engine)
    migrations.upgrade(engine)
    store.require_schema(engine)
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", migrations.SCRIPT_LOCATION)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
        conn.commit()
    with pytest.raises(SchemaError):
        store.require_schema(engine)


@pytest.mark.postgres
def test_postgres_app_role_may_insert_but_not_rewrite(tmp_path: Path) -> None:
    from tests.conftest import PG_URL, _postgres

    if not PG_URL:
        pytest.skip(reason="SEALTRAIL_TEST_POSTGRES_URL is not set (CI sets it)")
    import uuid

    role = f"sealtrail_app_{uuid.uuid4().hex[:8]}"
    gen = _postgres()
    db = next(gen)
    engine = db.engine()
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} NOLOGIN")
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.commit()
    try:
        migrations.upgrade(engine, app_role=role)
        Ledger.create(engine, NoteSigner.generate(ORIGIN), ORIGIN)
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SET ROLE {role}")
            assert conn.exec_driver_sql("SELECT count(*) FROM ledger_entries").scalar() == 1
            with pytest.raises(DBAPIError, match="permission denied"):
                conn.exec_driver_sql("UPDATE ledger_entries SET kind = kind")
            conn.rollback()
            conn.exec_driver_sql(f"SET ROLE {role}")
            with pytest.raises(DBAPIError, match="permission denied"):
                conn.exec_driver_sql("DELETE FROM ledger_checkpoints")
            conn.rollback()
    finally:
        engine.dispose()
        with contextlib.suppress(StopIteration):
            next(gen)
        admin = store.connect(PG_URL)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP ROLE IF EXISTS {role}")
            conn.commit()
        admin.dispose()


def test_the_inline_seal_makes_the_bytes_seal_makes() -> None:
    from ledger.records import new_trace_ids, seal, seal_many

    ts = "2026-12-02T11:22:18.123456Z"
    body = b'{"n":1,"s":"\\u0000\xc3\xa9"}'
    records = [Record.from_canonical_body("test.event", body),
               Record.from_canonical_body("test.event", body, payload=b"raw message"),
               Record.from_jcs("test.event", Jcs(body), payload=b"raw message"),
               Record.from_jcs("test.event", Jcs(body))]
    seal(records[0], ts, new_trace_ids(1)[0])  # the kind is known from here on: the inline path
    for r, (tid, env, digest) in zip(records, seal_many(records, ts), strict=True):
        assert seal(r, ts, tid) == (tid, env, digest)
        assert orjson.loads(env)["record"] == orjson.loads(body)
        assert digest == (None if r.payload is None else hashlib.sha256(r.payload).hexdigest())


@pytest.mark.parametrize("payload", [None, b"raw"])
def test_a_canonical_body_that_breaks_out_of_the_envelope_is_refused(ledger: Ledger,
                                                                     payload: bytes | None) -> None:
    ledger.append(Record.from_canonical_body("test.event", b'{"warm":1}'))  # the kind is known
    before = count(ledger)
    for body in (b'{"a":1},"kind":"ledger.key_rotation","b":{"c":2}', b'{"a":1}}', b"{", b"[1]"):
        with pytest.raises(RecordError, match="JSON object"):
            ledger.append_many([Record.from_canonical_body("test.event", body, payload=payload)])
    for body in (b"[1]", b'"x"', b"", b"{", "{}"):  # unparsed bodies still want bytes in braces
        with pytest.raises(RecordError, match="JSON object"):
            ledger.append_many([Record.from_jcs("test.event", Jcs(body),  # type: ignore[arg-type]
                                                payload=payload)])
    assert count(ledger) == before


def test_sqlite_connections_are_durable_and_cached(tmp_path: Path) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 'x.db'}", create_file=True)
    with engine.connect() as conn:
        got = {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in ("journal_mode", "synchronous",
                                                                          "cache_size")}
    engine.dispose()
    assert got == {"journal_mode": "wal", "synchronous": 2, "cache_size": -16384}  # 2 = FULL


def test_the_deprecated_unchecked_constructor_warns_and_seals_as_from_jcs() -> None:
    from ledger.records import new_trace_ids, seal

    ts, tid, body = "2026-12-02T11:22:18.123456Z", new_trace_ids(1)[0], b'{"n":1}'
    with pytest.warns(DeprecationWarning, match="from_jcs"):
        old = Record.from_canonical_body_unchecked("test.event", body, payload=b"raw")
    assert seal(old, ts, tid) == seal(Record.from_jcs("test.event", Jcs(body), payload=b"raw"), ts, tid)
