"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

    PYTHONPATH=. python tests/vectors/bundle-v8/make_vector.py OUT_DIR

writes ``bundle.zip``, ``trusted.vkey`` (the log's key) and ``witnesses.vkey`` (the two witnesses
that cosigned, one verifier key a line) into ``OUT_DIR``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from audit.export.create import ExportFilters, create_bundle
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.store import connect
from ledger.witness import LogPolicy, Witness
from migrations import upgrade
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_pipeline import submissions
from wasm_rules import Sandbox

ORIGIN = "vectors.sealtrail/log"


def main(out: Path) -> None:
    signer = NoteSigner.generate(ORIGIN)
    with tempfile.TemporaryDirectory() as tmp:
        engine = connect(f"sqlite:///{tmp}/ledger.db", create_file=True)
        upgrade(engine)
        ledger = Ledger.create(engine, signer, ORIGIN, policy=CheckpointPolicy(1000, 3600))
        witnesses = [Witness(Cosigner.generate(f"{name}.vectors.sealtrail/witness"),
                             [LogPolicy(ORIGIN, (signer.verifier,))], Path(tmp) / f"{name}.db")
                     for name in ("internal-audit", "external")]

        def cosign() -> None:
            for w in witnesses:
                def post(url: str, body: bytes, w: Witness = w) -> tuple[int, str, bytes]:
                    o = w.add_checkpoint(body)
                    return o.status, o.content_type, o.body.encode()
                collect(engine, [WitnessEndpoint("https://" + w.cosigner.name, w.cosigner.verifier)], post)

        with Sandbox() as sb:
            pipe = governed_pipeline(ledger, sb)
            subs = submissions(18)
            first = pipe.decide(subs[:9])
            pipe.decide(subs[9:])
            filters = ExportFilters.of(first[0].recorded_at, datetime.now(UTC))
            create_bundle(engine, ledger, signer, out / "bundle.zip", filters, OFFICER, now=datetime.now(UTC),
                          cosign=cosign)
        engine.dispose()
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")
    (out / "witnesses.vkey").write_text("".join(w.cosigner.verifier.vkey + "\n" for w in witnesses))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
