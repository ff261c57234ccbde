"""Account risk (sealtrail.account-risk/1): points, exact integer decay, alerts, the state's
pending batches, and the policy's refusals."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal, getcontext

import pytest

from audit.decide.account_risk import (
    FLOOR_MILLI,
    AccountRisk,
    AccountRiskError,
    AccountRiskPolicy,
    AccountRiskState,
    RiskEvent,
    check_account_risk,
    decay,
    decay_table,
    event_hour,
    points_milli,
)

KID = "0123456789abcdef"
A, B, C = "a" * 32, "b" * 32, "c" * 32
T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def test_decay_halves_exactly_at_each_half_life() -> None:
    for hl in (1, 24, 336, 8760):
        assert decay(2000, hl, hl) == 1000
        assert decay(10**9, 2 * hl, hl) == 10**9 // 4
        assert decay(7, hl, hl) == 3  # floor
        assert decay(12345, 0, hl) == 12345


def test_decay_table_matches_an_independent_high_precision_reference() -> None:
    getcontext().prec = 80
    for hl in (7, 336):
        table = decay_table(hl)
        assert table[0] == 2**32 and len(table) == hl
        for h in (1, hl // 2, hl - 1):
            want = Decimal(2) ** (Decimal(32) - Decimal(h) / Decimal(hl))
            assert abs(table[h] - want) <= 2  # iterated Q64 products, each rounded down


def test_decay_never_increases_with_time() -> None:
    got = [decay(987_654, h, 336) for h in range(0, 3 * 336 + 5)]
    assert all(a >= b for a, b in itertools.pairwise(got))
    assert got[336] == 987_654 // 2


def test_points_follow_the_stated_constants() -> None:
    p = AccountRiskPolicy()
    assert points_milli(p, 0.8, "ALLOW", None) == 8000
    assert points_milli(p, 0.0005, "ALLOW", None) == 0  # round half to even: 0.5 -> 0
    assert points_milli(p, 1.0, "REVIEW", None) == 10_000 + 10_000
    assert points_milli(p, None, "HOLD", None) == 5_000 + 25_000
    assert points_milli(p, 0.9, "BLOCK", None) == 9_000 + 50_000
    assert points_milli(p, None, "HOLD", "SANDBOX_FAULT: trap") == 0  # the system decided: nothing


@pytest.mark.parametrize("kw", [
    {"half_life_hours": 0}, {"half_life_hours": 8761}, {"half_life_hours": 1.5},
    {"threshold_milli": 999}, {"threshold_milli": True}, {"review_milli": -1},
    {"block_milli": 10**10}, {"score_milli": "10"},
])
def test_bad_policy_values_are_refused_naming_the_field(kw: dict[str, object]) -> None:
    name = next(iter(kw))
    with pytest.raises(AccountRiskError, match=name):
        AccountRiskPolicy(**kw)  # type: ignore[arg-type]


def test_a_policy_reads_back_from_what_a_record_states() -> None:
    p = AccountRiskPolicy(half_life_hours=48, threshold_milli=7000)
    assert AccountRiskPolicy.from_json(p.to_json()) == p
    doc = p.to_json()
    doc["floor_milli"] = 5
    with pytest.raises(AccountRiskError, match="floor_milli"):
        AccountRiskPolicy.from_json(doc)
    with pytest.raises(AccountRiskError, match="policy"):
        AccountRiskPolicy.from_json({"id": "sealtrail.account-risk/9"})


@pytest.mark.parametrize(("field", "value"), [("score_milli", True), ("half_life_hours", 48.0),
                                              ("missing_score_milli", 1.0)])
def test_a_policy_read_once_does_not_let_the_same_values_of_another_type_through(field: str,
                                                                                 value: object) -> None:
    p = AccountRiskPolicy(half_life_hours=48, score_milli=1, missing_score_milli=1)
    assert AccountRiskPolicy.from_json(p.to_json()) is AccountRiskPolicy.from_json(p.to_json())  # held
    doc = p.to_json()
    doc[field] = value  # equal to the held policy's value (True == 1, 48.0 == 48), not an integer
    with pytest.raises(AccountRiskError, match=field):
        AccountRiskPolicy.from_json(doc)


def _ev(t: datetime, o: str | None, b: str | None, pts: int) -> RiskEvent:
    return RiskEvent(event_hour(t), o, b, pts)


def test_high_score_allow_payments_accumulate_and_alert_once_on_the_crossing() -> None:
    state = AccountRiskState(AccountRiskPolicy(threshold_milli=50_000))
    got: list[AccountRisk] = []
    for i in range(8):  # eight payments from A to distinct accounts, 0.9 each, all ALLOW
        pend = state.assess([_ev(T0 + timedelta(minutes=i), A, f"{i:032x}", 9000)], KID)
        state.commit(pend)
        got += pend.results
    assert [r.originator.after_milli for r in got if r.originator] == [9000 * (i + 1) for i in range(8)]
    assert [r.alerts for r in got] == [(), (), (), (), (), ("originator",), (), ()]  # 54,000 >= 50,000
    assert got[5].max_milli == 54_000 and got[5].alert


def test_risk_halves_after_the_half_life_and_is_forgotten_below_one_point() -> None:
    state = AccountRiskState(AccountRiskPolicy(half_life_hours=24))
    state.commit(state.assess([_ev(T0, A, B, 8000)], KID))
    later = state.assess([_ev(T0 + timedelta(hours=24), A, None, 0)], KID)
    assert later.results[0].originator is not None and later.results[0].originator.before_milli == 4000
    state.commit(later)
    assert state.risk(B) == 4000
    # three more half-lives: 500 < 1 point at the start of a day -> dropped by the day's sweep
    state.commit(state.assess([_ev(T0 + timedelta(hours=96), C, None, 0)], KID))
    assert B not in state.accounts and state.risk(B) == 0


def test_one_account_on_both_sides_counts_its_points_once() -> None:
    state = AccountRiskState()
    pend = state.assess([_ev(T0, A, A, 3000)], KID)
    r = pend.results[0]
    assert r.originator == r.beneficiary and r.originator is not None and r.originator.after_milli == 3000


def test_pending_batches_stack_and_a_discarded_one_leaves_no_trace() -> None:
    state = AccountRiskState()
    first = state.assess([_ev(T0, A, B, 1000)], KID, epoch=0)
    second = state.assess([_ev(T0, A, None, 1000)], KID, epoch=0)  # sees the first, not yet committed
    assert second.results[0].originator is not None and second.results[0].originator.before_milli == 1000
    state.discard(first)
    state.discard(second)
    again = state.assess([_ev(T0, A, None, 1000)], KID, epoch=1)
    assert again.results[0].originator is not None and again.results[0].originator.before_milli == 0
    state.commit(again)
    assert state.accounts == {A: (1000, event_hour(T0))}


def test_a_new_epoch_does_not_read_batches_pending_on_the_old_one() -> None:
    state = AccountRiskState()
    state.assess([_ev(T0, A, None, 5000)], KID, epoch=0)  # will be refused: its commit never comes
    fresh = state.assess([_ev(T0, A, None, 5000)], KID, epoch=1)
    assert fresh.results[0].originator is not None and fresh.results[0].originator.before_milli == 0


def test_time_never_runs_back_for_the_state() -> None:
    state = AccountRiskState(AccountRiskPolicy(half_life_hours=1))
    state.commit(state.assess([_ev(T0, A, None, 4000)], KID))
    pend = state.assess([_ev(T0 - timedelta(hours=5), A, None, 0)], KID)  # an earlier event time
    assert pend.results[0].originator is not None and pend.results[0].originator.before_milli == 4000


def test_a_recorded_account_risk_is_checked_for_self_consistency() -> None:
    state = AccountRiskState(AccountRiskPolicy(threshold_milli=5000))
    risk = state.assess([_ev(T0, A, B, 6000)], KID).results[0]
    body = {"score": 0.6, "decision": "ALLOW", "fail_safe": None, "account_risk": risk.to_json()}
    assert check_account_risk(body) == risk and risk.alerts == ("originator", "beneficiary")
    bad = [
        ("max_milli", 1, "max_milli"),
        ("alerts", ["originator"], "alerts"),
        ("points_milli", 7000, "after_milli"),
    ]
    for key, value, match in bad:
        doc = risk.to_json()
        doc[key] = value
        with pytest.raises(AccountRiskError, match=match):
            check_account_risk({**body, "account_risk": doc})
    with pytest.raises(AccountRiskError, match="points_milli is 6000"):
        check_account_risk({**body, "decision": "REVIEW"})
    doc = risk.to_json()
    doc["originator"] = {**doc["originator"], "account": "ACCOUNT-IN-CLEAR"}
    with pytest.raises(AccountRiskError, match="32 hex"):
        check_account_risk({**body, "account_risk": doc})


def test_the_floor_is_one_point() -> None:
    assert FLOOR_MILLI == 1000


def test_the_fast_canonical_bytes_equal_the_reference_encoder() -> None:
    import rfc8785

    from ledger.jcs import canonical_bytes

    state = AccountRiskState(AccountRiskPolicy(threshold_milli=2000, review_milli=7))
    events = [_ev(T0 + timedelta(hours=i * 7), o, b, pts)
              for i, (o, b, pts) in enumerate([(A, B, 1500), (A, None, 900), (None, C, 0), (B, B, 10**9),
                                               (None, None, 5), (C, A, 123_456)])]
    for r in state.assess(events, KID).results:
        assert r.to_jcs() == bytes(canonical_bytes(r.to_json())) == rfc8785.dumps(r.to_json())
