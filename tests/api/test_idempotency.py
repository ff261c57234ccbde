"""Re-submitting a payment already decided, over HTTP and through ``sealtrail score``: the answer
is the existing decision (``Idempotent-Replayed: true``), the ledger does not grow; the same key
on other content is decided again with a finding in its record. Both dialects."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.query.verify import verify_index
from tests.api.test_cli_score import Cli, sim_array
from tests.api.test_fail_closed import JSON, Served, txs
from tests.conftest import Db


def record_at(served: Served, seq: int) -> dict[str, Any]:
    with served.runtime.engine.connect() as conn:
        (rec,) = conn.exec_driver_sql(f"SELECT record FROM ledger_entries WHERE seq = {int(seq)}").one()
    env: dict[str, Any] = orjson.loads(bytes(rec))
    return env["record"]  # type: ignore[no-any-return]


def test_the_same_payment_twice_answers_the_first_decision(served: Served) -> None:
    (tx,) = txs(1, seed=61)
    first = served.post(tx)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers and "replayed" not in first.json()
    size = served.size()
    again = served.post(tx)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true" and again.json()["replayed"] is True
    a, b = first.json(), again.json()
    assert (b["trace_id"], b["ledger"], b["decision"]) == (a["trace_id"], a["ledger"], a["decision"])
    assert served.size() == size  # the ledger grew by one decision, not two
    verify_index(served.runtime.engine)


def test_the_same_key_with_other_bytes_is_decided_with_a_finding(served: Served) -> None:
    (tx,) = txs(1, seed=62)
    doc = orjson.loads(tx)
    doc["amount"] = str(Decimal(doc["amount"]) + 10)
    first = served.post(tx).json()
    second = served.post(orjson.dumps(doc))
    assert second.status_code == 200 and "idempotent-replayed" not in second.headers
    seq = second.json()["ledger"]["seq"]
    assert seq != first["ledger"]["seq"]
    assert record_at(served, seq)["idempotency"]["finding"] == (
        f"idempotency key reused with different content: first decided at seq {first['ledger']['seq']}")
    verify_index(served.runtime.engine)


def test_a_caller_key_decides_its_payment_once(served: Served) -> None:
    one, two = txs(2, seed=63)
    a = served.post(one, **{"idempotency-key": "order-7781"})
    b = served.post(one, **{"idempotency-key": "order-7781"})
    assert b.headers["idempotent-replayed"] == "true" and b.json()["trace_id"] == a.json()["trace_id"]
    other = served.post(one, **{"idempotency-key": "order-7782"})  # another key: another decision
    assert "idempotent-replayed" not in other.headers and other.json()["trace_id"] != a.json()["trace_id"]
    size = served.size()
    for bad in ("", "has space", "x" * 256):
        r = served.post(two, **{"idempotency-key": bad})
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "Idempotency-Key", r.text
        assert "trace_id" in r.json()  # the refusal is sealed, unread
    assert served.size() == size + 6  # each refusal and its summary: a refused key decides nothing


def test_two_concurrent_posts_of_one_payment_seal_one_decision(served: Served) -> None:
    (tx,) = txs(1, seed=64)
    size = served.size()
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: served.post(tx), range(2)))
    assert [r.status_code for r in got] == [200, 200]
    assert got[0].json()["trace_id"] == got[1].json()["trace_id"]
    assert served.size() == size + 3  # one decision, its batch's summary and state delta, nothing of a second


def test_the_batch_endpoint_answers_decided_payments_from_the_ledger(served: Served) -> None:
    one, two = txs(2, seed=65)
    first = served.post(one).json()
    r = served.client.post("/v1/decisions/batch", content=b"[" + one + b"," + two + b"," + one + b"]",
                           headers={**JSON, "x-test-role": "scorer"})
    assert r.status_code == 200, r.text
    items = r.json()["decisions"]
    assert items[0]["trace_id"] == items[2]["trace_id"] == first["trace_id"]
    assert items[0]["replayed"] and items[2]["replayed"] and "replayed" not in items[1]


@pytest.fixture
def cli(db: Db, tmp_path: Path) -> Cli:
    c = Cli(db, tmp_path / "keys")
    c("init")
    return c


def test_scoring_a_file_twice_decides_nothing_new(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "payments.json"
    f.write_bytes(orjson.dumps(sim_array(5, seed=66)))
    first = cli.json("score", str(f))
    size = cli.size()
    again = cli.json("score", str(f))
    assert cli.size() == size  # nothing decided twice
    assert again["already_decided"] == 5 and first["already_decided"] == 0
    assert [r["seq"] for r in again["decisions"]] == [r["seq"] for r in first["decisions"]]
    assert all(r["already_decided"] for r in again["decisions"])
    # each row states its account risk, the same when answered again from the ledger
    assert [r["account_risk"] for r in again["decisions"]] == [r["account_risk"] for r in first["decisions"]]
    assert all(r["account_risk"]["policy"]["id"] == "sealtrail.account-risk/1" for r in first["decisions"])
    text = cli("score", str(f)).stdout
    assert "(already decided)" in text and "5 of them already decided before" in text
