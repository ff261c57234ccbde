"""Account risk over HTTP and the CLI: the decision answers (one and batch) state what the record
states, the search filters on it, bad filter values are refused, and a restarted runtime rebuilds
the same account-risk state from the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.decide.runtime import Runtime
from audit.state.risk_snapshot import risk_file
from tests.api.test_cli_score import Cli
from tests.api.test_cli_traces import all_pages, scored  # noqa: F401  (a fixture)
from tests.api.test_fail_closed import JSON, Served, in_process, txs
from tests.conftest import Db


def record_at(served: Served, seq: int) -> dict[str, Any]:
    with served.runtime.engine.connect() as conn:
        (rec,) = conn.exec_driver_sql(f"SELECT record FROM ledger_entries WHERE seq = {int(seq)}").one()
    env: dict[str, Any] = orjson.loads(bytes(rec))
    return env["record"]  # type: ignore[no-any-return]


def test_every_answer_states_the_account_risk_its_record_seals(served: Served) -> None:
    one, *rest = txs(6, seed=71)
    first = served.post(one)
    assert first.status_code == 200, first.text
    batch = served.client.post("/v1/decisions/batch", content=b"[" + b",".join(rest) + b"]",
                               headers={**JSON, "x-test-role": "scorer"})
    assert batch.status_code == 200, batch.text
    answers = [first.json(), *batch.json()["decisions"]]
    for a in answers:
        risk = a["account_risk"]
        assert risk["policy"]["id"] == "sealtrail.account-risk/1"
        sides = [x for x in (risk["originator"], risk["beneficiary"]) if x]
        assert risk["max_milli"] == max(x["after_milli"] for x in sides)
        assert record_at(served, a["ledger"]["seq"])["account_risk"] == risk
    page = served.client.get("/v1/traces", params={"account_risk_min_milli": 0},
                             headers={"x-test-role": "officer"})
    assert page.status_code == 200, page.text
    assert sorted(t["seq"] for t in page.json()["items"]) == sorted(a["ledger"]["seq"] for a in answers)
    assert {t["account_risk_milli"] for t in page.json()["items"]} == {a["account_risk"]["max_milli"]
                                                                         for a in answers}


@pytest.mark.parametrize("params", [{"account_risk_min_milli": "-1"}, {"account_risk_min_milli": "x"},
                                    {"account_alert": "maybe"}])
def test_bad_account_risk_filters_are_refused_with_422(served: Served, params: dict[str, str]) -> None:
    r = served.client.get("/v1/traces", params=params, headers={"x-test-role": "officer"})
    assert r.status_code == 422, r.text


def test_a_restarted_runtime_holds_the_same_account_risk(db: Db, tmp_path: Path) -> None:
    with in_process(db, tmp_path) as (client, rt, s):
        for tx in txs(30, seed=72):
            assert client.post("/v1/decisions", content=tx, headers={**JSON, "x-test-role": "scorer"}
                               ).status_code == 200
        live = rt.pipeline.account_risk.fingerprint()
    with Runtime.open(s) as again:  # from the account risk sealed at the clean stop: nothing to apply
        assert again.pipeline.account_risk.fingerprint() == live
        assert again.account_risk is not None and again.account_risk.applied == 0
        assert again.account_risk_snapshot is not None
    risk_file(s.velocity_snapshot_file).unlink()  # without the file: every decision of the log applied
    with Runtime.open(s) as rebuilt:
        assert rebuilt.pipeline.account_risk.fingerprint() == live
        assert rebuilt.account_risk is not None and rebuilt.account_risk.applied == 30
        assert rebuilt.account_risk_snapshot is None


def test_a_bad_account_risk_setting_refuses_to_open(db: Db, tmp_path: Path) -> None:
    from audit.decide.account_risk import AccountRiskError

    with in_process(db, tmp_path) as (_, _, s):
        class Bad:
            def __getattr__(self, name: str) -> Any:
                return getattr(s, name)
            account_risk_threshold_milli = 10

        with pytest.raises(AccountRiskError, match="threshold_milli"):
            Runtime.open(Bad())


def test_the_cli_filters_on_account_risk(scored: tuple[Cli, list[Any], list[Any]]) -> None:  # noqa: F811
    cli = scored[0]
    every = all_pages(cli, limit=200)
    assert all(t["account_risk_milli"] is not None for t in every)
    cut = sorted(t["account_risk_milli"] for t in every)[len(every) // 2]
    want = sorted((t["seq"] for t in every if t["account_risk_milli"] >= cut), reverse=True)
    got = all_pages(cli, "--account-risk-min", str(cut), limit=50)
    assert [t["seq"] for t in got] == want and 0 < len(got) < len(every)
    alerted = [t["seq"] for t in every if t["account_alerts"]]
    assert [t["seq"] for t in all_pages(cli, "--account-alert", limit=50)] == alerted
    refused = cli.json("traces", "query", "--account-risk-min", "-5", code=1)
    assert refused["field"] == "--account-risk-min"


def test_the_policy_is_set_from_the_settings_and_stated_in_every_record(db: Db, tmp_path: Path) -> None:
    with in_process(db, tmp_path, account_risk_threshold_milli=12_000, account_risk_half_life_hours=48) as (
            client, rt, s):
        r = client.post("/v1/decisions", content=txs(1, seed=73)[0],
                        headers={**JSON, "x-test-role": "scorer"})
        assert r.status_code == 200, r.text
        policy = r.json()["account_risk"]["policy"]
        assert (policy["threshold_milli"], policy["half_life_hours"]) == (12_000, 48)
        assert record_at(Served(client, rt, s), r.json()["ledger"]["seq"])["account_risk"]["policy"] == policy
