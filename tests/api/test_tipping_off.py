"""Tipping-off (FATF R.21): case state — dispositions, case events, who read a case — is for
officers and regulators; a scorer or an admin reading the trail sees none of it."""

from __future__ import annotations

import pytest

from audit.annotations import annotate
from audit.cases.reads import record_reads
from audit.cases.service import act
from audit.cases.store import catch_up
from audit.decide.principal import Principal
from tests.api.test_fail_closed import Served, txs

OFFICER = Principal(subject="CN=Officer,O=Example Bank", sans=(), issuer="CN=CA",
                    fingerprint_sha256="a1" * 32, serial="1", not_before="2026-01-01T00:00:00Z",
                    not_after="2027-01-01T00:00:00Z")


@pytest.mark.requirement("BSA-1020.320-confidential", "FATF-R21-tipping-off", "EU-AMLR-73-disclosure")
def test_case_state_in_the_trail_is_withheld_from_admins(served: Served) -> None:
    decided = [served.post(t).json() for t in txs(6)]
    target = decided[0]["trace_id"]
    annotate(served.runtime.ledger, target, OFFICER, "STR_FILED", "report sent to the FIU")

    officer = served.client.get(f"/v1/traces/{target}", headers={"x-test-role": "officer"}).json()
    admin = served.client.get(f"/v1/traces/{target}", headers={"x-test-role": "admin"}).json()
    assert [a["record"]["disposition"] for a in officer["annotations"]] == ["STR_FILED"]
    assert officer["annotations_withheld"] is False
    assert admin["annotations"] == [] and admin["annotations_withheld"] is True
    assert admin["record"] == officer["record"]  # the decision itself stays readable
    annotation_id = officer["annotations"][0]["trace_id"]
    for role in ("admin", "scorer"):
        r = served.client.get(f"/v1/traces/{annotation_id}", headers={"x-test-role": role})
        assert r.status_code in (403,), (role, r.status_code)
    assert served.client.get(f"/v1/traces/{annotation_id}",
                             headers={"x-test-role": "officer"}).status_code == 200


@pytest.mark.parametrize("role", ["admin", "scorer"])
@pytest.mark.requirement("BSA-1020.320-confidential", "FATF-R21-tipping-off", "EU-AMLR-73-disclosure")
def test_case_event_and_case_read_records_are_forbidden_to_admins_and_scorers(served: Served,
                                                                             role: str) -> None:
    decided = [served.post(t).json() for t in txs(40)]
    alerting = [d for d in decided if d["decision"] != "ALLOW"]
    assert alerting  # this traffic holds alerts
    catch_up(served.runtime.engine)
    r = act(served.runtime.ledger, OFFICER, "comment", alert=alerting[0]["trace_id"], rationale="pattern")
    seq = record_reads(served.runtime.ledger, OFFICER, [{"case": r.case_id, "what": "case"}])
    with served.runtime.engine.connect() as conn:
        read_id = conn.exec_driver_sql(f"SELECT trace_id FROM ledger_entries WHERE seq = {seq}").scalar_one()
    for tid, kind in ((r.trace_id, "case_event"), (read_id, "case_read")):
        got = served.client.get(f"/v1/traces/{tid}", headers={"x-test-role": role})
        assert got.status_code == 403, (kind, got.text)
        assert role == "scorer" or "case state" in got.json()["detail"]  # a scorer reads no trace at all
        ok = served.client.get(f"/v1/traces/{tid}", headers={"x-test-role": "regulator"})
        assert ok.status_code == 200 and ok.json()["kind"] == kind
