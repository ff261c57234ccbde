"""What a bundle cut for one case holds (``sealtrail.bundle/5``), read from the sealed records and
checked, before anything is written, by the verifier's own case check.

``select_case(conn, case_id)`` reads, in the caller's snapshot, with the alert and case view
current (``audit.cases.store.catch_up`` first) to its watermark ``W``:

- the case's row and its alerts' rows (``audit_cases``, ``audit_alerts``), and the decision that
  opened each alert;
- the ``alert_policy`` record each alert was dated under (none for the built-in default);
- every sealed ``case_event`` record of seqs ``[case_id, W]``, read from the entries themselves
  (never from ``audit_case_events``): those whose body is about the case (it targets the case or
  one of its alerts, or links another case to it: ``audit.bundle.cases.about_case``) whole, with
  their payloads (a filed report's bytes); every other one as its seq and leaf hash only, so that
  the bundle proves them without disclosing another case's rationale;
- the ``ledger.legal_hold`` records whose range holds one of those records' seqs, and their
  releases; the annotations of the case's decisions.

Then the case check the verifier runs (``audit.bundle.cases.CaseCheck``) is run over exactly what
will be written, with ``case/case.json`` stated from the view's rows: the fold over the selected
records must give the view's rows, and every event the view puts on the case must be one the
selection found by its sealed body. Any difference refuses the export (``DerivedRowError`` naming
the table and seq: the view or the ledger is damaged; run ``sealtrail ledger verify``), so a
bundle the verifier would fail is never written.

Limits: the case's decisions are the alerts the view lists, each re-derived from its sealed
record (a decision record says nothing about the case it joined, and no sealed summary names a
case); an alert row deleted from the view together with its case row's count is ``ledger
verify``'s to find, not this check's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, select

from audit.bundle.case_doc import ALERT_FIELDS, CASE_FIELDS, EVENT_FIELDS, OUTCOME_FIELDS, CaseDoc, project
from audit.bundle.cases import CaseCheck, CaseReport, about_case
from audit.bundle.records import CASE_EVENT, Findings
from audit.cases.fold import EventRow, OutcomeRow
from audit.cases.store import alert_from_row, case_from_row
from audit.cases.tables import alerts, case_events, cases, payment_outcomes, watermark
from audit.decide.record import DECISION_KIND
from audit.errors import BundleError, DerivedRowError, ExportFilterError, ExportUnavailableError
from audit.export.select import EntryRow, annotation_index
from audit.export.spool import payload_rows
from ledger import store

__all__ = ["CasePayload", "CaseSelection", "select_case"]

_COLS = "seq, kind, record, leaf_hash, chain_hash, trace_id"
_TABLES = {"case": "audit_cases", "alerts": "audit_alerts", "events": "audit_case_events",
           "outcomes": "audit_payment_outcomes"}
_KIND_TABLES = {"case.completeness": "audit_case_events", "case.decision": "audit_alerts",
                "case.policy": "audit_alerts"}  # the view table a finding of that kind points at
HOLD_KIND = "ledger.legal_hold"


@dataclass(frozen=True)
class CasePayload:
    """A payload a selected record names: its bytes, or the purge that emptied it."""

    sha256: str
    data: bytes | None
    purge_seq: int | None


@dataclass
class CaseSelection:
    """Everything a case bundle carries but its context (rules, models, purges)."""

    case_id: int
    upto: int  # W: the view's watermark, the end of the range searched
    rows: list[EntryRow]  # decisions, annotations, policies, events, holds: ascending seq
    decisions: list[EntryRow]
    annotations: dict[int, int]  # decision seq -> annotations carried
    payloads: dict[str, CasePayload]  # by SHA-256, every payload a row names
    doc: CaseDoc
    report: CaseReport
    counts: dict[str, int] = field(default_factory=dict)


def _entries(conn: Connection, where: str, args: tuple[Any, ...]) -> list[EntryRow]:
    return [EntryRow(int(s), str(k), bytes(r), bytes(lh), bytes(ch), str(t)) for s, k, r, lh, ch, t in
            conn.exec_driver_sql(f"SELECT {_COLS} FROM ledger_entries WHERE {where} ORDER BY seq", args)]


def _at(conn: Connection, seqs: Iterable[int]) -> dict[int, EntryRow]:
    p = store.param(conn)
    ordered = sorted(set(seqs))
    out: dict[int, EntryRow] = {}
    for i in range(0, len(ordered), 500):
        chunk = tuple(ordered[i:i + 500])
        out.update((r.seq, r) for r in _entries(conn, f"seq IN ({', '.join([p] * len(chunk))})", chunk))
    return out


def _watermark(conn: Connection) -> int:
    got = conn.execute(select(watermark.c.seq).where(watermark.c.id == 1)).scalar()
    if got is None:
        raise ExportUnavailableError("audit_case_watermark has no row: run the migrations (sealtrail init)")
    return int(got)


def _view(conn: Connection, case_id: int, upto: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The case's row and its alerts' rows as the view holds them; refused if there is no such case."""
    row = conn.execute(select(cases).where(cases.c.case_id == case_id)).first()
    if row is None:
        raise ExportFilterError("case_id", f"no case {case_id} (the alert and case view is current to seq "
                                           f"{upto})")
    members = [project(asdict(alert_from_row(r)), ALERT_FIELDS) for r in conn.execute(
        select(alerts).where(alerts.c.case_id == case_id).order_by(alerts.c.seq))]
    return project(asdict(case_from_row(row)), CASE_FIELDS), members


