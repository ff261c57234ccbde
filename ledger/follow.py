"""Following a log from beside its hot standby: every checkpoint the primary publishes is checked
against the last one accepted and against the records replicated to the standby.

One round (``follow_round``) takes the follower's state, the primary's newest signed checkpoint and
the standby's replicated log, and returns the new state with the alarms it raised:

- ``BAD_SIGNATURE``: the checkpoint is malformed, of another log, or not signed by the key that the
  ledger's key history (trusted from the pinned key on, each rotation endorsed by the key before)
  says signs its size;
- ``ROLLBACK``: it is smaller than the last accepted checkpoint;
- ``FORK``: same size and another root, no RFC 9162 consistency proof from the last accepted one,
  or a root that the replicated records do not make;
- ``STALL``: a source does not answer, the log grew and no new checkpoint came for longer than
  ``stall_after`` seconds, or the standby's size stood still that long while the primary's grew.

Nothing here touches a database, a file or the clock: the sources reach the round as the narrow
``Primary`` and ``Replica`` protocols, the time as ``now``; ``ledger.follow_io`` holds the sources
that read databases and the HTTP API, and the state directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from ledger.checkpoint import SignedCheckpoint
from ledger.errors import LedgerError, NoteError, VerificationError
from ledger.merkle import HASH_SIZE, CompactRange, verify_consistency
from ledger.note import NoteVerifier, open_note, parse_note
from ledger.revocation import KeyRevocation

__all__ = [
    "STATE_VERSION",
    "Alarm",
    "AlarmKind",
    "FollowState",
    "Head",
    "Primary",
    "Replica",
    "Round",
    "SourceUnavailableError",
    "StateError",
    "UntrustedKeysError",
    "follow_round",
]

STATE_VERSION = 1


class StateError(LedgerError):
    """The follower's state file is unreadable, corrupt, or of another log: a person must look."""


class SourceUnavailableError(LedgerError):
    """A source (the primary, the standby) did not answer or has nothing to give yet."""


class UntrustedKeysError(LedgerError):
    """The replicated key history does not lead from a pinned key through endorsed rotations."""


class AlarmKind(StrEnum):
    ROLLBACK = "ROLLBACK"
    FORK = "FORK"
    STALL = "STALL"
    BAD_SIGNATURE = "BAD_SIGNATURE"


@dataclass(frozen=True)
class Head:
    """A tree head as evidence: size and root."""

    size: int
    root: bytes

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root.hex()}


def _head(cp: SignedCheckpoint | None) -> Head | None:
    return None if cp is None else Head(cp.checkpoint.size, cp.checkpoint.root)


@dataclass(frozen=True)
class Alarm:
    """One thing an operator must look at, with both checkpoints as evidence.

    ``offered_note`` is the note the primary published (kept even when it does not parse),
    ``accepted_note`` the last one this follower accepted; ``replicated`` the head the standby's
    records make, where that is what disagreed."""

    kind: AlarmKind
    detail: str
    accepted: Head | None = None
    offered: Head | None = None
    replicated: Head | None = None
    accepted_note: str | None = None
    offered_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "kind": str(self.kind), "detail": self.detail,
            "accepted": None if self.accepted is None else self.accepted.to_json(),
            "offered": None if self.offered is None else self.offered.to_json(),
        }
        if self.replicated is not None:
            doc["replicated"] = self.replicated.to_json()
        return doc

    def line(self) -> str:
        """The alarm on one line, as the loop logs it."""
        def size(h: Head | None) -> str:
            return "-" if h is None else str(h.size)
        return (f"ALARM {self.kind} accepted={size(self.accepted)} offered={size(self.offered)}: "
                + " ".join(self.detail.split()))


