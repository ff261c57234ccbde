"""``sealtrail traces query|refusals|show``: find sealed decisions and refused requests, and read
one record in full (read-only).

``refusals`` pages newest first over the sealed ``refusal`` records (``audit.query.refusals``):
screening requests refused as unreadable, by time, principal and format; ``show`` reads one.

``query`` pages newest first over the trace index (``audit.query.traces.query_traces``) and prints
the cursor of the next page; ``show`` reads one trace from the ledger itself: the sealed
record, the payload's state (its bytes only with ``--payload``) and the annotations that refer
to it. A refused filter exits 1 naming its option; an unknown trace id exits 1. Times are
read as the console reads them (``common.parse_time``: ISO 8601, without an offset UTC).
``api.ops`` and the query layer are imported in the command bodies so that ``sealtrail --help``
does not load them.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer

from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, out, parse_time, settings

if TYPE_CHECKING:
    from audit.errors import QueryError
    from audit.query.traces import TraceDetail, TraceSummary

__all__ = ["detail_json", "summary_json", "traces_app"]

traces_app = typer.Typer(no_args_is_help=True, help="Find sealed decisions; show one in full.")

_OPTION = {"since": "--since", "until": "--until", "decision": "--decision", "rule_id": "--rule",
           "account": "--account", "principal": "--principal", "score_min": "--score-min",
           "score_max": "--score-max", "limit": "--limit", "cursor": "--cursor", "trace_id": "TRACE_ID",
           "format": "--format", "account_risk_min_milli": "--account-risk-min",
           "account_alert": "--account-alert"}


def _refused(exc: QueryError) -> NoReturn:
    name = _OPTION.get(exc.field, exc.field)
    raise CliError(f"{name}: {exc.message}", code=1, error="QueryError", field=name) from exc


def _score(text: str | None, field: str) -> float | None:
    from audit.errors import QueryError

    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise QueryError(field, f"{text!r} is not a number in [0, 1]") from None


def summary_json(t: TraceSummary) -> dict[str, Any]:
    """One item of ``traces query --json`` (the shape of ``GET /v1/traces``)."""
    return {"seq": t.seq, "trace_id": t.trace_id, "recorded_at": t.recorded_at, "event_at": t.event_at,
            "decision": t.decision, "score": t.score, "fail_safe": t.fail_safe, "fired": list(t.fired),
            "principal": {"subject": t.principal_subject, "fingerprint_sha256": t.principal_fp},
            "ruleset": f"{t.ruleset_id}@{t.ruleset_version}", "module_sha256": t.module_sha256,
            "account_risk_milli": t.account_risk_milli, "account_alerts": list(t.account_alerts)}


@traces_app.command("query")
def traces_query(
    since: Annotated[str | None, typer.Option(
        help="recorded_at >= SINCE (ISO 8601; without an offset: UTC)")] = None,
    until: Annotated[str | None, typer.Option(help="recorded_at < UNTIL (as --since)")] = None,
    decision: Annotated[str | None, typer.Option(help="ALLOW | REVIEW | HOLD | BLOCK")] = None,
    rule: Annotated[str | None, typer.Option(help="a rule id that fired")] = None,
    account: Annotated[str | None, typer.Option(help="originator or beneficiary account / IBAN")] = None,
    principal: Annotated[str | None, typer.Option(
        help="certificate SHA-256 fingerprint or RFC 4514 subject")] = None,
    score_min: Annotated[str | None, typer.Option("--score-min", help="score >= this, in [0, 1]")] = None,
    score_max: Annotated[str | None, typer.Option("--score-max", help="score <= this, in [0, 1]")] = None,
    limit: Annotated[int, typer.Option(help="page size, 1..1000")] = 100,
    cursor: Annotated[str | None, typer.Option(help="next cursor printed by the previous page")] = None,
    account_risk_min: Annotated[int | None, typer.Option(
        "--account-risk-min", help="the larger account risk (account_risk.max_milli) >= this, in "
                                   "milli-points (1000 = one point)")] = None,
    account_alert: Annotated[bool, typer.Option(
        "--account-alert", help="only decisions that raised an account alert")] = False,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sealed decisions matching every given filter, newest first, one page at a time."""
    from api import ops
    from audit.errors import QueryError
    from audit.query.traces import TraceFilter, query_traces

    try:
        f = TraceFilter(since=parse_time(since, "since"), until=parse_time(until, "until"),
                        decision=decision, rule_id=rule, account=account, principal=principal,
                        score_min=_score(score_min, "score_min"), score_max=_score(score_max, "score_max"),
                        limit=limit, cursor=cursor, account_risk_min_milli=account_risk_min,
                        account_alert=account_alert)
    except QueryError as exc:
        _refused(exc)
    engine = ops.engine_for(settings(db, keys))
    try:
        ops.require_schema(engine)
        page = query_traces(engine, f)
    finally:
        engine.dispose()
    doc = {"items": [summary_json(t) for t in page.items], "next_cursor": page.next_cursor}

    def human() -> None:
        for t in page.items:
            sc = "-" if t.score is None else f"{t.score:.4f}"
            fired = ",".join(t.fired) or "-"
            risk = "" if t.account_risk_milli is None else f"  risk {t.account_risk_milli / 1000:.3f}"
            if t.account_alerts:
                risk += f" ALERT {','.join(t.account_alerts)}"
            out.print(f"{t.seq:>8}  {t.trace_id}  {t.recorded_at}  {t.decision:<6}  {sc:>6}  "
                      f"{fired}  {t.principal_subject}{risk}", markup=False)
        out.print(f"{len(page.items)} trace(s); " + (f"next cursor: {page.next_cursor}"
                  if page.next_cursor else "last page"), markup=False)

    emit(doc, as_json, human)


