"""Re-derivation: its own arithmetic (a feature value put in a record's fixed units one at a time
is exactly what the pipeline's batch rounding writes, ``audit.decide.fixed_point.quantise_rows``)
and what the manifest states of the state it carries. Tampering is in ``test_rederive_hostile``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.bundle.rederive import _fixed
from audit.bundle.verify import verify_bundle
from audit.decide.fixed_point import LIMIT, quantise_rows
from audit.errors import BundleFailed
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.bundle_fixture import created_bundle, make_source, members, rewrite
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
