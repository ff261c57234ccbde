"""Writes records.jsonl, list.csv, pack.wasm and weights.npz: the canonical bodies of two records of
one batch screened against one list under a budget of 760 units, a sealtrail.decision/6 (an unlisted
company, screened in full) and a sealtrail.decision/7 (a remittance of 200 of the list's own words,
whose screening stopped at the budget), the list, the rule module that decided them and the model
that scored them (kept for the record, not run by the tests; run from the repository root:
PYTHONPATH=. .venv/bin/python tests/vectors/decision-v7/make_vector.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules
from audit.query.index import TraceIndex
from audit.screening.screener import Screener
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.screening.test_screening_budget_decisions import flooded
from tests.audit.screening.test_screening_decisions import LIST, message, seal
from tests.audit.test_pipeline import bodies
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

HERE = Path(__file__).parent
PACK = HERE.parents[2] / "wasm_rules" / "packs" / "aml_core.toml"

files = ModelFiles.open()
wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    db = Db(f"sqlite:///{tmp}/v7.db", "sqlite")
    ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
    seal(ledger)
    screener = Screener(ledger.engine, budget=760)
    screener.refresh()
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), ActiveRules.of(sandbox.load(wasm)),
                    screener=screener, index=TraceIndex())
    pipe.decide([message(1), flooded(2)])
    recs = [env["record"] for _, env, _ in bodies(ledger.engine)]
    ledger.engine.dispose()
(HERE / "records.jsonl").write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in recs))
(HERE / "list.csv").write_bytes(LIST)
(HERE / "pack.wasm").write_bytes(wasm)
shutil.copyfile(files.weights_path, HERE / "weights.npz")
