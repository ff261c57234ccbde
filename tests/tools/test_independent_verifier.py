"""tools/verify_bundle.py, the verifier an examiner can read: published vectors for its Merkle and
signed-note code, real bundles of every format passing with a pinned key, the main verifier's
tampered bundles failing (exit 1, naming the file and seq), witness cosignatures, and no import
outside the standard library and ``cryptography``."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.bundle.verify import verify_bundle as main_verify_bundle
from audit.errors import BundleError
from ledger import NoteSigner
from ledger.checkpoint import Checkpoint
from ledger.jcs import canonical_bytes
from ledger.note import sign_note
from tests.audit.bundle_fixture import Source, created_bundle, joined, lines, make_source, members, rewrite
from tests.audit.screening.test_screening_bundle import decide, export, screened
from tests.audit.test_verify_bundle import _flip_score, decision_lines
from tests.conftest import ORIGIN, Db, make_ledger
from tools import verify_bundle as vb
from wasm_rules import Sandbox

ROOT = Path(__file__).parents[2]
TOOL = ROOT / "tools" / "verify_bundle.py"
VECTORS = ROOT / "tests" / "vectors"


# --- RFC 6962 / RFC 9162 Merkle code against published vectors ----------------------------------
# tests/vectors/merkle_rfc6962.json holds the 8-leaf example of transparency-dev/merkle,
# proof/verify_test.go (`leaves`, `roots`, `inclusionProofs`, `consistencyProofs`; the same tree as
# certificate-transparency-go's merkletree tests): roots of sizes 1 to 8, inclusion proofs (`leaf`
# 1-based there) and consistency proofs. Read there and compared value by value with that file.

MERKLE = json.loads((VECTORS / "merkle_rfc6962.json").read_text())
LEAVES = [vb.leaf_hash(bytes.fromhex(x)) for x in MERKLE["leaves_hex"]]
ROOTS = [bytes.fromhex(x) for x in MERKLE["roots_hex"]]


def _known(size: int) -> dict[tuple[int, int], bytes]:
    known, missing = vb.subtree_roots(size, dict(enumerate(LEAVES[:size])), {})
    assert missing == []
    return known


@pytest.mark.parametrize("size", range(1, 9))
def test_roots_of_the_published_8_leaf_tree(size: int) -> None:
    assert _known(size)[(0, size)] == ROOTS[size - 1]


@pytest.mark.parametrize("case", MERKLE["inclusion"], ids=lambda c: f"leaf{c['leaf']}-size{c['size']}")
def test_published_inclusion_proofs_verify_and_are_the_paths_the_multiproof_walk_reads(case: dict) -> None:  # type: ignore[type-arg]
    index, size = case["leaf"] - 1, case["size"]
    proof, root, leaf = [bytes.fromhex(h) for h in case["proof"]], ROOTS[size - 1], LEAVES[index]
    assert vb.verify_inclusion(index, size, leaf, proof, root)
    assert vb.audit_path(index, size, _known(size)) == proof
    wrong = [(index ^ 1, size, leaf, proof, root), (index, size * 2, leaf, proof, root),
             (index, size // 2, leaf, proof, root),
             (index, size, LEAVES[(index + 1) % 8], proof, root), (index, size, leaf, [*proof, root], root),
             (index, size, leaf, proof, ROOTS[(size % 8)]), (size, size, leaf, proof, root)]
    wrong += [(index, size, leaf, [*proof[:i], bytes([proof[i][0] ^ 8]) + proof[i][1:], *proof[i + 1:]], root)
              for i in range(len(proof))]
    for args in wrong:
        assert not vb.verify_inclusion(*args), args


@pytest.mark.parametrize("case", MERKLE["consistency"], ids=lambda c: f"{c['size1']}-{c['size2']}")
def test_published_consistency_proofs_verify(case: dict) -> None:  # type: ignore[type-arg]
    s1, s2, proof = case["size1"], case["size2"], [bytes.fromhex(h) for h in case["proof"]]
    r1, r2 = ROOTS[s1 - 1], ROOTS[s2 - 1]
    assert vb.verify_consistency(s1, s2, proof, r1, r2)
    if proof:
        for args in [(s1 + 1, s2, proof, r1, r2), (s1, s2, proof, r2, r1), (s1, s2, [], r1, r2),
                     (s1, s2, proof[:-1], r1, r2), (s1, s2, [*proof, r1], r1, r2),
                     (s1, s2, [bytes([proof[0][0] ^ 16]) + proof[0][1:], *proof[1:]], r1, r2)]:
            assert not vb.verify_consistency(*args), args


def test_consistency_edge_cases_of_the_published_suite() -> None:
    a, b = ROOTS[0], ROOTS[1]
    assert vb.verify_consistency(0, 1, [], a, b)  # the empty tree is consistent with anything
    assert not vb.verify_consistency(1, 0, [], a, b)  # time travel
    assert not vb.verify_consistency(1, 2, [], a, b)  # an empty proof
    assert not vb.verify_consistency(1, 1, [], a, b)  # equal sizes, other roots


def test_the_multiproof_walk_names_a_missing_subtree_and_uses_given_ones() -> None:
    known = _known(8)
    frontier = {(0, 4): known[(0, 4)], (4, 6): known[(4, 6)], (7, 8): known[(7, 8)]}
    got, missing = vb.subtree_roots(8, {6: LEAVES[6]}, frontier)
    assert missing == [] and got[(0, 8)] == ROOTS[7]
    _, missing = vb.subtree_roots(8, {6: LEAVES[6]}, {(0, 4): known[(0, 4)]})
    assert missing == [(4, 6), (7, 8)]


# --- C2SP signed notes and cosignatures -----------------------------------------------------------

NOTES = json.loads((VECTORS / "signed_note.json").read_text())


@pytest.mark.parametrize("name", ["go_sumdb_note", "c2sp_spec_example"])
def test_published_signed_notes_open_with_their_key(name: str) -> None:
    v = NOTES[name]
    key = vb.Vkey.parse(v["vkey"])
    text, good, others = vb.open_note(v["note"], [key])
    assert (text, good, others) == (v["text"], [key], [])
    with pytest.raises(vb.VerifyError, match="does not verify"):
        vb.open_note(v["note"].replace("is", "IS", 1).replace(v["text"], v["text"].upper()), [key])
    other = NOTES["c2sp_spec_example" if name == "go_sumdb_note" else "go_sumdb_note"]
    with pytest.raises(vb.VerifyError, match="no signature by a trusted key"):
        vb.open_note(v["note"], [vb.Vkey.parse(other["vkey"])])


def test_a_forged_signature_under_a_known_key_name_fails() -> None:
    v = NOTES["go_sumdb_note"]
    body, _, sig = v["note"].rpartition("\u2014 PeterNeumann ")
    blob = base64.b64decode(sig)
    flipped = base64.b64encode(blob[:-1] + bytes([blob[-1] ^ 1])).decode()
    forged = f"{body}\u2014 PeterNeumann {flipped}\n"
    with pytest.raises(vb.VerifyError, match="does not verify"):
        vb.open_note(forged, [vb.Vkey.parse(v["vkey"])])


@pytest.mark.parametrize("bad", [
    "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong key id
    "PeterNeumann+c74f20a3+AhpcA2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",  # not type 0x01
    "PeterNeumann+c74f20a3",  # no key
    "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # white space in the name
    "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T!",  # not base64
])
def test_bad_verifier_keys_are_refused(bad: str) -> None:
    with pytest.raises(vb.VerifyError):
        vb.Vkey.parse(bad)


def _witness(name: str = "witness.example.com/w1") -> tuple[Ed25519PrivateKey, str]:
    """A witness key pair; the vkey written from the C2SP tlog-cosignature spec (type 0x04)."""
    sk = Ed25519PrivateKey.generate()
    pub = sk.public_key().public_bytes_raw()
    key_id = hashlib.sha256(name.encode() + b"\n\x04" + pub).digest()[:4]
    raw = base64.b64encode(bytes([vb.COSIGNATURE_KEY]) + pub).decode()
    return sk, f"{name}+{key_id.hex()}+{raw}"


def _cosign(note: str, sk: Ed25519PrivateKey, vkey: str, stamp: int = 1_700_000_000) -> str:
    """``note`` with a cosignature/v1 line by ``sk`` added (C2SP tlog-cosignature, Ed25519)."""
    name, key_id, _ = vkey.split("+", 2)
    body = note[: note.rfind("\n\n") + 1]
    sig = sk.sign(f"cosignature/v1\ntime {stamp}\n{body}".encode())
    blob = bytes.fromhex(key_id) + stamp.to_bytes(8, "big") + sig
    return f"{note}\u2014 {name} {base64.b64encode(blob).decode()}\n"


def test_a_cosignature_made_per_the_spec_verifies_and_a_changed_one_does_not() -> None:
    body = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    sk, vkey = _witness()
    note = _cosign(body + "\n", sk, vkey)
    key = vb.Vkey.parse(vkey, vb.COSIGNATURE_KEY)
    blob = base64.b64decode(note.rsplit(" ", 1)[1])
    assert vb.verify_cosignature(body, key, blob) == 1_700_000_000
    later = blob[:4] + (1_700_000_001).to_bytes(8, "big") + blob[12:]
    other_body = body.replace("20852163", "20852164")
    for bad_body, bad_blob in [(body, later), (other_body, blob), (body, blob[:-1])]:
        with pytest.raises(vb.VerifyError):
            vb.verify_cosignature(bad_body, key, bad_blob)
    with pytest.raises(vb.VerifyError):  # a cosignature key is not a note key, and the reverse
        vb.Vkey.parse(vkey)


# --- real bundles -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> Source:
    signer = NoteSigner.generate(ORIGIN)
    db = Db(f"sqlite:///{tmp_path_factory.mktemp('src') / 'ledger.db'}", "sqlite")
    return make_source(make_ledger(db, signer), signer, sandbox)


@pytest.fixture(scope="module")
def bundle(source: Source, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return created_bundle(source, tmp_path_factory.mktemp("bundle") / "bundle.zip")


def check(path: Path, *keys: str, witnesses: tuple[str, ...] = ()) -> vb.Report:
    return vb.verify_bundle(str(path), [vb.Vkey.parse(k) for k in keys],
                            [vb.Vkey.parse(w, vb.COSIGNATURE_KEY) for w in witnesses])


def pinned(source: Source) -> str:
    return source.signer.verifier.vkey


def failed(report: vb.Report) -> set[tuple[str, str | None]]:
    assert not report.verified
    return {(f.check, f.file) for f in report.failures}


def both_reject(path: Path, source: Source, sandbox: Sandbox) -> vb.Report:
    """The independent verifier's report on a tampered bundle the main verifier rejects too."""
    with pytest.raises(BundleError):
        main_verify_bundle(path, [source.signer.verifier], sandbox=sandbox)
    report = check(path, pinned(source))
    assert not report.verified
    return report


