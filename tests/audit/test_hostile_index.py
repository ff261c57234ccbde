"""The trace index under attack. A forger with owner access drops the index's append-only
triggers, deletes and rewrites rows: ``ledger verify`` (the CLI, and ``api.ops.verify`` behind
the HTTP and console paths) fails naming the table, the seq and what differed, and export
creation refuses naming the seq, writing nothing. The least-privilege role forges a row where
the writer's next row goes: decisions are still sealed and indexed around it, and verify names it.
Both dialects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Connection, Engine
from typer.testing import CliRunner

import migrations
from audit.annotations import annotate
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.types import Submission
from audit.errors import DerivedRowError
from audit.export.create import create_bundle
from audit.export.select import ExportFilters
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TABLES, TraceIndex, account_key, traces
from audit.query.traces import TraceFilter, query_traces
from audit.query.verify import verify_index
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner, store
from ledger.append import CheckpointPolicy, Ledger
from tests.audit.test_pipeline import PRINCIPAL
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions, transaction_of
from tests.conftest import ORIGIN, Db
from wasm_rules import Sandbox

OFFICER = Principal.local("officer")
ALL = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
runner = CliRunner()


class Clock:
    """A ledger clock that moves ``step`` per commit (and can be set back)."""

    def __init__(self, start: datetime, step: timedelta) -> None:
        self.now, self.step = start, step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@dataclass
class World:
    ledger: Ledger
    signer: NoteSigner
    pipe: Any
    subs: list[Submission]


def build(db: Db, signer: NoteSigner, sandbox: Sandbox, wasm: bytes, n: int = 103, batch: int = 20,
          clock: Callable[[], datetime] | None = None) -> World:
    engine = db.engine()
    migrations.upgrade(engine)
    extra = {} if clock is None else {"clock": clock}
    ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600), **extra)
    operator = Principal.local("operator")  # what a bundle needs: governance records, the model registered
    gov = Governance(ledger)
    gov.bootstrap_default(principal=operator)
    files = ModelFiles.open()
    register_model(ledger, files, operator, backends=["numpy"])
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sandbox),
                    index=TraceIndex())
    subs = mixed_submissions(n + 5, seed=23)
    for i in range(0, n, batch):
        pipe.decide(subs[i:min(i + batch, n)])
    return World(ledger, signer, pipe, subs[n:n + 5])


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> Iterator[World]:
    w = build(db, signer, sandbox, pack_wasm)
    yield w
    w.ledger.engine.dispose()


def drop_index_guards(engine: Engine) -> None:
    """What an attacker with owner access does first: drop the index tables' triggers."""
    names = [t.name for t in TABLES]
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            marks = ", ".join(f"'{n}'" for n in names)
            for (trg,) in conn.exec_driver_sql(
                    f"SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({marks})").all():
                conn.exec_driver_sql(f"DROP TRIGGER {trg}")
        else:
            marks = ", ".join(f"'{n}'" for n in names)
            for trg, table in conn.exec_driver_sql(
                    "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                    f"WHERE NOT t.tgisinternal AND c.relname IN ({marks}) "
                    "AND c.relnamespace = current_schema()::regnamespace").all():
                conn.exec_driver_sql(f"DROP TRIGGER {trg} ON {table}")
        conn.commit()


def sql(engine: Engine, text: str, *args: Any) -> list[Any]:
    with engine.connect() as conn:
        p = store.param(conn)
        res = conn.exec_driver_sql(text.replace("?", p), args or None)
        rows = res.all() if res.returns_rows else []
        conn.commit()
    return rows


def decisions(engine: Engine) -> dict[int, dict[str, Any]]:
    return {int(s): orjson.loads(bytes(r)) for s, r in sql(
        engine, "SELECT seq, record FROM ledger_entries WHERE kind = 'decision' ORDER BY seq")}


@dataclass
class Damage:
    rewritten: list[int]  # traces rows set to ALLOW (were HOLD or REVIEW or BLOCK)
    no_trace: list[int]  # traces row deleted
    no_rules: list[int]  # rule rows deleted
    no_accounts: list[int]  # account rows deleted

    def expected(self) -> set[tuple[str, int]]:
        return ({("audit_traces", s) for s in self.rewritten + self.no_trace}
                | {("audit_trace_rules", s) for s in self.no_rules}
                | {("audit_trace_accounts", s) for s in self.no_accounts})


