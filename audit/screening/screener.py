"""The lists in force, indexed for screening, kept current from the ledger while a process decides.

A ``Screener`` holds one ``InForce``: the ``ListIndex`` of every list in force at a seq of the
ledger and the sealed loads it was built from. The pipeline takes it once per batch
(``current``), so a batch is screened against one set of list versions, which its records name.

A new ``sanctions_list`` record (a load or a withdrawal, by this process or another) is noticed by
a read of the newest such seq, at most every ``check_every_s`` seconds; the new index is built
on a thread of its own from the sealed payloads (each list version parsed once and kept by its
SHA-256) and swapped in whole when ready. Until then batches go on against the lists before it:
a 30,000-entry list takes seconds to parse and index, longer than a payment may wait, so reloading
a list fails no request. ``refresh(wait=True)`` builds at once (start-up, tests, the CLI).

A build that fails (a payload purged, a list that no longer parses) leaves the index as it was and
is logged; it is tried again when another list record is sealed.

The good-guy clearances (``audit.screening.clearance``) are read with the lists: a clearance
proposed, approved or revoked is a record the same look notices, and the clearances are read again
(the index is kept when no list record is new).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy import Engine

from audit.screening.clearance import clearances
from audit.screening.clearance_state import CLEARANCE_KIND, Clearance
from audit.screening.evidence import ListRef
from audit.screening.lists import LIST_KIND, ListInForce, collector_paused, lists_in_force, read_list
from inference.screening.entries import SanctionsList
from inference.screening.index import ListIndex
from inference.screening.screen import DEFAULT_BUDGET
from ledger import store

__all__ = ["CHECK_EVERY_S", "InForce", "Screener"]

log = logging.getLogger(__name__)

CHECK_EVERY_S = 1.0  # how often a deciding process looks for a new list record


@dataclass(frozen=True)
class InForce:
    """The lists in force after seq ``covers`` (-1: none sealed yet), indexed, and the clearances
    approved by then (by keyed account, list name and entry id)."""

    covers: int
    loads: tuple[ListInForce, ...]
    index: ListIndex | None  # None: no list in force
    lists_seq: int = -1  # the newest list record the index includes
    cleared: Mapping[tuple[str, str, str], tuple[Clearance, ...]] = field(default_factory=dict)

    @property
    def refs(self) -> tuple[ListRef, ...]:
        return tuple(ListRef(x.name, x.sha256, x.seq, x.published) for x in self.loads)

    def stale(self, on: date, max_age_days: int | None) -> tuple[str, ...]:
        """Findings for the lists older than ``max_age_days`` (by the date they state, else the day
        they were loaded) on day ``on``."""
        if not max_age_days:
            return ()
        out = []
        for x in self.loads:
            stated = x.published or x.recorded_at[:10]
            age = (on - date.fromisoformat(stated)).days
            if age < 0:
                out.append(f"list {x.name} ({x.sha256[:12]}) is dated {stated}, after the day it is used "
                           f"({on.isoformat()}): its date cannot be trusted")
            elif age > max_age_days:
                out.append(f"list {x.name} ({x.sha256[:12]}) dated {stated} is {age} days old when used, "
                           f"beyond the {max_age_days} days it may be")
        return tuple(out)


_NONE = InForce(-1, (), None)



def _in_force_by_key(engine: Engine, upto: int) -> dict[tuple[str, str, str], tuple[Clearance, ...]]:
    """The clearances approved and not revoked at seq ``upto``, by keyed account, list and entry."""
    cleared: dict[tuple[str, str, str], list[Clearance]] = {}
    for c in clearances(engine, before=upto + 1):
        if c.approved_seq is not None and c.revoked_seq is None:
            cleared.setdefault((c.account_key, c.list_name, c.entry_id), []).append(c)
    return {k: tuple(v) for k, v in cleared.items()}


class Screener:
    """The ``InForce`` of one ledger, current within ``check_every_s`` (see the module's text)."""

    def __init__(self, engine: Engine, *, check_every_s: float = CHECK_EVERY_S,
                 max_age_days: int | None = None, clock: Callable[[], float] = time.monotonic,
                 background: bool = True, budget: int = DEFAULT_BUDGET) -> None:
        """``budget``: the units of screening work each payment gets (``inference.screening.screen``);
        a payment whose names and free text need more is screened until then and says where it
        stopped."""
        if max_age_days is not None and (type(max_age_days) is not int or max_age_days < 0):
            raise ValueError(f"screening_max_age_days is a number of days (0: no limit), "
                             f"not {max_age_days!r}")
        if type(budget) is not int or budget < 1:
            raise ValueError(f"a screening budget is a positive number of units, not {budget!r}")
        self.budget = budget
        self._engine, self._clock, self._background = engine, clock, background
        self.check_every_s = check_every_s
        self.max_age_days = max_age_days
        self._in_force = _NONE
        self._parsed: dict[tuple[str, str], SanctionsList] = {}  # (name, sha256) -> the list parsed
        self._lock = threading.Lock()  # one build at a time
        self._building: threading.Thread | None = None
        self._failed = -1  # the newest list seq whose build failed: not tried again until a newer one
        self._checked = -1e300
        self._fresh: tuple[int, Mapping[tuple[str, str, str], tuple[Clearance, ...]]] | None = None
        self.builds = 0  # indexes built (and swapped in)
        self.failures = 0

    @property
    def in_force(self) -> InForce:
        """The lists in force as last built (no ledger read)."""
        return self._in_force

    def current(self) -> InForce:
        """The lists in force, after a look for a new list record if ``check_every_s`` has passed
        (a build it starts runs beside; this batch gets the lists before it)."""
        now = self._clock()
        if now - self._checked >= self.check_every_s:
            self._checked = now
            try:
                self.refresh(wait=not self._background)
            except Exception:  # the lists stay as they were; logged, never a failed batch
                log.exception("sanctions lists not refreshed")
        return self._in_force

    def _newest(self) -> tuple[int, int]:
        """The seqs of the newest list record and of the newest list or clearance record."""
        with self._engine.connect() as conn:
            lists = store.last_of_kind(conn, LIST_KIND)
            cleared = store.last_of_kind(conn, CLEARANCE_KIND)
        got = -1 if lists is None else lists[0]
        return got, max(got, -1 if cleared is None else cleared[0])

    def refresh(self, *, wait: bool = True) -> bool:
        """Build the index again if a list record newer than the one it covers was sealed; with
        ``wait``, here and now (raising what the build raises), else on a thread of its own.
        Whether a build was made or started."""
        newest = self._newest()
        if newest[1] <= self._in_force.covers or (not wait and newest[1] <= self._failed):
            return False
        if wait:
            with self._lock:
                self._build(newest)
            return True
        if self._building is not None and self._building.is_alive():
            return False
        t = threading.Thread(target=self._build_quietly, args=(newest,), name="sealtrail-list-index",
                             daemon=True)
        self._building = t
        t.start()
        return True

    def wait_built(self, timeout_s: float | None = None) -> None:
        """Until a build running beside is done."""
        t = self._building
        if t is not None:
            t.join(timeout_s)

    def _build_quietly(self, newest: tuple[int, int]) -> None:
        with self._lock:
            try:
                self._build(newest)
            except Exception:
                self._failed = max(self._failed, newest[1])
                self.failures += 1
                log.exception("sanctions lists sealed up to seq %d could not be indexed; screening goes on "
                              "against the lists of seq %d", newest[1], self._in_force.covers)

    def cleared_now(self) -> Mapping[tuple[str, str, str], tuple[Clearance, ...]]:
        """The clearances in force now, read again from the ledger when a clearance record is newer
        than those held (one indexed read): a clearance is applied only if no revocation sealed
        since the last look ends it, so a revoked one clears nothing from the next batch on (not
        the next look). Called only when a batch is about to clear a hit."""
        return self.cleared_as_of()[1]

    def cleared_as_of(self) -> tuple[int, Mapping[tuple[str, str, str], tuple[Clearance, ...]]]:
        """``cleared_now`` and the seq of the newest clearance record it reflects (-1: none): a batch
        that clears a hit is sealed only if no clearance record came after it
        (``audit.decide.log_tip.fence``)."""
        with self._engine.connect() as conn:
            got = store.last_of_kind(conn, CLEARANCE_KIND)
        newest = -1 if got is None else got[0]
        held = self._fresh
        if held is not None and held[0] >= newest:
            return newest, held[1]
        if newest <= self._in_force.covers:
            return newest, self._in_force.cleared
        fresh = _in_force_by_key(self._engine, newest)
        self._fresh = (newest, fresh)
        return newest, fresh

    def _build(self, newest: tuple[int, int]) -> None:
        lists_seq, covers = newest
        was = self._in_force
        if covers <= was.covers:
            return
        by_key = _in_force_by_key(self._engine, covers)
        if lists_seq == was.lists_seq:  # only clearances changed: the index stays
            self._in_force = InForce(covers, was.loads, was.index, lists_seq, by_key)
            return
        loads = lists_in_force(self._engine, before=lists_seq + 1)
        parsed = {}
        with collector_paused():
            for x in loads:
                key = (x.name, x.sha256)
                lst = self._parsed.get(key)
                parsed[key] = lst if lst is not None else read_list(self._engine, x)
            index = ListIndex([parsed[x.name, x.sha256] for x in loads]) if loads else None
        self._parsed = parsed  # the versions no longer in force are let go
        self._in_force = InForce(covers, tuple(loads), index, lists_seq, by_key)
        self.builds += 1
        log.info("screening against %d list(s) in force at seq %d", len(loads), covers)
