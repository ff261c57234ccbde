"""``sealtrail demo``: sample sanctions lists sealed, simulate, score through the pipeline, crafted
payments that meet the lists, a good-guy clearance by two officers and the payments after it,
checkpoint, verify; re-runs append."""

from __future__ import annotations

import os
import re
import shlex
import ssl
import subprocess
import sys
import tomllib
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from api.cli.demo_sanctions import CLEARANCE_DAYS, FOLLOW_UPS, LISTS, LISTS_DIR, PAYMENTS
from audit.decide.principal import Principal
from ledger.checkpoint import SignedCheckpoint
from ledger.note import NoteVerifier
from tests.api.test_cli_score import Cli
from tests.conftest import Db

ROOT = Path(__file__).resolve().parents[2]
LIST_NAMES = ["demo-ofac-sdn", "demo-un", "demo-eu", "demo-uk", "demo-bank-internal"]
NAQDI = ("demo-ofac-sdn", "12057", "Mohammad Reza NAQDI", "name")
# each crafted payment: its decision, the sanctions rule fired, and the list, entry, listed value and
# basis of its best hit
EXPECTED = {
    "unlisted": ("ALLOW", None, None),
    "listed_name": ("HOLD", "SANCTIONS_NAME_STRONG", NAQDI),
    "cyrillic": ("HOLD", "SANCTIONS_NAME_STRONG", NAQDI),
    "surname_first": ("HOLD", "SANCTIONS_NAME_STRONG", NAQDI),
    "remittance_text": ("HOLD", "SANCTIONS_NAME_STRONG",
                        ("demo-uk", "AFG0001", "HAJI KHAIRULLAH HAJI SATTAR MONEY EXCHANGE", "text")),
    "party_identifier": ("BLOCK", "SANCTIONS_IDENTIFIER_MATCH",
                         ("demo-bank-internal", "DEMO-0001", "DX4417305", "identifier")),
    "agent_bic": ("BLOCK", "SANCTIONS_BIC_MATCH", ("demo-bank-internal", "DEMO-0002", "SLTDKYKY", "bic")),
}
CRAFTED = len(PAYMENTS)
AFTER = len(FOLLOW_UPS)  # decided once the clearance is in force
SCORER_SENT = CRAFTED + AFTER  # the demo's own payments, besides the simulated ones


def check_clearance(doc: dict[str, Any], certs: Path) -> dict[str, Any]:
    """The demo's ``sanctions.clearance``: the held listed name's beneficiary cleared of that hit,
    proposed by the local operator and approved by the dev officer certificate (another person, with a
    fingerprint); that customer's next payment is not held and its record names the clearance, while
    the same name at another account is still held."""
    c = doc["sanctions"]["clearance"]
    held = next(x for x in doc["sanctions"]["payments"] if x["case"] == "listed_name")
    assert (c["status"], c["trace_id"], c["where"], c["list"], c["entry_id"]) == (
        "approved", held["trace_id"], "beneficiary", NAQDI[0], NAQDI[1])
    officer = Principal.from_pem((certs / "officer.pem").read_bytes())
    assert c["approver"]["fingerprint_sha256"] == officer.fingerprint_sha256
    assert c["approver"]["subject"] == officer.subject
    assert c["proposer"]["fingerprint_sha256"] != officer.fingerprint_sha256
    assert c["proposer"]["subject"].startswith("CN=local:")
    assert c["approved_seq"] > c["seq"] > held["seq"] and c["revoked_seq"] is None
    sim = doc["simulation"]  # the run's payments are received at the hour it started: the end of its days
    day = (datetime.fromisoformat(sim["start"]) + timedelta(days=sim["days"])).date()
    assert date.fromisoformat(c["until"]) == day + timedelta(days=CLEARANCE_DAYS)
    got = {x["case"]: x for x in c["payments"]}
    assert list(got) == [p.case for p in FOLLOW_UPS] == ["cleared_customer", "other_account"]
    again, other = got["cleared_customer"], got["other_account"]
    assert again["decision"] == "ALLOW" and again["sanctions_rule"] is None, again
    assert not any(r.startswith("SANCTIONS_") for r in again["rules"]) and again["hits"] == [], again
    (cleared,) = again["cleared"]
    assert (cleared["list"], cleared["entry_id"], cleared["matched"], cleared["basis"]) == NAQDI
    assert (cleared["where"], cleared["clearance_seq"]) == ("beneficiary", c["seq"])
    assert (other["decision"], other["sanctions_rule"], other["cleared"]) == (
        "HOLD", "SANCTIONS_NAME_STRONG", []), other
    assert (other["hits"][0]["list"], other["hits"][0]["entry_id"]) == NAQDI[:2]
    return c