def tamper(engine: Engine) -> Damage:
    """Ten rows deleted from the three decision tables, five rewritten to ALLOW."""
    drop_index_guards(engine)
    d = decisions(engine)
    flagged = [s for s, env in d.items() if env["record"]["decision"] != "ALLOW"]
    fired = [s for s, env in d.items() if env["record"]["fired"] and s not in flagged[:5]]
    plain = [s for s in d if s not in flagged[:5] and s not in fired[:3]]
    assert len(flagged) >= 5 and len(fired) >= 3
    damage = Damage(flagged[:5], plain[:4], fired[:3], plain[4:7])
    for s in damage.rewritten:
        sql(engine, "UPDATE audit_traces SET decision = 'ALLOW' WHERE seq = ?", s)
    for s in damage.no_trace:
        sql(engine, "DELETE FROM audit_traces WHERE seq = ?", s)
    for s in damage.no_rules:
        sql(engine, "DELETE FROM audit_trace_rules WHERE seq = ?", s)
    for s in damage.no_accounts:
        sql(engine, "DELETE FROM audit_trace_accounts WHERE seq = ?", s)
    return damage


def export(w: World, path: Path, start: str = ALL[0], end: str = ALL[1], **filters: Any) -> Any:
    return create_bundle(w.ledger.engine, w.ledger, w.signer, path, ExportFilters.of(start, end, **filters),
                         OFFICER, page_size=16)


def export_records(engine: Engine) -> int:
    return int(sql(engine, "SELECT count(*) FROM ledger_entries WHERE kind = 'export.created'")[0][0])


# -- deleted and rewritten rows: verify -------------------------------------------------------


def test_an_intact_index_verifies_and_says_what_it_checked(world: World) -> None:
    annotate(world.ledger, decisions(world.ledger.engine)[min(decisions(world.ledger.engine))]["trace_id"],
             OFFICER, "NOTE", "seen")
    report = verify_index(world.ledger.engine, page=16)
    assert (report.decisions, report.annotations, report.accounts_unverifiable) == (103, 1, 0)
    assert report.rows["audit_traces"] == 103 and report.rows["audit_annotations"] == 1
    assert report.rows["audit_trace_rules"] > 0 and report.rows["audit_trace_accounts"] >= 103


@pytest.mark.requirement("SEC-17a4f-verify")
def test_verify_names_every_deleted_and_rewritten_row(world: World) -> None:
    damage = tamper(world.ledger.engine)
    with pytest.raises(DerivedRowError) as caught:
        verify_index(world.ledger.engine, page=16)
    err = caught.value
    assert {(t, s) for t, s, _ in err.findings} == damage.expected()
    assert err.total == 15 and err.seq == min(s for _, s in damage.expected())
    details = {(t, s): d for t, s, d in err.findings}
    rewritten = damage.rewritten[0]
    sealed = decisions(world.ledger.engine)[rewritten]["record"]["decision"]
    assert details[("audit_traces", rewritten)] == (f"decision is 'ALLOW' in the index, {sealed!r} in the "
                                                    "record")
    assert "deleted" in details[("audit_traces", damage.no_trace[0])]
    assert "not indexed" in details[("audit_trace_rules", damage.no_rules[0])]
    assert "not indexed" in details[("audit_trace_accounts", damage.no_accounts[0])]


def test_verify_names_forged_rows_where_no_record_is(world: World) -> None:
    engine = world.ledger.engine
    size = world.ledger.size()
    genesis = sql(engine, "SELECT trace_id FROM ledger_entries WHERE seq = 0")[0][0]
    # no trigger refuses INSERT: the least-privilege role could do all of this
    sql(engine, "INSERT INTO audit_traces VALUES (?, ?, 'x', 'x', 'HOLD', NULL, NULL, '', '', '', '', '', "
                "'', NULL, NULL)",
        size + 50, genesis)
    sql(engine, "INSERT INTO audit_trace_rules VALUES ('VELOCITY_BURST', ?)", 0)
    sql(engine, "INSERT INTO audit_trace_accounts VALUES (?, ?)", account_key("DE89370400440532013000"),
        size + 7)
    sql(engine, "INSERT INTO audit_annotations VALUES (?, ?)", min(decisions(engine)), size + 9)
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    assert {(t, s) for t, s, _ in caught.value.findings} == {
        ("audit_traces", size + 50), ("audit_trace_rules", 0), ("audit_trace_accounts", size + 7),
        ("audit_annotations", size + 9)}
    assert all("forged?" in d for _, _, d in caught.value.findings)


