"""``sealtrail alerts|cases|outcomes``: the officer's queue, actions and cases from the command line,
checked against what ``score`` decided and what the ledger sealed; and the demo's officer path."""

from __future__ import annotations

import getpass
import json
import shlex
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from api import ops
from api.cli import app
from api.cli.cases import ALERT_ACTIONS, CASE_ACTIONS
from api.config import Settings
from audit.annotations import annotate
from audit.decide.principal import Principal
from tests.api.test_cli_score import Cli, sim_array
from tests.conftest import Db

runner = CliRunner()
OFFICER = ("CN=Bob,O=Example Bank", "b2" * 32)
ME = f"CN=local:{getpass.getuser()}"


@pytest.fixture(scope="module")
def scored_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """One ledger (SQLite) with 120 simulated payments scored: 17 alerts (REVIEW, HOLD and BLOCK)
    in 14 cases. Built once; each test works on its own copy."""
    tmp = tmp_path_factory.mktemp("scored")
    cli = Cli(Db(f"sqlite:///{tmp / 'ledger.db'}", "sqlite"), tmp / "keys")
    cli("init")
    f = tmp / "batch.json"
    f.write_bytes(orjson.dumps(sim_array(120, seed=8)))
    rows = cli.json("score", str(f))["decisions"]
    (tmp / "batch.json").unlink()
    return tmp, rows


