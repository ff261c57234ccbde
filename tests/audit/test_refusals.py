"""Refusal records (``sealtrail.refusal/1``): what a refused request seals, how it is found, and
how an export bundle carries, verifies and replays it. Refusals are chosen to stay refused under
a more liberal parser: XML not well formed, a DTD, two :32A: fields, an unknown currency, an MT940,
an empty JSON batch."""

from __future__ import annotations

import hashlib
import threading
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.bundle.verify import verify_bundle
from audit.decide.pipeline import Pipeline
from audit.decide.principal import Principal
from audit.decide.refusal import (
    Refusal,
    empty_body,
    header_refused,
    parse_refusal_body,
    redact,
    refusal_of,
    replay_refusal,
    too_large,
    undetected,
)
from audit.decide.refusal_seal import seal_refusal
from audit.decide.submissions import parse_submissions
from audit.decide.summary import parse_summary
from audit.errors import BundleFailed, DerivedRowError, SubmissionRefusedError
from audit.export import create as export_create
from audit.export.create import ExportFilters, create_bundle
from audit.export.select import refusal_rows
from audit.query.refusals import RefusalFilter, query_refusals
from audit.query.verify import verify_index
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.note import NoteSigner
from ledger.records import format_time
from ledger.verify import verify_ledger
from tests.audit.bundle_fixture import now_fixed, rewrite
from tests.audit.test_export import governed_pipeline
from tests.audit.test_pipeline import submissions
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

SCORER = Principal("CN=payments-engine,O=Example Bank", ("URI:spiffe://bank/payments",), "CN=Bank CA",
                   "ab" * 32, "1f", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z")
OTHER = Principal.local("ops")
OFFICER = Principal.local("officer")
NOW = datetime(2026, 12, 3, 9, 12, 44, tzinfo=UTC)

NOT_WELL_FORMED = b"<Document xmlns='urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08'><FIToFICstmrCdtTrf>"
WITH_DTD = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY e "x">]>'
            b"<Document xmlns='urn:iso:std:iso:20022:tech:xsd:pacs.008.001.08'/>")
MT940 = (b"{1:F01BANKDEFFAXXX0000000000}{2:I940BANKGB2LXXXXN}{4:\r\n:20:STATEMENT1\r\n"
         b":25:12345678\r\n:28C:1/1\r\n:60F:C250101EUR1000,00\r\n:62F:C250101EUR1000,00\r\n-}")


def _json_tx(seed: int = 3) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(submissions(1, seed=seed)[0].raw)
    return doc


def unknown_currency() -> bytes:
    doc = _json_tx()
    doc["currency"] = "XYZ"
    return orjson.dumps(doc)


def two_32a() -> bytes:
    from tests.api.test_cli_score import FIN

    text = FIN.read_bytes()
    i = text.index(b":32A:")
    line = text[i:text.index(b"\n", i) + 1]
    return text.replace(line, line + line, 1)


CASES = [("pacs008", False, NOT_WELL_FORMED), ("pacs008", False, WITH_DTD), ("mt", True, MT940),
         ("json", True, b"[]"), ("json", False, unknown_currency())]


def refused(raw: bytes, fmt: str, batch: bool, principal: Principal = SCORER,
            now: datetime = NOW) -> Refusal:
    with pytest.raises(SubmissionRefusedError) as info:
        parse_submissions(raw, fmt, principal.to_json(), batch=batch)
    return refusal_of(info.value, raw, fmt=fmt, principal=principal.to_json(), batch=batch,
                      via="POST /v1/decisions/batch" if batch else "POST /v1/decisions", max_items=10_000,
                      now=now)


@pytest.mark.parametrize(("fmt", "batch", "raw"), CASES)
def test_each_refusal_body_follows_the_schema_and_replays_the_same(fmt: str, batch: bool, raw: bytes) -> None:
    r = refused(raw, fmt, batch)
    body = parse_refusal_body(orjson.loads(r.record().canonical_body()))
    assert (body.format, body.batch, body.payload_sha256) == (fmt, batch, hashlib.sha256(raw).hexdigest())
    assert body.principal == SCORER.to_json() and body.at == "2026-12-03T09:12:44.000000Z"
    assert body.fault_count >= len(body.faults) >= 1
    assert replay_refusal(body, raw) is None
    assert r.record().payload == raw


