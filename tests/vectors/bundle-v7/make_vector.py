"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

    PYTHONPATH=. python tests/vectors/bundle-v7/make_vector.py OUT_DIR

writes ``bundle.zip`` and ``trusted.vkey`` into ``OUT_DIR``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from audit.export.create import ExportFilters, create_bundle
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from ledger.store import connect
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
        with Sandbox() as sb:
            pipe = governed_pipeline(ledger, sb)
            subs = submissions(36)
            pipe.decide(subs[:9])  # before the window: its summary and delta travel as state lines
            pipe.decide(subs[9:18])  # its summary is the window's left bracket (in records.jsonl)
            third = pipe.decide(subs[18:27])
            pipe.decide(subs[27:])
            filters = ExportFilters.of(third[0].recorded_at, datetime.now(UTC))
            create_bundle(engine, ledger, signer, out / "bundle.zip", filters, OFFICER, now=datetime.now(UTC))
        engine.dispose()
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
