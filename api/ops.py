"""What each CLI command does, without the printing: settings in, plain data out."""

from __future__ import annotations

import base64
import os
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

import migrations
from api.config import Settings
from ledger import Ledger, LedgerError, NoteSigner, NoteVerifier, VerificationError, VerifyReport, store
from ledger.append import CheckpointPolicy
from ledger.checkpoint import SignedCheckpoint
from ledger.errors import DamageError, EntryNotFoundError, KeyFileError, RefusedError
from ledger.keys import generate_key_file, load_signer, replace_key_file
from ledger.merkle import verify_consistency, verify_inclusion
from ledger.proofs import InclusionProof, consistency_proof, inclusion_proof, root_at
from ledger.retention import (
    active_holds,
    place_hold,
    purge_expired,
    purge_payloads,
    release_hold,
)
from ledger.verify import verify_ledger


def engine_for(s: Settings, *, create: bool = False) -> Engine:
    return store.connect(s.db, create_file=create)


def open_ledger(s: Settings, engine: Engine | None = None) -> Ledger:
    eng = engine or engine_for(s)
    store.require_schema(eng)
    signer = load_signer(s.key_file)
    policy = CheckpointPolicy(s.checkpoint_every, s.checkpoint_seconds)
    return Ledger(eng, signer, policy=policy)


def initialise(s: Settings) -> dict[str, Any]:
    engine = engine_for(s, create=True)
    migrations.upgrade(engine, app_role=s.app_role)
    exists = s.key_file.exists()
    signer = load_signer(s.key_file) if exists else generate_key_file(s.key_file, s.origin)
    with engine.connect() as conn:
        size, _ = store.tail(conn)
    created = size == 0
    ledger = Ledger.create(engine, signer, s.origin) if created else Ledger(engine, signer)
    return {"created": created, "db": s.db, "origin": ledger.origin,
            "vkey": signer.verifier.vkey, "key_file": str(s.key_file)}


def trusted_keys(s: Settings, pinned: list[NoteVerifier]) -> list[NoteVerifier]:
    """Pinned keys: --trusted-key, else SEALTRAIL_TRUSTED_KEY, else the local key file."""
    if pinned:
        return pinned
    if s.trusted_key:
        return [NoteVerifier.from_vkey(s.trusted_key)]
    if s.key_file.exists():
        return [load_signer(s.key_file).verifier]
    return []


def verify(s: Settings, pinned: list[NoteVerifier], workers: int | None,
           witnessed: list[str] | None = None, max_unsealed: int | None = None) -> VerifyReport:
    engine = engine_for(s)
    try:
        return verify_ledger(engine, trusted_keys(s, pinned), workers=workers,
                             witnessed=witnessed or (), max_unsealed=max_unsealed)
    finally:
        engine.dispose()


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
        return doc
    out: dict[str, Any] = report.to_json()
    return out


class NotCoveredError(LedgerError):
    """The entry is newer than the latest signed checkpoint, and the caller asked not to sign one."""


def prove(s: Settings, target: int | str, ledger: Ledger | None = None, *,
          sign: bool = True) -> InclusionProof:
    """An inclusion proof for ``target`` (seq or trace id) against a signed checkpoint.

    A serving process passes its open ``ledger`` (one engine for the process); without one a
    ledger is opened for the call and its engine disposed after it. An entry newer than the
    latest checkpoint gets a checkpoint signed on the spot, unless ``sign`` is false
    (``NotCoveredError``): a page view must not write."""
    if ledger is not None:
        return _prove(ledger, NoteVerifier.from_vkey(ledger.active_vkey), target, sign)
    opened = open_ledger(s)
    try:
        return _prove(opened, NoteVerifier.from_vkey(opened.active_vkey), target, sign)
    finally:
        opened.engine.dispose()