@dataclass(frozen=True)
class FollowState:
    """What a follower keeps between rounds (and restarts): the last accepted checkpoint and when
    things last moved. Times are seconds since the epoch.

    ``behind_since``: since when the log has held entries no accepted checkpoint covers (None:
    covered); ``replica_since``: since when the standby has stood at ``replica_size`` (reset when
    it moves or has caught up); ``leaves``: the replicated leaf hashes folded so far (a compact
    range, never past ``accepted``), so each round reads only the leaves added since."""

    origin: str
    accepted: SignedCheckpoint
    accepted_at: float
    behind_since: float | None
    replica_size: int
    replica_since: float
    leaves: CompactRange = field(compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "origin": self.origin,
            "accepted_note": self.accepted.note,
            "accepted_size": self.accepted.checkpoint.size,
            "accepted_root": self.accepted.checkpoint.root.hex(),
            "accepted_at": self.accepted_at,
            "behind_since": self.behind_since,
            "replica_size": self.replica_size,
            "replica_since": self.replica_since,
            "leaves": {"size": self.leaves.size, "hashes": [h.hex() for h in self.leaves.hashes]},
        }

    @classmethod
    def from_json(cls, doc: Any) -> FollowState:
        """Parse a state document; ``StateError`` naming what is wrong."""
        if not isinstance(doc, dict):
            raise StateError("the state is not a JSON object")
        if doc.get("version") != STATE_VERSION:
            raise StateError(f"state version {doc.get('version')!r} is not {STATE_VERSION}")
        try:
            origin = _typed(doc, "origin", str)
            note = _typed(doc, "accepted_note", str)
            accepted = SignedCheckpoint.parse_unverified(note)
            size, root = _typed(doc, "accepted_size", int), bytes.fromhex(_typed(doc, "accepted_root", str))
            if (size, root, origin) != (accepted.checkpoint.size, accepted.checkpoint.root,
                                        accepted.checkpoint.origin):
                raise StateError("accepted_size, accepted_root or origin disagree with accepted_note")
            leaves_doc = _typed(doc, "leaves", dict)
            hashes = [bytes.fromhex(h) for h in _typed(leaves_doc, "hashes", list)]
            if any(len(h) != HASH_SIZE for h in hashes):
                raise StateError(f"leaves: a hash is not {HASH_SIZE} bytes")
            leaves = CompactRange(_typed(leaves_doc, "size", int), hashes)
            if leaves.size > size:
                raise StateError(f"leaves reach size {leaves.size}, past the accepted size {size}")
            if leaves.size == size and size and leaves.root() != root:
                raise StateError(f"the leaves kept for size {size} do not make the accepted root")
            behind = doc.get("behind_since")
            if behind is not None and not isinstance(behind, int | float):
                raise StateError("behind_since is not a number")
            state = cls(origin, accepted, float(_typed(doc, "accepted_at", float)),
                        None if behind is None else float(behind), _typed(doc, "replica_size", int),
                        float(_typed(doc, "replica_since", float)), leaves)
        except (NoteError, ValueError, TypeError) as exc:  # bad hex, a compact range of wrong length
            raise StateError(f"the state is corrupt: {exc}") from exc
        if state.replica_size < 0:
            raise StateError("replica_size is negative")
        return state


def _typed(doc: dict[str, Any], key: str, kind: type) -> Any:
    value = doc.get(key)
    ok = (isinstance(value, int | float) and not isinstance(value, bool)) if kind is float else \
        (isinstance(value, kind) and not isinstance(value, bool))
    if not ok:
        raise StateError(f"the state's {key!r} is missing or not {kind.__name__}")
    return value


class Primary(Protocol):
    """Where the primary's checkpoints come from (its database, its HTTP API)."""

    def latest(self) -> str:
        """The newest signed checkpoint note; ``SourceUnavailableError`` if there is none to give."""
        ...

    def size(self) -> int | None:
        """The primary log's size, where this source can tell (a database can, the API cannot)."""
        ...

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        """RFC 9162 consistency proof between the primary's trees of ``old`` and ``new`` entries;
        ``SourceUnavailableError``, or a ``VerificationError`` when the primary's store is damaged."""
        ...


