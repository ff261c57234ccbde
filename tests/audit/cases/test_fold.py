"""The alert and case fold and the deadline policy, on hand-made sealed records (no database)."""

from __future__ import annotations

from typing import Any

import pytest

from audit.cases.events import EVENT_KIND, event_body, parse_event, policy_body
from audit.cases.fold import CaseFold
from audit.cases.policy import DEFAULT_POLICY, POLICY_KIND, DeadlinePolicy
from audit.errors import CaseError
from tests.audit.cases.test_cases import ALICE, BOB

A, B = "11" * 16, "22" * 16


Rec = tuple[int, str, dict[str, Any]]


def decision(seq: int, outcome: str, *, originator: str | None = A, beneficiary: str = B,
             alerts: tuple[str, ...] = (), day: str = "2026-12-04") -> Rec:
    risk = {"originator": None if originator is None else {"account": originator, "before_milli": 0,
                                                            "after_milli": 0},
            "beneficiary": {"account": beneficiary, "before_milli": 0, "after_milli": 0},
            "alerts": list(alerts)}
    body = {"decision": outcome, "fired": [{"id": "R1"}, {"id": "R1"}, {"id": "R2"}],
            "principal": {"fingerprint_sha256": "ee" * 32}, "account_risk": risk}
    return seq, "decision", {"trace_id": f"00000000-0000-7000-8000-{seq:012d}",
                             "recorded_at": f"{day}T10:00:00.000000Z", "record": body,
                             "leaf_hash": f"{seq:064x}"}


def event(seq: int, target: dict[str, Any], action: str, who: Any = ALICE, **kw: Any) -> Rec:
    return seq, EVENT_KIND, {"trace_id": f"e-{seq}", "recorded_at": "2026-12-07T09:00:00.000000Z",
                             "record": event_body(target, action, who.to_json(), **kw)}


def on(seq: int) -> dict[str, Any]:
    return {"alert": {"trace_id": f"00000000-0000-7000-8000-{seq:012d}", "seq": seq,
                      "leaf_hash": f"{seq:064x}"}}


def test_alerts_cases_and_a_new_case_after_the_subjects_case_closed() -> None:
    f = CaseFold()
    f.apply([decision(1, "ALLOW"), decision(2, "REVIEW"), decision(3, "ALLOW", alerts=("beneficiary",)),
             decision(4, "HOLD"), decision(5, "REVIEW", originator=None)])
    assert sorted(f.alerts) == [2, 3, 4, 5]
    assert f.alerts[2].fired == "R1,R2" and f.alerts[4].payment == "HELD" and f.alerts[2].payment is None
    assert (f.alerts[3].subject, f.alerts[3].account_alert) == (f"account:{B}", 2)
    assert f.alerts[5].subject == "decision:5"  # no originator account stated: a case of its own
    assert (f.alerts[4].case_id, f.cases[2].alerts, f.cases[2].open_alerts) == (2, 2, 2)
    filed = event(7, {"case": 2}, "file_report", rationale="STR to the FIU", report="cd" * 32)
    f.apply([event(6, on(4), "reject", rationale="confirmed mule"),
             event(7, {"case": 2}, "file_report", rationale="no payload", report="cd" * 32)])
    assert not f.events[-1].applied and f.cases[2].reports == 0  # the report's bytes must be the payload
    f.apply([(8, EVENT_KIND, {**filed[2], "payload_sha256": "cd" * 32}),
             event(9, {"case": 2}, "close", disposition="REPORT_FILED", rationale="filed")])
    assert (f.cases[2].open, f.cases[2].disposition, f.cases[2].closed_at, f.cases[2].last_report) == (
        False, "REPORT_FILED", "2026-12-07T09:00:00.000000Z", "cd" * 32)
    assert f.alerts[2].next_review_due == "2027-03-07"  # 90 days after the filing
    f.apply([decision(10, "BLOCK", day="2026-12-08")])
    assert f.alerts[10].case_id == 10 and f.cases[10].subject == f"account:{A}"  # a new case
    f.apply([event(11, on(2), "reopen", rationale="more activity")])
    assert f.cases[2].open and f.cases[2].disposition is None
    f.apply([decision(12, "REVIEW", day="2026-12-09")])
    assert f.alerts[12].case_id == 10  # the newest open case of the subject takes it
    assert [(e.seq, e.applied) for e in f.events] == [(6, True), (7, False), (8, True), (9, True), (11, True)]


