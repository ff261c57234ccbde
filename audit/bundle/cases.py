"""The case check of a case bundle (``sealtrail.bundle/5``): a case's whole history re-derived
offline, with the very fold the bank's alert and case view runs (``audit.cases.fold.CaseFold``).

The record pass (``audit.bundle.records``) hands over, in seq order, every decision, deadline
policy (``alert_policy``), case event (``case_event``) and legal hold (``ledger.legal_hold``) of
the bundle, and the payload of each filed report. Then:

- the fold runs over the decisions, policies and events, and must give exactly the rows
  ``case/case.json`` states (the case, its alerts, every carried event with whether it applied
  and why, the payment outcomes): a record edited, dropped or added that changes what the
  case became fails ``case.state`` naming the row; one it cannot read fails ``case.fold``;
- every decision carried opens an alert of the case, and every alert of the case has its
  decision (``case.decision``); the policies carried are exactly those in force for its alerts
  (``case.policy``);
- every case event carried is about the case (its body targets the case or one of its alerts, or
  links another case to it), lies in the range searched, and is one ``case.json`` lists; every
  event it lists is carried; the withheld leaves (other cases' events, proved against the
  checkpoint with the records by ``audit.bundle.proofs``) are in the range and are not lines of
  the bundle (``case.completeness.*``);
- each filed report's payload is the SHA-256 its event seals (``case.report``; the record pass
  has hashed the bytes);
- legal holds are listed, and whether one covers each filed report (a note where none does).

Cases linked to this one are not in the bundle: the fold sees each as an empty stand-in from its
id on (a case id is the seq of the decision that opened it), enough for a ``link`` to apply.

:func:`fold_case` and :func:`differences` are also what the exporter runs before it writes a case
bundle (``audit.export.cases``): a bundle the verifier would fail is never written.

Imports ``audit.cases.fold``, which must stay free of database code for this module to run on an
examiner's machine; ``audit.bundle.verify`` imports this module only for a case bundle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from audit.bundle.case_doc import (
    ALERT_FIELDS,
    CASE_FIELDS,
    CASE_FILE,
    EVENT_FIELDS,
    OUTCOME_FIELDS,
    CaseDoc,
    project,
)
from audit.cases.events import EVENT_KIND
from audit.cases.fold import CaseFold
from audit.cases.policy import POLICY_KIND, DeadlinePolicy
from audit.cases.state import AlertState, CaseState
from audit.decide.record import DECISION_KIND
from audit.errors import BundleError, BundleTampered

__all__ = ["HOLD_KIND", "CaseCheck", "CaseReport", "CaseRows", "Difference", "about_case", "differences",
           "fold_case", "history", "open_withheld"]

HOLD_KIND = "ledger.legal_hold"
ANNOTATION_KIND = "annotation"
RECORDS = "records.jsonl"
_TABLES = ("case", "alerts", "events", "outcomes")


class _Linked:
    """The fold's loader in a bundle: no stored view, and each case linked to or from the case
    stands in, empty, from its id on."""

    def __init__(self, linked: set[int]) -> None:
        self.linked = linked
        self.at = 0  # the seq being folded

    def alert(self, seq: int) -> AlertState | None:
        return None

    def case(self, case_id: int) -> CaseState | None:
        if case_id in self.linked and case_id < self.at:
            return CaseState(case_id=case_id, subject=f"linked:{case_id}", opened_at="")
        return None

    def open_cases(self, subject: str) -> list[int]:
        return []

    def case_alerts(self, case_id: int) -> list[AlertState]:
        return []

    def policy_at(self, seq: int) -> DeadlinePolicy | None:
        return None

    def policy_before(self, seq: int) -> tuple[int, DeadlinePolicy] | None:
        return None


Record = tuple[int, str, Mapping[str, Any]]  # seq, kind, envelope


def _entry(env: dict[str, Any], leaf: bytes) -> dict[str, Any]:
    """A sealed envelope as the fold reads an entry: with the entry's leaf hash beside it (the one
    the view's catch-up reads, ``audit.cases.store.sealed_records``; an event names its alert by it)."""
    return {**env, "leaf_hash": leaf.hex()}