def test_verify_names_a_deleted_or_retargeted_annotation_row(world: World) -> None:
    engine = world.ledger.engine
    seqs = sorted(decisions(engine))
    first = annotate(world.ledger, decisions(engine)[seqs[0]]["trace_id"], OFFICER, "NOTE", "one")
    second = annotate(world.ledger, decisions(engine)[seqs[1]]["trace_id"], OFFICER, "NOTE", "two")
    drop_index_guards(engine)
    sql(engine, "DELETE FROM audit_annotations WHERE seq = ?", first.seq)
    sql(engine, "UPDATE audit_annotations SET target_seq = ? WHERE seq = ?", seqs[5], second.seq)
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    got = {(t, s): d for t, s, d in caught.value.findings}
    assert set(got) == {("audit_annotations", first.seq), ("audit_annotations", second.seq)}
    assert got[("audit_annotations", second.seq)] == (f"the record refers to seq {seqs[1]}; the index says "
                                                       f"[{seqs[5]}]")


def test_ledger_verify_cli_exits_1_naming_table_and_seq(db: Db, tmp_path: Path, sandbox: Sandbox,
                                                          pack_wasm: bytes) -> None:
    from api import ops
    from api.cli import app
    from api.config import Settings

    keys = tmp_path / "keys"
    args = ["--db", db.url, "--keys", str(keys)]
    assert runner.invoke(app, ["init", *args]).exit_code == 0
    ledger = ops.open_ledger(Settings.model_validate({"db": db.url, "keys": keys}))
    try:
        indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(103, seed=23)[:103])
        ok = runner.invoke(app, ["ledger", "verify", "--json", *args])
        assert ok.exit_code == 0, ok.output
        doc = json.loads(ok.stdout)
        assert doc["verified"] and doc["derived"]["decisions"] == 103
        assert doc["derived"]["rows"]["audit_traces"] == 103
        damage = tamper(ledger.engine)
    finally:
        ledger.engine.dispose()
    res = runner.invoke(app, ["ledger", "verify", "--json", *args])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    first = min(s for _, s in damage.expected())
    assert doc["ok"] is False and doc["error"] == "derived row mismatch" and doc["seq"] == first
    assert {(f["table"], f["seq"]) for f in doc["findings"]} == damage.expected() and doc["total"] == 15
    human = runner.invoke(app, ["ledger", "verify", *args])
    assert human.exit_code == 1 and f"seq {first}" in human.output and "audit_trace" in human.output
    # the HTTP and console path (POST /v1/ledger/verify, "verify now") reads the same verdict
    answer = ops.verify_now(Settings.model_validate({"db": db.url, "keys": keys}))
    assert answer["verified"] is False and answer["seq"] == first and answer["table"] in (
        "audit_traces", "audit_trace_rules", "audit_trace_accounts")
    assert len(answer["findings"]) == 15


# -- deleted and rewritten rows: export --------------------------------------------------------


def _nothing_written(w: World, out: Path, before: int) -> None:
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # no temporary left
    assert export_records(w.ledger.engine) == before


def test_export_refuses_a_tampered_window_naming_the_seq(world: World, tmp_path: Path) -> None:
    engine = world.ledger.engine
    outcomes = [e["record"]["decision"] for e in decisions(engine).values()]
    flagged = next(o for o in outcomes if o != "ALLOW")  # a decision filter that selects some records
    intact = export(world, tmp_path / "intact.zip", decision=flagged)
    damage = tamper(engine)
    before = export_records(engine)
    first_trace = min(damage.rewritten + damage.no_trace)
    for i, filters in enumerate([{}, {"decision": flagged}]):
        out = tmp_path / "out" / f"{i}.zip"
        out.parent.mkdir(exist_ok=True)
        with pytest.raises(DerivedRowError) as caught:
            export(world, out, **filters)
        assert caught.value.seq == first_trace and caught.value.table == "audit_traces"
        assert f"seq {first_trace}" in str(caught.value)
        _nothing_written(world, out, before)
    assert intact.counts["decisions"] > 0


