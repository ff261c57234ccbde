"""The alert and case view as a fold over the sealed records, in seq order.

:class:`CaseFold` reads three kinds of sealed record: an alerting decision opens an alert (and a
case for its subject, or joins the subject's open case), an ``alert_policy`` record puts a
deadline policy in force for the alerts opened after it, and a ``case_event`` moves an alert or
a case (``audit.cases.state.step``). The fold is pure: rows it has not seen come from a
``Loader`` (the stored view, for the incremental catch-up; nothing, for ``ledger verify``'s full
rebuild), and what it changed is read back from ``dirty_alerts``, ``dirty_cases``, ``events``
and ``outcomes``. Both paths run this code, so the view and its check cannot drift apart.

An event that no longer applies when the log reaches it (the alert was closed first, a second
officer is the proposer) changes nothing: it is listed with ``applied = False`` and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson

from audit.cases.events import EVENT_KIND, parse_event, parse_policy
from audit.cases.policy import DEFAULT_POLICY, POLICY_KIND, DeadlinePolicy
from audit.cases.state import (
    ALERT_OUTCOMES,
    AlertState,
    CaseState,
    Disposition,
    Payment,
    step,
)
from audit.decide.fixed_point import body_score
from audit.decide.record import DECISION_KIND
from audit.errors import CaseConflictError, CaseError
from ledger.jcs import canonical_bytes

__all__ = ["CaseFold", "EventRow", "Loader", "OutcomeRow", "alert_of", "opens_alert", "subject_of"]

_ALERT_BITS = {"originator": 1, "beneficiary": 2}
_ACCOUNT = re.compile(r"[0-9a-f]{16,64}")  # a keyed account (audit.decide.account_risk): hex
_FP = re.compile(r"[0-9a-f]{64}|")
_OUTCOMES = ("ALLOW", *ALERT_OUTCOMES)


class Loader(Protocol):
    """Where the fold finds rows it has not seen in this run (the stored view)."""

    def alert(self, seq: int) -> AlertState | None: ...
    def case(self, case_id: int) -> CaseState | None: ...
    def open_cases(self, subject: str) -> list[int]: ...
    def case_alerts(self, case_id: int) -> list[AlertState]: ...
    def policy_at(self, seq: int) -> DeadlinePolicy | None: ...
    def policy_before(self, seq: int) -> tuple[int, DeadlinePolicy] | None: ...


@dataclass(frozen=True)
class EventRow:
    """``audit_case_events``: one sealed event, where it applied and whether it did."""

    seq: int
    case_id: int | None  # None: the target does not exist
    alert_seq: int | None  # None: an event on a case
    action: str
    actor_fp: str
    recorded_at: str
    applied: bool
    why: str | None  # why it did not apply


@dataclass(frozen=True)
class OutcomeRow:
    """``audit_payment_outcomes``: a held payment released or rejected, for the payment system."""

    seq: int  # of the event that decided it
    alert_seq: int
    trace_id: str  # of the decision
    scorer_fp: str  # who asked for the decision: the only scorer that may read the outcome
    outcome: str
    recorded_at: str


def opens_alert(body: Mapping[str, Any]) -> bool:
    """Whether a decision body opens an alert: a REVIEW, HOLD or BLOCK, or an account alert."""
    risk = body.get("account_risk")
    return body.get("decision") in ALERT_OUTCOMES or bool(isinstance(risk, dict) and risk.get("alerts"))


def subject_of(seq: int, body: Mapping[str, Any], policy: DeadlinePolicy) -> str:
    """The case subject of the alert a decision opens: the keyed account of the side the policy
    names (for an account alert alone, the side that raised it), or the decision itself where the
    record states no account (version 1) or the policy says ``decision``."""
    risk = body.get("account_risk")
    side = policy.subject
    if body.get("decision") not in ALERT_OUTCOMES and isinstance(risk, dict):
        alerts = risk.get("alerts") or []
        side = "originator" if "originator" in alerts else "beneficiary"
    if side != "decision" and isinstance(risk, dict) and isinstance(risk.get(side), dict):
        account = risk[side].get("account")
        if isinstance(account, str) and _ACCOUNT.fullmatch(account):
            return f"account:{account}"
    return f"decision:{seq}"


def alert_of(seq: int, env: Mapping[str, Any], policy_seq: int, policy: DeadlinePolicy,
             case_id: int) -> AlertState:
    """The new alert a sealed decision envelope at ``seq`` opens under ``policy``. ``ValueError``
    (or ``KeyError``, ``TypeError``) for a body sealtrail does not seal: the fold opens no alert
    for it, and the trace index's check names the record."""
    b = env["record"]
    risk = b.get("account_risk")
    alerts = risk.get("alerts") if isinstance(risk, dict) else None
    if alerts is not None and not (isinstance(alerts, list) and all(isinstance(x, str) for x in alerts)):
        raise ValueError("account_risk.alerts is not a list of sides")
    mask = sum(_ALERT_BITS.get(a, 0) for a in set(alerts or ()))
    opened = str(env["recorded_at"])
    decision = b["decision"]
    if decision not in _OUTCOMES:
        raise ValueError(f"decision {decision!r}")
    rules = b.get("rules") if isinstance(b.get("rules"), dict) else {}
    model = b.get("model") if isinstance(b.get("model"), dict) else {}
    score = body_score(b)
    if score is not None and not 0.0 <= score <= 1.0:
        raise ValueError(f"score {score!r} outside [0, 1]")
    fired = [h["id"] for h in b["fired"]]
    if not all(isinstance(i, str) for i in fired):
        raise ValueError("fired rule ids are not text")
    scorer = b["principal"]["fingerprint_sha256"]
    if not isinstance(scorer, str) or not _FP.fullmatch(scorer):
        raise ValueError("principal.fingerprint_sha256 is not a SHA-256")
    leaf = env.get("leaf_hash")
    return AlertState(
        seq=seq, trace_id=str(env["trace_id"]), opened_at=opened, outcome=decision, account_alert=mask,
        fired=",".join(dict.fromkeys(fired)), leaf_hash=leaf if isinstance(leaf, str) else "",
        scorer_fp=scorer, subject=subject_of(seq, b, policy),
        case_id=case_id, policy_seq=policy_seq, review_due=policy.review_due(opened),
        filing_due=policy.filing_due(opened),
        ruleset=f"{rules['ruleset_id']}@{rules['version']}" if rules else "",
        model_sha256=str(model.get("sha256") or "")[:64],
        score_ppm=None if score is None else round(score * 1_000_000),
        payment=Payment.HELD if decision in ("HOLD", "BLOCK") else None)


