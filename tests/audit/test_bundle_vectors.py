"""Bundles written by earlier versions still verify, and their records hash the same way today."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

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


V6 = VECTORS / "bundle-v6"


def _edited(src: Path, dst: Path, name: str, old: bytes, new: bytes) -> Path:
    """A copy of ``src`` with the first ``old`` of member ``name`` made ``new``, nothing else changed
    (the manifest and its signature as they were: the vector's signing key is gone)."""
    with zipfile.ZipFile(src) as z:
        m = {i.filename: z.read(i) for i in z.infolist()}
    assert old in m[name], (name, old)
    m[name] = m[name].replace(old, new, 1)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in m.items():
            z.writestr(n, data)
    return dst


def _failures(path: Path, vector: Path, sandbox: Sandbox) -> list[tuple[str, int | None, str | None]]:
    from audit.errors import BundleError

    key = NoteVerifier.from_vkey((vector / "trusted.vkey").read_text().strip())
    with pytest.raises(BundleError) as info:
        verify_bundle(path, [key], sandbox=sandbox, now=now_fixed)
    return [(e.kind, e.seq, e.file) for e in info.value.failures]


def _independent(path: Path, vector: Path, *, witnesses: bool = False) -> Any:
    from tools import verify_bundle as vb

    keys = [vb.Vkey.parse((vector / "trusted.vkey").read_text().strip())]
    wit = [vb.Vkey.parse(w, vb.COSIGNATURE_KEY) for w in (vector / "witnesses.vkey").read_text().split()] \
        if witnesses else []
    return vb.verify_bundle(str(path), keys, wit)


def test_a_version_6_bundle_screens_every_payment_again_against_the_lists_it_carries(
        sandbox: Sandbox) -> None:
    key = NoteVerifier.from_vkey((V6 / "trusted.vkey").read_text().strip())
    doc = verify_bundle(V6 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed).to_json()
    got = (doc["format"], doc["records"], doc["decisions"], doc["summaries"], doc["replayed"],
           doc["warnings"])
    assert got == (6, 59, 49, 5, 49, [])
    assert (doc["lists"], doc["rescreened"], doc["not_rescreened"]) == (1, 49, 0)
    assert (doc["rederived"], doc["state_records"], doc["compliance"]) == (0, 0, None)  # no state, no facts
    assert doc["completeness"]["proven"] is True and doc["completeness"]["notes"] == []
    manifest = orjson.loads(_member(V6 / "bundle.zip", "manifest.json"))
    assert manifest["schema"] == "sealtrail.bundle/6" and manifest["case"] is None
    assert not {"state", "witnesses", "compliance"} & set(manifest)  # written before formats 7 to 9
    with zipfile.ZipFile(V6 / "bundle.zip") as z:
        (listed,) = [n for n in z.namelist() if n.startswith("lists/")]
        assert hashlib.sha256(z.read(listed)).hexdigest() == listed.removeprefix("lists/")


def test_version_6_records_re_encode_and_state_their_hits_and_the_clearance() -> None:
    records = _member(V6 / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V6 / "bundle.zip", "index.jsonl").splitlines()]
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]
    by_seq = {e["seq"]: orjson.loads(line) for line, e in zip(records, index, strict=True)}
    assert [s for s, r in by_seq.items() if r["kind"] != "decision"] == [1, 2, 3, 10, 17, 19, 20, 22, 61, 63]
    assert [by_seq[s]["kind"] for s in (3, 19, 20)] == ["sanctions_list", "screening.clearance",
                                                        "screening.clearance"]
    decisions = {s: r["record"] for s, r in by_seq.items() if r["kind"] == "decision"}
    assert {d["schema"] for d in decisions.values()} == {"sealtrail.decision/5"}
    assert {(x["name"], x["seq"]) for d in decisions.values() for x in d["screening"]["lists"]} == {
        ("bank-exits", 3)}
    hits = {s: [(h["where"], h["entry_id"], h["basis"]) for h in d["screening"]["hits"]]
            for s, d in decisions.items() if d["screening"]["hits"]}
    assert hits == {13: [("beneficiary", "B-1", "name")], 14: [("agent.account_with.bic", "B-2", "bic")],
                    15: [("remittance", "B-3", "text")], 16: [("beneficiary", "B-1", "name")]}
    assert [decisions[s]["decision"] for s in (12, 13, 14, 15, 16, 21)] == [
        "ALLOW", "HOLD", "BLOCK", "HOLD", "HOLD", "ALLOW"]
    (cleared,) = [(s, c["entry_id"], c["clearance_seq"]) for s, d in decisions.items()
                  for c in d["screening"].get("cleared", [])]
    assert cleared == (21, "B-1", 19)


