"""Officer notes and dispositions: new ledger records that refer to a decision, never edits.

This is SEC 17a-4(f)'s audit-trail alternative (DESIGN.md invariant 2): a disposition, a
filed STR or a correction of an outcome is a record of kind ``annotation`` (body
``sealtrail.annotation/1``) that names the decision it is about by trace id, seq and leaf
hash, and who wrote it (the X.509 principal); the decision record itself stays as sealed.
A ``CORRECTION`` states the outcome the officer holds to be right and why; what the payment
engine was told is still the original record. The index row that lists the annotation under
its decision is written in the same commit.

The note is part of the chained record and is kept for as long as the ledger, never purged:
it is the officer's own statement, not payment data; it should not copy personal data from
the payment (that stays in the purgeable payload).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from audit.decide.principal import Principal
from audit.decide.record import DECISION_KIND
from audit.errors import AnnotationError, TraceNotFoundError
from audit.officer_words import checked_text, principal_json
from audit.query.index import ANNOTATION_KIND, write_annotations
from ledger import Receipt, Record, store
from ledger.append import Ledger
from ledger.jcs import CanonicalError, canonical_bytes
from wasm_rules import OUTCOMES

__all__ = [
    "ANNOTATION_KIND", "ANNOTATION_SCHEMA", "MAX_NOTE", "AnnotationReceipt", "Disposition", "annotate",
    "annotation_body", "checked_text", "principal_json"
]

ANNOTATION_SCHEMA = "sealtrail.annotation/1"
MAX_NOTE = 10_000
MAX_REASON = 2_000

class Disposition(enum.StrEnum):
    STR_FILED = "STR_FILED"  # a suspicious transaction report was filed (FATF R.20)
    FALSE_POSITIVE = "FALSE_POSITIVE"
    TRUE_POSITIVE = "TRUE_POSITIVE"
    ESCALATED = "ESCALATED"
    CLOSED = "CLOSED"
    CORRECTION = "CORRECTION"  # the outcome should have been another; carries ``correction``
    NOTE = "NOTE"


@dataclass(frozen=True)
class AnnotationReceipt:
    seq: int
    trace_id: str  # of the annotation record
    leaf_hash: str  # hex
    recorded_at: str
    target_trace_id: str
    target_seq: int


def _correction(disposition: Disposition, correction: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if disposition is not Disposition.CORRECTION:
        if correction is not None:
            raise AnnotationError("correction", "is only for disposition CORRECTION")
        return None
    if not isinstance(correction, Mapping) or set(correction) != {"decision", "reason"}:
        raise AnnotationError("correction", "a CORRECTION needs exactly {decision, reason}")
    if correction["decision"] not in OUTCOMES:
        raise AnnotationError("correction.decision", f"{correction['decision']!r} is not one of "
                                                     f"{', '.join(OUTCOMES)}")
    return {"decision": correction["decision"],
            "reason": checked_text(correction["reason"], "correction.reason", MAX_REASON)}


def annotation_body(target: Mapping[str, Any], principal: Principal | Mapping[str, Any],
                    disposition: Disposition | str, note: str,
                    correction: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The checked ``sealtrail.annotation/1`` body (``target``: trace_id, seq, leaf_hash)."""
    try:
        disp = Disposition(disposition)
    except ValueError:
        raise AnnotationError("disposition", f"{disposition!r} is not one of "
                                             f"{', '.join(d.value for d in Disposition)}") from None
    return {"schema": ANNOTATION_SCHEMA,
            "refers_to": {k: target[k] for k in ("trace_id", "seq", "leaf_hash")},
            "principal": principal_json(principal), "disposition": disp.value,
            "note": checked_text(note, "note", MAX_NOTE), "correction": _correction(disp, correction)}


def _target(conn: Connection, trace_id: str) -> dict[str, Any]:
    e = store.entries
    if not isinstance(trace_id, str):
        raise AnnotationError("trace_id", "must be a trace id")
    row = conn.execute(select(e.c.seq, e.c.kind, e.c.leaf_hash)
                       .where(e.c.trace_id == trace_id.lower())).first()
    if row is None:
        raise TraceNotFoundError("trace_id", f"no trace {trace_id}")
    if row.kind != DECISION_KIND:
        raise AnnotationError("trace_id", f"trace {trace_id} is a {row.kind} record; "
                                          "only decisions are annotated")
    return {"trace_id": trace_id.lower(), "seq": int(row.seq), "leaf_hash": bytes(row.leaf_hash).hex()}


def annotate(ledger: Ledger, trace_id: str, principal: Principal | Mapping[str, Any],
             disposition: Disposition | str, note: str,
             correction: Mapping[str, Any] | None = None) -> AnnotationReceipt:
    """Seal an annotation of decision ``trace_id``; durable when this returns. Nothing is
    written if the target is unknown or not a decision, or any field is refused."""
    with ledger.engine.connect() as conn:  # entries never change: the target cannot vanish
        target = _target(conn, trace_id)
    body = annotation_body(target, principal, disposition, note, correction)
    try:
        jcs = canonical_bytes(body)
    except CanonicalError as exc:
        raise AnnotationError(exc.path.removeprefix("$.").split("[")[0], str(exc)) from exc

    def index(conn: Connection, receipts: list[Receipt]) -> None:
        write_annotations(conn, [(target["seq"], receipts[0].seq)])

    (r,) = ledger.append_many([Record.from_canonical_body(ANNOTATION_KIND, jcs)], alongside=index)
    return AnnotationReceipt(r.seq, r.trace_id, r.leaf_hash.hex(), r.recorded_at, target["trace_id"],
                             target["seq"])
