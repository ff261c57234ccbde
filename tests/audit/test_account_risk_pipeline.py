"""Account risk in the pipeline: every sealed decision states it (decision/2), an account alert
is raised by the crossing decision even when it is ALLOW, a rebuild from the ledger holds the
live bits, and a failed commit leaves no trace in the state."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import numpy.typing as npt
import orjson
import pytest

from audit.decide.account_risk import (
    AccountRisk,
    AccountRiskError,
    AccountRiskPolicy,
    AccountRiskState,
    RiskEvent,
    event_hour,
)
from audit.decide.pipeline import Pipeline
from audit.decide.record import DECISION_SCHEMA, DECISION_SCHEMA_V5
from audit.decide.types import ActiveRules, Submission
from audit.state.account_risk_replay import apply_records, rebuild_account_risk, risk_fields
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import LedgerUnavailableError
from ledger.append import Ledger
from tests.audit.test_pipeline import PRINCIPAL, FailingLedger, bodies, submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

ALLOW_ALL = """
[ruleset]
id = "allow_all"
version = "1"
description = "Allows every payment scored below 2."
features = ["model_score"]

[[rules]]
id = "NEVER"
when = "model_score > 2"
outcome = "REVIEW"
reason = "never fires"
severity = "low"
"""
IBAN_A = "DE89370400440532013000"


class ConstantScorer:
    name = "constant"
    model_sha256 = "00" * 32

    def __init__(self, score: float) -> None:
        self.score = score

    def predict(self, rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.full(len(rows), self.score)


def from_one_account(n: int) -> list[Submission]:
    """``n`` payments from IBAN_A, each to another beneficiary, a minute apart."""
    base = submissions(n, seed=11)[:n]
    out = []
    for i, s in enumerate(base):
        doc = orjson.loads(s.transaction.canonical_bytes())
        doc["originator"]["account"] = doc["originator"]["iban"] = IBAN_A
        doc["uetr"], doc["reference"] = str(uuid.UUID(int=i + 1, version=4)), f"RISK{i:04d}"
        (sub,) = Submission.parse(orjson.dumps(doc), "json", PRINCIPAL,
                                  base[0].received_at + timedelta(minutes=i))
        assert isinstance(sub, Submission)
        out.append(sub)
    return out


def allow_pipeline(ledger: Ledger, sandbox: Sandbox, score: float, policy: AccountRiskPolicy) -> Pipeline:
    rules = ActiveRules.of(sandbox.load(compile_ruleset(parse_ruleset(ALLOW_ALL))))
    return Pipeline(ledger, ConstantScorer(score), rules, account_risk=AccountRiskState(policy))


@pytest.mark.requirement("FATF-R10-monitoring")
def test_allow_payments_with_high_scores_cross_the_threshold_and_alert(  # type: ignore[no-untyped-def]
        sqlite_db: Db, signer, sandbox) -> None:
    ledger = make_ledger(sqlite_db, signer)
    pipe = allow_pipeline(ledger, sandbox, 0.45, AccountRiskPolicy())  # 4,500 milli-points each
    got = [d for s in from_one_account(14) for d in pipe.decide([s])]
    assert {d.decision for d in got} == {"ALLOW"}
    risks = [d.account_risk for d in got]
    assert all(r is not None for r in risks)
    orig = [r.originator.after_milli for r in risks if r is not None and r.originator is not None]
    assert orig == [4500 * (i + 1) for i in range(14)]
    alerts = [r.alerts for r in risks if r is not None]
    assert alerts[11] == ("originator",)  # 54,000 >= 50,000: the twelfth payment crosses
    assert [i for i, a in enumerate(alerts) if a] == [11]  # once, on the crossing only
    sealed = [env["record"] for _, env, _ in bodies(ledger.engine)]
    # a scorer that carries no model to attribute to: version 4 without the explanation field; one
    # that states no precision: version 5, its model naming none
    assert all(b["schema"] == DECISION_SCHEMA_V5 and "explanation" not in b and "precision" not in b["model"]
               for b in sealed)
    assert sealed[11]["account_risk"]["alerts"] == ["originator"] and sealed[11]["decision"] == "ALLOW"
    assert sealed[11]["account_risk"]["max_milli"] == 54_000
    assert IBAN_A not in orjson.dumps(sealed).decode()  # keyed, never in clear


def test_a_rebuild_from_the_ledger_holds_the_live_state_bit_for_bit(  # type: ignore[no-untyped-def]
        db: Db, signer, sandbox, pack_wasm) -> None:
    ledger = make_ledger(db, signer)
    files = ModelFiles.open()
    rules = ActiveRules.of(sandbox.load(pack_wasm))
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), rules,
                    account_risk=AccountRiskState(AccountRiskPolicy(half_life_hours=6, threshold_milli=3000)))
    subs = submissions(600, seed=7)[:600]  # three days of payments: decay and daily sweeps happen
    for k in range(0, len(subs), 75):
        pipe.decide(subs[k:k + 75])
    live = pipe.account_risk
    rebuilt, report = rebuild_account_risk(ledger.engine, AccountRiskPolicy(half_life_hours=6,
                                                                            threshold_milli=3000))
    assert (report.applied, report.mismatched, report.unreadable) == (600, 0, 0)
    assert rebuilt.fingerprint() == live.fingerprint()
    named = {a for s in subs for a in (s.transaction.originator.account, s.transaction.beneficiary.account)
             if a}
    assert 0 < len(live) < len(named)  # the sweep dropped accounts that decayed below one point
    sealed = [env["record"] for _, env, _ in bodies(ledger.engine)]
    assert any(b["account_risk"]["alerts"] for b in sealed)
    # what a decider catching up holds of each body (risk_fields) applies as the whole body does
    slim = AccountRiskState(AccountRiskPolicy(half_life_hours=6, threshold_milli=3000))
    got_report = apply_records(slim, [(s, risk_fields(env["record"])) for s, env, _ in bodies(ledger.engine)])
    assert slim.fingerprint() == live.fingerprint()
    assert (got_report.applied, got_report.mismatched) == (600, 0)
    assert all(len(risk_fields(b)) < len(b) for b in sealed)
    # a process that starts from the rebuild decides the next payments exactly as the live one
    more = submissions(100, seed=8)[:100]
    shifted = [Submission(s.raw, s.transaction, s.message_format, s.principal,
                          s.received_at + timedelta(days=3)) for s in more]
    second = Pipeline(ledger, load_backend("numpy", files.weights_path), rules, account_risk=rebuilt)
    got = second.decide(shifted)
    check, _ = rebuild_account_risk(ledger.engine, AccountRiskPolicy(half_life_hours=6, threshold_milli=3000))
    assert check.fingerprint() == rebuilt.fingerprint()
    assert [d.account_risk for d in got] == [AccountRisk.from_json(env["record"]["account_risk"])
                                             for _, env, _ in bodies(ledger.engine)[600:]]


def test_a_failed_commit_adds_nothing_to_account_risk(sqlite_db: Db, signer, sandbox) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    flaky = FailingLedger(ledger)
    rules = ActiveRules.of(sandbox.load(compile_ruleset(parse_ruleset(ALLOW_ALL))))
    pipe = Pipeline(flaky, ConstantScorer(0.45), rules)  # type: ignore[arg-type]
    subs = from_one_account(6)
    flaky.fail = False
    pipe.decide(subs[:2])
    flaky.fail = True
    with pytest.raises(LedgerUnavailableError):
        pipe.decide(subs[2:4])  # never recorded: its points must not count
    flaky.fail = False
    got = pipe.decide(subs[4:])
    assert [d.account_risk.originator.before_milli for d in got  # type: ignore[union-attr]
            ] == [9000, 13_500]
    rebuilt, _ = rebuild_account_risk(ledger.engine)
    assert rebuilt.fingerprint() == pipe.account_risk.fingerprint()


def test_version_1_records_add_nothing_and_a_forged_risk_is_counted() -> None:
    state = AccountRiskState()
    risk = state.assess([], "0123456789abcdef")
    state.discard(risk)
    good = AccountRiskState(AccountRiskPolicy(threshold_milli=1000))
    first = good.assess([_event()], "0123456789abcdef").results[0]
    body = {"schema": DECISION_SCHEMA, "at": "2026-03-02T09:30:00.000000Z", "score_ppm": 450_000,
            "decision": "ALLOW", "fail_safe": None, "account_risk": first.to_json()}
    v1 = {"schema": "sealtrail.decision/1", "at": body["at"], "score": 0.9, "decision": "BLOCK",
          "fail_safe": None}
    forged = orjson.loads(orjson.dumps(body))
    forged["account_risk"]["originator"]["before_milli"] = 100
    forged["account_risk"]["originator"]["after_milli"] = 4600
    forged["account_risk"]["max_milli"] = 4600
    report = apply_records(state, [(1, v1), (2, body), (3, forged)])
    assert (report.applied, report.without_risk, report.mismatched, report.first_mismatch_seq) == (2, 1, 1, 3)
    bad = {**body, "account_risk": {**first.to_json(), "alerts": ["beneficiary"]}}
    assert apply_records(AccountRiskState(), [(4, bad)]).unreadable == 1


def _event() -> RiskEvent:
    return RiskEvent(event_hour("2026-03-02T09:30:00.000000Z"), "a" * 32, "b" * 32, 4500)


def test_a_bad_policy_setting_refuses_to_start() -> None:
    class Settings:
        account_risk_half_life_hours = 0

    with pytest.raises(AccountRiskError, match=r"half_life_hours must be an integer in 1\.\.8760, not 0"):
        AccountRiskPolicy.from_settings(Settings())
