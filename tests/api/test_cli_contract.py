"""The CLI's contract, command by command (docs/cli.md, DESIGN "Interfaces that users script
against"): exit 0 success, 1 refused input or "does not verify", 2 usage or configuration; with
``--json`` exactly one JSON object on stdout carrying ``"ok"``, on failure too; never a traceback.

Every command of the typer app is enumerated: one without a bad-input case here fails the test.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.cli import app, package_version
from api.config import Settings

runner = CliRunner()
REPO = Path(__file__).parents[2]


def commands(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the app as (path, click command)."""
    group = group or typer.main.get_command(app)
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


ALL = [p for p, _ in commands()]


@dataclass(frozen=True)
class Env:
    tmp: Path
    db: list[str]  # --db/--keys of an initialised ledger
    absent: list[str]  # --db/--keys of nothing at all

    def file(self, name: str, data: str | bytes) -> str:
        p = self.tmp / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(p)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    tmp = tmp_path_factory.mktemp("contract")
    db = ["--db", f"sqlite:///{tmp / 'ledger.db'}", "--keys", str(tmp / "keys")]
    res = runner.invoke(app, ["init", *db])
    assert res.exit_code == 0, res.output
    return Env(tmp, db, ["--db", f"sqlite:///{tmp / 'absent.db'}", "--keys", str(tmp / "no-keys")])


DEEP = "junk = " + "[" * 500 + "]" * 500  # about 1 KB; crashed rules compile with RecursionError


