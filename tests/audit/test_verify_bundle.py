"""The offline bundle verifier: valid bundles verify; every way of tampering with one is caught,
with the reason and the record named."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pytest

from audit.bundle.reader import Limits
from audit.bundle.verify import UNPINNED_WARNING, BundleReport, verify_bundle
from audit.decide.pipeline import Pipeline
from audit.errors import BundleError, BundleMalformed, BundleUnreadable, BundleUntrusted
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from inference.backends import load_backend
from inference.model import MlpModel, ModelFiles, model_npz_bytes
from ledger import NoteSigner, Record
from ledger.checkpoint import Checkpoint
from ledger.jcs import canonical_bytes
from tests.audit.bundle_fixture import (
    Source,
    created_bundle,
    joined,
    lines,
    make_source,
    members,
    now_fixed,
    rewrite,
    write_bundle,
)
from tests.audit.test_pipeline import submissions
from tests.conftest import ORIGIN, Db, make_ledger
from wasm_rules import Sandbox, compile_ruleset, parse_ruleset

PACK = Path(__file__).parents[2] / "wasm_rules" / "packs" / "aml_core.toml"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> Source:
    signer = NoteSigner.generate(ORIGIN)
    db = Db(f"sqlite:///{tmp_path_factory.mktemp('src') / 'ledger.db'}", "sqlite")
    return make_source(make_ledger(db, signer), signer, sandbox)


@pytest.fixture(scope="module")
def bundle(source: Source, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return created_bundle(source, tmp_path_factory.mktemp("bundle") / "bundle.zip")


def verify(path: Path, source: Source, sandbox: Sandbox, keys: list[NoteSigner] | None = None,
           **kw: object) -> BundleReport:
    trusted = [source.signer.verifier] if keys is None else [k.verifier for k in keys]
    return verify_bundle(path, trusted, sandbox=sandbox, now=now_fixed, **kw)  # type: ignore[arg-type]


def failures(path: Path, source: Source, sandbox: Sandbox, keys: list[NoteSigner] | None = None,
             **kw: object) -> list[BundleError]:
    with pytest.raises(BundleError) as info:
        verify(path, source, sandbox, keys, **kw)
    return list(info.value.failures)


def kinds(errs: list[BundleError]) -> set[str]:
    return {e.kind for e in errs}


def decision_lines(path: Path) -> list[tuple[int, dict]]:  # type: ignore[type-arg]
    recs = lines(members(path)["records.jsonl"])
    return [(i, orjson.loads(x)) for i, x in enumerate(recs) if b'"kind":"decision"' in x[:20]]


# --- valid bundles --------------------------------------------------------------------------


@pytest.mark.requirement("SEC-17a4f-download", "FATF-R11-reconstruct")
def test_a_created_bundle_verifies_with_every_decision_replayed(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                                tmp_path: Path) -> None:
    src = make_source(make_ledger(db, signer), signer, sandbox)
    for path in (created_bundle(src, tmp_path / "created.zip"), write_bundle(src, tmp_path / "fixture.zip")):
        report = verify_bundle(path, [signer.verifier], sandbox=sandbox, now=now_fixed)
        assert report.pinned and report.warnings == ()
        assert report.decisions == len(src.decisions) == report.replayed == report.rescored
        assert report.annotations == 1 and report.payloads_purged == 1
        assert report.payloads_present == len(src.decisions) - 1
        assert report.signed_by == (signer.verifier.vkey,)
        assert report.verified_at == "2026-12-03T09:00:00.000000Z"


def test_serial_and_parallel_proof_checks_agree(bundle: Path, source: Source, sandbox: Sandbox) -> None:
    a = verify(bundle, source, sandbox, parallel=False)
    b = verify(bundle, source, sandbox, parallel=True)
    assert a == b


def test_without_a_pinned_key_it_verifies_against_the_bundles_own_keys_with_a_loud_warning(
        bundle: Path, source: Source, sandbox: Sandbox) -> None:
    report = verify(bundle, source, sandbox, keys=[])
    assert not report.pinned and report.warnings == (UNPINNED_WARNING,)
    assert "NO TRUSTED KEY PINNED" in report.warnings[0]


def test_progress_reaches_the_record_count(bundle: Path, source: Source, sandbox: Sandbox) -> None:
    seen: list[tuple[int, int]] = []
    report = verify(bundle, source, sandbox, progress=lambda done, total: seen.append((done, total)))
    assert seen[0][0] == 0 and seen[-1] == (report.records, report.records)


# --- tampering -------------------------------------------------------------------------------


def _flip_score(line: bytes) -> bytes:
    env = orjson.loads(line)
    env["record"]["score_ppm"] = (env["record"]["score_ppm"] + 250_000) % 1_000_000
    return canonical_bytes(env)


def test_a_byte_flipped_in_a_record_is_caught_by_leaf_file_hash_and_root(
        bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    recs = lines(members(bundle)["records.jsonl"])
    i, env = decision_lines(bundle)[2]
    recs[i] = recs[i].replace(b'"decision":"', b'"decision":"X', 1)
    path = rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)})
    errs = failures(path, source, sandbox)
    assert {"leaf_hash", "file.hash", "proof.root"} <= kinds(errs)
    leaf = next(e for e in errs if e.kind == "leaf_hash")
    assert (leaf.seq, leaf.trace_id, leaf.file) == (_seq(bundle, i), env["trace_id"], "records.jsonl")


def _seq(bundle: Path, i: int) -> int:
    return int(orjson.loads(lines(members(bundle)["index.jsonl"])[i])["seq"])


def test_an_edited_record_with_rehashed_files_but_the_old_signature_is_refused(
        bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    recs = lines(members(bundle)["records.jsonl"])
    i, _ = decision_lines(bundle)[0]
    recs[i] = _flip_score(recs[i])
    path = rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)}, rehash=True)
    (err,) = failures(path, source, sandbox)
    assert err.kind == "manifest.hash" and err.file == "manifest.json"


def test_a_changed_score_is_caught_even_with_the_index_rewritten_to_match(
        bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    m = members(bundle)
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    i, env = decision_lines(bundle)[1]
    recs[i] = _flip_score(recs[i])
    ix = orjson.loads(idx[i])
    ix["leaf_hash"] = hashlib.sha256(b"\x00" + recs[i]).hexdigest()
    idx[i] = canonical_bytes(ix)
    errs = failures(rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs),
                                                               "index.jsonl": joined(idx)}), source, sandbox)
    assert {"file.hash", "proof.root", "replay.score"} <= kinds(errs)
    score = next(e for e in errs if e.kind == "replay.score")
    assert score.trace_id == env["trace_id"] and "numpy model" in score.detail


def test_a_dropped_record_is_caught(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    m = members(bundle)
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    i, _ = decision_lines(bundle)[4]
    del recs[i], idx[i]
    errs = failures(rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs),
                                                               "index.jsonl": joined(idx)}), source, sandbox)
    assert {"file.hash", "proof.nodes", "manifest.counts"} <= kinds(errs)


def test_two_records_swapped_are_caught(bundle: Path, source: Source, sandbox: Sandbox,
                                        tmp_path: Path) -> None:
    m = members(bundle)
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    (i, _), (j, _) = decision_lines(bundle)[6:8]
    recs[i], recs[j], idx[i], idx[j] = recs[j], recs[i], idx[j], idx[i]
    errs = failures(rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs),
                                                               "index.jsonl": joined(idx)}), source, sandbox)
    assert {"seq.order", "file.hash"} <= kinds(errs)
    # only records.jsonl reordered: both lines' leaves differ from the index
    m2 = members(bundle)
    recs = lines(m2["records.jsonl"])
    recs[i], recs[j] = recs[j], recs[i]
    path = rewrite(bundle, tmp_path / "u.zip", change={"records.jsonl": joined(recs)})
    errs = failures(path, source, sandbox)
    flagged = sorted(e.seq or -1 for e in errs if e.kind == "leaf_hash")
    assert flagged == sorted([_seq(bundle, i), _seq(bundle, j)])


def _rules_name(bundle: Path) -> str:
    return next(n for n in members(bundle) if n.startswith("rules/") and n.endswith(".wasm"))


def _model_name(bundle: Path) -> str:
    return next(n for n in members(bundle) if n.endswith("weights.npz"))


def _other_module() -> bytes:
    text = PACK.read_text().replace("amount_usd >= 1000", "amount_usd >= 1")
    assert text != PACK.read_text()
    return compile_ruleset(parse_ruleset(text))


@pytest.mark.parametrize("resign", [False, True], ids=["old-signature", "re-signed-by-the-ledger-key"])
def test_a_swapped_rule_module_fails_replay(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path,
                                            resign: bool) -> None:
    path = rewrite(bundle, tmp_path / "t.zip", change={_rules_name(bundle): _other_module()},
                   resign=source.signer if resign else None)
    errs = failures(path, source, sandbox)
    assert {"replay.module", "context.module"} <= kinds(errs)
    assert ("file.hash" in kinds(errs)) is not resign
    assert any(e.kind == "replay.module" and e.seq is not None and e.trace_id for e in errs)


@pytest.mark.parametrize("resign", [False, True], ids=["old-signature", "re-signed-by-the-ledger-key"])
def test_swapped_model_weights_fail_replay(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path,
                                           resign: bool) -> None:
    other = model_npz_bytes(MlpModel.init(np.random.default_rng(3)))
    path = rewrite(bundle, tmp_path / "t.zip", change={_model_name(bundle): other},
                   resign=source.signer if resign else None)
    errs = failures(path, source, sandbox)
    assert "replay.model" in kinds(errs)
    assert ("file.hash" in kinds(errs)) is not resign


def test_an_altered_proof_node_is_caught(bundle: Path, source: Source, sandbox: Sandbox,
                                         tmp_path: Path) -> None:
    nodes = bytearray(members(bundle)["proofs/nodes.bin"])
    assert nodes, "the bundle has frontier nodes"
    nodes[-1] ^= 1
    path = rewrite(bundle, tmp_path / "t.zip", change={"proofs/nodes.bin": bytes(nodes)})
    errs = failures(path, source, sandbox)
    assert {"proof.root", "file.hash"} <= kinds(errs)
    # an extra (unused) node, with everything re-signed
    extra = bytes(nodes) + (10**9).to_bytes(8, "big") + (10**9 + 1).to_bytes(8, "big") + bytes(32)
    errs = failures(rewrite(bundle, tmp_path / "u.zip", change={"proofs/nodes.bin": extra},
                            resign=source.signer), source, sandbox)
    assert "proof.nodes" in kinds(errs)


def test_an_altered_checkpoint_is_refused(bundle: Path, source: Source, sandbox: Sandbox,
                                          tmp_path: Path) -> None:
    note = members(bundle)["checkpoint.txt"].decode()
    body, sig = note.split("\n\n")
    lines_ = body.split("\n")
    lines_[2] = "A" * 43 + "="  # another root
    forged = "\n".join(lines_) + "\n\n" + sig
    (err,) = failures(rewrite(bundle, tmp_path / "t.zip", change={"checkpoint.txt": forged.encode()}),
                      source, sandbox)
    assert isinstance(err, BundleUntrusted) and err.kind == "checkpoint.signature"
    flipped = note[:-6] + ("A" if note[-6] != "A" else "B") + note[-5:]
    (err,) = failures(rewrite(bundle, tmp_path / "u.zip", change={"checkpoint.txt": flipped.encode()}),
                      source, sandbox)
    assert err.kind == "checkpoint.signature"


def test_a_manifest_resigned_by_another_key_is_refused(bundle: Path, source: Source, sandbox: Sandbox,
                                                      tmp_path: Path) -> None:
    mallory = NoteSigner.generate(ORIGIN)
    (err,) = failures(rewrite(bundle, tmp_path / "t.zip", resign=mallory), source, sandbox)
    assert isinstance(err, BundleUntrusted) and err.kind == "manifest.signature"


def test_a_checkpoint_forged_by_another_key_is_refused_though_the_manifest_is_signed_right(
        bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    m = orjson.loads(members(bundle)["manifest.json"])
    mallory = NoteSigner.generate(ORIGIN)
    root = base64.b64decode(m["checkpoint"]["root"])
    forged = Checkpoint(ORIGIN, m["checkpoint"]["size"], root).sign([mallory])
    path = rewrite(bundle, tmp_path / "t.zip", change={"checkpoint.txt": forged.note.encode()},
                   resign=source.signer)
    (err,) = failures(path, source, sandbox)
    assert err.kind == "checkpoint.signature" and err.file == "checkpoint.txt"


def test_editing_only_the_report_is_caught_by_its_file_hash(bundle: Path, source: Source, sandbox: Sandbox,
                                                           tmp_path: Path) -> None:
    html = members(bundle)["report.html"].replace(b"BLOCK", b"ALLOW", 1) + b"<!-- edited -->"
    (err,) = failures(rewrite(bundle, tmp_path / "t.zip", change={"report.html": html}), source, sandbox)
    assert (err.kind, err.file) == ("file.hash", "report.html")


def test_an_unlisted_file_is_refused(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    (err,) = failures(rewrite(bundle, tmp_path / "t.zip", change={"notes/extra.txt": b"hi"}), source, sandbox)
    assert (err.kind, err.file) == ("file.unlisted", "notes/extra.txt")


@pytest.mark.parametrize("resign", [False, True], ids=["old-signature", "re-signed-by-the-ledger-key"])
def test_a_removed_payload_not_listed_as_purged_is_caught(bundle: Path, source: Source, sandbox: Sandbox,
                                                         tmp_path: Path, resign: bool) -> None:
    pays = lines(members(bundle)["payloads.jsonl"])
    k = next(i for i, p in enumerate(pays) if b'"state":"present"' in p)
    del pays[k]
    path = rewrite(bundle, tmp_path / "t.zip", change={"payloads.jsonl": joined(pays)},
                   resign=source.signer if resign else None)
    errs = failures(path, source, sandbox)
    assert kinds(errs) & {"payload.order", "payload.missing"}
    assert ("file.hash" in kinds(errs)) is not resign


def test_a_payload_with_other_bytes_is_caught(bundle: Path, source: Source, sandbox: Sandbox,
                                              tmp_path: Path) -> None:
    pays = lines(members(bundle)["payloads.jsonl"])
    k = next(i for i, p in enumerate(pays) if b'"state":"present"' in p)
    doc = orjson.loads(pays[k])
    doc["data"] = doc["data"].replace("0", "9", 1)
    pays[k] = canonical_bytes(doc)
    errs = failures(rewrite(bundle, tmp_path / "t.zip", change={"payloads.jsonl": joined(pays)},
                            resign=source.signer), source, sandbox)
    assert kinds(errs) == {"payload.hash"}


def test_decisions_that_do_not_replay_fail_though_every_signature_holds(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    """A consistently signed forgery: the ledger itself holds decisions the rules and model never made."""
    src = make_source(make_ledger(db, signer), signer, sandbox, n=20)
    envs = [orjson.loads(x) for x in lines(members(write_bundle(src, tmp_path / "a.zip"))["records.jsonl"])]
    real = next(e for e in envs if e["kind"] == "decision" and e["record"]["decision"] == "ALLOW")
    score = {**real["record"], "score_ppm": real["record"]["score_ppm"] + 10_000}
    outcome = {**real["record"], "decision": "BLOCK"}
    receipts = src.ledger.append_many([Record.from_canonical_body("decision", canonical_bytes(b))
                                       for b in (score, outcome)])
    src.ledger.checkpoint()
    errs = failures(write_bundle(src, tmp_path / "b.zip"), src, sandbox, keys=[signer])
    # the forged score and outcome give other account-risk points than the records state, too, and a
    # BLOCK states reasons where the allowed payment's record has none
    assert real["record"]["explanation"] is None
    assert sorted((e.seq, e.kind, e.trace_id) for e in errs) == [
        (receipts[0].seq, "replay.account_risk", receipts[0].trace_id),
        (receipts[0].seq, "replay.score", receipts[0].trace_id),
        (receipts[1].seq, "replay.account_risk", receipts[1].trace_id),
        (receipts[1].seq, "replay.explanation", receipts[1].trace_id),
        (receipts[1].seq, "replay.outcome", receipts[1].trace_id)]


def test_more_failures_than_the_cap_are_counted_not_kept(bundle: Path, source: Source, sandbox: Sandbox,
                                                        tmp_path: Path) -> None:
    path = rewrite(bundle, tmp_path / "t.zip", change={_rules_name(bundle): _other_module()},
                   resign=source.signer)
    with pytest.raises(BundleError) as info:
        verify(path, source, sandbox, limits=Limits(max_failures=5))
    exc = info.value
    assert len(exc.failures) == 5 and exc.dropped > 0  # type: ignore[attr-defined]
    assert exc.report is not None and exc.report.bundle_id  # type: ignore[attr-defined]


# --- hostile ZIPs ----------------------------------------------------------------------------


def test_not_a_zip_is_unreadable(tmp_path: Path, source: Source, sandbox: Sandbox) -> None:
    (tmp_path / "x.zip").write_bytes(b"not a zip")
    with pytest.raises(BundleUnreadable):
        verify(tmp_path / "x.zip", source, sandbox)
    with pytest.raises(BundleUnreadable):
        verify(tmp_path / "missing.zip", source, sandbox)


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "a/../../b", "dir/", "a\\b", "caf\u00e9"])
def test_unsafe_member_names_are_refused(bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path,
                                         name: str) -> None:
    path = rewrite(bundle, tmp_path / "t.zip")
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(zipfile.ZipInfo(name), b"x")
    with pytest.raises(BundleMalformed) as info:
        verify(path, source, sandbox)
    assert info.value.kind == "zip.path"


def test_a_duplicate_member_is_refused(bundle: Path, source: Source, sandbox: Sandbox,
                                       tmp_path: Path) -> None:
    path = rewrite(bundle, tmp_path / "t.zip")
    with pytest.warns(UserWarning), zipfile.ZipFile(path, "a") as z:
        z.writestr("report.html", b"second copy")
    with pytest.raises(BundleMalformed) as info:
        verify(path, source, sandbox)
    assert (info.value.kind, info.value.file) == ("zip.duplicate", "report.html")


def test_a_zip_bomb_is_refused_before_inflating(bundle: Path, source: Source, sandbox: Sandbox,
                                               tmp_path: Path) -> None:
    path = rewrite(bundle, tmp_path / "t.zip")
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb.bin", bytes(64 << 20))  # 64 MiB of zeros deflate ~1000:1
    with pytest.raises(BundleMalformed) as info:
        verify(path, source, sandbox)
    assert (info.value.kind, info.value.file) == ("zip.bomb", "bomb.bin")
    with pytest.raises(BundleMalformed) as info:
        verify(bundle, source, sandbox, limits=Limits(max_total_bytes=1000))
    assert info.value.kind == "zip.bomb"


def test_a_manifest_that_is_not_canonical_is_refused(bundle: Path, source: Source, sandbox: Sandbox,
                                                     tmp_path: Path) -> None:
    from audit.export.create import manifest_sig_text
    from ledger.note import sign_note

    doc = orjson.loads(members(bundle)["manifest.json"])
    pretty = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    sig = sign_note(manifest_sig_text(doc["bundle_id"], hashlib.sha256(pretty).hexdigest()), [source.signer])
    path = rewrite(bundle, tmp_path / "t.zip", change={"manifest.json": pretty, "manifest.sig": sig.encode()})
    (err,) = failures(path, source, sandbox)
    assert err.kind == "manifest.canonical"


# --- the CLI (sealtrail export verify) -------------------------------------------------------


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from api.cli import app

    r = CliRunner().invoke(app, ["export", "verify", *args])
    return r.exit_code, r.stdout, r.stderr


def test_cli_exit_0_with_json_for_a_verified_bundle(bundle: Path, source: Source) -> None:
    code, stdout, _ = _cli(str(bundle), "--trusted-key", source.signer.verifier.vkey, "--json")
    doc = orjson.loads(stdout)
    assert code == 0 and doc["verified"] is True and doc["failures"] == [] and doc["warnings"] == []
    assert doc["records"] == doc["report"]["records"] and doc["replayed"] == len(source.decisions)
    assert doc["bundle_id"] == orjson.loads(members(bundle)["manifest.json"])["bundle_id"]
    code, stdout, _ = _cli(str(bundle), "--trusted-key", source.signer.verifier.vkey)
    assert code == 0 and stdout.startswith("VERIFIED bundle")


def test_cli_exit_1_names_the_record_and_reason(bundle: Path, source: Source, tmp_path: Path) -> None:
    recs = lines(members(bundle)["records.jsonl"])
    i, env = decision_lines(bundle)[2]
    recs[i] = recs[i].replace(b'"decision":"', b'"decision":"X', 1)
    path = rewrite(bundle, tmp_path / "t.zip", change={"records.jsonl": joined(recs)})
    code, stdout, _ = _cli(str(path), "--trusted-key", source.signer.verifier.vkey, "--json")
    doc = orjson.loads(stdout)
    assert code == 1 and doc["verified"] is False
    leaf = next(f for f in doc["failures"] if f["kind"] == "leaf_hash")
    assert set(leaf) == {"kind", "file", "seq", "trace_id", "detail"} and leaf["trace_id"] == env["trace_id"]
    code, stdout, _ = _cli(str(path), "--trusted-key", source.signer.verifier.vkey)
    assert code == 1 and "NOT VERIFIED" in stdout and env["trace_id"] in stdout


def test_cli_without_a_key_warns_loudly_on_stderr(bundle: Path) -> None:
    code, stdout, stderr = _cli(str(bundle), "--json")
    assert code == 0 and "NO TRUSTED KEY PINNED" in stderr
    assert orjson.loads(stdout)["warnings"] == [UNPINNED_WARNING]


def test_cli_exit_2_for_an_unreadable_file_or_a_bad_key(bundle: Path, tmp_path: Path) -> None:
    (tmp_path / "x.zip").write_bytes(b"junk")
    assert _cli(str(tmp_path / "x.zip"), "--json")[0] == 2
    assert _cli(str(tmp_path / "none.zip"))[0] == 2
    assert _cli(str(bundle), "--trusted-key", "not-a-key")[0] == 2


def test_cli_exit_1_for_a_foreign_key(bundle: Path) -> None:
    code, stdout, _ = _cli(str(bundle), "--trusted-key", NoteSigner.generate(ORIGIN).verifier.vkey, "--json")
    assert code == 1 and orjson.loads(stdout)["failures"][0]["kind"] == "manifest.signature"


# --- a second export: consistency with the previous one ----------------------------------------


def test_a_second_export_proves_consistency_with_the_first(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                           tmp_path: Path) -> None:
    src = make_source(make_ledger(db, signer), signer, sandbox, n=20)
    first = created_bundle(src, tmp_path / "first.zip")
    pipe = Pipeline(src.ledger, load_backend("numpy", ModelFiles.open().weights_path),
                    Governance(src.ledger).load_active(sandbox), index=TraceIndex())
    pipe.decide(submissions(10, seed=9))
    second = created_bundle(src, tmp_path / "second.zip")
    report = verify_bundle(second, [signer.verifier], sandbox=sandbox)
    first_id = orjson.loads(members(first)["manifest.json"])["bundle_id"]
    assert report.previous is not None and report.previous["bundle_id"] == first_id
    assert report.previous["consistent"] is True
    doc = orjson.loads(members(second)["proofs/consistency.json"])
    assert doc["hashes"], "a real consistency proof"
    doc["hashes"][0] = base64.b64encode(bytes(32)).decode()
    path = rewrite(second, tmp_path / "t.zip", change={"proofs/consistency.json": canonical_bytes(doc)},
                   resign=signer)
    errs = failures(path, src, sandbox, keys=[signer])
    assert [(e.kind, e.file) for e in errs] == [("proof.consistency", "proofs/consistency.json")]
    path = rewrite(second, tmp_path / "u.zip", change={"checkpoints/previous.txt": None}, resign=signer)
    assert "file.missing" in kinds(failures(path, src, sandbox, keys=[signer]))


# --- a verifier never leaks a raw exception ---------------------------------------------------


def _mutations(m: dict[str, bytes]) -> Iterator[tuple[str, dict[str, bytes]]]:
    recs, idx, pays = lines(m["records.jsonl"]), lines(m["index.jsonl"]), lines(m["payloads.jsonl"])
    d = next(i for i, x in enumerate(recs) if b'"kind":"decision"' in x[:20])
    env = orjson.loads(recs[d])
    weird: list[object] = [None, 7, "x", [], {}, [1, [2]], {"a": []}, True, 1e308, -1]
    for k, v in enumerate(weird):
        for path in (("record",), ("record", "decision"), ("record", "rules"), ("record", "features"),
                     ("record", "fired"), ("record", "score_ppm"), ("record", "features", "scaled"),
                     ("record", "features", "digits"), ("record", "fail_safe"), ("payload_sha256",),
                     ("kind",), ("record", "refers_to")):
            e = orjson.loads(recs[d])
            target = e
            for p in path[:-1]:
                target = target[p]
            target[path[-1]] = v
            r = list(recs)
            r[d] = canonical_bytes(e)
            if r[d] == recs[d]:
                continue
            yield f"records {path} = {v!r}", {"records.jsonl": joined(r)}
        for name, src in (("index.jsonl", idx), ("payloads.jsonl", pays)):
            r = list(src)
            r[k % len(r)] = orjson.dumps(v)
            yield f"{name} line = {v!r}", {name: joined(r)}
        gov = next(n for n in m if n.endswith(".json") and n.startswith("rules/"))
        j = orjson.loads(m[gov])
        j["entries"] = v
        yield f"rules json entries = {v!r}", {gov: orjson.dumps(j)}
    assert env


def test_malformed_content_signed_by_the_ledger_key_is_a_bundle_error_never_a_crash(
        bundle: Path, source: Source, sandbox: Sandbox, tmp_path: Path) -> None:
    m = members(bundle)
    for n, (what, change) in enumerate(_mutations(m)):
        path = rewrite(bundle, tmp_path / f"m{n}.zip", change=change, resign=source.signer)
        try:
            verify(path, source, sandbox, parallel=False)
        except BundleError:
            pass
        else:
            pytest.fail(f"{what}: verified")
        path.unlink()
