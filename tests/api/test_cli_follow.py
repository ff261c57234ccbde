"""``sealtrail follow``: the cron form's exit codes and JSON, the evidence an alarm leaves, a state
that survives a restart, the loop's metrics, and the primary's HTTP API as the source.

The command is registered here on a small app built as ``api.cli`` builds the real one (the lead
registers it there)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from api.cli.common import ContractGroup
from api.cli.follow import FollowMetrics, follow, follow_loop, follow_once
from ledger import NoteSigner, Record
from ledger.append import Ledger
from ledger.follow_io import DbReplica, HttpPrimary, StateDir
from ledger.note import NoteVerifier
from tests.api.test_fail_closed import in_process
from tests.conftest import Db, make_ledger

app = typer.Typer(cls=ContractGroup, add_completion=False)


@app.callback()
def _root() -> None:
    """sealtrail (the follow command only)."""


app.command("follow")(follow)
runner = CliRunner()
ROOT = Path(__file__).parents[2]


def sqlite(path: Path) -> str:
    return f"sqlite:///{path}"


def new_ledger(tmp_path: Path, name: str, signer: NoteSigner) -> Ledger:
    return make_ledger(Db(sqlite(tmp_path / f"{name}.db"), "sqlite"), signer)


def grow(lg: Ledger, n: int, tag: str = "a") -> int:
    lg.append_many([Record("test.event", {"tag": tag, "i": i}) for i in range(n)])
    return lg.checkpoint().checkpoint.size


def snapshot(lg: Ledger, to: Path) -> str:
    """A copy of ``lg``'s database file as it is now (a backup, or a standby that stopped here)."""
    with lg.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
    shutil.copy(Path(str(lg.engine.url.database)), to)
    return sqlite(to)


class Follow:
    def __init__(self, standby: str, key: str, state: Path) -> None:
        self.standby, self.key, self.state = standby, key, state

    def args(self, primary: str, *more: str) -> list[str]:
        return ["follow", "--primary-db", primary, "--standby-db", self.standby, "--trusted-key", self.key,
                "--state-dir", str(self.state), "--once", *more]

    def __call__(self, primary: str, *more: str, code: int = 0) -> Any:
        res = runner.invoke(app, [*self.args(primary, *more), "--json"])
        assert res.exit_code == code, res.output
        return json.loads(res.stdout)


@pytest.fixture
def primary(tmp_path: Path, signer: NoteSigner) -> Iterator[Ledger]:
    lg = new_ledger(tmp_path, "primary", signer)
    yield lg
    lg.engine.dispose()


@pytest.fixture
def fl(primary: Ledger, signer: NoteSigner, tmp_path: Path) -> Follow:
    return Follow(sqlite(tmp_path / "primary.db"), signer.verifier.vkey, tmp_path / "follow")


def test_the_cron_form_accepts_growing_checkpoints(primary: Ledger, fl: Follow, tmp_path: Path) -> None:
    url = sqlite(tmp_path / "primary.db")
    first = fl(url)
    assert first["ok"] is True and first["alarms"] == [] and first["accepted"]["size"] == 1
    assert first["lag"] == 0 and first["checked_against_replica"] == 1
    size = grow(primary, 25)
    doc = fl(url)
    assert doc["ok"] and doc["new_checkpoint"] and doc["accepted"]["size"] == size == 26
    assert doc["accepted"]["root"] == primary.latest_checkpoint().checkpoint.root.hex()  # type: ignore[union-attr]
    state = json.loads((fl.state / "state.json").read_text())
    assert state["accepted_size"] == 26 and state["leaves"]["size"] == 26
    human = runner.invoke(app, fl.args(url))
    assert human.exit_code == 0 and "accepted: size 26" in human.stdout and "lag 0" in human.stdout