def bad_inputs(e: Env) -> dict[tuple[str, ...], list[tuple[list[str], int]]]:
    """Per command: arguments that must be refused, and the exit code the contract says."""
    junk = e.file("junk.txt", "this is no payment message, ruleset, module or certificate\n")
    deep = e.file("deep.toml", DEEP)
    cases = e.file("cases.jsonl", '{"case": "x", "features": {}, "expect": {"decision": "ALLOW"}}\n')
    wat = str(REPO / "wasm_rules" / "examples" / "threshold.wat")
    pack = str(REPO / "wasm_rules" / "packs" / "aml_core.toml")
    out = str(e.tmp / "out.bin")
    return {
        ("init",): [(["--db", "nosuchdriver://x/y", "--keys", str(e.tmp / "k2")], 2)],
        ("ledger", "verify"): [(e.absent, 2), ([*e.db, "--trusted-key", "not-a-key"], 2)],
        ("ledger", "checkpoint"): [(e.absent, 2)],
        ("ledger", "prove"): [(["nonsense", *e.db], 2), (["99999", *e.db], 1)],
        ("ledger", "consistency"): [(["x", "1", *e.db], 2), (["1", "99999", *e.db], 1)],
        ("ledger", "backup"): [(["--to", str(e.tmp / "ledger.db"), *e.db], 2),
                               (["--to", str(e.tmp / "b.db"), *e.absent], 2)],
        ("ledger", "backup-verify"): [([junk], 1), ([str(e.tmp / "no-backup.db")], 2)],
        ("ledger", "cosign"): [([*e.db, "--witnesses", junk], 2), ([*e.absent, "--witnesses", junk], 2)],
        ("witness", "init"): [(["--config", junk, "--name", "w", "--log-key", "x"], 2),
                              (["--config", str(e.tmp / "w.toml"), "--name", "w", "--log-key", "x"], 2)],
        ("witness", "serve"): [(["--config", junk], 2)],
        ("standby", "status"): [(e.absent, 2)],
        ("webhooks", "deliver"): [(["--once", *e.db], 2), (["--once", "--webhooks", junk, *e.db], 2)],
        ("webhooks", "status"): [(["--webhooks", junk, *e.db], 2)],
        ("webhooks", "enable"): [(["core", "--webhooks", junk, *e.db], 2)],
        ("webhooks", "secret"): [([junk], 1), ([str(e.tmp / "no-such-dir" / "s.whsec")], 2)],
        ("standby", "promote"): [(e.db, 2), (e.absent, 2)],  # SQLite has no standby to promote
        ("follow",): [(["--once"], 2),
                      (["--standby-db", "sqlite:////nonexistent.db", "--primary-db", "sqlite:////nonexistent.db",
                        "--trusted-key", "not-a-key", "--state-dir", str(e.tmp / "follow"), "--once"], 2)],
        ("witness", "evidence"): [(["--config", junk], 2), (["--config", str(e.tmp / "no.toml")], 2)],
        ("keys", "show"): [(e.absent, 2)],
        ("keys", "rotate"): [(e.absent, 2)],
        ("keys", "revoke"): [(["--vkey", "x+00000000+AQ==", "--reason", "r", *e.absent], 2),
                             (["--reason", "no vkey", *e.absent], 2)],
        ("retention", "purge"): [(e.absent, 2), ([*e.db, "--days", "0"], 2)],
        ("retention", "erase"): [(["ab" * 32, "--reason", "order 1", *e.db], 1)],
        ("retention", "hold"): [(["h1", "--from", "0", "--to", "1", *e.db], 2)],  # no --reason
        ("retention", "release"): [(["no-such-hold", "--reason", "r", *e.db], 1)],
        ("retention", "holds"): [(e.absent, 2)],
        ("rules", "compile"): [([deep, "-o", out], 1), ([junk, "-o", out], 1)],
        ("rules", "test"): [([deep, cases], 1), ([pack, junk], 1)],
        ("rules", "inspect"): [([junk], 1), ([e.file("bad.wasm", b"\0asm\x02\0\0\0")], 1)],
        ("parse",): [([junk], 1), ([junk, "--format", "csv"], 2)],
        ("features",): [([junk], 1), ([wat, "--at", "yesterday"], 2)],
        ("model", "train"): [(["--seed", "seven"], 2)],
        ("model", "card"): [(["--model", str(e.tmp / "no-model")], 1)],
        ("certs", "dev"): [(["--out", junk], 2)],
        ("certs", "show"): [([junk], 1)],
        ("serve",): [(e.absent, 2)],  # no TLS and no proxy: refused before anything opens
        ("score",): [([junk, *e.db], 1), ([junk, "--priority", "P9", *e.db], 2)],
        ("traces", "query"): [(["--since", "yesterday", *e.db], 1), (e.absent, 2)],
        ("traces", "show"): [(["01890a5d-ac96-774b-bcce-b302099a8057", *e.db], 1)],
        ("traces", "refusals"): [(["--format", "mt940", *e.db], 1), (e.absent, 2)],
        ("alerts", "list"): [(["--view", "later", *e.db], 1), (["--view", "mine", *e.db], 2), (e.absent, 2)],
        ("alerts", "act"): [(["nonsense", "comment", *e.db], 2),
                            (["99999", "comment", "--rationale", "x", *e.db], 1)],
        ("cases", "show"): [(["99999", *e.db], 1), (e.absent, 2)],
        ("cases", "act"): [(["1", "file_report", *e.db], 2),
                           (["99999", "comment", "--rationale", "x", *e.db], 1)],
        ("cases", "policy", "set"): [([junk, "--rationale", "r", *e.db], 1), ([junk, *e.db], 2)],
        ("cases", "policy", "show"): [(e.absent, 2)],
        ("outcomes",): [(["--limit", "0", *e.db], 1), (e.absent, 2)],
        ("lists", "load"): [([junk, "--format", "ofac-xml", "--name", "ofac-sdn", "--rationale", "r",
                              *e.db], 1),
                            ([junk, "--format", "pdf", "--name", "x", "--rationale", "r", *e.db], 2),
                            ([junk, "--format", "internal-csv", "--name", "Bad Name", "--rationale", "r",
                              *e.db], 1)],
        ("lists", "show"): [(e.absent, 2)],
        ("lists", "history"): [(["never-loaded", *e.db], 1), (["x", *e.absent], 2)],
        ("lists", "diff"): [(["never-loaded", *e.db], 1), (["x", "--from", "one", *e.db], 2)],
        ("lists", "withdraw"): [(["never-loaded", "--rationale", "r", *e.db], 1), (["x", *e.db], 2)],
        ("clearances", "propose"): [(["0193aaaa-0000-7000-8000-000000000000", "--where", "beneficiary",
                                      "--list", "x", "--entry", "y", "--until", "2026-12-31",
                                      "--rationale", "r", *e.db], 1),
                                     (["t", "--where", "beneficiary", *e.db], 2)],
        ("clearances", "show"): [(e.absent, 2)],
        ("clearances", "revoke"): [(["99999", "--rationale", "r", *e.db], 1),
                                    (["one", "--rationale", "r"], 2)],
        ("reports", "draft"): [(["1", "--reason", "r", "--indicator", "X", *e.db], 2),
                               (["1", "--reason", "r", "--indicator", "X", "--rate", "usd", *e.db], 2)],
        ("reports", "file"): [(["1", junk, "--rationale", "r", *e.db], 1)],
        ("reports", "list"): [(["999", *e.db], 1), (["1", *e.absent], 2)],
        ("demo",): [(["--transactions", "5", "--db", "nosuchdriver://x/y", "--keys", str(e.tmp / "k3"),
                      "--certs", str(e.tmp / "c"), "--exports", str(e.tmp / "x")], 2)],
        ("export", "create"): [(["--from", "yesterday", "--to", "today", "--out", out, *e.db], 1)],
        ("export", "verify"): [([junk], 2), ([wat], 2)],
        ("compliance", "report"): [(["--from", "yesterday", "--to", "2026-12-01", *e.db], 1),
                                   (["--from", "2026-12-02", "--to", "2026-12-01", *e.db], 1),
                                   (["--from", "2026-12-01", "--to", "2026-12-02", *e.absent], 2),
                                   (["--from", "2026-12-01", *e.db], 2)],
    }