def test_export_with_a_rule_or_account_filter_checks_those_rows(world: World, tmp_path: Path) -> None:
    engine = world.ledger.engine
    d = decisions(engine)
    seq, env = next((s, e) for s, e in d.items() if e["record"]["fired"])
    rule = env["record"]["fired"][0]["id"]
    raw = sql(engine, "SELECT data FROM ledger_payloads WHERE sha256 = ?", env["payload_sha256"])[0][0]
    account = transaction_of(env["record"], bytes(raw)).originator.account
    assert account is not None
    by_rule = export(world, tmp_path / "rule.zip", rule=rule).counts["decisions"]
    by_account = export(world, tmp_path / "account.zip", account=account).counts["decisions"]
    assert by_rule >= 1 and by_account >= 1
    drop_index_guards(engine)
    sql(engine, "DELETE FROM audit_trace_rules WHERE seq = ? AND rule_id = ?", seq, rule)
    sql(engine, "DELETE FROM audit_trace_accounts WHERE seq = ? AND account_key = ?", seq,
        account_key(account))
    before = export_records(engine)
    cases = (("audit_trace_rules", {"rule": rule}), ("audit_trace_accounts", {"account": account}))
    for name, filters in cases:
        out = tmp_path / "out" / f"{name}.zip"
        out.parent.mkdir(exist_ok=True)
        with pytest.raises(DerivedRowError) as caught:
            export(world, out, **filters)
        assert (caught.value.table, caught.value.seq) == (name, seq)
        _nothing_written(world, out, before)
    # a forged account row (an account linked to a decision it is not in) is refused too
    other = next(s for s in d if s != seq)
    sql(engine, "INSERT INTO audit_trace_accounts VALUES (?, ?)", account_key("ZZ-NOT-A-PARTY"), other)
    with pytest.raises(DerivedRowError) as caught:
        export(world, tmp_path / "out" / "forged.zip", account="ZZ-NOT-A-PARTY")
    assert (caught.value.table, caught.value.seq) == ("audit_trace_accounts", other)


def test_export_refuses_a_deleted_annotation_row(world: World, tmp_path: Path) -> None:
    engine = world.ledger.engine
    seqs = sorted(decisions(engine))
    note = annotate(world.ledger, decisions(engine)[seqs[2]]["trace_id"], OFFICER, "NOTE", "one")
    drop_index_guards(engine)
    sql(engine, "DELETE FROM audit_annotations WHERE seq = ?", note.seq)
    with pytest.raises(DerivedRowError) as caught:
        export(world, tmp_path / "a.zip")
    assert (caught.value.table, caught.value.seq) == ("audit_annotations", note.seq)
    assert not (tmp_path / "a.zip").exists()


def _window_world(db: Db, signer: NoteSigner, sandbox: Sandbox, wasm: bytes) -> tuple[World, Clock]:
    clock = Clock(datetime(2026, 11, 2, 9, 0, tzinfo=UTC), timedelta(seconds=30))
    return build(db, signer, sandbox, wasm, n=100, batch=10, clock=clock), clock


def test_an_edge_row_deleted_or_moved_out_of_the_window_is_caught(db: Db, signer: NoteSigner,
                                                                 sandbox: Sandbox,
                                                                 pack_wasm: bytes, tmp_path: Path) -> None:
    w, _ = _window_world(db, signer, sandbox, pack_wasm)
    try:
        engine = w.ledger.engine
        d = decisions(engine)
        times = sorted({env["recorded_at"] for env in d.values()})
        start, end = times[3], times[6]  # batches 4, 5 and 6: 30 decisions
        inside = [s for s, env in d.items() if start <= env["recorded_at"] < end]
        assert len(inside) == 30
        summary = export(w, tmp_path / "ok.zip", start, end)
        assert summary.counts["decisions"] == 30
        drop_index_guards(engine)
        # the first decision's row deleted, the last one's moved a day later: both leave the
        # index's view of the window, and the window's bounds with them
        sql(engine, "DELETE FROM audit_traces WHERE seq = ?", inside[0])
        sql(engine, "UPDATE audit_traces SET recorded_at = '2026-11-03T09:00:00.000000Z' WHERE seq = ?",
            inside[-1])
        with pytest.raises(DerivedRowError) as caught:
            export(w, tmp_path / "bad.zip", start, end)
        assert caught.value.seq == inside[0]
        with pytest.raises(DerivedRowError) as caught:
            export(w, tmp_path / "bad2.zip", times[4], end)  # the deleted row now lies outside, the moved not
        assert caught.value.seq == inside[-1]
        assert "recorded_at is '2026-11-03T09:00:00.000000Z' in the index" in str(caught.value)
    finally:
        w.ledger.engine.dispose()