def _payloads(conn: Connection, rows: list[EntryRow]) -> dict[str, CasePayload]:
    named: dict[str, int] = {}
    for r in rows:
        sha = orjson.loads(r.record).get("payload_sha256")
        if sha is not None:
            named.setdefault(str(sha), r.seq)
    stored = payload_rows(conn, sorted(named))
    out: dict[str, CasePayload] = {}
    for sha, seq in named.items():
        got = stored.get(sha)
        if got is None:
            raise ExportUnavailableError(f"entry {seq}: payload {sha} has no row in the payload store "
                                         "(ledger damage; run 'sealtrail ledger verify')")
        data, pseq = got
        if data is None and pseq is None:
            raise ExportUnavailableError(f"entry {seq}: payload {sha} is empty without a purge record "
                                         "(ledger damage)")
        out[sha] = CasePayload(sha, data, pseq)
    return out


def _holds(conn: Connection, upto: int, covered: set[int]) -> list[EntryRow]:
    """The legal holds whose range holds a seq of ``covered`` (the records with a payload), placed
    by ``upto``, and the releases of those holds by then."""
    p = store.param(conn)
    rows = _entries(conn, f"kind = {p} AND seq <= {p}", (HOLD_KIND, upto))
    ids: set[str] = set()
    keep: list[EntryRow] = []
    for r in rows:
        body = orjson.loads(r.record).get("record") or {}
        hold = str(body.get("hold_id"))
        if body.get("action") == "place" and any(
                int(body.get("seq_from", -1)) <= s <= int(body.get("seq_to", -2)) for s in covered):
            ids.add(hold)
            keep.append(r)
        elif body.get("action") == "release" and hold in ids:
            keep.append(r)
    return keep


def _refuse(findings: list[BundleError]) -> DerivedRowError:
    """The case check's findings on what was about to be written, as the refusal to write it."""
    rows: list[tuple[str, int, str]] = []
    for f in findings:
        if f.kind == "case.state":
            table, _, detail = f.detail.removeprefix("case.json ").partition(": ")
            rows.append((_TABLES.get(table, table), f.seq or 0, f"{detail} (the view states it, the sealed "
                                                               "records give otherwise)"))
        else:
            table = next((t for k, t in _KIND_TABLES.items() if f.kind == k or f.kind.startswith(k + ".")),
                         f.kind)
            rows.append((table, f.seq or 0, f.detail))
    table, seq, detail = rows[0]
    return DerivedRowError(table, seq, f"{detail} (run 'sealtrail ledger verify')", findings=rows[:50],
                           total=len(rows))


