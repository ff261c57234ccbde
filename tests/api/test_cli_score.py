"""``sealtrail score``: offline scoring through the pipeline; what it prints is what it sealed."""

from __future__ import annotations

import getpass
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from audit.decide.fixed_point import body_score
from inference.messages import Transaction, parse_messages
from inference.simulate import SimConfig, simulate
from ledger import store
from tests.api.test_cli import Cli as LedgerCli
from tests.conftest import Db

runner = CliRunner()
VECTORS = Path(__file__).parents[1] / "vectors" / "messages"
FIN = VECTORS / "mt" / "mt103_50a_59a.fin"
RJE = VECTORS / "mt" / "rje_two.fin"
PACS = VECTORS / "pacs008" / "multiple_transactions.xml"

Entries = dict[int, tuple[dict[str, Any], bytes | None]]  # seq -> (envelope, payload)


class Cli(LedgerCli):
    """The ledger CLI helper plus what the scoring tests read back from the database."""

    def size(self) -> int:
        engine = self.db.engine()
        try:
            with engine.connect() as conn:
                return store.tail(conn)[0]
        finally:
            engine.dispose()

    def kinds(self, start: int, stop: int) -> list[str]:
        """The kinds of the entries sealed at seqs ``start`` .. ``stop - 1``, in seq order."""
        engine = self.db.engine()
        e = store.entries
        try:
            with engine.connect() as conn:
                rows = conn.execute(e.select().with_only_columns(e.c.kind)
                                    .where(e.c.seq >= start, e.c.seq < stop).order_by(e.c.seq)).all()
        finally:
            engine.dispose()
        return [str(k) for (k,) in rows]

    def entries(self) -> Entries:
        """seq -> (envelope, payload bytes) of every decision record."""
        engine = self.db.engine()
        e, p = store.entries, store.payloads
        try:
            with engine.connect() as conn:
                rows = conn.execute(e.select().where(e.c.kind == "decision")).all()
                data = dict(conn.execute(p.select().with_only_columns(p.c.sha256, p.c.data)).all())
        finally:
            engine.dispose()
        out = {}
        for r in rows:
            env = orjson.loads(r.record)
            out[int(r.seq)] = (env, data.get(env.get("payload_sha256")))
        return out


@pytest.fixture
def cli(db: Db, tmp_path: Path) -> Cli:
    c = Cli(db, tmp_path / "keys")
    c("init")
    return c


def sim_array(n: int, seed: int = 3) -> list[dict[str, Any]]:
    """``n`` simulated payments (typologies included) as JSON message objects."""
    sims = simulate(SimConfig(seed=seed, n_normal=n, n_accounts=120, days=3))[:n]
    return [orjson.loads(s.transaction.canonical_bytes()) for s in sims]


def assert_sealed_as_printed(cli: Cli, rows: list[dict[str, Any]]) -> Entries:
    entries = cli.entries()
    for r in rows:
        env, _ = entries[r["seq"]]
        body = env["record"]
        assert env["trace_id"] == r["trace_id"]
        assert body["decision"] == r["decision"] and body_score(body) == r["score"]
        assert [h["id"] for h in body["fired"]] == r["fired"]
        assert body["input"]["reference"] == r["reference"]
        assert body["principal"]["fingerprint_sha256"] == ""  # offline: no certificate stood behind it
        assert body["principal"]["subject"] == f"CN=local:{getpass.getuser()}"
    return entries


@pytest.mark.requirement("BSA-1010.410-records", "EU-TFR-26-retention")
def test_a_fin_file_is_decided_and_sealed_as_the_local_operator(cli: Cli) -> None:
    doc = cli.json("score", str(FIN))
    (tx,) = parse_messages(FIN.read_bytes())
    assert isinstance(tx, Transaction)
    assert doc["ok"] is True and doc["count"] == 1 and doc["files"] == 1
    (row,) = doc["decisions"]
    assert row["file"] == str(FIN) and row["index"] == 0 and row["reference"] == tx.reference == "FR-INTRA-44"
    assert row["decision"] in ("ALLOW", "REVIEW", "HOLD", "BLOCK") and 0 <= row["score"] <= 1
    entries = assert_sealed_as_printed(cli, doc["decisions"])
    env, payload = entries[row["seq"]]
    assert payload == FIN.read_bytes()  # the message exactly as it was in the file
    assert env["record"]["input"]["transaction_sha256"] == tx.sha256
    assert doc["ledger_size"] == cli.size() and doc["principal"]["sans"] == ["local:cli"]
    assert sum(doc["outcomes"].values()) == 1
    human = cli("score", str(FIN)).stdout
    assert "FR-INTRA-44" in human and "1 decided from 1 file(s)" in human


