"""The CLI contract: commands, --json shapes and exit codes (0 ok, 1 failure, 2 usage)."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from ledger import store
from ledger.checkpoint import SignedCheckpoint
from ledger.merkle import verify_consistency, verify_inclusion
from ledger.note import NoteVerifier
from tests.conftest import Db

runner = CliRunner()


class Cli:
    def __init__(self, db: Db, keys: Path) -> None:
        self.db, self.keys = db, keys

    def __call__(self, *args: str, code: int = 0) -> Any:
        res = runner.invoke(app, [*args, "--db", self.db.url, "--keys", str(self.keys)])
        assert res.exit_code == code, res.output
        return res

    def json(self, *args: str, code: int = 0) -> Any:
        res = self(*args, "--json", code=code)
        return json.loads(res.stdout)


@pytest.fixture
def cli(db: Db, tmp_path: Path) -> Cli:
    c = Cli(db, tmp_path / "keys")
    c("init", "--origin", "bank.example/aml-ledger")
    return c


def test_init_creates_a_private_key_and_is_idempotent(cli: Cli) -> None:
    key = cli.keys / "signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    again = cli.json("init")
    assert again["created"] is False and again["origin"] == "bank.example/aml-ledger"
    shown = cli.json("keys", "show")
    assert shown["active"] == again["vkey"] and shown["active"].startswith("bank.example/aml-ledger+")


def fill(cli: Cli, n: int) -> None:
    """Append ``n`` records, each with its own payload, through the Python API."""
    from api import ops
    from api.config import Settings
    from ledger import Record

    ledger = ops.open_ledger(Settings.model_validate({"db": cli.db.url, "keys": cli.keys}))
    try:
        ledger.append_many([Record("test.synthetic", {"n": i}, payload=f"message {i}".encode())
                            for i in range(n)])
    finally:
        ledger.engine.dispose()


def test_checkpoint_verify_prove_consistency(cli: Cli) -> None:
    fill(cli, 300)
    vkey = NoteVerifier.from_vkey(cli.json("keys", "show")["active"])

    cp_doc = cli.json("ledger", "checkpoint")
    cp = SignedCheckpoint.verify(cp_doc["note"], [vkey], "bank.example/aml-ledger").checkpoint
    assert cp.size == 301

    report = cli.json("ledger", "verify")
    assert report["verified"] and report["size"] == 301 and report["trusted_key"] == vkey.vkey

    for target in ("150", _trace_id(cli, 42)):
        p = cli.json("ledger", "prove", target)
        c = SignedCheckpoint.verify(p["checkpoint"], [vkey]).checkpoint
        verify_inclusion(p["index"], p["size"], base64.b64decode(p["leaf_hash"]),
                         [base64.b64decode(h) for h in p["hashes"]], c.root)
    human = cli("ledger", "prove", "150").stdout
    assert "index     150" in human and "bank.example/aml-ledger" in human

    cons = cli.json("ledger", "consistency", "10", "301")
    verify_consistency(10, 301, [base64.b64decode(h) for h in cons["hashes"]],
                       base64.b64decode(cons["old_root"]), base64.b64decode(cons["new_root"]))
    assert cons["new_root"] == base64.b64encode(cp.root).decode()


def _trace_id(cli: Cli, seq: int) -> str:
    engine = cli.db.engine()
    with engine.connect() as conn:
        return str(conn.exec_driver_sql(
            f"SELECT trace_id FROM ledger_entries WHERE seq = {seq}").scalar_one())


def test_verify_failure_exits_1_and_names_the_seq(cli: Cli) -> None:
    fill(cli, 50)
    engine = cli.db.engine()
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER ledger_entries_no_update")
        else:
            conn.exec_driver_sql("DROP TRIGGER ledger_entries_append_only ON ledger_entries")
        p = store.param(conn)
        conn.exec_driver_sql(f"UPDATE ledger_entries SET leaf_hash = {p} WHERE seq = 7", (bytes(32),))
        conn.commit()
    doc = cli.json("ledger", "verify", code=1)
    assert doc == {"ok": False, "error": "altered record", "seq": 7, "message": doc["message"]}
    res = cli("ledger", "verify", code=1)
    assert "seq 7" in res.output


def test_key_rotation_from_the_cli(cli: Cli) -> None:
    fill(cli, 20)
    old = cli.json("keys", "show")["active"]
    rot = cli.json("keys", "rotate")
    assert rot["old_vkey"] == old and rot["new_vkey"] != old
    assert Path(rot["retired_file"]).exists()
    assert cli.json("keys", "show")["active"] == rot["new_vkey"]
    fill(cli, 20)
    assert cli.json("ledger", "verify")["keys"] == [old, rot["new_vkey"]]
    assert cli.json("ledger", "verify", "--trusted-key", old)["trusted_key"] == old


def test_retention_commands(cli: Cli) -> None:
    fill(cli, 30)
    held = cli.json("retention", "hold", "CASE-1", "--from", "1", "--to", "5", "--reason", "SAR 1")
    assert held["hold_id"] == "CASE-1"
    assert [h["hold_id"] for h in cli.json("retention", "holds")["holds"]] == ["CASE-1"]
    engine = cli.db.engine()
    with engine.connect() as conn:
        sha3, sha9 = [r[0] for r in conn.exec_driver_sql(
            "SELECT sha256 FROM ledger_payloads WHERE first_seq IN (3, 9) ORDER BY first_seq")]
    doc = cli.json("retention", "erase", sha3, "--reason", "order 7", code=1)
    assert doc["error"] == "LegalHoldError"
    assert cli.json("retention", "erase", sha9, "--reason", "order 8")["purged"] == [sha9]
    cli("retention", "release", "CASE-1", "--reason", "closed")
    assert cli.json("retention", "purge")["purged"] == []  # nothing is five years old
    cli("ledger", "checkpoint")
    assert cli.json("ledger", "verify")["payloads_purged"][0]["sha256"] == sha9


def test_usage_and_configuration_errors_exit_2(cli: Cli, tmp_path: Path) -> None:
    assert runner.invoke(app, ["ledger", "verify", "--db", f"sqlite:///{tmp_path}/none.db"]).exit_code == 2
    cli("ledger", "prove", "not-a-seq", code=2)
    cli("ledger", "consistency", "-1", "3", code=2)
    cli("ledger", "frobnicate", code=2)
    assert cli.json("ledger", "prove", "999999", code=1)["error"] == "EntryNotFoundError"
    assert cli.json("ledger", "consistency", "5", "999999", code=1)["error"] == "RefusedError"
    assert cli.json("ledger", "prove", "9" * 30, code=1)["error"] == "EntryNotFoundError"
    assert cli.json("retention", "release", "NOPE", "--reason", "x", code=1)["error"] == "RefusedError"
    key = cli.keys / "signing.key"
    key.chmod(0o644)
    assert "chmod 600" in cli.json("ledger", "checkpoint", code=2)["message"]
    key.chmod(0o600)
    other = tmp_path / "other"
    runner.invoke(app, ["init", "--db", f"sqlite:///{tmp_path}/o.db", "--keys", str(other)])
    res = runner.invoke(app, ["ledger", "checkpoint", "--db", cli.db.url, "--keys", str(other)])
    assert res.exit_code == 2 and "active signing key" in res.output


def test_console_script_runs(tmp_path: Path) -> None:
    env = {**os.environ, "SEALTRAIL_DB": f"sqlite:///{tmp_path}/s.db",
           "SEALTRAIL_KEYS": str(tmp_path / "k")}
    exe = Path(sys.executable).parent / "sealtrail"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "api.cli"]
    subprocess.run([*cmd, "init"], env=env, check=True, capture_output=True)
    out = subprocess.run([*cmd, "ledger", "verify", "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and json.loads(out.stdout)["size"] == 1