def check_sanctions(doc: dict[str, Any], *, sealed_now: bool) -> None:
    """The demo's ``sanctions``: the sample lists in force, and each crafted payment decided as
    expected, the record naming the list, entry and listed value of its hit."""
    sanctions = doc["sanctions"]
    assert [x["name"] for x in sanctions["lists"]] == LIST_NAMES
    assert [x["format"] for x in sanctions["lists"]] == [
        "ofac-xml", "un-xml", "eu-xml", "uk-xml", "internal-csv"]
    assert all(x["sealed_now"] is sealed_now and x["entries"] > 0 for x in sanctions["lists"])
    assert sanctions["simulated"]["decisions"] == doc["decisions"]
    got = {x["case"]: x for x in sanctions["payments"]}
    assert list(got) == list(EXPECTED)
    for case, (decision, rule, hit) in EXPECTED.items():
        x = got[case]
        assert (x["decision"], x["sanctions_rule"]) == (decision, rule), (case, x)
        if hit is None:
            assert x["hits"] == [] and not any(r.startswith("SANCTIONS_") for r in x["rules"]), (case, x)
            continue
        best = x["hits"][0]
        assert (best["list"], best["entry_id"], best["matched"], best["basis"]) == hit, (case, x)
        assert best["score"] >= (920 if best["basis"] in ("name", "text") else 1000), (case, x)


