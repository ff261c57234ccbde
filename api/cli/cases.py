"""``sealtrail alerts list|act``, ``sealtrail cases show|act|policy``, ``sealtrail outcomes``: the
compliance officer's queue and cases from the command line (a thin face over ``audit.cases``).

Reads (``alerts list``, ``cases show``, ``cases policy show``, ``outcomes``) first bring the alert
view current with the ledger (``audit.cases.store.catch_up``, done by the query layer); a read of
case state (``alerts list``: the cases on the page; ``cases show``: the case) is sealed as a
``case_read`` record of the local operator before it is printed, as the HTTP API seals an
officer's (``audit.cases.reads``, tipping-off). JSON shapes are the HTTP API's. Actions
(``alerts act``, ``cases act``, ``cases policy set``) are sealed records: the command prints the
receipt (seq, trace id, leaf hash, time) only once the record is durable and folded into the view.

Identity: like ``score`` and ``export create``, the CLI acts as the local operator
(``Principal.local(getpass.getuser())``: subject ``CN=local:USER``, no certificate). Two local
principals cannot be told apart (a user name proves nothing), so the CLI cannot be one of two
officers: ``approve`` and ``qa_review`` are refused here before anything is opened, and the audit
layer refuses the other four-eyes steps (releasing a BLOCK, a four-eyes false positive) for a
principal without a certificate; officers take them in the console or over the HTTP API with
their own. For the same reason ``--view mine`` needs ``--me FINGERPRINT``, the officer's
certificate fingerprint.

Exit codes: 0 done; 1 a refused filter or action (a bad disposition, a missing rationale, an
action the alert's state does not allow, four-eyes), an unknown alert or case, a refused policy
file; 2 a usage error (an unknown ACTION, ``--view mine`` without ``--me``, ``file_report``,
which the reports command files). A refusal names its option or argument (``field`` in
``--json``) and, in ``error``, the kind: ``CaseError``, ``CaseNotFoundError``,
``CaseConflictError`` or ``CaseFourEyesError``.

``audit.cases`` and ``api.ops`` are imported in the command bodies so that ``sealtrail --help``
does not load the database layer.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import orjson
import typer

from api.case_json import alert_json, case_json, event_json
from api.cli.common import CliError, DbOpt, JsonOpt, KeysOpt, emit, out, settings
from api.cli.common import engine as _engine

if TYPE_CHECKING:

    from audit.cases.query import CaseDetail
    from audit.cases.service import ActionReceipt
    from audit.cases.state import AlertState, CaseState
    from audit.decide.principal import Principal
    from audit.errors import CaseError
    from ledger.append import Ledger

__all__ = ["ALERT_ACTIONS", "CASE_ACTIONS", "REPORTS_HINT", "alert_json", "alerts_app", "case_json",
           "cases_app", "event_json", "outcomes"]

alerts_app = typer.Typer(no_args_is_help=True, help="The officer's alert queue: list alerts, act on one.")
cases_app = typer.Typer(no_args_is_help=True,
                        help="Cases: show one with its sealed history, act on it; the deadline policy.")
policy_app = typer.Typer(no_args_is_help=True, help="The deadline policy new alerts are dated by.")
cases_app.add_typer(policy_app, name="policy")

# audit.cases.state.ACTIONS and CASE_ACTIONS less file_report (a test holds them equal; not
# imported here, so --help stays light)
ALERT_ACTIONS = ("assign", "start_review", "escalate", "close", "reopen", "comment", "release", "reject",
                 "approve", "refuse", "qa_review")
CASE_ACTIONS = ("assign", "comment", "close", "link", "approve", "refuse")
# the second person's step of a four-eyes action: refused from the local CLI (module docstring)
SECOND_PERSON_ACTIONS = ("approve", "qa_review")
REPORTS_HINT = ("a report is drafted from the case and validated before it is filed: sealtrail reports "
                "draft {case} --out report.xml, then sealtrail reports file {case} report.xml (or POST "
                "/v1/cases/{case}/reports)")
MAX_POLICY_BYTES = 64 * 1024
_TRACE_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FILTER_OPTIONS = {"view": "--view", "outcome": "--outcome", "rule": "--rule", "case_id": "--case",
                   "order": "--order", "limit": "--limit", "cursor": "--cursor", "me": "--me",
                   "after": "--after"}
_ACT_OPTIONS = {"rationale": "--rationale", "disposition": "--disposition", "link": "--link",
                "action": "ACTION"}

RationaleOpt = Annotated[str | None, typer.Option(
    "--rationale", help="the officer's words, sealed with the action (close, escalate, reopen, comment, "
                        "release, reject, refuse and link need it); no personal data from the payment")]
DispositionOpt = Annotated[str | None, typer.Option(
    "--disposition", help="for close: FALSE_POSITIVE | NO_FURTHER_ACTION | REPORT_FILED")]
AssigneeSubjectOpt = Annotated[str | None, typer.Option(
    "--assignee-subject", help="for assign: the officer's certificate subject (RFC 4514 DN)")]
AssigneeFpOpt = Annotated[str | None, typer.Option(
    "--assignee-fingerprint", help="for assign: the officer's certificate SHA-256 fingerprint (hex)")]
AssigneeCertOpt = Annotated[Path | None, typer.Option(
    "--assignee-cert", exists=True, dir_okay=False, readable=True,
    help="for assign: the officer's certificate (PEM), instead of --assignee-subject/--assignee-fingerprint")]


# --------------------------------------------------------------------------- helpers


def _refused(exc: CaseError, names: dict[str, str], *, prefix: str = "") -> NoReturn:
    """A refusal of the audit layer as the CLI's contract says: exit 1, the option named."""
    name = names.get(exc.field, exc.field)
    raise CliError(f"{prefix}{name}: {exc.message}", code=1, error=type(exc).__name__, field=name) from exc