def test_two_32a_fields_are_named_by_field() -> None:
    r = refused(two_32a(), "mt", True)
    assert any(f["field"] == ":32A:" for f in r.faults), r.faults


def test_quoted_values_of_the_message_stay_out_of_the_body() -> None:
    r = refused(unknown_currency(), "json", False)
    text = r.record().canonical_body().decode()
    assert "XYZ" not in text and "'…'" in text
    assert redact("iban 'DE89 3704' is not the valid IBAN form of account \"123\"") == (
        "iban '…' is not the valid IBAN form of account '…'")


def test_the_fault_count_says_how_many_beyond_the_hundred_named() -> None:
    r = refused(b"$".join([MT940] * 150), "mt", True)
    assert len(r.faults) == 100 and r.fault_count == 150


def test_a_payload_that_now_parses_is_a_replay_mismatch() -> None:
    good = orjson.dumps(_json_tx())
    body = parse_refusal_body(refused(unknown_currency(), "json", False).body())
    assert "now parses" in (replay_refusal(body, good) or "")
    other = parse_refusal_body(refused(b"[]", "json", True).body())
    assert "differently" in (replay_refusal(other, b'[{"a": 1}]') or "")


def test_an_oversized_body_is_sealed_unread_without_payload() -> None:
    r = too_large(20_000_000, 16 << 20, fmt="json", principal=SCORER.to_json(), batch=True, via="x", now=NOW)
    body = parse_refusal_body(r.body())
    assert r.record().payload is None and body.payload_sha256 is None and not body.payload_kept
    assert body.withheld and not body.replayable


@pytest.mark.parametrize("broken", [
    {"schema": "sealtrail.refusal/9"}, {"at": "yesterday"}, {"principal": "x"},
    {"refusal": {"kind": "other", "reason": "", "faults": [], "fault_count": 0}},
    {"payload": {"sha256": None, "bytes": 1, "kept": True, "withheld": None}}])
def test_a_body_that_breaks_the_schema_is_refused(broken: dict[str, Any]) -> None:
    body = {**refused(b"[]", "json", True).body(), **broken}
    with pytest.raises(ValueError):
        parse_refusal_body(body)


# -- sealing, search, verify -----------------------------------------------------------------


def _seal_all(ledger: Ledger) -> list[str]:
    tids = []
    for i, (fmt, batch, raw) in enumerate(CASES):
        who = SCORER if i % 2 == 0 else OTHER
        tids.append(seal_refusal(ledger, refused(raw, fmt, batch, who, datetime.now(UTC))).trace_id)
    return tids


def test_sealed_refusals_are_found_by_principal_format_and_time(db: Db, signer: NoteSigner) -> None:
    ledger = make_ledger(db, signer)
    tids = _seal_all(ledger)
    everything = query_refusals(ledger.engine, RefusalFilter())
    assert [r.trace_id for r in everything.items] == tids[::-1] and everything.next_cursor is None
    mine = query_refusals(ledger.engine, RefusalFilter(principal=SCORER.fingerprint_sha256))
    assert [r.trace_id for r in mine.items] == [tids[4], tids[2], tids[0]]
    by_subject = query_refusals(ledger.engine, RefusalFilter(principal=OTHER.subject))
    assert [r.trace_id for r in by_subject.items] == [tids[3], tids[1]]
    xml = query_refusals(ledger.engine, RefusalFilter(format="pacs008"))
    assert [r.trace_id for r in xml.items] == [tids[1], tids[0]]
    page = query_refusals(ledger.engine, RefusalFilter(limit=2))
    rest = query_refusals(ledger.engine, RefusalFilter(limit=10, cursor=page.next_cursor))
    assert [r.trace_id for r in page.items + rest.items] == tids[::-1]
    assert query_refusals(ledger.engine, RefusalFilter(until="2000-01-01T00:00:00Z")).items == []
    verify_ledger(ledger.engine, [signer.verifier])  # refusals are ordinary sealed entries


