"""Writes records.jsonl: the canonical bodies of three sealtrail.decision/2 records (kept for the
record, not run by the tests; run from the repository root: .venv/bin/python
tests/vectors/decision-v2/make_vector.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from audit.decide.account_risk import AccountRiskPolicy
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.test_account_risk_pipeline import allow_pipeline, from_one_account
from tests.audit.test_pipeline import bodies
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox

OUT = Path(__file__).parent / "records.jsonl"

with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    db = Db(f"sqlite:///{tmp}/ledger.db", "sqlite")
    ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
    pipe = allow_pipeline(ledger, sandbox, 0.45, AccountRiskPolicy(threshold_milli=9000))
    for s in from_one_account(3):
        pipe.decide([s])
    OUT.write_bytes(b"".join(canonical_bytes(env["record"]) + b"\n" for _, env, _ in bodies(ledger.engine)))
    ledger.engine.dispose()