@dataclass
class CaseRun:
    """The fold over a case's records, and the records it could not read (seq, why)."""

    fold: CaseFold
    unreadable: list[tuple[int, str]] = field(default_factory=list)


def fold_case(case_id: int, records: Iterable[Record]) -> CaseRun:
    """Fold ``records`` (ascending seq: the case's decisions, policies and events) as the view
    does, cases linked to ``case_id`` standing in empty. A record the fold raises on (one sealtrail
    would not seal; the bundle's records come from the bank) is listed in ``unreadable``."""
    recs = list(records)
    linked: set[int] = set()
    for _, kind, env in recs:
        body = env.get("record")
        if kind == EVENT_KIND and isinstance(body, dict) and body.get("action") == "link":
            target = body.get("target")
            for other in (target.get("case") if isinstance(target, dict) else None, body.get("link")):
                if type(other) is int and other != case_id:
                    linked.add(other)
    loader = _Linked(linked)
    run = CaseRun(CaseFold(loader))
    for seq, kind, env in recs:
        loader.at = seq
        try:
            run.fold.apply([(seq, kind, env)])
        except Exception as exc:
            run.unreadable.append((seq, f"{type(exc).__name__}: {exc}"[:300]))
    return run


@dataclass(frozen=True)
class CaseRows:
    """A case as rows: the case, its alerts, the events, the payment outcomes (plain objects of
    the fields ``case/case.json`` fixes, named as the fold names them)."""

    case: dict[str, Any] | None
    alerts: tuple[dict[str, Any], ...]
    events: tuple[dict[str, Any], ...]
    outcomes: tuple[dict[str, Any], ...]

    @classmethod
    def of_fold(cls, case_id: int, fold: CaseFold) -> CaseRows:
        c = fold.cases.get(case_id)
        return cls(None if c is None else project(asdict(c), CASE_FIELDS),
                   tuple(project(asdict(a), ALERT_FIELDS)
                         for a in sorted(fold.alerts.values(), key=lambda a: a.seq) if a.case_id == case_id),
                   tuple(project(asdict(e), EVENT_FIELDS) for e in fold.events),
                   tuple(project(asdict(o), OUTCOME_FIELDS) for o in fold.outcomes))

    @classmethod
    def of_doc(cls, doc: CaseDoc) -> CaseRows:
        return cls(doc.case, doc.alerts, doc.events, doc.outcomes)


@dataclass(frozen=True)
class Difference:
    """A row stated one way and derived another: table, key (seq; the case id for the case).
    ``wording``: only an event's ``why`` differs, in its words (which a later fold may phrase
    otherwise), not in whether it applied: reported, not failed."""

    table: str
    key: int
    detail: str
    wording: bool = False


def _differs(table: str, key: int, stated: Mapping[str, Any] | None,
             derived: Mapping[str, Any] | None) -> Difference | None:
    if stated is None and derived is None:
        return None
    if derived is None:
        return Difference(table, key, "stated, but the records give no such row")
    if stated is None:
        return Difference(table, key, "not stated, but the records give this row")
    names = sorted(set(stated) | set(derived))
    diff = [n for n in names if stated.get(n, ...) != derived.get(n, ...)]
    if not diff:
        return None
    return Difference(table, key, "; ".join(f"{n}: stated {stated.get(n)!r}, the records give "
                                            f"{derived.get(n)!r}" for n in diff[:3])[:600],
                      wording=table == "events" and diff == ["why"] and not derived.get("applied"))


def differences(case_id: int, stated: CaseRows, derived: CaseRows) -> list[Difference]:
    """Every row ``stated`` holds otherwise than ``derived`` (or holds and it lacks, or the reverse)."""
    out: list[Difference] = []
    d = _differs("case", case_id, stated.case, derived.case)
    if d is not None:
        out.append(d)
    for table in _TABLES[1:]:
        want = {int(r["seq"]): r for r in getattr(derived, table)}
        got = {int(r["seq"]): r for r in getattr(stated, table)}
        for key in sorted(want.keys() | got.keys()):
            d = _differs(table, key, got.get(key), want.get(key))
            if d is not None:
                out.append(d)
    return out


