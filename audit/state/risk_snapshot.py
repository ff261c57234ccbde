"""Account risk saved to a file, sealed in the ledger by its Merkle root, so that a restart applies
only the decision records after it.

Without a snapshot a process rebuilds account risk from every decision record of the log
(``audit.state.account_risk_replay``): about 40 µs a decision, so minutes at start for a ledger of
millions. The runtime therefore seals the account-risk state whenever it seals its feature state
(``audit.decide.runtime``: every ``state_snapshot_every`` decisions and at a clean stop), and on
its own every ``account_risk_snapshot_every`` decisions: a
``state.account-risk`` record (``audit.state.risk_snapshot_body``: the root of the per-account tree,
the seq it covers, the policy of its sweeps), then the state to the file beside the velocity
snapshot (``risk_file``). At start, ``restore_account_risk`` trusts the file only if the root it
recomputes from it is the root of a sealed snapshot of the same seq, with the same key id, hour,
sweep day, count and policy, and the file names the same history (the chain hash of the seq it
covers); it then applies the decisions after that seq. Anything else (no file, another ledger or
history, another policy, an altered file, a seal that never committed) is logged and the state
rebuilt from the whole log, as without a snapshot. A process killed between the seal and the write
leaves the older file: a longer catch-up, never a wrong state.

File: one JSON line ``{"schema", "origin", "covers_seq", "chain", "root", "sealed_seq"}``, then the
state's ``sealtrail.account-risk-state/1`` bytes, replaced atomically (mode 0600; accounts are keyed
identifiers only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
from sqlalchemy import Engine

from audit.decide.account_risk import AccountRiskPolicy, AccountRiskState
from audit.errors import StateSnapshotError
from audit.state.account_risk_replay import AccountRiskReport, rebuild_account_risk
from audit.state.replay import entry_pages, ledger_size
from audit.state.risk_snapshot_body import (
    RISK_SNAPSHOT_KIND,
    RiskState,
    SealedRiskSnapshot,
    parse_risk_snapshot,
    risk_snapshot_body,
)
from audit.state.sealed import find_claim
from audit.state.snapshot import chain_at_size
from inference.state_store import write_atomically
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record

__all__ = ["RISK_FILE_SCHEMA", "RestoredRisk", "find_risk_sealed", "restore_account_risk", "risk_file",
           "risk_snapshot_pages", "save_risk", "seal_risk", "write_risk"]

log = logging.getLogger(__name__)

RISK_FILE_SCHEMA = "sealtrail.account-risk-file/1"
_HEAD = frozenset({"schema", "origin", "covers_seq", "chain", "root", "sealed_seq"})


def risk_file(velocity_snapshot: Path) -> Path:
    """Where the account-risk state is kept: beside the velocity snapshot, its name + ``.account-risk``."""
    return velocity_snapshot.with_name(velocity_snapshot.name + ".account-risk")


def risk_snapshot_pages(engine: Engine, from_seq: int = 0,
                        to_seq: int | None = None) -> Iterator[list[tuple[int, bytes]]]:
    """The ``state.account-risk`` entries from ``from_seq`` on (to ``to_seq``), (seq, envelope
    bytes), in seq order, a page at a time."""
    return entry_pages(engine, RISK_SNAPSHOT_KIND, from_seq, to_seq)


def seal_risk(ledger: Ledger, state: RiskState, policy: AccountRiskPolicy, covered: int,
              decider: str) -> SealedRiskSnapshot:
    """Seal ``state`` (held under ``policy``) as the account risk after the first ``covered``
    entries (the caller vouches); the record as sealed."""
    body = risk_snapshot_body(state, policy, covered - 1, decider)
    receipt = ledger.append(Record.from_jcs(RISK_SNAPSHOT_KIND, canonical_bytes(body)))
    return parse_risk_snapshot(receipt.seq, body)


def write_risk(path: Path, engine: Engine, origin: str, state: RiskState, sealed: SealedRiskSnapshot) -> None:
    """Replace the file at ``path`` with ``state``, which ``sealed`` seals."""
    head = {"schema": RISK_FILE_SCHEMA, "origin": origin, "covers_seq": sealed.covers_seq,
            "chain": chain_at_size(engine, sealed.covers_seq + 1), "root": sealed.root.hex(),
            "sealed_seq": sealed.seq}
    write_atomically(path, orjson.dumps(head) + b"\n" + state.to_bytes())


def save_risk(path: Path, ledger: Ledger, state: RiskState, policy: AccountRiskPolicy, covered: int,
              decider: str) -> SealedRiskSnapshot:
    """Seal ``state`` as the account risk after the first ``covered`` entries, then write it to
    ``path``; the sealed record."""
    sealed = seal_risk(ledger, state, policy, covered, decider)
    write_risk(path, ledger.engine, ledger.origin, state, sealed)
    return sealed


def find_risk_sealed(engine: Engine, covers_seq: int, root: bytes, hint: int | None = None,
                     fits: Callable[[SealedRiskSnapshot], bool] | None = None) -> SealedRiskSnapshot | None:
    """A sealed account-risk snapshot of the state after ``covers_seq`` with root ``root`` (the one
    at seq ``hint`` first, if it is one; one that ``fits``, if given), else None. Records that do
    not parse are passed over."""
    return find_claim(engine, RISK_SNAPSHOT_KIND, parse_risk_snapshot, covers_seq, root, hint, fits)


@dataclass(frozen=True)
class RestoredRisk:
    """Account risk at start: the state, what was applied to make it, and the sealed snapshot it
    began from (None: rebuilt from the whole log)."""

    state: AccountRiskState
    report: AccountRiskReport
    sealed: SealedRiskSnapshot | None


def _load(path: Path, engine: Engine, origin: str, policy: AccountRiskPolicy,
          size: int) -> tuple[RiskState, SealedRiskSnapshot] | None:
    """The state in the file at ``path`` and the sealed snapshot it is, or None (logged) where it
    is not one this process may start from."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, no permission: the file cannot be used, the log still can
        log.warning("account-risk snapshot %s not used (account risk is rebuilt from the whole log): %s",
                    path, exc)
        return None
    line, _, body = data.partition(b"\n")
    try:
        try:
            head = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise StateSnapshotError(f"its head is not JSON: {exc}") from None
        if not isinstance(head, dict) or head.keys() != _HEAD or head["schema"] != RISK_FILE_SCHEMA:
            raise StateSnapshotError(f"its head is not a {RISK_FILE_SCHEMA} head")
        if head["origin"] != origin:
            raise StateSnapshotError(f"it is the state of the ledger {head['origin']!r}, not of {origin!r}")
        covers, hint = head["covers_seq"], head["sealed_seq"]
        if type(covers) is not int or type(hint) is not int or not 0 <= covers < hint:
            raise StateSnapshotError("its head names no covered seq and sealed seq")
        if covers >= size:
            raise StateSnapshotError(f"it covers seq {covers}, past the {size} entries the state is wanted "
                                     "for")
        if head["chain"] != chain_at_size(engine, covers + 1):
            raise StateSnapshotError(f"the ledger does not hold the history it describes (to seq {covers})")
        state = RiskState.from_bytes(body)
        root = state.root()
        # the head's sealed seq is only where to look first: one past the ledger is no seq at all
        where = hint if hint < ledger_size(engine) else None
        # the claim that states this state's counts, hour, sweep day and policy: a record of the same
        # seq and root under other terms (another policy) is passed over, not taken to refuse the file
        sealed = find_risk_sealed(engine, covers, root, where, lambda s: s.matches(state, policy) is None)
        if sealed is None:
            sealed = find_risk_sealed(engine, covers, root, where)  # none fits: say how the first differs
        if sealed is None:
            raise StateSnapshotError(f"no sealed state.account-risk of seq {covers} has its root "
                                     f"{root.hex()[:16]}...: the file is not the state the ledger vouches "
                                     "for")
        diff = sealed.matches(state, policy)
        if diff is not None:
            raise StateSnapshotError(f"the state.account-risk sealed at seq {sealed.seq} differs: {diff}")
    except StateSnapshotError as exc:
        log.warning("account-risk snapshot %s not used (account risk is rebuilt from the whole log): %s",
                    path, exc)
        return None
    return state, sealed


def restore_account_risk(path: Path | None, engine: Engine, origin: str, policy: AccountRiskPolicy, *,
                         size: int | None = None,
                         progress: Callable[[int], None] | None = None) -> RestoredRisk:
    """The account risk of the ledger's first ``size`` entries (default: all), deciding under
    ``policy``: the sealed snapshot at ``path`` with the decisions after it applied, else every
    decision of the log applied to an empty state."""
    size = ledger_size(engine) if size is None else size
    loaded = _load(path, engine, origin, policy, size) if path is not None else None
    if loaded is None:
        state, report = rebuild_account_risk(engine, policy, size=size, progress=progress)
        return RestoredRisk(state, report, None)
    held, sealed = loaded
    state, report = rebuild_account_risk(engine, policy, size=size, progress=progress,
                                         state=held.into(policy), from_seq=sealed.covers_seq + 1)
    return RestoredRisk(state, report, sealed)
