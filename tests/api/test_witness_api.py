"""``GET /v1/ledger/checkpoint/cosigned``: the newest checkpoint with the witnesses' cosignatures the
log collected, on both databases; the log's own signature still verifies with them attached."""

from __future__ import annotations

from pathlib import Path

from ledger.checkpoint import SignedCheckpoint
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner, cosignatures
from ledger.note import NoteVerifier
from ledger.witness import LogPolicy, Witness
from tests.api.test_fail_closed import Served

HEADERS = {"x-test-role": "regulator"}


def test_cosigned_checkpoint_is_served_with_its_cosignatures(served: Served, tmp_path: Path) -> None:
    ledger = served.runtime.ledger
    log_key = NoteVerifier.from_vkey(ledger.active_vkey)
    assert served.client.get("/v1/ledger/checkpoint/cosigned", headers=HEADERS).status_code == 404
    policy = [LogPolicy(ledger.origin, (log_key,))]
    witnesses = [Witness(Cosigner.generate(f"w{i}.bank.example/witness"), policy, tmp_path / f"w{i}.db")
                 for i in (1, 2)]

    served.post(b'{"not": "a payment"}')  # a sealed refusal grows the log
    size = ledger.checkpoint().checkpoint.size
    out = collect(ledger.engine, [WitnessEndpoint("https://w1", witnesses[0].cosigner.verifier)],
                  witnesses[0].post)
    assert [o.ok for o in out] == [True]
    r = served.client.get("/v1/ledger/checkpoint/cosigned", headers=HEADERS)
    assert r.status_code == 200
    SignedCheckpoint.verify(r.text, [log_key], ledger.origin)  # the log's signature still holds
    (cs,) = cosignatures(r.text, [witnesses[0].cosigner.verifier])
    assert r.text.split("\n")[1] == str(size) and cs.witness == witnesses[0].cosigner.verifier
    # two of two: not yet
    r2 = served.client.get("/v1/ledger/checkpoint/cosigned?min_witnesses=2", headers=HEADERS)
    assert r2.status_code == 404 and "2 witness cosignature" in r2.json()["detail"]
    second = WitnessEndpoint("https://w2", witnesses[1].cosigner.verifier)
    collect(ledger.engine, [second], witnesses[1].post)
    r2 = served.client.get("/v1/ledger/checkpoint/cosigned?min_witnesses=2", headers=HEADERS)
    assert r2.status_code == 200
    assert len(cosignatures(r2.text, [w.cosigner.verifier for w in witnesses])) == 2
    assert served.client.get("/v1/ledger/checkpoint/cosigned?min_witnesses=0",
                             headers=HEADERS).status_code == 422
