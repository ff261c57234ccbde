"""/v1/alerts, /v1/cases and /v1/outcomes: the officer's queue and cases, and the held-payment
outcomes the payment system polls; /v1/case-reads: who read which case, for a regulator.

A thin face over ``audit.cases``: every action is a sealed ``case_event`` record
(``audit.cases.service.act``), every read a keyset page of the view, which is brought current
from the sealed records first. Officers act, regulators read; scorers and admins see no alert or
case (tipping-off, FATF R.21). A scorer reads, in ``/v1/outcomes``, only the outcomes of the
decisions its own certificate asked for. An action refused (bad argument, unknown target, an
action the alert's state does not take, four-eyes) seals nothing; its problem names the field.

Every answer that shows an alert or a case to a reader is a read of that case, sealed as a
``case_read`` record before it is answered (``audit.cases.reads``; tipping-off, FATF R.21): one
alert or one case is ``what: case``, a page of the queue or of the case list ``what: queue`` for
each case on it. If the ledger cannot seal the read, the read fails (503). An empty page reads
no case and seals nothing; the outcome feed is the payment system's own and is not recorded.
The list of reads (``cases.reads``) is a regulator's alone: it is how the officers' own reads are
investigated (docs/http-api.md, "Who read a case").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date
from typing import Annotated, Any, Literal, TypeVar

import orjson
from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import (
    BaseModel,
    Field,
    StrictInt,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)
from pydantic_core import PydanticCustomError

from api.access import ALL_OUTCOMES_ROLES
from api.auth import Caller
from api.bodies import json_model
from api.case_json import alert_json, case_json, event_json, read_json
from api.deps import RuntimeDep, allow
from api.openapi import examples, json_body, problems
from api.problems import Problem, audit_problem, problem_response
from api.roles import normalise_subject
from audit.cases.counterparties import counterparty_cases
from audit.cases.query import (
    CASE_VIEWS,
    MAX_LIMIT,
    VIEWS,
    AlertFilter,
    CaseFilter,
    alert_page,
    case_detail,
    case_page,
    get_alert,
    outcomes_since,
)
from audit.cases.reads import MAX_READS, list_reads, record_reads
from audit.cases.service import ActionReceipt, act
from audit.cases.state import ACTIONS, CASE_ACTIONS, Disposition, QaVerdict
from audit.decide.runtime import Runtime
from audit.errors import CaseError
from audit.query.traces import get_trace
from audit.screening.evidence import sealed_hits
from ledger import LedgerUnavailableError

__all__ = ["MAX_BULK", "AlertActionIn", "AssigneeIn", "BulkAssignIn", "CaseActionIn", "alert_json",
           "case_json", "event_json", "read_json", "router"]

router = APIRouter(tags=["alerts and cases"])
MAX_BULK = 200  # alerts in one bulk request: each is its own sealed record
_CASE_ACTIONS_HERE = tuple(a for a in CASE_ACTIONS if a != "file_report")  # reports: /v1/cases/{id}/reports
_T = TypeVar("_T")


# -- what the API answers -----------------------------------------------------------------------


def _today(rt: Runtime[Any]) -> date:
    """Today (UTC) by the ledger's clock, the one that stamps the records: what is overdue."""
    return rt.ledger.clock().astimezone(UTC).date()


def _me(view: str, caller: Caller) -> str | None:
    """Whose ``mine`` view (the caller's certificate): only there, so that the cursor of any other
    view is bound to its filters alone and a colleague can follow it."""
    return caller.principal.fingerprint_sha256 if view == "mine" else None


def _seal_reads(rt: Runtime[Any], caller: Caller, cases: Iterable[int], what: str) -> None:
    """Seal that ``caller`` read ``cases`` (``what``: ``case`` or ``queue``) before it is shown."""
    ids = list(dict.fromkeys(cases))
    if ids:
        record_reads(rt.ledger, caller.principal, [{"case": c, "what": what} for c in ids])


def _receipt(r: ActionReceipt) -> dict[str, Any]:
    return {"seq": r.seq, "trace_id": r.trace_id, "leaf_hash": r.leaf_hash, "recorded_at": r.recorded_at,
            "action": r.action, "alert_seq": r.alert_seq, "case_id": r.case_id}


def _problem(exc: CaseError) -> Problem:
    """The problem of a refused alert or case request, naming its field whatever its status
    (status and kind from the API's one mapping, ``api.problems.audit_problem``)."""
    status, kind, _ = audit_problem(exc)
    return Problem(status, kind, str(exc), [{"field": exc.field, "message": exc.message}])


