"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

    PYTHONPATH=. python tests/vectors/bundle-v9/make_vector.py OUT_DIR

writes ``bundle.zip``, ``trusted.vkey`` (the log's key) and ``witnesses.vkey`` (the witness that
cosigned) into ``OUT_DIR``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from audit.decide.refusal_seal import seal_refusal
from audit.export.create import ExportFilters, create_bundle
from audit.governance.service import Governance
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.retention import place_hold
from ledger.store import connect
from ledger.witness import LogPolicy, Witness
from migrations import upgrade
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_governance import APPROVER, pack
from tests.audit.test_governance import OFFICER as PROPOSER
from tests.audit.test_pipeline import submissions
from tests.audit.test_refusals import MT940, refused
from wasm_rules import Sandbox

ORIGIN = "vectors.sealtrail/log"


def main(out: Path) -> None:
    signer = NoteSigner.generate(ORIGIN)
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(f"sqlite:///{tmp}/ledger.db", create_file=True)
        upgrade(engine)
        ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600))
        witness = Witness(Cosigner.generate("internal-audit.vectors.sealtrail/witness"),
                          [LogPolicy(ORIGIN, (signer.verifier,))], Path(tmp) / "w.db")

        def cosign() -> None:
            collect(engine, [WitnessEndpoint("https://w", witness.cosigner.verifier)], witness.post)

        with Sandbox() as sb:
            pipe = governed_pipeline(ledger, sb)
            subs = submissions(12)
            pipe.decide(subs[:6])
            seal_refusal(ledger, refused(MT940, "mt", True, now=datetime.now(UTC)))
            gov = Governance(ledger)
            gov.approve(gov.propose(pack("2027.9.0"), PROPOSER).id, APPROVER)
            place_hold(ledger, "order-7", 1, 4, "court order 7")
            pipe.decide(subs[6:])
            filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC))
            create_bundle(engine, ledger, signer, out / "bundle.zip", filters, OFFICER, now=datetime.now(UTC),
                          cosign=cosign, retention_days=3653)
        engine.dispose()
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")
    (out / "witnesses.vkey").write_text(witness.cosigner.verifier.vkey + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
