"""Alerts and cases: opened from sealed decisions, moved only by sealed events, the view checked
against the records."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import DBAPIError

from audit.cases.events import EVENT_KIND, event_body
from audit.cases.policy import DeadlinePolicy
from audit.cases.service import act, set_policy
from audit.cases.store import catch_up
from audit.cases.tables import alerts, case_events, cases, payment_outcomes
from audit.decide.principal import Principal
from audit.errors import CaseConflictError, CaseError, CaseFourEyesError, CaseNotFoundError, DerivedRowError
from audit.query.verify import verify_index
from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from tests.audit.test_trace_index import indexed_pipeline, mixed_submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


def officer(name: str, fp: str) -> Principal:
    return Principal(subject=f"CN={name},O=Example Bank", sans=("URI:spiffe://bank.example/role/officer",),
                     issuer="CN=Example Bank CA", fingerprint_sha256=fp * 32, serial="2a",
                     not_before="2026-01-01T00:00:00Z", not_after="2027-01-01T00:00:00Z")


ALICE, BOB = officer("Alice", "a1"), officer("Bob", "b2")


@pytest.fixture
def decided(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> Ledger:
    ledger = make_ledger(db, signer)
    indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(400))
    return ledger


def rows(engine: Engine, table: Any, *where: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(table).where(*where).order_by(*table.primary_key.columns)))


def entries(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(store.entries)).scalar_one())


def decisions(engine: Engine) -> list[dict[str, Any]]:
    import orjson
    with engine.connect() as conn:
        return [{"seq": s, **orjson.loads(r)} for s, r in conn.execute(
            select(store.entries.c.seq, store.entries.c.record).where(store.entries.c.kind == "decision")
            .order_by(store.entries.c.seq))]


def first(engine: Engine, outcome: str) -> Any:
    return next(a for a in rows(engine, alerts) if a.outcome == outcome)


@pytest.mark.requirement("FATF-R10-monitoring")
@pytest.mark.requirement("FATF-R20-str")
@pytest.mark.requirement("EU-AMLR-69-reporting")
@pytest.mark.requirement("GDPR-22-human-review")
def test_every_review_hold_block_and_account_alert_opens_one_alert(decided: Ledger) -> None:
    report = catch_up(decided.engine)
    want = {}
    for d in decisions(decided.engine):
        b = d["record"]
        if b["decision"] != "ALLOW" or b["account_risk"]["alerts"]:
            want[d["seq"]] = d
    got = rows(decided.engine, alerts)
    assert [a.seq for a in got] == sorted(want) and report.alerts_opened == len(want) > 10
    for a in got:
        b = want[a.seq]["record"]
        assert (a.trace_id, a.outcome, a.state, a.is_open) == (
            want[a.seq]["trace_id"], b["decision"], "new", 1)
        assert a.payment == ("HELD" if b["decision"] in ("HOLD", "BLOCK") else None)
        side = "originator" if b["decision"] != "ALLOW" or "originator" in b["account_risk"]["alerts"] \
            else "beneficiary"
        assert a.subject == f"account:{b['account_risk'][side]['account']}"
    # one case per subject while any of its alerts is open; the case id is its first alert's seq
    by_subject: dict[str, list[int]] = {}
    for a in got:
        by_subject.setdefault(a.subject, []).append(a.seq)
    assert {(c.case_id, c.subject, c.alerts) for c in rows(decided.engine, cases)} == {
        (seqs[0], s, len(seqs)) for s, seqs in by_subject.items()}
    assert all(a.case_id == by_subject[a.subject][0] for a in got)
    assert catch_up(decided.engine).alerts_opened == 0  # idempotent
    assert verify_index(decided.engine).case_view["alerts"] == len(want)


@pytest.mark.requirement("SEC-17a4f-audit-trail")
def test_an_alert_is_worked_from_new_to_closed_and_each_step_is_sealed(decided: Ledger) -> None:
    catch_up(decided.engine)
    a = first(decided.engine, "REVIEW")
    before = entries(decided.engine)
    r1 = act(decided, ALICE, "assign", alert=a.seq, assignee=BOB)
    r2 = act(decided, BOB, "start_review", alert=a.trace_id)
    r3 = act(decided, BOB, "escalate", alert=a.seq, rationale="pattern across three accounts")
    r4 = act(decided, ALICE, "close", alert=a.seq, disposition="NO_FURTHER_ACTION",
             rationale="customer documented the source of funds")
    assert entries(decided.engine) == before + 4 and [r.seq for r in (r1, r2, r3, r4)] == list(
        range(before, before + 4))
    (now,) = rows(decided.engine, alerts, alerts.c.seq == a.seq)
    got = (now.state, now.is_open, now.disposition, now.assignee_subject, now.last_event_seq, now.events)
    assert got == (
        "closed", 0, "NO_FURTHER_ACTION", BOB.subject, r4.seq, 4)
    assert now.closed_at == r4.recorded_at
    assert [(e.seq, e.action, e.applied) for e in rows(decided.engine, case_events)] == [
        (r1.seq, "assign", 1), (r2.seq, "start_review", 1), (r3.seq, "escalate", 1), (r4.seq, "close", 1)]
    reopened = act(decided, BOB, "reopen", alert=a.seq, rationale="new information from the branch")
    (again,) = rows(decided.engine, alerts, alerts.c.seq == a.seq)
    assert (again.state, again.disposition, again.closed_at, again.last_event_seq) == (
        "reopened", None, None, reopened.seq)
    verify_index(decided.engine)


def test_refused_actions_seal_nothing(decided: Ledger) -> None:
    catch_up(decided.engine)
    review, hold = first(decided.engine, "REVIEW"), first(decided.engine, "HOLD")
    before = entries(decided.engine)
    cases_of: list[tuple[dict[str, Any], type[CaseError], str]] = [
        ({"action": "close", "alert": review.seq, "disposition": "MAYBE", "rationale": "x"}, CaseError,
         "disposition"),
        ({"action": "close", "alert": review.seq, "disposition": "FALSE_POSITIVE"}, CaseError, "rationale"),
        ({"action": "escalate", "alert": review.seq, "rationale": "too early"}, CaseConflictError, "action"),
        ({"action": "fly", "alert": review.seq}, CaseError, "action"),
        ({"action": "assign", "alert": review.seq}, CaseError, "assignee"),
        ({"action": "close", "alert": hold.seq, "disposition": "FALSE_POSITIVE", "rationale": "fine"},
         CaseConflictError, "action"),  # the held payment is decided first
        ({"action": "release", "alert": review.seq, "rationale": "x"}, CaseConflictError, "action"),
        ({"action": "comment", "alert": 10**9, "rationale": "x"}, CaseNotFoundError, "alert"),
        ({"action": "comment", "case": 10**9, "rationale": "x"}, CaseNotFoundError, "case"),
        ({"action": "reopen", "alert": review.seq, "rationale": "x"}, CaseConflictError, "action"),
        ({"action": "comment", "alert": review.seq, "rationale": "bidi \u202e inside"}, CaseError,
         "rationale"),
        ({"action": "comment", "alert": review.seq, "case": review.case_id, "rationale": "x"}, CaseError,
         "target"),
    ]
    for kwargs, err, field in cases_of:
        action = kwargs.pop("action")
        with pytest.raises(err) as info:
            act(decided, ALICE, action, **kwargs)
        assert info.value.field == field, (action, kwargs)
    assert entries(decided.engine) == before
    assert rows(decided.engine, case_events) == []


@pytest.mark.requirement("EU-TFR-7-8-missing-info", "GDPR-22-human-review")
def test_a_hold_is_released_by_one_officer_and_a_block_by_two(decided: Ledger) -> None:
    catch_up(decided.engine)
    hold, block = first(decided.engine, "HOLD"), first(decided.engine, "BLOCK")
    released = act(decided, ALICE, "release", alert=hold.seq, rationale="beneficiary verified by phone")
    proposed = act(decided, ALICE, "release", alert=block.seq, rationale="the list hit is a namesake")
    (b,) = rows(decided.engine, alerts, alerts.c.seq == block.seq)
    assert (b.payment, b.pending) == ("HELD", "release")
    with pytest.raises(CaseFourEyesError):
        act(decided, ALICE, "approve", alert=block.seq)
    renewed = replace(ALICE, fingerprint_sha256="c3" * 32, subject="O=example bank,CN=alice")  # same person
    with pytest.raises(CaseFourEyesError):
        act(decided, renewed, "approve", alert=block.seq)
    with pytest.raises(CaseConflictError):  # nothing else while the proposal waits
        act(decided, BOB, "reject", alert=block.seq, rationale="x")
    approved = act(decided, BOB, "approve", alert=block.seq)
    assert [(o.seq, o.alert_seq, o.trace_id, o.outcome, o.scorer_fp) for o in rows(decided.engine,
                                                                                   payment_outcomes)] == [
        (released.seq, hold.seq, hold.trace_id, "RELEASED", hold.scorer_fp),
        (approved.seq, block.seq, block.trace_id, "RELEASED", block.scorer_fp)]
    assert proposed.seq < approved.seq
    with pytest.raises(CaseConflictError):
        act(decided, BOB, "reject", alert=hold.seq, rationale="too late")
    other = next(a for a in rows(decided.engine, alerts) if a.outcome == "BLOCK" and a.seq != block.seq)
    rejected = act(decided, ALICE, "reject", alert=other.seq, rationale="sanctioned party confirmed")
    assert rows(decided.engine, payment_outcomes)[-1].seq == rejected.seq
    with pytest.raises(CaseConflictError) as info:
        act(decided, ALICE, "close", alert=other.seq, disposition="REPORT_FILED", rationale="STR filed")
    assert info.value.field == "disposition"  # no report filed on the case yet
    xml = b"<report>draft</report>"
    filed = act(decided, ALICE, "file_report", case=other.case_id, report=xml, rationale="STR to the FIU")
    with pytest.raises(CaseConflictError):  # a second report amends the one in force
        act(decided, ALICE, "file_report", case=other.case_id, report=xml + b" ", rationale="again")
    import hashlib
    amended = act(decided, BOB, "file_report", case=other.case_id, report=xml + b" ", rationale="amended",
                  amends=hashlib.sha256(xml).hexdigest())
    (c,) = rows(decided.engine, cases, cases.c.case_id == other.case_id)
    assert (c.reports, c.last_report, c.last_event_seq) == (
        2, hashlib.sha256(xml + b" ").hexdigest(), amended.seq)
    with decided.engine.connect() as conn:  # the report's bytes are the filing record's payload
        p = store.payloads
        sha = hashlib.sha256(xml).hexdigest()
        assert conn.execute(select(p.c.data).where(p.c.sha256 == sha)).scalar() == xml
    assert filed.seq < amended.seq
    act(decided, ALICE, "close", alert=other.seq, disposition="REPORT_FILED", rationale="STR filed")
    (closed,) = rows(decided.engine, alerts, alerts.c.seq == other.seq)
    assert closed.next_review_due is not None and closed.next_review_due > closed.closed_at[:10]
    verify_index(decided.engine)


def test_an_event_that_lost_a_race_is_sealed_but_not_applied(decided: Ledger) -> None:
    catch_up(decided.engine)
    hold = first(decided.engine, "HOLD")
    e = store.entries
    with decided.engine.connect() as conn:
        leaf = bytes(conn.execute(select(e.c.leaf_hash).where(e.c.seq == hold.seq)).scalar_one()).hex()
    target = {"alert": {"trace_id": hold.trace_id, "seq": hold.seq, "leaf_hash": leaf}}
    # two officers decided the same held payment at once: both events reach the log
    bodies = [event_body(target, "release", ALICE.to_json(), rationale="verified"),
              event_body(target, "reject", BOB.to_json(), rationale="suspicious")]
    got = decided.append_many([Record.from_canonical_body(EVENT_KIND, canonical_bytes(b)) for b in bodies])
    catch_up(decided.engine)
    ev = rows(decided.engine, case_events)
    assert [(x.seq, x.action, x.applied) for x in ev] == [(got[0].seq, "release", 1),
                                                          (got[1].seq, "reject", 0)]
    assert "no payment of it is held" in ev[1].why
    assert [o.outcome for o in rows(decided.engine, payment_outcomes)] == ["RELEASED"]
    verify_index(decided.engine)


def test_closing_a_case_closes_its_open_alerts(decided: Ledger) -> None:
    catch_up(decided.engine)
    big = max(rows(decided.engine, cases), key=lambda c: c.alerts)
    assert big.alerts >= 2
    members = rows(decided.engine, alerts, alerts.c.case_id == big.case_id)
    for a in members:
        if a.payment == "HELD":
            act(decided, ALICE, "reject", alert=a.seq, rationale="held pending KYC refresh")
    act(decided, ALICE, "assign", case=big.case_id, assignee=BOB)
    assert {a.assignee_fp for a in rows(decided.engine, alerts, alerts.c.case_id == big.case_id)} == {
        BOB.fingerprint_sha256}
    other = next(c for c in rows(decided.engine, cases) if c.case_id != big.case_id)
    act(decided, BOB, "link", case=big.case_id, link=other.case_id, rationale="same beneficiary network")
    closed = act(decided, BOB, "close", case=big.case_id, disposition="FALSE_POSITIVE",
                 rationale="payroll batch")
    (c,) = rows(decided.engine, cases, cases.c.case_id == big.case_id)
    assert (c.is_open, c.open_alerts, c.disposition, c.links, c.last_event_seq) == (
        0, 0, "FALSE_POSITIVE", str(other.case_id), closed.seq)
    (o,) = rows(decided.engine, cases, cases.c.case_id == other.case_id)
    assert o.links == str(big.case_id)
    members_now = rows(decided.engine, alerts, alerts.c.case_id == big.case_id)
    assert {(a.state, a.disposition) for a in members_now} == {
        ("closed", "FALSE_POSITIVE")}
    with pytest.raises(CaseConflictError):
        act(decided, BOB, "close", case=big.case_id, disposition="FALSE_POSITIVE", rationale="again")
    verify_index(decided.engine)


def test_four_eyes_false_positive_on_a_case_under_a_sealed_policy(decided: Ledger) -> None:
    set_policy(decided, DeadlinePolicy(version="bank-2026-12", four_eyes_false_positive=True,
                                       review_business_days=3), ALICE, "FP closures need a second officer")
    catch_up(decided.engine)
    assert {a.policy_seq for a in rows(decided.engine, alerts)} == {0}  # opened before it: the default
    with pytest.raises(CaseError) as info:
        DeadlinePolicy.from_json({"version": "x", "subject": "branch"})
    assert info.value.field == "policy.subject"


def test_a_damaged_view_row_fails_verify_naming_table_and_seq(decided: Ledger) -> None:
    catch_up(decided.engine)
    hold = first(decided.engine, "HOLD")
    act(decided, ALICE, "release", alert=hold.seq, rationale="verified")
    verify_index(decided.engine)
    keys = {"audit_alerts": "seq", "audit_cases": "case_id"}
    for table, key, sql in [
        ("audit_alerts", hold.seq, f"UPDATE audit_alerts SET state = 'closed' WHERE seq = {hold.seq}"),
        ("audit_cases", hold.case_id, f"UPDATE audit_cases SET assignee_subject = 'CN=x' "
                                      f"WHERE case_id = {hold.case_id}"),
    ]:
        with decided.engine.begin() as conn:
            saved = conn.execute(text(f"SELECT * FROM {table} WHERE {keys[table]} = {key}")).first()
            assert saved is not None
            conn.execute(text(sql))
        with pytest.raises(DerivedRowError) as info:
            verify_index(decided.engine)
        assert (info.value.table, info.value.seq) == (table, key)
        with decided.engine.begin() as conn:  # put it back
            cols = saved._mapping
            sets = ", ".join(f"{k} = :{k}" for k in cols)
            conn.execute(text(f"UPDATE {table} SET {sets} WHERE {keys[table]} = :{keys[table]}"), dict(cols))
        verify_index(decided.engine)
    for table in ("audit_alerts", "audit_case_events", "audit_payment_outcomes"):
        with pytest.raises(DBAPIError, match="refused"), decided.engine.begin() as conn:
            conn.execute(text(f"DELETE FROM {table}"))
    with pytest.raises(DBAPIError, match="refused"), decided.engine.begin() as conn:
        conn.execute(text("UPDATE audit_payment_outcomes SET outcome = 'REJECTED'"))


def test_the_migration_creates_exactly_the_view_tables(db: Db) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    import migrations
    from audit.cases.tables import TABLES, metadata
    engine = db.engine()
    migrations.upgrade(engine)
    ours = {t.name for t in TABLES}

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is not None and table.name in ours

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include})
        assert compare_metadata(ctx, metadata) == []
    engine.dispose()


def test_queue_views_page_by_keyset_and_refuse_bad_filters(decided: Ledger) -> None:
    from datetime import date

    from audit.cases.query import AlertFilter, alert_page, case_detail, outcomes_since
    catch_up(decided.engine)
    everything = rows(decided.engine, alerts)
    a0 = everything[0]
    act(decided, ALICE, "assign", alert=a0.seq, assignee=BOB)

    def walk(f: AlertFilter, today: date = date(2026, 12, 5)) -> list[int]:
        out, cursor = [], None
        while True:
            page = alert_page(decided.engine, replace(f, cursor=cursor), today=today)
            out += [a.seq for a in page.items]
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    all_open = sorted((a.seq for a in everything), reverse=True)
    assert walk(AlertFilter(limit=3)) == all_open
    assert walk(AlertFilter(limit=4, order="oldest")) == sorted(all_open)
    assert walk(AlertFilter(view="mine", me=BOB.fingerprint_sha256)) == [a0.seq]
    assert walk(AlertFilter(view="unassigned", limit=5)) == [s for s in all_open if s != a0.seq]
    assert walk(AlertFilter(view="overdue"), today=date(2026, 1, 1)) == []
    far = walk(AlertFilter(view="overdue", limit=2), today=date(2027, 6, 1))
    assert sorted(far) == sorted(all_open) and len(far) == len(all_open)
    holds = [a.seq for a in reversed(everything) if a.outcome == "HOLD"]
    assert walk(AlertFilter(outcome="HOLD", limit=2)) == holds
    rule = everything[0].fired.split(",")[0]
    assert walk(AlertFilter(rule=rule, limit=2)) == [a.seq for a in reversed(everything)
                                                     if rule in a.fired.split(",")]
    bad: list[tuple[dict[str, Any], str]] = [
        ({"view": "later"}, "view"), ({"view": "mine"}, "view"), ({"limit": 0}, "limit"),
        ({"outcome": "MAYBE"}, "outcome"), ({"cursor": "bm9wZQ"}, "cursor"), ({"order": "random"}, "order"),
        ({"rule": "x;drop"}, "rule")]
    for kwargs, field in bad:
        with pytest.raises(CaseError) as info:
            AlertFilter(**kwargs)
        assert info.value.field == field
    page = alert_page(decided.engine, AlertFilter(limit=1), today=date(2026, 12, 5))
    with pytest.raises(CaseError, match="different filter"):
        AlertFilter(view="closed", cursor=page.next_cursor)
    detail = case_detail(decided.engine, a0.case_id)
    assert detail.case.case_id == a0.case_id and a0.seq in [a.seq for a in detail.alerts]
    history = [(e.action, e.principal["subject"], e.assignee and e.assignee["subject"])
               for e in detail.events]
    assert history == [("assign", ALICE.subject, BOB.subject)]
    with pytest.raises(CaseNotFoundError):
        case_detail(decided.engine, 10**9)
    hold = next(a for a in everything if a.outcome == "HOLD")
    r = act(decided, ALICE, "release", alert=hold.seq, rationale="ok")
    assert outcomes_since(decided.engine, 0, scorer_fp=hold.scorer_fp).items == [
        {"seq": r.seq, "trace_id": hold.trace_id, "outcome": "RELEASED", "alert_seq": hold.seq,
         "recorded_at": r.recorded_at}]
    assert outcomes_since(decided.engine, 0, scorer_fp="00" * 32).items == []
    assert outcomes_since(decided.engine, r.seq, scorer_fp=None).items == []


def test_a_forged_view_row_fails_verify_naming_table_and_seq(decided: Ledger) -> None:
    catch_up(decided.engine)
    hold = first(decided.engine, "HOLD")
    r = act(decided, ALICE, "release", alert=hold.seq, rationale="verified")
    tip = r.seq
    outcome = (f"INSERT INTO audit_payment_outcomes VALUES ({tip + 7}, {hold.seq}, '{hold.trace_id}', "
               f"'{hold.scorer_fp}', 'RELEASED', '{r.recorded_at}')")
    event = (f"INSERT INTO audit_case_events VALUES ({tip + 8}, {hold.case_id}, {hold.seq}, 'close', "
             f"'{'a1' * 32}', '{r.recorded_at}', 1, NULL)")
    forged = [
        ("audit_payment_outcomes", tip + 7, outcome),
        ("audit_case_events", tip + 8, event),
        ("audit_case_watermark", tip + 50, f"UPDATE audit_case_watermark SET seq = {tip + 50}"),
    ]
    for table, seq, sql in forged:
        with decided.engine.begin() as conn:
            conn.execute(text(sql))
        with pytest.raises(DerivedRowError) as info:
            verify_index(decided.engine)
        assert (info.value.table, info.value.seq) == (table, seq), info.value.findings
        if table != "audit_case_watermark":
            sqlite = decided.engine.dialect.name == "sqlite"
            with decided.engine.begin() as conn:  # undo it as only the schema's owner can
                conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_delete" if sqlite
                                  else f"ALTER TABLE {table} DISABLE TRIGGER USER"))
                conn.execute(text(f"DELETE FROM {table} WHERE seq = {seq}"))
    with decided.engine.begin() as conn:
        conn.execute(text(f"UPDATE audit_case_watermark SET seq = {tip}"))
    verify_index(decided.engine)


@pytest.mark.requirement("SR11-7-monitoring")
def test_rule_and_model_performance_from_worked_alerts(decided: Ledger) -> None:
    import csv
    import io

    from audit.cases.performance import model_performance, rule_performance, to_csv
    catch_up(decided.engine)
    quiet = [a for a in rows(decided.engine, alerts) if a.payment is None]
    assert len(quiet) >= 2
    act(decided, ALICE, "close", alert=quiet[0].seq, disposition="FALSE_POSITIVE", rationale="payroll")
    act(decided, ALICE, "close", alert=quiet[1].seq, disposition="NO_FURTHER_ACTION", rationale="explained")
    perf = rule_performance(decided.engine)
    # an independent count from the sealed records
    hits: dict[tuple[str, str], int] = {}
    for d in decisions(decided.engine):
        b = d["record"]
        for rid in dict.fromkeys(h["id"] for h in b["fired"]):
            key = (rid, f"{b['rules']['ruleset_id']}@{b['rules']['version']}")
            hits[key] = hits.get(key, 0) + 1
    assert {(p.key, p.group): p.hits for p in perf} == hits
    now = {a.seq: a for a in rows(decided.engine, alerts)}
    for p in perf:
        mine = [a for a in now.values() if p.key in a.fired.split(",") and a.ruleset == p.group]
        assert (p.alerts, p.open, p.closed) == (len(mine), sum(a.is_open for a in mine),
                                                sum(not a.is_open for a in mine))
        fp = sum(a.disposition == "FALSE_POSITIVE" for a in mine)
        assert p.false_positive == fp
        assert p.false_positive_rate == (fp / p.closed if p.closed else None)
        assert (p.median_hours_to_close is None) == (p.closed == 0)
    bands = model_performance(decided.engine)
    assert sum(p.alerts for p in bands) == len(now) and sum(p.closed for p in bands) == 2
    assert all(p.hits is None for p in bands)
    table = list(csv.reader(io.StringIO(to_csv(perf))))
    assert table[0][:4] == ["key", "group", "hits", "alerts"] and len(table) == len(perf) + 1


@pytest.mark.requirement("FATF-R21-tipping-off")
def test_reads_of_cases_and_reports_are_sealed_and_listed(decided: Ledger, signer: NoteSigner) -> None:
    from audit.cases.reads import list_reads, record_reads
    from ledger.verify import verify_ledger
    catch_up(decided.engine)
    c1, c2 = [c.case_id for c in rows(decided.engine, cases)][:2]
    s1 = record_reads(decided, ALICE, [{"case": c1, "what": "case"}])
    s2 = record_reads(decided, BOB, [{"case": c1, "what": "report", "report": "ab" * 32},
                                     {"case": c2, "what": "queue"}])
    s3 = record_reads(decided, ALICE, [{"case": c2, "what": "case"}])
    every = list_reads(decided.engine)
    assert [r.seq for r in every.items] == [s3, s2, s1] and every.next_before is None
    only = list_reads(decided.engine, case_id=c1, limit=1)
    assert [(r.seq, r.principal["subject"], r.reads) for r in only.items] == [
        (s2, BOB.subject, [{"case": c1, "what": "report", "report": "ab" * 32}])]
    assert only.next_before == s2
    older = list_reads(decided.engine, case_id=c1, before=only.next_before)
    assert [r.seq for r in older.items] == [s1] and older.next_before is None
    before = entries(decided.engine)
    for reads, field in [([], "reads"), ([{"case": c1, "what": "peek"}], "reads[0].what"),
                         ([{"case": "1", "what": "case"}], "reads[0].case"),
                         ([{"case": c1, "what": "report"}], "reads[0].report")]:
        with pytest.raises(CaseError) as info:
            record_reads(decided, ALICE, reads)
        assert info.value.field == field
    assert entries(decided.engine) == before
    verify_ledger(decided.engine, [signer.verifier])
    verify_index(decided.engine)
