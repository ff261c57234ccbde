"""A bundle cut for one case (``sealtrail.bundle/5``, written now as ``/9`` with ``manifest.case`` set): an
examiner verifies offline the case's whole history, re-derived by the case fold from the sealed records
it carries, and its filed report's hash; a rationale edited, an event dropped or a report swapped is
caught and named, and no other case's rationale is in the bundle. It carries the compliance facts of
the period the case's records span, recomputed by the verifier; an edited fact or period fails."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select, update

from audit.annotations import annotate
from audit.bundle.case_doc import CASE_FILE, CaseDoc
from audit.bundle.cases import open_withheld
from audit.bundle.verify import BundleReport, verify_bundle
from audit.cases.events import EVENT_KIND, event_body
from audit.cases.policy import DeadlinePolicy
from audit.cases.service import act, set_policy
from audit.cases.store import catch_up
from audit.cases.tables import alerts, cases
from audit.errors import BundleError, BundleTampered, DerivedRowError, ExportFilterError
from audit.export.create import CASE_EXPORT_SCHEMA, create_case_bundle, list_exports
from ledger import NoteSigner, Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.retention import place_hold
from tests.audit.bundle_fixture import joined, lines, members, now_fixed, rewrite
from tests.audit.cases.test_cases import ALICE, BOB
from tests.audit.test_export import OFFICER, governed_pipeline
from tests.audit.test_trace_index import mixed_submissions
from tests.conftest import ORIGIN, Db, make_ledger
from tests.test_layers import run_without_database
from wasm_rules import Sandbox

SECRET = "OTHER-CASE-RATIONALE"  # every rationale of the other case carries it
XML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<report><rentity_id>42</rentity_id>'
       b"<reason>structuring below the threshold</reason></report>\n")


@dataclass
class Worked:
    ledger: Ledger
    signer: NoteSigner
    case_id: int
    other: int
    policy_seq: int
    seqs: dict[str, int]  # what -> seq of the event sealed for it


def _entry(ledger: Ledger, seq: int) -> bytes:
    with ledger.engine.connect() as conn:
        e = store.entries
        return bytes(conn.execute(select(e.c.record).where(e.c.seq == seq)).scalar_one())


def work_a_case(ledger: Ledger, signer: NoteSigner, sb: Sandbox) -> Worked:
    """Decisions under the default deadline policy and then a sealed one; a case with held
    payments worked to a filed report and closed, an event that lost a race, a link, an
    annotation and a legal hold; another case commented on before, between and after."""
    pipe = governed_pipeline(ledger, sb)
    subs = mixed_submissions(400)
    pipe.decide(subs[:200])
    policy_seq = set_policy(ledger, DeadlinePolicy(version="bank-2026-12", review_business_days=3), ALICE,
                            "review within three business days from December")
    pipe.decide(subs[200:])
    catch_up(ledger.engine)
    with ledger.engine.connect() as conn:
        all_cases = conn.execute(select(cases)).all()
        by_case: dict[int, list[Any]] = {}
        for a in conn.execute(select(alerts).order_by(alerts.c.seq)):
            by_case.setdefault(int(a.case_id), []).append(a)
    held = [c for c in all_cases if any(a.outcome == "HOLD" for a in by_case[c.case_id])
            and all(a.outcome != "BLOCK" for a in by_case[c.case_id])]
    target = max(held, key=lambda c: (len({a.policy_seq for a in by_case[c.case_id]}),
                                      any(a.policy_seq for a in by_case[c.case_id]), c.alerts))
    other = next(c for c in all_cases if c.case_id != target.case_id and c.alerts >= 1)
    members_ = by_case[target.case_id]
    seqs: dict[str, int] = {}
    seqs["other_before"] = act(ledger, ALICE, "comment", case=other.case_id,
                               rationale=f"{SECRET}: before").seq
    seqs["assign"] = act(ledger, ALICE, "assign", case=target.case_id, assignee=BOB).seq
    first_held = next(a for a in members_ if a.payment == "HELD")
    for a in members_:
        if a.payment == "HELD":
            seqs[f"release {a.seq}"] = act(ledger, BOB, "release", alert=a.seq,
                                           rationale="beneficiary verified by phone").seq
    leaf = hashlib.sha256(b"\x00" + _entry(ledger, first_held.seq)).hexdigest()
    late = event_body({"alert": {"trace_id": first_held.trace_id, "seq": first_held.seq, "leaf_hash": leaf}},
                      "reject", ALICE.to_json(), rationale="reject it: too late, it was released")
    (r,) = ledger.append_many([Record.from_canonical_body(EVENT_KIND, canonical_bytes(late))])
    seqs["late reject"] = r.seq
    seqs["link"] = act(ledger, BOB, "link", case=target.case_id, link=other.case_id,
                       rationale="same beneficiary network").seq
    # a link sealed on the other case names this one: about both, so the bundle carries it
    seqs["link back"] = act(ledger, ALICE, "link", case=other.case_id, link=target.case_id,
                            rationale="linked from the other side too").seq
    seqs["other_between"] = act(ledger, ALICE, "comment", case=other.case_id,
                                rationale=f"{SECRET}: between").seq
    annotate(ledger, members_[0].trace_id, BOB, "NOTE", "customer called about the held payment")
    seqs["file_report"] = act(ledger, BOB, "file_report", case=target.case_id, report=XML,
                              rationale="STR to the FIU").seq
    place_hold(ledger, f"STR-{target.case_id}", seqs["file_report"], seqs["file_report"],
               "STR filed: keep the report")
    seqs["close"] = act(ledger, BOB, "close", case=target.case_id, disposition="REPORT_FILED",
                        rationale="STR filed; relationship exited").seq
    seqs["other_after"] = act(ledger, ALICE, "comment", case=other.case_id, rationale=f"{SECRET}: after").seq
    return Worked(ledger, signer, target.case_id, other.case_id, policy_seq, seqs)


def verify(path: Path, w: Worked, sb: Sandbox) -> BundleReport:
    return verify_bundle(path, [w.signer.verifier], sandbox=sb, now=now_fixed)


def failures(path: Path, w: Worked, sb: Sandbox) -> list[BundleError]:
    with pytest.raises(BundleError) as info:
        verify(path, w, sb)
    return list(info.value.failures)


@pytest.fixture(scope="module")
def worked(tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox) -> Worked:
    signer = NoteSigner.generate(ORIGIN)
    db = Db(f"sqlite:///{tmp_path_factory.mktemp('case') / 'ledger.db'}", "sqlite")
    return work_a_case(make_ledger(db, signer), signer, sandbox)


@pytest.fixture(scope="module")
def bundle(worked: Worked, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "case.zip"
    create_case_bundle(worked.ledger.engine, worked.ledger, worked.signer, out, worked.case_id, OFFICER,
                       now=now_fixed())
    return out


# --- a worked case, exported and verified --------------------------------------------------------


def _check_history(report: BundleReport, w: Worked) -> None:
    case = report.case
    assert case is not None and case.reproduced
    assert case.state is not None
    assert (case.state["disposition"], case.state["open_alerts"], case.state["reports"]) == (
        "REPORT_FILED", 0, 1)
    assert case.state["last_report"] == hashlib.sha256(XML).hexdigest()
    assert case.state["links"] == str(w.other)
    events = [h for h in case.history if h["what"] not in ("alert opened", "deadline policy", "annotation")]
    (note,) = [h for h in case.history if h["what"] == "annotation"]
    assert (note["rationale"], note["by"], note["details"]) == (
        "customer called about the held payment", BOB.subject, {"disposition": "NOTE"})
    assert [h["seq"] for h in events] == sorted(v for k, v in w.seqs.items() if not k.startswith("other"))
    back = next(h for h in events if h["seq"] == w.seqs["link back"])
    assert (back["target"], back["details"]["link"], back["applied"]) == (f"case {w.other}", w.case_id, True)
    by_seq = {h["seq"]: h for h in case.history}
    close = by_seq[w.seqs["close"]]
    assert (close["what"], close["by"], close["rationale"], close["applied"]) == (
        "close", BOB.subject, "STR filed; relationship exited", True)
    assert close["details"]["disposition"] == "REPORT_FILED"
    assert by_seq[w.seqs["assign"]]["details"]["assignee"] == BOB.subject
    late = by_seq[w.seqs["late reject"]]
    assert late["applied"] is False and "no payment of it is held" in late["why"]
    assert by_seq[w.seqs["file_report"]]["details"]["report"] == hashlib.sha256(XML).hexdigest()
    opened = [h for h in case.history if h["what"] == "alert opened"]
    assert [h["seq"] for h in opened] == [a["seq"] for a in case.alerts]
    assert len(opened) == case.state["alerts"]
    (filed,) = case.reports
    assert (filed["seq"], filed["sha256"], filed["amends"]) == (w.seqs["file_report"],
                                                                hashlib.sha256(XML).hexdigest(), None)
    assert filed["payload"] == f"present, {len(XML)} bytes" and filed["holds"] == [f"STR-{w.case_id}"]
    assert [h["hold_id"] for h in case.holds] == [f"STR-{w.case_id}"] and case.notes == []
    assert {o["outcome"] for o in case.outcomes} == {"RELEASED"}
    text = case.text()
    assert "STR filed; relationship exited" in text and hashlib.sha256(XML).hexdigest() in text
    assert "NOT APPLIED" in text


@pytest.mark.requirement("SEC-17a4f-download", "FATF-R11-available")
def test_a_worked_case_exports_and_verifies_offline_with_its_whole_history(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    w = work_a_case(make_ledger(db, signer), signer, sandbox)
    out = tmp_path / "case.zip"
    summary = create_case_bundle(w.ledger.engine, w.ledger, signer, out, w.case_id, OFFICER, now=now_fixed())
    report = verify(out, w, sandbox)
    _check_history(report, w)
    assert report.format == 9 and report.decisions == len(report.case.alerts) > 0  # type: ignore[union-attr]
    assert report.replayed == report.decisions and report.annotations == 1 and report.policies >= 1
    assert report.holds == 1 and report.payloads_present == report.decisions + 1  # the report's bytes
    assert report.completeness is not None and report.completeness.proven is False  # said, not failed
    assert summary.filters is None and summary.case is not None and summary.case["case_id"] == w.case_id
    (rec,) = [e for e in list_exports(w.ledger.engine) if e["record"]["bundle_id"] == summary.bundle_id]
    assert rec["record"]["schema"] == CASE_EXPORT_SCHEMA and rec["record"]["filters"] is None
    assert rec["record"]["case"] == {"case_id": w.case_id, "to_seq": summary.case["to_seq"]}
    w.ledger.engine.dispose()


def test_the_bundle_holds_the_policy_in_force_for_each_alert(worked: Worked, bundle: Path) -> None:
    doc = CaseDoc.parse(members(bundle)[CASE_FILE])
    kinds = {orjson.loads(x)["seq"]: orjson.loads(x)["kind"] for x in lines(members(bundle)["index.jsonl"])}
    assert doc.policies == tuple(sorted({a["policy_seq"] for a in doc.alerts} - {0}))
    assert all(kinds[s] == "alert_policy" for s in doc.policies)
    assert {a["policy_seq"] for a in doc.alerts} <= {0, worked.policy_seq}


def test_the_bundle_holds_no_other_cases_rationale_only_their_leaf_hashes(worked: Worked,
                                                                         bundle: Path) -> None:
    m = members(bundle)
    assert not [name for name, data in m.items() if SECRET.encode() in data]
    doc = CaseDoc.parse(m[CASE_FILE])
    others = {worked.seqs[k] for k in ("other_before", "other_between", "other_after")}
    assert others <= {s for s, _ in doc.withheld}
    for seq, leaf in doc.withheld:  # the ledger's own leaves, so the bank can open them on request
        record = _entry(worked.ledger, seq)
        assert hashlib.sha256(b"\x00" + record).digest() == leaf
        env = open_withheld(doc, seq, record)
        assert env["kind"] == "case_event" and env["record"]["target"] != {"case": worked.case_id}
    carried = {orjson.loads(x)["seq"] for x in lines(m["index.jsonl"])}
    assert not carried & {s for s, _ in doc.withheld}


def test_opening_a_withheld_leaf_refuses_wrong_bytes_and_an_event_about_the_case(
        worked: Worked, bundle: Path) -> None:
    doc = CaseDoc.parse(members(bundle)[CASE_FILE])
    seq = worked.seqs["other_between"]
    with pytest.raises(BundleTampered, match="hashes to leaf"):
        open_withheld(doc, seq, _entry(worked.ledger, seq).replace(b"between", b"betwixt"))
    # a bundle that had withheld an event of the case itself: opening it shows it
    close = worked.seqs["close"]
    record = _entry(worked.ledger, close)
    hiding = CaseDoc(**{**doc.__dict__, "withheld": ((close, hashlib.sha256(b"\x00" + record).digest()),)})
    with pytest.raises(BundleTampered, match=f"about case {worked.case_id}"):
        open_withheld(hiding, close, record)


@pytest.mark.requirement("SEC-17a4f-download")
def test_the_report_page_shows_the_history_and_the_report_hash(worked: Worked, bundle: Path) -> None:
    page = members(bundle)["report.html"].decode()
    assert f'data-case="{worked.case_id}"' in page
    assert hashlib.sha256(XML).hexdigest() in page and "STR filed; relationship exited" in page
    for seq in (worked.seqs["assign"], worked.seqs["close"], worked.seqs["late reject"]):
        assert f'data-history="{seq}"' in page
    assert SECRET not in page


def test_an_older_format_bundle_vector_still_verifies(sandbox: Sandbox) -> None:
    from ledger.note import NoteVerifier

    v4 = Path(__file__).parents[1] / "vectors" / "bundle-v4"
    key = NoteVerifier.from_vkey((v4 / "trusted.vkey").read_text().strip())
    report = verify_bundle(v4 / "bundle.zip", [key], sandbox=sandbox, now=now_fixed)
    assert (report.format, report.case) == (4, None) and report.completeness is not None
    assert report.completeness.proven


# --- tampering ------------------------------------------------------------------------------------


def _edit(bundle: Path, out: Path, w: Worked, fn: Callable[[dict[str, bytes], dict[str, Any]], None]) -> Path:
    """Rewrite the bundle as a dishonest exporter holding the ledger's key could: ``fn`` edits the
    members and the manifest, which is then re-hashed and re-signed."""
    def edit(m: dict[str, bytes]) -> None:
        manifest = orjson.loads(m["manifest.json"])
        fn(m, manifest)
        m["manifest.json"] = canonical_bytes(manifest)

    return rewrite(bundle, out, edit=edit, resign=w.signer)


def _line_of(m: dict[str, bytes], seq: int) -> int:
    return next(i for i, x in enumerate(lines(m["index.jsonl"])) if orjson.loads(x)["seq"] == seq)


def _drop_line(m: dict[str, bytes], manifest: dict[str, Any], seq: int) -> bytes:
    """Drop the line of ``seq`` from records and index, the manifest's counts and range made to
    agree; its leaf hash back."""
    i = _line_of(m, seq)
    leaf = bytes.fromhex(orjson.loads(lines(m["index.jsonl"])[i])["leaf_hash"])
    for name in ("records.jsonl", "index.jsonl"):
        got = lines(m[name])
        del got[i]
        m[name] = joined(got)
    seqs = [orjson.loads(x)["seq"] for x in lines(m["index.jsonl"])]
    manifest["counts"]["records"] -= 1
    manifest["counts"]["case_events"] -= 1
    manifest["range"] = {"first_seq": seqs[0], "last_seq": seqs[-1],
                         "contiguous": seqs[-1] - seqs[0] + 1 == len(seqs)}
    return leaf


def test_the_untouched_bundle_verifies(worked: Worked, bundle: Path, sandbox: Sandbox) -> None:
    _check_history(verify(bundle, worked, sandbox), worked)


def test_an_edited_rationale_fails_naming_the_record(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                     tmp_path: Path) -> None:
    seq = worked.seqs["close"]

    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        recs = lines(m["records.jsonl"])
        i = _line_of(m, seq)
        recs[i] = recs[i].replace(b"relationship exited", b"no concerns found")
        m["records.jsonl"] = joined(recs)

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    assert any(e.kind == "leaf_hash" and e.seq == seq for e in errs)
    assert "proof.root" in {e.kind for e in errs}


def test_a_dropped_case_event_fails_completeness_naming_it(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                           tmp_path: Path) -> None:
    seq = worked.seqs["late reject"]  # not applied: the fold would not miss it, completeness does

    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        _drop_line(m, manifest, seq)

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    assert [(e.kind, e.seq) for e in errs if e.kind.startswith("case.")] == [
        ("case.completeness.missing", seq)]


def test_an_event_moved_to_the_withheld_leaves_changes_the_case_and_fails(
        worked: Worked, bundle: Path, sandbox: Sandbox, tmp_path: Path) -> None:
    seq = worked.seqs["close"]  # dropped from everything the bundle states, its leaf kept as withheld

    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        leaf = _drop_line(m, manifest, seq)
        doc = CaseDoc.parse(m[CASE_FILE])
        doc = CaseDoc(**{**doc.__dict__, "events": tuple(e for e in doc.events if e["seq"] != seq),
                         "withheld": tuple(sorted((*doc.withheld, (seq, leaf))))})
        m[CASE_FILE] = doc.to_bytes()
        manifest["case"]["events"] -= 1
        manifest["case"]["withheld"] += 1

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    assert {e.kind for e in errs} == {"case.state"}  # the proofs hold: the same leaves, re-labelled
    assert worked.case_id in {e.seq for e in errs}  # the case row, and its closed alerts, differ
    assert any("disposition: stated 'REPORT_FILED'" in e.detail for e in errs)


def test_a_forged_withheld_leaf_fails_the_proof(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                tmp_path: Path) -> None:
    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        doc = CaseDoc.parse(m[CASE_FILE])
        (s0, _), *rest = doc.withheld
        m[CASE_FILE] = CaseDoc(**{**doc.__dict__, "withheld": ((s0, b"\x11" * 32), *rest)}).to_bytes()

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    assert "proof.root" in {e.kind for e in errs}


def test_a_swapped_report_payload_fails_its_hash(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                 tmp_path: Path) -> None:
    sha = hashlib.sha256(XML).hexdigest()

    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        pays = lines(m["payloads.jsonl"])
        i = next(i for i, x in enumerate(pays) if orjson.loads(x)["sha256"] == sha)
        pays[i] = canonical_bytes({"data": XML.replace(b"structuring", b"nothing").decode(),
                                   "encoding": "utf-8", "sha256": sha, "state": "present"})
        m["payloads.jsonl"] = joined(pays)

    with pytest.raises(BundleError) as info:
        verify(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    errs = list(info.value.failures)
    assert [(e.kind, e.seq) for e in errs] == [("payload.hash", worked.seqs["file_report"])]
    report = info.value.report  # type: ignore[attr-defined]
    assert report.case.reports[0]["payload"] == "unverified"


def test_a_record_of_another_case_smuggled_in_is_unrelated(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                          tmp_path: Path) -> None:
    seq = worked.seqs["other_between"]
    record = _entry(worked.ledger, seq)
    with worked.ledger.engine.connect() as conn:
        e = store.entries
        row = conn.execute(select(e.c.leaf_hash, e.c.chain_hash, e.c.trace_id).where(e.c.seq == seq)).one()
    index = canonical_bytes({"chain_hash": bytes(row.chain_hash).hex(), "kind": "case_event",
                             "leaf_hash": bytes(row.leaf_hash).hex(), "seq": seq, "trace_id": row.trace_id})

    def fn(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
        at = next(i for i, x in enumerate(idx) if orjson.loads(x)["seq"] > seq)
        recs.insert(at, record)
        idx.insert(at, index)
        m["records.jsonl"], m["index.jsonl"] = joined(recs), joined(idx)

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    assert ("case.completeness.unrelated", seq) in {(e.kind, e.seq) for e in errs}


def _case_mutations(m: dict[str, bytes]) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Malformed case content as a dishonest or broken exporter could sign it."""
    recs, idx = lines(m["records.jsonl"]), lines(m["index.jsonl"])
    doc = orjson.loads(m[CASE_FILE])
    weird: list[object] = [None, "x", {"seq": "1"}, [1, [2]], 2**62]
    kinds = {orjson.loads(x)["kind"]: i for i, x in enumerate(idx)}  # the last line of each kind
    link = next(i for i, x in enumerate(recs) if b'"action":"link"' in x)
    dump = orjson.dumps
    for v in weird:
        for key in ("case", "alerts", "events", "outcomes", "policies", "holds", "withheld", "search",
                    "case_id", "schema"):
            yield f"case.json {key} = {v!r}", {CASE_FILE: dump({**doc, key: v})}
        for key in ("state", "seq", "applied", "policy_seq"):
            rows = [{**r, key: v} for r in doc["alerts"]]
            yield f"case.json alerts[].{key} = {v!r}", {CASE_FILE: dump({**doc, "alerts": rows})}
        for i in (kinds["case_event"], link, kinds["alert_policy"], kinds["ledger.legal_hold"]):
            for path in (("record",), ("record", "target"), ("record", "action"), ("record", "principal"),
                         ("record", "link"), ("record", "policy"), ("record", "seq_from")):
                e = orjson.loads(recs[i])
                target = e
                for p in path[:-1]:
                    target = target[p]
                target[path[-1]] = v
                r = list(recs)
                r[i] = dump(e, option=orjson.OPT_SORT_KEYS)
                if r[i] != recs[i]:
                    yield f"line {i} {path} = {v!r}", {"records.jsonl": joined(r)}


