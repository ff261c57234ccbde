"""Who read which case or report: sealed, so tipping-off (FATF R.21) can be investigated.

Every read of a case (its page or its API resource) or of a filed report is recorded by
:func:`record_reads` as one ``case_read`` record (``sealtrail.case-read/1``) per request: the
reader's principal and what was read. Reads sealed together share the ledger's group commit, so
many officers reading at once cost one commit. :func:`list_reads` pages through them, newest
first, for one case or all, for a regulator. A read is recorded before the content is returned:
if the ledger cannot record it, the read fails (503), as a decision would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine, select

from audit.cases.state import is_seq
from audit.decide.principal import Principal
from audit.errors import CaseError
from audit.officer_words import principal_json
from ledger import Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes

__all__ = ["READ_KIND", "READ_SCHEMA", "WHAT", "CaseRead", "ReadPage", "list_reads", "record_reads"]

READ_KIND = "case_read"
READ_SCHEMA = "sealtrail.case-read/1"
WHAT = ("case", "report", "queue")
MAX_READS = 500
_SHA = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CaseRead:
    seq: int
    recorded_at: str
    principal: dict[str, Any]
    reads: list[dict[str, Any]]  # {"case": id, "what": "case" | "report" | "queue", "report": sha256?}


@dataclass(frozen=True)
class ReadPage:
    items: list[CaseRead]
    next_before: int | None  # pass as ``before`` for the next (older) page


def _reads(reads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if not reads or len(reads) > MAX_READS:
        raise CaseError("reads", f"1 to {MAX_READS} reads a record")
    out = []
    for i, r in enumerate(reads):
        what, case = r.get("what"), r.get("case")
        if what not in WHAT:
            raise CaseError(f"reads[{i}].what", f"{what!r} is not one of {', '.join(WHAT)}")
        if not is_seq(case):
            raise CaseError(f"reads[{i}].case", "must be a case id")
        item: dict[str, Any] = {"case": case, "what": what}
        if what == "report":
            if not isinstance(r.get("report"), str) or not _SHA.fullmatch(r["report"]):
                raise CaseError(f"reads[{i}].report", "must be the report's SHA-256")
            item["report"] = r["report"]
        out.append(item)
    return out


def record_reads(ledger: Ledger, principal: Principal | Mapping[str, Any],
                 reads: Sequence[Mapping[str, Any]]) -> int:
    """Seal that ``principal`` read ``reads`` (``{"case": id, "what": ..., "report": sha256}``);
    the record's seq. Durable when this returns."""
    who = principal.to_json() if isinstance(principal, Principal) else principal_json(principal)
    body = {"schema": READ_SCHEMA, "principal": who, "reads": _reads(reads)}
    (r,) = ledger.append_many([Record.from_canonical_body(READ_KIND, canonical_bytes(body))])
    return r.seq


def list_reads(engine: Engine, *, case_id: int | None = None, before: int | None = None,
               limit: int = 100) -> ReadPage:
    """Recorded reads, newest first, of one case (``case_id``) or of all; ``before`` pages back.
    Known limit: a case filter reads every ``case_read`` record in the range (no index by case)."""
    if type(limit) is not int or not 1 <= limit <= MAX_READS:
        raise CaseError("limit", f"must be 1 to {MAX_READS}")
    if before is not None and not is_seq(before):
        raise CaseError("before", "must be a seq")
    if case_id is not None and not is_seq(case_id):
        raise CaseError("case_id", "must be a case id")
    e = store.entries
    q = select(e.c.seq, e.c.recorded_at, e.c.record).where(e.c.kind == READ_KIND)
    if before is not None:
        q = q.where(e.c.seq < before)
    items: list[CaseRead] = []
    last: int | None = None
    with engine.connect() as conn:
        for seq, at, rec in conn.execute(q.order_by(e.c.seq.desc())).yield_per(1000):
            body = orjson.loads(rec)["record"]
            reads = body.get("reads") if isinstance(body, dict) else None
            if not isinstance(reads, list) or not all(isinstance(r, dict) for r in reads):
                continue  # not as sealtrail seals a read: nothing to list (ledger verify keeps the bytes)
            if case_id is not None:
                reads = [r for r in reads if is_seq(r.get("case")) and r.get("case") == case_id]
                if not reads:
                    continue
            if len(items) == limit:
                return ReadPage(items, last)
            items.append(CaseRead(int(seq), at, body.get("principal", {}), reads))
            last = int(seq)
    return ReadPage(items, None)