class Replica(Protocol):
    """The records replicated to the standby (read only)."""

    def size(self) -> int:
        """Entries replicated; ``SourceUnavailableError`` if the standby does not answer."""
        ...

    def origin(self) -> str:
        """The log's origin, from its genesis record."""
        ...

    def keys(self, pinned: Sequence[NoteVerifier]) -> list[tuple[int, NoteVerifier]]:
        """``(valid from size, key)`` of every key from the first pinned one on, oldest first, each
        endorsed by the one before through a sealed rotation record; ``UntrustedKeysError``."""
        ...

    def revocations(self) -> Sequence[KeyRevocation]:
        """Every sealed ``ledger.key_revocation`` replicated so far (endorsements checked)."""
        ...

    def leaf_hashes(self, begin: int, end: int) -> Iterable[Sequence[bytes]]:
        """The leaf hashes of entries ``begin..end-1`` in order, in bounded chunks."""
        ...

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        """RFC 9162 consistency proof computed from the replicated records."""
        ...


@dataclass(frozen=True)
class Round:
    """What one round found: the state to keep, the alarms, and figures for the metrics."""

    state: FollowState | None
    new: bool  # a newer checkpoint was accepted
    alarms: tuple[Alarm, ...]
    notes: tuple[str, ...]  # what is worth a line but is no alarm (waiting for the standby, ...)
    replica_size: int | None
    primary_size: int | None  # the largest size the primary is known to have
    checked_against_replica: int | None  # the size whose root the replicated records were seen to make

    @property
    def ok(self) -> bool:
        return not self.alarms

    @property
    def lag(self) -> int | None:
        """Entries the standby is behind the primary, where both are known."""
        if self.replica_size is None or self.primary_size is None:
            return None
        return max(0, self.primary_size - self.replica_size)

    def to_json(self, now: float) -> dict[str, Any]:
        st = self.state
        acc = None if st is None else {**_head_json(st.accepted),
                                       "origin": st.origin, "note": st.accepted.note}
        return {
            "accepted": acc,
            "new_checkpoint": self.new,
            "replica_size": self.replica_size,
            "primary_size": self.primary_size,
            "lag": self.lag,
            "checked_against_replica": self.checked_against_replica,
            "seconds_since_new_checkpoint": None if st is None else round(now - st.accepted_at, 3),
            "alarms": [a.to_json() for a in self.alarms],
            "notes": list(self.notes),
        }


def _head_json(cp: SignedCheckpoint) -> dict[str, Any]:
    return Head(cp.checkpoint.size, cp.checkpoint.root).to_json()


def _active(keys: Sequence[tuple[int, NoteVerifier]], size: int) -> NoteVerifier | None:
    for valid_from, key in reversed(keys):
        if valid_from <= size:
            return key
    return None


class _Rejected(Exception):
    def __init__(self, alarm: Alarm | None = None, note: str | None = None, size: int | None = None) -> None:
        self.alarm, self.note, self.size = alarm, note, size


def _revoked(keys: Sequence[tuple[int, NoteVerifier]], revocations: Sequence[KeyRevocation], vkey: str,
             size: int) -> KeyRevocation | None:
    """The revocation of ``vkey`` in force at tree size ``size``, counting only revocations endorsed by
    the key the trusted history says was active when each was sealed (as ``ledger verify`` does)."""
    for rev in revocations:
        endorser = _active(keys, rev.seq)
        if (rev.revoked_vkey == vkey and rev.from_size <= size and endorser is not None
                and endorser.vkey == rev.endorser_vkey):
            return rev
    return None