def test_malformed_case_content_signed_by_the_ledger_key_is_a_bundle_error_never_a_crash(
        worked: Worked, bundle: Path, sandbox: Sandbox, tmp_path: Path) -> None:
    for n, (what, change) in enumerate(_case_mutations(members(bundle))):
        path = rewrite(bundle, tmp_path / f"m{n}.zip", change=change, resign=worked.signer)
        try:
            verify_bundle(path, [worked.signer.verifier], sandbox=sandbox, now=now_fixed, parallel=False)
        except BundleError:
            pass
        else:
            pytest.fail(f"{what}: verified")
        path.unlink()


# --- the compliance facts of the case's period (format 9) ----------------------------------------


def _lines_in_range(m: dict[str, bytes]) -> list[dict[str, Any]]:
    """The envelopes of ``records.jsonl`` whose seq lies in the case's search range."""
    case = orjson.loads(m["manifest.json"])["case"]
    envs = [orjson.loads(x) for x in lines(m["records.jsonl"])]
    seqs = [orjson.loads(x)["seq"] for x in lines(m["index.jsonl"])]
    return [e for s, e in zip(seqs, envs, strict=True) if case["from_seq"] <= s <= case["to_seq"]]


@pytest.mark.requirement("SEC-17a4f-download")
def test_the_case_bundle_carries_the_facts_of_its_period_and_the_verifier_recomputes_them(
        worked: Worked, bundle: Path, sandbox: Sandbox) -> None:
    from audit.compliance.store import compliance_report

    m = members(bundle)
    manifest = orjson.loads(m["manifest.json"])
    sec = manifest["compliance"]
    assert manifest["schema"] == "sealtrail.bundle/9" and manifest["case"]["case_id"] == worked.case_id
    assert (manifest["filters"], manifest["completeness"], sec["scope"]) == (None, None, "case")
    # the period: the case's first decision to its last record carried, that instant included
    first = orjson.loads(_entry(worked.ledger, worked.case_id))["recorded_at"]
    last = max(e["recorded_at"] for e in _lines_in_range(m))
    assert sec["period"]["from"] == first == min(e["recorded_at"] for e in _lines_in_range(m))
    assert last < sec["period"]["to"] and sec["period"]["to"][:-8] == last[:-8]  # one microsecond on
    carried = orjson.loads(m["compliance.json"])
    facts = carried["facts"]
    assert carried["scope"] == "case" and facts["period"] == sec["period"]
    # the decisions counted are the case's; a case carries no refusal
    assert facts["decisions"]["total"] == manifest["counts"]["decisions"] > 0
    assert facts["decisions"]["by_decision"] == manifest["counts"]["by_decision"]
    assert facts["refusals"] == {"total": 0, "by_kind": {}}
    assert [h["hold_id"] for h in facts["legal_holds"]["in_force"]] == [f"STR-{worked.case_id}"]
    assert facts["legal_holds"]["placed"] == 1
    assert [k["vkey"] for k in facts["keys"]["history"]] == [worked.signer.verifier.vkey]
    assert [v["active_at_start"] for v in facts["rulesets"]] == [True]
    report = verify(bundle, worked, sandbox)
    assert report.compliance == facts and report.format == 9
    # the history facts are the ledger's for that period (its decisions are every case's, not one's)
    from audit.compliance.facts import Period

    ledger_facts = compliance_report(worked.ledger.engine, Period(sec["period"]["from"], sec["period"]["to"]))
    for key in ("period", "keys", "legal_holds", "purges", "rulesets"):
        assert ledger_facts.facts[key] == facts[key], key
    assert ledger_facts.facts["decisions"]["total"] >= facts["decisions"]["total"]


