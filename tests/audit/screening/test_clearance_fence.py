"""The commit's clearance fence refuses a batch only for a clearance record that may change a
clearance the batch used (``audit.decide.log_tip.fence`` with ``used``): an officer proposing,
approving or revoking other customers' clearances refuses no batch, while a step on a used
clearance, or a record the fence cannot read as a step, still does."""

from __future__ import annotations

from typing import Any

import pytest

from audit.decide.log_tip import fence, newest_delta
from audit.errors import StateSuperseded
from audit.screening.clearance_state import CLEARANCE_KIND
from ledger import store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record

USED = 7  # the proposal seq of the clearance the batch cleared a hit by


def seal(ledger: Ledger, body: Any) -> int:
    (r,) = ledger.append_many([Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(body))])
    return r.seq


def check(ledger: Ledger, cleared_at: int, used: frozenset[int] | None) -> None:
    """The fence as a batch about to be sealed at the end of the log sees it."""
    with ledger.engine.begin() as conn:
        first = store.tail(conn)[0]
        fence(conn, first, newest_delta(conn, first), None, cleared_at, used)


def step(action: str, clearance: object) -> dict[str, Any]:
    return {"schema": "sealtrail.screening-clearance/1", "action": action, "clearance": clearance,
            "principal": {"subject": "CN=officer"}, "rationale": "test"}


@pytest.mark.parametrize("body", [step("revoked", USED + 1), step("approved", USED + 2),
                                  {"schema": "sealtrail.screening-clearance/1", "action": "proposed",
                                   "list": "l", "entry_id": "B-1"}],
                         ids=["revoke-other", "approve-other", "propose"])
def test_a_record_about_another_clearance_refuses_nothing(ledger: Ledger, body: dict[str, Any]) -> None:
    at = seal(ledger, step("approved", USED))
    seal(ledger, body)
    check(ledger, at, frozenset({USED}))


@pytest.mark.parametrize("body", [step("revoked", USED), step("approved", USED), step("revoked", str(USED)),
                                  step("revoked", None), {"schema": "another/1"}],
                         ids=["revoke-used", "step-used", "seq-as-text", "no-target", "unknown-shape"])
def test_a_step_on_a_used_clearance_or_one_unread_refuses_the_batch(ledger: Ledger, body: Any) -> None:
    at = seal(ledger, step("approved", USED))
    seal(ledger, step("revoked", USED + 1))  # not the refusing one: the seq named is the next
    bad = seal(ledger, body)
    with pytest.raises(StateSuperseded, match=f"clearance record was sealed at seq {bad}, after this batch "
                                              f"cleared a hit by the clearances as of seq {at}"):
        check(ledger, at, frozenset({USED}))


def test_records_at_or_before_the_reading_refuse_nothing(ledger: Ledger) -> None:
    seal(ledger, step("revoked", USED))
    at = seal(ledger, step("approved", USED + 1))
    check(ledger, at, frozenset({USED}))
    check(ledger, at, None)


def test_without_the_used_set_any_later_record_refuses_as_before(ledger: Ledger) -> None:
    at = seal(ledger, step("approved", USED))
    later = seal(ledger, step("revoked", USED + 1))
    with pytest.raises(StateSuperseded, match=f"sealed at seq {later}"):
        check(ledger, at, None)
