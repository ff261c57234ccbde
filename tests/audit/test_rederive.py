"""Re-derivation: its own arithmetic (a feature value put in a record's fixed units one at a time
is exactly what the pipeline's batch rounding writes, ``audit.decide.fixed_point.quantise_rows``)
and what the manifest states of the state it carries. Tampering is in ``test_rederive_hostile``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.bundle.rederive import _fixed
from audit.bundle.verify import verify_bundle
from audit.decide.fixed_point import LIMIT, quantise_rows
from audit.errors import BundleFailed
from audit.export.create import ExportFilters, create_bundle
from audit.state import snapshot as state_snapshot
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from tests.audit.bundle_fixture import created_bundle, make_source, members, rewrite
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(-10**12, 10**12).map(lambda i: i / 200),  # halves and cents: the ties
                    st.sampled_from([0.5, 1.5, 2.5, -0.5, -2.5, 0.005, 1e300, -1e300, 2.0**50, -0.0]))


@settings(max_examples=2000, deadline=None)
@given(value=_FLOATS, digits=st.integers(0, 15))
def test_one_value_in_fixed_units_is_what_the_batch_rounding_writes(value: float, digits: int) -> None:
    _, scaled = quantise_rows(np.array([[value]], dtype=np.float64), (digits,))
    want = None if math.isnan(value) else int(scaled[0, 0])
    got = _fixed(value, 10.0**digits)
    assert got == want
    assert got is None or -LIMIT <= got <= LIMIT


def _kinds(path: Path) -> list[tuple[int, str]]:
    return [(i["seq"], i["kind"]) for i in map(orjson.loads, members(path)["index.jsonl"].splitlines())]


def test_a_manifest_miscounting_the_decisions_without_a_sealed_origin_is_refused(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    src = make_source(make_ledger(sqlite_db, signer), signer, sandbox)
    path = created_bundle(src, tmp_path / "b.zip")
    report = verify_bundle(path, [signer.verifier], sandbox=sandbox)
    assert report.rederived == len(src.decisions) - 1  # one payload purged
    purge = next(s for s, k in _kinds(path) if k == "ledger.payload_purge")
    assert report.not_rederived == {f"payload purged under retention at seq {purge}": 1}
    manifest = orjson.loads(members(path)["manifest.json"])
    assert manifest["state"]["unsealed_origin"] == 0
    manifest["state"]["unsealed_origin"] = 3  # would excuse three decisions from re-derivation
    forged = rewrite(path, tmp_path / "f.zip", change={"manifest.json": canonical_bytes(manifest)},
                     resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(forged, [signer.verifier], sandbox=sandbox)
    (err,) = [e for e in caught.value.failures if e.kind == "manifest.state"]
    assert "unsealed_origin = 3" in str(err) and "0 exported decisions" in str(err)


def _snapshotted(db: Db, signer: NoteSigner, sandbox: Sandbox) -> tuple[Ledger, list[Any]]:
    """A ledger decided by one pipeline from its start: 60 payments, a sealed snapshot of its state
    (caught up from seq 0), then the rest."""
    ledger = make_ledger(db, signer)
    pipe = governed_pipeline(ledger, sandbox)
    subs = submissions(120, seed=41)
    pipe.decide(subs[:60])
    with ledger.engine.connect() as conn:
        covered = store.tail(conn)[0]
    state_snapshot.seal(ledger, state_snapshot.keyed_state_bytes(ledger.engine, pipe.extractor), covered, 0,
                        pipe.decider)
    later = pipe.decide(subs[60:])
    return ledger, later


@pytest.mark.requirement("FATF-R11-reconstruct")
def test_a_sealed_snapshot_stands_in_for_the_deltas_before_it_and_the_decisions_still_re_derive(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    ledger, later = _snapshotted(sqlite_db, signer, sandbox)
    window = ExportFilters.of(later[0].recorded_at, "2100-01-01T00:00:00Z")
    with_snap = create_bundle(ledger.engine, ledger, signer, tmp_path / "s.zip", window, OFFICER,
                              state_snapshot=True).path
    without = create_bundle(ledger.engine, ledger, signer, tmp_path / "d.zip", window, OFFICER,
                            state_snapshot=False).path
    m = orjson.loads(members(with_snap)["manifest.json"])["state"]
    snap = m["snapshot"]
    assert snap is not None and snap["covers_seq"] < later[0].seq and m["from_seq"] == 0
    # the first commit's summary brackets the window (a line of records.jsonl); its delta, before the
    # snapshot, is left out with it
    assert [k for _, k in _state_kinds(with_snap)] == ["state.snapshot", "state.delta"]
    assert [k for _, k in _state_kinds(without)] == ["state.delta", "state.delta"]
    for path in (with_snap, without):
        report = verify_bundle(path, [signer.verifier], sandbox=sandbox)
        assert report.rederived == len(later) and report.not_rederived == {}


def test_a_snapshot_whose_state_is_not_the_sealed_one_is_refused_and_its_decisions_not_re_derived(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    ledger, later = _snapshotted(sqlite_db, signer, sandbox)
    window = ExportFilters.of(later[0].recorded_at, "2100-01-01T00:00:00Z")
    path = create_bundle(ledger.engine, ledger, signer, tmp_path / "s.zip", window, OFFICER,
                         state_snapshot=True).path
    head, _, rest = members(path)["state/snapshot.bin"].partition(b"\n")
    n = orjson.loads(head)["velocity"]
    velocity = orjson.loads(rest[:n])
    velocity["accounts"][0][1] += 1  # one account's last activity a microsecond later
    new = orjson.dumps(velocity)
    forged_state = orjson.dumps({**orjson.loads(head), "velocity": len(new)}) + b"\n" + new + rest[n:]
    forged = rewrite(path, tmp_path / "f.zip", change={"state/snapshot.bin": forged_state}, rehash=True,
                     resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(forged, [signer.verifier], sandbox=sandbox)
    (err,) = [e for e in caught.value.failures if e.kind == "state.snapshot"]
    assert "not the one sealed" in str(err) and err.seq == orjson.loads(
        members(path)["manifest.json"])["state"]["snapshot"]["seq"]
    report = caught.value.report
    assert report is not None and report.rederived == 0
    assert report.not_rederived == {"the state snapshot it was to be re-derived on does not hold": len(later)}


def _state_kinds(path: Path) -> list[tuple[int, str]]:
    return [(i["seq"], i["kind"]) for i in map(orjson.loads, members(path)["state/index.jsonl"].splitlines())]


def test_a_delta_whose_integers_pass_signed_64_bits_is_refused_as_malformed_never_a_crash() -> None:
    import hashlib

    from audit.bundle.records import Findings
    from audit.bundle.rederive import read_state
    from audit.state.delta import delta_body, entries_bytes

    a, b = "a" * 64, "b" * 64
    for bad in ((a, b, 5, 2**63 + 5), (a, b, 2**64 - 1, 7)):  # JSON reads them (unsigned 64 bits)
        body = orjson.loads(delta_body("0123456789abcdef", 10, entries_bytes([(a, b, 5, 7), bad]),
                                       "host/1/abcd0123", 0))
        line = orjson.dumps({"kind": "state.delta", "record": body,
                             "recorded_at": "2026-12-05T00:00:00.000000Z", "trace_id": "t", "v": 1})
        leaf = hashlib.sha256(b"\x00" + line).digest()
        index = orjson.dumps({"chain_hash": "00" * 32, "kind": "state.delta", "leaf_hash": leaf.hex(),
                              "seq": 13, "trace_id": "t"})
        found = Findings(10)
        got = read_state([line], [index], 100, found)
        assert got.deltas == [] and [e.kind for e in found.items] == ["state.record"]
        assert "seq 13" in str(found.items[0]) or found.items[0].seq == 13