def test_the_case_bundle_s_report_page_shows_the_compliance_facts(worked: Worked, bundle: Path) -> None:
    m = members(bundle)
    page = m["report.html"].decode()
    facts = orjson.loads(m["compliance.json"])["facts"]
    assert '<section id="compliance" data-compliance="1">' in page and "scope: case" in page
    assert f'<td data-fact="decisions.total">{facts["decisions"]["total"]}</td>' in page
    assert f'<td data-fact="legal_holds.in_force[0].hold_id">STR-{worked.case_id}</td>' in page
    assert f'<td data-fact="keys.history[0].vkey">{worked.signer.verifier.vkey}</td>' in page
    assert page.index(f'data-case="{worked.case_id}"') < page.index('id="compliance"')  # the case, then them


def test_an_edited_fact_of_the_case_bundle_fails_naming_it(worked: Worked, bundle: Path, sandbox: Sandbox,
                                                           tmp_path: Path) -> None:
    m = members(bundle)
    doc = orjson.loads(m["compliance.json"])
    doc["facts"]["legal_holds"]["in_force"] = []  # the STR hold said not to be in force
    edited = rewrite(bundle, tmp_path / "edited.zip", change={"compliance.json": canonical_bytes(doc)},
                     resign=worked.signer)
    errs = failures(edited, worked, sandbox)
    assert [(e.kind, e.file) for e in errs] == [("compliance.facts", "compliance.json")]
    assert "legal_holds.in_force" in errs[0].detail
    # the page edited, the file left alone
    total = doc["facts"]["decisions"]["total"]
    page = m["report.html"].decode().replace(f'data-fact="decisions.total">{total}<',
                                             f'data-fact="decisions.total">{total + 1}<')
    assert page != m["report.html"].decode()
    shown = rewrite(bundle, tmp_path / "page.zip", change={"report.html": page.encode()},
                    resign=worked.signer)
    assert [e.kind for e in failures(shown, worked, sandbox)] == ["compliance.report"]


