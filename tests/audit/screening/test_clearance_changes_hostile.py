"""Hostile tests of how good-guy clearances meet deciders and officers acting at once:

* the commit's clearance fence (``audit.decide.log_tip.fence(..., used=)``) refuses a batch that
  cleared a hit only for a later clearance record that steps on a clearance the batch used (or a
  record it cannot read as a step); proposals and other clearances' steps refuse nothing;
* an officer's approve/revoke is checked again under the sequencer lock
  (``audit.screening.clearance._step``): of two officers acting at once on one clearance, the moot
  step is refused with ``ClearanceError``, nothing written.

What an examiner relies on, whatever the interleaving: every hit a sealed record names as cleared
was cleared by a clearance in force at that record's seq (``Clearance.clears(day, seq)``), and the
exported bundle verifies; every payment is sealed exactly once; an officer's step either takes
effect (sealed and honoured by ``fold``) or is refused with the reason and nothing written."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.errors import ClearanceError, ClearanceNotFoundError, StateSuperseded
from audit.screening import clearance as clearance_module
from audit.screening.clearance import approve_clearance, propose_clearance, revoke_clearance
from audit.screening.clearance_state import CLEARANCE_KIND, CLEARANCE_SCHEMA, fold
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record
from tests.api.test_cases_api import Desk, desk_over
from tests.api.test_clearances_api import held_over, proposal
from tests.audit.screening.test_clearance import ALICE, BOB, TODAY
from tests.audit.screening.test_clearance_fence import check, step
from tests.audit.screening.test_clearance_fence import seal as seal_raw
from tests.audit.screening.test_clearance_fence_hostile import (
    ACCOUNT_Y,
    ACCOUNT_Z,
    after_first_check,
    boot,
    bundle_verifies,
    by_seq,
    clear,
    cleared_by,
    decisions,
    hits,
    not_in_force,
    once_each,
    pay,
    revoke,
)
from tests.audit.screening.test_clearance_steps_race import CAROL, racing, steps
from tests.audit.screening.test_screening_decisions import message
from tests.audit.test_deciders_contention_hostile import _decider, _other, _overtaken
from tests.conftest import Db
from wasm_rules import Sandbox

DAVE = replace(BOB, subject="CN=Dave Officer,O=Example Bank", fingerprint_sha256="e" * 64, serial="0d",
               spki_sha256="f" * 64)


@pytest.fixture
def second(db: Db, signer: NoteSigner, ledger: Ledger) -> Iterator[Ledger]:
    """An officer's own handle on the same log (another API process)."""
    lg = _other(db, signer)
    yield lg
    lg.engine.dispose()


def size(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return store.tail(conn)[0]


def clearance_bodies(ledger: Ledger) -> list[tuple[int, dict[str, Any]]]:
    with ledger.engine.connect() as conn:
        e = store.entries
        rows = conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == CLEARANCE_KIND)
                            .order_by(e.c.seq)).all()
    return [(int(s), orjson.loads(r)["record"]) for s, r in rows]


def honoured(ledger: Ledger) -> None:
    """Every approve/revoke record sealed is one ``fold`` takes: none sealed and then ignored."""
    folded = by_seq(ledger)
    for seq, body in clearance_bodies(ledger):
        if body["action"] == "approved":
            assert folded[body["clearance"]].approved_seq == seq, (seq, body)
        elif body["action"] == "revoked":
            assert folded[body["clearance"]].revoked_seq == seq, (seq, body)


def raw_step(action: str, target: object, who: Principal = CAROL) -> Record:
    """A step record as a tool outside ``_step`` (an import, an older version) may have sealed it."""
    body = {"schema": CLEARANCE_SCHEMA, "action": action, "clearance": target,
            "principal": who.to_json() | {"spki_sha256": who.spki_sha256}, "rationale": "bulk tool"}
    return Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(body))


# ======================================================================== the fence, record by record


USED = 7


