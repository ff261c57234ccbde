"""The cases of a case's counterparties: the accounts on the other side of its payments.

A case is about one subject (an account, by default). Money laundering is a network: the accounts
that paid the subject or were paid by it often have cases of their own, and an officer links them
(the ``link`` action) so each case shows the other. :func:`counterparty_cases` finds them: for
every decision of the case, the keyed accounts its record names (``account_risk``: originator and
beneficiary, keyed with the ledger's secret, never the account number itself), less the case's
own subject; then the cases whose subject is one of those accounts, each subject's newest case,
open ones first. Only sealed records and the view are read, so the answer is the same for every
reader; showing it is a read of those cases (the API and the console seal it as ``queue`` reads,
as a page of the queue is).

Cost: one read of the case's decision records (1,000 for the largest case the console is timed
on) and one indexed read of ``audit_cases`` by subject per 500 counterparties.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import orjson
from sqlalchemy import Engine, select

from audit.cases.state import CaseState, is_seq
from audit.cases.store import case_from_row
from audit.cases.tables import alerts, cases
from audit.errors import CaseError, CaseNotFoundError
from ledger import store

__all__ = ["MAX_COUNTERPARTY_CASES", "counterparty_cases"]

MAX_COUNTERPARTY_CASES = 50
_CHUNK = 500
_ACCOUNT = re.compile(r"[0-9a-f]{16,64}")  # a keyed account, as audit.cases.fold reads it


def _sides(record: bytes) -> Iterable[str]:
    body = orjson.loads(record).get("record", {})
    risk = body.get("account_risk") if isinstance(body, dict) else None
    if not isinstance(risk, dict):
        return ()
    out = []
    for side in ("originator", "beneficiary"):
        s = risk.get(side)
        account = s.get("account") if isinstance(s, dict) else None
        if isinstance(account, str) and _ACCOUNT.fullmatch(account):
            out.append(account)
    return out


def counterparty_cases(engine: Engine, case_id: int, *,
                       limit: int = MAX_COUNTERPARTY_CASES) -> list[CaseState]:
    """The newest case of each account on the other side of ``case_id``'s payments, open cases
    first, then newest first, at most ``limit``. ``CaseNotFoundError`` if there is no such case.
    The view is read as it stands (the caller brings it current, as ``case_detail`` does)."""
    if not is_seq(case_id):
        raise CaseError("case_id", "must be a case id")
    if type(limit) is not int or not 1 <= limit <= MAX_COUNTERPARTY_CASES:
        raise CaseError("limit", f"must be 1 to {MAX_COUNTERPARTY_CASES}")
    e = store.entries
    with engine.connect() as conn:
        subject = conn.execute(select(cases.c.subject).where(cases.c.case_id == case_id)).scalar()
        if subject is None:
            raise CaseNotFoundError("case_id", f"no case {case_id}")
        got = conn.execute(select(alerts.c.seq).where(alerts.c.case_id == case_id)).scalars()
        seqs = [int(s) for s in got]
        accounts: dict[str, None] = {}
        for i in range(0, len(seqs), _CHUNK):
            for (record,) in conn.execute(select(e.c.record).where(e.c.seq.in_(seqs[i:i + _CHUNK]))):
                for a in _sides(record):
                    accounts.setdefault(f"account:{a}", None)
        accounts.pop(str(subject), None)
        newest: dict[str, CaseState] = {}
        subjects = list(accounts)
        for i in range(0, len(subjects), _CHUNK):
            for row in conn.execute(select(cases).where(cases.c.subject.in_(subjects[i:i + _CHUNK]),
                                                        cases.c.case_id != case_id)):
                c = case_from_row(row)
                have = newest.get(c.subject)
                if have is None or (c.open, c.case_id) > (have.open, have.case_id):
                    newest[c.subject] = c
    return sorted(newest.values(), key=lambda c: (not c.open, -c.case_id))[:limit]