@pytest.mark.requirement("BSA-1020.320-deadline")
def test_a_policy_applies_to_alerts_opened_after_it() -> None:
    policy = DeadlinePolicy(version="bank/2", review_business_days=2, filing_calendar_days=20,
                            holidays=("2026-12-07",))
    f = CaseFold()
    f.apply([decision(1, "REVIEW", day="2026-12-04"),
             (2, POLICY_KIND, {"trace_id": "p", "recorded_at": "2026-12-04T11:00:00.000000Z",
                               "record": policy_body(policy, ALICE.to_json(), "tighter review")}),
             decision(3, "REVIEW", day="2026-12-04", originator="33" * 16)])
    assert (f.alerts[1].policy_seq, f.alerts[1].review_due, f.alerts[1].filing_due) == (
        0, "2026-12-11", "2027-01-03")
    # Friday + 2 business days, Monday the 7th a holiday: Tuesday, Wednesday
    assert (f.alerts[3].policy_seq, f.alerts[3].review_due, f.alerts[3].filing_due) == (
        2, "2026-12-09", "2026-12-24")


@pytest.mark.parametrize(("opened", "days", "due"), [
    ("2026-12-04", 5, "2026-12-11"),  # Friday
    ("2026-12-05", 5, "2026-12-11"),  # Saturday: Monday is the first business day after
    ("2026-12-24", 1, "2026-12-25"),
    ("2026-12-31", 3, "2027-01-05"),
])
def test_review_due_counts_business_days(opened: str, days: int, due: str) -> None:
    p = DeadlinePolicy(version="t", review_business_days=days)
    assert p.review_due(f"{opened}T23:59:59.999999Z") == due
    assert DeadlinePolicy(version="t", review_business_days=1, holidays=("2026-12-25",)).review_due(
        "2026-12-24T00:00:00.000000Z") == "2026-12-28"


def test_four_eyes_and_refusals_in_the_fold() -> None:
    f = CaseFold()
    policy = DeadlinePolicy(version="fe", four_eyes_false_positive=True)
    f.apply([(1, POLICY_KIND, {"trace_id": "p", "recorded_at": "2026-12-04T09:00:00.000000Z",
                               "record": policy_body(policy, ALICE.to_json(), "four eyes")}),
             decision(2, "REVIEW"), decision(3, "BLOCK"),
             event(4, on(3), "release", rationale="namesake"),
             event(5, on(3), "approve"),  # the proposer: refused
             event(6, on(3), "approve", who=BOB),
             event(7, {"case": 2}, "close", disposition="FALSE_POSITIVE", rationale="payroll"),
             event(8, {"case": 2}, "approve"),  # Alice proposed it
             event(9, {"case": 2}, "approve", who=BOB),
             event(10, on(2), "comment", rationale="after close")])
    assert [(e.seq, e.applied) for e in f.events] == [(4, True), (5, False), (6, True), (7, True), (8, False),
                                                      (9, True), (10, True)]
    assert "four-eyes" in (f.events[1].why or "") and "four-eyes" in (f.events[4].why or "")
    assert [(o.seq, o.outcome) for o in f.outcomes] == [(6, "RELEASED")]
    assert (f.cases[2].open, f.cases[2].disposition) == (False, "FALSE_POSITIVE")
    assert {f.alerts[2].state, f.alerts[3].state} == {"closed"}