# each frozen bundle vector (tests/vectors/<name>) and the format it was written as
BUNDLE_VECTORS = {**{f"bundle-v{v}": v for v in range(1, 10)}, "bundle-v9-case": 9}
CASE_BUNDLES = {"bundle-v5", "bundle-v9-case"}


@pytest.mark.parametrize("name", list(BUNDLE_VECTORS))
def test_the_bundle_vectors_of_every_format_verify_with_their_pinned_key(name: str) -> None:
    d = VECTORS / name
    report = check(d / "bundle.zip", (d / "trusted.vkey").read_text().strip())
    assert report.verified, [f.text() for f in report.failures]
    assert report.format == BUNDLE_VECTORS[name] and report.pinned and report.counts["records"] > 0
    if name in CASE_BUNDLES:  # a case bundle: the other cases' events proved as leaf hashes
        assert report.counts["withheld"] == 3
    else:
        assert "withheld" not in report.counts


@pytest.mark.requirement("SEC-17a4f-download", "FATF-R11-available")
def test_a_created_bundle_verifies_with_a_pinned_key(bundle: Path, source: Source) -> None:
    report = check(bundle, pinned(source))
    assert report.verified, [f.text() for f in report.failures]
    manifest = orjson.loads(members(bundle)["manifest.json"])
    assert report.format == 9 and report.bundle_id == manifest["bundle_id"]
    assert report.counts["state"] == manifest["state"]["records"] > 0  # its state lines proved too
    assert report.signed_by == [pinned(source)] and report.counts["records"] == manifest["counts"]["records"]
    assert report.counts["payloads_purged"] == 1 and report.counts["links"] > 0


