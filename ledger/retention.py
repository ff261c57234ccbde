"""Retention: purge raw payloads after their period, unless a legal hold covers them.

Purges and holds are ledger records themselves. A purge empties the payload bytes but keeps
their SHA-256 (inside the sealed record), so the chain and every proof still verify.
Default period: 5 years (FATF Recommendation 11); FINRA 4511 firms set 6.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson
from sqlalchemy import Connection

from ledger import store
from ledger.append import Ledger
from ledger.errors import LedgerError, LegalHoldError
from ledger.records import Receipt, Record

__all__ = ["DEFAULT_RETENTION", "Hold", "PurgeResult", "active_holds", "place_hold",
           "purge_expired", "purge_payloads", "release_hold"]

DEFAULT_RETENTION = timedelta(days=5 * 365 + 1)
_HOLD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")


@dataclass(frozen=True)
class Hold:
    hold_id: str
    seq_from: int
    seq_to: int
    reason: str
    placed_seq: int


@dataclass(frozen=True)
class PurgeResult:
    purged: list[str]
    held: list[str]
    receipt: Receipt | None


def active_holds(conn: Connection) -> list[Hold]:
    """Holds placed and not released, as the ledger's own records say."""
    holds: dict[str, Hold] = {}
    for seq, rec in conn.exec_driver_sql(
        "SELECT seq, record FROM ledger_entries WHERE kind = 'ledger.legal_hold' ORDER BY seq"
    ):
        body = orjson.loads(rec)["record"]
        if body["action"] == "place":
            holds[body["hold_id"]] = Hold(
                body["hold_id"], body["seq_from"], body["seq_to"], body["reason"], int(seq)
            )
        else:
            holds.pop(body["hold_id"], None)
    return list(holds.values())


def place_hold(ledger: Ledger, hold_id: str, seq_from: int, seq_to: int, reason: str) -> Receipt:
    """Block purges of payloads first stored at seq ``seq_from``..``seq_to`` (inclusive)."""
    if not _HOLD_ID.fullmatch(hold_id):
        raise LedgerError(f"hold id {hold_id!r} must match {_HOLD_ID.pattern}")
    if not 0 <= seq_from <= seq_to:
        raise LedgerError(f"hold range {seq_from}..{seq_to} is empty or negative")
    if not reason.strip():
        raise LedgerError("a legal hold needs a reason (case or order reference)")
    with ledger.engine.connect() as conn:
        if any(h.hold_id == hold_id for h in active_holds(conn)):
            raise LedgerError(f"legal hold {hold_id} is already active")
    body = {"action": "place", "hold_id": hold_id, "seq_from": seq_from, "seq_to": seq_to,
            "reason": reason}
    return ledger.append(Record("ledger.legal_hold", body))


def release_hold(ledger: Ledger, hold_id: str, reason: str) -> Receipt:
    with ledger.engine.connect() as conn:
        if not any(h.hold_id == hold_id for h in active_holds(conn)):
            raise LedgerError(f"no active legal hold {hold_id}")
    body = {"action": "release", "hold_id": hold_id, "reason": reason}
    return ledger.append(Record("ledger.legal_hold", body))


def _purge(
    ledger: Ledger, candidates: list[tuple[str, int]], reason: str, *, all_or_nothing: bool
) -> PurgeResult:
    with ledger.engine.connect() as conn:
        holds = active_holds(conn)
    held = [sha for sha, seq in candidates if any(h.seq_from <= seq <= h.seq_to for h in holds)]
    if held and all_or_nothing:
        hold = next(h for h in holds if any(
            h.seq_from <= seq <= h.seq_to for sha, seq in candidates if sha == held[0]))
        raise LegalHoldError(
            f"payload {held[0]} is under legal hold {hold.hold_id} ({hold.reason}); "
            "nothing was purged"
        )
    free = [sha for sha, seq in candidates if sha not in set(held)]
    if not free:
        return PurgeResult([], held, None)
    now_us = int(ledger.clock().timestamp() * 1_000_000)

    def effect(conn: Connection, receipts: list[Receipt]) -> None:
        p = store.param(conn)
        # Re-check under the sequencer lock: a hold placed meanwhile wins.
        if {h.hold_id for h in active_holds(conn)} != {h.hold_id for h in holds}:
            raise LegalHoldError("legal holds changed during the purge; run it again")
        conn.exec_driver_sql(
            f"UPDATE ledger_payloads SET data = NULL, purged_at = {p}, purge_seq = {p} "
            f"WHERE sha256 = {p} AND data IS NOT NULL",
            [(now_us, receipts[0].seq, sha) for sha in free],
        )

    body = {"reason": reason, "payloads": free}
    (receipt,) = ledger._commit([Record("ledger.payload_purge", body)], effect)
    return PurgeResult(free, held, receipt)


def purge_payloads(ledger: Ledger, sha256s: list[str], reason: str) -> PurgeResult:
    """Erase specific payloads now (a legal erasure order); refused where a hold covers one."""
    if not reason.strip():
        raise LedgerError("an erasure needs a reason (order reference)")
    p = "?" if ledger.engine.dialect.paramstyle == "qmark" else "%s"
    with ledger.engine.connect() as conn:
        rows = [
            (str(s), int(q)) for s, q in conn.exec_driver_sql(
                f"SELECT sha256, first_seq FROM ledger_payloads WHERE sha256 IN "
                f"({', '.join([p] * len(sha256s))}) AND data IS NOT NULL", tuple(sha256s),
            )
        ] if sha256s else []
    unknown = set(sha256s) - {s for s, _ in rows}
    if unknown:
        raise LedgerError(f"no stored (unpurged) payload {sorted(unknown)[0]}")
    return _purge(ledger, rows, reason, all_or_nothing=True)


def purge_expired(
    ledger: Ledger, retention: timedelta = DEFAULT_RETENTION, *, now: datetime | None = None,
    limit: int = 10_000,
) -> PurgeResult:
    """Purge up to ``limit`` payloads stored before ``now - retention``, skipping held ones."""
    cutoff = (now or ledger.clock()) - retention
    cutoff_us = int(cutoff.timestamp() * 1_000_000)
    p = "?" if ledger.engine.dialect.paramstyle == "qmark" else "%s"
    with ledger.engine.connect() as conn:
        rows = [
            (str(s), int(q)) for s, q in conn.exec_driver_sql(
                "SELECT sha256, first_seq FROM ledger_payloads "
                f"WHERE data IS NOT NULL AND stored_at < {p} ORDER BY first_seq LIMIT {int(limit)}",
                (cutoff_us,),
            )
        ]
    if not rows:
        return PurgeResult([], [], None)
    return _purge(
        ledger, rows, f"retention period of {retention.days} days expired", all_or_nothing=False
    )