def _open_offered(note: str, keys: Sequence[tuple[int, NoteVerifier]], origin: str, replica_size: int,
                  accepted: SignedCheckpoint | None,
                  revocations: Sequence[KeyRevocation] = ()) -> SignedCheckpoint:
    """The offered note, signed by the key the history says signs its size; ``_Rejected`` with a
    ``BAD_SIGNATURE`` alarm, or with a note only where the standby has not replicated that key yet."""
    acc_head, acc_note = _head(accepted), None if accepted is None else accepted.note

    def bad(detail: str, offered: Head | None = None) -> _Rejected:
        return _Rejected(Alarm(AlarmKind.BAD_SIGNATURE, detail, acc_head, offered, None, acc_note, note))

    try:
        claimed = SignedCheckpoint.parse_unverified(note)
        _, sigs = parse_note(note)
    except NoteError as exc:
        raise bad(f"the primary's checkpoint is malformed: {exc}") from exc
    cp = claimed.checkpoint
    offered = _head(claimed)
    if cp.origin != origin:
        raise bad(f"the checkpoint is of log {cp.origin!r}, the standby replicates {origin!r}", offered)
    key = _active(keys, cp.size)
    if key is None:
        raise bad(f"no trusted key signs size {cp.size}: the pinned key is valid from size {keys[0][0]} on",
                  offered)
    if cp.size > replica_size and not any((s.name, s.key_id) == (key.name, key.key_id) for s in sigs):
        # a rotation the standby has not replicated yet, or a forgery: wait for the standby (a
        # standby that does not catch up raises STALL)
        raise _Rejected(None, f"the checkpoint of size {cp.size} is not signed by {key.vkey}, the newest "
                              f"key the standby knows (at size {replica_size}): waiting for it to "
                              "replicate a key rotation", cp.size)
    try:
        open_note(note, [key])
    except NoteError as exc:
        raise bad(f"the checkpoint of size {cp.size} is not signed by {key.vkey}, the key that signs "
                  f"that size: {exc}", offered) from exc
    rev = _revoked(keys, revocations, key.vkey, cp.size)
    if rev is not None:
        raise bad(f"the checkpoint of size {cp.size} is signed by {key.vkey}, revoked from size "
                  f"{rev.from_size} (seq {rev.seq}: {rev.reason})", offered)
    return claimed


def _check_state(state: FollowState, keys: Sequence[tuple[int, NoteVerifier]]) -> None:
    """``StateError`` unless the state's accepted checkpoint is signed by the key the trusted history
    says signs its size: a state file is the follower's memory, and an edited one is no evidence."""
    size = state.accepted.checkpoint.size
    key = _active(keys, size)
    try:
        if key is None:
            raise NoteError(f"no trusted key signs size {size}")
        open_note(state.accepted.note, [key])
    except NoteError as exc:
        raise StateError(f"the state's accepted checkpoint (size {size}) does not verify: {exc}; the "
                         "state file was edited or is of another log") from exc