@pytest.mark.parametrize(("change", "field"), [
    ({"action": "assign"}, "assignee"),
    ({"rationale": None}, "rationale"),
    ({"disposition": "NO_FURTHER_ACTION"}, "disposition"),
    ({"extra": 1}, "record"),
    ({"target": {"alert": {"seq": 1}}}, "target"),
    ({"target": {"case": "1"}}, "target"),
    ({"principal": {"subject": "CN=x"}}, "principal"),
    ({"schema": "sealtrail.case-event/0"}, "schema"),
])
def test_a_forged_event_body_is_refused_by_the_fold(change: dict[str, Any], field: str) -> None:
    body = {**event_body(on(1), "comment", ALICE.to_json(), rationale="x"), **change}
    with pytest.raises(CaseError) as info:
        parse_event(body)
    assert info.value.field == field
    f = CaseFold()
    forged = (2, EVENT_KIND, {"trace_id": "x", "recorded_at": "2026-12-05T00:00:00.000000Z", "record": body})
    f.apply([decision(1, "REVIEW"), forged])
    assert not f.events[0].applied and f.alerts[1].events == 0


def test_quality_assurance_samples_closed_alerts_and_needs_another_reviewer() -> None:
    policy = DeadlinePolicy(version="qa", qa_sample_permille=1000)
    f = CaseFold()
    f.apply([(1, POLICY_KIND, {"trace_id": "p", "recorded_at": "2026-12-04T09:00:00.000000Z",
                               "record": policy_body(policy, ALICE.to_json(), "sample everything")}),
             decision(2, "REVIEW"),
             event(3, on(2), "qa_review", verdict="AGREE", rationale="too early"),
             event(4, on(2), "close", disposition="NO_FURTHER_ACTION", rationale="explained"),
             event(5, on(2), "qa_review", verdict="DISAGREE", rationale="my own"),
             event(6, on(2), "qa_review", who=BOB, verdict="DISAGREE", rationale="funds unexplained")])
    assert [(e.seq, e.applied) for e in f.events] == [(3, False), (4, True), (5, False), (6, True)]
    assert "cannot review their own closure" in (f.events[2].why or "")
    assert f.alerts[2].qa == "disagreed"
    f.apply([event(7, on(2), "reopen", rationale="after QA")])
    reopened = f.alerts[2]
    assert reopened.qa is None and reopened.closed_by is None
    with pytest.raises(CaseError) as info:
        event_body(on(2), "qa_review", ALICE.to_json(), rationale="x")
    assert info.value.field == "verdict"
    with pytest.raises(CaseError) as info:
        event_body(on(2), "comment", ALICE.to_json(), rationale="x", verdict="AGREE")
    assert info.value.field == "verdict"
    # the sample is a function of the trace id alone: the same in every process, about the rate asked
    tenth = DeadlinePolicy(version="qa", qa_sample_permille=100)
    drawn = [tenth.qa_sampled(f"00000000-0000-7000-8000-{i:012d}") for i in range(5000)]
    assert 400 < sum(drawn) < 600 and drawn == [tenth.qa_sampled(f"00000000-0000-7000-8000-{i:012d}")
                                                 for i in range(5000)]
    assert not any(DEFAULT_POLICY.qa_sampled(f"t{i}") for i in range(1000))


@pytest.mark.requirement("BSA-1020.320-deadline")
def test_default_policy_and_bad_policies() -> None:
    assert DEFAULT_POLICY.to_json() == {"version": "sealtrail-default/1", "review_business_days": 5,
                                        "filing_calendar_days": 30, "continuing_review_days": 90,
                                        "holidays": [],
                                        "subject": "originator", "four_eyes_false_positive": False,
                                        "qa_sample_permille": 0}
    assert DeadlinePolicy.from_toml('version = "b"\nholidays = [2026-12-25]\n').holidays == ("2026-12-25",)
    for doc, field in [({"version": ""}, "policy.version"), ({"version": "v", "review_business_days": 0},
                                                             "policy.review_business_days"),
                       ({"version": "v", "review_business_days": True}, "policy.review_business_days"),
                       ({"version": "v", "holidays": ["2026-02-30"]}, "policy.holidays"),
                       ({"version": "v", "four_eyes_false_positive": 1}, "policy.four_eyes_false_positive"),
                       ({"version": "v", "sla": 3}, "policy.sla")]:
        with pytest.raises(CaseError) as info:
            DeadlinePolicy.from_json(doc)
        assert info.value.field == field