def test_a_case_bundle_stating_another_period_fails_even_with_facts_that_agree(
        worked: Worked, bundle: Path, sandbox: Sandbox, tmp_path: Path) -> None:
    """An exporter that shortens the period (its facts recomputed for it, so that they agree) to leave
    out a hold placed late in the case is caught: the period is the span of the case's records."""
    from audit.compliance.facts import Period, compute_facts

    m = members(bundle)
    manifest = orjson.loads(m["manifest.json"])
    hold_at = orjson.loads(_entry(worked.ledger, worked.seqs["file_report"]))["recorded_at"]
    period = Period(manifest["compliance"]["period"]["from"], hold_at)
    proofs = orjson.loads(m["compliance/proofs.json"])["entries"]
    history = [(p["seq"], orjson.loads(x)) for p, x in zip(proofs, lines(m["compliance/records.jsonl"]),
                                                           strict=True)]
    decisions = [(orjson.loads(i)["seq"], orjson.loads(r)) for r, i in
                 zip(lines(m["records.jsonl"]), lines(m["index.jsonl"]), strict=True)
                 if orjson.loads(i)["kind"] == "decision"]
    doc = orjson.loads(m["compliance.json"])
    doc["facts"] = compute_facts(period, [*history, *decisions])
    assert doc["facts"]["legal_holds"]["placed"] == 0  # what the shorter period hides

    def fn(mm: dict[str, bytes], man: dict[str, Any]) -> None:
        mm["compliance.json"] = canonical_bytes(doc)
        man["compliance"]["period"] = period.to_json()

    errs = failures(_edit(bundle, tmp_path / "t.zip", worked, fn), worked, sandbox)
    kinds = [e.kind for e in errs]  # the page still shows the old facts: compliance.report too
    assert "compliance.period" in kinds and "compliance.facts" not in kinds  # the facts agree with it
    (period_err,) = [e for e in errs if e.kind == "compliance.period"]
    assert manifest["compliance"]["period"]["to"] in period_err.detail


