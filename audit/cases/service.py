"""Officers' actions on alerts and cases, sealed: check, seal, fold.

:func:`act` takes one action on one alert or case for a principal. It brings the view current,
tries the action on it (the same :func:`audit.cases.state.step` the fold runs), seals the
``case_event`` record only if it applies, and folds it in; the caller learns the sealed
record's seq. Two officers acting at once on the same alert are both sealed, in log order: the
second event may no longer apply when the fold reaches it, and then :func:`act` raises
``CaseConflictError`` after sealing (the attempt is evidence too; the view lists it as not
applied). :func:`set_policy` seals a new deadline policy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from audit.cases.events import EVENT_KIND, event_body, policy_body
from audit.cases.fold import CaseFold
from audit.cases.policy import POLICY_KIND, DeadlinePolicy
from audit.cases.state import is_seq
from audit.cases.store import StoredView, catch_up
from audit.cases.tables import alerts, case_events, cases
from audit.decide.principal import Principal
from audit.errors import AnnotationError, CaseConflictError, CaseError, CaseNotFoundError
from audit.officer_words import principal_json
from ledger import Record, store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import format_time

__all__ = ["ActionReceipt", "act", "set_policy"]


@dataclass(frozen=True)
class ActionReceipt:
    """The sealed event: its seq, trace id, leaf hash and time, and what it acted on."""

    seq: int
    trace_id: str
    leaf_hash: str
    recorded_at: str
    action: str
    alert_seq: int | None
    case_id: int


def _principal(p: Principal | Mapping[str, Any], field: str = "principal") -> dict[str, Any]:
    """As case events seal a principal: with its key's SHA-256 where known (four-eyes)."""
    try:
        return principal_json(p, spki=True)
    except AnnotationError as exc:
        raise CaseError(field, exc.message) from None


def _alert_target(conn: Connection, alert: int | str) -> tuple[dict[str, Any], int]:
    if not is_seq(alert) and not isinstance(alert, str):
        raise CaseError("alert", "must be an alert's seq or its decision's trace id")
    col = alerts.c.seq if type(alert) is int else alerts.c.trace_id
    key = alert if type(alert) is int else str(alert).lower()
    row = conn.execute(select(alerts.c.seq, alerts.c.trace_id, alerts.c.case_id).where(col == key)).first()
    if row is None:
        raise CaseNotFoundError("alert", f"no alert {alert}")
    e = store.entries
    leaf = conn.execute(select(e.c.leaf_hash).where(e.c.seq == row.seq)).scalar_one()
    return {"alert": {"trace_id": row.trace_id, "seq": int(row.seq), "leaf_hash": bytes(leaf).hex()}}, int(
        row.case_id)


def act(ledger: Ledger, principal: Principal | Mapping[str, Any], action: str, *,
        alert: int | str | None = None, case: int | None = None, rationale: str | None = None,
        assignee: Principal | Mapping[str, Any] | None = None, disposition: str | None = None,
        link: int | None = None, report: bytes | None = None, amends: str | None = None,
        verdict: str | None = None) -> ActionReceipt:
    """Take ``action`` on ``alert`` (its seq or its decision's trace id) or on ``case`` (its id)
    for ``principal``; durable and folded into the view when this returns. ``file_report`` seals
    ``report`` (the report's bytes) as the record's payload and its SHA-256 in the event;
    ``amends`` names the report it replaces. Nothing is sealed if
    the target is unknown (``CaseNotFoundError``), an argument is refused (``CaseError``), or the
    action does not apply now (``CaseConflictError``, ``CaseFourEyesError``)."""
    if (alert is None) == (case is None):
        raise CaseError("target", "name exactly one alert or one case")
    catch_up(ledger.engine)
    who = _principal(principal)
    with ledger.engine.connect() as conn:
        if alert is not None:
            target, case_id = _alert_target(conn, alert)
        else:
            if not is_seq(case):
                raise CaseError("case", "must be a case id")
            if conn.execute(select(cases.c.case_id).where(cases.c.case_id == case)).first() is None:
                raise CaseNotFoundError("case", f"no case {case}")
            assert case is not None
            target, case_id = {"case": case}, case
        body = event_body(target, action, who, rationale=rationale,
                          assignee=None if assignee is None else _principal(assignee, "assignee"),
                          disposition=disposition, link=link, amends=amends, verdict=verdict,
                          report=None if report is None else hashlib.sha256(report).hexdigest())
        tip = int(conn.execute(select(store.entries.c.seq).order_by(store.entries.c.seq.desc()).limit(1))
                  .scalar() or 0)
        trial = CaseFold(StoredView(conn))
        trial.last_seq = tip
        trial.apply([(tip + 1, EVENT_KIND, {"recorded_at": format_time(ledger.clock()), "trace_id": "",
                                            "record": body, "payload_sha256": body["report"]})])
        if trial.last_error is not None:
            raise trial.last_error
    (r,) = ledger.append_many([Record.from_canonical_body(EVENT_KIND, canonical_bytes(body), payload=report)])
    catch_up(ledger.engine, upto=r.seq)
    with ledger.engine.connect() as conn:
        got = conn.execute(select(case_events.c.applied, case_events.c.why)
                           .where(case_events.c.seq == r.seq)).first()
    if got is not None and not got.applied:
        raise CaseConflictError("action", f"sealed at seq {r.seq} but another event came first: {got.why}")
    return ActionReceipt(r.seq, r.trace_id, r.leaf_hash.hex(), r.recorded_at, action,
                         target["alert"]["seq"] if "alert" in target else None, case_id)


def set_policy(ledger: Ledger, policy: DeadlinePolicy, principal: Principal | Mapping[str, Any],
               rationale: str) -> int:
    """Seal ``policy`` as the deadline policy of alerts opened from now on; its seq."""
    body = policy_body(policy, _principal(principal), rationale)
    (r,) = ledger.append_many([Record.from_canonical_body(POLICY_KIND, canonical_bytes(body))])
    return r.seq