# -- bundles ---------------------------------------------------------------------------------


def _world(db: Db, signer: NoteSigner, sandbox: Sandbox) -> tuple[Ledger, Pipeline, list[str]]:
    ledger = make_ledger(db, signer)
    pipe = governed_pipeline(ledger, sandbox)
    subs = submissions(24, seed=9)
    pipe.decide(subs[:12])
    tids = _seal_all(ledger)
    pipe.decide(subs[12:])
    return ledger, pipe, tids


def _export(ledger: Ledger, signer: NoteSigner, out: Path, **filters: Any) -> Path:
    create_bundle(ledger.engine, ledger, signer, out,
                  ExportFilters.of("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z", **filters), OFFICER)
    return out


def test_a_bundle_carries_its_window_s_refusals_and_replays_them(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                                tmp_path: Path) -> None:
    ledger, _, tids = _world(db, signer, sandbox)
    path = _export(ledger, signer, tmp_path / "b.zip")
    with zipfile.ZipFile(path) as z:
        manifest = orjson.loads(z.read("manifest.json"))
        index = [orjson.loads(x) for x in z.read("index.jsonl").splitlines()]
    assert manifest["schema"] == "sealtrail.bundle/9" and manifest["counts"]["refusals"] == 5
    assert [e["trace_id"] for e in index if e["kind"] == "refusal"] == tids
    report = verify_bundle(path, [signer.verifier], sandbox=sandbox, now=now_fixed).to_json()
    assert (report["format"], report["refusals"], report["refusals_replayed"]) == (9, 5, 5)
    with ledger.engine.connect() as conn:
        decided = conn.exec_driver_sql("SELECT count(*) FROM ledger_entries WHERE kind = 'decision'").scalar()
    assert report["decisions"] == decided and report["completeness"]["checked"] == decided
    narrowed = _export(ledger, signer, tmp_path / "allow.zip", decision="ALLOW")
    with zipfile.ZipFile(narrowed) as z:  # a filtered selection carries no one else's refused messages
        assert orjson.loads(z.read("manifest.json"))["counts"]["refusals"] == 0


def test_a_tampered_refusal_payload_fails(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                          tmp_path: Path) -> None:
    ledger, _, _ = _world(db, signer, sandbox)
    path = _export(ledger, signer, tmp_path / "b.zip")
    with zipfile.ZipFile(path) as z:
        pays = z.read("payloads.jsonl").splitlines()
    target = hashlib.sha256(b"[]").hexdigest()
    changed = [orjson.dumps({**orjson.loads(x), "data": "[{}]"}) if target.encode() in x else x for x in pays]
    bad = rewrite(path, tmp_path / "bad.zip", change={"payloads.jsonl": b"\n".join(changed) + b"\n"},
                  rehash=True, resign=signer)
    with pytest.raises(BundleFailed) as info:
        verify_bundle(bad, [signer.verifier], sandbox=sandbox, now=now_fixed)
    assert "payload.hash" in {f.kind for f in info.value.failures}


def test_a_sealed_refusal_whose_payload_now_parses_is_a_replay_mismatch(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path) -> None:
    ledger, _, _ = _world(db, signer, sandbox)
    good = orjson.dumps(_json_tx(seed=44))
    wrong = refused(unknown_currency(), "json", False)  # a refusal an older, stricter parser made
    forged = Refusal(**{**wrong.__dict__, "payload": good, "payload_sha256": hashlib.sha256(good).hexdigest(),
                        "payload_bytes": len(good)})
    tid = seal_refusal(ledger, forged).trace_id
    path = _export(ledger, signer, tmp_path / "b.zip")
    with pytest.raises(BundleFailed) as info:
        verify_bundle(path, [signer.verifier], sandbox=sandbox, now=now_fixed)
    (f,) = [f for f in info.value.failures if f.kind == "replay.refusal"]
    assert f.trace_id == tid and "now parses" in f.detail