def test_a_bundle_of_screened_decisions_verifies(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                tmp_path: Path) -> None:
    ledger = make_ledger(db, signer)
    decide(ledger, sandbox, screened(ledger))
    report = check(export(ledger, signer, tmp_path / "b.zip"), signer.verifier.vkey)
    assert report.verified, [f.text() for f in report.failures]
    assert report.format == 9  # screened, carrying its state and its compliance facts


def test_a_changed_state_line_fails_its_proof_naming_the_seq(bundle: Path, source: Source, sandbox: Sandbox,
                                                             tmp_path: Path) -> None:
    state = lines(members(bundle)["state/records.jsonl"])
    state[0] = state[0].replace(b'"entries":[[', b'"entries":[[null,', 1) if b'"entries"' in state[0] \
        else state[0].replace(b'"prev":', b'"prev":null,"x":', 1)
    report = both_reject(rewrite(bundle, tmp_path / "t.zip", change={"state/records.jsonl": joined(state)},
                                 rehash=True, resign=source.signer), source, sandbox)
    seq = orjson.loads(lines(members(bundle)["state/index.jsonl"])[0])["seq"]
    assert ("records", "state/records.jsonl") in failed(report)
    assert seq in {f.seq for f in report.failures if f.check == "records"}


def test_a_second_export_proves_consistency_and_a_broken_proof_fails(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    src = make_source(make_ledger(db, signer), signer, sandbox, n=10)
    created_bundle(src, tmp_path / "first.zip")  # sealed as export.created: the second names it
    second = created_bundle(src, tmp_path / "second.zip")
    assert orjson.loads(members(second)["manifest.json"])["previous"] is not None
    report = check(second, signer.verifier.vkey)
    assert report.verified, [f.text() for f in report.failures]
    doc = orjson.loads(members(second)["proofs/consistency.json"])
    assert doc["hashes"], "a real consistency proof"
    doc["hashes"][0] = base64.b64encode(bytes(32)).decode()
    path = rewrite(second, tmp_path / "t.zip", change={"proofs/consistency.json": canonical_bytes(doc)},
                   resign=signer)
    assert failed(check(path, signer.verifier.vkey)) == {("previous", "proofs/consistency.json")}


def test_without_a_pinned_key_it_warns_loudly(bundle: Path) -> None:
    report = check(bundle)
    assert report.verified and not report.pinned
    assert report.text().startswith("WARNING: NO TRUSTED KEY PINNED")
    assert "NOT who made it" in report.to_json()["warnings"][0]


# --- the main verifier's tampered bundles fail here too -------------------------------------------


def test_a_changed_record_byte_fails_naming_the_seq(bundle: Path, source: Source, sandbox: Sandbox,
                                                   tmp_path: Path) -> None:
    recs = lines(members(bundle)["records.jsonl"])
    i, _ = decision_lines(bundle)[2]
    recs[i] = recs[i].replace(b'"decision":"', b'"decision":"X', 1)
    report = both_reject(rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)}),
                         source, sandbox)
    assert {("records", "records.jsonl"), ("files", "records.jsonl"), ("inclusion", "proofs/nodes.bin"),
            ("inclusion", "records.jsonl")} <= failed(report)
    seq = orjson.loads(lines(members(bundle)["index.jsonl"])[i])["seq"]
    assert {f.seq for f in report.failures if f.check == "records"} == {seq}


