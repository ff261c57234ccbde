"""Re-derivation: the verifier makes each decision of a ``sealtrail.bundle/7`` again from its message.

Replay (``audit.bundle.replay``) runs the recorded rule module and model on the *recorded*
features; screening is done again by ``audit.bundle.rescreen``. What remains is the step before:
would this payment, as received, have given these features? For every decision whose payload the
bundle holds, the verifier here

1. parses the payload again with the parser the record names (``input.parser``) and finds the
   transaction whose canonical SHA-256 the record states (``replay.rederive.transaction`` if none);
2. brings a feature state up to the decision: an empty one caught up from the origin its state
   delta names (``state_from``, ``audit.state.delta``), through every sealed delta from there to the
   decision, which the bundle carries (``state/records.jsonl``, ``audit.export.state``);
3. computes the payment's features on that state (``inference.features``, the accounts taken as
   the keyed identifiers its sealed delta names: the verifier does not hold the bank's state key)
   and checks that what the payment advances the state by is its sealed delta, exactly
   (``replay.rederive.delta``: amount in US cents, time, which accounts are named);
4. puts the features in the record's fixed units and compares every column the extractor
   computes with the record's (``replay.rederive.features``, naming the columns). The screening
   columns are checked against the screening done again, and the model, rules and reason codes
   against the replay, as before: together the decision is re-derived from its message.

The carried summaries and deltas must leave no commit out: the summaries (from the bundle's state
lines and its records) form one chain from the first one at or after the state's origin, whose
predecessor lies before the origin, and each summary that speaks for decisions up to the bundle's
last one is followed by the delta of those decisions (``state.chain``, ``state.delta_missing``;
the commits after its last decision feed no state it re-derives on, and an exporter may stop at
that decision's delta). The origin ``manifest.state`` names must be the earliest one the exported
decisions' deltas name (``state.origin``): a later one would leave decisions counted as not
re-derived, rather than failed, on a bundle that dropped the state they were made on.

What cannot be re-derived is counted by reason, never failed: a payload purged under retention,
a record of a version before fixed-point features (``sealtrail.decision/4``), a delta that names no
origin (sealed by an earlier release, or by a decider handed a state it cannot vouch for), a parser
or reference tables this verifier does not ship. Those decisions keep the checks of earlier formats.
A payload of several messages travels once, with its first decision: the decisions of its other
messages are re-derived from that parse.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple, cast, overload

import numpy as np
import orjson

from audit.decide.fixed_point import FIXED_SCHEMAS, LIMIT
from audit.decide.summary import SUMMARY_KIND, Summary, parse_summary
from audit.errors import (
    BundleError,
    BundleMalformed,
    BundleTampered,
    ReplayMismatch,
    StateDeltaError,
    StateSnapshotError,
    SummaryError,
)
from audit.state.delta import DELTA_KIND, Delta, parse_delta
from audit.state.snapshot_body import SNAPSHOT_KIND, SealedSnapshot, parse_snapshot
from audit.state.tree import state_tree
from inference.errors import FeatureError
from inference.features import FeatureExtractor, StateDelta
from inference.messages import PARSER, MessageError, Transaction, parse_messages, transaction_schema_of
from inference.reference_tables import default_tables
from inference.schema import EXTRACTED_NAMES, UnknownFeatureSchemaError, feature_digits, feature_names
from inference.state_store import read_features_state
from inference.velocity import VelocityState

__all__ = ["STATE_INDEX", "STATE_RECORDS", "Rederiver", "StateLines", "read_state"]

STATE_RECORDS, STATE_INDEX = "state/records.jsonl", "state/index.jsonl"
SHIPPED_PARSERS = (PARSER,)  # the parser versions this verifier re-parses with (frozen: each one's own code)
_EXTRACTED = {n: i for i, n in enumerate(EXTRACTED_NAMES)}
_MAX_COLUMNS_NAMED = 6
_LIMIT = float(LIMIT)
_STATE_KINDS = (SUMMARY_KIND, DELTA_KIND, SNAPSHOT_KIND)


@dataclass
class StateLines:
    """The state lines of a format-7 bundle, checked line by line (``read_state``)."""

    leaves: list[tuple[int, bytes]] = field(default_factory=list)  # (seq, leaf hash), ascending
    deltas: list[Delta] = field(default_factory=list)
    summaries: list[tuple[Summary, bytes]] = field(default_factory=list)  # with its leaf hash
    snapshots: list[SealedSnapshot] = field(default_factory=list)


def _fail(cls: type[BundleError], kind: str, detail: str, seq: int | None = None,
          trace_id: str | None = None, file: str = STATE_RECORDS) -> BundleError:
    return cls(detail[:600], kind=kind, file=file, seq=seq, trace_id=trace_id)


def read_state(records: Iterable[bytes], index: Iterable[bytes], size: int, found: Any) -> StateLines:
    """The lines of ``state/records.jsonl`` and ``state/index.jsonl`` (streamed: a million deltas
    are ~150 MB of text): each line's leaf hash is its index line's, seqs ascend inside the tree of
    ``size``, chain hashes link where seqs are consecutive, and each line is a summary, a state
    delta or a state snapshot that follows its schema. Failures go to ``found``; the lines that
    passed come back (their leaves are proved with the records'). The deltas' account identifiers
    are held once each, however many entries name them."""
    out = StateLines()
    accounts = _Accounts()
    prev_seq, prev_chain = -1, b""
    n = -1
    for n, (line, ix_line) in enumerate(itertools.zip_longest(records, index)):
        if line is None or ix_line is None:
            found.add(_fail(BundleTampered, "state.index", f"{STATE_RECORDS} and {STATE_INDEX} differ in "
                            f"length (from line {n + 1})", file=STATE_INDEX))
            for _ in records if line is not None else index:
                pass  # read to the end: the file's hash is checked
            break
        leaf = hashlib.sha256(b"\x00" + line).digest()
        try:
            ix = orjson.loads(ix_line)
            seq, kind, tid, chain = ix["seq"], ix["kind"], ix["trace_id"], bytes.fromhex(ix["chain_hash"])
            if (type(seq) is not int or type(kind) is not str or type(tid) is not str or len(chain) != 32
                    or ix["leaf_hash"] != leaf.hex()):
                raise ValueError("its leaf hash is not the line's, or seq, kind, trace_id or chain_hash is "
                                 "malformed")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            found.add(_fail(BundleTampered, "state.index", f"state line {n + 1}: {exc}", file=STATE_INDEX))
            continue
        if not prev_seq < seq < size:
            found.add(_fail(BundleTampered, "state.seq", f"seq {seq} does not ascend inside the checkpoint's "
                            f"tree of size {size}", seq, tid, STATE_INDEX))
            continue
        if seq == prev_seq + 1 and hashlib.sha256(prev_chain + leaf).digest() != chain:
            found.add(_fail(BundleTampered, "state.chain_hash", "chain_hash does not link to the line before",
                            seq, tid, STATE_INDEX))
        prev_seq, prev_chain = seq, chain
        try:
            env = orjson.loads(line)
            if env.get("kind") != kind or env.get("trace_id") != tid or kind not in _STATE_KINDS:
                raise ValueError(f"the entry is {env.get('kind')!r}, the index says {kind!r}: a state line "
                                 "is a decision summary, a state delta or a state snapshot")
            if kind == DELTA_KIND:
                d = parse_delta(seq, env["record"])
                packed = _Packed(d.entries, accounts)  # OverflowError: an integer past 64 bits
                # the account-risk part is re-derived from nothing here: not held (a tuple and two
                # identifiers a decision, for the whole re-derivation)
                out.deltas.append(replace(d, entries=cast(tuple[StateDelta, ...], packed), account_risk=None))
            elif kind == SNAPSHOT_KIND:
                out.snapshots.append(parse_snapshot(seq, env["record"]))
            else:
                out.summaries.append((parse_summary(seq, env["record"]), leaf))
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, OverflowError,
                StateDeltaError, SummaryError, StateSnapshotError) as exc:
            found.add(_fail(BundleMalformed, "state.record", str(exc), seq, tid))
            continue
        out.leaves.append((seq, leaf))
    return out


class _Accounts:
    """The keyed account identifiers the deltas name, each held once, by number."""

    def __init__(self) -> None:
        self.names: list[str | None] = [None]  # 0: no account
        self._numbers: dict[str, int] = {}

    def number(self, name: str | None) -> int:
        if name is None:
            return 0
        n = self._numbers.get(name)
        if n is None:
            n = self._numbers[name] = len(self.names)
            self.names.append(name)
        return n


class _Packed:
    """A delta's entries in 24 bytes each (two account numbers, the time, the cents), given back as
    the tuples ``FeatureExtractor.advance`` reads: a million entries as tuples held ~150 MB."""

    _NONE = -(2**63)  # cents of a currency the FX table lacks

    def __init__(self, entries: Sequence[StateDelta], accounts: _Accounts) -> None:
        self._accounts = accounts.names
        number = accounts.number
        self._who = array("i", [x for o, b, _, _ in entries for x in (number(o), number(b))])
        self._at = array("q", [t for _, _, t, _ in entries])
        self._cents = array("q", [self._NONE if c is None else c for _, _, _, c in entries])

    def __len__(self) -> int:
        return len(self._at)

    def _one(self, i: int) -> StateDelta:
        names, c = self._accounts, self._cents[i]
        who = self._who
        return names[who[2 * i]], names[who[2 * i + 1]], self._at[i], None if c == self._NONE else c

    @overload
    def __getitem__(self, i: int) -> StateDelta: ...
    @overload
    def __getitem__(self, i: slice) -> list[StateDelta]: ...

    def __getitem__(self, i: int | slice) -> StateDelta | list[StateDelta]:
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._one(i % len(self))


class _Link(NamedTuple):
    """Of a decision summary, what the chain check reads."""

    seq: int
    first_seq: int
    prev: tuple[int, str] | None
    leaf: bytes
    decisions: bool  # it speaks for a decision (not refusals only): a state delta follows it


def _link(s: Summary, leaf: bytes) -> _Link:
    return _Link(s.seq, s.first_seq, s.prev, leaf, any(e.refusal is None for e in s.entries))


@dataclass
class _Origin:
    """The state caught up from one origin, and the next delta entry it has not applied."""

    extractor: FeatureExtractor
    delta: int = 0  # index into the deltas
    entry: int = 0  # index into that delta's entries


class Rederiver:
    """Fed the bundle's records in seq order (``audit.bundle.records``), after ``read_state``."""

    def __init__(self, state: StateLines, from_seq: int,
                 snapshot: tuple[int, int, bytes | None] | None = None) -> None:
        """``snapshot``: the sealed state snapshot the manifest names (its seq, the seq it covers,
        its state's bytes; None where the bundle lacks them), standing in for the deltas up to it."""
        self.from_seq = from_seq
        self._tables = default_tables()  # read once: every state re-derived on shares them
        self._early: list[BundleError] = []
        self._snapshot: bytes | None = None
        self._start = from_seq  # where the carried summaries must begin to leave no commit out
        self._snapshot_broken = False
        if snapshot is not None or state.snapshots:
            self._take_snapshot(state, snapshot)
        self._deltas = sorted(state.deltas, key=lambda d: d.first_seq)
        self._starts = [d.first_seq for d in self._deltas]
        # what the chain check needs of each summary, not its entries: a million decisions' summaries
        # parsed whole held ~500 MB
        self._summaries: dict[int, _Link] = {s.seq: _link(s, leaf) for s, leaf in state.summaries}
        self.leaves = state.leaves  # proved beside the records
        self._state_seqs = {seq for seq, _ in state.leaves}
        self._delta_seqs = {d.seq for d in self._deltas}
        self._origins: dict[int, _Origin] = {}
        # the payload parsed last: its key, the (format, parser) it was parsed as, its transactions by SHA-256
        self._parsed: tuple[str, tuple[Any, Any], dict[str, Transaction]] = ("", ("", ""), {})
        self._last_decision: int | None = None  # seq of the last decision line
        self._least_origin: int | None = None  # the earliest origin the decisions' carried deltas name
        self.rederived = 0
        self.not_rederived: Counter[str] = Counter()
        self.unsealed = 0  # decisions no delta speaks for, or whose delta names no origin

    def _take_snapshot(self, state: StateLines, named: tuple[int, int, bytes | None] | None) -> None:
        """Check the snapshot the manifest names against its sealed line: the same seq, covering
        that seq, caught up from the bundle's origin, and its state's tree giving the sealed root."""
        def broken(detail: str, seq: int | None = None) -> None:
            self._snapshot_broken = True
            self._early.append(_fail(BundleTampered, "state.snapshot", detail, seq))

        lines = {s.seq: s for s in state.snapshots}
        if named is None or len(lines) != 1 or named[0] not in lines:
            return broken(f"the manifest names snapshot {None if named is None else named[0]}; the state "
                          f"lines hold snapshots at {sorted(lines)}")
        seq, covers, data = named
        sealed = lines[seq]
        if sealed.covers_seq != covers or sealed.from_seq != self.from_seq:
            return broken(f"the snapshot sealed at seq {seq} covers seq {sealed.covers_seq} caught up from "
                          f"seq {sealed.from_seq}; the manifest says {covers} from {self.from_seq}", seq)
        if data is None:
            return broken("the manifest names a snapshot file the bundle lacks", seq)
        try:
            tree = state_tree(data, sealed.state_key_id, sealed.leaf)
        except StateSnapshotError as exc:
            return broken(f"the snapshot's state does not read: {exc}", seq)
        if (off := sealed.matches(tree, self.from_seq)) is not None:
            return broken(f"the snapshot's state is not the one sealed at seq {seq}: {off}", seq)
        self._snapshot, self._start = data, covers + 1
        return None

    def line(self, seq: int, trace_id: str) -> BundleError | None:
        """Every ``records.jsonl`` line: a state line must not stand at the seq of a record line
        (only one leaf can be proved there)."""
        if seq in self._state_seqs:
            return _fail(BundleTampered, "state.duplicate", "a state line stands at the seq of a record line",
                         seq, trace_id)
        return None

    def summary(self, seq: int, body: Any, leaf: bytes) -> None:
        """A ``decision.summary`` line of ``records.jsonl`` (the completeness check reports one
        that does not parse)."""
        with contextlib.suppress(SummaryError):
            self._summaries[seq] = _link(parse_summary(seq, body), leaf)

    def decision(self, seq: int, tid: str, body: dict[str, Any], data: bytes | None,
                 purged_by: int | None = None) -> BundleError | None:
        """Re-derive the decision at ``seq`` from its payload ``data`` (None: purged, by the purge
        record at ``purged_by`` where the bundle says so, or passed with an earlier decision of the
        same payload)."""
        i = bisect_right(self._starts, seq) - 1
        d = self._deltas[i] if i >= 0 and seq < self._starts[i] + len(self._deltas[i].entries) else None
        self._last_decision = seq
        self.unsealed += d is None or d.state_from is None
        if d is not None and d.state_from is not None and (
                self._least_origin is None or d.state_from < self._least_origin):
            self._least_origin = d.state_from
        inp = body.get("input")
        held = self._held(inp) if data is None and isinstance(inp, dict) else None
        why = self._why_not(body, data is not None or held is not None, d, purged_by)
        if why is not None:
            self.not_rederived[why] += 1
            return None
        assert d is not None and isinstance(inp, dict) and d.state_from is not None
        entry = d.entries[seq - d.first_seq]
        tx = held if data is None else self._transaction(data, inp)
        origin = self._at(d.state_from, seq)
        if tx is None:
            self._apply(origin, seq)
            return _fail(ReplayMismatch, "replay.rederive.transaction", "the payload, parsed again with "
                         f"parser {inp.get('parser')}, holds no transaction of SHA-256 "
                         f"{inp.get('transaction_sha256')}", seq, tid, "payloads.jsonl")
        state = origin.extractor.state
        journal = state.begin_journal()
        made: list[Any] = []
        try:
            at = datetime.fromisoformat(str(body["at"]).replace("Z", "+00:00"))
            row = origin.extractor.extract([tx], [at], made, ids=[(entry[0], entry[1])])
        except (FeatureError, ValueError) as exc:
            state.end_journal()
            state.rollback([journal])
            self._apply(origin, seq)
            return _fail(ReplayMismatch, "replay.rederive.delta", f"the payment, parsed again, does not make "
                         f"its sealed state delta: {exc}", seq, tid)
        state.end_journal()
        if tuple(made[0]) != tuple(entry):
            state.rollback([journal])
            self._apply(origin, seq)
            return _fail(ReplayMismatch, "replay.rederive.delta", "the payment, parsed again, advances the "
                         f"state by (time {made[0][2]}, cents {made[0][3]}); its sealed delta at seq {d.seq} "
                         f"says (time {entry[2]}, cents {entry[3]})", seq, tid)
        self._skip(origin, seq)
        off = _compare(body["features"], row[0])
        if off:
            return _fail(ReplayMismatch, "replay.rederive.features", "features re-derived from the message "
                         f"differ from the record's: {off}", seq, tid)
        self.rederived += 1
        return None

    def _why_not(self, body: dict[str, Any], held: bool, d: Delta | None,
                 purged_by: int | None) -> str | None:
        if body.get("schema") not in FIXED_SCHEMAS:
            return f"a {body.get('schema')} record (re-derived from sealtrail.decision/4 on)"
        if d is None:
            return "no sealed state delta speaks for it (sealed by an earlier release)"
        if d.state_from is None and d.version == 1:
            return "its state delta names no state origin (sealtrail.state-delta/1, an earlier release)"
        if d.state_from is None:
            return "its state delta names no state origin (its decider was handed a state of unknown origin)"
        if d.state_from < self.from_seq:  # a failure too (``finish``: ``state.origin``)
            return f"its state's origin, seq {d.state_from}, is before the state the bundle carries"
        if self._snapshot_broken and d.state_from == self.from_seq:  # a failure too (``state.snapshot``)
            return "the state snapshot it was to be re-derived on does not hold"
        if not held:
            return "payload purged under retention" + ("" if purged_by is None else f" at seq {purged_by}")
        inp, f = body.get("input"), body.get("features")
        try:
            names = feature_names(str(f.get("schema"))) if isinstance(f, dict) else ()
        except UnknownFeatureSchemaError:
            names = ()
        if (not isinstance(inp, dict) or not names or type(f.get("scaled")) is not list  # type: ignore[union-attr]
                or len(f["scaled"]) != len(names) or type(body.get("at")) is not str):  # type: ignore[index]
            return "the record does not hold its input, time or features as its version says"
        parser = inp.get("parser")
        if parser not in SHIPPED_PARSERS:
            return f"parser {parser} is not shipped with this verifier"
        tables = f.get("tables")  # type: ignore[union-attr]
        if tables != self._tables.ids:
            return f"reference tables {tables} are not those shipped with this verifier"
        return None

    def _transaction(self, data: bytes, inp: dict[str, Any]) -> Transaction | None:
        """The transaction of ``data`` the record names (a payload of many messages parsed once)."""
        fmt, parser = inp.get("format", "auto"), inp.get("parser")
        if type(fmt) is not str:
            return None
        key = hashlib.sha256(data).hexdigest() + fmt + str(parser)
        if self._parsed[0] != key:
            schema = transaction_schema_of(parser)
            try:
                got = parse_messages(data, inp.get("format", "auto"))  # a str: a format, or refused
            except (MessageError, ValueError):
                got = []
            self._parsed = (key, (fmt, parser),
                            {t.sha256_of(schema): t for t in got if isinstance(t, Transaction)})
        return self._parsed[2].get(str(inp.get("transaction_sha256")))

    def _held(self, inp: dict[str, Any]) -> Transaction | None:
        """The transaction a decision whose payload came with an earlier decision names: one of the
        payload parsed last, parsed as this record says (None: not there, the payload was purged)."""
        if self._parsed[1] != (inp.get("format", "auto"), inp.get("parser")):
            return None
        return self._parsed[2].get(str(inp.get("transaction_sha256")))

    def _at(self, origin: int, seq: int) -> _Origin:
        """The state of ``origin`` brought up to just before ``seq``."""
        o = self._origins.get(origin)
        if o is None:
            start = origin
            if origin == self.from_seq and self._snapshot is not None:  # the sealed state stands in
                velocity, graph = read_features_state(self._snapshot, as_held=True)
                o = _Origin(FeatureExtractor(self._tables, velocity, graph))
                start = self._start
            else:
                o = _Origin(FeatureExtractor(self._tables, VelocityState()))
            self._origins[origin] = o
            o.delta = max(0, bisect_right(self._starts, start) - 1)
            d = self._deltas[o.delta] if self._deltas else None
            o.entry = 0 if d is None else max(0, start - d.first_seq)
        deltas, ex = self._deltas, o.extractor
        while o.delta < len(deltas):
            d = deltas[o.delta]
            stop = min(len(d.entries), seq - d.first_seq)
            if stop > o.entry:
                ex.advance(d.entries[o.entry:stop])
                o.entry = stop
            if o.entry < len(d.entries):
                break
            o.delta, o.entry = o.delta + 1, 0
        return o

    def _skip(self, o: _Origin, seq: int) -> None:
        """The entry of ``seq`` is applied (by extraction): move past it."""
        d = self._deltas[o.delta]
        assert d.first_seq + o.entry == seq
        o.entry += 1
        if o.entry == len(d.entries):
            o.delta, o.entry = o.delta + 1, 0

    def _apply(self, o: _Origin, seq: int) -> None:
        """Apply the sealed entry of ``seq`` (its payment could not be re-derived)."""
        d = self._deltas[o.delta]
        o.extractor.advance([d.entries[seq - d.first_seq]])
        self._skip(o, seq)

    def finish(self) -> list[BundleError]:
        """The summaries leave no commit out from the state's origin on, each up to the last
        decision is followed by its decisions' delta, and the origin is the decisions' earliest."""
        out: list[BundleError] = list(self._early)
        if self._least_origin != self.from_seq:
            named = "none names one" if self._least_origin is None else f"seq {self._least_origin}"
            out.append(_fail(BundleTampered, "state.origin", "manifest.state gives the state's origin as "
                             f"seq {self.from_seq}; of the origins the exported decisions' deltas name, the "
                             f"earliest is {named}", file="manifest.json"))
        chain = sorted(self._summaries.values())
        first = next((i for i, s in enumerate(chain) if s.seq >= self._start), None)
        if first is None:
            out.append(_fail(BundleTampered, "state.chain", "no decision summary at or after the state's "
                             f"origin (or its snapshot), seq {self._start}"))
            return out
        head = chain[first]
        if head.prev is not None and head.prev[0] >= self._start:
            out.append(_fail(BundleTampered, "state.chain", f"the summary at seq {head.prev[0]} (before the "
                             f"first carried, {head.seq}) is after the state's origin and is not carried",
                             head.seq))
        for a, b in zip(chain[first:], chain[first + 1:], strict=False):
            if b.prev != (a.seq, a.leaf.hex()):
                out.append(_fail(BundleTampered, "state.chain", f"the summary at seq {b.seq} links to "
                                 f"{b.prev}, not to the summary carried before it at seq {a.seq}", b.seq))
        last = -1 if self._last_decision is None else self._last_decision
        for s in chain[first:]:
            if s.first_seq > last:
                break  # its decisions come after the bundle's: no state it re-derives on holds them
            if s.decisions and s.seq + 1 not in self._delta_seqs:
                out.append(_fail(BundleTampered, "state.delta_missing", "the commit summarised at seq "
                                 f"{s.seq} speaks for decisions, but the bundle carries no state delta after "
                                 "it",
                                 s.seq + 1))
        return out


@functools.lru_cache(maxsize=8)
def _columns(schema: str) -> tuple[tuple[int, int, float], ...]:
    """For each column of ``schema`` the extractor computes: its index in the record, in the
    extracted row, and its fixed-point scale (10^digits)."""
    names, digits = feature_names(schema), feature_digits(schema)
    return tuple((j, _EXTRACTED[n], 10.0 ** digits[j]) for j, n in enumerate(names) if n in _EXTRACTED)


def _fixed(value: float, scale: float) -> int | None:
    """``value`` in the record's fixed units, as ``audit.decide.fixed_point.quantise_rows`` puts it
    (the same IEEE multiplication, clip and round half to even; None for NaN), one value at a time:
    on a single row, numpy's per-call cost is most of the work."""
    if value != value:
        return None
    return round(min(max(value * scale, -_LIMIT), _LIMIT))


def _compare(features: dict[str, Any], row: np.ndarray) -> str:
    """The columns where the re-derived ``row`` (extracted columns) differs from the record's
    fixed units: empty when none does."""
    schema = str(features["schema"])
    scaled = features["scaled"]
    values = row.tolist()
    off = []
    for j, i, scale in _columns(schema):
        want, got = scaled[j], _fixed(values[i], scale)
        if want != got:
            off.append(f"{feature_names(schema)[j]} recorded {want}, re-derived {got}")
    shown = "; ".join(off[:_MAX_COLUMNS_NAMED])
    return shown + (f" (and {len(off) - _MAX_COLUMNS_NAMED} more)" if len(off) > _MAX_COLUMNS_NAMED else "")
