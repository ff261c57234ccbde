"""What the decision endpoints answer for a refused body: ``audit.decide.submissions`` refuses
with a domain error, ``api.problems.audit_problem`` maps it to the very problem+json the router
answered before the parsing moved to audit (status, type, detail and errors[] below are known
answers taken from the router's own code before the move). Batch JSON: one payload and one
Transaction per element, exactly what parse_json gives that element's bytes."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from api.problems import audit_problem
from api.routes import decisions
from audit.decide import submissions
from audit.decide.submissions import parse_submissions
from audit.errors import SubmissionRefusedError
from inference.messages.json_message import parse_json
from inference.simulate import SimConfig, simulate

PRINCIPAL = {"subject": "CN=test", "sans": [], "issuer": "CN=ca", "fingerprint_sha256": "00", "serial": "1"}


def _txs(n: int) -> list[bytes]:
    sims = simulate(SimConfig(seed=21, n_normal=max(n, 100), n_accounts=100, days=3))[:n]
    return [s.transaction.canonical_bytes() for s in sims]


def refusal(raw: bytes, fmt: str = "json", batch: bool = True) -> tuple[int, str, str, list[dict[str, str]]]:
    """(status, kind, detail, errors) of the problem the endpoint answers ``raw`` with."""
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(raw, fmt, PRINCIPAL, batch=batch)
    status, kind, errors = audit_problem(info.value)
    return status, kind, str(info.value), errors


def test_each_element_is_its_own_payload_and_transaction() -> None:
    txs = _txs(40)
    nested = b"[" + txs[0] + b"," + txs[1] + b"]"  # an element holding two: one payload for both
    body = b"[ " + b" ,\n".join([*txs[2:], nested]) + b" ]"
    subs = parse_submissions(body, "json", PRINCIPAL, batch=True)
    elements = orjson.loads(body)
    expected = [(orjson.dumps(el), t) for el in elements for t in parse_json(orjson.dumps(el))]
    assert [(s.raw, s.transaction) for s in subs] == expected
    assert len(subs) == 40 and subs[-1].raw == subs[-2].raw == orjson.dumps(orjson.loads(nested))
    assert all(s.message_format == "json" and s.principal == PRINCIPAL for s in subs)
    wrapped = parse_submissions(b'{"transactions": ' + body + b"}", "json", PRINCIPAL, batch=True)
    assert [(s.raw, s.transaction) for s in wrapped] == expected


def test_a_duplicate_key_inside_an_element_is_refused_not_last_wins() -> None:
    txs = _txs(3)
    dup = txs[1][:-1] + b',"reference":"OTHER"}'
    status, kind, _, errors = refusal(b"[" + b",".join([txs[0], dup, txs[2]]) + b"]")
    assert status == 422 and kind == "message_refused"
    assert errors[0]["field"] == "$..reference"
    assert "duplicate key 'reference'" in errors[0]["message"]


@pytest.mark.parametrize(("element", "field", "message"), [
    (b"7", "[1].$", "not int"),
    (b"[]", "[1].$", "empty array"),
    (b'{"reference": 18446744073709551616}', "[1].$", "not JSON"),
])
def test_a_refused_element_is_named_by_its_index(element: bytes, field: str, message: str) -> None:
    txs = _txs(2)
    _, _, _, errors = refusal(b"[" + b",".join([txs[0], element, txs[1]]) + b"]")
    assert errors[0]["field"] == field and message in errors[0]["message"]


@pytest.mark.parametrize("body", [b"[NaN]", b"[1, 2", b"\xff[]", b'"text"'])
def test_a_body_that_is_not_a_json_array_is_refused_whole(body: bytes) -> None:
    status, _, _, errors = refusal(body)
    assert status == 422 and errors[0]["field"] == "body"


def _bad_currency() -> bytes:
    txs = _txs(5)
    bad = orjson.loads(txs[3])
    bad["currency"] = "XXZ"
    return orjson.dumps([*map(orjson.loads, txs[:3]), bad, orjson.loads(txs[4])])


KNOWN: list[tuple[str, Any, str, bool, tuple[int, str, str, list[dict[str, str]]]]] = [
    ("element 7", lambda: b"[" + b",".join([_txs(1)[0], b"7"]) + b"]", "json", True, (
        422, "message_refused", "1 message(s) refused; nothing was decided or recorded: [1].$: expected an "
        "object or an array of objects, not int",
        [{"field": "[1].$", "message": "expected an object or an array of objects, not int"}])),
    ("NaN body", lambda: b"[NaN]", "json", True, (
        422, "message_refused", "body refused: not JSON: NaN is not a JSON number",
        [{"field": "body", "message": "not JSON: NaN is not a JSON number"}])),
    ("not an array", lambda: b'{"a": 1}', "json", True, (
        422, "message_refused", 'a batch is a JSON array (or {"transactions": [...]})',
        [{"field": "body", "message": "expected an array"}])),
    ("10,001", lambda: orjson.dumps([orjson.loads(_txs(1)[0])] * 10_001), "json", True, (
        413, "batch_too_large", "10,001 transactions in one call; at most 10,000",
        [{"field": "body", "message": "more than 10000 transactions"}])),
    ("bad currency", _bad_currency, "json", True, (
        422, "message_refused", "1 message(s) refused; nothing was decided or recorded: [3].$.currency: "
        "currency 'XXZ' is not an ISO 4217 code",
        [{"field": "[3].$.currency", "message": "currency 'XXZ' is not an ISO 4217 code"}])),
    ("two in one", lambda: b"[" + b",".join(_txs(2)) + b"]", "json", False, (
        422, "one_message_expected", "the body holds 2 transactions; POST several to /v1/decisions/batch",
        [{"field": "body", "message": "2 transactions"}])),
    ("MT without block 2", lambda: b"{1:F01BANKDEFFAXXX0000000000}{4:\r\n:20:X\r\n-}", "mt", False, (
        422, "message_refused", "1 message(s) refused; nothing was decided or recorded: block 2: is missing",
        [{"field": "block 2", "message": "is missing"}])),
    ("empty array, one expected", lambda: b"[]", "json", False, (
        422, "message_refused", "1 message(s) refused; nothing was decided or recorded: $: an empty array "
        "holds no transaction", [{"field": "$", "message": "an empty array holds no transaction"}])),
]


@pytest.mark.parametrize(("raw", "fmt", "batch", "answer"), [k[1:] for k in KNOWN], ids=[k[0] for k in KNOWN])
def test_the_problem_is_the_one_the_router_answered_before_the_move(raw: Any, fmt: str, batch: bool,
                                                                    answer: tuple[Any, ...]) -> None:
    assert refusal(raw(), fmt, batch) == answer


def test_the_router_caps_batches_with_the_audit_constant() -> None:
    assert decisions.MAX_BATCH == submissions.MAX_BATCH == 10_000
