"""Retention: purge raw payloads after their period, unless a legal hold covers them.

Purges and holds are ledger records themselves. A purge empties the payload bytes but keeps
their SHA-256 (inside the sealed record), so the chain and every proof still verify.
Default period: 10 years (3,653 days), OFAC's record-keeping period (31 CFR 501.601), which is
longer than FATF Recommendation 11's 5 years and FINRA 4511's 6 (docs/compliance.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from ledger import store
from ledger.append import Ledger
from ledger.errors import DamageError, LedgerError, LegalHoldError, RefusedError
from ledger.records import Receipt, Record

__all__ = ["DEFAULT_RETENTION", "Hold", "PurgeResult", "active_holds", "current_holds", "place_hold",
           "purge_expired", "purge_payloads", "release_hold"]

DEFAULT_RETENTION = timedelta(days=3653)
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
        try:
            body = orjson.loads(rec)["record"]
            action, hold_id = body["action"], str(body["hold_id"])
            if action == "place":
                holds[hold_id] = Hold(hold_id, int(body["seq_from"]), int(body["seq_to"]),
                                      str(body["reason"]), int(seq))
            elif action == "release":
                holds.pop(hold_id, None)
            else:
                raise ValueError(f"unknown action {action!r}")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DamageError("malformed record", int(seq), f"legal hold record: {exc}") from exc
    return list(holds.values())


def current_holds(engine: Engine) -> list[Hold]:
    """``active_holds`` of the ledger in ``engine``'s database, read in a connection of its own."""
    store.require_schema(engine)
    with engine.connect() as conn:
        return active_holds(conn)


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
            raise RefusedError(f"legal hold {hold_id} is already active")
    body = {"action": "place", "hold_id": hold_id, "seq_from": seq_from, "seq_to": seq_to,
            "reason": reason}
    return _hold_record(ledger, body, must_be_active=False)


def release_hold(ledger: Ledger, hold_id: str, reason: str) -> Receipt:
    with ledger.engine.connect() as conn:
        if not any(h.hold_id == hold_id for h in active_holds(conn)):
            raise RefusedError(f"no active legal hold {hold_id}")
    body = {"action": "release", "hold_id": hold_id, "reason": reason}
    return _hold_record(ledger, body, must_be_active=True)


def _hold_record(ledger: Ledger, body: Mapping[str, Any], *, must_be_active: bool) -> Receipt:
    hold_id = str(body["hold_id"])

    def recheck(conn: Connection) -> None:  # under the sequencer lock, before the append
        active = any(h.hold_id == hold_id for h in active_holds(conn))
        if active != must_be_active:
            state = "not active" if must_be_active else "already active"
            raise RefusedError(f"legal hold {hold_id} is {state}")

    (receipt,) = ledger._commit([Record("ledger.legal_hold", body)], before=recheck)
    return receipt


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
            raise RefusedError("legal holds changed during the purge; nothing was purged, "
                               "run it again")
        for sha in free:  # one by one: a payload purged meanwhile must abort, not vanish
            done = conn.exec_driver_sql(
                f"UPDATE ledger_payloads SET data = NULL, purged_at = {p}, purge_seq = {p} "
                f"WHERE sha256 = {p} AND data IS NOT NULL", (now_us, receipts[0].seq, sha))
            if done.rowcount != 1:
                raise RefusedError(f"payload {sha} was purged meanwhile; nothing was purged, "
                                   "run it again")

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
        raise RefusedError(f"no stored (unpurged) payload {sorted(unknown)[0]}")
    return _purge(ledger, rows, reason, all_or_nothing=True)


def purge_expired(
    ledger: Ledger, retention: timedelta = DEFAULT_RETENTION, *, now: datetime | None = None,
    limit: int = 10_000, keep: Collection[str] = (),
) -> PurgeResult:
    """Purge up to ``limit`` payloads stored before ``now - retention``, skipping held ones and those
    whose SHA-256 is in ``keep`` (the caller's: bytes that records still retained need, as a
    sanctions list that decisions of the period were screened against)."""
    cutoff = (now or ledger.clock()) - retention
    cutoff_us = int(cutoff.timestamp() * 1_000_000)
    p = "?" if ledger.engine.dialect.paramstyle == "qmark" else "%s"
    kept = sorted(set(keep))
    spared = f" AND sha256 NOT IN ({', '.join([p] * len(kept))})" if kept else ""
    with ledger.engine.connect() as conn:
        rows = [
            (str(s), int(q)) for s, q in conn.exec_driver_sql(
                "SELECT sha256, first_seq FROM ledger_payloads "
                f"WHERE data IS NOT NULL AND stored_at < {p}{spared} ORDER BY first_seq LIMIT {int(limit)}",
                (cutoff_us, *kept),
            )
        ]
    if not rows:
        return PurgeResult([], [], None)
    return _purge(
        ledger, rows, f"retention period of {retention.days} days expired", all_or_nothing=False
    )