@traces_app.command("refusals")
def traces_refusals(
    since: Annotated[str | None, typer.Option(
        help="recorded_at >= SINCE (ISO 8601; without an offset: UTC)")] = None,
    until: Annotated[str | None, typer.Option(help="recorded_at < UNTIL (as --since)")] = None,
    principal: Annotated[str | None, typer.Option(
        help="certificate SHA-256 fingerprint or RFC 4514 subject")] = None,
    fmt: Annotated[str | None, typer.Option("--format",
                                            help="json | mt | pacs008 | pacs009 | pacs004 | pain001")] = None,
    limit: Annotated[int, typer.Option(help="page size, 1..1000")] = 100,
    cursor: Annotated[str | None, typer.Option(help="next cursor printed by the previous page")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Refused screening requests (sealed refusal records) matching every given filter, newest first."""
    from api import ops
    from audit.errors import QueryError
    from audit.query.refusals import RefusalFilter, query_refusals, refusal_json

    try:
        f = RefusalFilter(since=parse_time(since, "since"), until=parse_time(until, "until"),
                          principal=principal, format=fmt, limit=limit, cursor=cursor)
    except QueryError as exc:
        _refused(exc)
    engine = ops.engine_for(settings(db, keys))
    try:
        ops.require_schema(engine)
        page = query_refusals(engine, f)
    finally:
        engine.dispose()
    doc = {"items": [refusal_json(r) for r in page.items], "next_cursor": page.next_cursor}

    def human() -> None:
        for r in page.items:
            b = r.body
            first = b.faults[0] if b.faults else {"field": None, "reason": b.reason}
            out.print(f"{r.seq:>8}  {r.trace_id}  {r.recorded_at}  {b.format:<7}  {b.kind:<20}  "
                      f"{b.fault_count:>4}  {first['field'] or 'body'}: {first['reason']}  "
                      f"{b.principal.get('subject', '')}", markup=False)
        out.print(f"{len(page.items)} refusal(s); " + (f"next cursor: {page.next_cursor}"
                  if page.next_cursor else "last page"), markup=False)

    emit(doc, as_json, human)


def detail_json(d: TraceDetail, with_payload: bool) -> dict[str, Any]:
    """``traces show --json``: the record as sealed, its payload's state, its annotations."""
    payload: dict[str, Any] = {"sha256": d.payload_sha256, "state": d.payload_state}
    if with_payload and d.payload is not None:
        try:
            payload |= {"encoding": "utf-8", "data": d.payload.decode("utf-8")}
        except UnicodeDecodeError:
            payload |= {"encoding": "base64", "data": base64.b64encode(d.payload).decode()}
    return {"seq": d.seq, "trace_id": d.trace_id, "kind": d.kind, "recorded_at": d.recorded_at,
            "leaf_hash": d.leaf_hash, "chain_hash": d.chain_hash, "record": orjson.loads(d.record),
            "record_bytes": base64.b64encode(d.record).decode(), "payload": payload,
            "annotations": [{"seq": a.seq, "trace_id": a.trace_id, "recorded_at": a.recorded_at,
                             "record": a.body} for a in d.annotations]}


@traces_app.command("show")
def traces_show(
    trace_id: Annotated[str, typer.Argument(metavar="TRACE_ID", help="UUID of the sealed record")],
    payload: Annotated[bool, typer.Option("--payload",
                                          help="include the raw message (payment data)")] = False,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One sealed record in full: what was decided, on what, by whom, and what was said since."""
    from api import ops
    from audit.errors import QueryError
    from audit.query.traces import get_trace
    from ledger.errors import EntryNotFoundError

    engine = ops.engine_for(settings(db, keys))
    try:
        ops.require_schema(engine)
        try:
            d = get_trace(engine, trace_id)
        except QueryError as exc:
            _refused(exc)
    finally:
        engine.dispose()
    if d is None:
        raise EntryNotFoundError(f"no trace {trace_id}")
    doc = detail_json(d, payload)
    emit(doc, as_json, lambda: _human_detail(doc))


def _human_detail(doc: dict[str, Any]) -> None:
    for k in ("trace_id", "seq", "kind", "recorded_at", "leaf_hash", "chain_hash"):
        out.print(f"{k:<12}{doc[k]}", markup=False)
    p = doc["payload"]
    out.print(f"{'payload':<12}{p['state']}" + (f"  sha256 {p['sha256']}" if p["sha256"] else ""),
              markup=False)
    out.print("record:", markup=False)
    out.print(orjson.dumps(doc["record"]["record"], option=orjson.OPT_INDENT_2).decode(), markup=False)
    if "data" in p:
        out.print(f"payload data ({p['encoding']}):", markup=False)
        out.print(p["data"], markup=False)
    out.print(f"annotations: {len(doc['annotations'])}", markup=False)
    for a in doc["annotations"]:
        body = a["record"]
        out.print(f"  seq {a['seq']}  {a['recorded_at']}  {body.get('disposition', '')}  "
                  f"{body.get('note', '')}", markup=False)
