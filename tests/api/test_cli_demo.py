"""``sealtrail demo``: simulate, score through the pipeline, checkpoint, verify; re-runs append."""

from __future__ import annotations

from pathlib import Path

from audit.decide.principal import Principal
from ledger.checkpoint import SignedCheckpoint
from ledger.note import NoteVerifier
from tests.api.test_cli_score import Cli
from tests.conftest import Db


def test_demo_runs_end_to_end_and_a_second_run_appends(db: Db, tmp_path: Path) -> None:
    cli = Cli(db, tmp_path / "keys")
    certs = tmp_path / "certs"
    exports = tmp_path / "exports"
    first = cli.json("demo", "--transactions", "60", "--certs", str(certs), "--exports", str(exports))
    assert first["ok"] is True and first["init"]["created"] is True and first["certs"]["created"] is True
    assert first["decisions"] == first["simulation"]["transactions"] == 60
    assert sum(o["count"] for o in first["outcomes"].values()) == 60
    assert round(sum(o["percent"] for o in first["outcomes"].values())) == 100
    assert first["verify"]["verified"] is True and first["verify"]["size"] == first["ledger_size"]
    assert set(first["simulation"]["typologies"]) >= {"normal", "structuring", "fan_in"}
    assert first["laundering"]["transactions"] == 60 - first["simulation"]["typologies"]["normal"]
    assert 0 < first["latency_us"]["p50"] <= first["latency_us"]["p99"]
    assert first["throughput_per_s"] > 0
    bundle = first["export"]  # the run's decisions as a bundle, verified offline with the pinned key
    assert bundle["verified"] is True and bundle["replayed"] == 60 and Path(bundle["file"]).parent == exports
    assert bundle["trusted_key"] == first["init"]["vkey"]
    assert all(r["count"] > 0 for r in first["top_rules"])

    vkey = NoteVerifier.from_vkey(first["init"]["vkey"])
    cp = SignedCheckpoint.verify(first["checkpoint"], [vkey], first["init"]["origin"]).checkpoint
    assert cp.size == first["ledger_size"]

    scorer = Principal.from_pem((certs / "scorer.pem").read_bytes())
    assert first["certs"]["principal"] == scorer.to_json()
    sealed = cli.json("traces", "query", "--principal", scorer.fingerprint_sha256, "--limit", "100")
    assert len(sealed["items"]) == 60 and sealed["next_cursor"] is None

    pem = (certs / "scorer.pem").read_bytes()
    second = cli.json("demo", "--transactions", "25", "--certs", str(certs), "--exports", str(exports))
    assert second["init"]["created"] is False and second["certs"]["created"] is False
    assert (certs / "scorer.pem").read_bytes() == pem  # existing certificates are kept
    # appended (plus the first run's export.created record), nothing re-bootstrapped
    assert second["ledger_size"] == first["ledger_size"] + 1 + 25
    assert second["export"]["replayed"] == 25  # the bundle holds that run's decisions only
    assert second["simulation"]["seed"] != first["simulation"]["seed"]
    assert second["verify"]["size"] == second["ledger_size"]
    everything = cli.json("traces", "query", "--principal", scorer.fingerprint_sha256, "--limit", "1000")
    assert len(everything["items"]) == 85

    human = cli("demo", "--transactions", "10", "--certs", str(certs), "--exports", str(exports)).stdout
    size = f"{second['ledger_size'] + 1 + 10}"
    for word in ("outcomes", "top rules", "p50", "p99", "verified", "sealtrail export verify", size):
        assert word in human


def test_demo_without_a_usable_database_exits_2(tmp_path: Path) -> None:
    cli = Cli(Db("postgresql+nosuchdriver://x/y", "postgresql"), tmp_path / "keys")
    assert cli.json("demo", "--transactions", "5", "--certs", str(tmp_path / "c"), code=2)["ok"] is False
    cli("demo", "--transactions", "0", code=2)
