"""``sealtrail clearances``: an operator proposes a good-guy clearance of a held payment's name hit,
lists the clearances and revokes one, from the command line (``--json``); approving is a second
officer's step over the HTTP API, never the local operator's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.cli import app
from tests.api.cli.test_cli_lists import db, run, runner  # noqa: F401 - the fixture
from tests.audit.screening.test_screening_decisions import LIST, MT103


def test_propose_show_and_revoke_a_clearance_and_no_approval_from_the_cli(db: list[str],  # noqa: F811
                                                                           tmp_path: Path) -> None:
    (tmp_path / "list.csv").write_bytes(LIST)
    run("lists", "load", str(tmp_path / "list.csv"), "--format", "internal-csv", "--name", "bank-exits",
        "--published", "2026-11-30", "--rationale", "exit list", *db)
    raw = MT103.format(n=1, bene="KOVALEV ALEKSANDR", orig_id="NIDN/DE/T22000129", bank="DEUTDEFF",
                       text="/RFB/INV-1")
    (tmp_path / "pay.fin").write_text(raw)
    scored = run("score", str(tmp_path / "pay.fin"), *db)
    (d,) = scored["decisions"]
    assert d["decision"] == "HOLD"
    until = (datetime.now(UTC).date() + timedelta(days=90)).isoformat()
    c = run("clearances", "propose", d["trace_id"], "--where", "beneficiary", "--list", "bank-exits",
            "--entry", "B-1", "--until", until, "--rationale", "born 1984: another person", *db)
    assert (c["status"], c["until"], c["proposer"]["subject"][:9]) == ("proposed", until, "CN=local:")
    refused = run("clearances", "propose", d["trace_id"], "--where", "beneficiary", "--list", "bank-exits",
                  "--entry", "B-2", "--until", until, "--rationale", "x", *db, code=1)
    assert refused["field"] == "entry_id"
    assert [x["seq"] for x in run("clearances", "show", *db)["clearances"]] == [c["seq"]]
    gone = run("clearances", "revoke", str(c["seq"]), "--rationale", "proposed in error", *db)
    assert gone["status"] == "revoked"
    assert runner.invoke(app, ["clearances", "approve", str(c["seq"])]).exit_code == 2  # no such command