@pytest.mark.parametrize(("body", "used", "refused"), [
    (step("revoked", True), frozenset({1}), True),  # a bool: True == 1, but it names no clearance
    (step("revoked", False), frozenset({0}), True),
    (step("approved", [USED]), frozenset({USED}), True),
    (step("revoked", {"seq": USED}), frozenset({USED}), True),
    (step("REVOKED", USED), frozenset({USED}), True),  # not a step fold takes, but it names a used one
    (step("suspended", USED), frozenset({USED}), True),
    ({"schema": CLEARANCE_SCHEMA, "clearance": USED}, frozenset({USED}), True),  # no action at all
    (step("revoked", 7.0), frozenset({USED}), True),  # canonical JSON seals 7.0 as 7
    (step("revoked", -USED), frozenset({USED}), False),
    (step("revoked", 2**53 - 1), frozenset({USED}), False),
    (step("revoked", USED + 1), frozenset({USED, USED + 2}), False),
    ({"schema": CLEARANCE_SCHEMA, "action": "proposed", "clearance": USED, "list": "l"},
     frozenset({USED}), False),  # a proposal is a clearance of its own seq, whatever else it says
    ({"schema": CLEARANCE_SCHEMA, "action": "proposed", "clearance": True}, frozenset({1}), False),
], ids=["bool-true", "bool-false", "list", "object", "upper-case", "unknown-action", "no-action", "float",
        "negative", "largest-exact", "other-int", "proposal-naming-used", "proposal-naming-bool"])
def test_the_fence_refuses_every_record_fold_could_take_as_a_step_on_a_used_clearance(
        ledger: Ledger, body: dict[str, Any], used: frozenset[int], refused: bool) -> None:
    """Odd shapes of a later clearance record: one that names a used clearance (or may, read
    another way) refuses the batch; an int naming another, or a proposal, does not."""
    at = seal_raw(ledger, step("approved", USED))
    bad = seal_raw(ledger, body)
    if refused:
        with pytest.raises(StateSuperseded, match=f"clearance record was sealed at seq {bad}"):
            check(ledger, at, used)
    else:
        check(ledger, at, used)


def test_a_used_clearance_revoked_in_one_commit_before_a_proposal_still_refuses(ledger: Ledger) -> None:
    """A bulk tool seals, in one commit, a revocation of the used clearance and then a proposal (the
    newest clearance record refuses nothing): the fence reads every record, not the newest only."""
    at = seal_raw(ledger, step("approved", USED))
    first = size(ledger)
    ledger.append_many([Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(step("revoked", USED))),
                        Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(
                            {"schema": CLEARANCE_SCHEMA, "action": "proposed", "list": "l"}))])
    with pytest.raises(StateSuperseded, match=f"sealed at seq {first}, after"):
        check(ledger, at, frozenset({USED}))


# ======================================================================== a bool as a seq


def _proposal_at_one(ledger: Ledger) -> int:
    """A well-formed proposal sealed right after genesis: its seq is 1, which ``True`` equals."""
    body = {"schema": CLEARANCE_SCHEMA, "action": "proposed", "list": "bank-exits", "entry_id": "B-1",
            "account_key": "0" * 32, "key_id": "0" * 16, "until": "2026-12-31",
            "decision": {"trace_id": "01938f2a-7c41-7d22-9a51-0c1d2e3f4a5b", "seq": 0,
                         "where": "beneficiary"},
            "principal": ALICE.to_json(), "rationale": "imported"}
    (r,) = ledger.append_many([Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes(body))])
    assert r.seq == 1
    return r.seq


@pytest.mark.parametrize("seq", [True, 1.0, "1", b"1", None, [1]], ids=repr)
@pytest.mark.parametrize("act", [approve_clearance, revoke_clearance], ids=["approve", "revoke"])
def test_a_seq_that_only_equals_the_proposal_is_refused_and_writes_nothing(
        ledger: Ledger, act: Callable[..., Any], seq: object) -> None:
    """``True == 1`` and ``1.0 == 1``: neither names proposal 1 (fold and the fence read only an int
    as a seq), so neither may be sealed as a step on it."""
    one = _proposal_at_one(ledger)
    before = size(ledger)
    with pytest.raises(ClearanceError) as err:
        act(ledger, seq, BOB, "checked")
    assert err.value.field == "seq" and not isinstance(err.value, ClearanceNotFoundError)
    assert size(ledger) == before and by_seq(ledger)[one].status == "proposed"
    assert act(ledger, one, BOB, "checked").seq == one  # the int itself is taken
    honoured(ledger)


