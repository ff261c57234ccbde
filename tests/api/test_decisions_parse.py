"""parse_submissions for the batch endpoint: one payload and one Transaction per element, exactly
what parse_json gives that element's bytes; duplicate keys refused anywhere in the body."""

from __future__ import annotations

import orjson
import pytest

from api.problems import Problem
from api.routes.decisions import parse_submissions
from inference.messages.json_message import parse_json
from inference.simulate import SimConfig, simulate

PRINCIPAL = {"subject": "CN=test", "sans": [], "issuer": "CN=ca", "fingerprint_sha256": "00", "serial": "1"}


def _txs(n: int) -> list[bytes]:
    sims = simulate(SimConfig(seed=21, n_normal=max(n, 100), n_accounts=100, days=3))[:n]
    return [s.transaction.canonical_bytes() for s in sims]


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
    with pytest.raises(Problem) as info:
        parse_submissions(b"[" + b",".join([txs[0], dup, txs[2]]) + b"]", "json", PRINCIPAL, batch=True)
    assert info.value.status == 422 and info.value.kind == "message_refused"
    assert info.value.errors[0]["field"] == "$..reference"
    assert "duplicate key 'reference'" in info.value.errors[0]["message"]


@pytest.mark.parametrize(("element", "field", "message"), [
    (b"7", "[1].$", "not int"),
    (b"[]", "[1].$", "empty array"),
    (b'{"reference": 18446744073709551616}', "[1].$", "not JSON"),
])
def test_a_refused_element_is_named_by_its_index(element: bytes, field: str, message: str) -> None:
    txs = _txs(2)
    with pytest.raises(Problem) as info:
        parse_submissions(b"[" + b",".join([txs[0], element, txs[1]]) + b"]", "json", PRINCIPAL, batch=True)
    assert info.value.errors[0]["field"] == field and message in info.value.errors[0]["message"]


@pytest.mark.parametrize("body", [b"[NaN]", b"[1, 2", b"\xff[]", b'"text"'])
def test_a_body_that_is_not_a_json_array_is_refused_whole(body: bytes) -> None:
    with pytest.raises(Problem) as info:
        parse_submissions(body, "json", PRINCIPAL, batch=True)
    assert info.value.status == 422 and info.value.errors[0]["field"] == "body"
