"""Writes records.jsonl, pack.wasm and weights.npz: the canonical bodies of sealtrail.decision/4
records (numbers in fixed units, no float), the rule module that decided them and the model that
scored them (kept for the record, not run by the tests; run from the repository root:
.venv/bin/python tests/vectors/decision-v4/make_vector.py)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from inference.model import ModelFiles
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.test_pipeline import bodies, make_pipeline, submissions
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

HERE = Path(__file__).parent
PACK = HERE.parents[2] / "wasm_rules" / "packs" / "aml_core.toml"

with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    db = Db(f"sqlite:///{tmp}/ledger.db", "sqlite")
    ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
    wasm = compile_ruleset(parse_ruleset(PACK.read_text()))
    pipe = make_pipeline(ledger, sandbox, wasm)
    pipe.decide(submissions(300))
    recs = [env["record"] for _, env, _ in bodies(ledger.engine)]
    with_reasons = [r for r in recs if r["explanation"] and r["explanation"]["reasons"]][:3]
    without = [r for r in recs if r["explanation"] is None][:2]
    (HERE / "records.jsonl").write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in with_reasons + without))
    (HERE / "pack.wasm").write_bytes(wasm)
    shutil.copyfile(ModelFiles.open().weights_path, HERE / "weights.npz")
    ledger.engine.dispose()
