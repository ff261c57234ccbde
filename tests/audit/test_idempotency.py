"""Idempotency keys: a payment submitted again gets its existing decision, never a second one;
the same key on other content is decided again and its record says so; two writers racing on
one key seal one decision; ``ledger verify`` checks the key table against the sealed keys.
Both dialects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Engine, create_engine, event

from audit.decide.idempotency import TABLE, decide_keyed, derived_key, header_key
from audit.decide.pipeline import Pipeline
from audit.decide.service import DecisionService
from audit.decide.submissions import parse_submissions
from audit.decide.types import Decision, Submission
from audit.errors import DerivedRowError
from audit.query.index import TraceIndex
from audit.query.verify import verify_index
from ledger import LedgerUnavailableError, NoteSigner, store
from ledger.append import Ledger
from ledger.verify import verify_ledger
from tests.audit.test_pipeline import PRINCIPAL, make_pipeline, submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


def keyed(subs: list[Submission]) -> list[Submission]:
    return [replace(s, idempotency=derived_key(s.transaction)) for s in subs]


def payments(n: int, seed: int, *, keys: bool = True) -> list[Submission]:
    """``n`` distinct simulated payments, each with its derived key (``keys``)."""
    subs = submissions(n, seed)[:n]
    assert len({s.transaction.reference for s in subs}) == n
    return keyed(subs) if keys else subs


def other_content(sub: Submission) -> Submission:
    """The same payment reference, another amount: other message bytes under the same key."""
    doc: dict[str, Any] = sub.transaction.to_json()
    doc["amount"] = str(Decimal(doc["amount"]) + 1)
    (s,) = parse_submissions(orjson.dumps(doc), "json", PRINCIPAL, batch=False, received_at=sub.received_at)
    assert s.idempotency == sub.idempotency and s.transaction.sha256 != sub.transaction.sha256
    return s


@pytest.fixture
def ledger_(db: Db, signer: NoteSigner) -> Iterator[Ledger]:
    ledger = make_ledger(db, signer)
    yield ledger
    ledger.engine.dispose()


@pytest.fixture
def pipe(ledger_: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> Pipeline:
    p = make_pipeline(ledger_, sandbox, pack_wasm)
    p.index = TraceIndex()
    return p


def decide(pipe: Pipeline, subs: list[Submission]) -> list[Decision]:
    return decide_keyed(pipe.decide, lambda: pipe.ledger.engine, subs)


def sql(engine: Engine, text: str, *args: Any) -> list[Any]:
    with engine.connect() as conn:
        res = conn.exec_driver_sql(text.replace("?", store.param(conn)), args or None)
        rows: list[Any] = list(res.all()) if res.returns_rows else []
        conn.commit()
    return rows


def body_at(engine: Engine, seq: int) -> dict[str, Any]:
    (rec,) = sql(engine, "SELECT record FROM ledger_entries WHERE seq = ?", seq)[0]
    env: dict[str, Any] = orjson.loads(bytes(rec))
    return env["record"]  # type: ignore[no-any-return]


def kinds_from(engine: Engine, seq: int) -> list[str]:
    """The kinds of the entries sealed at ``seq`` and after, in seq order."""
    rows = sql(engine, "SELECT kind FROM ledger_entries WHERE seq >= ? ORDER BY seq", seq)
    return [str(k) for (k,) in rows]


def test_the_key_is_the_uetr_else_the_reference_and_a_header_key_is_its_own() -> None:
    sub = payments(1, 5, keys=False)[0]
    tx = sub.transaction
    with_uetr = replace(tx, uetr="EB7E9A4C-8B45-4A3D-9F26-3A3B1A0E9D11")
    same = replace(with_uetr, reference="OTHER", uetr=with_uetr.uetr.lower())  # type: ignore[union-attr]
    assert derived_key(with_uetr) == derived_key(same)
    by_ref = derived_key(replace(tx, uetr=None))
    assert by_ref is not None and by_ref.source == "reference"
    assert derived_key(replace(tx, uetr=None, reference="NOTPROVIDED")) is None  # ISO 20022's "none given"
    assert header_key(tx.reference).key_sha256 != by_ref.key_sha256  # a caller's key never meets one derived
    for bad in ("", "a b", "é", "x" * 256):
        with pytest.raises(ValueError, match="Idempotency-Key"):
            header_key(bad)


def test_a_key_lookup_on_an_unreachable_database_is_ledger_unavailable(tmp_path: Path) -> None:
    gone = create_engine(f"sqlite:///{tmp_path / 'no-such-dir' / 'ledger.db'}")  # cannot connect
    decided: list[Submission] = []

    def decide(subs: list[Submission]) -> list[Decision]:
        decided.extend(subs)
        return []

    with pytest.raises(LedgerUnavailableError, match="cannot look up idempotency keys"):
        decide_keyed(decide, lambda: gone, payments(2, 40))  # the API answers it 503 + Retry-After
    assert decided == []  # nothing went on to be decided
    gone.dispose()


def test_the_same_payment_twice_is_answered_with_its_first_decision(pipe: Pipeline) -> None:
    engine = pipe.ledger.engine
    subs = payments(6, 41)
    with DecisionService(pipe) as service:
        first = service.decide(subs)
        size = pipe.ledger.size()
        again = service.decide(subs)
    assert pipe.ledger.size() == size  # nothing new sealed
    assert [(d.trace_id, d.seq, d.decision) for d in again] == [(d.trace_id, d.seq, d.decision)
                                                                for d in first]
    assert all(d.replayed for d in again) and not any(d.replayed for d in first)
    # the account risk the first answer stated, read back from the record
    assert [d.account_risk for d in again] == [d.account_risk for d in first]
    assert all(d.account_risk is not None for d in again)
    assert sql(engine, f"SELECT COUNT(*) FROM {TABLE}")[0][0] == 6
    k = body_at(engine, first[0].seq)["idempotency"]
    assert k == {"key_sha256": subs[0].idempotency.key_sha256, "source": subs[0].idempotency.source,  # type: ignore[union-attr]
                 "first_seq": None, "finding": None}
    verify_ledger(engine)
    assert verify_index(engine).rows[TABLE] == 6


def test_the_same_key_with_other_content_is_decided_again_with_a_finding(pipe: Pipeline) -> None:
    engine = pipe.ledger.engine
    (a,) = payments(1, 42)
    b = other_content(a)
    (first,) = decide(pipe, [a])
    (second,) = decide(pipe, [b])
    assert second.seq != first.seq and not second.replayed  # decided, never merged into the first
    k = body_at(engine, second.seq)["idempotency"]
    assert k["first_seq"] == first.seq
    assert k["finding"] == f"idempotency key reused with different content: first decided at seq {first.seq}"
    (again,) = decide(pipe, [a])  # the table keeps the first decision of the key
    assert again.replayed and again.seq == first.seq
    assert verify_index(engine).rows[TABLE] == 1


def test_a_retry_across_the_transaction_format_upgrade_is_answered_with_its_first_decision(
        pipe: Pipeline) -> None:
    """A key first decided when transactions were hashed in their version 1 form (the table holds
    that hash) still answers a retry of the same payment; other content is decided again."""
    engine = pipe.ledger.engine
    (a,) = payments(1, 43)
    (first,) = decide(pipe, [a])
    v1 = a.transaction.sha256_of("sealtrail.transaction/1")
    assert v1 != a.transaction.sha256
    _drop_key_guards(engine)
    sql(engine, f"UPDATE {TABLE} SET request_sha256 = ?", v1)  # as a version 1 decider wrote it
    (again,) = decide(pipe, [a])
    assert again.replayed and (again.seq, again.trace_id) == (first.seq, first.trace_id)
    (other,) = decide(pipe, [other_content(a)])
    assert not other.replayed and body_at(engine, other.seq)["idempotency"]["first_seq"] == first.seq


def test_one_batch_holding_a_payment_twice_and_its_key_on_other_content(pipe: Pipeline) -> None:
    engine = pipe.ledger.engine
    a, c = payments(2, 43)
    b = other_content(a)
    size = pipe.ledger.size()
    got = decide(pipe, [a, c, a, b])
    assert kinds_from(engine, size).count("decision") == 3  # a once, c, and b with its finding
    assert got[2].seq == got[0].seq and got[2].replayed
    assert len({got[0].seq, got[1].seq, got[3].seq}) == 3
    assert body_at(engine, got[3].seq)["idempotency"]["first_seq"] == got[0].seq
    verify_index(engine)


@pytest.mark.parametrize("two_deciders", [False, True], ids=["one-pipeline", "two-pipelines"])
def test_two_concurrent_submissions_of_one_payment_seal_one_decision(
        pipe: Pipeline, sandbox: Sandbox, pack_wasm: bytes, two_deciders: bool) -> None:
    """Both look the key up before either seals (a barrier holds them there): the check under the
    sequencer lock refuses the second commit, which then finds the first decision."""
    engine = pipe.ledger.engine
    (sub,) = payments(1, 44)
    other = pipe
    if two_deciders:  # two processes sharing one ledger, each with its own windows
        other = make_pipeline(pipe.ledger, sandbox, pack_wasm)
        other.index = TraceIndex()
    looked_up = threading.Barrier(2)
    results: list[Decision] = []
    errors: list[BaseException] = []

    def run(p: Pipeline) -> None:
        def held(batch: list[Submission]) -> list[Decision]:
            if batch:
                looked_up.wait(timeout=30)
            return p.decide(batch)
        try:
            results.extend(decide_keyed(held, lambda: engine, [sub]))
        except BaseException as exc:
            errors.append(exc)

    size = pipe.ledger.size()
    threads = [threading.Thread(target=run, args=(p,)) for p in (pipe, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 2
    # one decision, its batch's summary and state delta: the refused commit wrote nothing, not even a summary
    assert kinds_from(engine, size) == ["decision", "decision.summary", "state.delta"]
    assert results[0].seq == results[1].seq == size
    assert sorted(d.replayed for d in results) == [False, True]
    (later,) = decide(pipe, payments(2, 45)[1:])  # the windows recovered: deciding goes on
    assert later.seq == size + 3
    if not two_deciders:  # the refused batch's additions to the windows were taken back, not kept
        assert pipe.rolled_back == 1
    verify_index(engine)


def test_records_without_keys_still_verify(pipe: Pipeline) -> None:
    """Records sealed before keys existed (or of messages without one) carry no ``idempotency``."""
    got = decide(pipe, payments(3, 46, keys=False))
    assert "idempotency" not in body_at(pipe.ledger.engine, got[0].seq)
    assert verify_index(pipe.ledger.engine).rows[TABLE] == 0


def _drop_key_guards(engine: Engine) -> None:
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            for name in ("no_update", "no_delete"):
                conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_{name}")
        else:
            for name in ("append_only", "no_truncate"):
                conn.exec_driver_sql(f"DROP TRIGGER {TABLE}_{name} ON {TABLE}")
        conn.commit()


@pytest.mark.parametrize("damage", ["deleted", "rewritten", "forged"])
def test_verify_names_the_seq_of_a_damaged_key_row(pipe: Pipeline, damage: str) -> None:
    engine = pipe.ledger.engine
    got = decide(pipe, payments(4, 47))
    target = got[2].seq
    verify_index(engine)
    _drop_key_guards(engine)
    if damage == "deleted":
        sql(engine, f"DELETE FROM {TABLE} WHERE seq = ?", target)
        want = "deleted?"
    elif damage == "rewritten":  # the key now points at another payment's decision
        sql(engine, f"UPDATE {TABLE} SET request_sha256 = ? WHERE seq = ?", "0" * 64, target)
        want = "the key row says"
    else:  # a key that no sealed decision holds, made to look decided (at a real seq)
        sql(engine, f"DELETE FROM {TABLE} WHERE seq = ?", target)
        sql(engine, f"INSERT INTO {TABLE} (principal_fp, key_sha256, seq, request_sha256) "
            "VALUES (?, ?, ?, ?)", "ab" * 32, "f" * 64, target, "0" * 64)
        want = "forged?"
    with pytest.raises(DerivedRowError) as err:
        verify_index(engine)
    assert err.value.table == TABLE and err.value.seq == target and want in str(err.value)


def test_a_second_decision_sealed_without_saying_so_fails_verify(pipe: Pipeline) -> None:
    """A key table emptied behind the pipeline's back lets a payment be decided twice silently:
    verify names the second decision."""
    engine = pipe.ledger.engine
    (sub,) = payments(1, 48)
    (first,) = decide(pipe, [sub])
    _drop_key_guards(engine)
    sql(engine, f"DELETE FROM {TABLE}")
    (second,) = decide(pipe, [sub])
    assert second.seq != first.seq
    with pytest.raises(DerivedRowError) as err:
        verify_index(engine)
    assert err.value.seq == second.seq and f"first decided at seq {first.seq}" in str(err.value)



def test_the_same_key_under_another_principal_is_another_payment(pipe: Pipeline) -> None:
    """Keys are per principal: one bank's retry is never answered with another's decision."""
    subs = payments(4, 47)
    other = {**PRINCIPAL, "fingerprint_sha256": "cd" * 32, "subject": "CN=other bank"}
    theirs = [replace(s, principal=other) for s in subs]
    first = decide(pipe, subs)
    got = decide(pipe, [*theirs, *subs])  # theirs new, ours replayed, in one batch
    assert [d.replayed for d in got] == [False] * 4 + [True] * 4
    assert [d.seq for d in got[4:]] == [d.seq for d in first]
    assert len({d.seq for d in got[:4]} | {d.seq for d in first}) == 8
    assert verify_index(pipe.ledger.engine).rows[TABLE] == 8


def test_a_key_lookup_seeks_the_primary_key_never_scans_the_table(pipe: Pipeline) -> None:
    """The lookup runs before every keyed batch and again under the sequencer lock: a scan would
    cost each request time proportional to every payment ever decided."""
    if pipe.ledger.engine.dialect.name != "sqlite":
        pytest.skip("the query plan is read with SQLite's EXPLAIN QUERY PLAN (the statement is the same)")

    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if TABLE in statement and statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, params))
    engine = pipe.ledger.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        subs = payments(5, 48)
        decide(pipe, subs)
        decide(pipe, [other_content(subs[0])])  # decided again: its key read again under the lock
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(seen) >= 3  # before each batch, and under the lock
    with engine.connect() as conn:
        for statement, params in seen:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
            plan = " ".join(str(r[-1]) for r in rows)
            assert "USING PRIMARY KEY" in plan and "SCAN" not in plan, plan
