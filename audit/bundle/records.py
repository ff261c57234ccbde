"""The record pass of the bundle verifier: ``records.jsonl``, ``index.jsonl`` and
``payloads.jsonl`` streamed together, once, in bounded memory.

Per line: the leaf hash of the exact bytes equals the index's; the envelope parses and its kind
and trace id are the index's; seqs strictly ascend inside the tree; chain hashes link wherever
two seqs are consecutive; each payload named for the first time is the next line of
``payloads.jsonl`` (present: its bytes hash to its name; purged: a ``ledger.payload_purge``
entry of the bundle lists it); decisions go to the replayer. Refusals (format 3) are checked
against their schema and, where their payload is present, replayed: the payload is parsed again by
the scoring path's own parser and must be refused the same way (``replay.refusal`` otherwise);
from format 4 they also go to the completeness check, beside the decisions and summaries. What
the later checks need is kept compactly: the leaf hashes (for the multiproof) and the few context
entries.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from audit.bundle.completeness import CompletenessCheck
from audit.bundle.reader import BundleArchive, BundleManifest, LineStream
from audit.bundle.rederive import Rederiver
from audit.bundle.replay import Replayer
from audit.bundle.rescreen import CLEARANCE_KIND, LIST_KIND, Rescreener
from audit.decide.account_risk import AccountRiskError, check_account_risk
from audit.decide.record import RISK_SCHEMAS, SCREENED_SCHEMAS
from audit.decide.refusal import REFUSAL_KIND, RefusalBody, parse_refusal_body, replay_refusal
from audit.decide.summary import SUMMARY_KIND
from audit.errors import BundleError, BundleMalformed, BundleTampered, ReplayMismatch

__all__ = ["CASE_KINDS", "CONTEXT_KINDS", "CaseSink", "Findings", "LeafHashes", "RecordTally", "SeqSet",
           "scan_records"]

RECORDS, INDEX, PAYLOADS = "records.jsonl", "index.jsonl", "payloads.jsonl"
GOVERNANCE_KINDS = frozenset({"ruleset.proposed", "ruleset.bootstrapped", "ruleset.approved",
                              "ruleset.activated"})
CONTEXT_KINDS = GOVERNANCE_KINDS | {"model.registered", "ledger.payload_purge"}
# the kinds only a case bundle (format 5) carries: the names audit.cases.events / .policy and
# ledger.retention seal them under, spelled out so that a window bundle's check imports no case code
CASE_EVENT, CASE_POLICY, LEGAL_HOLD = "case_event", "alert_policy", "ledger.legal_hold"
CASE_KINDS = frozenset({CASE_EVENT, CASE_POLICY, LEGAL_HOLD})
_INDEX_KEYS = ["chain_hash", "kind", "leaf_hash", "seq", "trace_id"]
Progress = Callable[[int, int], None]


FactSink = Callable[[int, dict[str, Any]], None]
"""Where the record pass hands each decision and refusal for the compliance facts (format 9); in a
bundle cut for one case, every line (the facts' period is read off the case's records)."""


class CaseSink(Protocol):
    """Where the record pass of a case bundle hands the case's records (``audit.bundle.cases``)."""

    def line(self, seq: int) -> None: ...
    def decision(self, seq: int, trace_id: str, env: dict[str, Any], leaf: bytes) -> None: ...
    def record(self, seq: int, trace_id: str, kind: str, env: dict[str, Any], leaf: bytes) -> None: ...
    def payload(self, sha: str, data: bytes | None, purged_by: int | None) -> None: ...


class Findings:
    """Failures collected up to a cap; past it only counted."""

    def __init__(self, cap: int) -> None:
        self.cap, self.items, self.dropped = cap, list[BundleError](), 0

    def add(self, err: BundleError) -> None:
        if len(self.items) < self.cap:
            self.items.append(err)
        else:
            self.dropped += 1

    def extend(self, errs: list[BundleError]) -> None:
        for e in errs:
            self.add(e)

    def __len__(self) -> int:
        return len(self.items) + self.dropped


