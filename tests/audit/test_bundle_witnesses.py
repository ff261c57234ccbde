"""Bundles whose checkpoint witnesses cosigned (``sealtrail.bundle/8``): the exporter carries the
cosignatures it collected, the verifier checks each and the quorum of witnesses the examiner pins,
and a bundle without them fails a quorum instead of passing quietly."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.errors import BundleError
from audit.export.create import ExportFilters, create_bundle
from ledger import NoteSigner
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner, cosignatures
from ledger.witness import LogPolicy, Witness
from tests.audit.bundle_fixture import OFFICER, members, now_fixed, rewrite
from tests.audit.test_export import governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


@pytest.fixture
def world(sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> dict[str, Any]:
    ledger = make_ledger(sqlite_db, signer)
    pipe = governed_pipeline(ledger, sandbox)
    pipe.decide(submissions(24))
    ledger.checkpoint()
    policy = [LogPolicy(ledger.origin, (signer.verifier,))]
    witnesses = [Witness(Cosigner.generate(f"w{i}.example/witness"), policy, tmp_path / f"w{i}.db")
                 for i in (1, 2, 3)]
    outcomes = []

    def cosign() -> None:  # two of the three cosign, when the exporter asks
        for w in witnesses[:2]:
            endpoint = WitnessEndpoint("https://w", w.cosigner.verifier)
            outcomes.extend(collect(ledger.engine, [endpoint], w.post))

    out = tmp_path / "b.zip"
    filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    create_bundle(ledger.engine, ledger, signer, out, filters, OFFICER, now=datetime.now(UTC), cosign=cosign)
    assert [o.ok for o in outcomes] == [True, True], outcomes
    return {"ledger": ledger, "signer": signer, "witnesses": witnesses, "bundle": out}


def test_a_witnessed_bundle_carries_and_verifies_its_cosignatures(world: dict[str, Any],
                                                                  sandbox: Sandbox) -> None:
    w1, w2, w3 = (w.cosigner.verifier for w in world["witnesses"])
    m = members(world["bundle"])
    manifest = orjson.loads(m["manifest.json"])
    assert manifest["schema"] == "sealtrail.bundle/9"
    assert sorted(x["vkey"] for x in manifest["witnesses"]) == sorted([w1.vkey, w2.vkey])
    assert len(cosignatures(m["checkpoint.txt"].decode(), [w1, w2, w3])) == 2
    key = [world["signer"].verifier]
    report = verify_bundle(world["bundle"], key, sandbox=sandbox, now=now_fixed, witness_keys=[w1, w2, w3],
                           min_witnesses=2)
    assert (report.format, report.witnesses_pinned, len(report.witnesses)) == (9, 2, 2)
    assert report.decisions == manifest["counts"]["decisions"] > 0
    with pytest.raises(BundleError) as failed:
        verify_bundle(world["bundle"], key, sandbox=sandbox, now=now_fixed, witness_keys=[w1, w2, w3],
                      min_witnesses=3)
    assert [f.kind for f in failed.value.failures] == ["witness.quorum"]
    assert "2 of the 3 witness cosignatures" in str(failed.value.failures[0])
    # only the third (who did not cosign) pinned: none of the carried cosignatures counts
    with pytest.raises(BundleError, match="0 of the 1"):
        verify_bundle(world["bundle"], key, sandbox=sandbox, now=now_fixed, witness_keys=[w3],
                      min_witnesses=1)


def test_a_dropped_or_forged_cosignature_is_caught(world: dict[str, Any], sandbox: Sandbox,
                                                   tmp_path: Path) -> None:
    w1, w2, _ = (w.cosigner.verifier for w in world["witnesses"])
    signer, key = world["signer"], [world["signer"].verifier]
    note = members(world["bundle"])["checkpoint.txt"].decode()
    kept = "".join(line + "\n" for line in note.split("\n")[:-1] if not line.startswith("\u2014 w1."))
    dropped = rewrite(world["bundle"], tmp_path / "dropped.zip", change={"checkpoint.txt": kept.encode()},
                      resign=signer)
    with pytest.raises(BundleError) as failed:
        verify_bundle(dropped, key, sandbox=sandbox, now=now_fixed)
    assert "witness.missing" in [f.kind for f in failed.value.failures]
    # a cosignature line altered: it claims w2 but does not verify
    line = next(x for x in note.split("\n") if x.startswith("\u2014 w2."))
    i = len(line) - 20
    bad = line[:i] + ("A" if line[i] != "A" else "B") + line[i + 1:]
    forged = rewrite(world["bundle"], tmp_path / "forged.zip",
                     change={"checkpoint.txt": note.replace(line, bad).encode()}, resign=signer)
    with pytest.raises(BundleError) as failed:
        verify_bundle(forged, key, sandbox=sandbox, now=now_fixed, witness_keys=[w1, w2], min_witnesses=1)
    assert "witness.cosignature" in [f.kind for f in failed.value.failures]


def test_an_unwitnessed_bundle_fails_a_quorum_and_passes_without_one(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    ledger = make_ledger(sqlite_db, signer)
    governed_pipeline(ledger, sandbox).decide(submissions(6))
    out = tmp_path / "plain.zip"
    filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    create_bundle(ledger.engine, ledger, signer, out, filters, OFFICER, now=datetime.now(UTC))
    assert orjson.loads(members(out)["manifest.json"])["schema"] != "sealtrail.bundle/8"
    key = [signer.verifier]
    assert verify_bundle(out, key, sandbox=sandbox, now=now_fixed).witnesses == ()
    witness = Cosigner.generate("w.example/witness").verifier
    with pytest.raises(BundleError, match="carries none"):
        verify_bundle(out, key, sandbox=sandbox, now=now_fixed, witness_keys=[witness], min_witnesses=1)