def _problem_json(status: int, kind: str, detail: str, field: str,
                  message: str | None = None) -> dict[str, Any]:
    """A problem as one item of a bulk answer: the body the API answers a problem with."""
    out: dict[str, Any] = orjson.loads(bytes(problem_response(
        status, kind, detail, [{"field": field, "message": message or detail}]).body))
    return out


async def _call(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn`` (blocking: the database) in the thread pool; a ``CaseError`` as its problem."""
    try:
        return await run_in_threadpool(fn, *args, **kwargs)
    except CaseError as exc:
        raise _problem(exc) from exc


# -- request bodies -----------------------------------------------------------------------------


class AssigneeIn(BaseModel):
    """The officer to assign to, named as their certificate names them."""

    model_config = {"extra": "forbid"}
    subject: str = Field(min_length=1, max_length=1024, description="the certificate's subject DN, RFC 4514 "
                                                                    "(as `sealtrail certs show` prints it)")
    fingerprint_sha256: str = Field(description="SHA-256 of the DER certificate, hex (`:` allowed)")

    @field_validator("subject")
    @classmethod
    def _rfc4514(cls, value: str) -> str:
        try:
            return normalise_subject(value)
        except ValueError:
            raise ValueError("is not an RFC 4514 name (such as CN=Alice Martin,O=Example Bank)") from None

    @field_validator("fingerprint_sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        fp = value.replace(":", "").lower()
        if len(fp) != 64 or set(fp) - set("0123456789abcdef"):
            raise ValueError("must be 64 hex digits (the certificate's SHA-256)")
        return fp

    def principal(self) -> dict[str, Any]:
        """The principal sealed as the assignee: the subject and fingerprint named, nothing else
        known (no SANs, issuer or serial)."""
        return {"subject": self.subject, "sans": [], "issuer": "",
                "fingerprint_sha256": self.fingerprint_sha256, "serial": ""}


def _one_assignee(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """``"me"`` or an ``AssigneeIn``, refused as one field (``assignee``), saying what is wrong,
    rather than once for each shape it is not."""
    try:
        return handler(value)
    except ValidationError as exc:
        inner = [f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg'].removeprefix('Value error, ')}"
                 for e in exc.errors()
                 if isinstance(value, dict) and e["loc"][:1] == ("AssigneeIn",)]
        why = "; ".join(inner) or 'must be "me" or {"subject", "fingerprint_sha256"}'
        raise PydanticCustomError("assignee", "{why}", {"why": why}) from None


_Assignee = Annotated[Literal["me"] | AssigneeIn | None, WrapValidator(_one_assignee)]
_AssigneeNeeded = Annotated[Literal["me"] | AssigneeIn, WrapValidator(_one_assignee)]
_ASSIGNEE = "`\"me\"` (the caller) or the officer's `{subject, fingerprint_sha256}`; `assign` only"
_RATIONALE = ("the officer's words, sealed with the event and kept as long as the ledger (1 to 10,000 "
              "characters, no control character but newline and tab, no bidirectional control); required "
              "by every action but assign, start_review and approve; do not copy personal data from the "
              "payment")
_DISPOSITION = f"`close` only: one of {', '.join(d.value for d in Disposition)}"
_VERDICT = f"`qa_review` only: one of {', '.join(v.value for v in QaVerdict)}"


class AlertActionIn(BaseModel):
    model_config = {"extra": "forbid"}
    action: str = Field(json_schema_extra={"enum": list(ACTIONS)}, description="what to do to the alert")
    rationale: str | None = Field(None, description=_RATIONALE)
    assignee: _Assignee = Field(None, description=_ASSIGNEE)
    disposition: str | None = Field(None, description=_DISPOSITION)
    verdict: str | None = Field(None, description=_VERDICT)


class CaseActionIn(BaseModel):
    model_config = {"extra": "forbid"}
    action: str = Field(json_schema_extra={"enum": list(_CASE_ACTIONS_HERE)},
                        description="what to do to the case (a report is filed with "
                                    "POST /v1/cases/{case_id}/reports)")
    rationale: str | None = Field(None, description=_RATIONALE)
    assignee: _Assignee = Field(None, description=_ASSIGNEE)
    disposition: str | None = Field(None, description=_DISPOSITION)
    link: StrictInt | None = Field(None, ge=0, description="`link` only: the id of the case to link to")


class BulkAssignIn(BaseModel):
    model_config = {"extra": "forbid"}
    alerts: list[StrictInt] = Field(min_length=1, max_length=MAX_BULK,
                                    description="the alerts' seqs, each acted on in this order")
    action: Literal["assign"]
    assignee: _AssigneeNeeded = Field(description=_ASSIGNEE)
    rationale: str | None = Field(None, description=_RATIONALE)

    @field_validator("alerts")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        twice = sorted({s for s in value if value.count(s) > 1})
        if twice:
            raise ValueError(f"names alert {twice[0]} more than once")
        return value


def _assignee(value: Literal["me"] | AssigneeIn | None, caller: Caller) -> dict[str, Any] | None:
    if value is None:
        return None
    if value == "me":
        return caller.principal.to_json()
    assert isinstance(value, AssigneeIn)
    return value.principal()


# -- OpenAPI examples ---------------------------------------------------------------------------

_FP = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
_OFFICER = {"subject": "CN=Alice Martin,OU=Financial Crime,O=Example Bank",
            "fingerprint_sha256": "3b1f5e0c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"}
_HIT: dict[str, Any] = {
    "where": "beneficiary", "list": "ofac-sdn", "entry_id": "12057", "matched": "Mohammad Reza NAQDI",
    "list_sha256": "6c1f0e8a2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6", "score": 960,
    "basis": "name"}
_ALERT: dict[str, Any] = {
    "seq": 41873, "trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11",
    "opened_at": "2026-12-03T09:12:44.123456Z", "outcome": "BLOCK", "account_alerts": ["originator"],
    "fired": ["SANCTIONS_HIT", "MODEL_SCORE_HIGH"], "subject": "account:6f1c0e...b2", "case_id": 41210,
    "state": "in_review", "assignee": _OFFICER, "disposition": None, "closed_at": None, "closed_by": None,
    "qa": None, "review_due": "2026-12-10", "filing_due": "2027-01-02", "next_review_due": None,
    "overdue": False, "payment": "HELD", "pending": "release", "pending_by": _OFFICER,
    "last_event_seq": 41990, "events": 3, "policy_seq": 0, "scorer_fingerprint_sha256": _FP}
_RECEIPT: dict[str, Any] = {"seq": 41991, "trace_id": "019ae3d0-77aa-7c01-9a3e-2f4b6d8e0c12",
                            "leaf_hash": "a3c5...9e", "recorded_at": "2026-12-03T10:02:11.004512Z",
                            "action": "close", "alert_seq": 41873, "case_id": 41210}
_CASE: dict[str, Any] = {
    "case_id": 41210, "subject": "account:6f1c0e...b2", "opened_at": "2026-12-01T16:40:02.551201Z",
    "state": "open", "alert_count": 3, "open_alert_count": 2, "assignee": _OFFICER, "disposition": None,
    "closed_at": None, "pending": None, "pending_by": None, "links": [40077], "reports": 0,
    "last_report_sha256": None, "last_event_seq": 41990, "last_alert_seq": 41873}
_NOTE: dict[str, Any] = {
    "seq": 41902, "trace_id": "019ae3d2-0b1e-7f40-8a21-3c5e7f9a1b2c",
    "recorded_at": "2026-12-03T09:30:12.870311Z",
    "record": {"schema": "sealtrail.annotation/1",
               "refers_to": {"trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11", "seq": 41873,
                             "leaf_hash": "5d2e...c1"},
               "principal": _OFFICER, "disposition": "ESCALATED",
               "note": "Same beneficiary as case 40077; asked the branch for the customer file.",
               "correction": None}}
_OTHER_CASE: dict[str, Any] = {**_CASE, "case_id": 40077, "subject": "account:0a9d4b...7e", "links": [41210],
                               "alert_count": 5, "open_alert_count": 1, "last_alert_seq": 41544}
_EVENT: dict[str, Any] = {
    "seq": 41990, "recorded_at": "2026-12-03T09:58:40.310022Z", "alert_seq": 41873, "action": "release",
    "applied": True, "why": None, "principal": _OFFICER,
    "rationale": "The list hit is a namesake: date of birth and nationality differ.", "assignee": None,
    "disposition": None, "link": None, "report_sha256": None, "verdict": None}


def _ok(status: int, example: Any) -> dict[int | str, dict[str, Any]]:
    return {status: {"content": {"application/json": {"example": example}}}}


_NOT_FOUND = {404: "No alert at this seq"}
_READ_NOTES = {503: "The ledger cannot seal the read (a `case_read` record): nothing is shown. Retry after "
                    "`Retry-After` seconds"}
_ACT_NOTES = {404: "No alert at this seq", 409: "The action does not apply in the alert's state (it is "
              "closed, a proposal awaits a second officer, the payment is decided) or another officer's "
              "event came first (then it is sealed, and listed as not applied)",
              403: "The roles may not act on alerts, or (`four_eyes`) the officer approving is the one who "
                   "proposed", 422: "Refused input: `errors` names the field (`action`, `rationale`, "
                                    "`assignee`, `disposition`, `verdict`, `link`); nothing was sealed"}


# -- alerts -------------------------------------------------------------------------------------


@router.get("/v1/alerts", summary="The alert queue: one keyset page of a view (the read is sealed)",
            responses=_ok(200, {"items": [_ALERT], "next_cursor": "YTEuLS40MTg3My4zYTlmMGMxYg"})
            | problems(422, 503, notes=_READ_NOTES))
async def list_alerts(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("alerts.list")],
    view: str = Query("open", json_schema_extra={"enum": list(VIEWS)},
                      description="open (default), mine (open, assigned to the caller's certificate), "
                                  "unassigned (open), overdue (open, review due before today, UTC, by the "
                                  "ledger's clock; most overdue first), closed, qa (closed, drawn for "
                                  "quality assurance and not reviewed yet), all"),
    outcome: str | None = Query(None, description="the decision that opened it: ALLOW (an account alert "
                                                  "alone), REVIEW, HOLD, BLOCK"),
    rule: str | None = Query(None, description="a rule id that fired on the decision"),
    case_id: int | None = Query(None, ge=0, description="only the alerts of this case"),
    order: str = Query("newest", json_schema_extra={"enum": ["newest", "oldest"]},
                       description="newest (default) or oldest first; not for overdue"),
    limit: int = Query(50, ge=1, le=MAX_LIMIT),
    cursor: str | None = Query(None, description="next_cursor of the previous page (of the same query)"),
) -> dict[str, Any]:
    def page() -> dict[str, Any]:
        f = AlertFilter(view=view, outcome=outcome, rule=rule, case_id=case_id, me=_me(view, caller),
                        order=order, limit=limit, cursor=cursor)
        today = _today(rt)
        got = alert_page(rt.engine, f, today=today)
        _seal_reads(rt, caller, (a.case_id for a in got.items), "queue")
        return {"items": [alert_json(a, today) for a in got.items], "next_cursor": got.next_cursor}

    return await _call(page)


@router.post("/v1/alerts/actions", summary="One action on many alerts (assign), each sealed in turn",
             openapi_extra=json_body(BulkAssignIn, examples.ALERT_BULK_ASSIGN),
             responses=_ok(200, {"results": [{"alert_seq": 41873, "status": 201, "receipt": _RECEIPT},
                                             {"alert_seq": 41880, "status": 409, "problem": {
                                                 "type": "urn:sealtrail:problem:case_conflict",
                                                 "title": "Conflict", "status": 409,
                                                 "detail": "action: cannot assign alert 41880 (closed): "
                                                           "it is closed",
                                                 "errors": [{"field": "action", "message": "cannot assign "
                                                             "alert 41880 (closed): it is closed"}]}}],
                                 "applied": 1, "refused": 1})
             | problems(422, 503, notes={422: "Refused input (the whole request): nothing was sealed"}))
async def bulk_act(request: Request, rt: RuntimeDep,
                   caller: Annotated[Caller, allow("alerts.act")]) -> dict[str, Any]:
    body: BulkAssignIn = await json_model(request, BulkAssignIn, optional=False)
    assignee = _assignee(body.assignee, caller)

    def each() -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        stopped: str | None = None
        for seq in body.alerts:
            if stopped is not None:
                results.append({"alert_seq": seq, "status": 503, "problem": _problem_json(
                    503, "ledger_unavailable", f"not attempted: {stopped}", "alerts")})
                continue
            try:
                r = act(rt.ledger, caller.principal, body.action, alert=seq, rationale=body.rationale,
                        assignee=assignee)
            except CaseError as exc:
                status, kind, _ = audit_problem(exc)
                results.append({"alert_seq": seq, "status": status,
                                "problem": _problem_json(status, kind, str(exc), exc.field, exc.message)})
            except LedgerUnavailableError as exc:  # the ones before stay sealed; say which were not
                stopped = f"the ledger could not commit the action on alert {seq}: {exc}"
                results.append({"alert_seq": seq, "status": 503, "problem": _problem_json(
                    503, "ledger_unavailable", stopped, "alerts")})
            else:
                results.append({"alert_seq": seq, "status": 201, "receipt": _receipt(r)})
        applied = sum(r["status"] == 201 for r in results)
        return {"results": results, "applied": applied, "refused": len(results) - applied}

    return await run_in_threadpool(each)


def _alert_doc(rt: Runtime, a: Any) -> dict[str, Any]:
    """One alert as ``GET /v1/alerts/{seq}`` and an action's answer state it: the view's row and the
    sanctions entries its decision's screening met (the list's side, as the record seals it)."""
    detail = get_trace(rt.engine, a.trace_id)
    hits = sealed_hits(None if detail is None else detail.body)
    return {**alert_json(a, _today(rt)), "screening_hits": list(hits)}


@router.get("/v1/alerts/{seq}", summary="One alert (the read is sealed), with the sanctions entries its "
                                        "decision's screening met",
            responses=_ok(200, {**_ALERT, "screening_hits": [_HIT]})
            | problems(404, 503, notes={**_READ_NOTES, **_NOT_FOUND}))
async def get_one_alert(rt: RuntimeDep, caller: Annotated[Caller, allow("alerts.get")],
                        seq: int = Path(ge=0, description="the seq of the decision that opened it")
                        ) -> dict[str, Any]:
    def one() -> dict[str, Any]:
        a = get_alert(rt.engine, seq)
        _seal_reads(rt, caller, [a.case_id], "case")
        return _alert_doc(rt, a)

    return await _call(one)


@router.post("/v1/alerts/{seq}/actions", status_code=201,
             summary="Act on an alert: a sealed case event (assign, start_review, escalate, close, reopen, "
                     "comment, release, reject, approve, refuse, qa_review)",
             openapi_extra=json_body(AlertActionIn, examples.ALERT_ACTION),
             responses=_ok(201, {**_RECEIPT, "alert": {**_ALERT, "screening_hits": []}})
             | problems(404, 409, 422, 503, notes=_ACT_NOTES))
async def act_on_alert(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("alerts.act")],
                       seq: int = Path(ge=0, description="the seq of the decision that opened it")
                       ) -> dict[str, Any]:
    body: AlertActionIn = await json_model(request, AlertActionIn, optional=False)
    assignee = _assignee(body.assignee, caller)

    def run() -> dict[str, Any]:
        r = act(rt.ledger, caller.principal, body.action, alert=seq, rationale=body.rationale,
                assignee=assignee, disposition=body.disposition, verdict=body.verdict)
        _seal_reads(rt, caller, [r.case_id], "case")  # the answer shows the alert's state: a read
        return {**_receipt(r), "alert": _alert_doc(rt, get_alert(rt.engine, seq))}

    return await _call(run)


# -- cases --------------------------------------------------------------------------------------


@router.get("/v1/cases", summary="Cases, newest first, by keyset pages (the read is sealed)",
            responses=_ok(200, {"items": [_CASE], "next_cursor": "YzEuNDEyMTAuOWMwZDFlMmY"})
            | problems(422, 503, notes=_READ_NOTES))
async def list_cases(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("cases.list")],
    view: str = Query("open", json_schema_extra={"enum": list(CASE_VIEWS)},
                      description="open (default: an alert of it is open), mine (open, the case assigned to "
                                  "the caller), unassigned (open, the case assigned to nobody), closed, all"),
    limit: int = Query(50, ge=1, le=MAX_LIMIT),
    cursor: str | None = Query(None, description="next_cursor of the previous page (of the same query)"),
) -> dict[str, Any]:
    def page() -> dict[str, Any]:
        f = CaseFilter(view=view, me=_me(view, caller), limit=limit, cursor=cursor)
        got = case_page(rt.engine, f)
        _seal_reads(rt, caller, (c.case_id for c in got.items), "queue")
        return {"items": [case_json(c) for c in got.items], "next_cursor": got.next_cursor}

    return await _call(page)


@router.get("/v1/cases/{case_id}", summary="A case, its alerts and every sealed event about it (the read is "
                                            "sealed)",
            responses=_ok(200, {**_CASE, "alerts": [{**_ALERT, "annotations": [_NOTE]}], "events": [_EVENT],
                                "counterparty_cases": [_OTHER_CASE]})
            | problems(404, 503, notes={**_READ_NOTES, 404: "No such case"}))
async def get_case(rt: RuntimeDep, caller: Annotated[Caller, allow("cases.get")],
                   case_id: int = Path(ge=0, description="the case id (the seq of its first alert)")
                   ) -> dict[str, Any]:
    def one() -> dict[str, Any]:
        d = case_detail(rt.engine, case_id)
        others = counterparty_cases(rt.engine, case_id)
        # the counterparties' cases are shown too: read as a page of the queue is
        record_reads(rt.ledger, caller.principal, [{"case": case_id, "what": "case"}]
                     + [{"case": c.case_id, "what": "queue"} for c in others])
        today = _today(rt)
        return {**case_json(d.case), "alerts": [alert_json(a, today) for a in d.alerts],
                "events": [event_json(e) for e in d.events],
                "counterparty_cases": [case_json(c) for c in others]}

    return await _call(one)


@router.post("/v1/cases/{case_id}/actions", status_code=201,
             summary="Act on a case: a sealed case event (assign, comment, close, link, approve, refuse)",
             openapi_extra=json_body(CaseActionIn, examples.CASE_ACTION),
             responses=_ok(201, {**_RECEIPT, "action": "link", "alert_seq": None, "case": _CASE})
             | problems(404, 409, 422, 503, notes={**_ACT_NOTES, 404: "No such case"}))
async def act_on_case(request: Request, rt: RuntimeDep, caller: Annotated[Caller, allow("cases.act")],
                      case_id: int = Path(ge=0, description="the case id (the seq of its first alert)")
                      ) -> dict[str, Any]:
    body: CaseActionIn = await json_model(request, CaseActionIn, optional=False)
    if body.action == "file_report":
        why = f"a report is filed with POST /v1/cases/{case_id}/reports, which drafts and validates it first"
        raise Problem(422, "invalid_request", f"action: {why}", [{"field": "action", "message": why}])
    assignee = _assignee(body.assignee, caller)

    def run() -> dict[str, Any]:
        r = act(rt.ledger, caller.principal, body.action, case=case_id, rationale=body.rationale,
                assignee=assignee, disposition=body.disposition, link=body.link)
        _seal_reads(rt, caller, [case_id], "case")  # the answer shows the case's state: a read
        return {**_receipt(r), "case": case_json(case_detail(rt.engine, case_id).case)}

    return await _call(run)


# -- outcomes -----------------------------------------------------------------------------------


@router.get("/v1/outcomes", summary="Held payments released or rejected since a cursor, in ledger order",
            responses=_ok(200, {"items": [{"seq": 41992, "trace_id": "019ae3c4-1f52-7b3e-9c55-6c1d2b7f0a11",
                                           "outcome": "RELEASED", "alert_seq": 41873,
                                           "recorded_at": "2026-12-03T10:05:09.118230Z"}],
                                "next_cursor": 41992}) | problems(422))
async def list_outcomes(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("outcomes.list")],
    after: int = Query(0, ge=0, description="the next_cursor of the previous poll (0: from the beginning)"),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
) -> dict[str, Any]:
    # A scorer reads the outcomes of its own decisions only: those its certificate asked for.
    mine = None if caller.roles & ALL_OUTCOMES_ROLES else caller.principal.fingerprint_sha256
    got = await _call(outcomes_since, rt.engine, after, scorer_fp=mine, limit=limit)
    return {"items": got.items, "next_cursor": got.next_cursor}


# -- who read a case ----------------------------------------------------------------------------

_READ: dict[str, Any] = {
    "seq": 42031, "recorded_at": "2026-12-03T10:07:52.610334Z",
    "principal": {**_OFFICER, "sans": ["URI:spiffe://bank.example/role/officer"],
                  "issuer": "CN=Example Bank Issuing CA,O=Example Bank", "serial": "4f1a9c"},
    "reads": [{"case": 41210, "what": "case"}]}


@router.get("/v1/case-reads", summary="Who read which case or report, newest first (regulators: tipping-off)",
            responses=_ok(200, {"items": [_READ], "next_before": 42031}) | problems(422))
async def list_case_reads(
    rt: RuntimeDep,
    caller: Annotated[Caller, allow("cases.reads")],
    case_id: int | None = Query(None, ge=0, description="only the reads of this case (its id); a record that "
                                                        "read several cases lists only this one"),
    before: int | None = Query(None, ge=0, description="next_before of the previous page: only records "
                                                       "sealed before this seq"),
    limit: int = Query(100, ge=1, le=MAX_READS, description="records per page"),
) -> dict[str, Any]:
    got = await _call(list_reads, rt.engine, case_id=case_id, before=before, limit=limit)
    return {"items": [read_json(r) for r in got.items], "next_before": got.next_before}
