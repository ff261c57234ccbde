"""The completeness check of a ``sealtrail.bundle/2``: nothing in the window was left out.

Streamed with the record pass (``audit.bundle.records``): a batch's decisions come just before
its ``decision.summary`` in seq order, so the decisions read since the last summary wait (a
batch at most) until the summary that speaks for them arrives. What is checked:

- the summaries form one unbroken chain (each names the seq and leaf hash of the one before; the
  first names none when the manifest has no ``left``), and are exactly those the manifest's
  ``completeness`` states, ``left`` first and ``right`` last;
- their ``recorded_at`` never decreases; ``left`` was recorded before the window, ``right`` at or
  after its end, and every summary between them inside it;
- every decision a summary inside the window says passes the filters is in the bundle, and every
  exported decision is one of them; each agrees with its summary entry (outcome, fired rule ids,
  ``recorded_at``);
- with an account filter, ``completeness.account_key`` is the keyed hash of the filter's
  account: each exported decision whose payload is present names the account exactly where its
  summary entry holds that key, and at least one does (else the key is not bound to the account,
  and the report says completeness for the account is not proven).

Format 4 proves the refusals of the window complete the same way: a refusal is sealed in a commit
whose summary (``sealtrail.decision.summary/2``) has one refusal entry. Where the bundle carries
refusals (a selection of the whole window), every refusal entry of a summary inside the window
must be a refusal line of the bundle, of the kind and ``recorded_at`` the entry says, and every
refusal line must be spoken for by its summary; a refusal left out fails naming its seq. A bundle
whose selection carries no refusals (filtered) must hold none. Earlier formats carry version 1
summaries only.

What cannot be proven is reported, not failed: decisions sealed before the ledger kept summaries,
refusals sealed before it summarised them (before the bundle's first version 2 summary: then
completeness of the refusals is proven only from that summary on), summaries keyed under another
account secret, and a window that ends after the newest summary (proven only up to that
summary's time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.bundle.reader import BundleManifest, Completeness
from audit.decide.summary import Summary, entry_matches, normal_account, parse_summary
from audit.errors import BundleTampered, SummaryError
from inference.messages import Transaction, parse_messages, transaction_schema_of
from inference.messages.errors import MessageError

__all__ = ["CompletenessCheck", "CompletenessReport", "not_proven_v1"]

RECORDS = "records.jsonl"


@dataclass
class CompletenessReport:
    """What the summaries proved about the selection."""

    proven: bool
    summaries: int = 0
    window: tuple[str, str] | None = None  # [from, until): the part of the window proven complete
    checked: int = 0  # exported decisions matched to their summary entry
    notes: list[str] = field(default_factory=list)
    refusals_proven: bool | None = None  # format 4 with the refusals of the window; None: not claimed
    refusals_checked: int = 0  # exported refusals matched to their summary entry

    def to_json(self) -> dict[str, Any]:
        return {"proven": self.proven, "summaries": self.summaries,
                "from": None if self.window is None else self.window[0],
                "until": None if self.window is None else self.window[1],
                "checked": self.checked, "notes": list(self.notes),
                "refusals_proven": self.refusals_proven, "refusals_checked": self.refusals_checked}


def not_proven_v1() -> CompletenessReport:
    return CompletenessReport(False, notes=["completeness not proven: bundle format 1 carries no decision "
                                            "summaries (only its creator checked the selection)"])


@dataclass
class _Decision:
    seq: int
    trace_id: str
    decision: Any
    fired: tuple[Any, ...]
    recorded_at: Any
    names_account: bool | None  # the payload names the filter account; None: cannot tell


@dataclass
class _Refusal:
    seq: int
    trace_id: str
    kind: Any
    recorded_at: Any


def whole_window(filters: dict[str, Any]) -> bool:
    """Whether a selection is the whole time window (no account, decision or rule filter): only
    then does a bundle carry the refusals of its window."""
    return all(filters.get(k) is None for k in ("account", "decision", "rule"))


class CompletenessCheck:
    """Fed every decision and summary of the bundle in seq order; failures go to ``found``."""

    def __init__(self, manifest: BundleManifest, found: Any) -> None:
        assert manifest.completeness is not None
        self.c: Completeness = manifest.completeness
        f = manifest.filters
        self.start, self.end = str(f["from"]), str(f["to"])
        self.decision_filter, self.rule_filter = f.get("decision"), f.get("rule")
        account = f.get("account")
        self.account = None if account is None else normal_account(str(account))
        self.found = found
        self.pending: dict[int, _Decision] = {}
        self.prev: tuple[int, str, str] | None = None  # (seq, leaf hex, recorded_at) of the last summary
        self.count = 0
        self.first_seq: int | None = None
        self.legacy = 0  # exported decisions before any summary of the bundle speaks
        self.unkeyed = 0
        self.bound = False  # a present payload tied the account key to the account
        self.report = CompletenessReport(True)
        self.version = manifest.version
        self.with_refusals = manifest.version >= 4 and whole_window(f)  # the bundle carries them
        self.refusals: dict[int, _Refusal] = {}
        self.v2_from: int | None = None  # seq of the bundle's first version 2 summary
        self.legacy_refusals = 0  # exported refusals sealed before refusals were summarised

    def _fail(self, kind: str, detail: str, seq: int | None = None, trace_id: str | None = None) -> None:
        self.found.add(BundleTampered(detail, kind=f"completeness.{kind}", file=RECORDS, seq=seq,
                                      trace_id=trace_id))

    def decision(self, seq: int, trace_id: str, env: dict[str, Any], payload: bytes | None) -> None:
        body = env["record"]
        fired = body.get("fired")
        hits = fired if isinstance(fired, list) else []
        ids = tuple(h.get("id") if isinstance(h, dict) else h for h in hits)
        names = None
        if self.account is not None and payload is not None:
            names = self._names_account(body, payload)
        self.pending[seq] = _Decision(seq, trace_id, body.get("decision"), ids, env.get("recorded_at"), names)

    def _names_account(self, body: dict[str, Any], payload: bytes) -> bool | None:
        try:
            inp = body["input"]
            parsed = parse_messages(payload, inp["format"])
            want = inp["transaction_sha256"]
            schema = transaction_schema_of(inp.get("parser"))
        except (MessageError, KeyError, TypeError, ValueError, AttributeError):
            return None
        tx = next((t for t in parsed if isinstance(t, Transaction) and t.sha256_of(schema) == want), None)
        if tx is None:
            return None
        named = {normal_account(a) for a in (tx.originator.account, tx.beneficiary.account) if a}
        return self.account in named

    def refusal(self, seq: int, trace_id: str, env: dict[str, Any]) -> None:
        """A refusal line (format 4), before the summary that speaks for it."""
        body = env["record"]
        ref = body.get("refusal") if isinstance(body, dict) else None
        kind = ref.get("kind") if isinstance(ref, dict) else None
        self.refusals[seq] = _Refusal(seq, trace_id, kind, env.get("recorded_at"))

    def summary(self, seq: int, trace_id: str, env: dict[str, Any], leaf: bytes) -> None:
        self.count += 1
        at = env.get("recorded_at")
        try:
            s = parse_summary(seq, env.get("record"))
        except SummaryError as exc:
            self._fail("summary", str(exc), seq, trace_id)
            return
        if not isinstance(at, str):
            self._fail("summary", "the summary has no recorded_at", seq, trace_id)
            return
        if s.version >= 2 and self.version < 4:
            self._fail("summary", f"a version {s.version} summary in a format {self.version} bundle (which "
                                  "carries version 1 summaries only)", seq, trace_id)
        self._link(s, at, trace_id)
        self.prev = (seq, leaf.hex(), at)
        for d in sorted(self.pending.values(), key=lambda d: d.seq):
            if d.seq < s.first_seq:
                self._uncovered(d)
                del self.pending[d.seq]
        for r in sorted(self.refusals.values(), key=lambda r: r.seq):
            if r.seq < s.first_seq:
                self._uncovered_refusal(r)
                del self.refusals[r.seq]
        if s.version >= 2 and self.v2_from is None:
            self.v2_from = seq
        position = "left" if seq == self.c.left else "right" if seq == self.c.right else "inside"
        if position == "left" and not at < self.start:
            self._fail("window", f"the left summary was recorded at {at}, not before the window's "
                                 f"start {self.start}", seq, trace_id)
        elif position == "right" and not at >= self.end:
            self._fail("window", f"the right summary was recorded at {at}, before the window's end "
                                 f"{self.end}", seq, trace_id)
        elif position == "inside" and not self.start <= at < self.end:
            self._fail("window", f"a summary between left and right was recorded at {at}, outside "
                                 f"[{self.start}, {self.end})", seq, trace_id)
        self._entries(s, at, position == "inside")

    def _link(self, s: Summary, at: str, trace_id: str) -> None:
        if self.prev is None:
            self.first_seq = s.seq
            if s.seq != (self.c.first_summary_seq if self.c.left is None else self.c.left):
                self._fail("summaries", f"the first summary of the bundle is at seq {s.seq}; the manifest "
                                        f"states left {self.c.left}, first {self.c.first_summary_seq}",
                           s.seq, trace_id)
            if self.c.left is None and s.prev is not None:
                self._fail("chain", f"the manifest states no left summary, but the first one links to seq "
                                    f"{s.prev[0]}: the summaries before the window were left out",
                           s.seq, trace_id)
            return
        pseq, pleaf, pat = self.prev
        if s.prev != (pseq, pleaf):
            self._fail("chain", f"the summary links to {s.prev}, not to the summary before it in the "
                                f"bundle (seq {pseq}, leaf {pleaf}): a summary was left out", s.seq, trace_id)
        if s.first_seq <= pseq:
            self._fail("summary", f"the summary speaks for seqs from {s.first_seq}, not after the summary "
                                  f"at seq {pseq}", s.seq, trace_id)
        if at < pat:
            self._fail("window", f"recorded at {at}, before the summary before it ({pat})", s.seq, trace_id)

    def _entries(self, s: Summary, at: str, inside: bool) -> None:
        key = None
        keyed = True
        if self.account is not None:
            keyed = s.account_key_id == self.c.account_key_id
            key = self.c.account_key
            if not keyed:
                self.unkeyed += 1
        for i, e in enumerate(s.entries):
            dseq = s.first_seq + i
            if e.refusal is not None:
                self._refusal_entry(s.seq, dseq, e.refusal, at, inside)
                continue
            d = self.pending.pop(dseq, None)
            passes = entry_matches(e, decision=self.decision_filter, rule=self.rule_filter, account_key=key)
            wanted = inside and keyed and passes
            if d is None:
                if wanted:
                    self._fail("missing", f"the summary at seq {s.seq} says the decision at seq {dseq} "
                                          "passes the filters, and the bundle does not hold it", dseq)
                continue
            self.report.checked += 1
            if (d.decision, d.fired, d.recorded_at) != (e.decision, e.rules, at):
                self._fail("entry", f"the decision is {d.decision} firing {list(d.fired)} recorded at "
                                    f"{d.recorded_at}; its summary (seq {s.seq}) says {e.decision} firing "
                                    f"{list(e.rules)} recorded at {at}", dseq, d.trace_id)
                continue
            if not inside:
                self._fail("window", f"an exported decision recorded at {at}, outside the window", dseq,
                           d.trace_id)
            elif keyed and not passes:
                self._fail("extra", "an exported decision its summary says does not pass the filters",
                           dseq, d.trace_id)
            if keyed and key is not None and d.names_account is not None:
                if d.names_account != (key in e.accounts):
                    self._fail("account", "the payload "
                               f"{'names' if d.names_account else 'does not name'} the filter account, and "
                               f"its summary entry {'lacks' if d.names_account else 'holds'} the account key "
                               "the manifest states", dseq, d.trace_id)
                elif d.names_account:
                    self.bound = True

    def _refusal_entry(self, sseq: int, rseq: int, kind: str, at: str, inside: bool) -> None:
        if rseq in self.pending:
            d = self.pending.pop(rseq)
            self._fail("entry", f"the summary at seq {sseq} says a refusal ({kind}) stands here, and the "
                                "bundle holds a decision", rseq, d.trace_id)
            return
        r = self.refusals.pop(rseq, None)
        if r is None:
            if inside and self.with_refusals:
                self._fail("missing", f"the summary at seq {sseq} says a refusal ({kind}) recorded in the "
                                      f"window was sealed at seq {rseq}, and the bundle does not hold it",
                           rseq)
            return
        if (r.kind, r.recorded_at) != (kind, at):
            self._fail("entry", f"the refusal is {r.kind} recorded at {r.recorded_at}; its summary (seq "
                                f"{sseq}) says {kind} recorded at {at}", rseq, r.trace_id)
            return
        self.report.refusals_checked += 1
        if not inside:
            self._fail("window", f"an exported refusal recorded at {at}, outside the window", rseq,
                       r.trace_id)
        elif not self.with_refusals:
            self._fail("extra", "an exported refusal in a bundle whose filters select decisions only", rseq,
                       r.trace_id)

    def _uncovered_refusal(self, r: _Refusal) -> None:
        if self.v2_from is None:
            self.legacy_refusals += 1  # before the bundle's first version 2 summary: not summarised then
        else:
            self._fail("uncovered", "an exported refusal no summary of the bundle speaks for", r.seq,
                       r.trace_id)

    def _uncovered(self, d: _Decision) -> None:
        if self.first_seq is None:
            self.legacy += 1  # before the bundle's first summary: sealed before summaries began
        else:
            self._fail("uncovered", "an exported decision no summary of the bundle speaks for", d.seq,
                       d.trace_id)

    def finish(self) -> CompletenessReport:
        for d in sorted(self.pending.values(), key=lambda d: d.seq):
            if self.first_seq is None:
                self.legacy += 1
            else:
                self._fail("uncovered", "an exported decision after the last summary of the bundle", d.seq,
                           d.trace_id)
        for left_over in sorted(self.refusals.values(), key=lambda x: x.seq):
            self._uncovered_refusal(left_over)
        c, r = self.c, self.report
        r.summaries = self.count
        last = None if self.prev is None else self.prev[0]
        stated = (c.summaries, c.last_summary_seq)
        if stated != (self.count, last) or (c.right is not None and c.right != last):
            self._fail("summaries", f"the manifest states {c.summaries} summaries ending at seq "
                                    f"{c.right if c.right is not None else c.last_summary_seq}; the bundle "
                                    f"holds {self.count} ending at seq {last}")
        if self.count == 0:
            r.proven = False
            r.notes.append("completeness not proven: the bundle holds no decision summary")
            return r
        until = self.end
        if c.right is None:
            assert self.prev is not None
            until = min(self.end, self.prev[2])
            if until < self.end:
                r.proven = False
                r.notes.append(f"no summary at or after the window's end {self.end} (the window ends after "
                               f"the newest summary at export): complete only for decisions recorded "
                               f"before {until}")
        r.window = (self.start, until)
        if self.legacy:
            r.proven = False
            r.notes.append(f"{self.legacy} exported decision(s) were sealed before the ledger kept "
                           "summaries: their completeness is not proven")
        if self.unkeyed:
            r.proven = False
            r.notes.append(f"{self.unkeyed} summary(ies) key accounts under another secret than the filter's "
                           "account key: the account filter cannot be checked there")
        if self.account is not None and not self.bound:
            r.proven = False
            r.notes.append("no exported decision's payload ties the account key to the filter account "
                           "(payloads purged?): completeness for the account is not proven")
        if self.with_refusals:
            r.refusals_proven = r.proven and self.v2_from is not None and self.v2_from == self.first_seq
            if self.v2_from != self.first_seq:
                r.proven = False
                since = "" if self.v2_from is None else f" before seq {self.v2_from}"
                n = self.legacy_refusals
                then = f"; {n} exported refusal(s) sealed then" if n else ""
                r.notes.append("the window begins before the ledger summarised refusals (the bundle's "
                               f"summaries{since} are version 1): completeness of its refusals is not "
                               f"proven{then}")
        return r