@pytest.mark.parametrize("seq", [-1, 0, 2, 10**30, -(10**30)], ids=repr)
def test_a_seq_no_proposal_has_is_not_found_and_writes_nothing(ledger: Ledger, seq: int) -> None:
    _proposal_at_one(ledger)
    before = size(ledger)
    for act in (approve_clearance, revoke_clearance):
        with pytest.raises(ClearanceNotFoundError, match=f"no clearance was proposed at seq {seq}"):
            act(ledger, seq, BOB, "checked")
    assert size(ledger) == before


def test_a_step_sealed_with_a_bool_target_is_ignored_by_fold_and_refuses_the_batch(ledger: Ledger) -> None:
    """A bool-target step sealed by a tool outside ``_step``: fold takes it for nothing (clearance 1
    stays approved), and the fence, reading no int there, refuses a batch that used clearance 1
    rather than guess."""
    one = _proposal_at_one(ledger)
    (appr,) = ledger.append_many([raw_step("approved", one)])
    ledger.append_many([raw_step("revoked", True)])
    got = by_seq(ledger)[one]
    assert (got.status, got.approved_seq) == ("approved", appr.seq)
    with pytest.raises(StateSuperseded):
        check(ledger, appr.seq, frozenset({one}))


# ======================================================================== two clearances of one customer


def _x_twice(ledger: Ledger, second: Ledger, a: Pipeline) -> tuple[int, int]:
    """X held, then cleared twice (A, then B): both in force; A is the one a batch names."""
    (hx,) = a.decide([pay(90)])
    assert hx.decision == "HOLD"
    ca, cb = clear(second, hx), clear(second, hx)
    (d,) = a.decide([pay(91)])
    assert cleared_by(ledger, d) == [ca]
    return ca, cb