class _Stored:
    """The fold's loader over what earlier runs wrote (as the tables would hold it)."""

    def __init__(self) -> None:
        self.alerts: dict[int, Any] = {}
        self.cases: dict[int, Any] = {}
        self.policies: dict[int, DeadlinePolicy] = {}

    def keep(self, f: CaseFold) -> None:
        self.alerts.update({s: f.alerts[s] for s in f.dirty_alerts})
        self.cases.update({c: f.cases[c] for c in f.dirty_cases})
        self.policies.update({s: p for s, (_, p) in f._policies.items()})

    def alert(self, seq: int) -> Any:
        return self.alerts.get(seq)

    def case(self, case_id: int) -> Any:
        return self.cases.get(case_id)

    def open_cases(self, subject: str) -> list[int]:
        return [c.case_id for c in self.cases.values() if c.subject == subject and c.open]

    def case_alerts(self, case_id: int) -> list[Any]:
        return sorted((a for a in self.alerts.values() if a.case_id == case_id), key=lambda a: a.seq)

    def policy_at(self, seq: int) -> DeadlinePolicy | None:
        return self.policies.get(seq)

    def policy_before(self, seq: int) -> tuple[int, DeadlinePolicy] | None:
        below = [s for s in self.policies if s < seq]
        return (max(below), self.policies[max(below)]) if below else None


_ACTS: list[tuple[str, dict[str, Any]]] = [
    ("assign", {"assignee": BOB.to_json()}), ("start_review", {}), ("escalate", {"rationale": "r"}),
    ("close", {"disposition": "FALSE_POSITIVE", "rationale": "r"}),
    ("close", {"disposition": "NO_FURTHER_ACTION", "rationale": "r"}), ("reopen", {"rationale": "r"}),
    ("release", {"rationale": "r"}), ("reject", {"rationale": "r"}), ("approve", {}),
    ("refuse", {"rationale": "r"}), ("comment", {"rationale": "r"})]


@pytest.mark.parametrize("seed", range(12))
def test_folding_in_pieces_over_the_stored_view_equals_one_fold(seed: int) -> None:
    import random
    rng = random.Random(seed)
    accounts = [f"{i:032x}" for i in range(4)]
    recs: list[tuple[int, str, dict[str, Any]]] = []
    opened: list[int] = []
    for seq in range(1, 160):
        r = rng.random()
        if r < 0.4 or not opened:
            recs.append(decision(seq, rng.choice(["ALLOW", "REVIEW", "HOLD", "BLOCK"]),
                                 originator=rng.choice(accounts), alerts=rng.choice([(), ("beneficiary",)])))
            made = recs[-1][2]["record"]
            if made["decision"] != "ALLOW" or made["account_risk"]["alerts"]:
                opened.append(seq)
        elif r < 0.45:
            p = DeadlinePolicy(version=f"v{seq}", four_eyes_false_positive=rng.random() < 0.5,
                               subject=rng.choice(["originator", "beneficiary", "decision"]))
            recs.append((seq, POLICY_KIND, {"trace_id": "p", "recorded_at": "2026-12-04T11:00:00.000000Z",
                                            "record": policy_body(p, ALICE.to_json(), "change")}))
        elif r < 0.6:
            action, kw = rng.choice([x for x in _ACTS if x[0] in ("assign", "comment", "close", "approve",
                                                                   "refuse")])
            recs.append(event(seq, {"case": rng.choice(opened)}, action, who=rng.choice([ALICE, BOB]), **kw))
        else:
            action, kw = rng.choice(_ACTS)
            recs.append(event(seq, on(rng.choice(opened)), action, who=rng.choice([ALICE, BOB]), **kw))
    whole = CaseFold()
    whole.apply(recs)
    stored = _Stored()
    cuts = sorted(rng.sample(range(1, len(recs)), 6))
    events: list[Any] = []
    outcomes: list[Any] = []
    for lo, hi in zip([0, *cuts], [*cuts, len(recs)], strict=True):
        part = CaseFold(stored)
        part.last_seq = recs[lo - 1][0] if lo else 0
        part.apply(recs[lo:hi])
        stored.keep(part)
        events += part.events
        outcomes += part.outcomes
    assert stored.alerts == whole.alerts and stored.cases == whole.cases
    assert events == whole.events and outcomes == whole.outcomes
    assert sum(e.applied for e in events) > 10 and len(whole.cases) > 3
