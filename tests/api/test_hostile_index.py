"""A forged trace-index row in the served pipeline's way (in process, both databases).

The least-privilege application role may INSERT into the index tables. One row inserted at a
future seq, holding an existing trace id, used to make ``POST /v1/decisions`` answer 200, 200,
then a plain-text 500 on every later request (the sealing commit refused, blamed on the input).
Now every payment is decided and sealed, and ``ledger verify`` names the forged row.
"""

from __future__ import annotations

from api import ops
from tests.api.test_fail_closed import JSON, Served, txs


def test_a_forged_index_row_at_a_future_seq_stops_no_payment(served: Served) -> None:
    payments = txs(6, seed=31)
    assert served.post(payments[0]).status_code == 200
    size = served.size()
    forged_at = size + 3
    with served.runtime.engine.connect() as conn:
        existing = conn.exec_driver_sql("SELECT trace_id FROM ledger_entries WHERE seq = 0").scalar_one()
        conn.exec_driver_sql(
            f"INSERT INTO audit_traces VALUES ({forged_at}, '{existing}', '2026-01-01T00:00:00.000000Z', "
            "'x', 'ALLOW', NULL, NULL, '', '', '', '', '', '', NULL, NULL)")
        conn.commit()
    answers = [served.post(tx) for tx in payments[1:]]
    assert [r.status_code for r in answers] == [200] * 5, [r.text for r in answers]
    seqs = [r.json()["ledger"]["seq"] for r in answers]
    # each payment its own batch: its decision, then that batch's summary and state delta
    assert seqs == list(range(size, size + 15, 3)) and served.size() == size + 15
    assert forged_at in seqs  # the forged row stood at the seq a later decision was sealed at
    doc = ops.verify_now(served.settings)
    assert doc["verified"] is False and doc["error"] == "derived row mismatch"
    assert doc["seq"] == forged_at and doc["table"] == "audit_traces"
    assert [(f["table"], f["seq"]) for f in doc["findings"]] == [("audit_traces", forged_at)]
    verify = served.client.post("/v1/ledger/verify", headers={**JSON, "x-test-role": "admin"})
    assert verify.status_code == 200 and verify.json()["seq"] == forged_at
    metrics = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    assert "sealtrail_derived_row_conflicts_total 1.0" in metrics  # operators see it before any verify
