"""``sealtrail ledger backup`` and ``ledger backup-verify`` on SQLite (ledger/backup.py): a copy
taken while appends go on verifies and extends the live checkpoint; a destination is never
half-written nor overwritten unasked; a damaged backup, or a checkpoint of another log, a fork or
a newer tree, is refused (exit 1) naming both sides."""

from __future__ import annotations

import json
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api import ops
from api.cli import app
from api.config import Settings
from ledger import Record
from ledger.checkpoint import SignedCheckpoint

runner = CliRunner()
ORIGIN = "bank.example/aml-ledger"


class Live:
    """An initialised SQLite ledger in ``tmp`` and the CLI pointed at it."""

    def __init__(self, tmp: Path, name: str = "live", origin: str = ORIGIN, keys: Path | None = None) -> None:
        self.tmp, self.path, self.keys = tmp, tmp / f"{name}.db", keys or tmp / f"{name}-keys"
        self.url = f"sqlite:///{self.path}"
        self.run("init", "--origin", origin)

    def run(self, *args: str, code: int = 0) -> Any:
        res = runner.invoke(app, [*args, "--db", self.url, "--keys", str(self.keys), "--json"])
        assert res.exit_code == code, f"{args}: exit {res.exit_code}\n{res.stdout}\n{res.stderr}"
        return json.loads(res.stdout)

    def settings(self) -> Settings:
        return Settings.model_validate({"db": self.url, "keys": self.keys})

    def fill(self, n: int, tag: str = "x") -> None:
        ledger = ops.open_ledger(self.settings())
        try:
            ledger.append_many([Record("test.synthetic", {"n": i, "tag": tag}, payload=f"{tag} {i}".encode())
                                for i in range(n)])
        finally:
            ledger.engine.dispose()

    def checkpoint(self, name: str) -> Path:
        """Sign a checkpoint now and keep its note in a file, as an examiner holds one."""
        note = self.run("ledger", "checkpoint")["note"]
        f = self.tmp / f"{name}.note"
        f.write_text(note, encoding="utf-8")
        return f


def verify_backup(backup: Path | str, *extra: str, keys: Path | None = None, code: int = 0) -> Any:
    args = ["ledger", "backup-verify", str(backup), *extra, "--json"]
    if keys is not None:
        args += ["--keys", str(keys)]
    res = runner.invoke(app, args)
    assert res.exit_code == code, f"exit {res.exit_code}\n{res.stdout}\n{res.stderr}"
    doc = json.loads(res.stdout)
    assert doc["ok"] is (code == 0)
    if code:
        assert "Traceback" not in res.stderr and "error" in res.stderr
    return doc


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".partial" in p.name)


@pytest.fixture
def live(tmp_path: Path) -> Live:
    lv = Live(tmp_path)
    lv.fill(200)
    return lv


@pytest.mark.requirement("SEC-17a4f-backup", "DORA-11-12-recovery")
def test_backup_while_appends_go_on_verifies_and_extends_the_live_checkpoint(live: Live) -> None:
    before = live.run("ledger", "checkpoint")
    appended = threading.Event()
    stop = threading.Event()
    counts: list[int] = []
    errors: list[BaseException] = []

    def appender() -> None:
        ledger = ops.open_ledger(live.settings())
        try:
            for batch in range(400):  # bounded: stops by itself even if the backup hangs
                ledger.append_many([Record("test.during", {"b": batch, "i": i}) for i in range(25)])
                counts.append(ledger.size())
                appended.set()
                if stop.is_set():
                    break
        except BaseException as exc:
            errors.append(exc)
            appended.set()
        finally:
            ledger.engine.dispose()

    t = threading.Thread(target=appender)
    t.start()
    assert appended.wait(60)
    try:
        doc = live.run("ledger", "backup", "--to", str(live.tmp / "b.db"))
    finally:
        stop.set()
        t.join(120)
    assert not errors, errors
    after = live.run("ledger", "checkpoint")
    assert doc["ok"] and doc["verify"]["verified"] and doc["path"] == str(live.tmp / "b.db")
    # the copy is the ledger at one commit: at least what was there before, no more than after
    assert before["size"] <= doc["records"] <= after["size"]
    assert doc["records"] == doc["verify"]["size"] and doc["records"] >= 200
    assert doc["live_checkpoint"]["size"] >= before["size"]
    assert doc["checkpoint"]["size"] >= doc["live_checkpoint"]["size"]
    assert doc["consistency"]["held_size"] == doc["live_checkpoint"]["size"]
    backup = live.tmp / "b.db"
    assert backup.stat().st_size == doc["bytes"]
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600  # it holds payment payloads
    assert leftovers(live.tmp) == []

    # offline: the backup verifies alone, its file unchanged by it, and it extends the checkpoint
    # held from before the backup; the one signed after is newer than the backup
    held_before = live.tmp / "before.note"
    held_before.write_text(before["note"], encoding="utf-8")
    checked = verify_backup(backup, "--checkpoint", str(held_before), keys=live.keys)
    assert checked["records"] == doc["records"] and checked["sha256"] == doc["sha256"]
    assert checked["extends"]["held_size"] == before["size"]
    assert checked["verify"]["trusted_key"] == live.run("keys", "show")["active"]
    if after["size"] > doc["records"]:
        held_after = live.tmp / "after.note"
        held_after.write_text(after["note"], encoding="utf-8")
        refused = verify_backup(backup, "--checkpoint", str(held_after), keys=live.keys, code=1)
        assert refused["error"] == "backup mismatch"
        assert "older than the held checkpoint" in refused["message"]
        assert refused["held"]["size"] == after["size"] and refused["ledger"]["size"] == doc["records"]


