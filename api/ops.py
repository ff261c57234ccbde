"""What each CLI command does, without the printing: settings in, plain data out.

A thin face over ``ledger``: settings become an engine or an open ``Ledger``, a ledger function
does the work, and its result becomes the dict the CLI prints and the HTTP API returns. No SQL
here, and no ledger tables: those are ``ledger``'s own business.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

import migrations
from api.config import Settings
from audit.errors import DerivedRowError
from audit.query.verify import IndexReport, verify_index
from ledger import database
from ledger.append import CheckpointPolicy, Ledger
from ledger.errors import NotCoveredError, VerificationError
from ledger.keys import key_history, load_signer, rotate_key_file
from ledger.note import NoteVerifier
from ledger.proofs import InclusionProof, prove_consistency, prove_inclusion
from ledger.retention import (
    current_holds,
    place_hold,
    purge_expired,
    purge_payloads,
    release_hold,
)
from ledger.verify import VerifyReport, verify_ledger

__all__ = [
    "FullVerifyReport",
    "NotCoveredError",
    "consistency",
    "engine_for",
    "erase",
    "hold",
    "holds",
    "initialise",
    "keys_rotate",
    "keys_show",
    "open_ledger",
    "prove",
    "purge_old_payloads",
    "release",
    "require_schema",
    "trusted_keys",
    "verify",
    "verify_now",
]


def engine_for(s: Settings, *, create: bool = False) -> Engine:
    return database.open_engine(s.db, create_file=create)


def require_schema(engine: Engine) -> None:
    """``SchemaError`` (exit 2) unless the database is migrated to the code's revision."""
    database.require_schema(engine)


def open_ledger(s: Settings, engine: Engine | None = None) -> Ledger:
    policy = CheckpointPolicy(s.checkpoint_every, s.checkpoint_seconds)
    return database.open_ledger(engine or engine_for(s), s.key_file, policy)


def ledger_size(s: Settings) -> int:
    """How many entries the ledger holds now (after a runtime's clean stop sealed its state)."""
    ledger = open_ledger(s)
    try:
        return ledger.size()
    finally:
        ledger.engine.dispose()


def initialise(s: Settings) -> dict[str, Any]:
    engine = engine_for(s, create=True)
    migrations.upgrade(engine, app_role=s.app_role)
    done = database.initialise(engine, s.key_file, s.origin)
    return {"created": done.created, "db": s.db, "origin": done.ledger.origin,
            "vkey": done.signer.verifier.vkey, "key_file": str(s.key_file)}


def trusted_keys(s: Settings, pinned: list[NoteVerifier]) -> list[NoteVerifier]:
    """Pinned keys: --trusted-key, else SEALTRAIL_TRUSTED_KEY, else the local key file."""
    if pinned:
        return pinned
    if s.trusted_key:
        return [NoteVerifier.from_vkey(s.trusted_key)]
    if s.key_file.exists():
        return [load_signer(s.key_file).verifier]
    return []


@dataclass
class FullVerifyReport(VerifyReport):
    """The ledger's report and the derived tables' (the trace index) beside it, as ``derived``."""

    derived: IndexReport | None = None

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        doc["derived"] = None if self.derived is None else self.derived.to_json()
        return doc


def verify(s: Settings, pinned: list[NoteVerifier], workers: int | None,
           witnessed: list[str] | None = None, max_unsealed: int | None = None, *,
           state_roots: bool = False) -> FullVerifyReport:
    """The ledger end to end (``ledger.verify``), then every derived table row by row against the
    sealed records (``audit.query.verify``: ``DerivedRowError`` names the table and seq); with
    ``state_roots``, every sealed state snapshot's root recomputed from the state deltas."""
    engine = engine_for(s)
    try:
        report = verify_ledger(engine, trusted_keys(s, pinned), workers=workers,
                               witnessed=witnessed or (), max_unsealed=max_unsealed)
        derived = verify_index(engine, workers=workers, state_roots=state_roots)
    finally:
        engine.dispose()
    full = FullVerifyReport(**{f.name: getattr(report, f.name) for f in fields(report)}, derived=derived)
    if derived.accounts_unverifiable:
        full.warnings.append(f"{derived.accounts_unverifiable} decisions have a purged payload: their "
                             "account index rows cannot be recomputed and were not checked")
    return full