def test_demo_runs_end_to_end_and_a_second_run_appends(db: Db, tmp_path: Path) -> None:
    cli = Cli(db, tmp_path / "keys")
    certs = tmp_path / "certs"
    exports = tmp_path / "exports"
    first = cli.json("demo", "--transactions", "60", "--certs", str(certs), "--exports", str(exports))
    assert first["ok"] is True and first["init"]["created"] is True and first["certs"]["created"] is True
    assert first["decisions"] == first["simulation"]["transactions"] == 60
    check_sanctions(first, sealed_now=True)
    cleared = check_clearance(first, certs)
    assert sum(o["count"] for o in first["outcomes"].values()) == 60
    assert round(sum(o["percent"] for o in first["outcomes"].values())) == 100
    assert first["verify"]["verified"] is True and first["verify"]["size"] == first["ledger_size"]
    assert set(first["simulation"]["typologies"]) >= {"normal", "structuring", "fan_in"}
    assert first["laundering"]["transactions"] == 60 - first["simulation"]["typologies"]["normal"]
    assert 0 < first["latency_us"]["p50"] <= first["latency_us"]["p99"]
    assert first["throughput_per_s"] > 0
    bundle = first["export"]  # the run's decisions as a bundle, verified offline with the pinned key
    assert bundle["verified"] is True and bundle["replayed"] == 60 + SCORER_SENT
    assert bundle["rescreened"] == 60 + SCORER_SENT and Path(bundle["file"]).parent == exports
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
    assert len(sealed["items"]) == 60 + SCORER_SENT and sealed["next_cursor"] is None
    lists = cli.json("lists", "show")["lists"]  # sealed by the local operator, as `lists load` would
    assert sorted(x["name"] for x in lists) == sorted(LIST_NAMES)
    assert all(x["rationale"] == "demo: sample lists in each official format" for x in lists)
    # the clearance as the ledger states it, and the cleared payment's sealed record names it
    (sealed_clearance,) = cli.json("clearances", "show")["clearances"]
    assert sealed_clearance == {k: v for k, v in cleared.items()
                                if k not in ("payments", "approval_rationale")}
    again = next(x for x in cleared["payments"] if x["case"] == "cleared_customer")
    screening = cli.json("traces", "show", again["trace_id"])["record"]["record"]["screening"]
    assert [x["clearance_seq"] for x in screening["cleared"]] == [cleared["seq"]] and screening["hits"] == []

    pem = (certs / "scorer.pem").read_bytes()
    second = cli.json("demo", "--transactions", "25", "--certs", str(certs), "--exports", str(exports))
    assert second["init"]["created"] is False and second["certs"]["created"] is False
    assert (certs / "scorer.pem").read_bytes() == pem  # existing certificates are kept
    # appended, nothing re-bootstrapped and no list sealed again (the same bytes are in force): the
    # first run's export (the empty summary it seals as its window's right edge, then its
    # export.created record), then this run's 25 decisions in one batch and the crafted payments in
    # another, each sealed with its batch's summary and state delta, the clearance's proposal and
    # approval, the two payments after it in a batch of their own, then the state snapshot and the
    # account-risk snapshot of its clean stop
    assert cli.kinds(first["ledger_size"], second["ledger_size"]) == [
        "decision.summary", "export.created", *["decision"] * 25, "decision.summary", "state.delta",
        *["decision"] * CRAFTED, "decision.summary", "state.delta",
        "screening.clearance", "screening.clearance", *["decision"] * AFTER, "decision.summary",
        "state.delta", "state.snapshot", "state.account-risk"]
    assert second["ledger_size"] == first["ledger_size"] + 2 + 25 + 2 + CRAFTED + 2 + 2 + AFTER + 4
    # the second run's crafted payments pay customers of their own: the first run's clearance clears
    # none of them, and this run's listed name is held and cleared again
    check_sanctions(second, sealed_now=False)
    assert check_clearance(second, certs)["seq"] > cleared["approved_seq"]
    assert second["export"]["replayed"] == 25 + SCORER_SENT  # the bundle holds that run's decisions only
    assert second["simulation"]["seed"] != first["simulation"]["seed"]
    assert second["verify"]["size"] == second["ledger_size"]
    everything = cli.json("traces", "query", "--principal", scorer.fingerprint_sha256, "--limit", "1000")
    assert len(everything["items"]) == 85 + 2 * SCORER_SENT

    human = cli("demo", "--transactions", "10", "--certs", str(certs), "--exports", str(exports)).stdout
    # the second export's two entries, 10 decisions and the crafted ones, each batch's summary and
    # state delta, the clearance's two records and the payments after it, and the state and
    # account-risk snapshots
    size = f"{second['ledger_size'] + 2 + 10 + 2 + CRAFTED + 2 + 2 + AFTER + 4}"
    for word in ("outcomes", "top rules", "p50", "p99", "verified", "sealtrail export verify", size,
                 "sealed by an earlier run", "screened again"):
        assert word in human
    sanctions = human[human.index("\nsanctions   "):]
    for p in PAYMENTS:  # one line per crafted payment: what it shows, its decision and the rule and hit
        decision, rule, hit = EXPECTED[p.case]
        line = next(x for x in sanctions.splitlines() if x.strip().startswith(p.shows))
        assert decision in line and (rule or "no sanctions rule") in line, line
        assert hit is None or f"{hit[0]} entry {hit[1]} {hit[2]!r}" in line, line
    # the clearance, who approved it, and the two payments after it: one cleared, one still held
    clearance = next(x for x in sanctions.splitlines() if x.strip().startswith("good-guy clearance"))
    assert "approved by CN=sealtrail-officer" in clearance and "proposed by CN=local:" in clearance, clearance
    after = {p.case: next(x for x in sanctions.splitlines() if x.strip().startswith(p.shows))
             for p in FOLLOW_UPS}
    assert "ALLOW" in after["cleared_customer"] and "hit cleared by clearance" in after["cleared_customer"]
    assert "HOLD" in after["other_account"] and "SANCTIONS_NAME_STRONG" in after["other_account"]


def test_the_demo_lists_are_the_vectors_and_ship_with_the_package() -> None:
    """The official-format samples are the test vectors byte for byte (their provenance is theirs);
    every file the demo seals is package data, and its README says where each one comes from."""
    for spec in LISTS:
        data = (LISTS_DIR / spec.file).read_bytes()
        if spec.format != "internal-csv":  # the bank's CSV is the demo's own
            assert data == (ROOT / "tests" / "vectors" / "sanctions" / spec.file).read_bytes(), spec.file
    readme = (LISTS_DIR / "README.md").read_text("utf-8")
    assert all(f"`{spec.file}`" in readme and f"`{spec.name}`" in readme for spec in LISTS)
    assert "tests/vectors/sanctions/README.md" in readme
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "cli/demo_lists/*" in package_data["api"]
    assert LISTS_DIR == ROOT / "api" / "cli" / "demo_lists"


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