def test_the_independent_verifier_proves_the_version_6_vector(tmp_path: Path) -> None:
    report = _independent(V6 / "bundle.zip", V6)
    assert report.verified, [f.text() for f in report.failures]
    assert (report.format, report.pinned, report.counts["records"]) == (6, True, 59)
    edited = _edited(V6 / "bundle.zip", tmp_path / "e.zip", "records.jsonl",
                     b'"entry_id":"B-2"', b'"entry_id":"B-3"')
    report = _independent(edited, V6)
    failed = {(f.check, f.file) for f in report.failures}
    assert {("files", "records.jsonl"), ("chain", "index.jsonl")} <= failed
    assert 14 in {f.seq for f in report.failures if f.check == "chain"}


def test_an_edited_screening_hit_of_the_version_6_vector_fails_naming_its_seq(
        sandbox: Sandbox, tmp_path: Path) -> None:
    # the BLOCK's BIC hit said to be of another entry: its leaf, its chain link and the screening again
    edited = _edited(V6 / "bundle.zip", tmp_path / "e.zip", "records.jsonl",
                     b'"entry_id":"B-2"', b'"entry_id":"B-3"')
    errs = _failures(edited, V6, sandbox)
    assert {("leaf_hash", 14, "records.jsonl"), ("chain_hash", 14, "index.jsonl"),
            ("file.hash", None, "records.jsonl")} <= set(errs)
    assert ("replay.screening", 14) in {(k, s) for k, s, _ in errs}


def test_an_edited_list_of_the_version_6_vector_fails_naming_the_list(sandbox: Sandbox,
                                                                      tmp_path: Path) -> None:
    with zipfile.ZipFile(V6 / "bundle.zip") as z:
        (listed,) = [n for n in z.namelist() if n.startswith("lists/")]
    # the listed bank's BIC changed in the list's bytes: the payment at 14 would no longer match it
    edited = _edited(V6 / "bundle.zip", tmp_path / "e.zip", listed, b"TEHRIRTH", b"TEHRIRTX")
    errs = _failures(edited, V6, sandbox)
    assert ("file.hash", None, listed) in errs
    assert ("screening.list", 3) in {(k, s) for k, s, _ in errs}  # the sealed list record's seq


V9_CASE = VECTORS / "bundle-v9-case"
STR_SHA = "cc45cdcb2fbbefe8de773050bee6f761aca9517ac889b84c4b13a46d00c131ed"


def test_a_version_9_case_bundle_reproduces_its_case_and_recomputes_its_facts(sandbox: Sandbox) -> None:
    from ledger.cosignature import CosignerVerifier

    key = NoteVerifier.from_vkey((V9_CASE / "trusted.vkey").read_text().strip())
    witnesses = [CosignerVerifier.from_vkey(v) for v in (V9_CASE / "witnesses.vkey").read_text().split()]
    report = verify_bundle(V9_CASE / "bundle.zip", [key], sandbox=sandbox, now=now_fixed,
                           witness_keys=witnesses, min_witnesses=1)
    doc = report.to_json()
    got = (doc["format"], doc["records"], doc["decisions"], doc["case_events"], doc["policies"], doc["holds"],
           doc["annotations"], doc["replayed"], doc["payloads_present"], doc["witnesses_pinned"])
    assert got == (9, 16, 3, 8, 1, 1, 1, 3, 4, 1)
    case = doc["case"]
    assert (case["case_id"], case["reproduced"], case["events"], case["withheld"]) == (16, True, 8, 3)
    assert case["search"] == {"from_seq": 16, "to_seq": 67}
    s = case["state"]
    assert (s["disposition"], s["open_alerts"], s["reports"], s["links"], s["last_event_seq"]) == (
        "REPORT_FILED", 0, 1, "5", 66)
    assert s["last_report"] == STR_SHA
    assert [(h["seq"], h["what"], h["applied"]) for h in case["history"]] == [
        (16, "alert opened", True), (25, "alert opened", True), (28, "deadline policy", True),
        (29, "alert opened", True), (56, "assign", True), (57, "release", True), (58, "release", True),
        (59, "reject", False), (60, "link", True), (61, "link", True), (63, "annotation", True),
        (64, "file_report", True), (66, "close", True)]
    assert [(r["seq"], r["sha256"], r["payload"], r["holds"]) for r in case["reports"]] == [
        (64, STR_SHA, "present, 132 bytes", ["STR-16"])]
    assert {o["outcome"] for o in case["outcomes"]} == {"RELEASED"} and case["notes"] == []
    assert doc["completeness"]["proven"] is False  # a case is proven as stated in the docs, not by summaries
    # format 9: the facts of the case's period, recomputed by the verifier, equal to those carried
    manifest = orjson.loads(_member(V9_CASE / "bundle.zip", "manifest.json"))
    assert manifest["schema"] == "sealtrail.bundle/9" and manifest["case"]["case_id"] == 16
    assert (manifest["filters"], manifest["compliance"]["scope"]) == (None, "case")
    carried = orjson.loads(_member(V9_CASE / "bundle.zip", "compliance.json"))
    facts = report.compliance
    assert facts is not None and facts == carried["facts"] and carried["scope"] == "case"
    assert facts["period"] == manifest["compliance"]["period"]
    assert (facts["decisions"]["total"], facts["refusals"]) == (3, {"total": 0, "by_kind": {}})
    assert [(h["hold_id"], h["seq_from"], h["seq_to"]) for h in facts["legal_holds"]["in_force"]] == [
        ("STR-16", 64, 64)]
    assert [k["vkey"] for k in facts["keys"]["history"]] == [key.vkey]


