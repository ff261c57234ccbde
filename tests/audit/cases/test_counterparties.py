"""The cases of a case's counterparties: found from the sealed decisions, each account's newest
case, open ones first; the case's own subject and unrelated cases never among them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from sqlalchemy import select

from audit.cases.counterparties import MAX_COUNTERPARTY_CASES, counterparty_cases
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases
from audit.errors import CaseError, CaseNotFoundError
from ledger import store
from ledger.append import Ledger
from tests.audit.cases.test_cases import ALICE, decided, rows  # noqa: F401 - fixture


def by_hand(ledger: Ledger, case_id: int) -> dict[str, list[int]]:
    """Every counterparty account of the case's payments -> the ids of all its cases."""
    (case,) = rows(ledger.engine, cases, cases.c.case_id == case_id)
    seqs = [a.seq for a in rows(ledger.engine, alerts, alerts.c.case_id == case_id)]
    e = store.entries
    with ledger.engine.connect() as conn:
        got = conn.execute(select(e.c.record).where(e.c.seq.in_(seqs))).scalars()
        records = [orjson.loads(r)["record"] for r in got]
    sides = {f"account:{r['account_risk'][s]['account']}" for r in records
             for s in ("originator", "beneficiary")}
    sides.discard(case.subject)
    out: dict[str, list[int]] = {}
    for c in rows(ledger.engine, cases):
        if c.subject in sides and c.case_id != case_id:
            out.setdefault(c.subject, []).append(c.case_id)
    return out


def test_each_counterparty_account_brings_its_newest_case_open_ones_first(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    found: dict[int, Any] = {}
    for c in rows(decided.engine, cases):
        want = by_hand(decided, c.case_id)
        got = counterparty_cases(decided.engine, c.case_id)
        assert {x.subject for x in got} == set(want)
        assert all(x.case_id == max(want[x.subject]) for x in got)  # one case each, its newest
        assert [x.open for x in got] == sorted((x.open for x in got), reverse=True)
        if got:
            found[c.case_id] = got
    assert len(found) > 5  # the simulated traffic has accounts paying accounts that have cases


def test_a_counterparty_case_is_linked_from_the_suggestion_and_stays_listed(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    case_id, (other, *_) = next((c.case_id, got) for c in rows(decided.engine, cases)
                                if (got := counterparty_cases(decided.engine, c.case_id)))
    act(decided, ALICE, "link", case=case_id, link=other.case_id, rationale="pays the subject weekly")
    again = counterparty_cases(decided.engine, case_id)
    linked = next(x for x in again if x.case_id == other.case_id)
    assert str(case_id) in linked.links.split(",")


def test_an_unknown_case_or_a_bad_limit_is_refused_naming_it(decided: Ledger) -> None:  # noqa: F811
    catch_up(decided.engine)
    with pytest.raises(CaseNotFoundError):
        counterparty_cases(decided.engine, 999_999_999)
    for bad in (0, MAX_COUNTERPARTY_CASES + 1):
        with pytest.raises(CaseError, match="limit"):
            counterparty_cases(decided.engine, 1, limit=bad)
    with pytest.raises(CaseError, match="case_id"):
        counterparty_cases(decided.engine, -1)