def about_case(body: Mapping[str, Any], case_id: int, alerts: Mapping[int, str]) -> bool:
    """Whether a case-event body is about case ``case_id``: it targets the case, one of its
    ``alerts`` (seq -> the trace id of the decision that opened it), or links another case to it."""
    target = body.get("target")
    if not isinstance(target, dict):
        return False
    if target.get("case") == case_id and type(target.get("case")) is int:
        return True
    alert = target.get("alert")
    if isinstance(alert, dict) and type(alert.get("seq")) is int and alerts.get(alert["seq"]) is not None:
        return bool(alerts[alert["seq"]] == alert.get("trace_id"))
    return body.get("action") == "link" and type(body.get("link")) is int and body.get("link") == case_id


def _who(p: object) -> tuple[str, str]:
    if isinstance(p, dict):
        return str(p.get("subject", "")), str(p.get("fingerprint_sha256", ""))
    return "", ""


def history(case_id: int, records: Sequence[Record], run: CaseRun) -> list[dict[str, Any]]:
    """Who did what when, with their words: the alerts opened, the policies in force, every event
    (with whether it applied and why not) and the annotations of the case's decisions, in seq
    order."""
    applied = {e.seq: e for e in run.fold.events}
    out: list[dict[str, Any]] = []
    for seq, kind, env in records:
        got = env.get("record")
        body: Mapping[str, Any] = got if isinstance(got, dict) else {}
        entry: dict[str, Any] = {"seq": seq, "recorded_at": env.get("recorded_at"), "what": kind,
                                 "target": None, "by": None, "by_fingerprint": None, "rationale": None,
                                 "details": {}, "applied": True, "why": None}
        if kind == DECISION_KIND:
            a = run.fold.alerts.get(seq)
            if a is None or a.case_id != case_id:
                continue
            held = "HELD" if a.outcome in ("HOLD", "BLOCK") else None
            entry |= {"what": "alert opened", "target": f"alert {seq}", "details": {
                "outcome": a.outcome, "fired": a.fired, "payment": held, "review_due": a.review_due,
                "filing_due": a.filing_due, "policy_seq": a.policy_seq}}
            entry["by"], entry["by_fingerprint"] = _who(body.get("principal"))
        elif kind == POLICY_KIND:
            entry |= {"what": "deadline policy", "rationale": body.get("rationale"),
                      "details": {"policy": body.get("policy")}}
            entry["by"], entry["by_fingerprint"] = _who(body.get("principal"))
        elif kind == ANNOTATION_KIND:
            ref = body.get("refers_to")
            entry |= {"what": "annotation", "rationale": body.get("note"),
                      "target": f"alert {ref.get('seq')}" if isinstance(ref, dict) else None,
                      "details": {k: body.get(k) for k in ("disposition", "correction") if body.get(k)}}
            entry["by"], entry["by_fingerprint"] = _who(body.get("principal"))
        elif kind == EVENT_KIND:
            target = body.get("target")
            if isinstance(target, dict) and isinstance(target.get("alert"), dict):
                entry["target"] = f"alert {target['alert'].get('seq')}"
            elif isinstance(target, dict):
                entry["target"] = f"case {target.get('case')}"
            entry["by"], entry["by_fingerprint"] = _who(body.get("principal"))
            assignee = body.get("assignee")
            args = (("assignee", _who(assignee)[0] if assignee else None),
                    ("disposition", body.get("disposition")), ("link", body.get("link")),
                    ("report", body.get("report")), ("amends", body.get("amends")))
            entry |= {"what": str(body.get("action")), "rationale": body.get("rationale"),
                      "details": {k: v for k, v in args if v is not None}}
            row = applied.get(seq)
            entry["applied"], entry["why"] = (False, "not folded") if row is None else (row.applied, row.why)
        else:
            continue
        out.append(entry)
    return out


