"""Compliance facts (issue 23): ``sealtrail compliance report`` on a real ledger, the same facts in a
format-9 bundle, recomputed by ``export verify``, which fails when the facts or the page are edited."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

import migrations
from api.cli import app
from audit.bundle.verify import verify_bundle
from audit.compliance.facts import ComplianceFactsError, Period, compute_facts, covering, first_difference
from audit.decide.refusal_seal import seal_refusal
from audit.errors import BundleError
from audit.export.create import ExportFilters, create_bundle
from audit.governance.service import Governance
from ledger.cosign import WitnessEndpoint, collect
from ledger.cosignature import Cosigner
from ledger.database import initialise, open_engine, open_ledger
from ledger.jcs import canonical_bytes
from ledger.keys import FileKeyStore, load_signer, revoke_key, rotate_key_file
from ledger.retention import place_hold
from ledger.witness import LogPolicy, Witness
from tests.audit.bundle_fixture import OFFICER, members, now_fixed, rewrite
from tests.audit.test_export import governed_pipeline
from tests.audit.test_governance import APPROVER, pack
from tests.audit.test_governance import OFFICER as PROPOSER
from tests.audit.test_pipeline import submissions
from tests.audit.test_refusals import MT940, refused
from tests.conftest import ORIGIN, Db
from wasm_rules import Sandbox

START, END = "2000-01-01T00:00:00.000000Z", "2100-01-01T00:00:00.000000Z"


@pytest.fixture
def world(db: Db, sandbox: Sandbox, tmp_path: Path) -> dict[str, Any]:
    key_file = tmp_path / "keys" / "signing.key"
    engine = db.engine()
    migrations.upgrade(engine)
    initialise(engine, key_file, ORIGIN).ledger.engine.dispose()
    ledger = open_ledger(open_engine(db.url), key_file)
    pipe = governed_pipeline(ledger, sandbox)
    pipe.decide(submissions(8, seed=5))
    seal_refusal(ledger, refused(MT940, "mt", True, now=datetime.now(UTC)))
    gov = Governance(ledger)
    proposed = gov.propose(pack("2027.9.0"), PROPOSER)
    gov.approve(proposed.id, APPROVER)
    place_hold(ledger, "order-7", 1, 4, "court order 7")
    old = load_signer(key_file)
    ledger.checkpoint()
    rotation = rotate_key_file(ledger, key_file)
    revoke_key(ledger, FileKeyStore(key_file), old.verifier.vkey, "key file copied by an intruder")
    pipe.decide(submissions(4, seed=6))
    signer = load_signer(key_file)
    ledger.checkpoint()
    witness = Witness(Cosigner.generate("w1.example/witness"), [LogPolicy(ledger.origin, (signer.verifier,))],
                      tmp_path / "w1.db")

    def cosign() -> None:
        collect(ledger.engine, [WitnessEndpoint("https://w1", witness.cosigner.verifier)], witness.post)

    out = tmp_path / "b.zip"
    create_bundle(ledger.engine, ledger, signer, out, ExportFilters.of(START, END), OFFICER,
                  now=datetime.now(UTC), cosign=cosign, retention_days=3653)
    decisions = orjson.loads(members(out)["manifest.json"])["counts"]["decisions"]
    return {"db": db, "keys": key_file.parent, "bundle": out, "signer": signer, "old": old,
            "rotation": rotation, "proposed": proposed.id, "decisions": decisions}


def _cli(world: dict[str, Any], *args: str) -> Any:
    res = CliRunner().invoke(app, ["compliance", "report", "--from", START, "--to", END, "--db",
                                   world["db"].url, "--keys", str(world["keys"]), *args])
    assert res.exit_code == 0, res.stdout + res.stderr
    return res


def _check_facts(facts: dict[str, Any], world: dict[str, Any]) -> None:
    assert facts["decisions"]["total"] == world["decisions"] > 0
    assert facts["refusals"]["by_kind"] == {"message_refused": 1}
    assert facts["decisions"]["fail_safe"]["total"] == 0
    keys = facts["keys"]
    old, new = world["old"].verifier.vkey, world["signer"].verifier.vkey
    assert [k["vkey"] for k in keys["history"]] == [old, new]
    assert [r["new_vkey"] for r in keys["rotations"]] == [world["signer"].verifier.vkey]
    assert [(r["revoked_vkey"], r["reason"]) for r in keys["revocations"]] == [
        (world["old"].verifier.vkey, "key file copied by an intruder")]
    (hold,) = facts["legal_holds"]["in_force"]
    assert (hold["hold_id"], hold["seq_from"], hold["seq_to"]) == ("order-7", 1, 4)
    assert hold["released_seq"] is None
    approved = {v["id"]: v for v in facts["rulesets"]}[world["proposed"]]
    assert approved["proposed"]["subject"] == PROPOSER.subject
    assert approved["approved"]["subject"] == APPROVER.subject and approved["four_eyes"]
    assert approved["approved"]["seq"] > approved["proposed"]["seq"]


@pytest.mark.requirement("SR11-7-change-control")
def test_the_command_reports_the_period_s_facts(world: dict[str, Any]) -> None:
    doc = json.loads(_cli(world, "--json").stdout)
    assert doc["ok"] is True and doc["period"] == {"from": START, "to": END}
    _check_facts(doc["facts"], world)
    stated = doc["stated"]
    assert stated["retention"]["payload_retention_days"] > 0  # the setting, stated
    assert stated["checkpoints"]["signed_in_period"] >= 2 and stated["checkpoints"]["newest"] is not None
    assert list(stated["witnesses"]["cosigned_in_period"]) != []
    text = _cli(world).stdout
    assert "order-7" in text and "stated, not proven" in text and "approved by" in text


@pytest.mark.requirement("SEC-17a4f-download")
def test_the_bundle_carries_the_same_facts_and_the_verifier_recomputes_them(world: dict[str, Any],
                                                                            sandbox: Sandbox) -> None:
    m = members(world["bundle"])
    manifest = orjson.loads(m["manifest.json"])
    assert manifest["schema"] == "sealtrail.bundle/9" and manifest["compliance"]["scope"] == "window"
    carried = orjson.loads(m["compliance.json"])
    _check_facts(carried["facts"], world)
    assert carried["stated"]["retention"] == {"payload_retention_days": 3653}
    report = verify_bundle(world["bundle"], [world["signer"].verifier], sandbox=sandbox, now=now_fixed)
    assert report.format == 9 and report.compliance == carried["facts"]
    page = m["report.html"].decode()
    assert 'data-compliance="1"' in page and "Stated, not proven" in page
    # the command and the bundle compute the same thing (the bundle's period, from the same records)
    doc = json.loads(_cli(world, "--json").stdout)
    assert doc["facts"] == carried["facts"]


def test_edited_facts_fail_naming_the_first_that_differs(world: dict[str, Any], sandbox: Sandbox,
                                                         tmp_path: Path) -> None:
    m = members(world["bundle"])
    doc = orjson.loads(m["compliance.json"])
    doc["facts"]["refusals"]["total"] = 0
    doc["facts"]["legal_holds"]["in_force"] = []
    edited = rewrite(world["bundle"], tmp_path / "edited.zip",
                     change={"compliance.json": canonical_bytes(doc)}, resign=world["signer"])
    with pytest.raises(BundleError) as failed:
        verify_bundle(edited, [world["signer"].verifier], sandbox=sandbox, now=now_fixed)
    (fail,) = [f for f in failed.value.failures if f.kind == "compliance.facts"]
    assert "legal_holds.in_force" in fail.detail and fail.file == "compliance.json"
    # the page edited, the file left alone
    page = m["report.html"].decode().replace('data-fact="refusals.total">1<', 'data-fact="refusals.total">0<')
    assert page != m["report.html"].decode()
    shown = rewrite(world["bundle"], tmp_path / "page.zip", change={"report.html": page.encode()},
                    resign=world["signer"])
    with pytest.raises(BundleError) as failed:
        verify_bundle(shown, [world["signer"].verifier], sandbox=sandbox, now=now_fixed)
    assert [f.kind for f in failed.value.failures] == ["compliance.report"]
    # a history record dropped: its proofs no longer line up
    lines = m["compliance/records.jsonl"].split(b"\n")
    dropped = rewrite(world["bundle"], tmp_path / "dropped.zip",
                      change={"compliance/records.jsonl": b"\n".join(lines[1:])}, resign=world["signer"])
    with pytest.raises(BundleError) as failed:
        verify_bundle(dropped, [world["signer"].verifier], sandbox=sandbox, now=now_fixed)
    assert "compliance.records" in [f.kind for f in failed.value.failures]


def _env(kind: str, at: str, record: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "recorded_at": at, "record": record}


def test_the_pure_function_counts_only_its_period_and_reads_history_before_it() -> None:
    period = Period("2026-01-02T00:00:00.000000Z", "2026-01-03T00:00:00.000000Z")
    before, inside = "2026-01-01T00:00:00.000000Z", "2026-01-02T12:00:00.000000Z"
    after = "2026-01-04T00:00:00.000000Z"
    hold = {"action": "place", "hold_id": "h", "seq_from": 0, "seq_to": 9, "reason": "r"}
    fail_safe = {"decision": "HOLD", "fail_safe": "DEADLINE_EXCEEDED"}
    facts = compute_facts(period, [
        (0, _env("ledger.genesis", before, {"vkey": "k0"})),
        (1, _env("ledger.legal_hold", before, hold)),
        (2, _env("decision", before, fail_safe)),
        (3, _env("decision", inside, fail_safe)),
        (4, _env("decision", inside, {"decision": "ALLOW", "fail_safe": None})),
        (5, _env("ledger.legal_hold", after, {"action": "release", "hold_id": "h", "reason": "r"})),
        (6, _env("decision", after, fail_safe)),
    ])
    assert facts["decisions"]["total"] == 2
    assert facts["decisions"]["fail_safe"] == {"total": 1, "by_reason": {"DEADLINE_EXCEEDED": 1}}
    assert [h["hold_id"] for h in facts["legal_holds"]["in_force"]] == ["h"]
    assert facts["legal_holds"]["in_force"][0]["released_seq"] is None  # released after the period
    assert facts["keys"]["active_at_end"] == "k0"
    with pytest.raises(ComplianceFactsError, match="entry 7"):
        compute_facts(period, [(7, _env("ledger.legal_hold", before, {"action": "place"}))])
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "a[1].b"
    assert first_difference({"a": 1}, {"a": 1}) is None


def test_a_case_s_period_holds_its_first_and_last_instant_and_refuses_what_is_no_recorded_at() -> None:
    assert covering("2026-12-31T23:59:59.999999Z", "2026-12-31T23:59:59.999999Z") == Period(
        "2026-12-31T23:59:59.999999Z", "2027-01-01T00:00:00.000000Z")
    p = covering("0999-01-01T00:00:00.000000Z", "2026-02-28T10:00:00.000001Z")
    assert p.end == "2026-02-28T10:00:00.000002Z" and "0999-01-01T00:00:00.000000Z" in p
    assert "2026-02-28T10:00:00.000001Z" in p and "2026-02-28T10:00:00.000002Z" not in p
    for first, last in [("2026-01-02T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z"),  # reversed
                        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000000Z"),  # not microseconds
                        ("2026-01-01T00:00:00.000000Z", "2026-02-30T00:00:00.000000Z"),  # no such day
                        ("2026-01-01T00:00:00.000000+00:00", "2026-01-01T00:00:00.000000Z"),
                        ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z")]:  # no instant after
        with pytest.raises(ValueError):
            covering(first, last)


def test_the_command_refuses_a_period_that_ends_before_it_starts(world: dict[str, Any]) -> None:
    res = CliRunner().invoke(app, ["compliance", "report", "--from", END, "--to", START, "--db",
                                   world["db"].url, "--keys", str(world["keys"]), "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["ok"] is False