def _usage(message: str, field: str) -> NoReturn:
    raise CliError(message, code=2, error="usage", field=field)


def _operator() -> Principal:
    """Who the CLI acts as: the local operator, as ``score`` and ``export create`` record it."""
    from audit.decide.principal import Principal

    return Principal.local(getpass.getuser())


def _fingerprint(text: str, option: str) -> str:
    """A certificate SHA-256 fingerprint as the view keeps it (lower-case hex, no colons)."""
    from audit.errors import CaseError

    fp = text.replace(":", "").strip().lower()
    if not _HEX64.fullmatch(fp):
        raise CaseError(option, "must be a certificate SHA-256 fingerprint (64 hex digits)")
    return fp


def _decoded(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def _today() -> date:
    return datetime.now(UTC).date()


def _ledger(db: str | None, keys: Path | None) -> Ledger:
    from api import ops

    return ops.open_ledger(settings(db, keys))


def _seal_reads(ledger: Ledger, cases: Iterable[int], what: str) -> None:
    """Seal that the local operator read ``cases`` (``case`` or ``queue``) before it is shown
    (``audit.cases.reads``: every read of case state is evidence, as over the HTTP API)."""
    from audit.cases.reads import record_reads

    ids = list(dict.fromkeys(cases))
    if ids:
        record_reads(ledger, _operator(), [{"case": c, "what": what} for c in ids])


def _alert_table(items: list[AlertState], title: str | None = None) -> None:
    from rich import box
    from rich.table import Table

    today = _today().isoformat()
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
              collapse_padding=True, header_style="bold", title_justify="left")
    for col in ("seq", "opened", "due", "outcome", "payment", "state", "assignee", "case", "fired"):
        wraps = col in ("assignee", "fired")
        t.add_column(col, justify="right" if col in ("seq", "case") else "left", no_wrap=not wraps,
                     overflow="fold", min_width=8 if wraps else None)
    for a in items:
        due = a.review_due + (" overdue" if a.open and a.review_due < today else "")
        payment = (a.payment or "-") + (f" ({a.pending} pending)" if a.pending else "")
        t.add_row(str(a.seq), a.opened_at[:16].replace("T", " "), due, a.outcome, payment, a.state,
                  a.assignee_subject or "-", str(a.case_id), a.fired.replace(",", " ") or "-")
    out.print(t)


