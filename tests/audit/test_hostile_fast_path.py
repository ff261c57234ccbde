"""The single-request fast path, attacked: a decider alone that stops reading the log before each
batch must still never seal on a state missing others' decisions, and a record template kept
across batches must state each batch's own numbers."""

from __future__ import annotations

from typing import Any

import rfc8785

from audit.decide.account_secret import load_state_key
from audit.decide.log_tip import newest_delta
from audit.decide.record import decision_bodies, decision_body
from audit.state.delta import DELTA_KIND
from audit.state.replay import catch_up
from inference.features import FeatureExtractor
from inference.state_store import features_state_bytes
from inference.velocity import VelocityState
from ledger import NoteSigner
from ledger.append import Ledger
from tests.audit.test_many_deciders import _open
from tests.audit.test_pipeline import make_pipeline, submissions
from tests.audit.test_record import columns, record
from tests.conftest import Db
from wasm_rules import Sandbox

# --- an idle decider that stopped reading the log ----------------------------------------------


def _without_deltas(ledger: Ledger) -> None:
    """Make ``ledger``'s commits those of a writer that seals no ``state.delta`` (the decisions and
    their summary only), which ``audit.state.replay.catch_up`` replays from the payloads ("a writer
    of an earlier release")."""
    real = ledger.append_many

    def append_many(records: Any, **kw: Any) -> Any:
        tail = kw.get("tail")
        if tail is not None:
            kw["tail"] = lambda conn, seq: [r for r in _as_list(tail(conn, seq)) if r.kind != DELTA_KIND]
        return real(records, **kw)
    ledger.append_many = append_many  # type: ignore[method-assign]


def _as_list(got: Any) -> list[Any]:
    return list(got) if isinstance(got, (list, tuple)) else [got]


def test_an_idle_decider_that_stopped_reading_misses_decisions_sealed_without_a_state_delta(
        db: Db, signer: NoteSigner, ledger: Ledger, sandbox: Sandbox, pack_wasm: bytes) -> None:
    """Decisions sealed by a writer that seals no ``state.delta`` (an earlier release) do not move
    the newest delta: the fence also refuses a batch when a decision lies past the state it was
    prepared on, so it is caught up (from the payloads) and prepared again, never sealed without
    them."""
    subs = submissions(80, seed=24)
    alone, cut_in, after = subs[:40], subs[40:50], subs[50:]
    second = _open(db, signer)
    a, b = make_pipeline(ledger, sandbox, pack_wasm), make_pipeline(second, sandbox, pack_wasm)
    for i in range(0, len(alone), 2):  # 20 idle batches: 16+ quiet reads, then reads are skipped
        a.decide(alone[i:i + 2])
    _without_deltas(second)
    b.decide(cut_in)
    with ledger.engine.connect() as conn:
        assert newest_delta(conn) is not None and newest_delta(conn) < ledger.size() - len(cut_in)
    a.decide(after[:3])
    fresh = FeatureExtractor(state=VelocityState(load_state_key(ledger.engine)))
    catch_up(ledger.engine, fresh, 0)
    try:
        assert a.caught_up == len(cut_in) and a.superseded == 1
        assert features_state_bytes(a.extractor) == features_state_bytes(fresh)
    finally:
        second.engine.dispose()


# --- the template kept across batches ------------------------------------------------------------

_SHARED = {"feature_schema": "sealtrail.features/1", "tables": {"fx_rates": "t1"}, "model_sha256": "00" * 32,
           "backend": "numpy", "module_sha256": "11" * 32, "ruleset_id": "aml_core", "ruleset_version": "1"}
_PER = {"at": "2026-12-02T20:15:28.123456Z", "principal": {"subject": "CN=x"}, "message_format": "json",
        "message_type": "json", "reference": "R1", "raw_sha256": "a" * 64, "transaction_sha256": "b" * 64,
        "feature_values": [1.0] * 32, "features_sha256": "c" * 64, "score": 0.25, "decision": "ALLOW",
        "fired": (), "fail_safe": None, "queue": 3}


def test_a_kept_template_without_latency_stages_states_the_first_batchs_fuel_and_batch_size() -> None:
    """With no latency stage besides ``queue``, the fuel and the batch size are still slots of the
    kept template: the second batch states its own, not the first's."""
    for fuel, size in ((7, 1), (9_000, 2)):
        shared = {**_SHARED, "fuel": fuel, "batch_size": size}
        ds = [record(_PER, shared, {}) for _ in range(size)]
        got = decision_bodies(ds[0], columns(ds), ds.__getitem__)
        assert got == [rfc8785.dumps(decision_body(d)) for d in ds], (fuel, size)