# -- completeness: every refusal commit seals a summary that speaks for it -------------------


def _summaries(ledger: Ledger) -> list[tuple[int, dict[str, Any]]]:
    with ledger.engine.connect() as conn:
        return [(int(s), orjson.loads(bytes(r))) for s, r in conn.exec_driver_sql(
            "SELECT seq, record FROM ledger_entries WHERE kind = 'decision.summary' ORDER BY seq")]


def test_each_refusal_is_spoken_for_by_a_summary_in_the_one_chain(db: Db, signer: NoteSigner,
                                                                 sandbox: Sandbox) -> None:
    ledger, _, tids = _world(db, signer, sandbox)
    with ledger.engine.connect() as conn:
        refusals = {str(t): (int(s), orjson.loads(bytes(r))) for s, t, r in conn.exec_driver_sql(
            "SELECT seq, trace_id, record FROM ledger_entries WHERE kind = 'refusal'")}
    by_seq = dict(_summaries(ledger))
    for tid in tids:
        seq, env = refusals[tid]
        summary = by_seq[seq + 1]  # the last entry of the refusal's own commit
        assert summary["recorded_at"] == env["recorded_at"]
        assert summary["record"]["schema"] == "sealtrail.decision.summary/2"
        assert summary["record"]["entries"] == [{"refusal": env["record"]["refusal"]["kind"]}]
    prev = None
    for seq, env in _summaries(ledger):  # decisions' summaries and refusals' alike: one unbroken chain
        s = parse_summary(seq, env["record"])
        assert s.prev == prev
        prev = (seq, _leaf(ledger, seq))
    report = verify_index(ledger.engine, workers=1)
    assert (report.refusals, report.refusals_unsummarised) == (5, 0)


def _leaf(ledger: Ledger, seq: int) -> str:
    with ledger.engine.connect() as conn:
        leaf = conn.exec_driver_sql(f"SELECT leaf_hash FROM ledger_entries WHERE seq = {seq}").scalar_one()
    return bytes(leaf).hex()


