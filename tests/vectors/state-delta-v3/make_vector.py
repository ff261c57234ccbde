"""Writes the state-delta vector of version 3: the canonical bodies of the sealtrail.state-delta/3
records a pipeline sealed over three commits, the state key they are keyed under, the SHA-256 of
the feature state that applying them gives, and the root of the account-risk state that a rebuild
from the decision records gives (kept for the record, not run by the tests; run from the
repository root: PYTHONPATH=. .venv/bin/python tests/vectors/state-delta-v3/make_vector.py)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import orjson

from audit.decide.account_secret import load_state_key
from audit.state.account_risk_replay import rebuild_account_risk
from audit.state.risk_snapshot_body import RiskState
from inference.state_store import features_state_bytes
from ledger import NoteSigner
from ledger.jcs import canonical_bytes
from tests.audit.test_pipeline import make_pipeline, submissions
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

HERE = Path(__file__).parent
PACK = HERE.parents[2] / "wasm_rules" / "packs" / "aml_core.toml"

with tempfile.TemporaryDirectory() as tmp, Sandbox() as sandbox:
    db = Db(f"sqlite:///{tmp}/ledger.db", "sqlite")
    ledger = make_ledger(db, NoteSigner.generate(ORIGIN))
    pipe = make_pipeline(ledger, sandbox, compile_ruleset(parse_ruleset(PACK.read_text())))
    subs = submissions(120, seed=31)
    for i in range(0, len(subs), 50):
        pipe.decide(subs[i:i + 50])
    with ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT seq, record FROM ledger_entries WHERE kind = 'state.delta' "
                                    "ORDER BY seq").all()
    lines = [orjson.dumps({"seq": int(s), "body": orjson.loads(canonical_bytes(orjson.loads(r)["record"]))})
             for s, r in rows]
    (HERE / "deltas.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    state = features_state_bytes(pipe.extractor)
    policy = pipe.account_risk.policy
    rebuilt, report = rebuild_account_risk(ledger.engine, policy)
    assert report.mismatched == 0 and rebuilt.fingerprint() == pipe.account_risk.fingerprint()
    (HERE / "expected.json").write_bytes(orjson.dumps({
        "state_key": load_state_key(ledger.engine).hex(),
        "feature_state_sha256": hashlib.sha256(state).hexdigest(),
        "account_risk_root": RiskState.of(rebuilt).root().hex(),
        "half_life_hours": policy.half_life_hours,
        "decisions": len(subs)}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
