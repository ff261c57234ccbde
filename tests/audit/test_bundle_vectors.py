"""Bundles written by earlier versions still verify, and their records hash the same way today."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import orjson
import pytest
import rfc8785

from audit.bundle.verify import verify_bundle
from ledger.jcs import canonical_bytes
from ledger.note import NoteVerifier
from tests.audit.bundle_fixture import now_fixed
from wasm_rules import Sandbox

VECTORS = Path(__file__).parents[1] / "vectors"
V1 = VECTORS / "bundle-v1"
V2 = VECTORS / "bundle-v2"
V3 = VECTORS / "bundle-v3"
V4 = VECTORS / "bundle-v4"
V5 = VECTORS / "bundle-v5"


def _member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read(name)


def test_a_version_1_bundle_verifies_with_its_pinned_key(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V1 / "trusted.vkey").read_text().strip())
    report = verify_bundle(V1 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed)
    doc = report.to_json()
    assert (doc["pinned"], doc["warnings"]) == (True, [])
    assert (doc["records"], doc["decisions"], doc["replayed"], doc["rescored"]) == (47, 43, 43, 43)
    assert (doc["annotations"], doc["payloads_present"], doc["payloads_purged"]) == (1, 42, 1)
    assert doc["format"] == 1
    assert doc["completeness"]["proven"] is False  # format 1 carries no summaries: said, not failed
    assert "completeness not proven" in doc["completeness"]["notes"][0]


def test_a_version_2_bundle_verifies_and_proves_its_window_complete(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V2 / "trusted.vkey").read_text().strip())
    report = verify_bundle(V2 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed)
    doc = report.to_json()
    got = (doc["format"], doc["records"], doc["decisions"], doc["summaries"], doc["replayed"])
    assert got == (2, 19, 12, 3, 12)
    c = doc["completeness"]
    assert (c["proven"], c["summaries"], c["checked"], c["notes"]) == (True, 3, 12, [])
    manifest = orjson.loads(_member(V2 / "bundle.zip", "manifest.json"))
    assert (c["from"], c["until"]) == (manifest["filters"]["from"], manifest["filters"]["to"])


def test_version_2_records_re_encode_to_the_sealed_bytes_and_leaf_hashes() -> None:
    records = _member(V2 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V2 / "bundle.zip", "index.jsonl").splitlines()]
    assert [e["kind"] for e in index].count("decision.summary") == 3
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]


def test_a_version_1_bundle_fails_under_another_key(sandbox: Sandbox) -> None:
    from audit.errors import BundleError
    from ledger import NoteSigner

    other = NoteSigner.generate("test.sealtrail/log").verifier
    with pytest.raises(BundleError):
        verify_bundle(V1 / "bundle.zip", [other], sandbox=sandbox, now=now_fixed)


def test_version_1_records_re_encode_to_the_sealed_bytes_and_leaf_hashes() -> None:
    records = _member(V1 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V1 / "bundle.zip", "index.jsonl").splitlines()]
    assert len(records) == len(index) == 47
    for line, entry in zip(records, index, strict=True):
        value = orjson.loads(line)
        assert canonical_bytes(value) == line, entry["seq"]
        assert rfc8785.dumps(value) == line, entry["seq"]  # the independent reference agrees
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]


def test_a_version_3_bundle_verifies_and_replays_its_refusals(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V3 / "trusted.vkey").read_text().strip())
    doc = verify_bundle(V3 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed).to_json()
    got = (doc["format"], doc["decisions"], doc["summaries"], doc["refusals"], doc["refusals_replayed"])
    assert got == (3, 12, 3, 4, 4)
    assert doc["completeness"]["proven"] is True and doc["completeness"]["notes"] == []
    assert doc["completeness"]["refusals_proven"] is None  # format 3 does not prove its refusals complete


def test_version_3_records_re_encode_to_the_sealed_bytes_and_leaf_hashes() -> None:
    records = _member(V3 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V3 / "bundle.zip", "index.jsonl").splitlines()]
    assert [e["kind"] for e in index].count("refusal") == 4
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]


def test_a_version_4_bundle_proves_its_refusals_complete_and_replays_them(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V4 / "trusted.vkey").read_text().strip())
    doc = verify_bundle(V4 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed).to_json()
    got = (doc["format"], doc["decisions"], doc["summaries"], doc["refusals"], doc["refusals_replayed"])
    assert got == (4, 12, 9, 6, 4)
    c = doc["completeness"]
    assert (c["proven"], c["refusals_proven"], c["checked"], c["refusals_checked"], c["notes"]) == (
        True, True, 12, 6, [])


def test_version_4_records_re_encode_to_the_sealed_bytes_and_leaf_hashes() -> None:
    records = _member(V4 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V4 / "bundle.zip", "index.jsonl").splitlines()]
    kinds = [e["kind"] for e in index]
    assert (kinds.count("refusal"), kinds.count("decision.summary")) == (6, 9)
    summaries = [orjson.loads(line)["record"] for line, e in zip(records, index, strict=True)
                 if e["kind"] == "decision.summary"]
    assert {s["schema"] for s in summaries} == {"sealtrail.decision.summary/2"}
    assert sum(1 for s in summaries for e in s["entries"] if "refusal" in e) == 6
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]


def test_a_version_5_case_bundle_reproduces_its_case_and_history(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V5 / "trusted.vkey").read_text().strip())
    doc = verify_bundle(V5 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed).to_json()
    got = (doc["format"], doc["records"], doc["decisions"], doc["case_events"], doc["policies"], doc["holds"],
           doc["annotations"], doc["replayed"])
    assert got == (5, 15, 2, 8, 1, 1, 1, 2)
    case = doc["case"]
    assert (case["case_id"], case["reproduced"], case["events"], case["withheld"]) == (297, True, 8, 3)
    assert case["search"] == {"from_seq": 297, "to_seq": 456}
    s = case["state"]
    assert (s["disposition"], s["open_alerts"], s["reports"], s["links"], s["last_event_seq"]) == (
        "REPORT_FILED", 0, 1, "14", 455)
    assert [(h["seq"], h["what"], h["applied"]) for h in case["history"]] == [
        (205, "deadline policy", True), (297, "alert opened", True), (324, "alert opened", True),
        (445, "assign", True), (446, "release", True), (447, "release", True), (448, "reject", False),
        (449, "link", True), (450, "link", True), (452, "annotation", True), (453, "file_report", True),
        (455, "close", True)]
    assert [(r["seq"], r["sha256"], r["payload"], r["holds"]) for r in case["reports"]] == [
        (453, "cc45cdcb2fbbefe8de773050bee6f761aca9517ac889b84c4b13a46d00c131ed", "present, 132 bytes",
         ["STR-297"])]
    assert {o["outcome"] for o in case["outcomes"]} == {"RELEASED"} and case["notes"] == []
    assert doc["completeness"]["proven"] is False  # a case is proven as stated in the docs, not by summaries


def test_version_5_records_re_encode_and_no_other_cases_rationale_is_in_it() -> None:
    records = _member(V5 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V5 / "bundle.zip", "index.jsonl").splitlines()]
    assert [e["kind"] for e in index].count("case_event") == 8
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]
    with zipfile.ZipFile(V5 / "bundle.zip") as z:
        assert not [n for n in z.namelist() if b"other case:" in z.read(n)]


V7 = VECTORS / "bundle-v7"


def test_a_version_7_bundle_re_derives_every_decision_from_its_message(sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V7 / "trusted.vkey").read_text().strip())
    doc = verify_bundle(V7 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed).to_json()
    assert (doc["format"], doc["decisions"], doc["rederived"], doc["not_rederived"]) == (7, 49, 49, {})
    assert doc["completeness"]["proven"] and doc["state_records"] > 0


def test_version_7_records_and_state_lines_re_encode_to_the_sealed_bytes_and_leaf_hashes() -> None:
    for rec, idx in (("records.jsonl", "index.jsonl"), ("state/records.jsonl", "state/index.jsonl")):
        lines = _member(V7 / "bundle.zip", rec).splitlines()
        index = [orjson.loads(x) for x in _member(V7 / "bundle.zip", idx).splitlines()]
        for line, entry in zip(lines, index, strict=True):
            doc = orjson.loads(line)
            assert canonical_bytes(doc) == line == rfc8785.dumps(doc), entry["seq"]
            assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]
    kinds = [orjson.loads(x)["kind"] for x in _member(V7 / "bundle.zip", "state/index.jsonl").splitlines()]
    assert kinds == ["decision.summary", "state.delta", "state.delta", "state.delta", "state.delta"]


V8 = VECTORS / "bundle-v8"


def test_a_version_8_bundle_carries_two_witnesses_cosignatures(sandbox: Sandbox) -> None:
    from audit.errors import BundleError
    from ledger.cosignature import CosignerVerifier

    key = NoteVerifier.from_vkey((V8 / "trusted.vkey").read_text().strip())
    witnesses = [CosignerVerifier.from_vkey(v) for v in (V8 / "witnesses.vkey").read_text().split()]
    report = verify_bundle(V8 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed, witness_keys=witnesses,
                           min_witnesses=2)
    doc = report.to_json()
    assert (doc["format"], doc["witnesses_pinned"], len(doc["witnesses"])) == (8, 2, 2)
    assert doc["decisions"] == doc["rederived"] == 49  # its state travels too, as in format 7
    with pytest.raises(BundleError, match="witness"):
        verify_bundle(V8 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed, witness_keys=witnesses[:1],
                      min_witnesses=2)


V9 = VECTORS / "bundle-v9"


def test_a_version_9_bundle_s_compliance_facts_are_recomputed(sandbox: Sandbox) -> None:
    from ledger.cosignature import CosignerVerifier

    key = NoteVerifier.from_vkey((V9 / "trusted.vkey").read_text().strip())
    witnesses = [CosignerVerifier.from_vkey(v) for v in (V9 / "witnesses.vkey").read_text().split()]
    report = verify_bundle(V9 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed, witness_keys=witnesses,
                           min_witnesses=1)
    assert (report.format, report.witnesses_pinned, report.decisions) == (9, 1, 43)
    facts = report.compliance
    assert facts is not None and facts == orjson.loads(_member(V9 / "bundle.zip", "compliance.json"))["facts"]
    assert (facts["decisions"]["total"], facts["refusals"]["by_kind"]) == (43, {"message_refused": 1})
    assert [h["hold_id"] for h in facts["legal_holds"]["in_force"]] == ["order-7"]
    assert [v["four_eyes"] for v in facts["rulesets"]] == [False, True]  # the bootstrapped pack, the approved