class SeqSet:
    """Ascending seqs, 8 bytes each (a million-entry ``set`` of ints costs ~60 MB)."""

    def __init__(self) -> None:
        self.seqs = array("q")

    def add(self, seq: int) -> None:
        self.seqs.append(seq)  # callers add in ascending order

    def index(self, seq: object) -> int:
        """Position of ``seq``, or -1."""
        seqs = self.seqs
        if type(seq) is not int or not seqs:
            return -1
        i = seq - seqs[0]
        if 0 <= i < len(seqs) and seqs[i] == seq:  # contiguous: no search
            return i
        i = bisect_left(seqs, seq)
        return i if i < len(seqs) and seqs[i] == seq else -1

    def __contains__(self, seq: object) -> bool:
        return self.index(seq) >= 0

    def __len__(self) -> int:
        return len(self.seqs)


class LeafHashes(Mapping[int, bytes]):
    """Leaf hash by seq, appended in ascending seq: 40 bytes a leaf instead of a dict's ~150."""

    def __init__(self) -> None:
        self._seqs = SeqSet()
        self._hashes = bytearray()

    def append(self, seq: int, leaf: bytes) -> None:
        self._seqs.add(seq)
        self._hashes += leaf

    def __getitem__(self, seq: int) -> bytes:
        i = self._seqs.index(seq)
        if i < 0:
            raise KeyError(seq)
        return bytes(self._hashes[32 * i:32 * i + 32])

    def __iter__(self) -> Iterator[int]:
        return iter(self._seqs.seqs)

    def __len__(self) -> int:
        return len(self._seqs)


@dataclass
class RecordTally:
    records: int = 0
    decisions: int = 0
    annotations: int = 0
    context: int = 0
    summaries: int = 0
    refusals: int = 0  # format 3
    refusals_replayed: int = 0  # refusals whose payload was parsed again and refused the same way
    case_events: int = 0  # format 5, a case bundle: case_event lines
    policies: int = 0  # alert_policy lines
    holds: int = 0  # ledger.legal_hold lines
    account_risk_checked: int = 0  # decision/2 and /3 records whose account_risk is consistent in itself
    account_alerts: int = 0  # of them, those that raised an account alert
    by_decision: Counter[str] = field(default_factory=Counter)
    payloads_present: int = 0
    payloads_purged: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    in_tree: int = 0  # lines whose seq ascends inside the tree (what the multiproof proves)
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)  # context entries' envelopes
    modules: set[str] = field(default_factory=set)  # named by decisions
    models: set[str] = field(default_factory=set)
    rulesets: set[tuple[str, str, str]] = field(default_factory=set)  # (module, ruleset id, version)
    decision_seqs: SeqSet = field(default_factory=SeqSet)
    first_decision: dict[str, int] = field(default_factory=dict)  # module -> first decision seq naming it
    hashes: dict[str, str | None] = field(default_factory=dict)  # file -> SHA-256 as streamed
    purged_by: int | None = None  # the line's payload, first named by it: the purge record it says erased it


def _fail(cls: type[BundleError], kind: str, detail: str, file: str = RECORDS, seq: int | None = None,
          trace_id: str | None = None) -> BundleError:
    return cls(detail, kind=kind, file=file, seq=seq, trace_id=trace_id)