def test_a_case_bundle_without_its_facts_or_with_a_window_scope_is_refused(
        worked: Worked, bundle: Path, sandbox: Sandbox, tmp_path: Path) -> None:
    def dropped(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        del manifest["compliance"]
        for name in ("compliance.json", "compliance/records.jsonl", "compliance/proofs.json"):
            del m[name]

    def windowed(m: dict[str, bytes], manifest: dict[str, Any]) -> None:
        manifest["compliance"]["scope"] = "window"

    for n, fn in enumerate((dropped, windowed)):
        errs = failures(_edit(bundle, tmp_path / f"t{n}.zip", worked, fn), worked, sandbox)
        assert [e.kind for e in errs] == ["manifest.field"], fn.__name__


def test_the_independent_verifier_proves_the_case_bundle_s_history_records(
        worked: Worked, bundle: Path, tmp_path: Path) -> None:
    from tools import verify_bundle as vb

    trusted = [vb.Vkey.parse(worked.signer.verifier.vkey)]
    report = vb.verify_bundle(str(bundle), trusted)
    assert report.verified, [f.text() for f in report.failures]
    manifest = orjson.loads(members(bundle)["manifest.json"])
    assert report.format == 9 and report.counts["compliance_records"] == manifest["compliance"]["records"] > 0
    assert report.counts["withheld"] == manifest["case"]["withheld"] > 0
    # a history record changed, the manifest re-signed over it: its inclusion proof fails
    m = members(bundle)
    hold = f"STR-{worked.case_id}".encode()
    assert hold in m["compliance/records.jsonl"]
    bad = rewrite(bundle, tmp_path / "bad.zip", resign=worked.signer,
                  change={"compliance/records.jsonl": m["compliance/records.jsonl"].replace(hold, b"STR-0")})
    got = vb.verify_bundle(str(bad), trusted)
    assert {(f.check, f.file) for f in got.failures} == {("compliance", "compliance/records.jsonl")}


# --- refusals at export ----------------------------------------------------------------------------


def test_an_unknown_case_is_refused_and_nothing_is_written(worked: Worked, tmp_path: Path) -> None:
    before = len(list_exports(worked.ledger.engine))
    with pytest.raises(ExportFilterError) as info:
        create_case_bundle(worked.ledger.engine, worked.ledger, worked.signer, tmp_path / "x.zip", 10**9,
                           OFFICER)
    assert info.value.field == "case_id" and not (tmp_path / "x.zip").exists()
    assert len(list_exports(worked.ledger.engine)) == before


def test_a_view_row_that_disagrees_with_the_records_refuses_the_export(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    w = work_a_case(make_ledger(db, signer), signer, sandbox)
    with w.ledger.engine.begin() as conn:
        first = conn.execute(select(alerts.c.seq).where(alerts.c.case_id == w.case_id).order_by(alerts.c.seq)
                             ).scalars().first()
        conn.execute(update(alerts).where(alerts.c.seq == first).values(disposition="FALSE_POSITIVE"))
    with pytest.raises(DerivedRowError) as info:
        create_case_bundle(w.ledger.engine, w.ledger, signer, tmp_path / "x.zip", w.case_id, OFFICER)
    assert (info.value.table, info.value.seq) == ("audit_alerts", first)
    assert not (tmp_path / "x.zip").exists()
    assert not [e for e in list_exports(w.ledger.engine)]
    w.ledger.engine.dispose()


# --- the examiner's machine, the CLI and HTTP ------------------------------------------------------


def test_a_case_bundle_verifies_where_the_database_layer_is_absent(worked: Worked, bundle: Path) -> None:
    res = run_without_database(f"""
        import json
        from audit.bundle import verify_bundle
        from ledger.note import NoteVerifier
        report = verify_bundle({str(bundle)!r}, [NoteVerifier.from_vkey({worked.signer.verifier.vkey!r})])
        print(json.dumps({{"reproduced": report.case.reproduced}}))
        """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.splitlines()[-1]) == {"reproduced": True}


def _a_case(db: Db) -> int:
    """The id of a case with the most alerts, once the view is current."""
    engine = db.engine()
    try:
        catch_up(engine)
        with engine.connect() as conn:
            return int(conn.execute(select(cases.c.case_id).order_by(cases.c.alerts.desc(), cases.c.case_id)
                                    .limit(1)).scalar_one())
    finally:
        engine.dispose()


def _holds_alerts(n: int) -> list[bytes]:
    from tests.audit.test_pipeline import submissions

    return [s.transaction.canonical_bytes() for s in submissions(n)]


def test_cli_export_create_case_writes_the_case_bundle(db: Db, tmp_path: Path) -> None:
    from tests.api.test_cli_score import Cli

    cli = Cli(db, tmp_path / "keys")
    cli("init")
    batch = tmp_path / "batch.json"
    batch.write_bytes(b"[" + b",".join(_holds_alerts(60)) + b"]")
    cli("score", str(batch))
    case_id = _a_case(db)
    out = tmp_path / "case.zip"
    doc = cli.json("export", "create", "--case", str(case_id), "--out", str(out))
    assert out.exists() and doc["file"] == str(out) and doc["filters"] is None
    assert doc["case"]["case_id"] == case_id and doc["counts"]["decisions"] == doc["case"]["alerts"] > 0
    with zipfile.ZipFile(out) as z:
        assert orjson.loads(z.read("manifest.json"))["schema"] == "sealtrail.bundle/9"
    human = cli("export", "create", "--case", str(case_id), "--out", str(tmp_path / "h.zip")).stdout
    assert f"case        {case_id}:" in human
    bad = cli.json("export", "create", "--case", str(case_id), "--from", "2026-01-01", "--out",
                   str(tmp_path / "x.zip"), code=2)
    assert bad["field"] == "--case"
    unknown = cli.json("export", "create", "--case", str(10**9), "--out", str(tmp_path / "x.zip"), code=1)
    assert unknown["field"] == "--case" and not (tmp_path / "x.zip").exists()
    cli("export", "create", "--out", str(tmp_path / "x.zip"), code=2)  # neither a case nor a window


def test_http_export_create_accepts_a_case_id(db: Db, tmp_path: Path) -> None:
    from tests.api.test_fail_closed import in_process

    with in_process(db, tmp_path, exports_dir=tmp_path / "exports") as (client, _, _):
        for tx in _holds_alerts(60):
            r = client.post("/v1/decisions", content=tx,
                            headers={"content-type": "application/json", "x-test-role": "scorer"})
            assert r.status_code == 200, r.text
        case_id = _a_case(db)
        officer = {"x-test-role": "officer"}
        r = client.post("/v1/exports", json={"case_id": case_id}, headers=officer)
        assert r.status_code == 201, r.text
        doc = r.json()
        assert doc["case"]["case_id"] == case_id and doc["filters"] is None and "file" not in doc
        got = client.get(r.headers["location"], headers={"x-test-role": "regulator"})
        with zipfile.ZipFile(__import__("io").BytesIO(got.content)) as z:
            assert CaseDoc.parse(z.read(CASE_FILE)).case_id == case_id
        for body in ({"case_id": case_id, "from": "2000-01-01T00:00:00Z"}, {"case_id": 10**9}):
            r = client.post("/v1/exports", json=body, headers=officer)
            assert r.status_code == 422 and r.json()["errors"][0]["field"] == "case_id", r.text
        r = client.post("/v1/exports", json={}, headers=officer)  # neither: the window's from is missing
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "from", r.text