@dataclass
class CaseReport:
    """What the case check derived: the case's final state, its history and its filed reports."""

    case_id: int
    from_seq: int
    to_seq: int
    reproduced: bool  # the fold gives exactly the rows case/case.json states
    state: dict[str, Any] | None = None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)  # seq, sha256, amends, payload, bytes
    holds: list[dict[str, Any]] = field(default_factory=list)
    events: int = 0  # case events carried
    withheld: int = 0  # other cases' events of the range, as leaf hashes
    policies: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "search": {"from_seq": self.from_seq, "to_seq": self.to_seq},
                "reproduced": self.reproduced, "state": self.state, "alerts": self.alerts,
                "outcomes": self.outcomes, "history": self.history, "reports": self.reports,
                "holds": self.holds, "events": self.events, "withheld": self.withheld,
                "policies": self.policies, "notes": list(self.notes)}

    def text(self) -> str:
        """The history as plain text, one action a line, for a terminal or a file."""
        s = self.state or {}
        lines = [f"case {self.case_id}: {s.get('subject', '?')}, opened {s.get('opened_at', '?')}, "
                 f"{s.get('alerts', 0)} alert(s), {s.get('open_alerts', 0)} open, disposition "
                 f"{s.get('disposition') or '-'}, reports {s.get('reports', 0)} "
                 f"(in force: {s.get('last_report') or '-'})",
                 f"events {self.events} carried, {self.withheld} other case event(s) of seqs "
                 f"[{self.from_seq}, {self.to_seq}] withheld; the fold "
                 f"{'reproduces' if self.reproduced else 'does NOT reproduce'} the stated state"]
        for h in self.history:
            flag = "" if h["applied"] else f"  [NOT APPLIED: {h['why']}]"
            details = ", ".join(f"{k} {v}" for k, v in h["details"].items() if k != "policy")
            lines.append(f"  {h['seq']:>8}  {h['recorded_at']}  {h['what']:<16} {h['target'] or '':<14} "
                         f"by {h['by'] or '?'}{flag}")
            if details:
                lines.append(f"            {details}")
            if h["rationale"]:
                lines.append(f"            \u201c{h['rationale']}\u201d")
        for r in self.reports:
            lines.append(f"  report  seq {r['seq']}  sha256 {r['sha256']}  payload {r['payload']}"
                         + (f"  amends {r['amends']}" if r["amends"] else ""))
        lines += [f"  note    {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def open_withheld(doc: CaseDoc, seq: int, record: bytes) -> dict[str, Any]:
    """Check an opening of a withheld leaf: ``record`` (the sealed entry bytes the bank hands over
    on the examiner's request) is the leaf at ``seq`` and a case event about another case. Its
    envelope back; ``BundleTampered`` if it is not the leaf, not a case event, or about this case."""
    leaves = dict(doc.withheld)

    def refused(detail: str) -> BundleTampered:
        return BundleTampered(detail, kind="case.opening", file=CASE_FILE, seq=seq)

    if seq not in leaves:
        raise refused("no withheld leaf at this seq")
    got = hashlib.sha256(b"\x00" + record).digest()
    if got != leaves[seq]:
        raise refused(f"the record hashes to leaf {got.hex()}, the bundle withheld {leaves[seq].hex()}")
    try:
        env = orjson.loads(record)
        body = env["record"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise refused(f"the record does not parse: {exc}") from None
    if not isinstance(env, dict) or env.get("kind") != EVENT_KIND or not isinstance(body, dict):
        raise refused(f"the record is a {env.get('kind') if isinstance(env, dict) else '?'!r} entry, "
                      "not a case event")
    alerts = {int(a["seq"]): str(a.get("trace_id")) for a in doc.alerts}
    if about_case(body, doc.case_id, alerts):
        raise refused(f"the withheld event is about case {doc.case_id}: the bundle left it out")
    return dict(env)


class CaseCheck:
    """Fed the case records of the record pass in seq order; ``finish`` folds and compares.
    Failures go to ``found``."""

    def __init__(self, doc: CaseDoc, found: Any) -> None:
        self.doc, self.found = doc, found
        self.records: list[Record] = []
        self.trace_ids: dict[int, str] = {}
        self.event_seqs: list[int] = []
        self.policy_seqs: list[int] = []
        self.holds: list[tuple[int, dict[str, Any]]] = []
        self.payloads: dict[str, str] = {}  # sha -> "present, N bytes" | "purged (seq P)" | "unverified"
        self.lines: set[int] = set()

    def _fail(self, kind: str, detail: str, seq: int | None = None, trace_id: str | None = None,
              file: str = RECORDS, cls: type[BundleError] = BundleTampered) -> None:
        self.found.add(cls(detail, kind=kind, file=file, seq=seq, trace_id=trace_id))

    def line(self, seq: int) -> None:
        """Any line of ``records.jsonl`` (for the withheld leaves, which must be none of them)."""
        self.lines.add(seq)

    def decision(self, seq: int, trace_id: str, env: dict[str, Any], leaf: bytes) -> None:
        self.records.append((seq, DECISION_KIND, _entry(env, leaf)))
        self.trace_ids[seq] = trace_id

    def record(self, seq: int, trace_id: str, kind: str, env: dict[str, Any], leaf: bytes) -> None:
        """A ``case_event``, ``alert_policy``, ``ledger.legal_hold`` or ``annotation`` line."""
        self.trace_ids[seq] = trace_id
        env = _entry(env, leaf)
        if kind == EVENT_KIND:
            self.event_seqs.append(seq)
            self.records.append((seq, kind, env))
            if not self.doc.from_seq <= seq <= self.doc.to_seq:
                self._fail("case.completeness.range", "a case event outside the range searched "
                           f"[{self.doc.from_seq}, {self.doc.to_seq}]", seq, trace_id)
        elif kind == POLICY_KIND:
            self.policy_seqs.append(seq)
            self.records.append((seq, kind, env))
        elif kind == HOLD_KIND:
            self.holds.append((seq, env))
        elif kind == ANNOTATION_KIND:  # an officer's note on one of its decisions: history only
            self.records.append((seq, kind, env))

    def payload(self, sha: str, data: bytes | None, purged_by: int | None) -> None:
        """The payload ``sha`` where the record pass first met it (``data`` None: purged, or its
        bytes did not hash to it, which the record pass reported)."""
        self.payloads[sha] = (f"present, {len(data)} bytes" if data is not None else
                              f"purged (seq {purged_by})" if purged_by is not None else "unverified")

    def finish(self) -> CaseReport:
        doc = self.doc
        run = fold_case(doc.case_id, self.records)
        for seq, why in run.unreadable:
            self._fail("case.fold", f"the fold cannot read the record: {why}", seq, self.trace_ids.get(seq))
        derived = CaseRows.of_fold(doc.case_id, run.fold)
        found = differences(doc.case_id, CaseRows.of_doc(doc), derived)
        carried, stated = set(self.event_seqs), {int(e["seq"]) for e in doc.events}
        notes: list[str] = []
        for d in found:
            if d.table == "events" and (d.key not in carried or d.key not in stated):
                continue  # an event stated and not carried, or the reverse: a completeness failure below
            if d.wording:
                notes.append(f"event {d.key}: not applied, and case.json words why otherwise: {d.detail}")
                continue
            self._fail("case.state", f"case.json {d.table}: {d.detail}", d.key, file=CASE_FILE)
        found = [d for d in found if not d.wording]
        alerts = {int(a["seq"]): str(a["trace_id"]) for a in derived.alerts}
        self._decisions(alerts)
        self._events(alerts)
        self._policies(derived)
        self._withheld()
        reproduced = not found and not run.unreadable
        report = CaseReport(doc.case_id, doc.from_seq, doc.to_seq, reproduced=reproduced,
                            state=derived.case, alerts=list(derived.alerts), outcomes=list(derived.outcomes),
                            history=history(doc.case_id, self.records, run), events=len(self.event_seqs),
                            withheld=len(doc.withheld), policies=len(self.policy_seqs), notes=notes)
        self._reports(report)
        self._holds(report)
        return report

    def _decisions(self, alerts: Mapping[int, str]) -> None:
        for seq, kind, _ in self.records:
            if kind == DECISION_KIND and seq not in alerts:
                self._fail("case.decision", f"the decision opens no alert of case {self.doc.case_id}",
                           seq, self.trace_ids.get(seq))
        carried = {seq for seq, kind, _ in self.records if kind == DECISION_KIND}
        for a in self.doc.alerts:
            if int(a["seq"]) not in carried:
                self._fail("case.decision", "case.json states an alert whose decision the bundle does not "
                                            "carry", int(a["seq"]), file=CASE_FILE)

    def _events(self, alerts: Mapping[int, str]) -> None:
        stated = {int(e["seq"]) for e in self.doc.events}
        for seq, kind, env in self.records:
            if kind != EVENT_KIND:
                continue
            body = env.get("record")
            if not isinstance(body, dict) or not about_case(body, self.doc.case_id, alerts):
                self._fail("case.completeness.unrelated", f"a case event not about case {self.doc.case_id} "
                           "(it targets no alert of the case and neither the case nor a link to it)",
                           seq, self.trace_ids.get(seq))
            if seq not in stated:
                self._fail("case.completeness.unstated", "a case event the bundle carries that case.json "
                                                         "does not list", seq, self.trace_ids.get(seq))
        for seq in sorted(stated - set(self.event_seqs)):
            self._fail("case.completeness.missing", "case.json lists this case event, and the bundle does "
                                                    "not carry it", seq, file=CASE_FILE)

    def _policies(self, derived: CaseRows) -> None:
        need = {int(a["policy_seq"]) for a in derived.alerts} - {0}
        have = set(self.policy_seqs)
        for seq in sorted(need - have):
            self._fail("case.policy", "an alert of the case was dated under this policy, and the bundle "
                                      "does not carry it", seq)
        for seq in sorted(have - need):
            self._fail("case.policy", "a policy no alert of the case was dated under", seq,
                       self.trace_ids.get(seq))
        if tuple(sorted(have)) != self.doc.policies:
            self._fail("case.policy", f"case.json lists policies {list(self.doc.policies)}, the bundle "
                                      f"carries {sorted(have)}", file=CASE_FILE)

    def _withheld(self) -> None:
        doc = self.doc
        for seq, _ in doc.withheld:
            if not doc.from_seq <= seq <= doc.to_seq:
                self._fail("case.completeness.withheld", "a withheld leaf outside the range searched "
                           f"[{doc.from_seq}, {doc.to_seq}]", seq, file=CASE_FILE)
            elif seq in self.lines:
                self._fail("case.completeness.withheld", "a withheld leaf that is also a line of the bundle",
                           seq, file=CASE_FILE)

    def _reports(self, report: CaseReport) -> None:
        for seq, kind, env in self.records:
            body = env.get("record")
            if kind != EVENT_KIND or not isinstance(body, dict) or body.get("action") != "file_report":
                continue
            sha, sealed = body.get("report"), env.get("payload_sha256")
            if sha != sealed:
                self._fail("case.report", f"the event states report {sha}, its record seals payload "
                                          f"{sealed}", seq, self.trace_ids.get(seq))
            report.reports.append({"seq": seq, "recorded_at": env.get("recorded_at"), "sha256": sha,
                                   "amends": body.get("amends"),
                                   "by": _who(body.get("principal"))[0],
                                   "payload": self.payloads.get(str(sealed), "not carried")})

    def _holds(self, report: CaseReport) -> None:
        placed: dict[str, dict[str, Any]] = {}
        for seq, env in self.holds:
            body = env.get("record")
            ok = isinstance(body, dict) and body.get("action") in ("place", "release") and isinstance(
                body.get("hold_id"), str)
            if not ok or not isinstance(body, dict):
                self._fail("case.hold", "not a legal hold record", seq, self.trace_ids.get(seq))
                continue
            if body["action"] == "place":
                placed[body["hold_id"]] = {"hold_id": body["hold_id"], "placed_seq": seq,
                                           "seq_from": body.get("seq_from"), "seq_to": body.get("seq_to"),
                                           "reason": body.get("reason"), "released_seq": None}
            elif body["hold_id"] in placed:
                placed[body["hold_id"]]["released_seq"] = seq
        report.holds = list(placed.values())
        if tuple(seq for seq, _ in self.holds) != self.doc.holds:
            self._fail("case.hold", f"case.json lists holds {list(self.doc.holds)}, the bundle carries "
                                    f"{[s for s, _ in self.holds]}", file=CASE_FILE)
        for r in report.reports:
            covered = [h["hold_id"] for h in report.holds if h["released_seq"] is None
                       and type(h["seq_from"]) is int and type(h["seq_to"]) is int
                       and h["seq_from"] <= r["seq"] <= h["seq_to"]]
            r["holds"] = covered
            if not covered:
                report.notes.append(f"no legal hold in the bundle covers the report filed at seq {r['seq']}: "
                                    "retention may purge its bytes (the SHA-256 stays sealed)")
