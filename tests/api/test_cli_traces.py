"""``sealtrail traces query|show``: filters and pages against what ``score`` printed."""

from __future__ import annotations

import getpass
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from api import ops
from api.config import Settings
from audit.annotations import annotate
from audit.decide.principal import Principal
from tests.api.test_cli_score import Cli, sim_array
from tests.conftest import Db


@pytest.fixture
def scored(db: Db, tmp_path: Path) -> tuple[Cli, list[dict[str, Any]], list[dict[str, Any]]]:
    """A ledger holding 120 decisions of simulated payments: (cli, messages, printed rows)."""
    cli = Cli(db, tmp_path / "keys")
    cli("init")
    items = sim_array(120, seed=8)
    f = tmp_path / "batch.json"
    f.write_bytes(orjson.dumps(items))
    return cli, items, cli.json("score", str(f))["decisions"]


def all_pages(cli: Cli, *filters: str, limit: int = 7) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: list[str] = []
    while True:
        page = cli.json("traces", "query", *filters, "--limit", str(limit), *cursor)
        assert len(page["items"]) <= limit
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        cursor = ["--cursor", page["next_cursor"]]


def seqs(rows: list[dict[str, Any]]) -> list[int]:
    return sorted((r["seq"] for r in rows), reverse=True)


def test_pages_walk_every_decision_newest_first(scored: tuple[Cli, list[Any], list[Any]]) -> None:
    cli, _, rows = scored
    got = all_pages(cli)
    assert [t["seq"] for t in got] == seqs(rows)
    by_seq = {r["seq"]: r for r in rows}
    for t in got:
        r = by_seq[t["seq"]]
        assert (t["trace_id"], t["decision"], t["score"], t["fired"]) == (
            r["trace_id"], r["decision"], r["score"], r["fired"])
        assert t["principal"]["subject"] == f"CN=local:{getpass.getuser()}"
    human = cli("traces", "query", "--limit", "5").stdout
    assert "next cursor: " in human and got[0]["trace_id"] in human


def test_every_filter_matches_what_was_decided(scored: tuple[Cli, list[Any], list[Any]]) -> None:
    cli, items, rows = scored
    decisions = {r["decision"] for r in rows}
    assert len(decisions) > 1  # the simulated typologies trip rules
    for d in decisions:
        want = [r for r in rows if r["decision"] == d]
        assert seqs(all_pages(cli, "--decision", d, limit=50)) == seqs(want)
    rule = next(r["fired"][0] for r in rows if r["fired"])
    assert seqs(all_pages(cli, "--rule", rule, limit=50)) == seqs([r for r in rows if rule in r["fired"]])
    account = items[5]["originator"]["account"]
    touching = [r for r, it in zip(rows, items, strict=True)
                if account in (it["originator"].get("account"), it["beneficiary"].get("account"))]
    assert touching and seqs(all_pages(cli, "--account", account, limit=50)) == seqs(touching)
    lo, hi = 0.2, 0.6
    band = [r for r in rows if r["score"] is not None and lo <= r["score"] <= hi]
    assert band and len(band) < len(rows)
    assert seqs(all_pages(cli, "--score-min", str(lo), "--score-max", str(hi), limit=50)) == seqs(band)
    subject = Principal.local(getpass.getuser()).subject
    assert len(all_pages(cli, "--principal", subject, limit=200)) == len(rows)
    assert all_pages(cli, "--principal", "ab" * 32) == []
    first = min(r["recorded_at"] for r in rows)
    assert all_pages(cli, "--until", first.replace("Z", "+00:00")) == []
    assert len(all_pages(cli, "--since", first.replace("Z", "+00:00"), limit=200)) == len(rows)
    # as the console's forms read times: without an offset (datetime-local) is UTC
    assert len(all_pages(cli, "--since", first.removesuffix("Z"), limit=200)) == len(rows)
    assert all_pages(cli, "--until", first.removesuffix("Z")) == []


def test_a_refused_filter_exits_1_naming_its_option(scored: tuple[Cli, list[Any], list[Any]]) -> None:
    cli, _, _ = scored
    cases = {("--decision", "MAYBE"): "--decision", ("--rule", "lower-case"): "--rule",
             ("--score-min", "abc"): "--score-min", ("--score-max", "1.5"): "--score-max",
             ("--limit", "0"): "--limit", ("--limit", "5000"): "--limit",
             ("--since", "yesterday"): "--since", ("--until", "2026-13-01T00:00"): "--until",
             ("--cursor", "bm9wZQ"): "--cursor", ("--account", " "): "--account"}
    for args, option in cases.items():
        doc = cli.json("traces", "query", *args, code=1)
        assert doc["ok"] is False and doc["field"] == option and doc["message"].startswith(option), args
    page = cli.json("traces", "query", "--limit", "3")
    doc = cli.json("traces", "query", "--decision", "ALLOW", "--cursor", page["next_cursor"], code=1)
    assert doc["field"] == "--cursor" and "different filter" in doc["message"]
    assert "--score-min" in cli("traces", "query", "--score-min", "-1", code=1).stderr


def test_show_one_trace_with_payload_state_and_annotations(scored: tuple[Cli, list[Any], list[Any]]) -> None:
    cli, items, rows = scored
    row, item = rows[3], items[3]
    doc = cli.json("traces", "show", row["trace_id"])
    assert doc["seq"] == row["seq"] and doc["kind"] == "decision" and doc["leaf_hash"] == row["leaf_hash"]
    assert doc["record"]["record"]["decision"] == row["decision"]
    assert doc["payload"] == {"sha256": doc["record"]["payload_sha256"], "state": "present"}
    assert doc["annotations"] == []
    full = cli.json("traces", "show", row["trace_id"].upper(), "--payload")
    assert full["payload"]["data"] == orjson.dumps(item).decode()
    ledger = ops.open_ledger(Settings.model_validate({"db": cli.db.url, "keys": cli.keys}))
    note = annotate(ledger, row["trace_id"], Principal.local("officer"), "FALSE_POSITIVE", "payroll")
    ledger.engine.dispose()
    (a,) = cli.json("traces", "show", row["trace_id"])["annotations"]
    assert a["seq"] == note.seq and a["record"]["note"] == "payroll"
    human = cli("traces", "show", row["trace_id"]).stdout
    assert row["trace_id"] in human and "payroll" in human and "payload     present" in human


def test_show_unknown_or_malformed_trace_exits_1(scored: tuple[Cli, list[Any], list[Any]]) -> None:
    cli, _, _ = scored
    assert cli.json("traces", "show", str(uuid.uuid4()), code=1)["error"] == "EntryNotFoundError"
    doc = cli.json("traces", "show", "not-a-uuid", code=1)
    assert doc["field"] == "TRACE_ID"


def test_missing_database_exits_2(tmp_path: Path) -> None:
    cli = Cli(Db(f"sqlite:///{tmp_path / 'none.db'}", "sqlite"), tmp_path / "keys")
    assert cli.json("traces", "query", code=2)["error"] == "SchemaError"
    assert cli.json("traces", "show", str(uuid.uuid4()), code=2)["error"] == "SchemaError"
