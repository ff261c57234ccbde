"""``sealtrail demo``: simulate, score through the pipeline, checkpoint, verify; re-runs append."""

from __future__ import annotations

import os
import re
import shlex
import ssl
import subprocess
import sys
from pathlib import Path

import httpx

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
    explained = first["explained"]  # the held and high-scored decisions say why, and the bundle rechecks it
    assert explained["decisions"] > 0 and bundle["explained"] >= explained["decisions"]
    assert explained["example"]["reasons"] and explained["example"]["decision"] in (
        "ALLOW", "REVIEW", "HOLD", "BLOCK")

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
    # appended, nothing re-bootstrapped: the first run's export (the empty summary it seals as its
    # window's right edge, then its export.created record), then this run's 25 decisions in one
    # batch, sealed with that batch's summary and state delta, then the state snapshot of its clean stop
    assert cli.kinds(first["ledger_size"], second["ledger_size"]) == [
        "decision.summary", "export.created", *["decision"] * 25, "decision.summary", "state.delta",
        "state.snapshot"]
    assert second["ledger_size"] == first["ledger_size"] + 2 + 25 + 3
    assert second["export"]["replayed"] == 25  # the bundle holds that run's decisions only
    assert second["simulation"]["seed"] != first["simulation"]["seed"]
    assert second["verify"]["size"] == second["ledger_size"]
    everything = cli.json("traces", "query", "--principal", scorer.fingerprint_sha256, "--limit", "1000")
    assert len(everything["items"]) == 85

    human = cli("demo", "--transactions", "10", "--certs", str(certs), "--exports", str(exports)).stdout
    # the second export's two entries, 10 decisions, their summary, state delta and state snapshot
    size = f"{second['ledger_size'] + 2 + 10 + 3}"
    for word in ("outcomes", "top rules", "p50", "p99", "verified", "sealtrail export verify", size):
        assert word in human


def test_demo_without_a_usable_database_exits_2(tmp_path: Path) -> None:
    cli = Cli(Db("postgresql+nosuchdriver://x/y", "postgresql"), tmp_path / "keys")
    assert cli.json("demo", "--transactions", "5", "--certs", str(tmp_path / "c"), code=2)["ok"] is False
    cli("demo", "--transactions", "0", code=2)


def _serving(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Start a server from ``argv``; (process, URL) once it prints its ready line."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the ready line, or "" if it exited
    if not line.startswith("sealtrail serving on "):
        proc.kill()
        raise AssertionError(f"serve did not start: {line!r} {proc.communicate(timeout=30)}")
    return proc, line.removeprefix("sealtrail serving on ").strip()


def test_the_commands_the_demo_prints_run_as_printed(tmp_path: Path) -> None:
    """The quick start, copied: ``make demo``'s job in a fresh directory, then each command it
    prints, exactly as printed, from that directory; the server it suggests (on a free port here)
    lists the bundle the demo wrote and serves it."""
    script = Path(sys.executable).parent / "sealtrail"
    sealtrail = [str(script)] if script.is_file() else [sys.executable, "-m", "api.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")}
    demo = subprocess.run([*sealtrail, "demo", "--transactions", "80"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr
    verify = re.search(r"check it yourself: (.+)$", demo.stdout, re.MULTILINE)
    serve = re.search(r"^console     (.+)$", demo.stdout, re.MULTILINE)
    assert verify is not None and serve is not None, demo.stdout
    bundle = re.search(r"exports/([0-9a-f-]{36})\.zip", verify.group(1))
    assert bundle is not None and (tmp_path / "exports" / f"{bundle.group(1)}.zip").is_file()

    checked = subprocess.run(shlex.split(verify.group(1)), cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
    assert checked.returncode == 0 and checked.stdout.startswith("VERIFIED bundle"), checked.stderr

    queue = re.search(r"^officer     the alert queue: (.+?)  \(in the console", demo.stdout, re.MULTILINE)
    case = re.search(r"a case and its history: (.+)$", demo.stdout, re.MULTILINE)
    assert queue is not None and case is not None, demo.stdout
    for line in (queue.group(1), case.group(1)):  # the officer's path, as printed
        done = subprocess.run(shlex.split(line), cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0 and done.stdout, (line, done.stderr)

    argv = shlex.split(serve.group(1))
    assert argv[argv.index("--port") + 1] == "8443"
    proc, url = _serving([*argv, "--port", "0"], tmp_path, env)  # the last --port wins
    try:
        certs = tmp_path / "demo" / "certs"
        tls = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        tls.load_cert_chain(str(certs / "officer.pem"), str(certs / "officer.key"))
        with httpx.Client(base_url=url, verify=tls, timeout=30) as officer:
            page = officer.get("/console/exports")
            assert page.status_code == 200
            assert f'href="/v1/exports/{bundle.group(1)}"' in page.text
            assert "not on this server" not in page.text
            download = officer.get(f"/v1/exports/{bundle.group(1)}")
            assert download.status_code == 200
            assert download.content == (tmp_path / "exports" / f"{bundle.group(1)}.zip").read_bytes()
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_the_printed_commands_repeat_locations_given_on_the_command_line(tmp_path: Path) -> None:
    db = Db(f"sqlite:///{tmp_path / 'elsewhere.db'}", "sqlite")
    cli = Cli(db, tmp_path / "my keys")
    doc = cli.json("demo", "--transactions", "5", "--certs", str(tmp_path / "c"),
                   "--exports", str(tmp_path / "bundles"))
    serve = shlex.split(doc["commands"]["serve"])
    for option, value in (("--db", db.url), ("--keys", str(tmp_path / "my keys")),
                          ("--exports-dir", str(tmp_path / "bundles"))):
        assert serve[serve.index(option) + 1] == value, option
    assert Path(doc["export"]["file"]).parent == tmp_path / "bundles"
    verify = shlex.split(doc["commands"]["verify_export"])
    bundle, key = doc["export"]["file"], doc["init"]["vkey"]
    assert verify[verify.index("verify") + 1:] == [bundle, "--trusted-key", key]
