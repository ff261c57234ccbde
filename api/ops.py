"""What each CLI command does, without the printing: settings in, plain data out.

A thin face over ``ledger``: settings become an engine or an open ``Ledger``, a ledger function
does the work, and its result becomes the dict the CLI prints and the HTTP API returns. No SQL
here, and no ledger tables: those are ``ledger``'s own business.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

import migrations
from api.config import Settings
from audit.errors import DerivedRowError
from audit.query.verify import IndexReport, verify_index
from ledger import database
from ledger.append import CheckpointPolicy, Ledger
from ledger.errors import NotCoveredError, VerificationError
from ledger.keys import FileKeyStore, KeyStore, key_history, load_signer, open_key_store, revoke_key
from ledger.note import NoteSigner, NoteVerifier
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
    "export_cosign",
    "export_signer",
    "export_stated",
    "hold",
    "holds",
    "initialise",
    "key_store",
    "keys_revoke",
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

log = logging.getLogger(__name__)


def engine_for(s: Settings, *, create: bool = False) -> Engine:
    return database.open_engine(s.db, create_file=create)


def require_schema(engine: Engine) -> None:
    """``SchemaError`` (exit 2) unless the database is migrated to the code's revision."""
    database.require_schema(engine)


def key_store(s: Settings) -> KeyStore:
    """The checkpoint signing key's store: ``SEALTRAIL_KEY_STORE`` (a pkcs11: URI, a key file), else
    the key file ``KEYS/signing.key``."""
    return s.signing_key_store


def open_ledger(s: Settings, engine: Engine | None = None) -> Ledger:
    policy = CheckpointPolicy(s.checkpoint_every, s.checkpoint_seconds)
    keys = key_store(s)
    return database.open_ledger(engine or engine_for(s), keys.path if isinstance(keys, FileKeyStore)
                                else keys, policy)


def export_signer(s: Settings, ledger: Ledger) -> NoteSigner:
    """The key that signs an export bundle's manifest: the ledger's active key, from the key store."""
    keys = key_store(s)
    return database.active_signer(ledger, keys.path if isinstance(keys, FileKeyStore) else keys)


def export_cosign(s: Settings, engine: Engine) -> Callable[[], object] | None:
    """What an export calls to have the configured witnesses cosign its checkpoint, or None when no
    witness list is set. The list is read now, so a bad one is refused before anything is written; a
    witness that does not answer leaves that bundle without its cosignature, never without a bundle."""
    if s.witnesses_file is None:
        return None
    from api.witness import http_post, load_witness_list
    from ledger.cosign import collect

    wl = load_witness_list(s.witnesses_file)

    def cosign() -> object:
        with http_post(wl) as post:
            outcomes = collect(engine, wl.endpoints, post)
        for o in outcomes:
            if not o.ok:
                log.warning("witness %s did not cosign checkpoint %d for an export: %s",
                            o.witness.split("+")[0], o.size, o.detail)
        return outcomes

    return cosign


def export_stated(s: Settings) -> dict[str, Any]:
    """The settings an export states in its compliance facts (stated, not proven): the payload
    retention period and the witnesses configured (their verifier keys)."""
    witnesses: list[str] | None = None
    if s.witnesses_file is not None:
        from api.witness import load_witness_list

        witnesses = [e.verifier.vkey for e in load_witness_list(s.witnesses_file).endpoints]
    return {"retention_days": s.retention_days, "witnesses_configured": witnesses}


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
    keys = key_store(s)
    done = database.initialise(engine, keys, s.origin)
    return {"created": done.created, "db": s.db, "origin": done.ledger.origin,
            "vkey": done.signer.verifier.vkey, "key_file": str(s.key_file), "key_store": keys.location}


def trusted_keys(s: Settings, pinned: list[NoteVerifier]) -> list[NoteVerifier]:
    """Pinned keys: --trusted-key, else SEALTRAIL_TRUSTED_KEY, else the local key file (a PKCS#11
    key store pins nothing of itself: set SEALTRAIL_TRUSTED_KEY)."""
    if pinned:
        return pinned
    if s.trusted_key:
        return [NoteVerifier.from_vkey(s.trusted_key)]
    keys = s.key_store or s.key_file
    if not str(keys).startswith("pkcs11:") and Path(keys).exists():
        return [load_signer(Path(keys)).verifier]
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


def keys_rotate(s: Settings, to: str | None = None) -> dict[str, Any]:
    """A new signing key, its rotation sealed in the ledger: in the same key store (a key file's
    old key retired; a PKCS#11 token's new pair generated inside it), or in the store ``to`` (a
    pkcs11: URI: moving a file key into an HSM; point SEALTRAIL_KEY_STORE at it afterwards)."""
    pin = s.pkcs11_pin.get_secret_value() if s.pkcs11_pin is not None else None
    target = key_store(s) if to is None else open_key_store(to, pin=pin)
    ledger = open_ledger(s)
    try:
        r = target.rotate(ledger)
    finally:
        ledger.engine.dispose()
    return {"seq": r.seq, "old_vkey": r.old_vkey, "new_vkey": r.new_vkey,
            "retired_file": None if r.retired_file is None else str(r.retired_file),
            "key_store": r.new_location}


def keys_revoke(s: Settings, vkey: str, reason: str, from_size: int | None) -> dict[str, Any]:
    """Seal a ``ledger.key_revocation`` of a retired key, endorsed by the active key: checkpoints
    it signed from ``from_size`` on (default: where it was rotated away) no longer verify."""
    ledger = open_ledger(s)
    try:
        done = revoke_key(ledger, key_store(s), vkey, reason, from_size)
    finally:
        ledger.engine.dispose()
    r = done.revocation
    return {"seq": r.seq, "revoked_vkey": r.revoked_vkey, "from_size": r.from_size, "reason": r.reason,
            "endorser_vkey": r.endorser_vkey, "disowned_checkpoints": done.disowned_checkpoints}


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