def test_version_9_case_records_and_history_records_re_encode_and_no_other_case_is_disclosed() -> None:
    records = _member(V9_CASE / "bundle.zip", "records.jsonl").splitlines()
    index = [orjson.loads(x) for x in _member(V9_CASE / "bundle.zip", "index.jsonl").splitlines()]
    assert [e["kind"] for e in index].count("case_event") == 8
    for line, entry in zip(records, index, strict=True):
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line)), entry["seq"]
        assert hashlib.sha256(b"\x00" + line).hexdigest() == entry["leaf_hash"], entry["seq"]
    history = _member(V9_CASE / "bundle.zip", "compliance/records.jsonl").splitlines()
    proofs = orjson.loads(_member(V9_CASE / "bundle.zip", "compliance/proofs.json"))["entries"]
    assert [(p["seq"], orjson.loads(x)["kind"]) for x, p in zip(history, proofs, strict=True)] == [
        (0, "ledger.genesis"), (1, "ruleset.bootstrapped"), (65, "ledger.legal_hold")]
    for line in history:
        assert canonical_bytes(orjson.loads(line)) == line == rfc8785.dumps(orjson.loads(line))
    # the hold at 65 is carried twice, the same bytes: once in the case's records, once as history
    assert records[[e["seq"] for e in index].index(65)] == history[2]
    with zipfile.ZipFile(V9_CASE / "bundle.zip") as z:
        assert not [n for n in z.namelist() if b"other case:" in z.read(n)]


def test_the_independent_verifier_proves_the_version_9_case_vector(tmp_path: Path) -> None:
    report = _independent(V9_CASE / "bundle.zip", V9_CASE, witnesses=True)
    assert report.verified, [f.text() for f in report.failures]
    assert (report.format, report.counts["records"], report.counts["withheld"]) == (9, 16, 3)
    assert report.counts["compliance_records"] == 3 and len(report.witnesses) == 1
    edited = _edited(V9_CASE / "bundle.zip", tmp_path / "e.zip", "compliance/records.jsonl", b"STR-16",
                     b"STR-17")
    got = {(f.check, f.file, f.seq) for f in _independent(edited, V9_CASE).failures}
    assert ("compliance", "compliance/records.jsonl", 65) in got


def test_an_edited_report_hash_in_the_case_history_fails_naming_it(sandbox: Sandbox, tmp_path: Path) -> None:
    forged = b"d" + STR_SHA.encode()[1:]
    # in case/case.json: the case as stated no longer the case the records give
    stated = _edited(V9_CASE / "bundle.zip", tmp_path / "case.zip", "case/case.json", STR_SHA.encode(),
                     forged)
    errs = _failures(stated, V9_CASE, sandbox)
    assert ("file.hash", None, "case/case.json") in errs and ("case.state", 16, "case/case.json") in errs
    # in the sealed file_report event (seq 64): its leaf, its chain link and its payload's hash
    sealed = _edited(V9_CASE / "bundle.zip", tmp_path / "rec.zip", "records.jsonl", STR_SHA.encode(), forged)
    errs = _failures(sealed, V9_CASE, sandbox)
    assert {("leaf_hash", 64, "records.jsonl"), ("chain_hash", 64, "index.jsonl")} <= set(errs)
    # the report's bytes changed: they no longer hash to what the event seals
    swapped = _edited(V9_CASE / "bundle.zip", tmp_path / "pay.zip", "payloads.jsonl", b"structuring",
                      b"structurinG")
    assert ("payload.hash", 64, "payloads.jsonl") in _failures(swapped, V9_CASE, sandbox)


def test_an_edited_history_record_of_the_case_bundle_fails_its_proof(sandbox: Sandbox,
                                                                     tmp_path: Path) -> None:
    edited = _edited(V9_CASE / "bundle.zip", tmp_path / "e.zip", "compliance/records.jsonl", b"STR-16",
                     b"STR-17")
    errs = _failures(edited, V9_CASE, sandbox)
    assert ("compliance.proof", 65, "compliance/records.jsonl") in errs