def test_a_restarted_follower_refuses_a_rollback_and_keeps_the_evidence(
        primary: Ledger, fl: Follow, tmp_path: Path) -> None:
    backup = snapshot(primary, tmp_path / "backup.db")  # the primary as it was at size 1
    size = grow(primary, 10)
    assert fl(sqlite(tmp_path / "primary.db"))["accepted"]["size"] == size
    # a new process, as cron starts one: the state file is all it knows
    script = textwrap.dedent("""
        import sys
        from tests.api.test_cli_follow import app
        sys.argv = ["sealtrail", *sys.argv[1:]]
        app()
        """)
    res = subprocess.run([sys.executable, "-c", script, *fl.args(backup), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["error"] == "ROLLBACK"
    (alarm,) = doc["alarms"]
    assert alarm["kind"] == "ROLLBACK" and alarm["accepted"]["size"] == size and alarm["offered"]["size"] == 1
    evidence = Path(alarm["evidence"])
    assert evidence.parent == fl.state / "evidence"
    assert (evidence / "offered.note").read_text().startswith("test.sealtrail/log\n1\n")
    assert (evidence / "accepted.note").read_text() == primary.latest_checkpoint().note  # type: ignore[union-attr]
    assert "ALARM ROLLBACK" in res.stderr
    assert json.loads((fl.state / "state.json").read_text())["accepted_size"] == size  # not rolled back


def test_a_fork_alarms_with_both_notes_kept(primary: Ledger, fl: Follow, signer: NoteSigner,
                                            tmp_path: Path) -> None:
    grow(primary, 6)
    fl(sqlite(tmp_path / "primary.db"))
    other = new_ledger(tmp_path, "other", signer)  # same origin and key, other records
    grow(other, 6, tag="b")
    doc = fl(sqlite(tmp_path / "other.db"), code=1)
    assert [a["kind"] for a in doc["alarms"]] == ["FORK"]
    alarm = doc["alarms"][0]
    assert alarm["accepted"]["size"] == alarm["offered"]["size"] == 7
    assert alarm["accepted"]["root"] != alarm["offered"]["root"]
    kept = Path(alarm["evidence"])
    assert (kept / "offered.note").read_text() == other.latest_checkpoint().note  # type: ignore[union-attr]
    assert (kept / "accepted.note").read_text() == primary.latest_checkpoint().note  # type: ignore[union-attr]
    grow(other, 9, tag="b")
    larger = fl(sqlite(tmp_path / "other.db"), code=1)
    assert [a["kind"] for a in larger["alarms"]] == ["FORK"] and larger["accepted"]["size"] == 7
    other.engine.dispose()


def test_a_checkpoint_by_another_key_alarms(primary: Ledger, tmp_path: Path) -> None:
    stranger = NoteSigner.generate("test.sealtrail/log")
    fl = Follow(sqlite(tmp_path / "primary.db"), stranger.verifier.vkey, tmp_path / "follow")
    doc = fl(sqlite(tmp_path / "primary.db"), code=1)
    assert doc["error"] == "BAD_SIGNATURE" and doc["accepted"] is None
    assert "pinned key" in doc["message"]


def test_a_corrupt_state_file_is_a_usage_error(primary: Ledger, fl: Follow, tmp_path: Path) -> None:
    fl.state.mkdir()
    (fl.state / "state.json").write_text('{"version": 1, "accepted_note": 3}')
    res = runner.invoke(app, [*fl.args(sqlite(tmp_path / "primary.db")), "--json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["error"] == "state"
    assert "state.json" in doc["message"] and "move it aside" in doc["message"]


@pytest.mark.parametrize(("drop", "add", "field"), [
    ("--primary-db", [], "--primary-url"),
    (None, ["--primary-url", "https://primary:8443"], "--primary-url"),
    ("--primary-db", ["--primary-url", "http://primary:8443"], "--primary-url"),
    ("--primary-db", ["--primary-url", "https://primary:8443"], "--client-cert"),
    ("--trusted-key", [], "--trusted-key"),
    ("--once", [], "--json"),
])
def test_usage_errors_exit_2(fl: Follow, tmp_path: Path, drop: str | None, add: list[str],
                             field: str) -> None:
    args = fl.args(sqlite(tmp_path / "primary.db"))
    if drop is not None:
        i = args.index(drop)
        del args[i:i + (1 if drop == "--once" else 2)]
    res = runner.invoke(app, [*args, *add, "--json"], env={"SEALTRAIL_TRUSTED_KEY": ""})
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert doc["error"] == "usage" and doc["field"] == field


def test_a_missing_standby_database_is_a_configuration_error(fl: Follow, tmp_path: Path) -> None:
    fl.standby = sqlite(tmp_path / "nowhere.db")
    res = runner.invoke(app, [*fl.args(sqlite(tmp_path / "primary.db")), "--json"])
    assert res.exit_code == 2 and "does not exist" in json.loads(res.stdout)["message"]


def test_the_loop_logs_alarms_and_exposes_metrics(primary: Ledger, signer: NoteSigner,
                                                  tmp_path: Path) -> None:
    from ledger.follow_io import DbPrimary

    metrics = FollowMetrics(CollectorRegistry())
    lines: list[str] = []
    clock = iter(float(t) for t in range(1_800_000_000, 1_800_000_100, 10))
    size = grow(primary, 4)
    with StateDir(tmp_path / "follow") as sd:
        ran = follow_loop(sd, DbPrimary(primary.engine), DbReplica(primary.engine), [signer.verifier],
                          interval=0.1, stall_after=300, metrics=metrics, now=lambda: next(clock),
                          rounds=2, log=lines.append)
        assert ran == 2
        value = metrics.registry.get_sample_value
        assert value("sealtrail_follow_accepted_size") == size
        assert value("sealtrail_follow_standby_lag_entries") == 0
        assert value("sealtrail_follow_seconds_since_new_checkpoint") == 10  # accepted in round 1
        assert value("sealtrail_follow_alarms_total", {"kind": "FORK"}) == 0
        assert lines == [f"2027-01-15T08:00:00Z accepted checkpoint of size {size}, standby lag 0"]
        other = new_ledger(tmp_path, "other", signer)
        grow(other, 4, tag="b")
        follow_loop(sd, DbPrimary(other.engine), DbReplica(primary.engine), [signer.verifier], interval=0.1,
                    stall_after=300, metrics=metrics, now=lambda: next(clock), rounds=1, log=lines.append)
        other.engine.dispose()
    assert value("sealtrail_follow_alarms_total", {"kind": "FORK"}) == 1
    assert lines[-1].startswith("2027-01-15T08:00:20Z ALARM FORK accepted=5 offered=5: two checkpoints")
    assert "(evidence: " in lines[-1]


def test_the_primarys_http_api_as_the_source(db: Db, tmp_path: Path) -> None:
    """The checkpoint and a consistency proof fetched over the API, by a regulator's certificate,
    for a standby that lags (a copy of the database)."""
    with in_process(db, tmp_path) as (client, rt, _):
        client.headers["x-test-role"] = "regulator"
        http = HttpPrimary(client, "http://testserver")
        vkey = NoteVerifier.from_vkey(rt.ledger.active_vkey)
        standby = DbReplica(rt.ledger.engine)
        with StateDir(tmp_path / "follow") as sd:
            first = follow_once(sd, http, standby, [vkey], now=1.0, stall_after=300).round
            assert first.ok and first.state is not None
            base = first.state.accepted.checkpoint.size
            rt.ledger.append_many([Record("test.event", {"i": i}) for i in range(12)])
            size = rt.ledger.checkpoint().checkpoint.size

            class Lagging:  # the standby as it was: the proof has to come from the primary
                def __getattr__(self, name: str) -> Any:
                    return getattr(standby, name)

                def size(self) -> int:
                    return base

            r = follow_once(sd, http, Lagging(), [vkey], now=2.0, stall_after=300).round
            assert r.ok, r.alarms
            assert r.new and r.state is not None and r.state.accepted.checkpoint.size == size
            assert r.lag == size - base and any("the standby lags" in n for n in r.notes)
        wrong = HttpPrimary(client, "http://testserver/not-the-api")
        with StateDir(tmp_path / "follow") as sd:
            r = follow_once(sd, wrong, standby, [vkey], now=3.0, stall_after=300).round
        assert [str(a.kind) for a in r.alarms] == ["STALL"]
        assert "the primary does not answer" in r.alarms[0].detail and "answered 404" in r.alarms[0].detail