def test_a_window_selects_by_the_sealed_time_though_it_goes_back(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                                  pack_wasm: bytes, tmp_path: Path) -> None:
    """recorded_at is stamped before the sequencer lock: a later seq may carry an earlier time.
    The window still selects exactly the decisions recorded in it, as a trace search does."""
    w, clock = _window_world(db, signer, sandbox, pack_wasm)
    try:
        clock.now -= timedelta(seconds=31)  # the next commit is stamped a second before the last one
        w.pipe.decide(w.subs[:5])
        engine = w.ledger.engine
        d = decisions(engine)
        times = sorted({env["recorded_at"] for env in d.values()})
        start, end = times[-3], times[-1]
        want = sorted(s for s, env in d.items() if start <= env["recorded_at"] < end)
        page = query_traces(engine, TraceFilter(since=start, until=end, limit=1000))
        assert sorted(t.seq for t in page.items) == want
        summary = export(w, tmp_path / "w.zip", start, end)
        assert summary.counts["decisions"] == len(want)
    finally:
        w.ledger.engine.dispose()


# -- a forged row in the writer's way ----------------------------------------------------------


def test_a_forged_row_at_a_future_seq_stops_no_decision(world: World,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    engine = world.ledger.engine
    size = world.ledger.size()
    forged_at = size + 3
    existing = sql(engine, "SELECT trace_id FROM ledger_entries WHERE seq = 0")[0][0]  # the genesis entry's
    sql(engine, "INSERT INTO audit_traces VALUES (?, ?, '2026-01-01T00:00:00.000000Z', 'x', 'ALLOW', NULL, "
                "NULL, '', '', '', '', '', '', NULL, NULL)", forged_at, existing)
    index = world.pipe.index
    assert isinstance(index, TraceIndex) and index.conflicts == 0
    with caplog.at_level(logging.ERROR, logger="audit.query.index"):
        got = [world.pipe.decide([s])[0] for s in world.subs]  # five payments, one commit each
    # every one decided and sealed, each commit its decision, its summary, then its state delta
    assert [g.seq for g in got] == list(range(size, size + 15, 3))
    assert forged_at in {g.seq for g in got}  # the forged row stood where a decision was sealed
    assert set(decisions(engine)) >= {g.seq for g in got}
    assert index.conflicts == 1
    assert any(f"sealed at seq {forged_at}" in r.getMessage() and "derived row conflict" in r.getMessage()
               for r in caplog.records)
    # the other four are indexed; the forged seq keeps its accounts and rules rows
    rows = {int(s): t for s, t in sql(engine, "SELECT seq, trace_id FROM audit_traces WHERE seq >= ?", size)}
    assert ({s: rows[s] for s in rows if s != forged_at}
            == {g.seq: g.trace_id for g in got if g.seq != forged_at})
    assert sql(engine, "SELECT count(*) FROM audit_trace_accounts WHERE seq = ?", forged_at)[0][0] >= 1
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    assert [(t, s) for t, s, _ in caught.value.findings] == [("audit_traces", forged_at)]
    assert f"trace_id is {existing!r} in the index" in caught.value.findings[0][2]


def test_a_forged_row_holding_the_next_trace_id_stops_no_decision(world: World) -> None:
    """The unique trace-id key taken instead of the seq: the decision is sealed all the same."""
    engine = world.ledger.engine
    size = world.ledger.size()
    seen: list[str] = []

    class Forger(TraceIndex):  # forges, inside the commit, a row at a far seq with this batch's trace id
        def write(self, conn: Connection, subs: Any, inputs: Any, receipts: Any) -> None:
            if not seen:
                seen.append(receipts[0].trace_id)
                conn.exec_driver_sql(
                    f"INSERT INTO audit_traces VALUES ({size + 1000}, '{receipts[0].trace_id}', 'x', 'x', "
                    "'ALLOW', NULL, NULL, '', '', '', '', '', '', NULL, NULL)")
            super().write(conn, subs, inputs, receipts)

    world.pipe.index = Forger()
    got = world.pipe.decide(world.subs[:2])
    assert [g.seq for g in got] == [size, size + 1] and world.pipe.index.conflicts == 1
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    assert {(t, s) for t, s, _ in caught.value.findings} == {("audit_traces", size),
                                                             ("audit_traces", size + 1000)}


def test_a_forged_annotation_row_stops_no_annotation(world: World, caplog: pytest.LogCaptureFixture) -> None:
    engine = world.ledger.engine
    seqs = sorted(decisions(engine))
    size = world.ledger.size()
    sql(engine, "INSERT INTO audit_annotations VALUES (?, ?)", seqs[7], size)  # the next annotation's place
    with caplog.at_level(logging.ERROR, logger="audit.query.index"):
        note = annotate(world.ledger, decisions(engine)[seqs[1]]["trace_id"], PRINCIPAL, "NOTE", "fine")
    assert note.seq == size
    assert any("derived row conflict" in r.getMessage() for r in caplog.records)
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    assert [(t, s) for t, s, _ in caught.value.findings] == [("audit_annotations", size)]


def test_a_rebuilt_index_verifies(world: World) -> None:
    """The documented repair after damage: recreate the index tables and catch up."""
    from audit.query.index import catch_up
    from tests.audit.test_trace_index import _downgrade_to_0002

    tamper(world.ledger.engine)
    with pytest.raises(DerivedRowError):
        verify_index(world.ledger.engine)
    _downgrade_to_0002(world.ledger.engine)
    migrations.upgrade(world.ledger.engine)
    catch_up(world.ledger.engine)
    assert verify_index(world.ledger.engine).decisions == 103
    with world.ledger.engine.connect() as conn:
        assert conn.execute(traces.select()).first() is not None


def test_export_create_cli_exits_1_naming_the_seq_and_writes_nothing(db: Db, tmp_path: Path, sandbox: Sandbox,
                                                                     pack_wasm: bytes) -> None:
    from api import ops
    from api.cli import app
    from api.config import Settings

    keys = tmp_path / "keys"
    args = ["--db", db.url, "--keys", str(keys)]
    assert runner.invoke(app, ["init", *args]).exit_code == 0
    settings = Settings.model_validate({"db": db.url, "keys": keys})
    ledger = ops.open_ledger(settings)
    try:
        operator = Principal.local("operator")
        gov = Governance(ledger)
        gov.bootstrap_default(principal=operator)
        files = ModelFiles.open()
        register_model(ledger, files, operator, backends=["numpy"])
        Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sandbox),
                 index=TraceIndex()).decide(mixed_submissions(103, seed=23)[:103])
        damage = tamper(ledger.engine)
    finally:
        ledger.engine.dispose()
    out = tmp_path / "exports" / "b.zip"
    res = runner.invoke(app, ["export", "create", "--from", ALL[0], "--to", ALL[1], "--out", str(out),
                              "--decision", "HOLD", "--json", *args])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    first = min(damage.rewritten + damage.no_trace)
    assert doc["ok"] is False and doc["error"] == "derived row mismatch" and doc["seq"] == first
    assert not out.exists() and (not out.parent.exists() or list(out.parent.iterdir()) == [])


