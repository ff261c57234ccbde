"""Rebuild the account-risk state from the ledger: every decision record, in seq order.

A ``sealtrail.decision/2`` or ``/3`` record states its keyed accounts and the policy it was decided under;
its points follow from its recorded score, decision and fail_safe. Applying each record in seq
order (``AccountRiskState.apply_record``) gives the state the pipeline held after sealing it,
bit for bit, without reading a payload: erasure and retention do not change it. Records of
version 1 carry no account risk and add nothing (account risk starts with the first version 2
record). Where a record states other values than the rebuild computes (a decider whose state was
not the ledger's), the rebuild keeps its own and counts the record in ``mismatched``.

There is no window to start from: risk is a sum that only decays, so the whole log is read (the
bodies only, a page at a time).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine

from audit.decide.account_risk import (
    HOUR_US,
    AccountRisk,
    AccountRiskError,
    AccountRiskPolicy,
    AccountRiskState,
    RiskEvent,
)
from audit.decide.record import DECISION_KIND, RISK_SCHEMAS, body_score
from audit.state.delta import Delta
from audit.state.replay import entry_pages
from ledger import store

__all__ = ["AccountRiskReport", "SealedEvent", "apply_records", "rebuild_account_risk", "risk_bodies",
           "risk_fields", "risk_items"]

log = logging.getLogger(__name__)
_PAGE = 2000
_READ = ("schema", "account_risk", "at", "score", "score_ppm", "decision", "fail_safe")  # all it reads


def risk_fields(body: Any) -> Any:
    """Of a decision body, the fields ``apply_records`` reads (a body that is no object as it is).
    A caller holding many bodies before it applies them (a decider's catch-up) keeps these alone:
    a whole parsed record is some hundred objects the garbage collector must walk while it is held."""
    if not isinstance(body, dict):
        return body
    return {k: body[k] for k in _READ if k in body}


@dataclass(frozen=True)
class AccountRiskReport:
    """What a rebuild read: decisions applied, version 1 ones (no account risk), records whose
    ``account_risk`` could not be read, and those whose stated values differ from the rebuild's."""

    applied: int
    without_risk: int
    unreadable: int
    mismatched: int
    first_mismatch_seq: int | None
    to_seq: int  # exclusive: the ledger size read up to
    accounts: int  # accounts held after the rebuild


@dataclass(frozen=True)
class SealedEvent:
    """A decision's account-risk event as its commit's state delta states it (version 3): applied
    as is, with nothing to compare (the delta states inputs, not the risk they gave)."""

    policy: AccountRiskPolicy
    account_key_id: str
    event: RiskEvent


def apply_records(state: AccountRiskState, records: Iterable[tuple[int, dict[str, Any] | SealedEvent]],
                  to_seq: int = 0) -> AccountRiskReport:
    """Apply decision bodies ``(seq, body)`` (or the events their deltas state: ``risk_items``) in
    seq order to ``state`` (pure: no database)."""
    applied = without = unreadable = mismatched = 0
    first: int | None = None
    last = to_seq
    for seq, body in records:
        last = max(last, seq + 1)
        if isinstance(body, SealedEvent):
            try:
                state.apply_event(body.policy, body.account_key_id, body.event)
            except AccountRiskError as exc:
                unreadable += 1
                log.warning("account risk: decision at seq %d not applied: %s", seq, exc)
                continue
            applied += 1
            continue
        if not isinstance(body, dict) or body.get("schema") not in RISK_SCHEMAS:
            without += 1
            continue
        try:
            risk = AccountRisk.from_json(body.get("account_risk"))
            score = body_score(body)
            fs = body.get("fail_safe")
            got = state.apply_record(risk, str(body["at"]), score,
                                     str(body["decision"]), fs if isinstance(fs, str) else None)
        except (AccountRiskError, KeyError, TypeError, ValueError) as exc:
            unreadable += 1
            log.warning("account risk: decision at seq %d not applied: %s", seq, exc)
            continue
        applied += 1
        if got != risk:
            mismatched += 1
            first = seq if first is None else first
    return AccountRiskReport(applied, without, unreadable, mismatched, first, last, len(state))


def risk_bodies(engine: Engine, from_seq: int, to_seq: int | None = None) -> Iterator[tuple[int, Any]]:
    """``(seq, risk_fields(body))`` of each decision from ``from_seq`` on (to ``to_seq``), in seq
    order. Each envelope is parsed as it is reached and only those fields kept: a page of whole
    parsed records (some hundred objects each) kept the garbage collector walking, a quarter of a
    rebuild's time."""
    loads = orjson.loads
    for page in entry_pages(engine, DECISION_KIND, from_seq, to_seq):
        for s, raw in page:
            yield s, risk_fields(loads(raw)["record"])


def risk_items(engine: Engine, pages: Iterable[Sequence[Delta]], from_seq: int,
               to_seq: int) -> list[tuple[int, dict[str, Any] | SealedEvent]]:
    """What ``apply_records`` applies for the decisions at ``from_seq`` .. ``to_seq - 1``, given the
    state deltas sealed there (``pages``, in seq order, as ``audit.state.replay.delta_pages`` reads
    them): each version 3 delta's events as it states them, without reading a record; the
    account-risk fields of the records of every other decision (those of a version 1 or 2 delta,
    and any no delta speaks for), read from the ledger."""
    out: list[tuple[int, dict[str, Any] | SealedEvent]] = []
    pos = from_seq  # every decision before pos is accounted for
    after = from_seq - 1  # the seq after which the next delta's decisions may begin (see replay.catch_up)
    for page in pages:
        for d in page:
            part = d.account_risk
            if part is None:  # no events stated: its decisions (and any before them) are read as records
                continue
            if d.first_seq > after + 1 and d.first_seq > pos:
                out.extend(risk_bodies(engine, pos, d.first_seq))
            skip = max(0, pos - d.first_seq)
            policy, kid = part.policy, part.account_key_id
            for i in range(skip, len(part.entries)):
                o, b, points = part.entries[i]
                hour = d.entries[i][2] // HOUR_US
                out.append((d.first_seq + i, SealedEvent(policy, kid, RiskEvent(hour, o, b, points))))
            pos = max(pos, d.first_seq + len(d.entries))
            after = d.seq
    if to_seq > pos:
        out.extend(risk_bodies(engine, pos, to_seq))
    return out


def rebuild_account_risk(engine: Engine, policy: AccountRiskPolicy | None = None, *,
                         progress: Callable[[int], None] | None = None, size: int | None = None,
                         state: AccountRiskState | None = None, from_seq: int = 0,
                         ) -> tuple[AccountRiskState, AccountRiskReport]:
    """The account-risk state of the ledger at ``engine`` as it is now (or of its first ``size``
    entries), under ``policy`` for the decisions still to come (each sealed one is applied under
    the policy it states). With ``state`` (the state after the first ``from_seq`` entries: a
    sealed snapshot's), only the decisions from ``from_seq`` on are applied, to it."""
    if state is None:
        state = AccountRiskState(policy)
    if size is None:
        with engine.connect() as conn:
            size = store.tail(conn)[0]

    def counted() -> Iterator[tuple[int, dict[str, Any]]]:
        for n, item in enumerate(risk_bodies(engine, from_seq), 1):
            if item[0] >= size:
                return
            if progress is not None and n % _PAGE == 0:
                progress(n)
            yield item

    report = apply_records(state, counted(), max(size, from_seq))
    if report.mismatched:
        log.warning("account risk: %d decision(s) state other values than the rebuild (first at seq %d)",
                    report.mismatched, report.first_mismatch_seq)
    return state, report
