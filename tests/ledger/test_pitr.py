"""Point-in-time restore of a PostgreSQL ledger (docs/backups.md): a base backup and a continuous
WAL archive, restored to a named restore point in a new cluster, hold exactly the ledger committed
at that point; it verifies in full and provably extends the checkpoint held from before the base
backup, and ``ledger backup-verify`` says so, and refuses a checkpoint signed after the point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api import ops
from api.cli import app
from api.config import Settings
from ledger.backup import prove_extends
from ledger.checkpoint import SignedCheckpoint
from tests import pg_cluster
from tools.pg_backup_drill import Drill, drill

runner = CliRunner()
RECORDS = 300  # per phase: before the base backup, before the restore point, after it


@pytest.fixture(scope="module")
def restored() -> Iterator[Drill]:
    reason = pg_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    with drill(RECORDS) as d:
        yield d


def backup_verify(d: Drill, note: str, tmp_path: Path, code: int) -> Any:
    held = tmp_path / "held.note"
    held.write_text(note, encoding="utf-8")
    res = runner.invoke(app, ["ledger", "backup-verify", d.restored.url, "--checkpoint", str(held),
                              "--keys", str(d.keys), "--json"])
    assert res.exit_code == code, f"{res.stdout}\n{res.stderr}"
    return json.loads(res.stdout)


@pytest.mark.requirement("SEC-17a4f-backup", "DORA-11-12-recovery")
def test_the_restored_ledger_is_exactly_the_one_at_the_restore_point(restored: Drill) -> None:
    held = SignedCheckpoint.parse_unverified(restored.held_note).checkpoint
    assert held.size == RECORDS + 1  # genesis and the first phase
    assert restored.target_size == 2 * RECORDS + 1 < restored.live_size == 3 * RECORDS + 1
    s = Settings.model_validate({"db": restored.restored.url, "keys": restored.keys})
    report = ops.verify(s, [], None)  # the full ledger verify, the local key pinned
    assert report.size == restored.target_size and report.unsealed_entries == 0
    assert report.trusted_key is not None and report.derived is not None
    engine = ops.engine_for(s)
    try:
        ext = prove_extends(engine, restored.held_note)
    finally:
        engine.dispose()
    assert ext.held == held and ext.size == restored.target_size and ext.target_size == restored.target_size
    assert len(ext.proof) > 0  # a real proof from size 301 to 601, checked against both roots


def test_backup_verify_proves_the_restore_extends_the_held_checkpoint(
        restored: Drill, tmp_path: Path) -> None:
    doc = backup_verify(restored, restored.held_note, tmp_path, 0)
    assert doc["verified"] is True and doc["records"] == restored.target_size
    assert doc["extends"]["held_size"] == RECORDS + 1 and doc["extends"]["to_size"] == restored.target_size


def test_a_checkpoint_signed_after_the_restore_point_is_refused_naming_both(
        restored: Drill, tmp_path: Path) -> None:
    doc = backup_verify(restored, restored.after_note, tmp_path, 1)
    assert doc["error"] == "backup mismatch"
    assert doc["held"]["size"] == restored.live_size and doc["ledger"]["size"] == restored.target_size
    message = doc["message"]
    assert "older than the held checkpoint" in message
    assert f"size {restored.live_size}" in message and f"size {restored.target_size}" in message