def select_case(conn: Connection, case_id: int) -> CaseSelection:
    """The selection of case ``case_id`` in ``conn``'s snapshot, checked (see the module's
    docstring). ``ExportFilterError`` (field ``case_id``) when there is no such case;
    ``DerivedRowError`` when the view disagrees with the sealed records."""
    p = store.param(conn)
    upto = _watermark(conn)
    case_row, alert_rows = _view(conn, case_id, upto)
    alert_ids = {int(a["seq"]): str(a["trace_id"]) for a in alert_rows}
    at = _at(conn, alert_ids)
    decisions = []
    for seq in sorted(alert_ids):
        row = at.get(seq)
        if row is None or row.kind != DECISION_KIND:
            raise DerivedRowError("audit_alerts", seq, "the view lists an alert of case "
                                  f"{case_id} at a seq that holds no decision record (run 'sealtrail ledger "
                                  "verify')")
        decisions.append(row)
    policy_seqs = {int(a["policy_seq"]) for a in alert_rows} - {0}
    policies = list(_at(conn, policy_seqs).values())
    events: list[EntryRow] = []
    withheld: list[tuple[int, bytes]] = []
    for row in _entries(conn, f"kind = {p} AND seq >= {p} AND seq <= {p}", (CASE_EVENT, case_id, upto)):
        body = orjson.loads(row.record).get("record")
        if isinstance(body, dict) and about_case(body, case_id, alert_ids):
            events.append(row)
        else:
            withheld.append((row.seq, row.leaf_hash))
    chosen = {r.seq for r in events}
    stated_events = []
    for r in conn.execute(select(case_events).where(case_events.c.seq >= case_id, case_events.c.seq <= upto)
                          .order_by(case_events.c.seq)):
        if r.seq in chosen:
            stated_events.append(project(asdict(EventRow(int(r.seq), r.case_id, r.alert_seq, r.action,
                                                         r.actor_fp, r.recorded_at, bool(r.applied), r.why)),
                                         EVENT_FIELDS))
        elif r.case_id == case_id:
            raise DerivedRowError("audit_case_events", int(r.seq), f"the view puts this event on case "
                                  f"{case_id}; its sealed body names neither the case nor one of its alerts "
                                  "(run 'sealtrail ledger verify')")
    outcomes = [project(asdict(OutcomeRow(int(r.seq), int(r.alert_seq), r.trace_id, r.scorer_fp, r.outcome,
                                          r.recorded_at)), OUTCOME_FIELDS)
                for r in conn.execute(select(payment_outcomes).where(payment_outcomes.c.alert_seq.in_(
                    sorted(alert_ids))).order_by(payment_outcomes.c.seq))] if alert_ids else []
    notes_of = annotation_index(conn, min(alert_ids), max(alert_ids)) if alert_ids else {}
    note_seqs = {s: t for t, ss in notes_of.items() if t in alert_ids for s in ss}
    annotations = list(_at(conn, note_seqs).values())
    with_payload = {r.seq for r in (*decisions, *events)
                    if orjson.loads(r.record).get("payload_sha256") is not None}
    holds = _holds(conn, upto, with_payload)
    rows = sorted([*decisions, *annotations, *policies, *events, *holds], key=lambda r: r.seq)
    payloads = _payloads(conn, rows)
    doc = CaseDoc(case_id=case_id, from_seq=case_id, to_seq=upto, case=case_row, alerts=tuple(alert_rows),
                  events=tuple(stated_events), outcomes=tuple(outcomes),
                  policies=tuple(sorted(r.seq for r in policies)), holds=tuple(r.seq for r in holds),
                  withheld=tuple(withheld))
    report = _check(doc, rows, payloads)
    counted: dict[int, int] = {}
    for t in note_seqs.values():
        counted[t] = counted.get(t, 0) + 1
    return CaseSelection(case_id, upto, rows, decisions, counted, payloads, doc, report,
                         {"case_events": len(events), "policies": len(policies), "holds": len(holds),
                          "annotations": len(annotations), "withheld": len(withheld)})


def _check(doc: CaseDoc, rows: list[EntryRow], payloads: dict[str, CasePayload]) -> CaseReport:
    """The verifier's case check over what the bundle will hold; refused on any finding."""
    found = Findings(1000)
    check = CaseCheck(doc, found)
    seen: set[str] = set()
    for r in rows:
        env = orjson.loads(r.record)
        check.line(r.seq)
        if r.kind == DECISION_KIND:
            check.decision(r.seq, r.trace_id, env, r.leaf_hash)
        else:
            check.record(r.seq, r.trace_id, r.kind, env, r.leaf_hash)
        sha = env.get("payload_sha256")
        if r.kind == CASE_EVENT and sha is not None and sha not in seen:
            seen.add(sha)
            got = payloads[sha]
            check.payload(sha, got.data, got.purge_seq)
    report = check.finish()
    if found.items:
        raise _refuse(found.items)
    return report