def test_a_purged_payload_leaves_its_account_rows_counted_not_judged(world: World) -> None:
    """The documented limit: with the payload gone, nothing sealed names the accounts."""
    from ledger.retention import purge_payloads

    engine = world.ledger.engine
    seq, env = min(decisions(engine).items())
    purge_payloads(world.ledger, [env["payload_sha256"]], "erasure order 7")
    report = verify_index(engine)
    assert report.accounts_unverifiable == 1 and report.decisions == 103
    drop_index_guards(engine)
    sql(engine, "DELETE FROM audit_trace_accounts WHERE seq = ?", seq)
    assert verify_index(engine).accounts_unverifiable == 1  # not judged: no payload to recompute from
    sql(engine, "DELETE FROM audit_trace_accounts WHERE seq = ?", seq + 1)  # a neighbour with its payload
    with pytest.raises(DerivedRowError) as caught:
        verify_index(engine)
    assert [(t, s) for t, s, _ in caught.value.findings] == [("audit_trace_accounts", seq + 1)]


def test_worker_processes_find_what_one_process_finds(world: World) -> None:
    engine = world.ledger.engine
    assert verify_index(engine, page=16, workers=2).decisions == 103
    damage = tamper(engine)
    got = []
    for workers in (1, 2):
        with pytest.raises(DerivedRowError) as caught:
            verify_index(engine, page=16, workers=workers)
        got.append(caught.value.findings)
    assert got[0] == got[1] and {(t, s) for t, s, _ in got[1]} == damage.expected()