def follow_round(
    state: FollowState | None,
    primary: Primary,
    replica: Replica,
    pinned: Sequence[NoteVerifier],
    *,
    now: float,
    stall_after: float,
) -> Round:
    """Check the primary's newest checkpoint against ``state`` and the standby; return the new state.

    A checkpoint is accepted only if it passes every check; a first one (no state) is accepted on
    its signature alone and checked against the replicated records as soon as they reach it.
    ``StateError`` if ``state`` is of another log than the standby's."""
    r = _Round(state, now)
    keys: list[tuple[int, NoteVerifier]] | None = None
    revocations: Sequence[KeyRevocation] = ()
    try:
        replica_size = replica.size()
        origin = replica.origin()
        if state is not None and origin != state.origin:
            raise StateError(f"the state is of log {state.origin!r}, the standby replicates {origin!r}")
        try:
            keys = replica.keys(pinned)
            revocations = replica.revocations()
        except UntrustedKeysError as exc:
            r.alarm(AlarmKind.BAD_SIGNATURE, f"the replicated key history is not trusted: {exc}")
    except SourceUnavailableError as exc:
        r.stall(f"the standby does not answer: {exc}")
        return Round(state, False, tuple(r.alarms), (), None, None, None)
    if state is not None and keys is not None:
        _check_state(state, keys)

    note: str | None = None
    primary_size: int | None = None
    try:
        note = primary.latest()
        primary_size = primary.size()
    except SourceUnavailableError as exc:
        r.stall(f"the primary does not answer: {exc}")
    offered: SignedCheckpoint | None = None
    waiting: int | None = None  # the size of an offered checkpoint put off until the standby catches up
    if note is not None and keys is not None:
        try:
            offered = _open_offered(note, keys, origin, replica_size, r.accepted, revocations)
        except _Rejected as rej:
            r.alarms += [rej.alarm] if rej.alarm is not None else []
            r.notes += [rej.note] if rej.note is not None else []
            waiting = rej.size
    if offered is not None and primary_size is not None and offered.checkpoint.size > primary_size:
        r.alarm(AlarmKind.FORK, f"the primary signed a checkpoint of size {offered.checkpoint.size}, but its "
                                f"log holds {primary_size} entries", offered)
        offered = None

    candidate = r.accepted if offered is None else r.against_accepted(offered, primary, replica, replica_size)
    leaves = state.leaves if state is not None else CompactRange()
    checked: int | None = None
    if candidate is not None and replica_size >= candidate.checkpoint.size:
        grown = r.against_replica(candidate, replica, leaves)
        if grown is None:
            candidate = r.accepted  # the accepted head itself stays, and alarms every round
        else:
            leaves, checked = grown, candidate.checkpoint.size
    elif candidate is not None:
        grown = r.prefix_against(candidate, primary, replica, leaves, replica_size)
        if grown is not None:
            leaves = grown
        r.notes.append(f"the standby lags: {replica_size} entries replicated, the checkpoint covers "
                       f"{candidate.checkpoint.size}; its root is checked once they are there")
    if candidate is None:
        return Round(None, False, tuple(r.alarms), tuple(r.notes), replica_size, primary_size, checked)

    new = candidate is not r.accepted
    known = max(candidate.checkpoint.size, replica_size, primary_size or 0,
                0 if offered is None else offered.checkpoint.size, waiting or 0)
    new_state = r.stalls(origin, candidate, new, known, replica_size, leaves, stall_after)
    return Round(new_state, new, tuple(r.alarms), tuple(r.notes), replica_size, known, checked)