class CaseFold:
    """Apply sealed records in seq order to the alert and case view."""

    def __init__(self, loader: Loader | None = None) -> None:
        self._loader = loader
        self.alerts: dict[int, AlertState] = {}
        self.cases: dict[int, CaseState] = {}
        self._open: dict[str, set[int]] = {}  # subject -> its open cases
        self._case_alerts: dict[int, list[int]] = {}
        self._policies: dict[int, tuple[int, DeadlinePolicy]] = {}  # policy seq -> (seq, policy)
        self._policy: tuple[int, DeadlinePolicy] | None = None
        self.dirty_alerts: set[int] = set()
        self.new_alerts: set[int] = set()
        self.dirty_cases: set[int] = set()
        self.new_cases: set[int] = set()
        self.events: list[EventRow] = []
        self.outcomes: list[OutcomeRow] = []
        self.last_error: CaseError | None = None  # why the last event did not apply
        self.refused_policies: list[int] = []  # alert_policy records not as sealtrail seals them
        self.skipped_decisions: list[int] = []  # decision records the view cannot hold
        self.last_seq = 0

    # -- lookups: this run's rows first, then the loader's ------------------------------------
    def _alert(self, seq: int) -> AlertState | None:
        if seq not in self.alerts and self._loader is not None:
            got = self._loader.alert(seq)
            if got is not None:
                self.alerts[seq] = got
        return self.alerts.get(seq)

    def _case(self, case_id: int) -> CaseState | None:
        if case_id not in self.cases and self._loader is not None:
            got = self._loader.case(case_id)
            if got is not None:
                self.cases[case_id] = got
        return self.cases.get(case_id)

    def _open_cases(self, subject: str) -> set[int]:
        if subject not in self._open:
            self._open[subject] = set(self._loader.open_cases(subject)) if self._loader is not None else set()
        return self._open[subject]

    def _open_case(self, subject: str) -> int | None:
        """The case a new alert of ``subject`` joins: its newest open case (a reopened older
        case stays open beside it, and keeps only its own alerts)."""
        return max(self._open_cases(subject), default=None)

    def _alerts_of(self, case_id: int) -> list[AlertState]:
        if case_id not in self._case_alerts:
            loaded = self._loader.case_alerts(case_id) if self._loader is not None else []
            for a in loaded:
                self.alerts.setdefault(a.seq, a)
            self._case_alerts[case_id] = [a.seq for a in loaded]
        return [self.alerts[s] for s in self._case_alerts[case_id]]

    def policy_for(self, seq: int) -> DeadlinePolicy:
        """The policy of an alert whose ``policy_seq`` is ``seq`` (0: the default)."""
        if seq == 0:
            return DEFAULT_POLICY
        if seq not in self._policies and self._loader is not None:
            got = self._loader.policy_at(seq)
            if got is not None:
                self._policies[seq] = (seq, got)
        if seq not in self._policies:
            raise CaseError("policy", f"no alert_policy record at seq {seq}")
        return self._policies[seq][1]

    def _current_policy(self, before: int) -> tuple[int, DeadlinePolicy]:
        if self._policy is None:
            got = self._loader.policy_before(before) if self._loader is not None else None
            self._policy = got if got is not None else (0, DEFAULT_POLICY)
        return self._policy

    # -- writes -------------------------------------------------------------------------------
    def _put_alert(self, a: AlertState) -> None:
        self.alerts[a.seq] = a
        self.dirty_alerts.add(a.seq)

    def _put_case(self, c: CaseState) -> None:
        self.cases[c.case_id] = c
        self.dirty_cases.add(c.case_id)
        open_ids = self._open_cases(c.subject)
        if c.open:
            open_ids.add(c.case_id)
        else:
            open_ids.discard(c.case_id)

    def _recount(self, case_id: int, seq: int) -> None:
        c = self._case(case_id)
        assert c is not None
        open_now = sum(a.open for a in self._alerts_of(case_id))
        closed_at = c.closed_at
        if c.open and not open_now:
            closed_at = max((a.closed_at or "" for a in self._alerts_of(case_id)), default=None)
        elif open_now:
            closed_at = None
        moved = bool(open_now) != c.open  # closed or reopened: a proposal on it no longer stands
        self._put_case(replace(c, open_alerts=open_now, closed_at=closed_at, last_event_seq=seq,
                               disposition=c.disposition if not open_now else None,
                               pending=None if moved else c.pending,
                               pending_by=None if moved else c.pending_by))

    # -- the fold -----------------------------------------------------------------------------
    def apply(self, records: Iterable[tuple[int, str, Mapping[str, Any]]]) -> None:
        """Apply ``(seq, kind, envelope)`` in ascending seq order (other kinds are skipped). Each
        decision's envelope carries its entry's ``leaf_hash`` (hex) beside the sealed members
        (``audit.cases.store.sealed_records`` adds it): a case event names its alert by trace id,
        seq and that leaf hash, and applies only if all three match."""
        for seq, kind, env in records:
            if seq <= self.last_seq:
                raise CaseError("seq", f"records out of order: {seq} after {self.last_seq}")
            self.last_seq = seq
            if kind == DECISION_KIND:
                if opens_alert(env["record"]):
                    self._open_alert(seq, env)
            elif kind == POLICY_KIND:
                try:
                    self._policy = (seq, parse_policy(env["record"]))
                except CaseError:  # not as sealtrail seals a policy: the one in force stays in force
                    self.refused_policies.append(seq)
                    continue
                self._policies[seq] = self._policy
            elif kind == EVENT_KIND:
                self._event(seq, env)

    def _open_alert(self, seq: int, env: Mapping[str, Any]) -> None:
        policy_seq, policy = self._current_policy(seq)
        try:
            subject = subject_of(seq, env["record"], policy)
            probe = alert_of(seq, env, policy_seq, policy, seq)
        except (KeyError, TypeError, ValueError, AttributeError):
            self.skipped_decisions.append(seq)
            return
        case_id = self._open_case(subject)
        a = replace(probe, case_id=case_id if case_id is not None else seq)
        self._put_alert(a)
        self.new_alerts.add(seq)
        if case_id is None:
            c = CaseState(case_id=seq, subject=subject, opened_at=a.opened_at, alerts=1, open_alerts=1,
                          last_alert_seq=seq)
            self._case_alerts[seq] = [seq]
            self.new_cases.add(seq)
            self._put_case(c)
            return
        joined = self._case(case_id)
        assert joined is not None
        self._alerts_of(case_id)
        self._case_alerts[case_id].append(seq)
        # a proposal on the case was about the alerts it held then: a new one voids it
        self._put_case(replace(joined, alerts=joined.alerts + 1, open_alerts=joined.open_alerts + 1,
                               last_alert_seq=seq, pending=None, pending_by=None))

    def _event(self, seq: int, env: Mapping[str, Any]) -> None:
        at = str(env["recorded_at"])
        try:
            body = parse_event(env["record"])
        except CaseError as exc:
            self.events.append(EventRow(seq, None, None, "?", "", at, False, f"not a case event: {exc}"))
            return
        actor_fp = str(body["principal"]["fingerprint_sha256"])
        target = body["target"]
        case_id: int | None = None
        alert_seq: int | None = None
        why: str | None = None
        try:
            if "alert" in target:
                a = self._alert(int(target["alert"]["seq"]))
                if a is None or a.trace_id != target["alert"]["trace_id"] or (
                        a.leaf_hash != target["alert"]["leaf_hash"]):
                    raise CaseError("target", f"no alert at seq {target['alert']['seq']} with that trace id "
                                              "and leaf hash")
                case_id, alert_seq = a.case_id, a.seq
                self._alert_event(seq, a, body, at)
            else:
                c = self._case(int(target["case"]))
                if c is None:
                    raise CaseError("target", f"no case {target['case']}")
                case_id = c.case_id
                self._case_event(seq, c, body, at, env.get("payload_sha256"))
        except CaseError as exc:
            why, self.last_error = str(exc), exc
        else:
            self.last_error = None
        self.events.append(EventRow(seq, case_id, alert_seq, body["action"], actor_fp, at, why is None, why))

    def _alert_event(self, seq: int, a: AlertState, body: Mapping[str, Any], at: str) -> None:
        action = body["action"]
        if action == "close" and body["disposition"] == Disposition.REPORT_FILED:
            c = self._case(a.case_id)
            if c is None or c.last_report_seq is None or c.last_report_seq < a.seq:
                raise CaseConflictError("disposition", f"no report on case {a.case_id} was filed after alert "
                                                       f"{a.seq} opened")
        st = step(a, action, body["principal"], body, at=at, policy=self.policy_for(a.policy_seq))
        self._put_alert(replace(st.alert, last_event_seq=seq, events=a.events + 1))
        if st.payment_outcome is not None:
            self.outcomes.append(OutcomeRow(seq, a.seq, a.trace_id, a.scorer_fp, st.payment_outcome, at))
        if st.alert.open != a.open:
            self._recount(a.case_id, seq)
        else:
            c = self._case(a.case_id)
            assert c is not None
            self._put_case(replace(c, last_event_seq=seq))

    def _case_event(self, seq: int, c: CaseState, body: Mapping[str, Any], at: str,
                    payload_sha: str | None) -> None:
        action = body["action"]
        if action == "close" and body["disposition"] == Disposition.REPORT_FILED:
            late = [a.seq for a in self._alerts_of(c.case_id) if a.open and (
                c.last_report_seq is None or c.last_report_seq < a.seq)]
            if late:
                raise CaseConflictError("disposition", f"no report on case {c.case_id} was filed after alert "
                                                       f"{late[0]} opened")
        members = self._alerts_of(c.case_id)
        if action == "link":
            other = self._case(int(body["link"]))
            if other is None or other.case_id == c.case_id:
                raise CaseError("link", f"no other case {body['link']}")
            for x, y in ((c, other), (other, c)):
                ids = sorted({*(int(i) for i in x.links.split(",") if i), y.case_id})
                self._put_case(replace(x, links=",".join(map(str, ids)), last_event_seq=seq))
            return
        if action == "comment":
            self._put_case(replace(c, last_event_seq=seq))
            return
        if action == "file_report":
            if payload_sha != body["report"]:
                raise CaseError("report", "the report's bytes are not the record's payload")
            if body["amends"] != c.last_report:
                raise CaseConflictError("amends", f"the report in force on case {c.case_id} is "
                                                  f"{c.last_report}, not {body['amends']}: a report amends "
                                                  "the one in force")
            self._put_case(replace(c, reports=c.reports + 1, last_report=body["report"], last_report_seq=seq,
                                   last_event_seq=seq))
            return
        if action in ("approve", "refuse"):
            if c.pending is None:
                raise CaseConflictError("action", f"nothing on case {c.case_id} awaits a second officer")
            probe = replace(members[0], pending=c.pending, pending_by=c.pending_by) if members else None
            if probe is None:
                raise CaseConflictError("action", f"case {c.case_id} holds no alert")
            step(probe, action, body["principal"], body, at=at, policy=self.policy_for(probe.policy_seq))
            if action == "refuse":
                self._put_case(replace(c, pending=None, pending_by=None, last_event_seq=seq))
                return
            body = {**body, "disposition": c.pending.split(":", 1)[1]}
            self._close_members(seq, c, members, body, at, four_eyes_done=True)
            return
        if action == "assign":
            open_members = [a for a in members if a.open]
            if not open_members:
                raise CaseConflictError("action", f"case {c.case_id} is closed")
            moved = [step(a, "assign", body["principal"], body, at=at,
                          policy=self.policy_for(a.policy_seq)).alert for a in open_members]
            for a in moved:
                self._put_alert(replace(a, last_event_seq=seq, events=a.events + 1))
            fp, subject = moved[0].assignee_fp, moved[0].assignee_subject
            self._put_case(replace(c, assignee_fp=fp, assignee_subject=subject, last_event_seq=seq))
            return
        # close: every open alert of the case, all or none
        if c.pending is not None:
            raise CaseConflictError("action", f"{c.pending} on case {c.case_id} awaits a second officer")
        self._close_members(seq, c, members, body, at, four_eyes_done=False)

    def _close_members(self, seq: int, c: CaseState, members: list[AlertState], body: Mapping[str, Any],
                       at: str, *, four_eyes_done: bool) -> None:
        open_members = [a for a in members if a.open]
        if not open_members:
            raise CaseConflictError("action", f"case {c.case_id} is closed")
        closed = []
        for a in open_members:
            policy = self.policy_for(a.policy_seq)
            if four_eyes_done:  # the approval: close as the proposer asked
                policy = replace(policy, four_eyes_false_positive=False)
            st = step(a, "close", body["principal"], body, at=at, policy=policy)
            closed.append(st.alert)
        if any(x.pending is not None for x in closed):  # four-eyes: the case holds the proposal
            proposal = next(x for x in closed if x.pending is not None)
            self._put_case(replace(c, pending=proposal.pending, pending_by=proposal.pending_by,
                                   last_event_seq=seq))
            return
        if four_eyes_done and c.pending_by:  # closed by two: the proposer's call, the approver's consent
            both = canonical_bytes([orjson.loads(c.pending_by), dict(body["principal"])]).decode()
            closed = [replace(a, closed_by=both) for a in closed]
        for a in closed:
            self._put_alert(replace(a, last_event_seq=seq, events=a.events + 1))
        self._put_case(replace(c, disposition=closed[0].disposition, pending=None, pending_by=None))
        self._recount(c.case_id, seq)