def _prove(ledger: Ledger, ours: NoteVerifier, target: int | str, sign: bool) -> InclusionProof:
    if isinstance(target, int) and target >= 1 << 63:
        raise EntryNotFoundError(f"no ledger entry with seq {target}")
    with ledger.engine.connect() as conn:
        p = store.param(conn)
        col = "seq" if isinstance(target, int) else "trace_id"
        row = conn.exec_driver_sql(
            f"SELECT seq, leaf_hash, trace_id FROM ledger_entries WHERE {col} = {p}", (target,)
        ).first()
    if row is None:
        raise EntryNotFoundError(f"no ledger entry with {col} {target}")
    seq, leaf = int(row[0]), bytes(row[1])
    latest = ledger.latest_checkpoint()
    if latest is None or latest.checkpoint.size <= seq:
        if not sign:
            have = 0 if latest is None else latest.checkpoint.size
            raise NotCoveredError(f"entry {seq} is newer than the latest signed checkpoint (size {have})")
        latest = ledger.checkpoint()
    size = latest.checkpoint.size
    with ledger.engine.connect() as conn:
        hashes = inclusion_proof(conn, seq, size)
    # Never hand out a bad proof: the checkpoint must carry our key's signature, the proof
    # must lead from the leaf to its root.
    SignedCheckpoint.verify(latest.note, [ours], ledger.origin)
    verify_inclusion(seq, size, leaf, hashes, latest.checkpoint.root)
    return InclusionProof(seq, size, leaf, tuple(hashes), latest.note)


def consistency(s: Settings, old: int, new: int) -> dict[str, Any]:
    engine = engine_for(s)
    store.require_schema(engine)
    with engine.connect() as conn:
        size, _ = store.tail(conn)
        if not 0 < old <= new <= size:
            raise RefusedError(f"sizes must satisfy 0 < OLD <= NEW <= {size} (the ledger's size)")
        hashes = consistency_proof(conn, old, new)
        r1, r2 = root_at(conn, old), root_at(conn, new)
        notes: dict[int, str] = dict(conn.exec_driver_sql(
            f"SELECT size, note FROM ledger_checkpoints WHERE size IN ({old}, {new})").all())
    verify_consistency(old, new, hashes, r1, r2)
    for size, root in ((old, r1), (new, r2)):  # the printed notes must sign these very roots
        if size in notes and SignedCheckpoint.parse_unverified(notes[size]).checkpoint.root != root:
            raise DamageError("root mismatch", size - 1,
                              f"the checkpoint stored for size {size} signs another root")
    b64 = base64.b64encode
    return {
        "old_size": old, "new_size": new,
        "old_root": b64(r1).decode(), "new_root": b64(r2).decode(),
        "hashes": [b64(h).decode() for h in hashes],
        "old_checkpoint": notes.get(old), "new_checkpoint": notes.get(new),
    }


def keys_show(s: Settings) -> dict[str, Any]:
    engine = engine_for(s)
    store.require_schema(engine)
    with engine.connect() as conn:
        history = [{"vkey": v, "valid_from_size": int(f)} for v, f in conn.exec_driver_sql(
            "SELECT vkey, valid_from_size FROM ledger_keys ORDER BY valid_from_size")]
    if not history:
        raise LedgerError("ledger has no keys yet (run 'sealtrail init')")
    return {"active": history[-1]["vkey"], "history": history}


def keys_rotate(s: Settings) -> dict[str, Any]:
    """New key written first (``signing.key.pending``), then the rotation is committed, then
    the key file is swapped: a crash in between leaves the pending key on disk, never a
    ledger that expects a key nobody has."""
    ledger = open_ledger(s)
    old = load_signer(s.key_file)
    new = NoteSigner.generate(old.name)
    pending = s.key_file.with_suffix(".key.pending")
    if pending.exists():
        raise KeyFileError(f"{pending} exists: an earlier rotation was interrupted; inspect it")
    fd = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(new.skey + "\n")
        f.flush()
        os.fsync(f.fileno())
    receipt = ledger.rotate_key(new)
    retired = replace_key_file(s.key_file, new)
    pending.unlink()
    return {"seq": receipt.seq, "old_vkey": old.verifier.vkey, "new_vkey": new.verifier.vkey,
            "retired_file": str(retired)}


def purge_old_payloads(s: Settings, days: int | None) -> dict[str, Any]:
    ledger = open_ledger(s)
    res = purge_expired(ledger, timedelta(days=days or s.retention_days))
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
    store.require_schema(engine)
    with engine.connect() as conn:
        return {"holds": [h.__dict__ for h in active_holds(conn)]}