# --------------------------------------------------------------------------- alerts


@alerts_app.command("list")
def alerts_list(
    view: Annotated[str, typer.Option(
        help="open | mine (with --me) | unassigned | overdue (review due before today, UTC) | closed | all")
    ] = "open",
    outcome: Annotated[str | None, typer.Option(
        help="REVIEW | HOLD | BLOCK | ALLOW (an account alert alone)")] = None,
    rule: Annotated[str | None, typer.Option(help="a rule id that fired")] = None,
    case: Annotated[int | None, typer.Option("--case", help="alerts of this case id")] = None,
    me: Annotated[str | None, typer.Option(
        "--me", metavar="FINGERPRINT",
        help="for --view mine: your certificate's SHA-256 fingerprint (the local CLI has none)")] = None,
    order: Annotated[str, typer.Option(help="newest | oldest (overdue: most overdue first)")] = "newest",
    limit: Annotated[int, typer.Option(help="page size, 1..500")] = 50,
    cursor: Annotated[str | None, typer.Option(help="next cursor printed by the previous page")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Alerts in a queue view, newest first, one page at a time."""
    from audit.cases.query import AlertFilter, alert_page
    from audit.errors import CaseError

    if view == "mine" and me is None:
        _usage("--view mine needs --me FINGERPRINT (your certificate's SHA-256 fingerprint): the local "
               "CLI has no certificate of its own", "--me")
    if me is not None and view != "mine":
        _usage(f"--me applies to --view mine only, not --view {view}", "--me")
    try:
        f = AlertFilter(view=view, outcome=outcome, rule=rule, case_id=case,
                        me=None if me is None else _fingerprint(me, "me"), order=order, limit=limit,
                        cursor=cursor)
    except CaseError as exc:
        _refused(exc, _FILTER_OPTIONS)
    today = _today()
    ledger = _ledger(db, keys)
    try:
        page = alert_page(ledger.engine, f, today=today)
        _seal_reads(ledger, (a.case_id for a in page.items), "queue")
    finally:
        ledger.engine.dispose()
    doc = {"items": [alert_json(a, today) for a in page.items], "next_cursor": page.next_cursor}

    def human() -> None:
        if page.items:
            _alert_table(page.items)
        out.print(f"{len(page.items)} alert(s) ({view}); " + (f"next cursor: {page.next_cursor}"
                  if page.next_cursor else "last page"), markup=False)

    emit(doc, as_json, human)


def _assignee(subject: str | None, fingerprint: str | None, cert: Path | None) -> dict[str, Any] | None:
    """The principal to assign to: from a certificate, or from its subject and fingerprint."""
    from audit.decide.principal import Principal
    from audit.errors import CaseError, PrincipalError

    if cert is not None:
        if subject is not None or fingerprint is not None:
            _usage("--assignee-cert names the officer alone: drop --assignee-subject/--assignee-fingerprint",
                   "--assignee-cert")
        try:
            return Principal.from_pem(cert.read_bytes()).to_json()
        except (PrincipalError, ValueError) as exc:
            raise CaseError("assignee_cert", f"{cert} is not one PEM certificate: {exc}") from exc
    if subject is None and fingerprint is None:
        return None
    if subject is None or fingerprint is None:
        _usage("--assignee-subject and --assignee-fingerprint go together (or give --assignee-cert)",
               "--assignee-subject" if subject is None else "--assignee-fingerprint")
    from cryptography import x509

    try:
        dn = x509.Name.from_rfc4514_string(subject).rfc4514_string()
    except ValueError as exc:
        raise CaseError("assignee_subject", f"{subject!r} is not an RFC 4514 name: {exc}") from exc
    if not dn:
        raise CaseError("assignee_subject", "must name the officer (an RFC 4514 name)")
    fp = _fingerprint(fingerprint, "assignee_fingerprint")
    return {"subject": dn, "sans": [], "issuer": "", "fingerprint_sha256": fp, "serial": ""}


def _act(db: str | None, keys: Path | None, action: str, *, alert: int | str | None, case: int | None,
         rationale: str | None, disposition: str | None, assignee: tuple[str | None, str | None, Path | None],
         link: int | None, target_name: str) -> tuple[ActionReceipt, Principal, CaseDetail]:
    """Check, seal and fold one action as the local operator; the receipt and the case after it."""
    from api import ops
    from audit.cases.query import case_detail
    from audit.cases.service import act
    from audit.errors import CaseConflictError, CaseError, CaseFourEyesError

    names = {**_ACT_OPTIONS, "alert": target_name, "case": target_name, "case_id": target_name,
             "assignee": "--assignee-cert" if assignee[2] is not None else "--assignee-subject",
             "assignee_cert": "--assignee-cert", "assignee_subject": "--assignee-subject",
             "assignee_fingerprint": "--assignee-fingerprint"}
    me = _operator()
    try:
        if action in SECOND_PERSON_ACTIONS:
            raise CaseFourEyesError("principal", f"{action} is a second officer's step (four-eyes) and the "
                                                 f"local CLI acts as {me.subject}, without a certificate "
                                                 "to show it is a second person: take it in the console "
                                                 "(/console/alerts) or over the HTTP API with your own "
                                                 "certificate")
        who = _assignee(*assignee)
        ledger = ops.open_ledger(settings(db, keys))
        try:
            receipt = act(ledger, me, action, alert=alert, case=case, rationale=rationale,
                          assignee=who, disposition=disposition, link=link)
            detail = case_detail(ledger.engine, receipt.case_id)
        finally:
            ledger.engine.dispose()
    except CaseConflictError as exc:  # the state refuses (field: the action, or the assignee it has)
        _refused(exc, {"action": "ACTION", "disposition": "--disposition"})
    except CaseError as exc:
        _refused(exc, names)
    return receipt, me, detail


def _receipt_doc(r: ActionReceipt, me: Principal, detail: CaseDetail) -> dict[str, Any]:
    alert = next((a for a in detail.alerts if a.seq == r.alert_seq), None)
    return {"seq": r.seq, "trace_id": r.trace_id, "leaf_hash": r.leaf_hash, "recorded_at": r.recorded_at,
            "action": r.action, "alert_seq": r.alert_seq, "case_id": r.case_id, "principal": me.to_json(),
            "alert": None if alert is None else alert_json(alert, _today()), "case": case_json(detail.case)}


def _human_receipt(doc: dict[str, Any]) -> None:
    on = f"alert {doc['alert_seq']} (case {doc['case_id']})" if doc["alert_seq"] is not None \
        else f"case {doc['case_id']}"
    out.print(f"sealed {doc['action']} on {on} as {doc['principal']['subject']}", markup=False)
    out.print(f"  seq {doc['seq']}  trace {doc['trace_id']}  at {doc['recorded_at']}", markup=False)
    out.print(f"  leaf {doc['leaf_hash']}", markup=False)
    a, c = doc["alert"], doc["case"]
    if a is not None:
        now = f"  alert now {a['state']}" + (f", {a['disposition']}" if a["disposition"] else "")
        if a["payment"]:
            now += f", payment {a['payment']}"
        if a["pending"]:
            now += f", {a['pending']} awaits a second officer"
        out.print(now, markup=False)
    out.print(f"  case now {c['state']} ({c['open_alert_count']} of {c['alert_count']} alerts open)"
              + (f", {c['pending']} awaits a second officer" if c["pending"] else ""), markup=False)


def _check_action(action: str, allowed: tuple[str, ...], on: str, case: int | None = None) -> None:
    if action == "file_report" and case is not None:
        _usage(f"ACTION file_report is not taken here: {REPORTS_HINT.format(case=case)}", "ACTION")
    if action not in allowed:
        _usage(f"ACTION {action!r} is not one of {', '.join(allowed)} (on {on})", "ACTION")


@alerts_app.command("act")
def alerts_act(
    target: Annotated[str, typer.Argument(
        metavar="SEQ|TRACE_ID", help="the alert: the seq or trace id of the decision that opened it")],
    action: Annotated[str, typer.Argument(metavar="ACTION", help=" | ".join(ALERT_ACTIONS))],
    rationale: RationaleOpt = None,
    disposition: DispositionOpt = None,
    assignee_subject: AssigneeSubjectOpt = None,
    assignee_fingerprint: AssigneeFpOpt = None,
    assignee_cert: AssigneeCertOpt = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take ACTION on one alert as the local operator; prints the sealed receipt. A HOLD's release
    decides the payment; a BLOCK's is a proposal a second officer approves (not from this CLI)."""
    if not (target.isdigit() or _TRACE_ID.fullmatch(target)):
        _usage(f"SEQ|TRACE_ID: {target!r} is neither an alert seq nor a trace id (UUID)", "SEQ|TRACE_ID")
    _check_action(action, ALERT_ACTIONS, "an alert")
    receipt, me, detail = _act(db, keys, action, alert=int(target) if target.isdigit() else target.lower(),
                               case=None, rationale=rationale, disposition=disposition,
                               assignee=(assignee_subject, assignee_fingerprint, assignee_cert), link=None,
                               target_name="SEQ|TRACE_ID")
    doc = _receipt_doc(receipt, me, detail)
    emit(doc, as_json, lambda: _human_receipt(doc))


# --------------------------------------------------------------------------- cases


@cases_app.command("show")
def cases_show(
    case_id: Annotated[int, typer.Argument(metavar="ID", help="the case id (the seq of its first alert)")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One case: its state, its alerts and every sealed event about it, with the officer's words."""
    from audit.cases.counterparties import counterparty_cases
    from audit.cases.query import case_detail
    from audit.errors import CaseError

    ledger = _ledger(db, keys)
    try:
        try:
            d = case_detail(ledger.engine, case_id)
            others = counterparty_cases(ledger.engine, case_id)
        except CaseError as exc:
            _refused(exc, {"case_id": "ID"})
        _seal_reads(ledger, [case_id], "case")
        _seal_reads(ledger, [c.case_id for c in others], "queue")  # shown too, as a page of the queue
    finally:
        ledger.engine.dispose()
    today = _today()
    doc = {**case_json(d.case), "alerts": [alert_json(a, today) for a in d.alerts],
           "events": [event_json(e) for e in d.events], "counterparty_cases": [case_json(c) for c in others]}
    emit(doc, as_json, lambda: _human_case(d, others))


def _quote(words: str) -> None:
    """An officer's words under the line they belong to, every line of them marked, so that a note
    holding a newline cannot print a line that passes for another annotation or event."""
    for line in words.split("\n"):
        out.print(f"      | {line}", markup=False)


def _human_case(d: CaseDetail, others: list[CaseState]) -> None:
    c = d.case
    p = out.print
    state = "open" if c.open else f"closed {c.closed_at or ''} {c.disposition or ''}".rstrip()
    p(f"case {c.case_id}  {c.subject}  {state}  ({c.open_alerts} of {c.alerts} alerts open)", markup=False)
    p(f"opened      {c.opened_at}", markup=False)
    p(f"assignee    {c.assignee_subject or '-'}", markup=False)
    if c.pending:
        p(f"pending     {c.pending}, awaiting a second officer", markup=False)
    if c.links:
        p(f"linked to   cases {c.links.replace(',', ', ')}", markup=False)
    if c.reports:
        p(f"reports     {c.reports} filed; in force: sha256 {c.last_report}", markup=False)
    if others:
        p("counterparties' cases (accounts on the other side of its payments; link with "
          f"'cases act {c.case_id} link --link ID'): " + ", ".join(
              f"{o.case_id} ({'open' if o.open else 'closed'})" for o in others), markup=False)
    _alert_table(d.alerts, title="alerts")
    notes = [(a.seq, n) for a in d.alerts for n in d.annotations_of(a)]
    if notes:
        p(f"annotations on its decisions: {len(notes)}", markup=False)
        for alert_seq, n in notes:
            b = n.body
            who = b.get("principal", {}).get("subject", "?") if isinstance(b.get("principal"), dict) else "?"
            p(f"  seq {n.seq}  {n.recorded_at}  on alert {alert_seq}  {b.get('disposition', '?')}  by {who}",
              markup=False)
            if b.get("note"):
                _quote(str(b["note"]))
    p(f"events: {len(d.events)}", markup=False)
    for e in d.events:
        on = f"alert {e.alert_seq}" if e.alert_seq is not None else "case"
        what = [e.action, on]
        if e.disposition:
            what.append(e.disposition)
        if e.assignee:
            what.append(f"to {e.assignee.get('subject', '')}")
        if e.link is not None:
            what.append(f"with case {e.link}")
        if e.report:
            what.append(f"report sha256 {e.report}")
        if getattr(e, "verdict", None):
            what.append(f"verdict {getattr(e, 'verdict', '')}")
        status = "" if e.applied else f"  NOT APPLIED: {e.why}"
        p(f"  seq {e.seq}  {e.recorded_at}  {' '.join(what)}  by {e.principal.get('subject', '?')}{status}",
          markup=False)
        if e.rationale:
            _quote(e.rationale)


@cases_app.command("act")
def cases_act(
    case_id: Annotated[int, typer.Argument(metavar="ID", help="the case id")],
    action: Annotated[str, typer.Argument(metavar="ACTION", help=" | ".join(CASE_ACTIONS))],
    rationale: RationaleOpt = None,
    disposition: DispositionOpt = None,
    assignee_subject: AssigneeSubjectOpt = None,
    assignee_fingerprint: AssigneeFpOpt = None,
    assignee_cert: AssigneeCertOpt = None,
    link: Annotated[int | None, typer.Option("--link", help="for link: the other case's id")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Take ACTION on a case (every open alert of it) as the local operator; prints the sealed receipt.

    Filing a report is the reports command's (file_report is refused here)."""
    _check_action(action, CASE_ACTIONS, "a case", case_id)
    receipt, me, detail = _act(db, keys, action, alert=None, case=case_id, rationale=rationale,
                               disposition=disposition, assignee=(assignee_subject, assignee_fingerprint,
                                                                  assignee_cert), link=link, target_name="ID")
    doc = _receipt_doc(receipt, me, detail)
    emit(doc, as_json, lambda: _human_receipt(doc))


# --------------------------------------------------------------------------- policy


def _human_policy(doc: dict[str, Any], verb: str) -> None:
    p, pol = out.print, doc["policy"]
    if doc["built_in"]:
        p(f"{verb} the built-in default policy {pol['version']} (no policy has been sealed)", markup=False)
    else:
        p(f"{verb} policy {pol['version']}, sealed at seq {doc['seq']} ({doc['recorded_at']}) by "
          f"{doc['principal']['subject']}", markup=False)
        p(f"  rationale: \"{doc['rationale']}\"", markup=False)
    p(f"  review within {pol['review_business_days']} business days; filing decision within "
      f"{pol['filing_calendar_days']} calendar days; continuing review {pol['continuing_review_days']} days "
      "after a filing", markup=False)
    p(f"  case subject: {pol['subject']}; four-eyes on false positives: "
      f"{'yes' if pol['four_eyes_false_positive'] else 'no'}; holidays: {len(pol['holidays'])}"
      + (f"; quality assurance samples {pol['qa_sample_permille']} in 1,000 closed alerts"
         if pol.get("qa_sample_permille") else ""), markup=False)


@policy_app.command("show")
def policy_show(db: DbOpt = None, keys: KeysOpt = None, as_json: JsonOpt = False) -> None:
    """The deadline policy in force: the last sealed one, or the built-in default."""
    from audit.cases.policy_read import policy_in_force
    from audit.errors import CaseError

    engine = _engine(db, keys)
    try:
        try:
            doc = policy_in_force(engine).to_json()
        except CaseError as exc:
            _refused(exc, {})
    finally:
        engine.dispose()
    emit(doc, as_json, lambda: _human_policy(doc, "in force:"))


@policy_app.command("set")
def policy_set(
    file: Annotated[Path, typer.Argument(metavar="FILE.toml", exists=True, dir_okay=False, readable=True,
                                         help="the policy: version, review_business_days, "
                                              "filing_calendar_days, continuing_review_days, holidays, "
                                              "subject, four_eyes_false_positive")],
    rationale: Annotated[str, typer.Option("--rationale", help="why the policy changes (sealed with it)")],
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Seal FILE.toml as the deadline policy of alerts opened from now on (as the local operator)."""
    from api import ops
    from audit.cases.policy import DeadlinePolicy
    from audit.cases.policy_read import policy_in_force
    from audit.cases.service import set_policy
    from audit.errors import CaseError

    with file.open("rb") as f:
        data = f.read(MAX_POLICY_BYTES + 1)
    try:
        if len(data) > MAX_POLICY_BYTES:
            raise CaseError("FILE.toml", f"{file} is over {MAX_POLICY_BYTES:,} bytes (the limit)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CaseError("FILE.toml", f"{file} is not UTF-8 text") from None
        policy = DeadlinePolicy.from_toml(text)
        ledger = ops.open_ledger(settings(db, keys))
        try:
            before = policy_in_force(ledger.engine)
            seq = set_policy(ledger, policy, _operator(), rationale)
            now = policy_in_force(ledger.engine, before=seq + 1)
        finally:
            ledger.engine.dispose()
    except CaseError as exc:
        in_file = exc.field.startswith("policy")
        _refused(exc, {"rationale": "--rationale"}, prefix=f"{file}: " if in_file else "")
    doc = {**now.to_json(), "previous": {"seq": before.seq, "version": before.policy.version,
                                         "built_in": before.built_in}}
    emit(doc, as_json, lambda: _human_policy(doc, "sealed:"))


# --------------------------------------------------------------------------- outcomes


def outcomes(
    after: Annotated[int, typer.Option("--after", metavar="SEQ",
                                       help="outcomes sealed after this seq (the previous next_cursor)")] = 0,
    limit: Annotated[int, typer.Option(help="page size, 1..500")] = 100,
    scorer: Annotated[str | None, typer.Option(
        "--scorer", metavar="FINGERPRINT",
        help="only payments this scorer's certificate asked about (default: every scorer)")] = None,
    db: DbOpt = None,
    keys: KeysOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Held payments released or rejected after a seq, oldest first: the feed a payment system polls."""
    from audit.cases.query import outcomes_since
    from audit.errors import CaseError

    engine = _engine(db, keys)
    try:
        try:
            fp = None if scorer is None else _fingerprint(scorer, "scorer")
            page = outcomes_since(engine, after, scorer_fp=fp, limit=limit)
        except CaseError as exc:
            _refused(exc, {**_FILTER_OPTIONS, "scorer": "--scorer"})
    finally:
        engine.dispose()
    doc = {"items": page.items, "next_cursor": page.next_cursor}

    def human() -> None:
        for o in page.items:
            out.print(f"{o['seq']:>8}  {o['recorded_at']}  {o['outcome']:<8}  alert {o['alert_seq']}  "
                      f"decision {o['trace_id']}", markup=False)
        out.print(f"{len(page.items)} outcome(s); next: --after {page.next_cursor}", markup=False)

    emit(doc, as_json, human)
