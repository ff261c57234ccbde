"""Writes records.jsonl, list.csv, pack.wasm, weights.npz and card.json: the canonical bodies of six
sealtrail.decision/6 records (screened against one list; three scored by the numpy reference at fp32,
three by the numpy backend computing at fp16), the list they were screened against, the rule module
that decided them, the model that scored them and its card, whose score_precision bound for fp16 on
numpy the fp16 scores are replayed against (kept for the record, not run by the tests; run from the
repository root: PYTHONPATH=. .venv/bin/python tests/vectors/decision-v6/make_vector.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules
from audit.query.index import TraceIndex
from audit.screening.screener import Screener
from inference.backends import load_backend
from inference.model import CARD_NAME, ModelFiles
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.screening.test_screening_decisions import LIST, message, seal
from tests.audit.test_pipeline import bodies
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

HERE = Path(__file__).parent
PACK = HERE.parents[2] / "wasm_rules" / "packs" / "aml_core.toml"

files = ModelFiles.open()
wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
batches = {"fp32": [message(1), message(2, "KOVALEV ALEKSANDR"), message(3, "Александр Ковалев")],
           "fp16": [message(4, orig_id="CCPT/RU/7201234567"), message(5, bank="TEHRIRTHXXX"),
                    message(6, text="/RFB/goods for SEVMORNEFTEGAZ TRADING")]}
recs = []
with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    for precision, subs in batches.items():
        db = Db(f"sqlite:///{tmp}/{precision}.db", "sqlite")
        ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
        seal(ledger)
        screener = Screener(ledger.engine)
        screener.refresh()
        pipe = Pipeline(ledger, load_backend("numpy", files.weights_path, precision=precision),
                        ActiveRules.of(sandbox.load(wasm)), screener=screener, index=TraceIndex())
        pipe.decide(subs)
        recs += [env["record"] for _, env, _ in bodies(ledger.engine)]
        ledger.engine.dispose()
(HERE / "records.jsonl").write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in recs))
(HERE / "list.csv").write_bytes(LIST)
(HERE / "pack.wasm").write_bytes(wasm)
shutil.copyfile(files.weights_path, HERE / "weights.npz")
shutil.copyfile(files.directory / CARD_NAME, HERE / "card.json")