def scan_records(bundle: BundleArchive, manifest: BundleManifest, replayer: Replayer, found: Findings,
                 progress: Progress | None = None, check: CompletenessCheck | None = None,
                 case: CaseSink | None = None, rescreener: Rescreener | None = None,
                 rederiver: Rederiver | None = None, facts: FactSink | None = None) -> RecordTally:
    """Stream the three line files once; failures go to ``found``, the tally comes back. Decisions
    and summaries also go to ``check`` (format 2), in seq order; in a case bundle (format 5) the
    decisions, case records and report payloads go to ``case`` instead. In a format-6 bundle the
    ``sanctions_list`` context lines (whose payload is the file ``lists/<sha256>``, not a line of
    ``payloads.jsonl``) and the decisions go to ``rescreener`` too; in a format-7 bundle every line's
    seq, the summaries and the decisions with their payload go to ``rederiver``; in a format-9 bundle the
    decisions and refusals (in a case bundle, every line) go to ``facts`` (``audit.bundle.compliance``)."""
    t = RecordTally()
    records, index = LineStream(bundle, RECORDS), LineStream(bundle, INDEX)
    payloads = LineStream(bundle, PAYLOADS)
    pay_iter: Iterator[bytes] = iter(payloads)
    seen_payloads: set[bytes] = set()
    purged_by: dict[bytes, int] = {}  # payloads said purged: the purge record's seq
    pending_purges: dict[int, list[tuple[str, int, str]]] = {}  # purge seq -> (sha, decision seq, tid)
    idx_iter = iter(index)
    size, total = manifest.checkpoint_size, manifest.counts.records
    sha256, loads = hashlib.sha256, orjson.loads
    prev_seq, prev_chain = -1, b""
    last_rules: object = None
    last_model: object = None
    by_decision: Counter[Any] = Counter()
    refusal: RefusalBody | None = None
    for line in records:
        refusal = None
        n = t.records
        t.records += 1
        if progress is not None and n % 8192 == 0:
            progress(n, total)
        leaf = sha256(b"\x00" + line).digest()
        idx_line = next(idx_iter, None)
        if idx_line is None:
            found.add(_fail(BundleTampered, "index.missing", f"{RECORDS} line {n + 1} has no "
                            f"{INDEX} line", INDEX))
            continue
        try:
            ix = loads(idx_line)
            seq, kind, tid = ix["seq"], ix["kind"], ix["trace_id"]
            if len(ix) != 5 or "leaf_hash" not in ix:
                raise ValueError(f"keys are not {_INDEX_KEYS}")
            chain = bytes.fromhex(ix["chain_hash"])
            if type(seq) is not int or type(kind) is not str or type(tid) is not str or len(chain) != 32:
                raise ValueError("seq, kind, trace_id or chain_hash has the wrong type")
        except (orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            found.add(_fail(BundleMalformed, "index.line", f"line {n + 1} is not an index line: {exc}",
                            INDEX))
            continue
        if ix["leaf_hash"] != leaf.hex():
            found.add(_fail(BundleTampered, "leaf_hash", f"the line hashes to leaf {leaf.hex()}, "
                            f"{INDEX} says {ix['leaf_hash']}", seq=seq, trace_id=tid))
        if seq <= prev_seq:
            found.add(_fail(BundleTampered, "seq.order", f"seq {seq} does not follow seq {prev_seq} "
                            "(records must strictly ascend)", INDEX, seq, tid))
            continue
        if seq >= size:
            found.add(_fail(BundleTampered, "seq.range", f"seq {seq} is outside the checkpoint's tree "
                            f"of size {size}", INDEX, seq, tid))
            continue
        if seq == prev_seq + 1 and sha256(prev_chain + leaf).digest() != chain:
            found.add(_fail(BundleTampered, "chain_hash", f"chain_hash {chain.hex()} is not SHA-256 of "
                            f"seq {prev_seq}'s chain hash and this leaf", INDEX, seq, tid))
        prev_seq, prev_chain = seq, chain
        t.in_tree += 1
        if rederiver is not None and (dup := rederiver.line(seq, tid)) is not None:
            found.add(dup)
        if case is not None:
            case.line(seq)
        if t.first_seq is None:
            t.first_seq = seq
        t.last_seq = seq
        try:
            env = loads(line)
            body = env["record"]
            if (not isinstance(env, dict) or env.get("v") != 1 or not isinstance(body, dict)
                    or type(env.get("recorded_at")) is not str or type(env.get("kind")) is not str):
                raise ValueError("not a v1 envelope with a record object")
        except (orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            found.add(_fail(BundleMalformed, "record.envelope", f"the entry does not parse: {exc}", seq=seq,
                            trace_id=tid))
            continue
        if env.get("kind") != kind or env.get("trace_id") != tid:
            found.add(_fail(BundleTampered, "index.mismatch", f"the entry is {env.get('kind')!r} "
                            f"{env.get('trace_id')!r}, {INDEX} says {kind!r} {tid!r}", INDEX, seq, tid))
        kind = env.get("kind")
        if facts is not None and (kind == "decision" or kind == REFUSAL_KIND or case is not None):
            facts(seq, env)  # a case bundle's every line: its period is the span of the case's records
        if kind == "decision":
            t.decisions += 1
            t.decision_seqs.add(seq)
            d = body.get("decision")
            by_decision[d if type(d) is str else repr(d)] += 1
            rules, model = body.get("rules"), body.get("model")
            if rules != last_rules and isinstance(rules, dict):
                last_rules = rules
                m = str(rules.get("module_sha256"))
                t.modules.add(m)
                t.first_decision.setdefault(m, seq)
                t.rulesets.add((m, str(rules.get("ruleset_id")), str(rules.get("version"))))
            if model != last_model and isinstance(model, dict):
                last_model = model
                t.models.add(str(model.get("sha256")))
            if failed := replayer.add(seq, tid, body):
                found.extend(failed)
            if case is not None:
                case.decision(seq, tid, env, leaf)
            if body.get("schema") in RISK_SCHEMAS:  # versions 2 to 4: account risk, checked in itself
                try:
                    risk = check_account_risk(body)
                except AccountRiskError as exc:
                    found.add(_fail(ReplayMismatch, "replay.account_risk", str(exc)[:600], seq=seq,
                                    trace_id=tid))
                else:
                    t.account_risk_checked += 1
                    t.account_alerts += risk.alert
        elif kind == "annotation":
            t.annotations += 1
            ref = body.get("refers_to")
            if not isinstance(ref, dict) or ref.get("seq") not in t.decision_seqs:
                found.add(_fail(BundleTampered, "annotation.refers_to", "the annotation refers to no "
                                f"exported decision: {ref!r}"[:300], seq=seq, trace_id=tid))
            elif case is not None:
                case.record(seq, tid, kind, env, leaf)
        elif kind == REFUSAL_KIND and manifest.version >= 3 and case is None:
            t.refusals += 1
            refusal = _refusal(body, env, seq, tid, found)
            if check is not None and manifest.version >= 4:
                check.refusal(seq, tid, env)
        elif kind == SUMMARY_KIND and check is not None:
            t.summaries += 1
            check.summary(seq, tid, env, leaf)
            if rederiver is not None:
                rederiver.summary(seq, body, leaf)
        elif kind in CASE_KINDS and case is not None:
            t.case_events += kind == CASE_EVENT
            t.policies += kind == CASE_POLICY
            t.holds += kind == LEGAL_HOLD
            case.record(seq, tid, kind, env, leaf)
        elif kind == LIST_KIND and rescreener is not None:
            t.context += 1
            t.entries[seq] = env
            rescreener.list_record(seq, body, str(env.get("recorded_at")))
        elif kind == CLEARANCE_KIND and rescreener is not None:
            t.context += 1
            t.entries[seq] = env
            rescreener.clearance_record(seq, body, str(env.get("recorded_at")))
        elif kind in CONTEXT_KINDS:
            t.context += 1
            t.entries[seq] = env
            if kind == "ledger.payload_purge":
                named = body.get("payloads")
                listed = {p for p in named if type(p) is str} if isinstance(named, list) else set()
                for sha, dseq, dtid in pending_purges.pop(seq, ()):
                    if sha not in listed:
                        found.add(_fail(BundleTampered, "payload.purge", f"payload {sha} is said purged by "
                                        f"seq {seq}, which does not list it", PAYLOADS, dseq, dtid))
        else:
            found.add(_fail(BundleTampered, "record.kind", f"kind {kind!r} has no place in a bundle",
                            seq=seq, trace_id=tid))
        ps = env.get("payload_sha256")
        data = None
        t.purged_by = None
        if ps is not None and not (kind == LIST_KIND and rescreener is not None):
            try:
                key = bytes.fromhex(ps)
            except (TypeError, ValueError):
                key = str(ps).encode()
            if key not in seen_payloads:
                seen_payloads.add(key)
                purged = t.payloads_purged
                data = _payload(t, next(pay_iter, None), str(ps), seq, tid, pending_purges, found)
                if t.purged_by is not None:
                    purged_by[key] = t.purged_by
                if case is not None and kind == CASE_EVENT:
                    by = next((p for p, items in pending_purges.items() for x in items if x[1] == seq), None)
                    case.payload(str(ps), data, by if t.payloads_purged > purged else None)
            else:  # a payload of several messages, named again: purged (or not) as when first named
                t.purged_by = purged_by.get(key)
        if kind == "decision" and body.get("schema") in SCREENED_SCHEMAS:  # version 5 on: screening stated
            if rescreener is None:
                if _names_lists(body):
                    found.add(_fail(BundleTampered, "record.version", f"a {body.get('schema')} record "
                                    f"screened against sanctions lists in a format {manifest.version} bundle "
                                    "(format 6 carries such records, with their lists)", seq=seq,
                                    trace_id=tid))
            elif (off := rescreener.decision(seq, tid, body, data, str(env.get("recorded_at")))) is not None:
                found.add(off)
        if kind == "decision" and rederiver is not None and (
                off := rederiver.decision(seq, tid, body, data, t.purged_by)) is not None:
            found.add(off)
        if kind == "decision" and check is not None:
            check.decision(seq, tid, env, data)
        elif kind == REFUSAL_KIND and refusal is not None and data is not None:
            t.refusals_replayed += 1
            if (differs := replay_refusal(refusal, data)) is not None:
                found.add(_fail(ReplayMismatch, "replay.refusal", differs, PAYLOADS, seq, tid))
    for leftover, name in ((next(idx_iter, None), INDEX), (next(pay_iter, None), PAYLOADS)):
        if leftover is not None:
            found.add(_fail(BundleTampered, "lines.extra", f"{name} has more lines than {RECORDS} needs",
                            name))
            for _ in (idx_iter if name == INDEX else pay_iter):
                pass  # finish the stream so that its file hash is known
    for pseq, items in pending_purges.items():
        for sha, dseq, dtid in items:
            found.add(_fail(BundleTampered, "payload.purge", f"payload {sha} is said purged by seq {pseq}, "
                            f"which is not a ledger.payload_purge entry of the bundle", PAYLOADS, dseq, dtid))
    found.extend(replayer.flush())
    t.by_decision = Counter({str(k): v for k, v in by_decision.items()})
    if progress is not None:
        progress(t.records, max(total, t.records))
    t.hashes = {RECORDS: records.sha256, INDEX: index.sha256, PAYLOADS: payloads.sha256}
    return t


def _names_lists(body: dict[str, Any]) -> bool:
    """Whether a decision body states a screening against at least one list."""
    scr = body.get("screening")
    return not isinstance(scr, dict) or not isinstance(scr.get("lists"), list) or bool(scr["lists"])


def _refusal(body: dict[str, Any], env: dict[str, Any], seq: int, tid: str,
             found: Findings) -> RefusalBody | None:
    """A refusal's body, parsed, when it follows ``sealtrail.refusal/1`` or ``/2`` and states the
    payload its envelope seals; None (a failure in ``found``) otherwise."""
    try:
        refusal = parse_refusal_body(body)
    except ValueError as exc:
        found.add(_fail(BundleMalformed, "refusal.body", f"the refusal does not follow its schema: {exc}",
                        seq=seq, trace_id=tid))
        return None
    sealed = env.get("payload_sha256")
    if sealed != (refusal.payload_sha256 if refusal.payload_kept else None):
        found.add(_fail(BundleTampered, "refusal.payload", f"the envelope seals payload {sealed!r}, the "
                        f"refusal states {refusal.payload_sha256!r} (kept: {refusal.payload_kept})",
                        seq=seq, trace_id=tid))
        return None
    return refusal


def _payload(t: RecordTally, line: bytes | None, sha: str, seq: int, tid: str,
             pending: dict[int, list[tuple[str, int, str]]], found: Findings) -> bytes | None:
    """Check the ``payloads.jsonl`` line that must describe payload ``sha`` (first named here);
    its bytes if present and they hash to ``sha``."""
    def fail(kind: str, detail: str) -> None:
        found.add(_fail(BundleTampered, kind, detail, PAYLOADS, seq, tid))

    if line is None:
        fail("payload.missing", f"payload {sha} is named but {PAYLOADS} has no line for it")
        return None
    try:
        doc = orjson.loads(line)
        state, named = doc["state"], doc["sha256"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        fail("payload.line", f"the payload line does not parse: {exc}")
        return None
    if named != sha:
        fail("payload.order", f"the next payload line is for {named!r}, the entry names {sha}")
        return None
    if state == "present":
        t.payloads_present += 1  # the manifest counts lines by their state
        try:
            enc, text = doc["encoding"], doc["data"]
            data = text.encode() if enc == "utf-8" else base64.b64decode(text, validate=True)
            if enc not in ("utf-8", "base64"):
                raise ValueError(f"encoding {enc!r}")
        except (KeyError, AttributeError, ValueError, binascii.Error, UnicodeEncodeError) as exc:
            fail("payload.line", f"payload {sha} data cannot be decoded: {exc}")
            return None
        got = hashlib.sha256(data).hexdigest()
        if got != sha:
            fail("payload.hash", f"payload {sha} bytes hash to {got}")
            return None
        return data
    if state == "purged" and type(doc.get("purge_seq")) is int:
        t.payloads_purged += 1
        pseq = doc["purge_seq"]
        if pseq <= seq:
            fail("payload.purge", f"payload {sha} is said purged by seq {pseq}, before it was named")
            return None
        pending.setdefault(pseq, []).append((sha, seq, tid))
        t.purged_by = pseq
        return None
    fail("payload.line", f"payload {sha}: state {state!r} / purge_seq {doc.get('purge_seq')!r}")
    return None