def test_refusals_and_batches_sealed_at_once_keep_one_chain(db: Db, signer: NoteSigner,
                                                            sandbox: Sandbox) -> None:
    ledger = make_ledger(db, signer)
    pipe = governed_pipeline(ledger, sandbox)
    subs = submissions(120, seed=12)
    errors: list[BaseException] = []

    def decide() -> None:
        try:
            for i in range(0, 120, 10):
                pipe.decide(subs[i:i + 10])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def refuse(who: Principal) -> None:
        try:
            for fmt, batch, raw in CASES * 3:
                seal_refusal(ledger, refused(raw, fmt, batch, who, datetime.now(UTC)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=decide), threading.Thread(target=refuse, args=(SCORER,)),
               threading.Thread(target=refuse, args=(OTHER,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    report = verify_index(ledger.engine, workers=1)  # every summary linked to the one before, under the lock
    assert (report.decisions, report.refusals, report.refusals_unsummarised) == (120, 30, 0)
    verify_ledger(ledger.engine, [signer.verifier])


def test_a_refusal_sealed_without_its_summary_fails_ledger_verify_naming_it(db: Db, signer: NoteSigner,
                                                                            sandbox: Sandbox) -> None:
    ledger = make_ledger(db, signer)
    # a refusal sealed alone, as before refusals were summarised
    (early,) = ledger.append_many([refused(b"[]", "json", True).record()])
    pipe = governed_pipeline(ledger, sandbox)
    pipe.decide(submissions(4, seed=5))
    assert verify_index(ledger.engine, workers=1).refusals_unsummarised == 1  # counted, not judged
    seal_refusal(ledger, refused(MT940, "mt", True))
    (late,) = ledger.append_many([refused(MT940, "mt", True).record()])  # a writer that skipped the summary
    pipe.decide(submissions(4, seed=6))
    with pytest.raises(DerivedRowError) as info:
        verify_index(ledger.engine, workers=1)
    assert (info.value.table, info.value.seq) == ("decision.summary", late.seq)
    assert "a refusal no summary speaks for" in str(info.value) and early.seq < late.seq


def test_a_bundle_proves_the_refusals_of_its_window_complete(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                            tmp_path: Path) -> None:
    ledger, _, _ = _world(db, signer, sandbox)
    until = format_time(datetime.now(UTC) + timedelta(microseconds=1))  # a window that has ended
    out = tmp_path / "b.zip"
    create_bundle(ledger.engine, ledger, signer, out, ExportFilters.of("2000-01-01T00:00:00Z", until),
                  OFFICER)
    report = verify_bundle(out, [signer.verifier], sandbox=sandbox, now=now_fixed).to_json()
    c = report["completeness"]
    assert (c["proven"], c["refusals_proven"], c["refusals_checked"], c["notes"]) == (True, True, 5, [])
    narrowed = verify_bundle(_export(ledger, signer, tmp_path / "allow.zip", decision="ALLOW"),
                             [signer.verifier], sandbox=sandbox, now=now_fixed).to_json()
    assert narrowed["refusals"] == 0 and narrowed["completeness"]["refusals_proven"] is None


def _without_refusal(monkeypatch: pytest.MonkeyPatch, seq: int) -> None:
    def rows(*a: Any, **k: Any) -> list[Any]:
        return [r for r in refusal_rows(*a, **k) if r.seq != seq]

    monkeypatch.setattr(export_create, "refusal_rows", rows)


def _refusal_seq(ledger: Ledger, trace_id: str) -> int:
    with ledger.engine.connect() as conn:
        seq = conn.exec_driver_sql("SELECT seq FROM ledger_entries WHERE trace_id = "
                                   f"'{trace_id}'").scalar_one()
    return int(seq)


def test_the_exporter_refuses_a_selection_that_leaves_out_a_refusal(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, _, tids = _world(db, signer, sandbox)
    victim = _refusal_seq(ledger, tids[2])
    _without_refusal(monkeypatch, victim)
    with pytest.raises(DerivedRowError, match=f"seq {victim}"):
        _export(ledger, signer, tmp_path / "b.zip")
    assert not (tmp_path / "b.zip").exists()


def test_a_bundle_leaving_out_a_refusal_fails_naming_it(
        db: Db, signer: NoteSigner, sandbox: Sandbox, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, _, tids = _world(db, signer, sandbox)
    victim = _refusal_seq(ledger, tids[2])
    _without_refusal(monkeypatch, victim)
    monkeypatch.setattr(export_create, "check_selection", lambda *a: None)  # a dishonest exporter
    path = _export(ledger, signer, tmp_path / "b.zip")  # signed, every proof and count consistent
    with pytest.raises(BundleFailed) as info:
        verify_bundle(path, [signer.verifier], sandbox=sandbox, now=now_fixed)
    assert [(f.kind, f.seq) for f in info.value.failures] == [("completeness.missing", victim)]
    assert "refusal" in info.value.failures[0].detail


def test_a_format_3_bundle_may_not_hold_a_version_2_summary(db: Db, signer: NoteSigner, sandbox: Sandbox,
                                                          tmp_path: Path) -> None:
    ledger, _, _ = _world(db, signer, sandbox)
    path = _export(ledger, signer, tmp_path / "b.zip")
    with zipfile.ZipFile(path) as z:  # relabelled as format 3, whose verifier checks no refusal's summary
        manifest = orjson.loads(z.read("manifest.json"))
    older = rewrite(path, tmp_path / "v3.zip", resign=signer, edit=lambda m: m.__setitem__(
        "manifest.json", canonical_bytes({**manifest, "schema": "sealtrail.bundle/3"})))
    with pytest.raises(BundleFailed) as info:
        verify_bundle(older, [signer.verifier], sandbox=sandbox, now=now_fixed)
    assert "completeness.summary" in {f.kind for f in info.value.failures}
    assert any("version 2 summary in a format 3 bundle" in f.detail for f in info.value.failures)


def test_a_summary_misstating_its_refusal_fails_ledger_verify(db: Db, signer: NoteSigner) -> None:
    from audit.decide.account_secret import read_keyer
    from audit.decide.summary import SUMMARY_KIND, refusal_entries, summary_body
    from ledger import Record, store

    ledger = make_ledger(db, signer)
    seal_refusal(ledger, refused(b"[]", "json", True))

    def lying(conn: Any, seq: int) -> Record:  # a writer whose summary names another kind
        prev = store.last_of_kind(conn, SUMMARY_KIND)
        body = summary_body(read_keyer(conn).key_id, refusal_entries(["too_large"]), prev)
        return Record.from_jcs(SUMMARY_KIND, body)

    _, summary = ledger.append_many([refused(MT940, "mt", True).record()], tail=lying)
    with pytest.raises(DerivedRowError) as info:
        verify_index(ledger.engine, workers=1)
    assert (info.value.table, info.value.seq) == ("decision.summary", summary.seq)
    assert "message_refused" in str(info.value) and "too_large" in str(info.value)


# -- version 2: the kinds of refusal that are not the parser's -------------------------------


def test_an_empty_body_and_an_undetectable_file_replay_as_refused_again() -> None:
    from inference.messages import MessageError, detect_format

    empty = parse_refusal_body(empty_body(b" \n", fmt="json", principal=SCORER.to_json(), batch=False,
                                          via="POST /v1/decisions", max_items=10_000, now=NOW).body())
    assert (empty.version, empty.kind, empty.replayable) == (2, "empty_body", True)
    assert replay_refusal(empty, b" \n") is None
    assert "not empty" in (replay_refusal(empty, b"[]") or "")
    with pytest.raises(MessageError) as info:
        detect_format(b"hello")
    lost = parse_refusal_body(undetected(info.value, b"hello", principal=SCORER.to_json(), batch=True,
                                         via="sealtrail score", now=NOW).body())
    assert (lost.format, lost.faults[0]["field"]) == ("auto", "format")
    assert replay_refusal(lost, b"hello") is None
    assert "now detected" in (replay_refusal(lost, b"[]") or "")


def test_a_header_refusal_keeps_no_payload_and_is_not_replayed() -> None:
    r = header_refused("invalid_priority", "X-Priority", "X-Priority 'P9' is not P0, P1 or P2", fmt="json",
                       principal=SCORER.to_json(), batch=False, via="POST /v1/decisions", declared=99,
                       now=NOW)
    body = parse_refusal_body(r.body())
    assert r.record().payload is None
    assert (body.payload_kept, body.payload_bytes, body.replayable) == (False, 99, False)
    assert "P9" not in body.reason  # the quoted value withheld, as the parser's reasons are
    with pytest.raises(ValueError):
        header_refused("message_refused", "X", "x", fmt="json", principal={}, batch=False, via="x",
                       declared=None)


def test_version_1_bodies_still_parse_and_hold_only_the_first_kinds() -> None:
    v1 = {**refused(b"[]", "json", True).body(), "schema": "sealtrail.refusal/1"}
    assert parse_refusal_body(v1).version == 1
    empty = empty_body(b"", fmt="json", principal=SCORER.to_json(), batch=True, via="x",
                       max_items=None).body()
    with pytest.raises(ValueError):
        parse_refusal_body({**empty, "schema": "sealtrail.refusal/1"})
    kept = header_refused("unsupported_media_type", "Content-Type", "no", fmt="auto",
                          principal=SCORER.to_json(), batch=True, via="x", declared=None).body()
    kept["payload"] = {"sha256": "0" * 64, "bytes": 1, "kept": True, "withheld": None}
    with pytest.raises(ValueError):  # a refusal made before the body was read cannot hold it
        parse_refusal_body(kept)
