"""How ``bundle.zip`` of this directory was written (kept for the record; never run by the tests, and
never to be run again over the committed vector: a new format version gets a new directory).

Format 6 was the newest format sealtrail wrote from c6a4ab8 to 8efa741 (the next commit, e090d90,
made window bundles format 7), so this script runs against a checkout of 8efa741, not against the
tree it is committed in (whose exporter writes format 9 and whose test helpers have moved on):

    git worktree add --detach /tmp/v6 8efa741
    cd /tmp/v6 && PYTHONPATH=/tmp/v6 /work/main/.venv/bin/python \\
        /work/main/tests/vectors/bundle-v6/make_vector.py OUT_DIR
    git -C /work/main worktree remove /tmp/v6

writes ``bundle.zip`` and ``trusted.vkey`` into ``OUT_DIR`` and prints what the README states.
"""

from __future__ import annotations

import sys
import tempfile
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path

import orjson

from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.export import ExportFilters, create_bundle
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from audit.screening.clearance import approve_clearance, propose_clearance
from audit.screening.screener import Screener
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner
from ledger.append import CheckpointPolicy, Ledger
from ledger.store import connect
from migrations import upgrade
from tests.audit.screening.test_clearance import ALICE, BOB
from tests.audit.screening.test_screening_decisions import message, seal
from tests.audit.test_export import OFFICER
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
            op = Principal.local("operator")
            gov = Governance(ledger)
            gov.bootstrap_default(principal=op)
            files = ModelFiles.open()
            register_model(ledger, files, op, backends=["numpy"])
            # the bank's exit list (internal CSV): B-1 a person, B-2 a bank, B-3 a firm
            list_seq = seal(ledger)
            screener = Screener(engine, check_every_s=0.0, background=False)
            screener.refresh()
            pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sb),
                            index=TraceIndex(), screener=screener)
            subs = submissions(12)
            pipe.decide(subs[:6])
            held = pipe.decide([message(1), message(2, "KOVALEV ALEKSANDR"),  # a strong name hit: HOLD
                                message(3, bank="TEHRIRTHXXX"),  # the listed bank's BIC: BLOCK
                                message(4, text="/RFB/goods for SEVMORNEFTEGAZ TRADING"),  # a name in :70:
                                message(5, "Александр Ковалев")])  # Cyrillic
            c = propose_clearance(ledger, held[1].trace_id, "beneficiary", "bank-exits", "B-1", "2026-12-31",
                                  ALICE, "date of birth 1984, not 1961: another person",
                                  today=date(2026, 12, 1))
            approve_clearance(ledger, c.seq, BOB, "checked the passport copy")
            cleared = pipe.decide([message(6, "KOVALEV ALEKSANDR")])  # the same customer: hit cleared
            pipe.decide(subs[6:])
            filters = ExportFilters.of("2000-01-01T00:00:00Z", datetime.now(UTC))
            summary = create_bundle(engine, ledger, signer, out / "bundle.zip", filters, OFFICER,
                                    now=datetime.now(UTC))
        engine.dispose()
    with zipfile.ZipFile(out / "bundle.zip") as z:
        manifest = orjson.loads(z.read("manifest.json"))
    assert manifest["schema"] == "sealtrail.bundle/6", manifest["schema"]
    (out / "trusted.vkey").write_text(signer.verifier.vkey + "\n")
    print(orjson.dumps({"out": str(out), "vkey": signer.verifier.vkey, "list_seq": list_seq,
                        "clearance_seq": c.seq, "held": [(d.seq, d.decision) for d in held],
                        "cleared": [(d.seq, d.decision) for d in cleared],
                        "counts": summary.counts}).decode())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