@pytest.mark.parametrize("which", ["used", "spare", "both"])
def test_two_clearances_of_one_customer_one_revoked_before_the_commit(
        which: str, ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """X is cleared by A and by B; a batch (X twice, a plain payment) names A. Between its
    preparation and its commit an officer revokes A (the batch is refused once and names B), B (it is
    not refused and names A), or both (refused, X held)."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    ca, cb = _x_twice(ledger, second, a)
    gone = {"used": [ca], "spare": [cb], "both": [ca, cb]}[which]
    _overtaken(monkeypatch, a, lambda: [revoke(second, c) for c in gone])
    batch = [pay(1), message(2), pay(3)]
    dx1, dp, dx2 = a.decide(batch)
    assert a.superseded == (0 if which == "spare" else 1)
    want = {"used": [cb], "spare": [ca], "both": []}[which]
    for d in (dx1, dx2):
        assert cleared_by(ledger, d) == want
        assert d.decision == ("HOLD" if which == "both" else "ALLOW")
        assert hits(ledger, d) == (["B-1"] if which == "both" else [])
    assert dp.decision == "ALLOW"
    once_each(ledger, batch)
    assert not_in_force(ledger) == []
    bundle_verifies(ledger, signer, sandbox, tmp_path)


def test_the_used_clearance_revoked_between_two_checks_of_one_batch_leaves_the_other(
        ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's one reading of the clearances is taken at X's first payment; A is revoked right
    then, before X's second payment and Y's are checked: every X payment names B (the batch is
    refused once), Y keeps its own clearance."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    ca, cb = _x_twice(ledger, second, a)
    (hy,) = a.decide([pay(92, ACCOUNT_Y)])
    cy = clear(second, hy)
    after_first_check(monkeypatch, a, lambda: revoke(second, ca))
    batch = [pay(1), pay(2, ACCOUNT_Y), pay(3)]
    dx1, dy, dx2 = a.decide(batch)
    assert a.superseded == 1
    assert (cleared_by(ledger, dx1), cleared_by(ledger, dy), cleared_by(ledger, dx2)) == ([cb], [cy], [cb])
    assert by_seq(ledger)[ca].revoked_seq < dx1.seq  # type: ignore[operator]
    once_each(ledger, batch)
    assert not_in_force(ledger) == []
    bundle_verifies(ledger, signer, sandbox, tmp_path)


def test_a_revocation_in_one_commit_with_a_proposal_after_it_refuses_the_batch(
        ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk tool seals, in one commit, the revocation of the clearance a batch used and then a
    proposal for another customer (the newest clearance record, which alone refuses nothing). The
    batch is refused once, X held; the bundle verifies."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx,) = a.decide([pay(90)])
    cx = clear(second, hx)
    (_, prop), = [(s, b) for s, b in clearance_bodies(ledger) if s == cx]
    other = Record.from_canonical_body(CLEARANCE_KIND, canonical_bytes({**prop, "account_key": "f" * 32}))
    _overtaken(monkeypatch, a, lambda: second.append_many([raw_step("revoked", cx), other]))
    (d,) = a.decide([pay(1)])
    assert a.superseded == 1
    assert (d.decision, hits(ledger, d), cleared_by(ledger, d)) == ("HOLD", ["B-1"], [])
    assert not_in_force(ledger) == []
    honoured(ledger)
    bundle_verifies(ledger, signer, sandbox, tmp_path)


# ======================================================================== refused steps refuse nothing


def test_steps_refused_as_moot_write_nothing_and_refuse_no_batch(
        ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a batch's preparation (X cleared by A) and its commit, officers try steps that are all
    refused: A approved again, Y's revoked clearance revoked again, Z's clearance approved by its
    own proposer and by the local operator. Nothing is written, so the batch is not refused."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx, hy, hz) = a.decide([pay(90), pay(91, ACCOUNT_Y), pay(92, ACCOUNT_Z)])
    cx, cy = clear(second, hx), clear(second, hy)
    revoke(second, cy)
    cz = propose_clearance(second, hz.trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31", BOB,
                           "another person", today=TODAY).seq
    refusals: list[tuple[str, str]] = []

    def moot() -> None:
        before = size(second)
        for act, seq, who, field in [(approve_clearance, cx, CAROL, "seq"),
                                     (revoke_clearance, cy, CAROL, "seq"),
                                     (approve_clearance, cz, BOB, "principal"),
                                     (approve_clearance, cz, ALICE, "principal")]:
            with pytest.raises(ClearanceError) as err:
                act(second, seq, who, "again")
            refusals.append((err.value.field, field))
        assert size(second) == before
    _overtaken(monkeypatch, a, moot)
    batch = [pay(1), message(2)]
    dx, _ = a.decide(batch)
    assert [got for got, _ in refusals] == [want for _, want in refusals] and len(refusals) == 4
    assert (a.superseded, a.locked) == (0, 0)
    assert (dx.decision, cleared_by(ledger, dx)) == ("ALLOW", [cx])
    once_each(ledger, batch)
    assert not_in_force(ledger) == []
    honoured(ledger)
    bundle_verifies(ledger, signer, sandbox, tmp_path)


def test_two_officers_revoking_the_used_clearance_at_once_seal_one_and_refuse_the_batch_once(
        db: Db, ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between a batch's preparation and its commit, two officers (two processes) revoke X's clearance
    at once: one revocation is sealed, the other refused naming it; the batch is refused once and X
    held."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx,) = a.decide([pay(90)])
    cx = clear(second, hx)
    third = _other(db, signer)
    try:
        errors: list[ClearanceError] = []

        def both() -> None:
            with pytest.MonkeyPatch.context() as mp:
                racing(mp, second, lambda: revoke_clearance(third, cx, CAROL, "FIU request"))
                try:
                    revoke(second, cx)
                except ClearanceError as exc:
                    errors.append(exc)
        _overtaken(monkeypatch, a, both)
        (d,) = a.decide([pay(1)])
    finally:
        third.engine.dispose()
    revoked = by_seq(ledger)[cx]
    assert len(errors) == 1 and f"was revoked at seq {revoked.revoked_seq}" in str(errors[0])
    assert revoked.revoker is not None and revoked.revoker["subject"] == CAROL.subject
    assert [x for x in steps(ledger) if x[0] == "revoked"] == [("revoked", CAROL.subject)]
    assert a.superseded == 1
    assert (d.decision, cleared_by(ledger, d)) == ("HOLD", [])
    assert not_in_force(ledger) == []
    honoured(ledger)
    bundle_verifies(ledger, signer, sandbox, tmp_path)


# ======================================================================== officers racing, many handles


def _at_once(handles: list[Ledger], act: Callable[[Ledger, int], Any]) -> list[Any]:
    """``act`` on every handle from a thread of its own, each past its read of the clearances and
    waiting for the others before it seals: each result, or the exception it raised."""
    gate = threading.Barrier(len(handles), timeout=20)
    out: list[Any] = [None] * len(handles)

    def run(i: int, lg: Ledger) -> None:
        real = lg.append_many

        def late(*args: Any, **kw: Any) -> Any:
            gate.wait()
            return real(*args, **kw)
        lg.append_many = late  # type: ignore[method-assign]
        try:
            out[i] = act(lg, i)
        except BaseException as exc:  # reported by the caller
            out[i] = exc
        finally:
            del lg.append_many
    threads = [threading.Thread(target=run, args=(i, lg)) for i, lg in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_four_officers_on_four_handles_at_once_seal_one_approval_then_one_revocation(
        db: Db, ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """Four officers, each in a process of its own, approve one clearance at the same instant: one
    approval sealed and honoured, three refused naming it; then all revoke at once: one sealed."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx,) = a.decide([pay(90)])
    cx = clear(ledger, hx, approve=False)
    officers = [BOB, CAROL, DAVE, replace(DAVE, subject="CN=Erin Officer,O=Example Bank",
                                          fingerprint_sha256="1" * 64, spki_sha256="2" * 64)]
    handles = [_other(db, signer) for _ in officers]
    try:
        before = size(ledger)
        got = _at_once(handles, lambda lg, i: approve_clearance(lg, cx, officers[i], "checked"))
        won = [r for r in got if not isinstance(r, BaseException)]
        lost = [r for r in got if isinstance(r, BaseException)]
        assert len(won) == 1 and len(lost) == 3, got
        c = by_seq(ledger)[cx]
        assert size(ledger) == before + 1 and c.approved_seq == before
        assert all(type(e) is ClearanceError and f"was approved at seq {before}" in str(e)
                   for e in lost), lost
        assert won[0].approver == c.approver
        got = _at_once(handles, lambda lg, i: revoke_clearance(lg, cx, officers[i], "FIU"))
        assert sum(not isinstance(r, BaseException) for r in got) == 1, got
        c = by_seq(ledger)[cx]
        assert size(ledger) == before + 2 and c.revoked_seq == before + 1
        assert all(f"was revoked at seq {before + 1}" in str(e) for e in got if isinstance(e, BaseException))
        honoured(ledger)
    finally:
        for lg in handles:
            lg.engine.dispose()


def test_approvals_and_revocations_at_once_are_each_honoured_or_refused(
        db: Db, ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """Two officers approve and two revoke one proposed clearance at the same instant. Whatever the
    order the lock takes them in, every step answered as taken is sealed and honoured by fold, and
    every refused one wrote nothing: the sealed steps are exactly the answered ones."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx,) = a.decide([pay(90)])
    for round_ in range(3):
        cx = clear(ledger, hx, approve=False)
        plan = [(approve_clearance, BOB), (approve_clearance, CAROL), (revoke_clearance, DAVE),
                (revoke_clearance, ALICE)]
        handles = [_other(db, signer) for _ in plan]
        try:
            before = size(ledger)
            got = _at_once(handles, lambda lg, i, plan=plan, cx=cx, n=round_: plan[i][0](
                lg, cx, plan[i][1], f"round {n}"))
        finally:
            for lg in handles:
                lg.engine.dispose()
        assert all(isinstance(r, ClearanceError) or not isinstance(r, BaseException) for r in got), got
        taken = [plan[i][1].subject for i, r in enumerate(got) if not isinstance(r, BaseException)]
        sealed = [(s, b) for s, b in clearance_bodies(ledger) if s >= before]
        assert sorted(b["principal"]["subject"] for _, b in sealed) == sorted(taken)
        assert len([b for _, b in sealed if b["action"] == "approved"]) <= 1
        assert len([b for _, b in sealed if b["action"] == "revoked"]) == 1
        assert by_seq(ledger)[cx].status == "revoked"
        honoured(ledger)


# ======================================================================== over HTTP


@pytest.fixture
def desk(db: Db, tmp_path: Path) -> Iterator[Desk]:
    with desk_over(db, tmp_path) as d:
        yield d


_held = held_over


def _propose_local(desk: Desk, trace: str) -> int:
    """Proposed by the local operator (CLI): both certificate officers may approve it."""
    return propose_clearance(desk.runtime.ledger, trace, "beneficiary", "bank-exits", "B-1",
                             datetime.now(UTC).date() + timedelta(days=30), ALICE, "born 1984: not him").seq


def _http_at_once(desk: Desk, monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, str]]) -> list[Any]:
    """Each (role, path) posted from a thread of its own; every request waits, after its step's read
    of the clearances, for the others to have read too: all are checked before any is sealed."""
    gate = threading.Barrier(len(calls), timeout=20)
    real = clearance_module.clearances
    reads = [0]
    lock = threading.Lock()

    def read_then_wait(*args: Any, **kw: Any) -> Any:
        got = real(*args, **kw)
        with lock:
            reads[0] += 1
            first = reads[0] <= len(calls)
        if first:
            gate.wait()
        return got
    monkeypatch.setattr(clearance_module, "clearances", read_then_wait)
    out: list[Any] = [None] * len(calls)

    def run(i: int, role: str, path: str) -> None:
        out[i] = desk.client.post(path, json={"rationale": f"{role} acts"}, headers={"x-test-role": role})
    threads = [threading.Thread(target=run, args=(i, *c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    monkeypatch.setattr(clearance_module, "clearances", real)
    return out


@pytest.mark.parametrize(("first", "then"), [("approve", "approve"), ("approve", "revoke"),
                                             ("revoke", "revoke"), ("proposer-approve", "approve")])
def test_two_officers_stepping_at_once_over_http(first: str, then: str, desk: Desk,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Officer and officer2 step on one clearance at the same instant over HTTP (after both read it).
    Each answer 200 is a step sealed and honoured by fold; each refusal is a 422 problem naming the
    field, and wrote nothing. ``proposer-approve``: the proposer's own approval, raced against a
    second officer's, is refused for four-eyes whatever the order."""
    held = _held(desk)
    ledger = desk.runtime.ledger
    if first == "proposer-approve":
        r = desk.client.post("/v1/clearances", json=proposal(held["trace_id"]),
                             headers={"x-test-role": "officer"})
        assert r.status_code == 201, r.text
        seq = r.json()["seq"]
    else:
        seq = _propose_local(desk, held["trace_id"])
    if first == "revoke":
        ok = desk.client.post(f"/v1/clearances/{seq}/approve", json={"rationale": "passport"},
                              headers={"x-test-role": "officer"})
        assert ok.status_code == 200, ok.text
    before = size(ledger)
    act = {"approve": "approve", "revoke": "revoke", "proposer-approve": "approve"}
    got = _http_at_once(desk, monkeypatch, [("officer", f"/v1/clearances/{seq}/{act[first]}"),
                                            ("officer2", f"/v1/clearances/{seq}/{act[then]}")])
    assert all(r.status_code in (200, 422) for r in got), [r.text for r in got]
    taken = [role for role, r in zip(("officer", "officer2"), got, strict=True) if r.status_code == 200]
    for r in got:
        if r.status_code == 422:
            body = r.json()
            assert body["type"] == "urn:sealtrail:problem:clearance_refused", body
            assert [e["field"] for e in body["errors"]] in (["seq"], ["principal"]), body
    sealed = [b for s, b in clearance_bodies(ledger) if s >= before]
    assert sorted(b["principal"]["subject"] for b in sealed) == sorted(desk.who[w]["subject"] for w in taken)
    honoured(ledger)
    c = by_seq(ledger)[seq]
    if (first, then) in (("approve", "approve"), ("revoke", "revoke")):
        assert len(taken) == 1
    if first == "proposer-approve":
        assert taken == ["officer2"] and got[0].json()["errors"][0]["field"] == "principal"
        assert c.status == "approved" and c.approver is not None
        assert c.approver["subject"] == desk.who["officer2"]["subject"]
    if then == "revoke":
        assert c.status == "revoked"
    for role, r in zip(("officer", "officer2"), got, strict=True):
        if r.status_code == 200:  # the answer is what fold has at the step's seq or later
            assert r.json()["seq"] == seq and r.json()["status"] in ("approved", "revoked"), role


@pytest.mark.parametrize("path", ["-1", "true", "1e1", "0x10", "99999999999999999999999999", "9" * 4300,
                                  "9" * 4301, "0", "%20"],
                         ids=lambda p: p if len(p) < 30 else f"{len(p)}-digits")
def test_a_step_on_an_odd_seq_over_http_is_refused_and_seals_nothing(desk: Desk, path: str) -> None:
    """Negative, non-numeric, huge (past what Python prints) or genesis seqs: a 404 or 422 problem,
    never a 500, and nothing sealed."""
    held = _held(desk)
    _propose_local(desk, held["trace_id"])
    before = size(desk.runtime.ledger)
    for act in ("approve", "revoke"):
        r = desk.client.post(f"/v1/clearances/{path}/{act}", json={"rationale": "checked"},
                             headers={"x-test-role": "officer2"})
        assert r.status_code in (404, 422), r.text[:300]
        assert r.headers["content-type"] == "application/problem+json", r.headers
    assert size(desk.runtime.ledger) == before


@pytest.mark.parametrize("body", [{"rationale": True}, {"rationale": "ok", "seq": True}, [], "ok",
                                  {"rationale": "ok", "principal": {"subject": "CN=Boss"}}, None, {}],
                         ids=["bool-rationale", "extra-seq", "list", "string", "principal", "null", "empty"])
def test_a_step_with_an_odd_body_over_http_is_refused_and_seals_nothing(desk: Desk, body: Any) -> None:
    held = _held(desk)
    seq = _propose_local(desk, held["trace_id"])
    before = size(desk.runtime.ledger)
    r = desk.client.post(f"/v1/clearances/{seq}/approve", content=orjson.dumps(body),
                         headers={"x-test-role": "officer2", "content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert size(desk.runtime.ledger) == before and by_seq(desk.runtime.ledger)[seq].status == "proposed"


@pytest.mark.parametrize("spelling", ["{seq}.0", "+{seq}", "0{seq}"])
def test_another_spelling_of_the_seq_steps_on_that_clearance_or_on_none(desk: Desk, spelling: str) -> None:
    """A path seq written another way (``12.0``, ``+12``, ``012``) either is refused with nothing
    sealed, or the step it seals names exactly that proposal and is honoured: never another one."""
    held = _held(desk)
    seq = _propose_local(desk, held["trace_id"])
    before = size(desk.runtime.ledger)
    r = desk.client.post(f"/v1/clearances/{spelling.format(seq=seq)}/approve", json={"rationale": "ok"},
                         headers={"x-test-role": "officer2"})
    sealed = [b for s, b in clearance_bodies(desk.runtime.ledger) if s >= before]
    if r.status_code == 200:
        assert r.json()["seq"] == seq
        assert [(b["action"], b["clearance"]) for b in sealed] == [("approved", seq)]
        assert type(sealed[0]["clearance"]) is int
        honoured(desk.runtime.ledger)
    else:
        assert r.status_code in (404, 422) and sealed == [], r.text


# ======================================================================== deciders and racing officers


def test_a_decider_beside_officers_racing_each_other_on_the_used_clearances(
        db: Db, ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path) -> None:
    """A decider decides batches of X, Y and a plain payment while two officers, each with a handle
    of its own, race each other: both revoke X's newest clearance at once, then one proposes a new
    one and both approve it at once; Y's stays. Afterwards every officer step answered as taken is
    sealed and honoured, every refused one is moot, every payment sealed once, every cleared hit by a
    clearance in force at its record's seq, and the bundle verifies."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    hx, hy = a.decide([pay(90), pay(91, ACCOUNT_Y)])
    current, cy = [clear(ledger, hx)], clear(ledger, hy)
    handles = [_other(db, signer), _other(db, signer)]
    who = [CAROL, DAVE]
    stop = threading.Event()
    errors: list[BaseException] = []
    answered: list[str] = []
    batches = [[pay(100 + 3 * k), pay(101 + 3 * k, ACCOUNT_Y), message(102 + 3 * k)] for k in range(8)]

    def officers() -> None:
        try:
            for _ in range(6):
                if stop.is_set():
                    return
                got = _at_once(handles, lambda lg, i: revoke_clearance(lg, current[-1], who[i], "FIU"))
                got += _at_once(handles[:1], lambda lg, i: current.append(
                    propose_clearance(lg, hx.trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31",
                                      ALICE, "born 1984", today=TODAY).seq))
                got += _at_once(handles, lambda lg, i: approve_clearance(lg, current[-1], who[i], "passport"))
                for r in got:
                    if isinstance(r, BaseException) and not isinstance(r, ClearanceError):
                        errors.append(r)
                    answered.append("refused" if isinstance(r, BaseException) else "taken")
        except BaseException as exc:
            errors.append(exc)

    def decider() -> None:
        try:
            for batch in batches:
                a.decide(batch)
        except BaseException as exc:
            errors.append(exc)
    threads = [threading.Thread(target=officers), threading.Thread(target=decider)]
    for t in threads:
        t.start()
    threads[1].join(120)
    stop.set()
    threads[0].join(120)
    for lg in handles:
        lg.engine.dispose()
    assert errors == []
    assert answered.count("refused") >= 2  # the racing officers met each other
    once_each(ledger, [s for b in batches for s in b])
    assert not_in_force(ledger) == []
    for b in batches:
        (d,) = _sealed_by_ref(ledger, str(b[1].transaction.reference))
        assert [int(c["clearance_seq"]) for c in d["screening"].get("cleared", ())] == [cy]
    honoured(ledger)
    bundle_verifies(ledger, signer, sandbox, tmp_path)


def _sealed_by_ref(ledger: Ledger, ref: str) -> list[dict[str, Any]]:
    return [env["record"] for _, env in decisions(ledger) if str(env["record"]["input"]["reference"]) == ref]


def test_fold_and_the_fence_agree_on_every_step_shape(ledger: Ledger) -> None:
    """For each later record shape: if fold would change clearance 1 with it (approve or revoke), the
    fence refuses a batch that used clearance 1. (The fence may refuse more; it must never refuse less.)"""
    one = _proposal_at_one(ledger)
    shapes: list[Any] = [step(a, t) for a in ("approved", "revoked", "Revoked", None)
                         for t in (one, True, 1.0, "1", None, 2, [1])]
    changed = 0
    for shape in shapes:
        recs = [(s, b, "t") for s, b in clearance_bodies(ledger)]
        was = {c.seq: c for c in fold(recs)}[one]
        at = seal_raw(ledger, step("revoked", 99))  # a step on another clearance: the reading's seq
        later = seal_raw(ledger, shape)
        now = {c.seq: c for c in fold([*recs, (at, step("revoked", 99), "t"), (later, shape, "t")])}[one]
        if now != was:
            changed += 1
            with pytest.raises(StateSuperseded, match=f"sealed at seq {later}"):
                check(ledger, at, frozenset({one}))
    assert changed == 2  # the int approval, then the int revocation (fold ignores the rest)


# ======================================================================== the examiner's bundle


@pytest.mark.parametrize("target", ["list", "object"])
def test_a_step_record_with_an_unhashable_target_does_not_stop_the_export(
        target: str, ledger: Ledger, second: Ledger, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step record the fence cannot read as naming an int (written by a tool outside ``_step``, the
    kind of record the fence refuses a batch for) names ``[cx]`` or ``{"seq": cx}``. Fold takes it
    for nothing (X's clearance stays approved); a batch in flight when it was sealed is refused once
    and prepared again, X cleared by its clearance, which is in force. The examiner's bundle of those
    decisions must still be cut and verify."""
    boot(ledger)
    a = _decider(ledger, sandbox, pack_wasm)
    (hx,) = a.decide([pay(90)])
    cx = clear(second, hx)
    odd: object = [cx] if target == "list" else {"seq": cx}
    _overtaken(monkeypatch, a, lambda: second.append_many([raw_step("revoked", odd)]))
    (d,) = a.decide([pay(1)])
    assert a.superseded == 1
    assert by_seq(ledger)[cx].status == "approved"
    assert (d.decision, cleared_by(ledger, d)) == ("ALLOW", [cx])
    assert not_in_force(ledger) == []
    bundle_verifies(ledger, signer, sandbox, tmp_path)  # was TypeError: unhashable type, in the export
