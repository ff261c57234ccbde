"""The trace index: written in the sealing commit, agrees with the records, append-only, rebuildable."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Engine, exc, inspect, select

import migrations
from audit.decide.fixed_point import body_score
from audit.decide.pipeline import Pipeline
from audit.decide.types import Submission
from audit.query.index import TABLES, TraceIndex, account_key, catch_up, metadata, trace_accounts, traces
from inference.messages import Transaction, parse_messages
from ledger import LedgerUnavailableError, NoteSigner, store
from ledger.append import Ledger
from tests.audit.test_pipeline import PRINCIPAL, make_pipeline, submissions
from tests.audit.test_pipeline import bodies as decision_entries
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

OTHER = {**PRINCIPAL, "subject": "CN=payments-eu,O=sealtrail dev", "fingerprint_sha256": "cd" * 32}


def indexed_pipeline(ledger: Ledger, sandbox: Sandbox, wasm: bytes) -> Pipeline:
    pipe = make_pipeline(ledger, sandbox, wasm)
    pipe.index = TraceIndex()
    return pipe


def mixed_submissions(n: int, seed: int = 5) -> list[Submission]:
    """Simulated payments from two principals (every third from OTHER)."""
    return [replace(s, principal=OTHER) if i % 3 == 2 else s for i, s in enumerate(submissions(n, seed))]


def dump(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {t.name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
                for t in TABLES}


def transaction_of(body: dict[str, Any], raw: bytes) -> Transaction:
    return next(t for t in parse_messages(raw, body["input"]["format"])
                if isinstance(t, Transaction) and t.sha256 == body["input"]["transaction_sha256"])


def _downgrade_to_0002(engine: Engine) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", migrations.SCRIPT_LOCATION)
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
        conn.commit()


def test_the_migration_creates_exactly_the_module_tables(db: Db) -> None:
    engine = db.engine()
    migrations.upgrade(engine)
    ours = {t.name for t in TABLES}

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is not None and table.name in ours  # the ledger's own tables are not ours to judge

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include})
        assert compare_metadata(ctx, metadata) == []
        assert ours <= set(inspect(conn).get_table_names())


def test_index_rows_agree_with_the_sealed_records(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                  pack_wasm: bytes) -> None:
    ledger = make_ledger(db, signer)
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(240)
    decisions = pipe.decide(subs[:120]) + pipe.decide(subs[120:])
    got = dump(ledger.engine)
    rows = {r[0]: r for r in got["audit_traces"]}
    rules = {(rid, seq) for rid, seq in got["audit_trace_rules"]}
    accounts = {(k, seq) for k, seq in got["audit_trace_accounts"]}
    entries = decision_entries(ledger.engine)
    assert sorted(rows) == [s for s, _, _ in entries] == [d.seq for d in decisions]
    want_rules, want_accounts = set(), set()
    for (seq, env, raw), sub in zip(entries, subs, strict=True):
        b = env["record"]
        assert b["principal"] == sub.principal
        fired = [h["id"] for h in b["fired"]]
        fail_safe = None if b["fail_safe"] is None else b["fail_safe"].split(":")[0]
        assert rows[seq] == (seq, env["trace_id"], env["recorded_at"], b["at"], b["decision"], body_score(b),
                             fail_safe, ",".join(fired), b["principal"]["fingerprint_sha256"],
                             b["principal"]["subject"], "aml_core", b["rules"]["version"],
                             b["rules"]["module_sha256"], b["account_risk"]["max_milli"],
                             sum({"originator": 1, "beneficiary": 2}[x] for x in b["account_risk"]["alerts"]))
        want_rules |= {(r, seq) for r in fired}
        assert raw is not None
        tx = transaction_of(b, raw)
        want_accounts |= {(account_key(p.account), seq) for p in (tx.originator, tx.beneficiary) if p.account}
        assert tx.originator.account is not None and tx.originator.account not in str(got)  # never in clear
    assert rules == want_rules and want_rules
    assert accounts == want_accounts


def test_account_key_normalises_ibans_and_plain_accounts() -> None:
    assert account_key("DE89 3704 0044 0532 0130 00") == account_key("de89370400440532013000")
    assert account_key(" 12 345-x ") == account_key("12345-X")
    assert account_key("12345") != account_key("12346")
    # domain-separated: not the bare SHA-256 of the account
    assert account_key("12345") != hashlib.sha256(b"12345").hexdigest()
    assert len(account_key("12345")) == 64


class FailingAfterWrite(TraceIndex):
    """Writes the batch's rows, then fails: the sealing commit must take them back with it."""

    def write(self, conn, subs, inputs, receipts) -> None:  # type: ignore[no-untyped-def]
        super().write(conn, subs, inputs, receipts)
        raise exc.OperationalError("INSERT", {}, Exception("disk full"))


def test_a_failed_commit_leaves_no_index_rows(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                              pack_wasm: bytes) -> None:
    ledger = make_ledger(db, signer)
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = mixed_submissions(60)
    pipe.decide(subs[:20])
    before = dump(ledger.engine)
    size = ledger.size()
    pipe.index = FailingAfterWrite()
    with pytest.raises(LedgerUnavailableError):
        pipe.decide(subs[20:])
    assert ledger.size() == size
    assert dump(ledger.engine) == before
    # a stray row where the next decision goes no longer fails the commit (the ledger entry is the
    # truth; tests/audit/test_hostile_index.py): the decisions are sealed and indexed around it
    with ledger.engine.begin() as conn:
        store.insert_rows(conn, traces, [c.name for c in traces.columns],
                          [(size + 5, "00000000-0000-7000-8000-000000000000", "x", "x", "ALLOW", None, None,
                            "", "", "", "", "", "", None, None)])
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    # and the batch's summary and state delta
    assert len(pipe.decide(subs[20:60])) == 40 and ledger.size() == size + 40 + 2
    assert isinstance(pipe.index, TraceIndex) and pipe.index.conflicts == 1