class _Round:
    """The alarms and notes of one round as it goes, and the checks that add to them."""

    def __init__(self, state: FollowState | None, now: float) -> None:
        self.state, self.now = state, now
        self.accepted = None if state is None else state.accepted
        self.alarms: list[Alarm] = []
        self.notes: list[str] = []

    def alarm(self, kind: AlarmKind, detail: str, offered: SignedCheckpoint | None = None,
              offered_note: str | None = None, replicated: Head | None = None) -> None:
        acc = self.accepted
        self.alarms.append(Alarm(kind, detail, _head(acc), _head(offered), replicated,
                                 None if acc is None else acc.note,
                                 offered_note if offered is None else offered.note))

    def stall(self, detail: str) -> None:
        self.alarm(AlarmKind.STALL, detail)

    def against_accepted(self, offered: SignedCheckpoint, primary: Primary, replica: Replica,
                         replica_size: int) -> SignedCheckpoint | None:
        """``offered`` if it may follow the accepted checkpoint, else the accepted one (alarmed)."""
        o = offered.checkpoint
        if self.accepted is None:
            self.notes.append(f"first checkpoint accepted on its signature alone (size {o.size})")
            return offered
        a = self.accepted.checkpoint
        if o.size < a.size:
            self.alarm(AlarmKind.ROLLBACK, f"the primary's newest checkpoint has size {o.size}, smaller "
                                           f"than the accepted size {a.size}", offered)
        elif o.size == a.size:
            if o.root != a.root:
                self.alarm(AlarmKind.FORK, f"two checkpoints of size {o.size} with different roots", offered)
        else:
            from_standby = replica_size >= o.size
            source: Primary | Replica = replica if from_standby else primary
            where = "the standby" if from_standby else "the primary"
            try:
                proof = source.consistency(a.size, o.size)
                verify_consistency(a.size, o.size, proof, a.root, o.root)
            except SourceUnavailableError as exc:
                self.stall(f"no consistency proof {a.size} -> {o.size} from {where}: {exc}")
            except VerificationError as exc:
                self.alarm(AlarmKind.FORK, f"the checkpoint of size {o.size} does not extend the accepted "
                                           f"one of size {a.size} (proof from {where}): {exc}", offered)
            else:
                return offered
        return self.accepted

    def against_replica(self, cp: SignedCheckpoint, replica: Replica,
                        leaves: CompactRange) -> CompactRange | None:
        """The replicated leaves folded up to ``cp``'s size if they make its root; else None, alarmed."""
        size = cp.checkpoint.size
        try:
            grown = _fold(replica, leaves, size)
        except SourceUnavailableError as exc:
            self.stall(f"cannot read the standby's leaf hashes: {exc}")
            return None
        root = grown.root()
        if root != cp.checkpoint.root:
            self.alarm(AlarmKind.FORK, f"the primary signed a tree the replicated records do not make: the "
                                       f"standby's first {size} entries hash to {root.hex()}", cp,
                       replicated=Head(size, root))
            return None
        return grown

    def prefix_against(self, cp: SignedCheckpoint, primary: Primary, replica: Replica, leaves: CompactRange,
                       replica_size: int) -> CompactRange | None:
        """While the standby lags behind ``cp``: its replicated leaves folded as far as they go, proved
        a prefix of ``cp``'s tree by a consistency proof from the primary; None (alarmed or stalled)
        when they are not, or nothing new is there to fold."""
        if replica_size <= leaves.size or replica_size == 0:
            return None
        size = cp.checkpoint.size
        try:
            grown = _fold(replica, leaves, replica_size)
            proof = primary.consistency(replica_size, size)
        except SourceUnavailableError as exc:
            self.notes.append(f"the standby's first {replica_size} entries not checked this time: {exc}")
            return None
        root = grown.root()
        try:
            verify_consistency(replica_size, size, proof, root, cp.checkpoint.root)
        except VerificationError as exc:
            self.alarm(AlarmKind.FORK, f"the standby's first {replica_size} entries (root {root.hex()}) are "
                                       f"not a prefix of the checkpoint of size {size}: {exc}", cp,
                       replicated=Head(replica_size, root))
            return None
        return grown

    def stalls(self, origin: str, cp: SignedCheckpoint, new: bool, known: int, replica_size: int,
               leaves: CompactRange, stall_after: float) -> FollowState:
        """The state after this round, with a ``STALL`` alarm where the checkpoints or the standby
        stood still past ``stall_after`` while the log grew to ``known`` entries."""
        now, state, size = self.now, self.state, cp.checkpoint.size
        if new or state is None:
            accepted_at, behind_since = now, (None if size >= known else now)
        else:
            accepted_at = state.accepted_at
            behind_since = None if size >= known else (state.behind_since or now)
        if behind_since is not None and now - behind_since > stall_after:
            self.stall(f"no new checkpoint for {now - behind_since:.0f} s while the log grew to {known} "
                       f"entries (accepted size {size}; --stall-after {stall_after:g} s)")
        if state is None or replica_size != state.replica_size or replica_size >= known:
            replica_since = now
        else:
            replica_since = state.replica_since
            if now - replica_since > stall_after:
                self.stall(f"the standby has stood at {replica_size} entries for {now - replica_since:.0f} s "
                           f"while the primary is at {known} (--stall-after {stall_after:g} s)")
        return FollowState(origin, cp, accepted_at, behind_since, replica_size, replica_since, leaves)


def _fold(replica: Replica, leaves: CompactRange, size: int) -> CompactRange:
    """``leaves`` extended with the replicated leaf hashes up to ``size`` (a copy)."""
    grown = leaves.copy()
    for chunk in replica.leaf_hashes(grown.size, size):
        grown.extend(chunk)
    if grown.size != size:
        raise SourceUnavailableError(f"the standby gave {grown.size} leaf hashes where {size} were asked")
    return grown