def test_a_json_array_gives_each_element_its_own_submission_and_payload(cli: Cli, tmp_path: Path) -> None:
    items = sim_array(40)
    f = tmp_path / "batch.json"
    f.write_bytes(orjson.dumps(items, option=orjson.OPT_INDENT_2))
    doc = cli.json("score", str(f), "--priority", "P2")
    assert doc["count"] == 40 and [r["index"] for r in doc["decisions"]] == list(range(40))
    assert [r["reference"] for r in doc["decisions"]] == [it["reference"] for it in items]
    seqs = [r["seq"] for r in doc["decisions"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 40
    entries = assert_sealed_as_printed(cli, doc["decisions"])
    for r, item in zip(doc["decisions"], items, strict=True):
        env, payload = entries[r["seq"]]
        assert payload == orjson.dumps(item)  # its own compact JSON, not the whole file
        assert env["payload_sha256"] == hashlib.sha256(payload).hexdigest()
        assert r["explanation"] == env["record"]["explanation"]  # the reason codes, as sealed
    assert sum(doc["outcomes"].values()) == 40


def test_several_files_and_formats_in_one_run(cli: Cli, tmp_path: Path) -> None:
    single = tmp_path / "one.json"
    single.write_bytes(orjson.dumps(sim_array(1)[0]))
    doc = cli.json("score", str(RJE), str(PACS), str(single))
    per_file = [(r["file"], r["index"]) for r in doc["decisions"]]
    n_rje, n_pacs = len(parse_messages(RJE.read_bytes())), len(parse_messages(PACS.read_bytes()))
    assert n_rje == 2 and n_pacs >= 2
    assert per_file == ([(str(RJE), i) for i in range(n_rje)] + [(str(PACS), i) for i in range(n_pacs)]
                        + [(str(single), 0)])
    assert_sealed_as_printed(cli, doc["decisions"])
    entries = cli.entries()
    assert entries[doc["decisions"][-1]["seq"]][1] == single.read_bytes()


def test_a_refused_message_refuses_the_run_and_decides_nothing(cli: Cli, tmp_path: Path) -> None:
    items = sim_array(3)
    items[1]["currency"] = "EURO"
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps(items))
    before = cli.size()
    doc = cli.json("score", str(FIN), str(bad), code=1)  # the good file before it is not decided either
    assert doc["ok"] is False and doc["error"] == "message_refused" and doc["file"] == str(bad)
    assert doc["errors"][0]["field"].startswith("[1]") and "currency" in doc["errors"][0]["field"]
    res = cli("score", str(bad), code=1)
    assert str(bad) in res.stderr and "[1]" in res.stderr and "nothing was decided" in res.stderr
    # nothing decided, not even the runtime's start-up records: one sealed refusal (and the summary
    # that speaks for it) per refused run
    assert cli.size() == before + 4 and "sealed as trace" in res.stderr
    assert doc["trace_id"] != cli.json("traces", "refusals")["items"][0]["trace_id"]
    fin = tmp_path / "bad.fin"
    fin.write_bytes(FIN.read_bytes().replace(b":32A:261130CHF100000,00", b":32A:261130CHF1OO,00"))
    doc = cli.json("score", str(fin), code=1)
    assert doc["errors"][0]["field"].startswith("[0].:32A:")
    garbage = tmp_path / "noise.txt"
    garbage.write_bytes(b"hello")
    undetected = cli.json("score", str(garbage), code=1)
    assert undetected["errors"] == [
        {"field": "format", "message": "neither SWIFT FIN ('{1:'), ISO 20022 XML ('<') nor JSON"}]
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"  \n")
    emptied = cli.json("score", str(empty), code=1)
    assert emptied["errors"][0]["field"] == "file"
    # every refused run is sealed: the three refusals parse_submissions made, the file whose format
    # cannot be detected and the empty one, each with its summary; no decision
    assert cli.size() == before + 10
    refusals = cli.json("traces", "refusals")["items"]
    assert [r["format"] for r in refusals] == ["auto", "auto", "mt", "json", "json"]
    assert [r["kind"] for r in refusals[:2]] == ["empty_body", "format_undetected"]
    assert [r["trace_id"] for r in refusals[:2]] == [emptied["trace_id"], undetected["trace_id"]]
    assert refusals[0]["payload"] == {"sha256": hashlib.sha256(b"  \n").hexdigest(), "bytes": 3, "kept": True,
                                      "withheld": None}
    assert refusals[1]["payload"]["sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert cli.json("ledger", "verify")["derived"]["refusals"] == 5  # each spoken for by its summary


def test_usage_and_configuration_errors_exit_2(db: Db, tmp_path: Path) -> None:
    missing = Cli(Db(f"sqlite:///{tmp_path / 'none.db'}", "sqlite"), tmp_path / "keys")
    doc = missing.json("score", str(FIN), code=2)
    assert doc["error"] == "SchemaError" and "sealtrail init" in doc["message"]
    assert not (tmp_path / "none.db").exists()
    cli = Cli(db, tmp_path / "k")
    cli("init")
    other = Cli(db, tmp_path / "no-keys")
    assert "signing.key" in other.json("score", str(FIN), code=2)["message"]
    cli("score", str(FIN), "--format", "csv", code=2)
    cli("score", str(FIN), "--priority", "P9", code=2)
    cli("score", str(tmp_path / "absent.fin"), code=2)
    assert cli.size() == 1


# --------------------------------------------------------------------------- a later batch fails


class _RefuseAfter:
    """The ledger database refuses every batch of entries after the first ``n`` (as a full disk
    or a dropped connection would): the sequencer's commit fails and writes nothing."""

    def __init__(self, engine: Any, n: int) -> None:
        self.n, self.seen = n, 0
        event.listen(engine, "before_cursor_execute", self._check)

    def _check(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO LEDGER_ENTRIES"):
            self.seen += 1
            if self.seen > self.n:
                raise OperationalError(statement[:40], None, Exception("injected: the disk is full"))


@pytest.fixture
def fail_after(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``fail_after(n)``: the next ``score`` run seals ``n`` batches, then its ledger refuses."""
    from audit.decide.runtime import Runtime

    original = Runtime.open.__func__  # type: ignore[attr-defined]

    def arm(n: int) -> None:
        def opened(cls: Any, s: Any, *, operator: str = "sealtrail-serve") -> Any:
            rt = original(cls, s, operator=operator)
            _RefuseAfter(rt.engine, n)  # after start-up: only the decision batches are counted
            return rt

        monkeypatch.setattr(Runtime, "open", classmethod(opened))

    return arm


def test_a_later_batch_failing_still_lists_every_decision_sealed_before_it(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_after: Callable[[int], None]) -> None:
    monkeypatch.setenv("SEALTRAIL_MAX_BATCH", "16")
    items = sim_array(40)
    f = tmp_path / "batch.json"
    f.write_bytes(orjson.dumps(items))
    fail_after(1)
    doc = cli.json("score", str(f), code=2)  # the ledger cannot commit: exit 2, as anywhere else
    assert doc["ok"] is False and doc["error"] == "LedgerUnavailableError"
    assert "injected: the disk is full" in doc["message"]
    rows = doc["decisions"]
    assert [(r["file"], r["index"]) for r in rows] == [(str(f), i) for i in range(16)]  # the first batch
    assert [r["reference"] for r in rows] == [it["reference"] for it in items[:16]]
    sealed = cli.entries()
    assert sorted(sealed) == [r["seq"] for r in rows]  # exactly these were sealed, each with its seq
    assert_sealed_as_printed(cli, rows)  # ... trace id, decision, score and fired rules
    assert doc["count"] == 16 and doc["last_seq"] == rows[-1]["seq"]
    # ... and after the last of them only that batch's summary and state delta, sealed in its commit
    assert cli.kinds(doc["last_seq"] + 1, cli.size()) == ["decision.summary", "state.delta"]
    assert doc["resume_at"] == {"file": str(f), "index": 16} and doc["undecided"] == 24
    assert doc["in_doubt"] is False  # the ledger refused the commit: nothing of that batch exists
    assert sum(doc["outcomes"].values()) == 16

    fail_after(1)  # re-run: the 16 sealed come back already decided, the next batch is sealed, then the error
    res = cli("score", str(f), code=2)
    again = {seq: env for seq, (env, _) in cli.entries().items() if seq not in sealed}
    assert len(again) == 16  # messages 16..31: none of the first 16 was decided twice
    for seq, env in again.items():
        assert env["trace_id"] in res.stdout and str(seq) in res.stdout
    last = max(again)
    assert res.stderr.startswith("error: ") and "injected: the disk is full" in res.stderr
    assert f"32 decision(s) were sealed before the failure, the last at seq {last}" in res.stderr
    assert "16 of them were already decided before this run" in res.stderr
    assert f"8 message(s) from {f} [32] on have no decision" in res.stderr
    assert res.output.index(again[last]["trace_id"]) < res.output.index("error: ")


def test_an_unforeseen_failure_after_a_sealed_batch_lists_it_and_flags_the_batch_in_doubt(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from audit.decide.runtime import Runtime

    monkeypatch.setenv("SEALTRAIL_MAX_BATCH", "8")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    original = Runtime.open.__func__  # type: ignore[attr-defined]

    def opened(cls: Any, s: Any, *, operator: str = "sealtrail-serve") -> Any:
        rt = original(cls, s, operator=operator)
        real, calls = rt.service.decide, []

        def decide(*args: Any, **kw: Any) -> Any:
            calls.append(1)
            if len(calls) == 2:
                raise ZeroDivisionError("a bug")
            return real(*args, **kw)

        rt.service.decide = decide
        return rt

    monkeypatch.setattr(Runtime, "open", classmethod(opened))
    f = tmp_path / "batch.json"
    f.write_bytes(orjson.dumps(sim_array(20)))
    doc = cli.json("score", str(f), code=2)
    assert doc["error"] == "internal" and doc["exception"] == "ZeroDivisionError"
    assert Path(doc["traceback_file"]).parent == tmp_path and doc["incident"] in doc["message"]
    assert [r["index"] for r in doc["decisions"]] == list(range(8))
    assert_sealed_as_printed(cli, doc["decisions"])
    assert doc["in_doubt"] is True and doc["resume_at"] == {"file": str(f), "index": 8}
    assert doc["undecided"] == 12