def verify_now(s: Settings) -> dict[str, Any]:
    """``POST /v1/ledger/verify``'s answer: the report (``verified: true``), or what failed where."""
    pinned = [NoteVerifier.from_vkey(s.trusted_key)] if s.trusted_key else []
    try:
        report = verify(s, pinned, None)
    except VerificationError as exc:
        doc: dict[str, Any] = {"verified": False, "error": getattr(exc, "kind", type(exc).__name__),
                               "message": str(exc)}
        if getattr(exc, "seq", None) is not None:
            doc["seq"] = exc.seq  # type: ignore[attr-defined]
        if isinstance(exc, DerivedRowError):
            doc["table"] = exc.table
            doc["findings"] = [{"table": t, "seq": q, "detail": d} for t, q, d in exc.findings]
            doc["total"] = exc.total
        return doc
    out: dict[str, Any] = report.to_json()
    return out


def prove(s: Settings, target: int | str, ledger: Ledger | None = None, *,
          sign: bool = True) -> InclusionProof:
    """An inclusion proof for ``target`` (seq or trace id) against a signed checkpoint.

    A serving process passes its open ``ledger`` (one engine for the process); without one a
    ledger is opened for the call and its engine disposed after it. An entry newer than the
    latest checkpoint gets a checkpoint signed on the spot, unless ``sign`` is false
    (``NotCoveredError``): a page view must not write."""
    if ledger is not None:
        return prove_inclusion(ledger, target, sign=sign)
    opened = open_ledger(s)
    try:
        return prove_inclusion(opened, target, sign=sign)
    finally:
        opened.engine.dispose()


def consistency(s: Settings, old: int, new: int) -> dict[str, Any]:
    engine = engine_for(s)
    try:
        return prove_consistency(engine, old, new).to_json()
    finally:
        engine.dispose()


def keys_show(s: Settings) -> dict[str, Any]:
    engine = engine_for(s)
    try:
        history = key_history(engine)
    finally:
        engine.dispose()
    return {"active": history[-1].vkey,
            "history": [{"vkey": k.vkey, "valid_from_size": k.valid_from_size} for k in history]}


def keys_rotate(s: Settings) -> dict[str, Any]:
    """A new signing key, its rotation sealed in the ledger, the old key file retired."""
    ledger = open_ledger(s)
    try:
        r = rotate_key_file(ledger, s.key_file)
    finally:
        ledger.engine.dispose()
    return {"seq": r.seq, "old_vkey": r.old_vkey, "new_vkey": r.new_vkey,
            "retired_file": str(r.retired_file)}


def purge_old_payloads(s: Settings, days: int | None) -> dict[str, Any]:
    from audit.screening.lists import lists_needed_since

    ledger = open_ledger(s)
    retention = timedelta(days=days or s.retention_days)
    # a list's bytes are kept while any decision screened against it is: replay screens it again
    keep = lists_needed_since(ledger.engine, ledger.clock() - retention)
    res = purge_expired(ledger, retention, keep=keep)
    return {"purged": res.purged, "held": res.held,
            "seq": res.receipt.seq if res.receipt else None}


def erase(s: Settings, shas: list[str], reason: str) -> dict[str, Any]:
    res = purge_payloads(open_ledger(s), shas, reason)
    return {"purged": res.purged, "seq": res.receipt.seq if res.receipt else None}


def hold(s: Settings, hold_id: str, a: int, b: int, reason: str) -> dict[str, Any]:
    r = place_hold(open_ledger(s), hold_id, a, b, reason)
    return {"hold_id": hold_id, "seq": r.seq}


def release(s: Settings, hold_id: str, reason: str) -> dict[str, Any]:
    r = release_hold(open_ledger(s), hold_id, reason)
    return {"hold_id": hold_id, "seq": r.seq}


def holds(s: Settings) -> dict[str, Any]:
    engine = engine_for(s)
    try:
        return {"holds": [h.__dict__ for h in current_holds(engine)]}
    finally:
        engine.dispose()
