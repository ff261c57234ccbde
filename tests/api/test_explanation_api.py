"""Explanations over HTTP: each decision answer (one and batch) states the reason codes its record
seals, decisions held or scored high have them in words, and a payment decided again under its
idempotency key answers with the same explanation it was sealed with."""

from __future__ import annotations

from audit.decide.explanation import is_explained
from tests.api.test_account_risk_api import record_at
from tests.api.test_fail_closed import JSON, Served, txs


def test_every_answer_states_the_explanation_its_record_seals(served: Served) -> None:
    batch = served.client.post("/v1/decisions/batch", content=b"[" + b",".join(txs(120, seed=74)) + b"]",
                               headers={**JSON, "x-test-role": "scorer"})
    assert batch.status_code == 200, batch.text
    answers = batch.json()["decisions"]
    for a in answers:
        record = record_at(served, a["ledger"]["seq"])
        assert record["schema"] == "sealtrail.decision/6"
        assert a["explanation"] == record["explanation"]
        assert (a["explanation"] is not None) == is_explained(a["score"], a["decision"])
        assert "explain" in a["latency_us"]
    said = [a for a in answers if a["explanation"] and a["explanation"]["reasons"]]
    assert said, "the simulated laundering is held or scored high, with reasons"
    for a in said:
        reasons = a["explanation"]["reasons"]
        assert a["explanation"]["method"] == "sealtrail.integrated-gradients/1" and len(reasons) <= 3
        milli = [r["contribution_milli"] for r in reasons]
        assert milli == sorted(milli, reverse=True)
        assert all(r["contribution_milli"] >= 20 and r["code"].isupper() and r["text"] for r in reasons)


def test_a_payment_decided_again_answers_with_its_sealed_explanation(served: Served) -> None:
    answers = [served.post(tx, **{"idempotency-key": f"order-{i}"}) for i, tx in enumerate(txs(60, seed=75))]
    firsts = [a.json() for a in answers]
    held = next(i for i, a in enumerate(firsts) if a["explanation"] is not None)
    again = served.post(txs(60, seed=75)[held], **{"idempotency-key": f"order-{held}"})
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["explanation"] == firsts[held]["explanation"]
