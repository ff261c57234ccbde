"""Writes records.jsonl, list.csv, pack.wasm and weights.npz: the canonical bodies of six
sealtrail.decision/5 records (screened against one list), the list they were screened against, the
rule module that decided them and the model that scored them (kept for the record, not run by the
tests; run from the repository root: PYTHONPATH=. .venv/bin/python
tests/vectors/decision-v5/make_vector.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from audit.screening.screener import Screener
from inference.model import ModelFiles
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.screening.test_screening_decisions import LIST, message, pipeline, seal
from tests.audit.test_pipeline import bodies
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

HERE = Path(__file__).parent
PACK = HERE.parents[2] / "wasm_rules" / "packs" / "aml_core.toml"

with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    db = Db(f"sqlite:///{tmp}/ledger.db", "sqlite")
    ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
    wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
    seal(ledger)
    screener = Screener(ledger.engine)
    screener.refresh()
    pipe = pipeline(ledger, sandbox, wasm, screener)
    pipe.decide([message(1), message(2, "KOVALEV ALEKSANDR"), message(3, "Александр Ковалев"),
                 message(4, orig_id="CCPT/RU/7201234567"), message(5, bank="TEHRIRTHXXX"),
                 message(6, text="/RFB/goods for SEVMORNEFTEGAZ TRADING")])
    recs = [env["record"] for _, env, _ in bodies(ledger.engine)]
    (HERE / "records.jsonl").write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in recs))
    (HERE / "list.csv").write_bytes(LIST)
    (HERE / "pack.wasm").write_bytes(wasm)
    shutil.copyfile(ModelFiles.open().weights_path, HERE / "weights.npz")
    ledger.engine.dispose()
