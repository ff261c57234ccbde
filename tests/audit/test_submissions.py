"""audit.decide.submissions: one body becomes submissions or is refused whole, with a domain error
that names each refused message (index, field, why), whoever asked (API, CLI, Python)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from audit.decide.submissions import MAX_BATCH, parse_submissions
from audit.errors import (
    AuditError,
    OneMessageExpectedError,
    SubmissionFault,
    SubmissionRefusedError,
    TooManySubmissionsError,
)
from inference.simulate import SimConfig, simulate

PRINCIPAL = {"subject": "CN=test", "sans": [], "issuer": "CN=ca", "fingerprint_sha256": "00", "serial": "1"}


def _txs(n: int) -> list[bytes]:
    sims = simulate(SimConfig(seed=22, n_normal=max(n, 100), n_accounts=100, days=3))[:n]
    return [s.transaction.canonical_bytes() for s in sims]


def test_every_refused_message_is_named_by_index_field_and_reason() -> None:
    txs = _txs(3)
    bad = orjson.loads(txs[1])
    bad["currency"] = "XXZ"
    body = orjson.dumps([orjson.loads(txs[0]), bad, 7, orjson.loads(txs[2])])
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(body, "json", PRINCIPAL, batch=True)
    assert isinstance(info.value, AuditError)
    assert info.value.faults == (
        SubmissionFault(1, "$.currency", "currency 'XXZ' is not an ISO 4217 code"),
        SubmissionFault(2, "$", "expected an object or an array of objects, not int"))
    assert [f.where for f in info.value.faults] == ["[1].$.currency", "[2].$"]
    assert str(info.value).startswith("2 message(s) refused; nothing was decided or recorded: [1].$.currency")


def test_a_hundred_are_named_and_all_are_counted() -> None:
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(orjson.dumps([7] * 150), "json", PRINCIPAL, batch=True)
    assert len(info.value.faults) == 100 and str(info.value).startswith("150 message(s) refused")
    assert str(info.value).count("[") == 5  # the summary names the first five


def test_a_single_message_is_named_without_an_index() -> None:
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(b'{"amount": "1"}', "json", PRINCIPAL, batch=False)
    assert info.value.faults[0].index is None and info.value.faults[0].where == "$.reference"
    assert SubmissionFault(None, None, "x").where == "body" and SubmissionFault(4, None, "x").where == "[4]"


@pytest.mark.parametrize("body", [b"[]", b"{\"transactions\": []}"])
def test_a_one_decision_request_needs_exactly_one_transaction(body: bytes) -> None:
    two = b"[" + b",".join(_txs(2)) + b"]"
    with pytest.raises(OneMessageExpectedError) as info:
        parse_submissions(two, "json", PRINCIPAL, batch=False)
    assert info.value.faults == (SubmissionFault(None, None, "2 transactions"),)
    with pytest.raises(SubmissionRefusedError):
        parse_submissions(body, "json", PRINCIPAL, batch=False)


def test_the_cap_is_the_callers_and_none_means_whole_files() -> None:
    one = orjson.loads(_txs(1)[0])
    body = orjson.dumps([one] * 5)
    with pytest.raises(TooManySubmissionsError) as info:
        parse_submissions(body, "json", PRINCIPAL, batch=True, max_items=4)
    assert str(info.value) == "5 transactions in one call; at most 4"
    assert len(parse_submissions(orjson.dumps([one] * (MAX_BATCH + 1)), "json", PRINCIPAL, batch=True,
                                 max_items=None)) == MAX_BATCH + 1


def test_the_event_time_can_be_given() -> None:
    at = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    subs = parse_submissions(b"[" + b",".join(_txs(3)) + b"]", "json", PRINCIPAL, batch=True, received_at=at)
    assert [s.received_at for s in subs] == [at] * 3
    before = datetime.now(UTC)
    (now,) = parse_submissions(_txs(1)[0], "json", PRINCIPAL, batch=False)
    assert before <= now.received_at <= datetime.now(UTC)
