"""``sealtrail standby status|promote`` (``api.cli.standby``) under the CLI contract: one JSON object
with ``ok``, exit 0 on success, 2 for a database that cannot be promoted or reached.

The group is mounted here under a root built like ``api.cli.app`` (``ContractGroup``), as its
registration there will mount it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.cli import app as sealtrail
from api.cli.common import ContractGroup
from api.cli.standby import standby_app
from tests import pg_cluster

runner = CliRunner()
app = typer.Typer(cls=ContractGroup, no_args_is_help=True, add_completion=False)
app.add_typer(standby_app, name="standby")
app.command("init")(lambda: None)  # a second command: typer would otherwise flatten the group


def run(*args: str, code: int = 0) -> dict[str, Any]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == code, f"{args}: exit {res.exit_code}\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stdout + res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    assert doc["ok"] is (code == 0)
    return doc


def test_status_of_a_sqlite_ledger_and_no_promotion_there(tmp_path: Path) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    assert runner.invoke(sealtrail, ["init", *db]).exit_code == 0
    doc = run("standby", "status", *db)
    assert (doc["role"], doc["dialect"], doc["size"], doc["epoch"]) == ("primary", "sqlite", 1, None)
    refused = run("standby", "promote", *db, code=2)
    assert "PostgreSQL" in refused["message"]
    absent = ["--db", f"sqlite:///{tmp_path / 'absent.db'}", "--keys", str(tmp_path / "none")]
    run("standby", "status", *absent, code=2)
    run("standby", "promote", *absent, code=2)


@pytest.mark.slow
def test_promote_a_standby_then_again(tmp_path: Path) -> None:
    reason = pg_cluster.unavailable()
    if reason:
        pytest.skip(f"cannot start throwaway PostgreSQL clusters: {reason}")
    keys = ["--keys", str(tmp_path / "keys")]
    with pg_cluster.Cluster.create(replication=True) as primary:
        standby = primary.standby("site_b")
        assert runner.invoke(sealtrail, ["init", "--db", primary.url, *keys]).exit_code == 0
        primary.wait_streaming("site_b", caught_up=True)
        seen = run("standby", "status", "--db", primary.url, *keys)
        assert seen["role"] == "primary" and seen["timeline"] == 1
        assert [s["name"] for s in seen["standbys"]] == ["site_b"]
        seen = run("standby", "status", "--db", standby.url, *keys)
        assert (seen["role"], seen["receiver"], seen["size"]) == ("standby", "streaming", 1)

        primary.stop(mode="immediate")
        done = run("standby", "promote", "--db", standby.url, *keys)
        assert (done["promoted"], done["timeline"], done["epoch_sealed"]) == (True, 2, True)
        assert done["epoch_seq"] == 1 and done["size"] == 2  # the genesis, then the epoch
        again = run("standby", "promote", "--db", standby.url, *keys)
        assert (again["promoted"], again["epoch_sealed"], again["epoch_seq"]) == (False, False, 1)
        seen = run("standby", "status", "--db", standby.url, *keys)
        assert seen["role"] == "primary" and seen["epoch"] == {"seq": 1, "timeline": 2}
