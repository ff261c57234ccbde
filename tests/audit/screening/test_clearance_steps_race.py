"""Two officers stepping on one clearance at once (two API processes, two hosts): each step is
checked again under the sequencer lock as it is sealed, so a step another officer's made moot
between the read and the seal is refused with the reason, nothing written, instead of being
sealed, answered as taken and then ignored when the clearances are folded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from audit.errors import ClearanceError
from audit.screening.clearance import approve_clearance, clearances, propose_clearance, revoke_clearance
from audit.screening.clearance_state import CLEARANCE_KIND
from ledger import NoteSigner, store
from ledger.append import Ledger
from tests.audit.screening.test_clearance import ALICE, BOB, TODAY, held
from tests.audit.test_deciders_contention_hostile import _other
from tests.conftest import Db
from wasm_rules import Sandbox

CAROL = replace(BOB, subject="CN=Carol Officer,O=Example Bank", fingerprint_sha256="d" * 64, serial="0c")


@pytest.fixture
def second(db: Db, signer: NoteSigner, ledger: Ledger) -> Iterator[Ledger]:
    """The other officer's process: its own handle on the same log."""
    lg = _other(db, signer)
    yield lg
    lg.engine.dispose()


def steps(ledger: Ledger) -> list[tuple[str, str]]:
    """(action, officer) of every clearance record sealed, in the log's order."""
    with ledger.engine.connect() as conn:
        rows = conn.execute(select(store.entries.c.record).where(store.entries.c.kind == CLEARANCE_KIND)
                            .order_by(store.entries.c.seq)).scalars().all()
    return [(b["action"], b["principal"]["subject"]) for b in (orjson.loads(r)["record"] for r in rows)]


def racing(monkeypatch: pytest.MonkeyPatch, ledger: Ledger, meanwhile: Callable[[], object]) -> None:
    """``meanwhile`` (the other officer's step) is sealed after this handle's step has read the
    clearances and before it is sealed."""
    real = ledger.append_many

    def late(*args: Any, **kw: Any) -> Any:
        monkeypatch.setattr(ledger, "append_many", real)
        meanwhile()
        return real(*args, **kw)
    monkeypatch.setattr(ledger, "append_many", late)


@pytest.fixture
def proposed(ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> int:
    _, d = held(ledger, sandbox, pack_wasm)
    c = propose_clearance(ledger, d.trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31", ALICE,
                          "date of birth 1984: another person", today=TODAY)
    return c.seq


def test_two_officers_approving_at_once_seal_one_approval(
        ledger: Ledger, second: Ledger, proposed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    racing(monkeypatch, ledger, lambda: approve_clearance(second, proposed, CAROL, "passport checked"))
    with ledger.engine.connect() as conn:
        size = store.tail(conn)[0]
    with pytest.raises(ClearanceError, match=f"clearance {proposed} was approved at seq {size}"):
        approve_clearance(ledger, proposed, BOB, "also checked")
    assert steps(ledger) == [("proposed", "CN=local:alice-officer"), ("approved", CAROL.subject)]
    (c,) = clearances(ledger.engine)
    assert (c.status, c.approver and c.approver["subject"]) == ("approved", CAROL.subject)


def test_an_approval_overtaken_by_a_revocation_is_refused(
        ledger: Ledger, second: Ledger, proposed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    racing(monkeypatch, ledger, lambda: revoke_clearance(second, proposed, ALICE, "new information"))
    with pytest.raises(ClearanceError, match=f"clearance {proposed} was revoked at seq"):
        approve_clearance(ledger, proposed, BOB, "checked")
    assert steps(ledger) == [("proposed", "CN=local:alice-officer"), ("revoked", "CN=local:alice-officer")]
    assert [c.status for c in clearances(ledger.engine)] == ["revoked"]


def test_two_revocations_at_once_seal_one(
        ledger: Ledger, second: Ledger, proposed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    approve_clearance(ledger, proposed, BOB, "checked")
    racing(monkeypatch, ledger, lambda: revoke_clearance(second, proposed, CAROL, "FIU request"))
    with pytest.raises(ClearanceError, match=f"clearance {proposed} was revoked at seq"):
        revoke_clearance(ledger, proposed, ALICE, "new information")
    assert steps(ledger)[-1] == ("revoked", CAROL.subject) and len(steps(ledger)) == 3
    (c,) = clearances(ledger.engine)
    assert c.revoker is not None and c.revoker["subject"] == CAROL.subject


def test_a_step_with_no_other_officer_is_sealed_as_before(ledger: Ledger, proposed: int) -> None:
    c = approve_clearance(ledger, proposed, BOB, "checked")
    assert c.status == "approved"
    c = revoke_clearance(ledger, proposed, ALICE, "new information")
    assert c.status == "revoked"
    assert [a for a, _ in steps(ledger)] == ["proposed", "approved", "revoked"]
