"""Account risk in the search: a minimum-risk filter and account alerts only, the index columns
checked against the records by verify, catch-up of an index written without them, and the
filter values refused."""

from __future__ import annotations

import pytest

from audit.decide.account_risk import AccountRiskPolicy
from audit.errors import DerivedRowError, QueryError
from audit.query.index import TraceIndex, catch_up
from audit.query.traces import TraceFilter, query_traces
from audit.query.verify import verify_index
from tests.audit.test_account_risk_pipeline import allow_pipeline, from_one_account
from tests.audit.test_hostile_index import drop_index_guards, sql
from tests.conftest import Db, make_ledger


def _decided(db: Db, signer, sandbox):  # type: ignore[no-untyped-def]
    ledger = make_ledger(db, signer)
    pipe = allow_pipeline(ledger, sandbox, 0.45, AccountRiskPolicy())
    pipe.index = TraceIndex()
    got = [d for s in from_one_account(14) for d in pipe.decide([s])]
    return ledger, got


def test_search_finds_the_alerting_decision_and_the_risky_ones(db: Db, signer, sandbox) -> None:  # type: ignore[no-untyped-def]
    ledger, got = _decided(db, signer, sandbox)
    alerts = query_traces(ledger.engine, TraceFilter(account_alert=True))
    assert [t.seq for t in alerts.items] == [got[11].seq]
    assert alerts.items[0].account_alerts == ("originator",) and alerts.items[0].decision == "ALLOW"
    assert alerts.items[0].account_risk_milli == 54_000
    risky = query_traces(ledger.engine, TraceFilter(account_risk_min_milli=54_000))
    assert [t.seq for t in risky.items] == [d.seq for d in reversed(got[11:])]  # newest first
    both = query_traces(ledger.engine, TraceFilter(account_risk_min_milli=60_000, account_alert=True))
    assert both.items == []
    page = query_traces(ledger.engine, TraceFilter(account_risk_min_milli=9000, limit=5))
    assert page.next_cursor is not None
    more = TraceFilter(account_risk_min_milli=9000, limit=5, cursor=page.next_cursor)
    nxt = query_traces(ledger.engine, more)
    assert [t.seq for t in page.items + nxt.items] == [d.seq for d in reversed(got[1:])][:10]
    verify_index(ledger.engine)


@pytest.mark.parametrize(("kw", "field"), [
    ({"account_risk_min_milli": -1}, "account_risk_min_milli"),
    ({"account_risk_min_milli": 1.5}, "account_risk_min_milli"),
    ({"account_risk_min_milli": True}, "account_risk_min_milli"),
    ({"account_alert": "yes"}, "account_alert"),
])
def test_bad_account_risk_filters_are_refused(kw: dict[str, object], field: str) -> None:
    with pytest.raises(QueryError) as caught:
        TraceFilter(**kw)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_cursor_is_bound_to_the_account_risk_filter(sqlite_db: Db, signer, sandbox) -> None:  # type: ignore[no-untyped-def]
    ledger, _ = _decided(sqlite_db, signer, sandbox)
    page = query_traces(ledger.engine, TraceFilter(account_risk_min_milli=9000, limit=3))
    with pytest.raises(QueryError, match="different filter"):
        TraceFilter(account_risk_min_milli=4500, limit=3, cursor=page.next_cursor)


def test_verify_names_a_rewritten_account_risk_column(sqlite_db: Db, signer, sandbox) -> None:  # type: ignore[no-untyped-def]
    ledger, got = _decided(sqlite_db, signer, sandbox)
    drop_index_guards(ledger.engine)
    sql(ledger.engine, "UPDATE audit_traces SET account_alert = 0 WHERE seq = ?", got[11].seq)
    with pytest.raises(DerivedRowError) as caught:
        verify_index(ledger.engine)
    assert caught.value.seq == got[11].seq
    assert "account_alert is 0 in the index, 1 in the record" in str(caught.value)


def test_catch_up_fills_the_account_risk_columns_from_the_records(sqlite_db: Db, signer, sandbox) -> None:  # type: ignore[no-untyped-def]
    ledger = make_ledger(sqlite_db, signer)
    pipe = allow_pipeline(ledger, sandbox, 0.45, AccountRiskPolicy())  # no index: caught up below
    got = [d for s in from_one_account(13) for d in pipe.decide([s])]
    catch_up(ledger.engine)
    alerts = query_traces(ledger.engine, TraceFilter(account_alert=True))
    assert [t.seq for t in alerts.items] == [got[11].seq]
    verify_index(ledger.engine)