def test_a_changed_manifest_fails_its_signature(bundle: Path, source: Source, sandbox: Sandbox,
                                                tmp_path: Path) -> None:
    recs = lines(members(bundle)["records.jsonl"])
    i, _ = decision_lines(bundle)[0]
    recs[i] = _flip_score(recs[i])  # the record changed and the manifest rehashed, the old signature kept
    path = rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)}, rehash=True)
    report = both_reject(path, source, sandbox)
    assert ("manifest.signature", "manifest.sig") in failed(report)
    assert "expected" in next(f.detail for f in report.failures if f.check == "manifest.signature")


def test_a_wrong_key_fails(bundle: Path, source: Source, tmp_path: Path) -> None:
    mallory = NoteSigner.generate(ORIGIN)
    assert failed(check(bundle, mallory.verifier.vkey)) == {("manifest.signature", "manifest.sig"),
                                                           ("checkpoint", "checkpoint.txt")}
    resigned = rewrite(bundle, tmp_path / "t.zip", resign=mallory)  # re-signed by another key
    assert failed(check(resigned, pinned(source))) == {("manifest.signature", "manifest.sig")}


def test_a_removed_record_fails(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    m = members(bundle)
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    i, _ = decision_lines(bundle)[4]
    del recs[i], idx[i]
    change = {"records.jsonl": joined(recs), "index.jsonl": joined(idx)}
    path = rewrite(bundle, tmp_path / "t.zip", change=change)
    assert {("files", "records.jsonl"), ("files", "index.jsonl"), ("inclusion", "proofs/nodes.bin"),
            ("manifest", "manifest.json")} <= failed(both_reject(path, source, sandbox))
    # even with the manifest re-signed by the ledger key, the proof misses the removed leaf
    path = rewrite(bundle, tmp_path / "u.zip", change=change, resign=source.signer)
    report = both_reject(path, source, sandbox)
    assert ("inclusion", "proofs/nodes.bin") in failed(report)
    assert any("lacks the hash of subtree" in f.detail for f in report.failures)


def test_a_broken_proof_fails(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    nodes = bytearray(members(bundle)["proofs/nodes.bin"])
    nodes[-1] ^= 1
    report = both_reject(rewrite(bundle, tmp_path / "t.zip", change={"proofs/nodes.bin": bytes(nodes)}),
                         source, sandbox)
    assert {("files", "proofs/nodes.bin"), ("inclusion", "proofs/nodes.bin")} <= failed(report)
    unread = (10**9).to_bytes(8, "big") + (10**9 + 1).to_bytes(8, "big") + bytes(32)  # an item no proof reads
    extra = members(bundle)["proofs/nodes.bin"] + unread
    path = rewrite(bundle, tmp_path / "u.zip", change={"proofs/nodes.bin": extra}, resign=source.signer)
    assert failed(both_reject(path, source, sandbox)) == {("inclusion", "proofs/nodes.bin")}


def test_a_changed_checkpoint_fails(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    note = members(bundle)["checkpoint.txt"].decode()
    body, sig = note.split("\n\n")
    parts = body.split("\n")
    parts[2] = "A" * 43 + "="
    altered = ("\n".join(parts) + "\n\n" + sig).encode()
    path = rewrite(bundle, tmp_path / "t.zip", change={"checkpoint.txt": altered})
    assert ("checkpoint", "checkpoint.txt") in failed(both_reject(path, source, sandbox))
    m = orjson.loads(members(bundle)["manifest.json"])
    forged = Checkpoint(ORIGIN, m["checkpoint"]["size"], base64.b64decode(m["checkpoint"]["root"]))
    path = rewrite(bundle, tmp_path / "u.zip", resign=source.signer,
                   change={"checkpoint.txt": forged.sign([NoteSigner.generate(ORIGIN)]).note.encode()})
    assert failed(both_reject(path, source, sandbox)) == {("checkpoint", "checkpoint.txt")}


def test_a_changed_chain_hash_fails_naming_the_seq(bundle: Path, source: Source, sandbox: Sandbox,
                                                  tmp_path: Path) -> None:
    idx = lines(members(bundle)["index.jsonl"])
    ix = orjson.loads(idx[5])
    ix["chain_hash"] = "00" * 32
    idx[5] = canonical_bytes(ix)
    path = rewrite(bundle, tmp_path / "t.zip", change={"index.jsonl": joined(idx)}, resign=source.signer)
    report = both_reject(path, source, sandbox)
    assert {(f.check, f.seq) for f in report.failures} >= {("chain", ix["seq"])}


def test_other_payload_bytes_and_an_unlisted_file_fail(bundle: Path, source: Source, sandbox: Sandbox,
                                                       tmp_path: Path) -> None:
    pays = lines(members(bundle)["payloads.jsonl"])
    k = next(i for i, p in enumerate(pays) if b'"state":"present"' in p)
    doc = orjson.loads(pays[k])
    doc["data"] = doc["data"].replace("0", "9", 1)
    pays[k] = canonical_bytes(doc)
    path = rewrite(bundle, tmp_path / "t.zip", change={"payloads.jsonl": joined(pays)}, resign=source.signer)
    assert failed(both_reject(path, source, sandbox)) == {("payloads", f"payloads.jsonl line {k + 1}")}
    path = rewrite(bundle, tmp_path / "u.zip", change={"notes/extra.txt": b"hi"})
    assert failed(both_reject(path, source, sandbox)) == {("files", "notes/extra.txt")}


def test_a_manifest_that_is_not_canonical_fails(bundle: Path, source: Source, tmp_path: Path) -> None:
    doc = orjson.loads(members(bundle)["manifest.json"])
    pretty = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    digest = hashlib.sha256(pretty).hexdigest()
    sig = sign_note(f"{vb.SIG_TITLE}\n{doc['bundle_id']}\n{digest}\n", [source.signer]).encode()
    path = rewrite(bundle, tmp_path / "t.zip", change={"manifest.json": pretty, "manifest.sig": sig})
    assert failed(check(path, pinned(source))) == {("manifest", "manifest.json")}


# --- witnesses ------------------------------------------------------------------------------------


def test_a_witness_cosignature_is_verified_and_reported(bundle: Path, source: Source, sandbox: Sandbox,
                                                        tmp_path: Path) -> None:
    sk, vkey = _witness()
    note = members(bundle)["checkpoint.txt"].decode()
    path = rewrite(bundle, tmp_path / "t.zip", change={"checkpoint.txt": _cosign(note, sk, vkey).encode()},
                   resign=source.signer)
    main_verify_bundle(path, [source.signer.verifier], sandbox=sandbox)  # the main verifier skips it
    report = check(path, pinned(source), witnesses=(vkey,))
    assert report.verified, [f.text() for f in report.failures]
    (w,) = report.witnesses
    assert w["vkey"] == vkey and w["time"] == "2023-11-14T22:13:20Z" and w["status"].startswith("cosigned")
    # not given a key for it, the verifier reports the line unchecked
    (w,) = check(path, pinned(source)).witnesses
    assert "not checked" in w["status"]
    # a cosignature that does not hold, by a witness given
    other, _ = _witness()
    forged = _cosign(note, other, vkey)
    path = rewrite(bundle, tmp_path / "u.zip", change={"checkpoint.txt": forged.encode()},
                   resign=source.signer)
    assert failed(check(path, pinned(source), witnesses=(vkey,))) == {("witness", "checkpoint.txt")}


# --- the file as an examiner runs it -------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, check=False)


def test_run_as_a_script_exit_0_1_2(bundle: Path, source: Source, tmp_path: Path) -> None:
    ok = run(str(bundle), "--trusted-key", pinned(source), "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["verified"] is True and doc["failures"] == [] and doc["pinned"] is True
    text = run(str(bundle), "--trusted-key", pinned(source))
    assert text.returncode == 0 and text.stdout.strip().endswith("replay not checked here)")

    recs = lines(members(bundle)["records.jsonl"])
    i, _ = decision_lines(bundle)[2]
    recs[i] = recs[i].replace(b'"decision":"', b'"decision":"X', 1)
    bad = rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)})
    seq = orjson.loads(lines(members(bundle)["index.jsonl"])[i])["seq"]
    out = run(str(bad), "--trusted-key", pinned(source))
    assert out.returncode == 1 and "NOT VERIFIED" in out.stdout
    assert f"FAIL [records] records.jsonl seq {seq}:" in out.stdout
    out = run(str(bad), "--trusted-key", pinned(source), "--json")
    assert out.returncode == 1
    assert set(json.loads(out.stdout)["failures"][0]) == {"check", "file", "seq", "detail"}

    unpinned = run(str(bundle), "--json")
    assert unpinned.returncode == 0 and "NO TRUSTED KEY PINNED" in unpinned.stderr
    assert run(str(bundle), "--min-witnesses", "1").returncode == 1

    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    for args in ([str(tmp_path / "junk.zip")], [str(tmp_path / "none.zip")],
                 [str(bundle), "--trusted-key", "not-a-key"], []):
        assert run(*args).returncode == 2, args


def test_it_imports_only_the_standard_library_and_cryptography() -> None:
    tree = ast.parse(TOOL.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module is not None, "no relative imports"
            found.add(node.module.split(".")[0])
    assert found - set(sys.stdlib_module_names) == {"cryptography"}, found
    assert found & {"audit", "ledger", "api", "inference", "wasm_rules", "orjson"} == set()


def test_the_version_8_vector_s_witnesses_verify_and_a_quorum_is_held() -> None:
    d = VECTORS / "bundle-v8"
    vkeys = (d / "witnesses.vkey").read_text().split()
    argv = [str(d / "bundle.zip"), "--trusted-key", (d / "trusted.vkey").read_text().strip(), "--json"]
    wit = [a for v in vkeys for a in ("--witness-key", v)]
    assert vb.main([*argv, *wit, "--min-witnesses", "2"]) == 0
    assert vb.main([*argv, *wit[:2], "--min-witnesses", "2"]) == 1


def test_the_version_9_vector_verifies_with_its_history_records_proved(tmp_path: Path) -> None:
    d = VECTORS / "bundle-v9"
    trusted = [vb.Vkey.parse((d / "trusted.vkey").read_text().strip())]
    report = vb.verify_bundle(str(d / "bundle.zip"), trusted)
    assert report.verified and report.format == 9 and report.counts["compliance_records"] > 0
    # a history record changed (its manifest hash fixed up, re-signed by nobody): the proof fails too
    with zipfile.ZipFile(d / "bundle.zip") as z:
        m = {n: z.read(n) for n in z.namelist()}
    m["compliance/records.jsonl"] = m["compliance/records.jsonl"].replace(b"order-7", b"order-8")
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        for n, data in m.items():
            z.writestr(n, data)
    got = vb.verify_bundle(str(bad), trusted)
    assert {f.check for f in got.failures} >= {"files", "compliance"}