def refused(args: list[str], code: int) -> dict[str, Any]:
    """Invoke with --json; check the contract; return the one JSON object."""
    res = runner.invoke(app, [*args, "--json"])
    shown = f"{args}: exit {res.exit_code}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert res.exit_code == code, shown
    assert res.exception is None or isinstance(res.exception, SystemExit), shown
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, shown
    doc = json.loads(res.stdout)  # exactly one JSON value, nothing else on stdout
    assert isinstance(doc, dict) and doc["ok"] is False and doc["error"] and doc["message"], shown
    assert "error" in res.stderr.lower(), shown  # and a message for the person at the terminal
    return doc


def test_every_command_has_a_bad_input_case(env: Env) -> None:
    assert set(ALL) == set(bad_inputs(env)), "a command without a case here, or a case without a command"
    for path, cmd in commands():
        assert any(p.name == "as_json" for p in cmd.params), f"{' '.join(path)} has no --json"


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_bad_input_gives_one_json_object_with_ok_false_and_the_contract_exit_code(
        env: Env, path: tuple[str, ...]) -> None:
    for args, code in bad_inputs(env)[path]:
        refused([*path, *args], code)


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_a_usage_error_answers_in_json_too(path: tuple[str, ...]) -> None:
    doc = refused([*path, "--no-such-option"], 2)
    assert doc["error"] == "usage" and "--no-such-option" in doc["message"]


def test_reported_crashes_are_clean_refusals(env: Env) -> None:
    """The three cases of the issue: a traceback, nothing at all, a RecursionError."""
    wat = str(REPO / "wasm_rules" / "examples" / "threshold.wat")
    inspected = runner.invoke(app, ["rules", "inspect", wat, "--json"])
    assert inspected.exit_code == 0 and json.loads(inspected.stdout)["ok"] is True  # .wat is encoded
    assert json.loads(inspected.stdout)["manifest"]["ruleset_id"] == "threshold_example"
    doc = refused(["ledger", "prove", "nonsense"], 2)
    assert doc["field"] == "SEQ|TRACE_ID"
    doc = refused(["rules", "compile", env.file("deep2.toml", DEEP), "-o", str(env.tmp / "m.wasm")], 1)
    assert "MAX_TOML_NESTING" in doc["message"] and doc["error"] == "RulesetError"


