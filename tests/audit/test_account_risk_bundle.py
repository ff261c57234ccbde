"""Account risk in export bundles and under concurrent batches: a bundle of decision/2 records
checks each one's account_risk in itself and counts the alerts; a forged alert signed by the
ledger key fails as replay.account_risk; two threads deciding leave the state a rebuild gives."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState
from audit.decide.pipeline import Pipeline
from audit.decide.types import ActiveRules
from audit.state.account_risk_replay import rebuild_account_risk
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner, Record
from ledger.jcs import canonical_bytes
from tests.audit.bundle_fixture import lines, make_source, members, write_bundle
from tests.audit.test_pipeline import submissions
from tests.audit.test_verify_bundle import failures, verify
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox


def test_a_bundle_checks_every_account_risk_and_counts_the_alerts(sqlite_db: Db, signer: NoteSigner,
                                                                   sandbox: Sandbox, tmp_path: Path) -> None:
    src = make_source(make_ledger(sqlite_db, signer), signer, sandbox, n=40)
    path = write_bundle(src, tmp_path / "a.zip")
    report = verify(path, src, sandbox)
    envs = [orjson.loads(x) for x in lines(members(path)["records.jsonl"])]
    decided = [e["record"] for e in envs if e["kind"] == "decision"]
    assert report.account_risk_checked == len(decided) == report.decisions
    assert report.account_alerts == sum(bool(b["account_risk"]["alerts"]) for b in decided)


def test_a_forged_alert_signed_by_the_ledger_key_fails(sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                       tmp_path: Path) -> None:
    src = make_source(make_ledger(sqlite_db, signer), signer, sandbox, n=20)
    envs = [orjson.loads(x) for x in lines(members(write_bundle(src, tmp_path / "a.zip"))["records.jsonl"])]
    decided = [e["record"] for e in envs if e["kind"] == "decision"]
    real = next(b for b in decided if not b["account_risk"]["alerts"])
    forged = orjson.loads(orjson.dumps(real))
    forged["account_risk"]["alerts"] = ["beneficiary"]  # claims a crossing the values do not show
    (receipt,) = src.ledger.append_many([Record.from_canonical_body("decision", canonical_bytes(forged))])
    src.ledger.checkpoint()
    errs = failures(write_bundle(src, tmp_path / "b.zip"), src, sandbox, keys=[signer])
    got = [(e.kind, e.seq) for e in errs]
    assert ("replay.account_risk", receipt.seq) in got
    assert "alerts" in next(e.detail for e in errs if e.kind == "replay.account_risk")


def test_batches_from_three_threads_leave_the_state_a_rebuild_gives(
        sqlite_db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> None:
    ledger = make_ledger(sqlite_db, signer)
    files = ModelFiles.open()
    policy = AccountRiskPolicy(threshold_milli=20_000)
    rules = ActiveRules.of(sandbox.load(pack_wasm))
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), rules,
                    account_risk=AccountRiskState(policy))
    subs = submissions(400)[:400]
    batches = iter([subs[k:k + 25] for k in range(0, len(subs), 25)])
    taken = threading.Lock()

    def caller() -> None:
        while True:
            with taken:
                batch = next(batches, None)
            if batch is None:
                return
            pipe.decide(batch)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rebuilt, report = rebuild_account_risk(ledger.engine, policy)
    assert (report.applied, report.mismatched) == (400, 0)  # every record states what the log gives
    assert rebuilt.fingerprint() == pipe.account_risk.fingerprint()
