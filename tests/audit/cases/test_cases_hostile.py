"""Hostile tests of the alert and case core: ways around the evidence, and crashes that stop the
view (a fold that raises stops ``catch_up`` for good, and with it every read and every action).

Most tests here once failed, each naming a way around the evidence or a crash; the rest pin
attacks that held from the start.

Records are sealed with ``Ledger.append_many`` directly where the attack is an insider with the
application role (who can seal any body), and through ``act`` / ``set_policy`` where the public
Python API itself lets the bad record through.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from audit.cases.events import EVENT_KIND, event_body, policy_body
from audit.cases.fold import CaseFold
from audit.cases.performance import model_performance
from audit.cases.policy import POLICY_KIND, DeadlinePolicy
from audit.cases.query import (
    AlertFilter,
    CaseFilter,
    alert_page,
    case_detail,
    case_page,
    get_alert,
    outcomes_since,
)
from audit.cases.reads import READ_KIND, list_reads, record_reads
from audit.cases.service import act, set_policy
from audit.cases.store import catch_up
from audit.cases.tables import alerts, case_events, cases, payment_outcomes
from audit.cases.verify import check_case_view
from audit.errors import CaseConflictError, CaseError, CaseFourEyesError
from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from tests.audit.cases.test_cases import ALICE, BOB, officer
from tests.audit.cases.test_fold import Rec, decision, event, on
from tests.conftest import Db, _postgres, make_ledger

CAROL = officer("Carol", "c3")
A1, A2, A3 = "11" * 16, "33" * 16, "44" * 16


# -- helpers ----------------------------------------------------------------------------------

def _policy_rec(seq: int, **kw: Any) -> Rec:
    body = policy_body(DeadlinePolicy(version=f"p{seq}", **kw), ALICE.to_json(), "policy")
    return seq, POLICY_KIND, {"trace_id": f"p-{seq}", "recorded_at": "2026-12-04T09:00:00.000000Z",
                              "record": body}


def _filed(seq: int, case_id: int, sha: str, who: Any = ALICE) -> Rec:
    s, k, env = event(seq, {"case": case_id}, "file_report", who=who, rationale="STR to the FIU", report=sha)
    return s, k, {**env, "payload_sha256": sha}


def _decision_body(outcome: str, account: str = A1, alerts: tuple[str, ...] = (),
                   **extra: Any) -> dict[str, Any]:
    return {"decision": outcome, "fired": [{"id": "R1"}], "principal": {"fingerprint_sha256": "ee" * 32},
            "account_risk": {"originator": {"account": account}, "beneficiary": {"account": "22" * 16},
                             "alerts": list(alerts)}, **extra}


def _seal(lg: Ledger, kind: str, body: dict[str, Any], payload: bytes | None = None) -> int:
    (r,) = lg.append_many([Record.from_canonical_body(kind, canonical_bytes(body), payload=payload)])
    return r.seq


def _dec(lg: Ledger, outcome: str, account: str = A1, **extra: Any) -> int:
    return _seal(lg, "decision", _decision_body(outcome, account, **extra))


def _target(lg: Ledger, seq: int) -> dict[str, Any]:
    e = store.entries
    with lg.engine.connect() as conn:
        row = conn.execute(select(e.c.trace_id, e.c.leaf_hash).where(e.c.seq == seq)).one()
    return {"alert": {"trace_id": row.trace_id, "seq": seq, "leaf_hash": bytes(row.leaf_hash).hex()}}


def _findings(engine: Engine) -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    with engine.connect() as conn:
        check_case_view(conn, lambda t, s, w: found.append((t, s, w)))
    return found


def _entries(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(store.entries)).scalar_one())


def _row(engine: Engine, table: Any, key: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(table).where(key)).one()


@pytest.fixture
def lg(sqlite_db: Db, signer: NoteSigner) -> Iterator[Ledger]:
    ledger = make_ledger(sqlite_db, signer)
    yield ledger
    ledger.engine.dispose()


@pytest.fixture
def any_lg(db: Db, signer: NoteSigner) -> Iterator[Ledger]:
    ledger = make_ledger(db, signer)
    yield ledger
    ledger.engine.dispose()


@pytest.fixture
def pg_lg(signer: NoteSigner) -> Iterator[Ledger]:
    for pg in _postgres():
        ledger = make_ledger(pg, signer)
        yield ledger
        ledger.engine.dispose()


# -- 1. a sealed policy the fold cannot read stops the view for good ---------------------------

def test_set_policy_refuses_a_policy_the_fold_cannot_read(lg: Ledger) -> None:
    before = _entries(lg.engine)
    with pytest.raises(CaseError):
        set_policy(lg, DeadlinePolicy(version="bank/3", subject="branch"), ALICE, "by decision of the board")
    assert _entries(lg.engine) == before


def test_an_unreadable_policy_record_does_not_stop_the_view(lg: Ledger) -> None:
    _dec(lg, "REVIEW")
    catch_up(lg.engine)
    good = policy_body(DeadlinePolicy(version="x"), ALICE.to_json(), "r")
    _seal(lg, POLICY_KIND, {**good, "policy": {**good["policy"], "review_business_days": 0}})
    later = _dec(lg, "REVIEW", A2)
    catch_up(lg.engine)  # raises CaseError today, and on every call after
    assert get_alert(lg.engine, later).policy_seq == 0  # the policy in force before stays in force
    _findings(lg.engine)  # and verify reports rather than raises


@pytest.mark.parametrize("bad", [
    {"version": "x", "subject": "branch"},
    {**DeadlinePolicy(version="x").to_json(), "holidays": ["2026-12-25", "2026-01-01"]},  # unsorted
    {**DeadlinePolicy(version="x").to_json(), "review_business_days": 0},
    "not a table",
], ids=["subject", "unsorted-holidays", "zero-days", "not-a-table"])
def test_the_fold_survives_a_malformed_policy_body(bad: Any) -> None:
    body = {**policy_body(DeadlinePolicy(version="x"), ALICE.to_json(), "r"), "policy": bad}
    f = CaseFold()
    env = {"trace_id": "p", "recorded_at": "2026-12-04T09:00:00.000000Z", "record": body}
    f.apply([(1, POLICY_KIND, env), decision(2, "REVIEW")])
    assert f.alerts[2].policy_seq == 0


# -- 2. a forged decision body crashes the fold ------------------------------------------------

_FORGED_DECISIONS: list[tuple[str, dict[str, Any]]] = [
    ("alerts-unhashable", {"decision": "ALLOW", "account_risk": {"alerts": [["originator"]]}}),
    ("alerts-int", {"decision": "ALLOW", "account_risk": {"alerts": 5}}),
    ("no-fired", {"fired": None}),
    ("fired-without-id", {"fired": [{"rule": "R1"}]}),
    ("fired-a-string", {"fired": "R1"}),
    ("no-principal", {"principal": None}),
    ("principal-a-string", {"principal": "CN=x"}),
    ("rules-without-version", {"rules": {"ruleset_id": "aml_core"}}),
    ("score-a-string", {"score": "high"}),
    ("score-ppm-out-of-range", {"schema": "sealtrail.decision/4", "score_ppm": 2_000_000}),
]


@pytest.mark.parametrize("change", [c for _, c in _FORGED_DECISIONS], ids=[n for n, _ in _FORGED_DECISIONS])
def test_the_fold_survives_a_forged_decision_body(change: dict[str, Any]) -> None:
    s, k, env = decision(1, "REVIEW")
    env = copy.deepcopy(env)
    for key, value in change.items():
        if value is None:
            env["record"].pop(key)
        else:
            env["record"][key] = value
    f = CaseFold()
    f.apply([(s, k, env), decision(2, "REVIEW", originator=A2)])
    assert 2 in f.alerts  # the next, well-formed alert still opens


def test_a_forged_decision_record_does_not_stop_the_view(lg: Ledger) -> None:
    _seal(lg, "decision", {**_decision_body("REVIEW"), "fired": [{"rule": "R1"}]})
    later = _dec(lg, "HOLD", A2)
    catch_up(lg.engine)
    assert get_alert(lg.engine, later).payment == "HELD"


def test_model_performance_survives_a_score_outside_the_bands(lg: Ledger) -> None:
    _dec(lg, "REVIEW", schema="sealtrail.decision/3", score=1.5, model={"sha256": "ab" * 32})
    _dec(lg, "REVIEW", A2, schema="sealtrail.decision/3", score=-0.25, model={"sha256": "ab" * 32})
    ok = _dec(lg, "REVIEW", A2, schema="sealtrail.decision/3", score=0.5, model={"sha256": "ab" * 32})
    catch_up(lg.engine)
    rows = model_performance(lg.engine)  # no score sealtrail seals is outside [0, 1]: those open no alert
    assert sum(r.alerts for r in rows) == 1 and get_alert(lg.engine, ok).score_ppm == 500_000


@pytest.mark.postgres
@pytest.mark.parametrize("change", [
    {"account_risk": {"originator": {"account": "a" * 100}, "alerts": []}},
    {"decision": "SUSPICIOUS", "account_risk": {"originator": {"account": A1}, "alerts": ["originator"]}},
    {"principal": {"fingerprint_sha256": "ee" * 40}},
    {"schema": "sealtrail.decision/3", "score": 5000.0},
], ids=["long-account", "long-outcome", "long-scorer", "score-ppm-overflows-int32"])
def test_a_decision_the_view_columns_cannot_hold_does_not_stop_the_view_on_postgres(
        pg_lg: Ledger, change: dict[str, Any]) -> None:
    _seal(pg_lg, "decision", {**_decision_body("REVIEW"), **change})
    later = _dec(pg_lg, "REVIEW", A2)
    catch_up(pg_lg.engine)
    assert get_alert(pg_lg.engine, later).state == "new"


# -- 3. a principal the view cannot store, through the public act() ----------------------------

@pytest.mark.parametrize("who", ["principal", "assignee"])
def test_act_refuses_a_fingerprint_that_is_not_a_sha256(any_lg: Ledger, who: str) -> None:
    seq = _dec(any_lg, "REVIEW")
    catch_up(any_lg.engine)
    long = {**ALICE.to_json(), "fingerprint_sha256": "ab" * 40}
    before = _entries(any_lg.engine)
    with pytest.raises(CaseError):
        if who == "principal":
            act(any_lg, long, "assign", alert=seq, assignee=BOB)
        else:
            act(any_lg, ALICE, "assign", alert=seq, assignee=long)
    assert _entries(any_lg.engine) == before
    catch_up(any_lg.engine)


# -- 4. four-eyes: the same key under a renamed certificate approves its own release -----------

def test_the_same_key_under_a_renamed_certificate_cannot_approve_its_own_release(lg: Ledger) -> None:
    block = _dec(lg, "BLOCK")
    catch_up(lg.engine)
    alice = replace(ALICE, spki_sha256="5a" * 32)
    renamed = replace(alice, subject="CN=Alice Martin-Smith,O=Example Bank", fingerprint_sha256="c4" * 32,
                      serial="2b")  # reissued after a name change, same key pair
    act(lg, alice, "release", alert=block, rationale="the list hit is a namesake")
    with pytest.raises(CaseFourEyesError):
        act(lg, renamed, "approve", alert=block)
    assert _row(lg.engine, alerts, alerts.c.seq == block).payment == "HELD"


# -- 5. four-eyes proposals on a case outlive what they proposed -------------------------------

def test_a_case_proposal_does_not_survive_the_case_closing() -> None:
    f = CaseFold()
    f.apply([_policy_rec(1, four_eyes_false_positive=True), decision(2, "REVIEW"),
             event(3, {"case": 2}, "close", disposition="FALSE_POSITIVE", rationale="payroll"),
             event(4, on(2), "close", disposition="NO_FURTHER_ACTION", rationale="explained by the branch"),
             event(5, on(2), "reopen", who=BOB, rationale="new activity on the account"),
             event(6, {"case": 2}, "approve", who=BOB)])
    assert f.events[-1].applied is False  # nothing the reopened alert's officer proposed
    assert f.alerts[2].state == "reopened"


def test_a_case_approval_closes_only_what_was_proposed() -> None:
    f = CaseFold()
    f.apply([_policy_rec(1, four_eyes_false_positive=True), decision(2, "REVIEW"),
             event(3, {"case": 2}, "close", disposition="FALSE_POSITIVE", rationale="payroll"),
             decision(4, "REVIEW", day="2026-12-06"),  # the subject's next alert joins case 2
             event(5, {"case": 2}, "approve", who=BOB)])
    assert f.alerts[4].case_id == 2
    assert f.alerts[4].state == "new", "closed as a false positive that no officer proposed"


def test_proposals_do_not_cross_between_alert_and_case() -> None:
    f = CaseFold()
    f.apply([_policy_rec(1, four_eyes_false_positive=True), decision(2, "REVIEW", originator=A2),
             decision(3, "BLOCK"),  # case 3
             event(4, on(3), "release", rationale="namesake"),
             event(5, {"case": 3}, "approve"),  # the alert's proposal, approved on the case by its proposer
             event(6, {"case": 2}, "close", disposition="FALSE_POSITIVE", rationale="payroll"),
             event(7, on(2), "approve"),  # the case's proposal, approved on the alert by its proposer
             event(8, {"case": 2}, "refuse", rationale="no"),
             event(9, {"case": 2}, "approve", who=BOB),  # refused first: nothing left to approve
             event(10, on(3), "approve", who=CAROL)])
    assert [(e.seq, e.applied) for e in f.events] == [(4, True), (5, False), (6, True), (7, False), (8, True),
                                                      (9, False), (10, True)]
    assert f.alerts[2].open and f.alerts[3].payment == "RELEASED"


# -- 6. REPORT_FILED on the strength of a report filed before the alert existed ----------------

def test_report_filed_needs_a_report_filed_after_the_alert_opened() -> None:
    f = CaseFold()
    f.apply([decision(2, "REVIEW"), _filed(3, 2, "cd" * 32),
             decision(4, "REVIEW", day="2026-12-20"),  # new activity, after the filing
             event(5, on(4), "close", disposition="REPORT_FILED", rationale="covered by the STR")])
    assert f.alerts[4].case_id == 2 and f.cases[2].last_report == "cd" * 32
    assert f.events[-1].applied is False


# -- 7. quality assurance by the officer whose call it was -------------------------------------

def test_the_proposer_of_a_false_positive_cannot_qa_it() -> None:
    f = CaseFold()
    f.apply([_policy_rec(1, four_eyes_false_positive=True, qa_sample_permille=1000), decision(2, "REVIEW"),
             event(3, on(2), "close", disposition="FALSE_POSITIVE", rationale="payroll"),
             event(4, on(2), "approve", who=BOB),
             event(5, on(2), "qa_review", verdict="AGREE", rationale="sound call")])
    assert f.alerts[2].qa == "due" and f.events[-1].applied is False


# -- 8. the event's leaf hash is never checked -------------------------------------------------

@pytest.mark.parametrize("leaf", ["00" * 32, "not a hash"])
def test_an_event_naming_another_leaf_hash_is_not_applied(lg: Ledger, leaf: str) -> None:
    hold = _dec(lg, "HOLD")
    catch_up(lg.engine)
    target = _target(lg, hold)
    target["alert"]["leaf_hash"] = leaf
    seq = _seal(lg, EVENT_KIND, event_body(target, "release", ALICE.to_json(), rationale="verified"))
    catch_up(lg.engine)
    assert _row(lg.engine, case_events, case_events.c.seq == seq).applied == 0
    assert _row(lg.engine, alerts, alerts.c.seq == hold).payment == "HELD"


# -- 9. ids beyond 64 bits crash the reads on SQLite -------------------------------------------

def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


_HUGE = 10**19 - 1  # 19 digits: the cursor's own pattern admits it; above a BIGINT
_READS: list[tuple[str, Callable[[Ledger], object]]] = [
    ("alert-cursor", lambda lg: alert_page(lg.engine, AlertFilter(
        cursor=_cursor(f"a1.-.{_HUGE}.{AlertFilter()._fingerprint()}")), today=date(2026, 12, 5))),
    ("case-cursor", lambda lg: case_page(lg.engine, CaseFilter(
        cursor=_cursor(f"c1.{_HUGE}.{CaseFilter()._fingerprint()}")))),
    ("case-filter", lambda lg: alert_page(lg.engine, AlertFilter(case_id=_HUGE), today=date(2026, 12, 5))),
    ("get-alert", lambda lg: get_alert(lg.engine, _HUGE)),
    ("case-detail", lambda lg: case_detail(lg.engine, _HUGE)),
    ("outcomes", lambda lg: outcomes_since(lg.engine, _HUGE, scorer_fp=None)),
    ("reads-before", lambda lg: list_reads(lg.engine, before=_HUGE)),
    ("act-alert", lambda lg: act(lg, ALICE, "comment", alert=_HUGE, rationale="x")),
    ("act-case", lambda lg: act(lg, ALICE, "comment", case=_HUGE, rationale="x")),
    ("act-link", lambda lg: act(lg, ALICE, "link", case=1, link=_HUGE, rationale="x")),
]


@pytest.mark.parametrize("call", [c for _, c in _READS], ids=[n for n, _ in _READS])
def test_an_id_beyond_64_bits_is_a_case_error(lg: Ledger, call: Callable[[Ledger], object]) -> None:
    _dec(lg, "REVIEW")
    catch_up(lg.engine)
    try:
        got = call(lg)
    except CaseError:
        return
    assert not getattr(got, "items", None)  # or an empty page


# -- 10. small type confusions -----------------------------------------------------------------

def test_act_refuses_a_bool_alert(lg: Ledger) -> None:
    _dec(lg, "REVIEW")
    catch_up(lg.engine)
    before = _entries(lg.engine)
    with pytest.raises(CaseError):
        act(lg, ALICE, "comment", alert=True, rationale="which alert?")
    assert _entries(lg.engine) == before


def test_list_reads_survives_a_forged_read_record_and_refuses_a_bool_case(lg: Ledger) -> None:
    real = record_reads(lg, ALICE, [{"case": 1, "what": "case"}])
    _seal(lg, READ_KIND, {"schema": "sealtrail.case-read/1", "principal": BOB.to_json(), "reads": "case 1"})
    assert [r.seq for r in list_reads(lg.engine, case_id=1).items] == [real]
    with pytest.raises(CaseError):
        list_reads(lg.engine, case_id=True)


# -- what held ---------------------------------------------------------------------------------

def test_state_machine_holes_that_held() -> None:
    f = CaseFold()
    f.apply([decision(1, "REVIEW"), decision(2, "HOLD", originator=A2), decision(3, "BLOCK", originator=A3),
             event(4, {"case": 2}, "close", disposition="NO_FURTHER_ACTION", rationale="x"),  # held payment
             event(5, on(1), "release", rationale="x"),  # a REVIEW holds nothing
             event(6, on(1), "qa_review", verdict="AGREE", rationale="x"),  # open: no QA
             event(7, on(2), "release", rationale="ok"),
             event(8, on(2), "reject", who=BOB, rationale="x"),  # second outcome for one payment
             event(9, on(2), "release", who=BOB, rationale="x"),
             event(10, on(3), "reject", rationale="confirmed"),
             event(11, on(3), "close", disposition="NO_FURTHER_ACTION", rationale="x"),
             event(12, on(3), "reopen", rationale="x"),
             event(13, on(3), "release", who=BOB, rationale="x"),  # reopening does not re-hold
             event(14, {"case": 1}, "file_report", rationale="x", report="ab" * 32),  # no payload
             (15, EVENT_KIND, {**_filed(15, 1, "ab" * 32)[2], "payload_sha256": "cd" * 32}),  # other bytes
             event(16, on(1), "close", disposition="REPORT_FILED", rationale="x"),
             _filed(17, 1, "ab" * 32),
             event(18, {"case": 1}, "file_report", rationale="x", report="ef" * 32),  # amends nothing
             event(19, {"case": 1}, "file_report", rationale="x", report="ef" * 32, amends="cd" * 32)])
    applied = {e.seq: e.applied for e in f.events}
    assert [s for s, ok in applied.items() if ok] == [7, 10, 11, 12, 17]
    assert [(o.alert_seq, o.outcome) for o in f.outcomes] == [(2, "RELEASED"), (3, "REJECTED")]
    assert (f.cases[1].reports, f.cases[1].last_report) == (1, "ab" * 32)


def test_smuggled_dispositions_and_verdicts_are_refused_before_sealing(lg: Ledger) -> None:
    seq = _dec(lg, "REVIEW")
    catch_up(lg.engine)
    before = _entries(lg.engine)
    smuggled: list[dict[str, Any]] = [
        {"disposition": True}, {"disposition": 1}, {"disposition": "FALSE_POSITIVE "},
        {"disposition": "FALSE_POSΙTIVE"}, {"disposition": "false_positive"},  # a Greek capital iota
        {"disposition": "ＦＡＬＳＥ＿ＰＯＳＩＴＩＶＥ"}, {"disposition": ["FALSE_POSITIVE"]}]
    for kw in smuggled:
        with pytest.raises(CaseError) as info:
            act(lg, ALICE, "close", alert=seq, rationale="x", **kw)
        assert info.value.field == "disposition", kw
    for verdict in (True, "agree", "AGREE\u200b", "ＡＧＲＥＥ"):
        with pytest.raises(CaseError) as info:
            act(lg, BOB, "qa_review", alert=seq, rationale="x", verdict=verdict)  # type: ignore[arg-type]
        assert info.value.field == "verdict", verdict
    links: list[dict[str, Any]] = [{"link": True}, {"link": -1}]
    for kw in links:
        with pytest.raises(CaseError):
            act(lg, ALICE, "link", case=seq, rationale="x", **kw)
    with pytest.raises(CaseError):
        act(lg, ALICE, "comment", case=True, rationale="x")
    assert _entries(lg.engine) == before


def test_forged_event_bodies_are_recorded_as_not_applied(lg: Ledger) -> None:
    seq = _dec(lg, "BLOCK")
    catch_up(lg.engine)
    t = _target(lg, seq)
    ok = event_body(t, "release", ALICE.to_json(), rationale="x")
    forged = [
        {**ok, "target": {"alert": {**t["alert"], "seq": -1}}},
        {**ok, "target": {"alert": {**t["alert"], "trace_id": t["alert"]["trace_id"].upper()}}},
        {**ok, "target": {"case": -5}},
        {**ok, "rationale": "x" * 10_001},
        {**ok, "principal": {**ALICE.to_json(), "sans": "URI:x"}},
        {**ok, "principal": {k: v for k, v in ALICE.to_json().items() if k != "serial"}},
        {**ok, "action": ["release"]},
        {**ok, "disposition": {"FALSE_POSITIVE": 1}},
        {**event_body(t, "approve", BOB.to_json()), "rationale": 7},
    ]
    seqs = [_seal(lg, EVENT_KIND, b) for b in forged]
    catch_up(lg.engine)
    with lg.engine.connect() as conn:
        got = dict(conn.execute(select(case_events.c.seq, case_events.c.applied)).all())
    assert [got[s] for s in seqs] == [0] * len(seqs)
    assert _row(lg.engine, alerts, alerts.c.seq == seq).payment == "HELD"
    assert _findings(lg.engine) == []


def test_view_tampering_that_verify_catches(lg: Ledger) -> None:
    block = _dec(lg, "BLOCK")
    review = _dec(lg, "REVIEW", A2)
    catch_up(lg.engine)
    act(lg, ALICE, "release", alert=block, rationale="namesake")
    act(lg, BOB, "approve", alert=block)
    act(lg, ALICE, "close", alert=review, disposition="NO_FURTHER_ACTION", rationale="x")
    assert _findings(lg.engine) == []
    tamper = [
        ("audit_alerts", block, f"UPDATE audit_alerts SET pending_by = '{{}}' WHERE seq = {block}"),
        ("audit_alerts", block, f"UPDATE audit_alerts SET scorer_fp = '{'00' * 32}' WHERE seq = {block}"),
        ("audit_alerts", review, f"UPDATE audit_alerts SET closed_by = NULL WHERE seq = {review}"),
        ("audit_alerts", review, f"UPDATE audit_alerts SET qa = 'agreed' WHERE seq = {review}"),
        ("audit_cases", review, f"UPDATE audit_cases SET last_alert_seq = 0 WHERE case_id = {review}"),
        ("audit_cases", review, f"UPDATE audit_cases SET links = '{block}' WHERE case_id = {review}"),
    ]
    for table, key, sql in tamper:
        with lg.engine.begin() as conn:
            saved = conn.execute(text(f"SELECT * FROM {table} WHERE "
                                      f"{'seq' if table == 'audit_alerts' else 'case_id'} = {key}")).one()
            conn.execute(text(sql))
        assert (table, key) in [(t, s) for t, s, _ in _findings(lg.engine)], sql
        with lg.engine.begin() as conn:
            m = dict(saved._mapping)
            k = "seq" if table == "audit_alerts" else "case_id"
            sets = ", ".join(f"{c} = :{c}" for c in m)
            conn.execute(text(f"UPDATE {table} SET {sets} WHERE {k} = :{k}"), m)
    assert _findings(lg.engine) == []
    with lg.engine.begin() as conn:  # the watermark set back: the rows past it have no record behind them
        conn.execute(text("UPDATE audit_case_watermark SET seq = 1"))
    assert {t for t, _, _ in _findings(lg.engine)} >= {"audit_alerts", "audit_case_events",
                                                         "audit_payment_outcomes"}


def test_cursors_bind_their_filter_and_pages_tie_break_on_seq(lg: Ledger) -> None:
    for i in range(7):  # one day: equal review_due across pages
        _dec(lg, "REVIEW", f"{i:032x}")
    catch_up(lg.engine)
    f = AlertFilter(view="overdue", limit=2)
    out, cursor = [], None
    while True:
        page = alert_page(lg.engine, replace(f, cursor=cursor), today=date(2030, 1, 1))
        out += [a.seq for a in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        for other in (AlertFilter(limit=2), AlertFilter(view="all", limit=2),
                      AlertFilter(view="overdue", me="x")):
            with pytest.raises(CaseError, match="different filter"):
                replace(other, cursor=cursor)
    assert out == sorted(out) and len(out) == 7
    for bad in ("", "=" * 5, _cursor("a1.-.01.00000000"), _cursor("a1.-.1.zzzzzzzz"), "%00", "a" * 10_000):
        with pytest.raises(CaseError):
            AlertFilter(cursor=bad)
    with pytest.raises(CaseError):
        AlertFilter(rule="R1' OR '1'='1")


def test_list_reads_pages_a_case_filter_without_gaps(lg: Ledger) -> None:
    mine = []
    for i in range(9):
        s = record_reads(lg, ALICE, [{"case": i % 3, "what": "queue"}, {"case": 100 + i, "what": "case"}])
        if i % 3 == 1:
            mine.append(s)
    got, before = [], None
    while True:
        page = list_reads(lg.engine, case_id=1, before=before, limit=1)
        got += [r.seq for r in page.items]
        assert all(r.reads == [{"case": 1, "what": "queue"}] for r in page.items)
        if page.next_before is None:
            break
        before = page.next_before
    assert got == sorted(mine, reverse=True)


def test_two_officers_racing_on_one_payment_leave_one_outcome(any_lg: Ledger) -> None:
    holds = [_dec(any_lg, "HOLD", f"{i:032x}") for i in range(3)]
    catch_up(any_lg.engine)
    def go(h: int, gate: threading.Barrier, out: dict[str, str], who: Any, action: str) -> None:
        gate.wait()
        try:
            act(any_lg, who, action, alert=h, rationale="decided")
            out[action] = "ok"
        except CaseConflictError:
            out[action] = "conflict"
        except Exception as exc:  # pragma: no cover - the failure is the report
            out[action] = repr(exc)

    for h in holds:
        out: dict[str, str] = {}
        gate = threading.Barrier(2)
        threads = [threading.Thread(target=go, args=(h, gate, out, *a))
                   for a in ((ALICE, "release"), (BOB, "reject"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(out.values()) == ["conflict", "ok"], out
    with any_lg.engine.connect() as conn:
        per = conn.execute(select(payment_outcomes.c.alert_seq, func.count())
                           .group_by(payment_outcomes.c.alert_seq)).all()
    assert sorted(per) == [(h, 1) for h in holds]
    assert _findings(any_lg.engine) == []


def test_catch_up_from_several_engines_at_once_folds_each_record_once(any_lg: Ledger, db: Db) -> None:
    any_lg.append_many([Record.from_canonical_body("decision", canonical_bytes(
        _decision_body(("REVIEW", "HOLD", "BLOCK")[i % 3], f"{i % 5:032x}"))) for i in range(300)])
    engines = [db.engine() for _ in range(3)]
    gate = threading.Barrier(len(engines))
    errors: list[str] = []

    def go(e: Engine) -> None:
        gate.wait()
        try:
            catch_up(e)
        except Exception as exc:  # pragma: no cover - the failure is the report
            errors.append(repr(exc))

    threads = [threading.Thread(target=go, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in engines:
        e.dispose()
    assert errors == []
    assert _findings(any_lg.engine) == []
    with any_lg.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(alerts)).scalar_one() == 300
        assert conn.execute(select(func.count()).select_from(cases)).scalar_one() == 5


_ACTS: list[tuple[str, dict[str, Any]]] = [
    ("assign", {"assignee": BOB.to_json()}), ("start_review", {}), ("escalate", {"rationale": "r"}),
    ("close", {"disposition": "FALSE_POSITIVE", "rationale": "r"}),
    ("close", {"disposition": "NO_FURTHER_ACTION", "rationale": "r"}),
    ("close", {"disposition": "REPORT_FILED", "rationale": "r"}), ("reopen", {"rationale": "r"}),
    ("release", {"rationale": "r"}), ("reject", {"rationale": "r"}), ("approve", {}),
    ("refuse", {"rationale": "r"}), ("comment", {"rationale": "r"}),
    ("qa_review", {"verdict": "AGREE", "rationale": "r"})]
_CASE_ACTS = [a for a in _ACTS if a[0] in ("assign", "comment", "close", "approve", "refuse")]


@pytest.mark.parametrize("seed", range(2))
def test_catch_up_in_random_pieces_over_the_stored_tables_equals_verify_fold(lg: Ledger, seed: int) -> None:
    """The real StoredView (a round trip through the tables) as the loader, catch-ups at random
    points, policies (four-eyes, QA, subject) sealed between pieces, reports, links, reopens."""
    rng = random.Random(seed)
    accounts = [f"{i:032x}" for i in range(3)]
    opened: dict[int, dict[str, Any]] = {}
    reports: dict[int, str] = {}
    batch: list[tuple[Record, bool]] = []

    def flush() -> None:
        if batch:
            for (_, is_alert), r in zip(batch, lg.append_many([b for b, _ in batch]), strict=True):
                if is_alert:
                    opened[r.seq] = {"alert": {"trace_id": r.trace_id, "seq": r.seq,
                                               "leaf_hash": r.leaf_hash.hex()}}
            batch.clear()

    def seal(body: dict[str, Any], kind: str = EVENT_KIND, payload: bytes | None = None) -> None:
        batch.append((Record.from_canonical_body(kind, canonical_bytes(body), payload=payload), False))

    for i in range(150):
        r = rng.random()
        if r < 0.3 or not opened:
            outcome = rng.choice(["ALLOW", "REVIEW", "HOLD", "BLOCK"])
            side = rng.choice([(), ("beneficiary",)])
            body = _decision_body(outcome, rng.choice(accounts), side)
            batch.append((Record.from_canonical_body("decision", canonical_bytes(body)),
                          outcome != "ALLOW" or bool(side)))
            if rng.random() < 0.5:
                flush()
            continue
        flush()
        who = rng.choice([ALICE, BOB, CAROL]).to_json()
        if r < 0.34:
            p = DeadlinePolicy(version=f"v{i}", four_eyes_false_positive=rng.random() < 0.5,
                               subject=rng.choice(["originator", "beneficiary", "decision"]),
                               qa_sample_permille=rng.choice([0, 500, 1000]))
            seal(policy_body(p, ALICE.to_json(), "change"), POLICY_KIND)
        elif r < 0.5:
            c, k = rng.choice(list(opened)), rng.random()
            if k < 0.15:
                payload = f"report {i}".encode()
                sha = hashlib.sha256(payload).hexdigest()
                seal(event_body({"case": c}, "file_report", who, rationale="r", report=sha,
                                amends=reports.get(c)), payload=payload)
                reports[c] = sha
            elif k < 0.25:
                seal(event_body({"case": c}, "link", who, rationale="r", link=rng.choice(list(opened))))
            else:
                action, kw = rng.choice(_CASE_ACTS)
                seal(event_body({"case": c}, action, who, **kw))
        else:
            action, kw = rng.choice(_ACTS)
            seal(event_body(opened[rng.choice(list(opened))], action, who, **kw))
        if rng.random() < 0.3:
            flush()
        if rng.random() < 0.15:
            flush()
            catch_up(lg.engine)
    flush()
    catch_up(lg.engine)
    assert _findings(lg.engine) == []
    with lg.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(case_events)
                            .where(case_events.c.applied == 1)).scalar_one() > 10
