"""Screening done again by the verifier: every ``sealtrail.decision/5`` of a format-6 bundle whose
payment is still in the bundle is screened again against the list versions its record names, and the
hits must be the record's, exactly.

A format-6 bundle carries, as proved context lines of ``records.jsonl``, the ``sanctions_list``
record of every list version its decisions name, and the list's bytes as that record's payload. The
verifier checks that each list a decision names is such a record (same name, same SHA-256, not a
withdrawal, sealed before the decision) and that its bytes hash to the version; it parses each list
with the parser the record names, indexes the set of lists a decision names once, parses the
decision's payment with the scoring path's parser, and screens it (``inference.screening.screen``).
The hits (where, list, entry, listed name matched, score, basis) must equal the record's; the
screening columns of its features must be those hits' (``audit.bundle.replay``). A
``sealtrail.decision/7`` payment, whose screening stopped at its budget, is screened again under
the budget its record states and must stop where the record says, with the same hits; every other
version's is screened in full. A decision whose
payment was purged cannot be screened again: it is counted, not failed, as its replay would be.

A hit the record names as cleared (a good-guy clearance, ``audit.screening.clearance``) is found
again like any other, and the clearance it names must be in force for it: its proposal and approval
are context lines of the bundle before the decision, for that list and entry, not revoked before
it, and the decision's day is not after the clearance's date. The verifier cannot tell that the
party's account is the cleared one (the account is keyed under the bank's secret); the bank's own
``ledger verify`` can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from audit.errors import BundleError, BundleMalformed, BundleTampered, ReplayMismatch
from audit.screening.clearance_state import CLEARANCE_KIND, Clearance, fold
from audit.screening.evidence import ScreeningEvidence, evidence_from_json
from inference.messages import MessageError, Transaction, parse_messages, transaction_schema_of
from inference.screening.entries import SanctionsList
from inference.screening.errors import ListFormatError, ScreeningError
from inference.screening.index import ListIndex
from inference.screening.lists import load
from inference.screening.screen import screen

__all__ = ["CLEARANCE_KIND", "IN_FORCE_LAG_S", "LIST_KIND", "Rescreener"]

IN_FORCE_LAG_S = 60  # a list sealed this long before a decision must be among those it names

LIST_KIND = "sanctions_list"  # audit.screening.lists's record kind, spelled out: no database code here
_RECORDS, _PAYLOADS = "records.jsonl", "payloads.jsonl"


@dataclass
class _List:
    seq: int
    body: dict[str, Any]
    recorded_at: str = ""
    parsed: SanctionsList | BundleError | None = None


@dataclass
class Rescreener:
    """Fed the bundle's list records and decisions in seq order (``audit.bundle.records``);
    ``fetch(sha256)`` gives the bytes of ``lists/<sha256>``, or None where the bundle has none."""

    fetch: Callable[[str], bytes | None]
    rescreened: int = 0  # decisions screened again, hits equal
    not_rescreened: int = 0  # version 5 decisions whose payment was purged
    lists: int = 0  # list versions carried
    _lists: dict[int, _List] = field(default_factory=dict)
    _indexes: dict[tuple[int, ...], ListIndex | BundleError] = field(default_factory=dict)
    _clearance_records: list[tuple[int, dict[str, Any], str]] = field(default_factory=list)
    _clearances: dict[int, Clearance] | BundleError | None = None  # folded; None: to fold again

    def list_record(self, seq: int, body: dict[str, Any], recorded_at: str = "") -> None:
        self.lists += 1
        self._lists[seq] = _List(seq, body, recorded_at)

    def _complete(self, ev: ScreeningEvidence, seq: int, tid: str, recorded_at: str) -> BundleError | None:
        """The decision names every list in force at it, in the version in force, unless that version
        was sealed less than ``IN_FORCE_LAG_S`` before the decision (a decider indexes a new list
        beside its batches, seconds after it is sealed)."""
        try:
            at = _time(recorded_at)
        except ValueError:
            return None  # the record checks name an envelope without its time
        last: dict[str, _List] = {}
        for s in sorted(self._lists):
            if s >= seq:
                break
            x = self._lists[s]
            last[str(x.body.get("name"))] = x
        named = {ref.name: ref.seq for ref in ev.lists}
        for name, x in sorted(last.items()):
            if x.body.get("withdrawn"):
                continue
            try:
                since = (at - _time(x.recorded_at)).total_seconds()
            except ValueError:
                continue
            if since >= IN_FORCE_LAG_S and named.get(name) != x.seq:
                said = "names none of it" if name not in named else f"names its seq {named[name]}"
                return BundleTampered(f"list {name!r} version {str(x.body.get('sha256'))[:12]} (seq {x.seq}) "
                                      f"was in force {since:,.0f} s before the decision, which {said}",
                                      kind="screening.list", file=_RECORDS, seq=seq, trace_id=tid)
        return None

    def clearance_record(self, seq: int, body: dict[str, Any], recorded_at: str) -> None:
        self._clearance_records.append((seq, body, recorded_at))
        self._clearances = None

    def _cleared(self, ev: ScreeningEvidence, seq: int, tid: str, day: date) -> BundleError | None:
        """Whether every hit the record names as cleared was cleared by a clearance in force."""
        if self._clearances is None:
            try:
                self._clearances = {c.seq: c for c in fold(self._clearance_records)}
            except (KeyError, TypeError, ValueError) as exc:
                self._clearances = BundleMalformed(f"a clearance proposal of the bundle does not parse: "
                                                   f"{exc}", kind="screening.clearance", file=_RECORDS)
        if isinstance(self._clearances, BundleError):
            return self._clearances
        for h, cseq in ev.cleared:
            c = self._clearances.get(cseq)
            if c is None or h.basis != "name" or (c.list_name, c.entry_id) != (h.list_name, h.entry_id):
                return BundleTampered(f"a hit of entry {h.entry_id!r} of list {h.list_name!r} is said "
                                      f"cleared by clearance {cseq}, which is no clearance of that entry in "
                                      "the bundle",
                                      kind="screening.clearance", file=_RECORDS, seq=seq, trace_id=tid)
            if not c.clears(day, seq):
                return BundleTampered(f"clearance {cseq} ({c.status}, until {c.until.isoformat()}) was not "
                                      f"in force for a decision on {day.isoformat()}",
                                      kind="screening.clearance", file=_RECORDS, seq=seq, trace_id=tid)
        return None

    def _parsed(self, x: _List, tid: str) -> SanctionsList | BundleError:
        if x.parsed is not None:
            return x.parsed
        b = x.body
        data = self.fetch(str(b.get("sha256")))
        if data is None:
            x.parsed = BundleTampered(f"the bytes of list {b.get('name')!r} (seq {x.seq}) are not in the "
                                      "bundle", kind="screening.list", file=f"lists/{b.get('sha256')}",
                                      seq=x.seq, trace_id=tid)
            return x.parsed
        try:
            pub = b.get("published")
            x.parsed = load(data, str(b["format"]), str(b["name"]), source=b.get("source"),
                            published=date.fromisoformat(pub) if isinstance(pub, str) else None)
        except (ListFormatError, KeyError, TypeError, ValueError) as exc:
            x.parsed = BundleMalformed(f"list {b.get('name')!r} (seq {x.seq}) does not parse as "
                                       f"{b.get('format')!r}: {exc}"[:600], kind="screening.list",
                                       file=_PAYLOADS, seq=x.seq, trace_id=tid)
        return x.parsed

    def _refs(self, ev: ScreeningEvidence, seq: int, tid: str) -> BundleError | None:
        """Every list a decision names is a list record of the bundle before it, stated as sealed
        (name, version, date); every hit, cleared ones too, is of one of those lists, by name and
        version together."""
        for ref in ev.lists:
            x = self._lists.get(ref.seq)
            if x is None or ref.seq >= seq:
                return BundleTampered(f"names list {ref.name!r} sealed at seq {ref.seq}, which is not a list "
                                      "record of the bundle before it", kind="screening.list", file=_RECORDS,
                                      seq=seq, trace_id=tid)
            b = x.body
            stated = (ref.name, ref.sha256, ref.published, False)
            if (b.get("name"), b.get("sha256"), b.get("published"), b.get("withdrawn")) != stated:
                return BundleTampered(f"names list {ref.name!r} version {ref.sha256[:12]} of {ref.published} "
                                      f"at seq {ref.seq}, which seals {b.get('name')!r} version "
                                      f"{str(b.get('sha256'))[:12]} of {b.get('published')}"
                                      f"{' (a withdrawal)' if b.get('withdrawn') else ''}",
                                      kind="screening.list", file=_RECORDS, seq=seq, trace_id=tid)
        named = {(ref.name, ref.sha256) for ref in ev.lists}
        for h in (*ev.hits, *(h for h, _ in ev.cleared)):
            if (h.list_name, h.list_sha256) not in named:
                return BundleTampered(f"a hit of entry {h.entry_id!r} names list {h.list_name!r} version "
                                      f"{h.list_sha256[:12]}, which is not a list the decision was screened "
                                      "against", kind="screening.list", file=_RECORDS, seq=seq, trace_id=tid)
        return None

    def _index(self, ev: ScreeningEvidence, seq: int, tid: str) -> ListIndex | BundleError:
        key = tuple(ref.seq for ref in ev.lists)
        got = self._indexes.get(key)
        if got is not None:
            return got
        parsed = []
        for ref in ev.lists:
            x = self._lists[ref.seq]  # _refs checked it is there
            lst = self._parsed(x, tid)
            if isinstance(lst, BundleError):
                return lst
            if lst.sha256 != ref.sha256:
                return BundleTampered(f"the bytes of list {ref.name!r} hash to {lst.sha256}, not "
                                      f"{ref.sha256}", kind="screening.list", file=_PAYLOADS, seq=ref.seq)
            parsed.append(lst)
        try:
            index: ListIndex | BundleError = ListIndex(parsed)
        except ScreeningError as exc:
            index = BundleMalformed(str(exc), kind="screening.list", file=_PAYLOADS, seq=seq, trace_id=tid)
        if len(self._indexes) >= 8:  # list versions change rarely: a few sets per bundle
            self._indexes.clear()
        self._indexes[key] = index
        return index

    def decision(self, seq: int, tid: str, body: dict[str, Any], data: bytes | None,
                 recorded_at: str = "") -> BundleError | None:
        """Screen a version 5 decision's payment again (its body was read by the replayer, which
        reports a body it cannot read); the failure, or None."""
        try:
            ev = evidence_from_json(body["screening"])
        except (KeyError, TypeError, ValueError):
            return None  # the replayer names it
        if (bad := self._complete(ev, seq, tid, recorded_at)) is not None:
            return bad
        if not ev.lists:
            return None
        if (bad := self._refs(ev, seq, tid)) is not None:
            return bad
        index = self._index(ev, seq, tid)
        if isinstance(index, BundleError):
            return index
        try:
            day = date.fromisoformat(str(body["at"])[:10])
        except (KeyError, ValueError):
            return None  # the replayer and the record checks name a body without its time
        if (bad := self._cleared(ev, seq, tid, day)) is not None:
            return bad
        if data is None:
            self.not_rescreened += 1
            return None
        try:
            inp = body["input"]
            schema = transaction_schema_of(inp.get("parser"))
            want = inp["transaction_sha256"]
            parsed = parse_messages(data, inp["format"])
        except (MessageError, KeyError, TypeError, ValueError, AttributeError) as exc:
            return ReplayMismatch(f"the payment cannot be parsed again: {exc}"[:600], kind="replay.screening",
                                  file=_PAYLOADS, seq=seq, trace_id=tid)
        tx = next((t for t in parsed if isinstance(t, Transaction) and t.sha256_of(schema) == want), None)
        if tx is None:
            return ReplayMismatch("no message of the payload is the transaction the record names",
                                  kind="replay.screening", file=_PAYLOADS, seq=seq, trace_id=tid)
        again = screen(tx, index, budget=ev.budget)  # None (in full) unless the record stopped at one
        if again.stopped != ev.stopped:
            said = "in full" if again.stopped is None else f"stops at {again.stopped}"
            return ReplayMismatch(f"screened again under the record's budget ({ev.budget}), the payment "
                                  f"{said}; the record says it stopped at {ev.stopped}"[:900],
                                  kind="replay.screening", seq=seq, trace_id=tid)
        got = sorted(_key(h) for h in again.hits)
        stated = sorted([_key(h) for h in ev.hits] + [_key(h) for h, _ in ev.cleared])
        if got != stated:
            extra = [h for h in got if h not in stated]
            lost = [h for h in stated if h not in got]
            return ReplayMismatch(f"screened again, the hits differ: found and not recorded {extra[:3]}, "
                                  f"recorded and not found {lost[:3]}"[:900], kind="replay.screening",
                                  seq=seq, trace_id=tid)
        self.rescreened += 1
        return None


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _key(h: Any) -> tuple[str, str, str, str, str, int, str]:
    return (h.where, h.list_name, h.list_sha256, h.entry_id, h.matched, h.score, h.basis)