def test_an_existing_file_is_kept_unless_force(live: Live) -> None:
    dest = live.tmp / "b.db"
    dest.write_bytes(b"last week's backup")
    doc = live.run("ledger", "backup", "--to", str(dest), code=2)
    assert "exists" in doc["message"] and "--force" in doc["message"]
    assert dest.read_bytes() == b"last week's backup" and leftovers(live.tmp) == []
    done = live.run("ledger", "backup", "--to", str(dest), "--force")
    assert done["records"] == 201 and verify_backup(dest)["sha256"] == done["sha256"]


@pytest.mark.parametrize("where", ["live", "live-wal", "no-such-dir", "directory"])
def test_a_destination_that_cannot_hold_a_backup_is_a_usage_error(live: Live, where: str) -> None:
    dest = {"live": live.path, "live-wal": Path(f"{live.path}-wal"),
            "no-such-dir": live.tmp / "nope" / "b.db", "directory": live.tmp}[where]
    doc = live.run("ledger", "backup", "--to", str(dest), "--force", code=2)
    assert doc["error"] == "BackupError" and str(dest) in doc["message"]
    assert live.run("ledger", "verify")["size"] == 201 and leftovers(live.tmp) == []


def test_a_postgresql_ledger_is_pointed_to_pg_basebackup(tmp_path: Path) -> None:
    res = runner.invoke(app, ["ledger", "backup", "--to", str(tmp_path / "b.db"), "--json",
                              "--db", "postgresql+psycopg://sealtrail@127.0.0.1:1/ledger"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert "pg_basebackup" in doc["message"] and "WAL archive" in doc["message"]
    assert "docs/backups.md" in doc["message"] and list(tmp_path.iterdir()) == []


def _alter_row(db: Path, seq: int) -> None:
    """A forger with the file: triggers dropped, one sealed record rewritten in place."""
    con = sqlite3.connect(db)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE ledger_entries SET record = replace(record, '\"n\":7', '\"n\":8') WHERE seq = ?",
                (seq,))
    assert con.total_changes == 1
    con.commit()
    con.close()


def test_a_damaged_live_ledger_gives_no_backup_at_all(live: Live) -> None:
    _alter_row(live.path, 8)
    doc = live.run("ledger", "backup", "--to", str(live.tmp / "b.db"), code=1)
    assert doc["seq"] == 8 and "altered" in doc["error"]
    assert not (live.tmp / "b.db").exists() and leftovers(live.tmp) == []


def test_a_backup_altered_afterwards_is_refused_naming_the_seq(live: Live) -> None:
    backup = live.tmp / "b.db"
    live.run("ledger", "backup", "--to", str(backup))
    _alter_row(backup, 8)
    doc = verify_backup(backup, keys=live.keys, code=1)
    assert doc["seq"] == 8 and "altered" in doc["error"]


@pytest.mark.parametrize("damage", ["truncated", "overwritten", "not-a-ledger"])
def test_a_backup_file_that_is_no_intact_ledger_is_refused(live: Live, damage: str) -> None:
    backup = live.tmp / "b.db"
    live.run("ledger", "backup", "--to", str(backup))
    data = backup.read_bytes()
    if damage == "truncated":
        backup.write_bytes(data[: len(data) // 2])
    elif damage == "overwritten":
        backup.write_bytes(b"\0" * 4096 + data[4096:])
    else:
        backup.unlink()
        sqlite3.connect(backup).execute("CREATE TABLE notes (x)").connection.close()
    doc = verify_backup(backup, keys=live.keys, code=1)
    assert doc["error"] == "BackupDamagedError" and str(backup) in doc["message"]
    want = {"truncated": "malformed", "overwritten": "not an intact SQLite database",
            "not-a-ledger": "holds no sealtrail ledger"}[damage]
    assert want in doc["message"]


def test_no_such_backup_file_is_a_usage_error(tmp_path: Path) -> None:
    doc = verify_backup(tmp_path / "missing.db", code=2)
    assert "no backup file" in doc["message"]


def test_a_checkpoint_of_another_log_is_refused_naming_both(live: Live) -> None:
    backup = live.tmp / "b.db"
    live.run("ledger", "backup", "--to", str(backup))
    other = Live(live.tmp, "other", origin="other.example/log")
    other.fill(300)
    doc = verify_backup(backup, "--checkpoint", str(other.checkpoint("other")), keys=live.keys, code=1)
    assert doc["error"] == "backup mismatch"
    assert "'other.example/log'" in doc["message"] and f"'{ORIGIN}'" in doc["message"]
    assert doc["held"]["size"] == 301 and doc["ledger"]["size"] == 201
    assert doc["held"]["root"] in doc["message"]
    assert doc["ledger"]["newest_checkpoint"]["root"] in doc["message"]


def test_a_checkpoint_of_a_fork_under_the_same_key_is_refused_naming_both_roots(live: Live) -> None:
    """Same origin, same key, other records: a fork only the Merkle proof can tell apart."""
    backup = live.tmp / "b.db"
    live.run("ledger", "backup", "--to", str(backup))
    fork = Live(live.tmp, "fork", keys=live.keys)  # the same key file: the same origin and signer
    fork.fill(150, tag="forged")
    held = fork.checkpoint("fork")
    doc = verify_backup(backup, "--checkpoint", str(held), keys=live.keys, code=1)
    assert doc["error"] == "backup mismatch" and "does not extend the held checkpoint" in doc["message"]
    note = SignedCheckpoint.parse_unverified(held.read_text()).checkpoint
    assert doc["held"]["size"] == note.size == 151 and doc["ledger"]["size"] == 201
    assert doc["held"]["root"] in doc["message"]


def test_a_checkpoint_file_that_is_no_note_is_refused(live: Live) -> None:
    backup = live.tmp / "b.db"
    live.run("ledger", "backup", "--to", str(backup))
    junk = live.tmp / "junk.note"
    junk.write_text("not a checkpoint\n", encoding="utf-8")
    doc = verify_backup(backup, "--checkpoint", str(junk), keys=live.keys, code=1)
    assert "not a signed checkpoint" in doc["message"]


def test_a_file_that_appears_at_the_destination_meanwhile_is_not_overwritten(live: Live) -> None:
    """The destination is checked first and again when the copy is linked into place."""
    from ledger.backup import BackupError, backup_sqlite

    dest = live.tmp / "b.db"

    def someone_writes_there(url: str) -> None:
        dest.write_bytes(b"another job's file")

    engine = ops.engine_for(live.settings())
    try:
        with pytest.raises(BackupError, match="exists"):
            backup_sqlite(engine, dest, check=someone_writes_there)
    finally:
        engine.dispose()
    assert dest.read_bytes() == b"another job's file" and leftovers(live.tmp) == []


def test_the_human_output_names_the_file_records_and_checkpoint(live: Live) -> None:
    backup = live.tmp / "b.db"
    live.run("ledger", "checkpoint")
    res = runner.invoke(app, ["ledger", "backup", "--to", str(backup), "--db", live.url,
                              "--keys", str(live.keys)])
    assert res.exit_code == 0, res.output
    assert f"backed up: {backup}" in res.stdout and "records     201" in res.stdout
    assert "consistent  with the live checkpoint at size 201" in res.stdout
    res = runner.invoke(app, ["ledger", "backup-verify", str(backup), "--keys", str(live.keys)])
    assert res.exit_code == 0, res.output
    assert "201 entries" in res.stdout and "sha256" in res.stdout
