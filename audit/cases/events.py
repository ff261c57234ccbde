"""The sealed records of officers' work: ``case_event`` (``sealtrail.case-event/1``) and
``alert_policy`` (``sealtrail.alert-policy/1``).

A case event names its target, either one alert (the decision that opened it: trace id, seq and
leaf hash, as an annotation names its decision) or one case (its id, the seq of the alert that
opened it), the action, who took it (the X.509 principal), and the action's arguments:
``rationale`` (the officer's words), ``assignee`` (a principal), ``disposition``, ``link`` (another
case id), ``report`` (the SHA-256 of a filed report, whose bytes are the record's payload) and
``amends`` (the SHA-256 of the report it replaces). Every event is sealed, whether or not it
could still apply when it reached the log (another officer may have moved the alert first): the
fold (``audit.cases.fold``) applies it or records why not, so attempts are evidence too.

Rationale is the officer's statement and is kept for as long as the ledger; it should not copy
personal data from the payment (that stays in the purgeable payload).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from audit.cases.policy import POLICY_KIND, POLICY_SCHEMA, DeadlinePolicy
from audit.cases.state import ACTIONS, CASE_ACTIONS, Disposition, QaVerdict, is_seq
from audit.errors import AnnotationError, CaseError
from audit.officer_words import checked_text, principal_json

__all__ = ["EVENT_KIND", "EVENT_SCHEMA", "MAX_RATIONALE", "POLICY_KIND", "POLICY_SCHEMA", "event_body",
           "parse_event", "parse_policy", "policy_body"]

EVENT_KIND = "case_event"
EVENT_SCHEMA = "sealtrail.case-event/1"
MAX_RATIONALE = 10_000
_NEEDS_RATIONALE = frozenset({"escalate", "close", "reopen", "comment", "release", "reject", "refuse",
                              "link", "file_report", "qa_review"})
_ARGS = ("rationale", "assignee", "disposition", "link", "report", "amends", "verdict")
_HEX = frozenset("0123456789abcdef")


def _member(kind: type[enum.StrEnum], value: object, name: str) -> str:
    """``value`` as one of ``kind``'s members, or ``CaseError`` naming ``name`` and the choices."""
    try:
        return kind(str(value)).value
    except ValueError:
        raise CaseError(name, f"{value!r} is not one of {', '.join(m.value for m in kind)}") from None


def _sha(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value) != 64 or set(value) - _HEX:
        raise CaseError(name, "must be a SHA-256 in lower-case hex")
    return value


def _checked_text(value: object, name: str) -> str:
    try:
        return checked_text(value, name, MAX_RATIONALE)
    except AnnotationError as exc:
        raise CaseError(exc.field, exc.message) from None


def _checked_principal(value: object, name: str) -> dict[str, Any]:
    try:
        return principal_json(value, spki=True)  # type: ignore[arg-type]
    except AnnotationError:
        raise CaseError(name, "must be a principal (subject, sans, issuer, fingerprint_sha256 as "
                              "lower-case hex, serial; spki_sha256 where known)") from None