def test_the_index_tables_refuse_update_and_delete(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                   pack_wasm: bytes) -> None:
    ledger = make_ledger(db, signer)
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(10))
    for sql in ("UPDATE audit_traces SET decision = 'ALLOW'", "DELETE FROM audit_traces",
                "UPDATE audit_trace_accounts SET account_key = 'x'", "DELETE FROM audit_trace_accounts",
                "DELETE FROM audit_trace_rules", "DELETE FROM audit_annotations WHERE 1 = 1"):
        with pytest.raises(exc.DBAPIError, match="refused"), ledger.engine.begin() as conn:
            conn.exec_driver_sql(sql)
            if "annotations" in sql:  # empty table: a row trigger never fires, so give it one
                conn.exec_driver_sql("INSERT INTO audit_annotations (target_seq, seq) VALUES (1, 99)")
                conn.exec_driver_sql(sql)
    if db.dialect == "postgresql":
        with pytest.raises(exc.DBAPIError, match="refused"), ledger.engine.begin() as conn:
            conn.exec_driver_sql("TRUNCATE audit_traces")


def test_catch_up_rebuilds_what_live_writes_wrote(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                  pack_wasm: bytes) -> None:
    from audit.annotations import annotate

    ledger = make_ledger(db, signer)
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    decisions = pipe.decide(mixed_submissions(150))
    annotate(ledger, decisions[3].trace_id, PRINCIPAL, "FALSE_POSITIVE", "customer's payroll run")
    live = dump(ledger.engine)
    nothing = catch_up(ledger.engine)  # everything was indexed live
    assert (nothing.decisions, nothing.annotations) == (0, 0) and dump(ledger.engine) == live
    # the documented rebuild: recreate the (append-only) index tables, then catch up
    _downgrade_to_0002(ledger.engine)
    migrations.upgrade(ledger.engine)
    assert all(not rows for rows in dump(ledger.engine).values())
    report = catch_up(ledger.engine)
    assert (report.decisions, report.annotations, report.missing_payload) == (len(decisions), 1, 0)
    assert dump(ledger.engine) == live
    again = catch_up(ledger.engine)  # idempotent
    assert (again.decisions, again.annotations) == (0, 0) and dump(ledger.engine) == live


def test_catch_up_fills_a_gap_and_skips_accounts_of_purged_payloads(
        db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> None:
    from ledger.retention import purge_payloads

    ledger = make_ledger(db, signer)
    subs = mixed_submissions(90)
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(subs[:30])
    unindexed = make_pipeline(ledger, sandbox, pack_wasm).decide(subs[30:60])  # no index configured
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(subs[60:])
    entries = {seq: env for seq, env, _ in decision_entries(ledger.engine)}
    purged = unindexed[0].seq
    purge_payloads(ledger, [entries[purged]["payload_sha256"]], reason="erasure order")
    with ledger.engine.connect() as conn:
        assert conn.execute(select(traces.c.seq).where(traces.c.seq == purged)).first() is None
    report = catch_up(ledger.engine)
    assert (report.decisions, report.annotations, report.missing_payload) == (30, 0, 1)
    got = dump(ledger.engine)
    assert sorted(r[0] for r in got["audit_traces"]) == sorted(entries)
    with ledger.engine.connect() as conn:
        seqs = {int(s) for (s,) in conn.execute(select(trace_accounts.c.seq))}
    assert purged not in seqs and {d.seq for d in unindexed[1:]} <= seqs


class ItemByItemIndex(TraceIndex):
    """A TraceIndex handed the inputs as a plain list (as a caller other than the pipeline would)."""

    def write(self, conn, subs, inputs, receipts) -> None:  # type: ignore[no-untyped-def]
        super().write(conn, subs, list(inputs), receipts)


def test_the_batch_columns_and_item_by_item_inputs_index_alike(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                               pack_wasm: bytes) -> None:
    from tests.audit.test_pipeline import BrokenModel

    ledger = make_ledger(db, signer)
    pipe = indexed_pipeline(ledger, sandbox, pack_wasm)
    subs = [replace(s, expired=i % 13 == 0) for i, s in enumerate(mixed_submissions(180))]
    pipe.decide(subs[:60])  # the pipeline's DecisionBatch, read column by column
    pipe.index = ItemByItemIndex()
    pipe.decide(subs[60:120])
    pipe.scorer = BrokenModel()  # no score, a fail-safe reason on every record
    pipe.decide(subs[120:150])
    pipe.index = TraceIndex()
    pipe.decide(subs[150:])
    live = dump(ledger.engine)
    assert {r[5] is None for r in live["audit_traces"]} == {True, False}
    assert {r[6] for r in live["audit_traces"]} >= {None, "DEADLINE_EXCEEDED", "MODEL_ERROR"}
    _downgrade_to_0002(ledger.engine)
    migrations.upgrade(ledger.engine)
    catch_up(ledger.engine)  # from the sealed records alone
    assert dump(ledger.engine) == live
