"""Held payments screened again when a list changes: a held payment meeting an entry added since is
annotated with the new hit (list, version, entry, score), one already naming the entry is not, a
payment not held is not screened again, and a purged payment is counted."""

from __future__ import annotations

from audit.decide.principal import Principal
from audit.screening.held import rescreen_held
from audit.screening.screener import Screener
from ledger.append import Ledger
from ledger.retention import purge_payloads
from tests.audit.screening.test_clearance import _payload_sha
from tests.audit.screening.test_screening_decisions import LIST, message, pipeline, seal
from wasm_rules import Sandbox

ADMIN = Principal.local("list-admin")
ADDED = LIST + b"B-9,entity,Ivanov Shipping Company,,,RU,,,RU-EXIT\n"


def test_a_held_payment_meeting_an_entry_added_since_is_annotated_with_the_new_hit(
        ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    seal(ledger)
    screener = Screener(ledger.engine, check_every_s=0.0, background=False)
    pipe = pipeline(ledger, sandbox, pack_wasm, screener)
    held, plain, gone = pipe.decide([
        message(1, "KOVALEV ALEKSANDR", text="/RFB/freight for IVANOV SHIPPING COMPANY"),
        message(2, "ACME TRADING GMBH", text="/RFB/freight for IVANOV SHIPPING COMPANY"),
        message(3, "KOVALEV ALEKSANDR", text="/RFB/freight for IVANOV SHIPPING COMPANY")])
    assert (held.decision, plain.decision, gone.decision) == ("HOLD", "ALLOW", "HOLD")
    purge_payloads(ledger, [_payload_sha(ledger, gone)], "erasure order 3")
    first = rescreen_held(ledger, ADMIN)  # nothing new on the lists: nothing to say
    assert (first.held, first.screened, first.purged, first.annotated) == (2, 1, 1, [])
    seal(ledger, ADDED)
    report = rescreen_held(ledger, ADMIN)
    assert (report.held, report.screened, report.purged) == (2, 1, 1)
    (done,) = report.annotated
    assert done["seq"] == held.seq
    (hit,) = done["hits"]
    assert (hit["entry_id"], hit["where"], hit["basis"]) == ("B-9", "remittance", "text")
    assert "text" not in hit  # the payment's own words are not repeated
    again = rescreen_held(ledger, ADMIN)  # said once: not annotated twice
    assert (again.screened, again.annotated) == (1, [])
