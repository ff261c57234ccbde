"""Screening replayed offline: a bundle of screened decisions (format 6) carries the list records and the
lists' bytes, the verifier screens every payment again and finds the same hits, a decision whose payment
was purged is counted as not screened again, and a pipeline that sealed fewer hits than the lists give
(screening suppressed or broken) is caught even though its records hold together."""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.errors import BundleFailed
from audit.export import ExportFilters, create_bundle
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from audit.screening.screener import Screener
from inference.backends import load_backend
from inference.model import ModelFiles
from inference.screening import screen as screen_module
from ledger import NoteSigner
from ledger.append import Ledger
from ledger.retention import purge_payloads
from tests.audit.screening.test_screening_decisions import message, seal
from wasm_rules import Sandbox

OFFICER = Principal.local("officer")
ALL = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")


def governed(ledger: Ledger, sandbox: Sandbox, screener: Screener) -> Pipeline:
    """A pipeline under the shipped pack and model, registered as a bank's governance does."""
    op = Principal.local("operator")
    gov = Governance(ledger)
    gov.bootstrap_default(principal=op)
    files = ModelFiles.open()
    register_model(ledger, files, op, backends=["numpy"])
    return Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sandbox),
                    index=TraceIndex(), screener=screener)


def decide(ledger: Ledger, sandbox: Sandbox, screener: Screener) -> Pipeline:
    pipe = governed(ledger, sandbox, screener)
    pipe.decide([message(1), message(2, "KOVALEV ALEKSANDR"), message(3, bank="TEHRIRTHXXX")])
    pipe.decide([message(4, text="/RFB/goods for SEVMORNEFTEGAZ TRADING"), message(5, "Jane Doe")])
    return pipe


def screened(ledger: Ledger, *, sealed: bool = True) -> Screener:
    """The bank's exit list sealed (unless it is already), and a screener indexing it."""
    if sealed:
        seal(ledger)
    screener = Screener(ledger.engine)
    screener.refresh()
    return screener


def export(ledger: Ledger, signer: NoteSigner, out: Path) -> Path:
    create_bundle(ledger.engine, ledger, signer, out, ExportFilters.of(*ALL), OFFICER)
    return out


def test_a_bundle_of_screened_decisions_is_screened_again_by_the_verifier(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    list_seq = seal(ledger)
    decide(ledger, sandbox, screened(ledger, sealed=False))
    out = export(ledger, signer, tmp_path / "b.zip")
    with zipfile.ZipFile(out) as z:
        manifest = orjson.loads(z.read("manifest.json"))
        lists = [n for n in z.namelist() if n.startswith("lists/")]
        records = [orjson.loads(x) for x in z.read("records.jsonl").splitlines()]
    assert manifest["schema"] == "sealtrail.bundle/9" and manifest["case"] is None
    (sha,) = [r["record"]["sha256"] for r in records if r["kind"] == "sanctions_list"]
    assert lists == [f"lists/{sha}"]
    assert [r["kind"] for r in records if r["kind"] == "sanctions_list"] == ["sanctions_list"]
    report = verify_bundle(out, [signer.verifier], sandbox=sandbox)
    assert (report.format, report.lists, report.rescreened, report.not_rescreened) == (9, 1, 5, 0)
    assert report.rederived == 5  # and each made again from its message: features, screening, model, rules
    assert report.decisions == 5
    decisions = [r for r in records if r["kind"] == "decision"]
    assert {x["seq"] for d in decisions for x in d["record"]["screening"]["lists"]} == {list_seq}


def test_a_purged_payment_is_counted_not_screened_again(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    decide(ledger, sandbox, screened(ledger))
    with ledger.engine.connect() as conn:
        (raw,) = conn.exec_driver_sql("SELECT record FROM ledger_entries WHERE kind = 'decision' "
                                      "ORDER BY seq LIMIT 1 OFFSET 1").one()
    purge_payloads(ledger, [orjson.loads(bytes(raw))["payload_sha256"]], "erasure order 7")
    report = verify_bundle(export(ledger, signer, tmp_path / "b.zip"), [signer.verifier], sandbox=sandbox)
    assert (report.rescreened, report.not_rescreened) == (4, 1)


def test_a_pipeline_that_sealed_fewer_hits_than_the_lists_give_is_caught(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    screener = screened(ledger)
    real = screen_module.screen

    def blind(tx: Any, index: Any, floor: int = screen_module.DEFAULT_FLOOR,
              budget: int | None = None) -> screen_module.Screening:
        got = real(tx, index, floor, budget)  # the beneficiary's name never screened: its hits dropped
        return replace(got, hits=tuple(h for h in got.hits if h.where != "beneficiary"))

    monkeypatch.setattr("audit.decide.pipeline.screen", blind)
    decide(ledger, sandbox, screener)
    monkeypatch.undo()
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(export(ledger, signer, tmp_path / "b.zip"), [signer.verifier], sandbox=sandbox)
    (err,) = caught.value.failures
    assert err.kind == "replay.screening" and "found and not recorded" in str(err) and "B-1" in str(err)


def test_a_screened_decision_in_an_older_format_bundle_is_refused(
        ledger: Ledger, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    decide(ledger, sandbox, screened(ledger))
    out = export(ledger, signer, tmp_path / "b.zip")
    from tests.audit.bundle_fixture import members, rewrite

    m = members(out)
    manifest = orjson.loads(m["manifest.json"])
    manifest["schema"] = "sealtrail.bundle/4"
    manifest.pop("case")
    older = rewrite(out, tmp_path / "old.zip",
                    change={"manifest.json": orjson.dumps(manifest)}, resign=signer)
    with pytest.raises(BundleFailed) as caught:
        verify_bundle(older, [signer.verifier], sandbox=sandbox)
    kinds = {e.kind for e in caught.value.failures}
    assert "record.version" in kinds
