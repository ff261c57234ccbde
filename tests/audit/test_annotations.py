"""Annotations: new sealed records that refer to a decision; refused as a whole when wrong."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from audit.annotations import ANNOTATION_SCHEMA, Disposition, annotate
from audit.decide.principal import Principal
from audit.errors import AnnotationError, QueryError, TraceNotFoundError
from audit.query.index import catch_up
from audit.query.traces import get_trace
from ledger import NoteSigner, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.verify import verify_ledger
from tests.audit.test_trace_index import (
    dump,
    indexed_pipeline,
    mixed_submissions,
)
from tests.conftest import Db, make_ledger
from wasm_rules import Sandbox

OFFICER = Principal(subject="CN=officer,O=sealtrail dev", sans=("URI:spiffe://sealtrail.dev/role/officer",),
                    issuer="CN=sealtrail dev CA", fingerprint_sha256="ef" * 32, serial="2a",
                    not_before="2026-01-01T00:00:00Z", not_after="2027-01-01T00:00:00Z")


@pytest.fixture
def decided(db: Db, signer: NoteSigner, sandbox: Sandbox, pack_wasm: bytes) -> tuple[Ledger, list[str]]:
    ledger = make_ledger(db, signer)
    decisions = indexed_pipeline(ledger, sandbox, pack_wasm).decide(mixed_submissions(12))
    return ledger, [d.trace_id for d in decisions]


@pytest.mark.requirement("SEC-17a4f-audit-trail")
def test_an_annotation_is_sealed_and_listed_with_its_decision(decided: tuple[Ledger, list[str]],
                                                              signer: NoteSigner) -> None:
    ledger, tids = decided
    target = get_trace(ledger.engine, tids[2])
    assert target is not None and target.annotations == ()
    first = annotate(ledger, tids[2], OFFICER, Disposition.ESCALATED, "sent to the FIU desk")
    second = annotate(ledger, tids[2], OFFICER.to_json(), "CORRECTION", "should have been held",
                      correction={"decision": "HOLD", "reason": "structuring pattern across accounts"})
    third = annotate(ledger, tids[5], OFFICER, "NOTE", "unrelated")
    assert (first.target_trace_id, first.target_seq) == (tids[2], target.seq)
    detail = get_trace(ledger.engine, tids[2])
    assert detail is not None and detail.record == target.record  # the decision itself is untouched
    assert [(a.seq, a.trace_id) for a in detail.annotations] == [(first.seq, first.trace_id),
                                                                 (second.seq, second.trace_id)]
    body = detail.annotations[1].body
    assert body == {"schema": ANNOTATION_SCHEMA, "refers_to": {"trace_id": tids[2], "seq": target.seq,
                                                               "leaf_hash": target.leaf_hash},
                    "principal": OFFICER.to_json(), "disposition": "CORRECTION",
                    "note": "should have been held",
                    "correction": {"decision": "HOLD", "reason": "structuring pattern across accounts"}}
    own = get_trace(ledger.engine, second.trace_id)
    assert own is not None and own.kind == "annotation" and own.body == body
    assert orjson.loads(own.record)["record"] == body
    assert own.record.startswith(b'{"kind":"annotation","record":' + canonical_bytes(body))
    verify_ledger(ledger.engine, [signer.verifier])
    got = dump(ledger.engine)
    assert sorted(got["audit_annotations"]) == sorted([(target.seq, first.seq), (target.seq, second.seq),
                                                       (third.target_seq, third.seq)])
    assert third.seq not in {r[0] for r in got["audit_traces"]}  # an annotation is no decision
    assert catch_up(ledger.engine).annotations == 0  # indexed in its own commit


@pytest.mark.parametrize(("args", "field"), [
    ({"disposition": "MAYBE"}, "disposition"),
    ({"disposition": "note"}, "disposition"),
    ({"note": ""}, "note"),
    ({"note": "   \n"}, "note"),
    ({"note": "x" * 10_001}, "note"),
    ({"note": "lone \ud800 surrogate"}, "note"),
    ({"note": "nul \x00 inside"}, "note"),
    ({"note": "an \x1b[31m escape"}, "note"),
    ({"note": "C1 \x85 next line"}, "note"),
    ({"note": "approved \u202eDELIF RTS\u202c"}, "note"),  # a right-to-left override (Trojan Source)
    ({"note": "see \u2066case 12\u2069"}, "note"),  # a left-to-right isolate
    ({"note": "\u202a\u202b\u202d embeddings"}, "note"),
    ({"disposition": "CORRECTION", "correction": {"decision": "HOLD", "reason": "per \u2067policy\u2069"}},
     "correction.reason"),
    ({"principal": {"subject": "CN=x"}}, "principal"),
    ({"correction": {"decision": "HOLD", "reason": "r"}}, "correction"),  # only with CORRECTION
    ({"disposition": "CORRECTION"}, "correction"),
    ({"disposition": "CORRECTION", "correction": {"decision": "SOMETIMES", "reason": "r"}},
     "correction.decision"),
    ({"disposition": "CORRECTION", "correction": {"decision": "HOLD", "reason": ""}}, "correction.reason"),
    ({"disposition": "CORRECTION", "correction": {"decision": "HOLD"}}, "correction"),
])
def test_a_bad_annotation_is_refused_naming_the_field_and_nothing_is_written(
        decided: tuple[Ledger, list[str]], args: dict[str, Any], field: str) -> None:
    ledger, tids = decided
    size = ledger.size()
    given: dict[str, Any] = {"principal": OFFICER, "disposition": "NOTE", "note": "fine", **args}
    with pytest.raises(AnnotationError) as info:
        annotate(ledger, tids[0], **given)
    assert info.value.field == field
    assert ledger.size() == size


def test_a_note_keeps_its_lines_and_tabs(decided: tuple[Ledger, list[str]]) -> None:
    ledger, tids = decided
    r = annotate(ledger, tids[0], principal=OFFICER, disposition="NOTE", note="line one\n\tline two")
    assert r.seq == ledger.size() - 1


def test_a_note_keeps_right_to_left_text_and_its_marks(decided: tuple[Ledger, list[str]]) -> None:
    ledger, tids = decided  # Arabic and Hebrew, and the LRM/RLM marks, are text, not overrides
    note = "\u0645\u0631\u0627\u062c\u0639\u0629 \u200f\u05d1\u05d3\u05d9\u05e7\u05d4\u200e ok"
    r = annotate(ledger, tids[0], OFFICER, "NOTE", note)
    assert r.seq == ledger.size() - 1


def test_only_existing_decisions_can_be_annotated(decided: tuple[Ledger, list[str]]) -> None:
    ledger, tids = decided
    note = annotate(ledger, tids[0], OFFICER, "NOTE", "first look")
    size = ledger.size()
    with pytest.raises(TraceNotFoundError) as missing:
        annotate(ledger, "01938a6e-0000-7000-8000-000000000000", OFFICER, "NOTE", "x")
    assert missing.value.field == "trace_id" and isinstance(missing.value, QueryError)
    with pytest.raises(AnnotationError, match="only decisions") as of_note:
        annotate(ledger, note.trace_id, OFFICER, "NOTE", "a note on a note")
    assert of_note.value.field == "trace_id"
    with ledger.engine.connect() as conn:
        genesis = conn.execute(store.entries.select().with_only_columns(store.entries.c.trace_id)
                               .where(store.entries.c.seq == 0)).scalar_one()
    with pytest.raises(AnnotationError, match=r"ledger\.genesis"):
        annotate(ledger, genesis, OFFICER, "NOTE", "x")
    assert ledger.size() == size
