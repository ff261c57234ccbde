"""``bench.risk_restart`` on a small ledger: the start from the sealed account-risk snapshot applies
only the tail and reaches the rebuild's state (the benchmark fails otherwise), and its figures are
written where asked."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from bench import risk_restart


def test_the_benchmark_starts_from_the_snapshot_and_reaches_the_rebuilds_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "risk.json"
    argv = ["risk_restart", "--decisions", "1500", "--tail", "300", "--accounts", "300", "--json", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    assert risk_restart.main() == 0
    assert "bit for bit equal" in capsys.readouterr().out
    doc = orjson.loads(out.read_bytes())
    assert (doc["decisions"], doc["tail"], doc["tail_applied"]) == (1500, 300, 300)
    assert doc["accounts"] > 0 and doc["file_bytes"] > 0


def test_a_tail_as_long_as_the_log_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["risk_restart", "--decisions", "200", "--tail", "200"])
    with pytest.raises(SystemExit) as got:
        risk_restart.main()
    assert got.value.code == 2
