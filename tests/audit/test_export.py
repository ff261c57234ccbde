"""Export bundles: what the zip holds is exactly what the ledger holds, filters select what a
trace search finds, the manifest and its signature hold, a second export proves consistency
with the first, bad filters are refused by name, and a failure leaves no file and no record."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.annotations import annotate
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.types import Submission
from audit.errors import ExportFilterError
from audit.export.create import EXPORT_KIND, BundleSummary, create_bundle, list_exports, manifest_sig_text
from audit.export.select import ExportFilters
from audit.governance.models import register_model
from audit.governance.service import Governance
from audit.query.index import TraceIndex
from audit.query.traces import TraceFilter
from inference.backends import load_backend
from inference.model import ModelFiles
from ledger import NoteSigner
from ledger.append import Ledger
from ledger.checkpoint import SignedCheckpoint
from ledger.merkle import verify_consistency
from ledger.note import open_note
from ledger.retention import purge_payloads
from tests.audit.test_queries import every_page
from tests.audit.test_trace_index import mixed_submissions, transaction_of
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

OFFICER = Principal.local("officer")
ALL = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")


@dataclass
class World:
    ledger: Ledger
    signer: NoteSigner
    annotated: list[int]  # seqs of annotated decisions
    purged_sha: str


def governed_pipeline(ledger: Ledger, sb: Sandbox) -> Pipeline:
    """The default pack bootstrapped, the shipped model registered, a pipeline with the index."""
    op = Principal.local("operator")
    gov = Governance(ledger)
    gov.bootstrap_default(principal=op)
    files = ModelFiles.open()
    register_model(ledger, files, op, backends=["numpy"])
    scorer = load_backend("numpy", files.weights_path)
    return Pipeline(ledger, scorer, gov.load_active(sb), index=TraceIndex())


def build(db: Db, signer: NoteSigner, sb: Sandbox, n: int = 240) -> World:
    ledger = make_ledger(db, signer)
    pipe = governed_pipeline(ledger, sb)
    subs = mixed_submissions(n, seed=17)
    for i in range(0, len(subs), 60):  # several commits: several recorded_at values
        pipe.decide(subs[i:i + 60])
    decisions = _decisions(ledger)
    a, b = decisions[3], decisions[100]
    annotate(ledger, a[1]["trace_id"], OFFICER, "NOTE", "looked at it")
    annotate(ledger, a[1]["trace_id"], OFFICER, "FALSE_POSITIVE", "known customer")
    annotate(ledger, b[1]["trace_id"], OFFICER, "STR_FILED", "filed")
    purged = decisions[5][1]["payload_sha256"]
    purge_payloads(ledger, [purged], "erasure order 42")
    return World(ledger, signer, [a[0], b[0]], purged)


def _decisions(ledger: Ledger) -> list[tuple[int, dict[str, Any]]]:
    with ledger.engine.connect() as conn:
        return [(int(s), orjson.loads(bytes(r))) for s, r in conn.exec_driver_sql(
            "SELECT seq, record FROM ledger_entries WHERE kind = 'decision' ORDER BY seq")]


@pytest.fixture
def world(db: Db, signer: NoteSigner, sandbox: Sandbox) -> Iterator[World]:
    w = build(db, signer, sandbox)
    yield w
    w.ledger.engine.dispose()


def export(w: World, path: Path, **filters: Any) -> BundleSummary:
    start, end = filters.pop("start", ALL[0]), filters.pop("end", ALL[1])
    return create_bundle(w.ledger.engine, w.ledger, w.signer, path, ExportFilters.of(start, end, **filters),
                         OFFICER, page_size=50)


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        assert len(names) == len(set(names))
        return {n: z.read(n) for n in names}


def lines(data: bytes) -> list[bytes]:
    assert data.endswith(b"\n") or not data
    return data.split(b"\n")[:-1]


def entries(ledger: Ledger) -> dict[int, tuple[str, bytes, bytes, bytes]]:
    with ledger.engine.connect() as conn:
        return {int(s): (k, bytes(r), bytes(lh), bytes(ch)) for s, k, r, lh, ch in conn.exec_driver_sql(
            "SELECT seq, kind, record, leaf_hash, chain_hash FROM ledger_entries")}


@pytest.mark.requirement("SEC-17a4f-download", "FATF-R11-available")
def test_the_bundle_holds_exactly_what_the_ledger_holds(world: World, tmp_path: Path) -> None:
    out = tmp_path / "b.zip"
    summary = export(world, out)
    z = members(out)
    manifest = orjson.loads(z["manifest.json"])
    # every file listed with its hash, nothing else in the zip
    assert set(z) - {"manifest.json", "manifest.sig"} == set(manifest["files"])
    for name, sha in manifest["files"].items():
        assert hashlib.sha256(z[name]).hexdigest() == sha, name
    msha = hashlib.sha256(z["manifest.json"]).hexdigest()
    text, _ = open_note(z["manifest.sig"].decode(), [world.signer.verifier])
    assert text == manifest_sig_text(manifest["bundle_id"], msha) and msha == summary.manifest_sha256
    # records: byte-identical entries, ascending, decisions + annotations + context
    stored = entries(world.ledger)
    recs, index = lines(z["records.jsonl"]), [orjson.loads(x) for x in lines(z["index.jsonl"])]
    assert len(recs) == len(index) == manifest["counts"]["records"]
    seqs = [i["seq"] for i in index]
    assert seqs == sorted(set(seqs))
    for rec, i in zip(recs, index, strict=True):
        kind, raw, leaf, chain = stored[i["seq"]]
        assert rec == raw and i["kind"] == kind
        assert i["leaf_hash"] == hashlib.sha256(b"\x00" + rec).hexdigest() == leaf.hex()
        assert i["chain_hash"] == chain.hex() and i["trace_id"] == orjson.loads(rec)["trace_id"]
    kinds = [stored[s][0] for s in seqs]
    all_decisions = sorted(s for s, (k, *_) in stored.items() if k == "decision")
    assert sorted(s for s, k in zip(seqs, kinds, strict=True) if k == "decision") == all_decisions
    assert kinds.count("annotation") == 3 == manifest["counts"]["annotations"]
    assert {"ruleset.bootstrapped", "model.registered", "ledger.payload_purge"} <= set(kinds)
    assert manifest["counts"]["decisions"] == len(all_decisions)
    # payloads: present ones as stored, the purged one listed with its purge record
    with world.ledger.engine.connect() as conn:
        data = {str(s): (None if d is None else bytes(d)) for s, d in conn.exec_driver_sql(
            "SELECT sha256, data FROM ledger_payloads")}
    pay = [orjson.loads(x) for x in lines(z["payloads.jsonl"])]
    named = {orjson.loads(r)["payload_sha256"] for r, k in zip(recs, kinds, strict=True) if k == "decision"}
    assert {p["sha256"] for p in pay} == named
    for p in pay:
        if p["state"] == "present":
            raw = p["data"].encode() if p["encoding"] == "utf-8" else base64.b64decode(p["data"])
            assert raw == data[p["sha256"]] and hashlib.sha256(raw).hexdigest() == p["sha256"]
        else:
            assert p["sha256"] == world.purged_sha and data[p["sha256"]] is None
            assert stored[p["purge_seq"]][0] == "ledger.payload_purge"
    assert manifest["counts"]["payloads_purged"] == 1
    # rules and models: files hash to what the records name
    bodies = [orjson.loads(r)["record"] for r, k in zip(recs, kinds, strict=True) if k == "decision"]
    for sha in {b["rules"]["module_sha256"] for b in bodies}:
        assert hashlib.sha256(z[f"rules/{sha}.wasm"]).hexdigest() == sha
        assert b"[[rule]]" in z[f"rules/{sha}.toml"] or b"[rule" in z[f"rules/{sha}.toml"]
        gov = orjson.loads(z[f"rules/{sha}.json"])
        assert set(gov["entries"]) <= set(seqs)
    for sha in {b["model"]["sha256"] for b in bodies}:
        assert hashlib.sha256(z[f"models/{sha}/weights.npz"]).hexdigest() == sha
        assert orjson.loads(z[f"models/{sha}/card.json"])["model_sha256"] == sha
    # the checkpoint covers every record and is signed by the ledger's key
    cp = SignedCheckpoint.verify(z["checkpoint.txt"].decode(), [world.signer.verifier])
    assert cp.checkpoint.size > seqs[-1] and manifest["checkpoint"]["size"] == cp.checkpoint.size
    # the csv has one row per decision; the report counts agree
    rows = list(csv.DictReader(io.StringIO(z["records.csv"].decode())))
    assert [int(r["seq"]) for r in rows] == all_decisions
    assert sum(int(r["annotations"]) for r in rows) == 3
    html = z["report.html"].decode()
    for o, n in manifest["counts"]["by_decision"].items():
        assert f'data-outcome="{o}">{n}<' in html
    assert world.purged_sha in html and "<script" not in html
    # the export itself is on the record
    (rec,) = [e for e in list_exports(world.ledger.engine) if e["record"]["bundle_id"] == summary.bundle_id]
    assert rec["seq"] == summary.record_seq and rec["record"]["manifest_sha256"] == msha
    assert rec["record"]["checkpoint"]["size"] == cp.checkpoint.size
    assert summary.record_seq not in seqs and summary.record_seq > cp.checkpoint.size - 1  # sealed after


def test_the_multiproof_gives_the_checkpoint_root(world: World, tmp_path: Path) -> None:
    from ledger import multiproof
    out = tmp_path / "b.zip"
    export(world, out, decision="ALLOW")
    z = members(out)
    manifest = orjson.loads(z["manifest.json"])
    recs = lines(z["records.jsonl"])
    seqs = [orjson.loads(x)["seq"] for x in lines(z["index.jsonl"])]
    leaves = {s: hashlib.sha256(b"\x00" + r).digest() for s, r in zip(seqs, recs, strict=True)}
    if "state/records.jsonl" in z:  # format 7: the state lines are proved beside the records
        state_seqs = [orjson.loads(x)["seq"] for x in lines(z["state/index.jsonl"])]
        leaves |= {s: hashlib.sha256(b"\x00" + r).digest()
                   for s, r in zip(state_seqs, lines(z["state/records.jsonl"]), strict=True)}
        leaves = dict(sorted(leaves.items()))
    nodes = multiproof.decode_nodes(z["proofs/nodes.bin"])
    root = multiproof.multiproof_root(manifest["checkpoint"]["size"], leaves, nodes)
    assert base64.b64encode(root).decode() == manifest["checkpoint"]["root"]


def _export_seqs(path: Path, kind: str = "decision") -> list[int]:
    z = members(path)
    return [i["seq"] for i in map(orjson.loads, lines(z["index.jsonl"])) if i["kind"] == kind]


def test_filters_select_exactly_what_a_trace_search_finds(world: World, tmp_path: Path) -> None:
    decisions = _decisions(world.ledger)
    times = sorted({env["recorded_at"] for _, env in decisions})
    assert len(times) >= 3
    with world.ledger.engine.connect() as conn:
        raw = {s: bytes(d) for s, d in conn.exec_driver_sql(
            "SELECT p.sha256, p.data FROM ledger_payloads p WHERE p.data IS NOT NULL")}
    env = next(e for _, e in decisions if e["payload_sha256"] in raw)
    account = transaction_of(env["record"], raw[env["payload_sha256"]]).originator.account
    fired = next(e for _, e in decisions if e["record"]["fired"] and e["recorded_at"] >= times[1])
    rule = fired["record"]["fired"][0]["id"]
    cases: list[dict[str, Any]] = [
        {"start": times[1], "end": times[-1]},
        {"decision": "ALLOW"},
        {"rule": rule},
        {"account": account},
        {"start": times[1], "rule": rule, "decision": fired["record"]["decision"]},
    ]
    for i, c in enumerate(cases):
        out = tmp_path / f"{i}.zip"
        export(world, out, **dict(c))
        start, end = c.get("start", ALL[0]), c.get("end", ALL[1])
        found = every_page(world.ledger.engine, TraceFilter(
            since=start, until=end, decision=c.get("decision"), rule_id=c.get("rule"),
            account=c.get("account"), limit=1000))
        assert _export_seqs(out) == sorted(found), c
        assert found, c


def test_annotations_of_exported_decisions_come_along_and_no_others(world: World, tmp_path: Path) -> None:
    a, b = world.annotated
    with world.ledger.engine.connect() as conn:
        at = conn.exec_driver_sql(f"SELECT recorded_at FROM ledger_entries WHERE seq = {a}").scalar()
    out = tmp_path / "one.zip"
    export(world, out, start=at, end="2100-01-01T00:00:00Z")
    notes = [orjson.loads(r)["record"] for r, i in zip(lines(members(out)["records.jsonl"]),
                                                       lines(members(out)["index.jsonl"]), strict=True)
             if orjson.loads(i)["kind"] == "annotation"]
    assert sorted(n["refers_to"]["seq"] for n in notes) == [a, a, b]


def test_a_second_export_proves_consistency_with_the_first(world: World, tmp_path: Path) -> None:
    first = export(world, tmp_path / "1.zip")
    annotate(world.ledger, _decisions(world.ledger)[0][1]["trace_id"], OFFICER, "NOTE", "later")
    world.ledger.checkpoint()
    second = export(world, tmp_path / "2.zip")
    z = members(tmp_path / "2.zip")
    manifest = orjson.loads(z["manifest.json"])
    assert manifest["previous"] == {"bundle_id": first.bundle_id, "checkpoint_size": first.checkpoint["size"],
                                    "checkpoint_root": first.checkpoint["root"]}
    proof = orjson.loads(z["proofs/consistency.json"])
    assert proof["old_size"] == first.checkpoint["size"] < proof["new_size"] == second.checkpoint["size"]
    b64 = base64.b64decode
    verify_consistency(proof["old_size"], proof["new_size"], [b64(h) for h in proof["hashes"]],
                       b64(proof["old_root"]), b64(proof["new_root"]))
    prev = SignedCheckpoint.verify(z["checkpoints/previous.txt"].decode(), [world.signer.verifier])
    assert base64.b64encode(prev.checkpoint.root).decode() == first.checkpoint["root"]
    assert "proofs/consistency.json" not in members(tmp_path / "1.zip")


@pytest.mark.parametrize(("given", "field"), [
    ({"start": None}, "from"),
    ({"end": None}, "to"),
    ({"start": "yesterday"}, "from"),
    ({"start": "2026-01-01T00:00:00"}, "from"),  # no UTC offset
    ({"start": "2026-02-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "to"),
    ({"decision": "MAYBE"}, "decision"),
    ({"rule": "not a rule"}, "rule"),
    ({"account": "  "}, "account"),
])
def test_bad_filters_are_refused_naming_the_field(given: dict[str, Any], field: str) -> None:
    args = {"start": ALL[0], "end": ALL[1], **given}
    with pytest.raises(ExportFilterError) as e:
        ExportFilters.of(args.pop("start"), args.pop("end"), **args)
    assert e.value.field == field


def _record_count(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.exec_driver_sql(
            f"SELECT count(*) FROM ledger_entries WHERE kind = '{EXPORT_KIND}'").scalar_one())


def test_nothing_matched_and_an_existing_file_are_refused(world: World, tmp_path: Path) -> None:
    with pytest.raises(ExportFilterError) as e:
        export(world, tmp_path / "none.zip", start="2001-01-01T00:00:00Z", end="2001-01-02T00:00:00Z")
    assert e.value.field == "filters" and not (tmp_path / "none.zip").exists()
    (tmp_path / "there.zip").write_bytes(b"keep")
    with pytest.raises(ExportFilterError) as e:
        export(world, tmp_path / "there.zip")
    assert e.value.field == "out" and (tmp_path / "there.zip").read_bytes() == b"keep"
    assert _record_count(world.ledger) == 0


def test_a_failure_midway_leaves_no_file_and_no_record(world: World, tmp_path: Path) -> None:
    out = tmp_path / "exports" / "b.zip"

    def boom(done: int, total: int) -> None:
        if done >= 100:
            raise RuntimeError("disk unplugged")

    with pytest.raises(RuntimeError):
        create_bundle(world.ledger.engine, world.ledger, world.signer, out, ExportFilters.of(*ALL), OFFICER,
                      page_size=50, progress=boom)
    assert list(out.parent.iterdir()) == []  # no bundle, no temporary left behind
    assert _record_count(world.ledger) == 0


def test_a_failed_seal_leaves_no_file(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger import LedgerUnavailableError

    real = world.ledger.append_many

    def down(records: Any, **k: Any) -> Any:
        if any(r.kind == "export.created" for r in records):
            raise LedgerUnavailableError("injected: commit failed")
        return real(records, **k)  # the summary sealed at the window's right edge still commits

    monkeypatch.setattr(world.ledger, "append_many", down)
    with pytest.raises(LedgerUnavailableError):
        export(world, tmp_path / "out" / "b.zip")
    assert list((tmp_path / "out").iterdir()) == []
    assert _record_count(world.ledger) == 0


def test_the_created_at_and_bundle_id_follow_the_clock(world: World, tmp_path: Path) -> None:
    now = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    s = create_bundle(world.ledger.engine, world.ledger, world.signer, tmp_path / "b.zip",
                      ExportFilters.of(*ALL), OFFICER, now=now)
    assert s.created_at == "2031-05-06T07:08:09.123456Z"
    assert int(s.bundle_id.replace("-", "")[:12], 16) == int(now.timestamp() * 1000)
    assert s.bundle_id[14] == "7"


# -- records.csv: no cell a spreadsheet would run ----------------------------------------------

# (a tab or CR never gets this far: messages refuse control characters; csv_cell is tested on them)
HOSTILE_REFERENCES = ['=HYPERLINK("http://e.vil/a","x")', "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
                      "@SUM(1+1)*cmd|' /C calc'!A0", "ORDINARY,WITH \"QUOTES\""]


def _with_reference(sub: Submission, reference: str) -> Submission:
    doc = orjson.loads(sub.transaction.canonical_bytes())
    doc["reference"] = reference
    (got,) = Submission.parse(orjson.dumps(doc), "json", sub.principal, sub.received_at)
    assert isinstance(got, Submission), got
    return got


@pytest.mark.parametrize("value, cell", [
    ('=HYPERLINK("http://e.vil/a","x")', '"\'=HYPERLINK(""http://e.vil/a"",""x"")"'),
    ("+1", "\"'+1\""), ("-1", "\"'-1\""), ("@A1", "\"'@A1\""), ("\tx", "\"'\tx\""), ("\rx", "\"'\rx\""),
    ("a,b", '"a,b"'), ('say "hi"', '"say ""hi"""'), ("line\nbreak", '"line\nbreak"'), ("0.25", "0.25"),
    ("2026-12-03T10:00:00.000000Z", "2026-12-03T10:00:00.000000Z"), ("", ""), ("a=b", "a=b"),
])
def test_csv_cells_are_neutralised_and_quoted(value: str, cell: str) -> None:
    from audit.export.report import csv_cell, csv_line

    assert csv_cell(value) == cell
    line = csv_line(["1", value, "x"])
    assert line == f"1,{cell},x\r\n"
    (parsed,) = csv.reader(io.StringIO(line, newline=""))
    assert parsed == ["1", "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value, "x"]


def test_formula_like_references_reach_records_csv_neutralised(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                              tmp_path: Path) -> None:
    from audit.bundle.verify import verify_bundle

    ledger = make_ledger(db, signer)
    op = Principal.local("operator")
    gov = Governance(ledger)
    gov.bootstrap_default(principal=op)
    files = ModelFiles.open()
    register_model(ledger, files, op, backends=["numpy"])
    pipe = Pipeline(ledger, load_backend("numpy", files.weights_path), gov.load_active(sandbox),
                    index=TraceIndex())
    subs = mixed_submissions(len(HOSTILE_REFERENCES) + 3, seed=17)
    for i, ref in enumerate(HOSTILE_REFERENCES):
        subs[i] = _with_reference(subs[i], ref)
    pipe.decide(subs)
    w = World(ledger, signer, [], "")
    try:
        out = tmp_path / "b.zip"
        export(w, out)
        raw = members(out)["records.csv"]
        assert b'"\'=HYPERLINK(""http://e.vil/a"",""x"")"' in raw
        rows = list(csv.reader(io.StringIO(raw.decode(), newline="")))
        references = [r[14] for r in rows[1:]]
        for ref in HOSTILE_REFERENCES[:-1]:
            assert "'" + ref in references  # shown as text, the exact value kept after the quote
        assert HOSTILE_REFERENCES[-1] in references  # an ordinary value with a comma: quoted, not altered
        for row in rows:  # no cell opens with what a spreadsheet runs
            assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row), row
        assert len(rows) == len(subs) + 1 and all(len(r) == 17 for r in rows)
        report = verify_bundle(out, [signer.verifier], sandbox=sandbox)
        assert report.decisions == len(subs)
    finally:
        ledger.engine.dispose()