def event_body(target: Mapping[str, Any], action: str, principal: Mapping[str, Any], *,
               rationale: str | None = None, assignee: Mapping[str, Any] | None = None,
               disposition: str | None = None, link: int | None = None,
               report: str | None = None, amends: str | None = None,
               verdict: str | None = None) -> dict[str, Any]:
    """The checked ``sealtrail.case-event/1`` body; ``target`` is ``{"alert": {trace_id, seq,
    leaf_hash}}`` or ``{"case": case_id}``. Refuses, naming the field, an action the target does
    not take, a missing rationale, assignee or disposition, or an argument the action ignores."""
    on_case = "case" in target
    allowed = CASE_ACTIONS if on_case else ACTIONS
    if action not in allowed:
        raise CaseError("action", f"{action!r} is not one of {', '.join(allowed)}"
                                  f" (on {'a case' if on_case else 'an alert'})")
    args: dict[str, Any] = dict.fromkeys(_ARGS)
    if rationale is not None or action in _NEEDS_RATIONALE:
        args["rationale"] = _checked_text(rationale, "rationale")
    if action == "assign":
        if assignee is None:
            raise CaseError("assignee", "assign needs the principal to assign to")
        args["assignee"] = _checked_principal(assignee, "assignee")
    elif assignee is not None:
        raise CaseError("assignee", f"{action} takes no assignee")
    if action == "close":
        args["disposition"] = _member(Disposition, disposition, "disposition")
    elif disposition is not None:
        raise CaseError("disposition", f"{action} takes no disposition")
    if action == "link":
        if not is_seq(link):
            raise CaseError("link", "link needs the id of the case to link")
        args["link"] = link
    elif link is not None:
        raise CaseError("link", f"{action} takes no link")
    if action == "file_report":
        args["report"] = _sha(report, "report")
        args["amends"] = None if amends is None else _sha(amends, "amends")
    elif report is not None or amends is not None:
        raise CaseError("report" if report is not None else "amends", f"{action} takes no report")
    if action == "qa_review":
        args["verdict"] = _member(QaVerdict, verdict, "verdict")
    elif verdict is not None:
        raise CaseError("verdict", f"{action} takes no verdict")
    return {"schema": EVENT_SCHEMA, "target": dict(target), "action": action,
            "principal": _checked_principal(principal, "principal"), **args}


def parse_event(body: object) -> dict[str, Any]:
    """A sealed case-event body, checked as :func:`event_body` checks one (so a record made by
    anything else does not reach the fold); ``CaseError`` names what is wrong."""
    if not isinstance(body, dict) or body.get("schema") != EVENT_SCHEMA:
        raise CaseError("schema", f"not a {EVENT_SCHEMA} body")
    want = {"schema", "target", "action", "principal", *_ARGS}
    if set(body) != want:
        raise CaseError("record", f"has fields {sorted(body)}, not {sorted(want)}")
    target = body["target"]
    ok_alert = (isinstance(target, dict) and set(target) == {"alert"} and isinstance(target["alert"], dict)
                and set(target["alert"]) == {"trace_id", "seq", "leaf_hash"}
                and is_seq(target["alert"]["seq"]) and isinstance(target["alert"]["trace_id"], str)
                and isinstance(target["alert"]["leaf_hash"], str) and len(target["alert"]["leaf_hash"]) == 64
                and not set(target["alert"]["leaf_hash"]) - _HEX)
    ok_case = isinstance(target, dict) and set(target) == {"case"} and is_seq(target["case"])
    if not (ok_alert or ok_case):
        raise CaseError("target", "must be {alert: {trace_id, seq, leaf_hash}} or {case: id}")
    again = event_body(target, body["action"], body["principal"], rationale=body["rationale"],
                       assignee=body["assignee"], disposition=body["disposition"], link=body["link"],
                       report=body["report"], amends=body["amends"], verdict=body["verdict"])
    if again != body:
        raise CaseError("record", "is not as sealtrail seals a case event")
    return body


def policy_body(policy: DeadlinePolicy, principal: Mapping[str, Any], rationale: str) -> dict[str, Any]:
    """The ``sealtrail.alert-policy/1`` body that puts ``policy`` in force; a policy the fold could
    not read back is refused here, before anything is sealed."""
    DeadlinePolicy.from_json(policy.to_json())
    return {"schema": POLICY_SCHEMA, "policy": policy.to_json(),
            "principal": _checked_principal(principal, "principal"),
            "rationale": _checked_text(rationale, "rationale")}


def parse_policy(body: object) -> DeadlinePolicy:
    """The policy a sealed ``alert_policy`` body puts in force."""
    if not isinstance(body, dict) or body.get("schema") != POLICY_SCHEMA or set(body) != {
            "schema", "policy", "principal", "rationale"}:
        raise CaseError("schema", f"not a {POLICY_SCHEMA} body")
    policy = DeadlinePolicy.from_json(body["policy"])
    if policy.to_json() != body["policy"]:
        raise CaseError("policy", "is not as sealtrail seals a policy")
    return policy
