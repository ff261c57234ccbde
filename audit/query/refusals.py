"""Refused screening requests: search the sealed ``refusal`` records (``audit.decide.refusal``).

A refusal decides nothing, so it has no row in the trace index; it is found from the sealed
entries themselves (``ledger_entries`` by kind, seq and ``recorded_at``: columns that ``ledger
verify`` checks against each record's bytes), newest first, with the principal and format
filters applied to what each record says. No derived row is trusted, so none needs verifying.
Refusals are few (every one is an authenticated, rate-limited request); a page reads at most
``_SCAN`` entries per round trip until it is full.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Engine

from audit.decide.refusal import REFUSAL_KIND, RefusalBody, parse_refusal_body
from audit.errors import QueryError
from audit.query.traces import checked_limit, principal_key, time_window
from ledger import store

__all__ = ["FORMATS", "RefusalFilter", "RefusalPage", "RefusalSummary", "query_refusals", "refusal_json"]

FORMATS = ("json", "mt", "mt103", "mt202", "pacs008", "pacs009", "pacs004", "pain001", "iso20022")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_CURSOR = re.compile(rb"r1\.(\d{1,19})")
_SCAN = 500


@dataclass(frozen=True)
class RefusalFilter:
    """Refusals recorded in ``[since, until)``, of a principal (certificate SHA-256 fingerprint or
    subject DN), in a format; every given field must match. Checked and normalised on construction."""

    since: str | datetime | None = None
    until: str | datetime | None = None
    principal: str | None = None
    format: str | None = None
    limit: int = 100
    cursor: str | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__
        since, until = time_window(self.since, self.until)
        put(self, "since", since)
        put(self, "until", until)
        put(self, "principal", principal_key(self.principal))
        if self.format is not None and self.format not in FORMATS:
            raise QueryError("format", f"{self.format!r} is not one of {', '.join(FORMATS)}")
        checked_limit(self.limit)
        if self.cursor is not None:
            self.before_seq()

    def before_seq(self) -> int | None:
        """The seq the cursor points below, or None for the first page."""
        if self.cursor is None:
            return None
        try:
            raw = base64.urlsafe_b64decode(self.cursor + "=" * (-len(self.cursor) % 4))
        except (binascii.Error, ValueError):
            raise QueryError("cursor", "is not a cursor this service issued") from None
        m = _CURSOR.fullmatch(raw)
        if m is None:
            raise QueryError("cursor", "is not a cursor this service issued")
        return int(m.group(1))

    def matches(self, body: RefusalBody) -> bool:
        if self.format is not None and body.format != self.format:
            return False
        if self.principal is not None:
            p = body.principal
            got = p.get("fingerprint_sha256") if _HEX64.fullmatch(self.principal) else p.get("subject")
            if got != self.principal:
                return False
        return True


def _cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"r1.{seq}".encode()).decode().rstrip("=")


@dataclass(frozen=True)
class RefusalSummary:
    """One sealed refusal, as search lists it."""

    seq: int
    trace_id: str
    recorded_at: str
    body: RefusalBody


@dataclass(frozen=True)
class RefusalPage:
    items: list[RefusalSummary]
    next_cursor: str | None


def query_refusals(engine: Engine, f: RefusalFilter) -> RefusalPage:
    """The refusals ``f`` selects, newest first, ``f.limit`` at most, and the next page's cursor."""
    items: list[RefusalSummary] = []
    before = f.before_seq()
    with engine.connect() as conn:
        p = store.param(conn)
        while len(items) < f.limit:
            terms, args = [f"kind = {p}"], [REFUSAL_KIND]
            if before is not None:
                terms.append(f"seq < {p}")
                args.append(before)  # type: ignore[arg-type]
            if f.since is not None:
                terms.append(f"recorded_at >= {p}")
                args.append(str(f.since))
            if f.until is not None:
                terms.append(f"recorded_at < {p}")
                args.append(str(f.until))
            rows = conn.exec_driver_sql(
                f"SELECT seq, trace_id, recorded_at, record FROM ledger_entries WHERE {' AND '.join(terms)} "
                f"ORDER BY seq DESC LIMIT {_SCAN}", tuple(args)).all()
            for seq, tid, at, rec in rows:
                before = int(seq)
                try:
                    body = parse_refusal_body(orjson.loads(bytes(rec))["record"])
                except (ValueError, KeyError, TypeError):
                    continue  # not a refusal this version reads: ledger verify names damage, not search
                if f.matches(body):
                    items.append(RefusalSummary(int(seq), str(tid), str(at), body))
                    if len(items) == f.limit:
                        break
            if len(rows) < _SCAN:
                if len(items) < f.limit:
                    before = None
                break
    more = before is not None and len(items) == f.limit
    return RefusalPage(items, _cursor(items[-1].seq) if more and items else None)


def refusal_json(r: RefusalSummary) -> dict[str, Any]:
    """One item of ``GET /v1/traces/refusals`` and ``sealtrail traces refusals --json``."""
    b = r.body
    return {"seq": r.seq, "trace_id": r.trace_id, "recorded_at": r.recorded_at, "at": b.at,
            "principal": {"subject": b.principal.get("subject"),
                          "fingerprint_sha256": b.principal.get("fingerprint_sha256")},
            "via": b.via, "format": b.format, "batch": b.batch, "kind": b.kind, "reason": b.reason,
            "faults": list(b.faults), "fault_count": b.fault_count,
            "payload": {"sha256": b.payload_sha256, "bytes": b.payload_bytes, "kept": b.payload_kept,
                        "withheld": b.withheld}}