def test_success_json_has_ok_true_beside_the_old_keys(env: Env) -> None:
    for args in (["keys", "show", *env.db], ["ledger", "verify", *env.db], ["retention", "holds", *env.db],
                 ["parse", str(REPO / "tests" / "vectors" / "messages" / "mt" / "mt202.fin")]):
        res = runner.invoke(app, [*args, "--json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["ok"] is True, args
    assert {"transactions", "errors"} <= set(doc)  # parse keeps the keys scripts read


def test_an_unforeseen_error_is_an_internal_error_with_an_incident_not_a_traceback(
        env: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from api import ops

    def boom(*_: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(ops, "keys_show", boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    doc = refused(["keys", "show", *env.db], 2)
    assert doc["error"] == "internal" and doc["exception"] == "ZeroDivisionError"
    assert doc["incident"] in doc["message"] and "please report it" in doc["message"]
    trace = Path(doc["traceback_file"])
    assert trace.parent == tmp_path and stat.S_IMODE(trace.stat().st_mode) == 0o600
    assert "ZeroDivisionError: a bug" in trace.read_text() and "Traceback" in trace.read_text()
    res = runner.invoke(app, ["keys", "show", *env.db])  # without --json: one line, nothing on stdout
    assert res.exit_code == 2 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("error: internal error (ZeroDivisionError: a bug); incident ")


def test_version_from_the_package_metadata() -> None:
    from importlib.metadata import version

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"sealtrail {version('sealtrail')}\n"
    assert package_version() == version("sealtrail")


def test_python_dash_m_runs_the_same_cli() -> None:
    res = subprocess.run([sys.executable, "-m", "api.cli", "--version"], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("sealtrail ")


SETTINGS_OPTIONS = {"--db": "db", "--keys": "keys", "--origin": "origin", "--days": "retention_days",
                    "--host": "host", "--port": "port", "--tls-cert": "tls_cert", "--tls-key": "tls_key",
                    "--client-ca": "client_ca", "--roles": "roles_file", "--backend": "backend",
                    "--proxy-cert-header": "proxy_cert_header", "--trusted-proxy": "trusted_proxies",
                    "--exports": "exports_dir", "--exports-dir": "exports_dir"}


NOT_SETTINGS = {(("demo",), "--exports-dir"),  # an alias, shown with --exports
                (("certs", "dev"), "--host"), (("certs", "dev"), "--days"),  # what a certificate names
                (("certs", "show"), "--roles"),  # a role map to evaluate, not the server's
                # the witness is another service: its address and TLS files are its own (SEALTRAIL_WITNESS_*)
                *((("witness", "serve"), o) for o in ("--host", "--port", "--tls-cert", "--tls-key",
                                                      "--client-ca"))}


def test_settings_backed_options_show_their_variable_and_default_in_help() -> None:
    seen = set()
    for path, cmd in commands():
        for p in cmd.params:
            name = next((o for o in p.opts if o in SETTINGS_OPTIONS), None)
            if name is None or (path, name) in NOT_SETTINGS:
                continue
            seen.add(name)
            field = SETTINGS_OPTIONS[name]
            var = "SEALTRAIL_" + field.upper()
            assert p.envvar == var or var in (p.help or ""), (path, name)
            assert p.show_default not in (None, False, True), (path, name)  # the Settings default, as text
            default = Settings.model_fields[field].get_default(call_default_factory=True)
            if default not in (None, []):
                assert str(default) in str(p.show_default), (path, name, p.show_default)
    assert seen == set(SETTINGS_OPTIONS)
    res = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    for text in ("SEALTRAIL_DB", "sqlite:///./sealtrail.db", "SEALTRAIL_PORT", "8443",
                 "SEALTRAIL_TRUSTED_PROXIES", "SEALTRAIL_EXPORTS_DIR", "./exports"):
        assert text in res.stdout, text


def test_an_option_reads_its_environment_variable(env: Env, tmp_path: Path) -> None:
    variables = {"SEALTRAIL_DB": env.db[1], "SEALTRAIL_KEYS": env.db[3]}
    res = runner.invoke(app, ["keys", "show", "--json"], env=variables)
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"] is True
    res = runner.invoke(app, ["retention", "purge", *env.db, "--json"], env={"SEALTRAIL_RETENTION_DAYS": "0"})
    assert res.exit_code == 2 and "SEALTRAIL_RETENTION_DAYS" in res.stderr  # click names the variable


def test_help_and_version_do_not_load_the_database_layer() -> None:
    code = ("import sys; from api.cli import main; sys.argv = ['sealtrail', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('sqlalchemy', 'numpy', 'wasmtime', 'api.ops', 'api.runtime') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         env={k: v for k, v in os.environ.items() if not k.startswith("SEALTRAIL_")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"