@pytest.fixture
def cli(scored_once: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> Cli:
    src, _ = scored_once
    shutil.copytree(src, tmp_path / "l")
    return Cli(Db(f"sqlite:///{tmp_path / 'l' / 'ledger.db'}", "sqlite"), tmp_path / "l" / "keys")


@pytest.fixture
def rows(scored_once: tuple[Path, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return scored_once[1]


def alerting(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions that open an alert: REVIEW, HOLD, BLOCK or an account alert."""
    return [r for r in rows if r["decision"] != "ALLOW" or (r.get("account_risk") or {}).get("alerts")]


def walk(cli: Cli, *args: str, limit: int = 4) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: list[str] = []
    while True:
        page = cli.json("alerts", "list", *args, "--limit", str(limit), *cursor)
        assert page["ok"] is True and len(page["items"]) <= limit
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        cursor = ["--cursor", page["next_cursor"]]


def first(cli: Cli, outcome: str) -> dict[str, Any]:
    return walk(cli, "--outcome", outcome, "--order", "oldest", limit=100)[0]


def refused(cli: Cli, *args: str, code: int = 1) -> dict[str, Any]:
    """Run with --json expecting exit ``code``: one object, ``ok`` false, the field named."""
    doc = cli.json(*args, code=code)
    assert doc["ok"] is False and doc["error"] and doc["message"], doc
    assert "field" not in doc or doc["field"] in doc["message"], doc
    return dict(doc)


def test_the_actions_offered_are_the_audit_layers() -> None:
    from audit.cases import state

    assert ALERT_ACTIONS == state.ACTIONS
    assert (*CASE_ACTIONS, "file_report") == state.CASE_ACTIONS


def test_the_queue_lists_every_alert_a_decision_opened_one_page_at_a_time(
        cli: Cli, rows: list[dict[str, Any]]) -> None:
    want = alerting(rows)
    outcomes = Counter(r["decision"] for r in want)
    assert outcomes["REVIEW"] and outcomes["HOLD"] and outcomes["BLOCK"]
    got = walk(cli)  # open, newest first
    assert [a["seq"] for a in got] == sorted((r["seq"] for r in want), reverse=True)
    by_seq = {r["seq"]: r for r in want}
    for a in got:
        r = by_seq[a["seq"]]
        assert (a["trace_id"], a["outcome"], a["fired"], a["state"], a["overdue"], a["assignee"]) == (
            r["trace_id"], r["decision"], r["fired"], "new", False, None)
        assert a["payment"] == ("HELD" if r["decision"] in ("HOLD", "BLOCK") else None)
        assert a["account_alerts"] == (r.get("account_risk") or {}).get("alerts", [])
        assert {"opened_at", "review_due", "filing_due", "case_id", "pending",
                "scorer_fingerprint_sha256"} <= set(a)
    assert [a["seq"] for a in walk(cli, "--order", "oldest", limit=5)] == sorted(by_seq)
    holds = walk(cli, "--outcome", "HOLD", limit=2)
    assert [a["seq"] for a in holds] == sorted((r["seq"] for r in want if r["decision"] == "HOLD"),
                                               reverse=True)
    big = Counter(a["case_id"] for a in got).most_common(1)[0]
    assert big[1] >= 2 and len(walk(cli, "--case", str(big[0]))) == big[1]
    rule = want[0]["fired"][0]
    assert {a["seq"] for a in walk(cli, "--rule", rule)} == {r["seq"] for r in want if rule in r["fired"]}
    assert walk(cli, "--view", "closed") == [] and walk(cli, "--view", "overdue") == []
    human = cli("alerts", "list", "--limit", "3").stdout
    for word in ("seq", "opened", "due", "outcome", "payment", "state", "assignee", "case", "fired",
                 "next cursor: ", str(got[0]["seq"])):
        assert word in human


def test_a_refused_filter_names_its_option(cli: Cli) -> None:
    for args, option in [(("--view", "later"), "--view"), (("--outcome", "MAYBE"), "--outcome"),
                         (("--limit", "0"), "--limit"), (("--limit", "501"), "--limit"),
                         (("--cursor", "bm9wZQ"), "--cursor"), (("--order", "random"), "--order"),
                         (("--rule", "x;drop"), "--rule"), (("--case", "-1"), "--case"),
                         (("--view", "mine", "--me", "zz"), "--me")]:
        doc = refused(cli, "alerts", "list", *args)
        assert doc["error"] == "CaseError" and doc["field"] == option, args
    page = cli.json("alerts", "list", "--limit", "2")
    doc = refused(cli, "alerts", "list", "--view", "closed", "--cursor", page["next_cursor"])
    assert doc["field"] == "--cursor" and "different filter" in doc["message"]
    # mine needs an identity the local CLI does not have: a usage error that says so
    doc = refused(cli, "alerts", "list", "--view", "mine", code=2)
    assert doc["field"] == "--me" and "no certificate" in doc["message"]
    assert refused(cli, "alerts", "list", "--me", "ab" * 32, code=2)["field"] == "--me"


def test_reading_case_state_is_sealed_as_the_local_operator(cli: Cli) -> None:
    from audit.cases.reads import list_reads

    size = cli.size()
    page = cli.json("alerts", "list", "--limit", "3")
    assert cli.kinds(size, cli.size()) == ["case_read"]
    engine = cli.db.engine()
    try:
        (read,) = list_reads(engine).items
        assert read.principal["subject"] == ME and read.reads == [
            {"case": c, "what": "queue"} for c in dict.fromkeys(a["case_id"] for a in page["items"])]
        case_id = page["items"][0]["case_id"]
        before = cli.size()
        shown = cli.json("cases", "show", str(case_id))
        assert list_reads(engine, case_id=case_id).items[0].reads == [{"case": case_id, "what": "case"}]
        others = [c["case_id"] for c in shown["counterparty_cases"]]
        # the counterparties' cases it shows are read too, sealed as a page of the queue is
        assert cli.kinds(before, cli.size()) == ["case_read"] * (2 if others else 1)
        for o in others:
            assert {"case": o, "what": "queue"} in list_reads(engine, case_id=o).items[0].reads
    finally:
        engine.dispose()
    size = cli.size()
    cli.json("alerts", "list", "--view", "closed")  # an empty page reads no case
    cli.json("outcomes")
    cli.json("cases", "policy", "show")
    assert cli.size() == size


def test_the_json_is_the_http_apis(cli: Cli) -> None:
    """Scripts read one shape from the CLI and from the API (``GET /v1/alerts``, ``/v1/cases/{id}``)."""
    from datetime import date

    from api.cli import cases as ours
    from api.routes import cases as http
    from audit.cases.query import case_detail

    if not all(hasattr(http, f) for f in ("alert_json", "case_json", "event_json")):
        pytest.skip("the HTTP alert and case routes are not there yet")
    review = first(cli, "REVIEW")
    cli.json("alerts", "act", str(review["seq"]), "assign", "--assignee-subject", OFFICER[0],
             "--assignee-fingerprint", OFFICER[1])
    cli.json("alerts", "act", str(review["seq"]), "close", "--disposition", "NO_FURTHER_ACTION",
             "--rationale", "documented")  # closed_by too
    engine = cli.db.engine()
    try:
        d = case_detail(engine, review["case_id"])
    finally:
        engine.dispose()
    for today in (date(2026, 1, 1), date(2030, 1, 1)):
        assert [ours.alert_json(a, today) for a in d.alerts] == [http.alert_json(a, today) for a in d.alerts]
    assert ours.case_json(d.case) == http.case_json(d.case)
    assert [ours.event_json(e) for e in d.events] == [http.event_json(e) for e in d.events]


def test_an_action_is_sealed_and_moves_the_alert(cli: Cli) -> None:
    review = first(cli, "REVIEW")
    size = cli.size()
    got = cli.json("alerts", "act", str(review["seq"]), "assign", "--assignee-subject", OFFICER[0],
                   "--assignee-fingerprint", OFFICER[1].upper())
    assert got["ok"] is True and (got["seq"], got["action"], got["alert_seq"], got["case_id"]) == (
        size, "assign", review["seq"], review["case_id"])
    assert len(got["leaf_hash"]) == 64 and got["recorded_at"].endswith("Z")
    assert got["principal"]["subject"] == ME and got["principal"]["fingerprint_sha256"] == ""
    assert (got["alert"]["state"], got["alert"]["assignee"]) == (
        "assigned", {"subject": "CN=Bob,O=Example Bank", "fingerprint_sha256": OFFICER[1]})
    sealed = cli.json("traces", "show", got["trace_id"])  # the receipt names a sealed case_event
    assert (sealed["seq"], sealed["kind"], sealed["leaf_hash"]) == (
        got["seq"], "case_event", got["leaf_hash"])
    assert sealed["record"]["record"]["assignee"]["subject"] == "CN=Bob,O=Example Bank"
    assert [a["seq"] for a in walk(cli, "--view", "mine", "--me", OFFICER[1])] == [review["seq"]]
    assert review["seq"] not in [a["seq"] for a in walk(cli, "--view", "unassigned", limit=50)]

    # the officer's words go with the action; the alert's state decides what applies
    doc = refused(cli, "alerts", "act", str(review["seq"]), "start_review")
    assert doc["error"] == "CaseConflictError" and doc["field"] == "assignee" and "Bob" in doc["message"]
    cli.json("alerts", "act", review["trace_id"], "comment", "--rationale", "asked the branch for KYC")
    closed = cli.json("alerts", "act", str(review["seq"]), "close", "--disposition", "NO_FURTHER_ACTION",
                      "--rationale", "customer documented the source of funds")
    assert (closed["alert"]["state"], closed["alert"]["disposition"]) == ("closed", "NO_FURTHER_ACTION")
    assert ME in json.dumps(closed["alert"]["closed_by"])
    assert [a["seq"] for a in walk(cli, "--view", "closed")] == [review["seq"]]
    doc = refused(cli, "alerts", "act", str(review["seq"]), "escalate", "--rationale", "too late")
    assert doc["error"] == "CaseConflictError" and doc["field"] == "ACTION"
    human = cli("alerts", "act", str(review["seq"]), "reopen", "--rationale", "new information").stdout
    assert f"sealed reopen on alert {review['seq']}" in human and "alert now reopened" in human
    assert cli.kinds(size, cli.size()).count("case_event") == 4


def test_a_refused_action_exits_1_naming_the_field_and_seals_nothing(cli: Cli) -> None:
    review, hold = first(cli, "REVIEW"), first(cli, "HOLD")
    size = cli.size()
    s = str(review["seq"])
    for args, error, field in [
        ((s, "close", "--disposition", "MAYBE", "--rationale", "x"), "CaseError", "--disposition"),
        ((s, "close", "--disposition", "FALSE_POSITIVE"), "CaseError", "--rationale"),  # no rationale
        ((s, "comment", "--rationale", " "), "CaseError", "--rationale"),
        ((s, "comment", "--rationale", "bidi \u202e inside"), "CaseError", "--rationale"),
        ((s, "assign"), "CaseError", "--assignee-subject"),
        ((s, "assign", "--assignee-subject", "CN=x", "--assignee-fingerprint", "xyz"), "CaseError",
         "--assignee-fingerprint"),
        ((s, "assign", "--assignee-subject", "not a DN", "--assignee-fingerprint", "ab" * 32), "CaseError",
         "--assignee-subject"),
        ((s, "comment", "--rationale", "x", "--disposition", "FALSE_POSITIVE"), "CaseError", "--disposition"),
        ((s, "release", "--rationale", "x"), "CaseConflictError", "ACTION"),  # nothing of it is held
        ((str(hold["seq"]), "close", "--disposition", "FALSE_POSITIVE", "--rationale", "fine"),
         "CaseConflictError", "ACTION"),  # the held payment is decided first
        (("999999", "comment", "--rationale", "x"), "CaseNotFoundError", "SEQ|TRACE_ID"),
        (("01890a5d-ac96-774b-bcce-b302099a8057", "comment", "--rationale", "x"), "CaseNotFoundError",
         "SEQ|TRACE_ID"),
    ]:
        doc = refused(cli, "alerts", "act", *args)
        assert (doc["error"], doc["field"]) == (error, field), args
    doc = refused(cli, "cases", "act", "999999", "comment", "--rationale", "x")
    assert (doc["error"], doc["field"]) == ("CaseNotFoundError", "ID")
    for args, field in [(("alerts", "act", s, "fly"), "ACTION"),
                        (("alerts", "act", "nonsense", "comment"), "SEQ|TRACE_ID"),
                        (("alerts", "act", s, "file_report"), "ACTION"),
                        (("cases", "act", str(review["case_id"]), "release"), "ACTION"),
                        (("alerts", "act", s, "assign", "--assignee-subject", "CN=x"),
                         "--assignee-fingerprint")]:
        doc = refused(cli, *args, code=2)
        assert (doc["error"], doc["field"]) == ("usage", field), args
    doc = refused(cli, "cases", "act", str(review["case_id"]), "file_report", code=2)
    assert doc["field"] == "ACTION" and f"sealtrail reports draft {review['case_id']}" in doc["message"]
    assert "--disposition" in cli("alerts", "act", s, "close", "--disposition", "X", "--rationale", "r",
                                  code=1).stderr
    assert cli.size() == size


def test_a_hold_is_released_here_and_a_block_needs_two_certified_officers(cli: Cli) -> None:
    hold, block = first(cli, "HOLD"), first(cli, "BLOCK")
    assert cli.json("outcomes") == {"ok": True, "items": [], "next_cursor": 0}
    released = cli.json("alerts", "act", str(hold["seq"]), "release", "--rationale", "beneficiary verified")
    assert released["alert"]["payment"] == "RELEASED" and released["alert"]["state"] == "new"
    feed = cli.json("outcomes")
    assert feed["items"] == [{"seq": released["seq"], "trace_id": hold["trace_id"], "outcome": "RELEASED",
                              "alert_seq": hold["seq"], "recorded_at": released["recorded_at"]}]
    assert feed["next_cursor"] == released["seq"]
    assert cli.json("outcomes", "--after", str(released["seq"]))["items"] == []
    assert cli.json("outcomes", "--scorer", "ab" * 32)["items"] == []  # another scorer's payments only
    assert hold["trace_id"] in cli("outcomes").stdout

    # a BLOCK is released by two officers with certificates: the local CLI is one person and no one
    size = cli.size()
    for action in (("release", "--rationale", "the hit is a namesake"), ("approve",)):
        doc = refused(cli, "alerts", "act", str(block["seq"]), *action)
        assert (doc["error"], doc["field"]) == ("CaseFourEyesError", "principal"), action
        assert "console" in doc["message"] and "local CLI" in doc["message"], action
    assert cli.size() == size  # refused before anything was sealed
    rejected = cli.json("alerts", "act", str(block["seq"]), "reject", "--rationale", "sanctioned party")
    assert rejected["alert"]["payment"] == "REJECTED" and rejected["alert"]["pending"] is None
    nxt = cli.json("outcomes", "--after", str(feed["next_cursor"]))
    assert [(o["alert_seq"], o["outcome"]) for o in nxt["items"]] == [(block["seq"], "REJECTED")]
    for args, field in [(("--after", "-1"), "--after"), (("--limit", "0"), "--limit"),
                        (("--scorer", "nope"), "--scorer")]:
        assert refused(cli, "outcomes", *args)["field"] == field


def test_a_case_shows_its_alerts_and_sealed_history_and_is_worked_as_one(cli: Cli) -> None:
    alerts = walk(cli, limit=50)
    case_id, n = Counter(a["case_id"] for a in alerts).most_common(1)[0]
    other = next(a["case_id"] for a in alerts if a["case_id"] != case_id)
    members = sorted(a["seq"] for a in alerts if a["case_id"] == case_id)
    shown = cli.json("cases", "show", str(case_id))
    assert (shown["case_id"], shown["alert_count"], shown["state"]) == (case_id, n, "open")
    assert [a["seq"] for a in shown["alerts"]] == members and shown["events"] == []
    for a in shown["alerts"]:  # a case is closed once its held payments are decided
        if a["payment"] == "HELD":
            cli.json("alerts", "act", str(a["seq"]), "reject", "--rationale", "held pending KYC refresh")
    assigned = cli.json("cases", "act", str(case_id), "assign", "--assignee-subject", OFFICER[0],
                        "--assignee-fingerprint", OFFICER[1])
    assert assigned["alert_seq"] is None and assigned["case"]["assignee"]["subject"] == OFFICER[0]
    cli.json("cases", "act", str(case_id), "link", "--link", str(other), "--rationale", "same beneficiary")
    closed = cli.json("cases", "act", str(case_id), "close", "--disposition", "NO_FURTHER_ACTION",
                      "--rationale", "payroll batch, documented")
    assert (closed["case"]["state"], closed["case"]["disposition"], closed["case"]["links"]) == (
        "closed", "NO_FURTHER_ACTION", [other])
    history = cli.json("cases", "show", str(case_id))
    assert {a["state"] for a in history["alerts"]} == {"closed"}
    events = history["events"]
    assert [e["action"] for e in events][-3:] == ["assign", "link", "close"]
    assert all(e["applied"] and e["principal"]["subject"] == ME for e in events)
    assert (events[-1]["rationale"], events[-1]["disposition"], events[-2]["link"]) == (
        "payroll batch, documented", "NO_FURTHER_ACTION", other)
    human = cli("cases", "show", str(case_id)).stdout
    for text in (f"case {case_id}", "      | payroll batch, documented", f"events: {len(events)}"):
        assert text in human
    assert refused(cli, "cases", "show", "999999")["field"] == "ID"
    assert refused(cli, "cases", "act", str(case_id), "approve")["error"] == "CaseFourEyesError"
    doc = refused(cli, "cases", "act", str(case_id), "link", "--link", "999999", "--rationale", "x")
    assert doc["field"] == "--link"


def test_a_case_shows_the_annotations_sealed_on_its_decisions_in_both_forms(cli: Cli) -> None:
    alerts = walk(cli, limit=50)
    case_id, _ = Counter(a["case_id"] for a in alerts).most_common(1)[0]
    members = [a for a in alerts if a["case_id"] == case_id]
    other = next(a for a in alerts if a["case_id"] != case_id)
    ledger = ops.open_ledger(Settings.model_validate({"db": cli.db.url, "keys": cli.keys}))
    try:
        ours = annotate(ledger, members[0]["trace_id"], Principal.local("officer"), "ESCALATED",
                        "same address as case 12\nsee the KYC file")
        forged = (f"  seq 99999  2027-01-01T00:00:00.000000Z  on alert {members[0]['seq']}  CLOSED  "
                  "by CN=local:chief")
        annotate(ledger, members[0]["trace_id"], Principal.local("junior"), "NOTE", f"looked\n{forged}")
        annotate(ledger, other["trace_id"], Principal.local("officer"), "NOTE", "a note on another case")
    finally:
        ledger.engine.dispose()
    shown = cli.json("cases", "show", str(case_id))
    notes = {a["seq"]: [n["seq"] for n in a["annotations"]] for a in shown["alerts"]}
    assert notes[members[0]["seq"]][0] == ours.seq and all(notes[a["seq"]] == [] for a in members[1:])
    human = cli("cases", "show", str(case_id)).stdout
    assert "annotations on its decisions: 2" in human
    line = next(x for x in human.splitlines() if x.strip().startswith(f"seq {ours.seq} "))
    assert f"on alert {members[0]['seq']}" in line and "ESCALATED" in line and "by CN=local:officer" in line
    assert "      | same address as case 12\n      | see the KYC file\n" in human
    # a note's own lines are marked as its lines: none passes for another annotation
    assert not any(x.startswith("  seq 99999") for x in human.splitlines())
    assert f"      | {forged}" in human
    assert "a note on another case" not in human  # another case's annotation is not this case's


def test_a_policy_is_sealed_from_a_file_and_shown(cli: Cli, tmp_path: Path) -> None:
    shown = cli.json("cases", "policy", "show")
    assert (shown["built_in"], shown["seq"], shown["policy"]["version"]) == (True, 0, "sealtrail-default/1")
    assert "built-in default" in cli("cases", "policy", "show").stdout
    f = tmp_path / "policy.toml"
    f.write_text('version = "bank-2026-12"\nreview_business_days = 3\nholidays = [2026-12-25, "2027-01-01"]\n'
                 "four_eyes_false_positive = true\n")
    size = cli.size()
    sealed = cli.json("cases", "policy", "set", str(f), "--rationale", "examiner finding 4: faster review")
    assert (sealed["seq"], sealed["built_in"], sealed["rationale"]) == (size, False,
                                                                        "examiner finding 4: faster review")
    assert sealed["policy"]["review_business_days"] == 3 and sealed["policy"]["holidays"] == [
        "2026-12-25", "2027-01-01"]
    assert sealed["principal"]["subject"] == ME and sealed["previous"] == {
        "seq": 0, "version": "sealtrail-default/1", "built_in": True}
    now = cli.json("cases", "policy", "show")
    assert {k: v for k, v in now.items() if k != "previous"} == {
        k: v for k, v in sealed.items() if k != "previous"}
    assert cli.json("traces", "show", now["trace_id"])["kind"] == "alert_policy"

    for text, field in [('version = "x"\ncolour = "red"\n', "policy.colour"),
                        ('version = "x"\nreview_business_days = 0\n', "policy.review_business_days"),
                        ("review_business_days = 3\n", "policy.version"),
                        ("version = [\n", "policy"),
                        ("x" * 70_000, "FILE.toml")]:
        f.write_text(text)
        doc = refused(cli, "cases", "policy", "set", str(f), "--rationale", "r")
        assert doc["field"] == field and str(f) in doc["message"], text[:40]
        if field == "policy.colour":
            assert "colour" in doc["message"] and "is not a policy field" in doc["message"]
    f.write_text('version = "y"\n')
    assert refused(cli, "cases", "policy", "set", str(f), "--rationale", "")["field"] == "--rationale"
    assert refused(cli, "cases", "policy", "set", str(f), code=2)["error"] == "usage"  # --rationale required
    assert cli.size() == size + 1
    assert cli.json("cases", "policy", "show")["policy"]["version"] == "bank-2026-12"


def test_the_demo_reports_alerts_and_cases_and_the_officer_commands_run_as_printed(
        db: Db, tmp_path: Path) -> None:
    cli = Cli(db, tmp_path / "keys")
    doc = cli.json("demo", "--transactions", "300", "--certs", str(tmp_path / "certs"),
                   "--exports", str(tmp_path / "exports"))
    alerts, cases, cmd = doc["alerts"], doc["cases"], doc["commands"]
    listed = walk(cli, "--view", "all", limit=500)
    assert alerts["opened"] == len(listed) > 0
    assert alerts["by_outcome"] == {o: sum(a["outcome"] == o for a in listed)
                                    for o in ("ALLOW", "REVIEW", "HOLD", "BLOCK")}
    ours = [*doc["sanctions"]["payments"], *doc["sanctions"]["clearance"]["payments"]]  # crafted, and after
    crafted = Counter(x["decision"] for x in ours)
    for o in ("REVIEW", "HOLD", "BLOCK"):  # every such decision opened an alert, the crafted ones too
        assert alerts["by_outcome"][o] == doc["outcomes"][o]["count"] + crafted[o], o
    assert alerts["held_payments"] == sum(a["payment"] == "HELD" for a in listed)
    assert cases["opened"] == len({a["case_id"] for a in listed}) == sum(cases["by_outcome"].values())
    assert doc["verify"]["derived"]["case_view"]["alerts"] == len(listed)  # verified after the catch-up
    assert cmd["console_alerts"] == f"{cmd['console']}/alerts"

    def run(line: str) -> dict[str, Any]:
        argv = shlex.split(line)
        i = argv.index("alerts") if "alerts" in argv else argv.index("cases")
        res = runner.invoke(app, [*argv[i:], "--json"])
        assert res.exit_code == 0, (line, res.output)
        return dict(json.loads(res.stdout))

    assert run(cmd["alerts_list"])["items"]
    held = shlex.split(cmd["release_hold"])  # the officer's example is a simulated payment's hold
    assert int(held[held.index("act") + 1]) not in {x["seq"] for x in ours}
    assert run(cmd["case_show"])["case_id"] in {a["case_id"] for a in listed}
    released = run(cmd["release_hold"])
    assert released["action"] == "release" and released["alert"]["payment"] == "RELEASED"
    assert [o["seq"] for o in cli.json("outcomes")["items"]] == [released["seq"]]
    human = cli("demo", "--transactions", "20", "--certs", str(tmp_path / "certs"),
                "--exports", str(tmp_path / "exports")).stdout
    for word in ("alerts      ", "cases       ", "officer     ", "alerts list", "/console/alerts"):
        assert word in human
