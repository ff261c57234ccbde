"""Suspicious transaction reports from a case: drafted from its sealed decisions, filed as a sealed
``file_report`` event, and kept by legal holds (docs/goaml.md, "From a case to a filed report").

:func:`draft_case_report` reads the case's alerts, each alert's decision record and the payment
message it decided (the purgeable payload), and writes the goAML STR with
``audit.cases.goaml.draft_report``: nothing is sealed. Each decided transaction becomes one goAML
transaction, the decision's trace id its number; a payload purged already cannot be reported (a
report is never rebuilt from hashes), and an amount in another currency than the local one needs
the caller's rate (nothing here invents one).

:func:`file_case_report` files a document: it checks it again, places the legal hold over the
case's evidence, seals the ``file_report`` event (``audit.cases.service.act``; the document is its
payload) and then holds the document's own bytes.

**Why the hold comes first.** Holds are ``ledger.legal_hold`` records only the ledger writes, so
the event and its hold cannot share a commit; one of them is sealed first. Sealed after the event,
the hold could be missing for good (a crash, the database gone between the two commits) and, until
it is placed, a purge could erase the evidence of a report already filed. Sealed first, the worst
case is a hold without a report: nothing is lost, and :func:`file_case_report` releases it (a
``release`` record naming why) when the event is refused or could not be sealed. So the evidence
hold (``case-<id>-<sha8>``) is placed before the event, over the seqs from the first payload of the
case's alerts to its last alert, and the document's own bytes, which get their seq only with the
event, are held right after it by a second hold (``case-<id>-<sha8>.report``). If that second hold
cannot be placed, :class:`ReportHoldError` says so, naming the event's seq: the report is filed
and its evidence held; its bytes are new, so no retention period reaches them, and an erasure
order is the only purge that could meanwhile.
"""

from __future__ import annotations

import hashlib
import logging
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import orjson
from defusedxml.ElementTree import fromstring
from schwifty import BIC, IBAN
from schwifty.exceptions import SchwiftyException
from sqlalchemy import Engine, func, select

from audit.cases.events import EVENT_KIND, event_body
from audit.cases.goaml import (
    Account,
    Entity,
    ReportingEntity,
    ReportTransaction,
    Side,
    StrDraft,
    amendment_note,
    draft_report,
    validate_report,
)
from audit.cases.query import CaseDetail, case_detail
from audit.cases.service import act
from audit.cases.tables import case_events
from audit.decide.principal import Principal
from audit.decide.record import DECISION_KIND
from audit.errors import (
    CaseConflictError,
    CaseNotFoundError,
    ReportError,
    ReportHoldError,
    ReportPurgedError,
)
from audit.query.index import payload_data
from inference.messages import Agent, Party, Transaction, parse_messages, transaction_schema_of
from ledger import store
from ledger.append import Ledger
from ledger.retention import Hold, current_holds, place_hold, release_hold

__all__ = ["MAX_SETTINGS_BYTES", "TRANSMODE_FAMILIES", "Draft", "FiledReport", "FiledVersion",
           "ReportHoldError", "ReportPurgedError", "ReportingSettings", "case_reference",
           "draft_case_report", "file_case_report", "filed_report", "hold_id_of", "list_case_reports",
           "read_reporting_settings", "report_transaction"]

log = logging.getLogger(__name__)

MAX_SETTINGS_BYTES = 64 << 10
TRANSMODE_FAMILIES = ("customer", "institution", "return")
# Which family of goAML conduction code a message type is reported under: a customer's credit
# transfer (MT103, the customer transfer an MT202COV covers, pacs.008, pain.001, sealtrail JSON), a
# transfer between institutions for their own account (MT202, pacs.009), a returned payment (pacs.004).
_INSTITUTION = re.compile(r"MT202|pacs\.009(\..*)?")
_RETURN = re.compile(r"pacs\.004(\..*)?")
_CENT = Decimal("0.01")
_SECTION = "sealtrail"
_SECTION_KEYS = ("own_bics", "funds_code", "transmode_codes")
_BIC8 = re.compile(r"[A-Z]{6}[A-Z0-9]{2}")


# -- settings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportingSettings:
    """The bank as its FIU registered it (``entity``) and what drafting from a case needs beyond it,
    from the ``[sealtrail]`` table of the same TOML file: the bank's own BICs (``own_bics``; a side
    whose account is kept under one of them is the bank's client), the FIU's conduction code for
    each family of message (``transmode_codes``: customer, institution, return) and its funds-type
    code for an account transfer (``funds_code``)."""

    entity: ReportingEntity
    transmode_codes: Mapping[str, str]
    funds_code: str
    own_bics: frozenset[str] = frozenset()

    @classmethod
    def from_toml(cls, text: str) -> ReportingSettings:
        """The settings from TOML: the entity's keys as ``ReportingEntity.from_toml`` reads them,
        and a ``[sealtrail]`` table with ``funds_code``, ``[sealtrail.transmode_codes]`` and
        optional ``own_bics``. ``ReportError`` names the key at fault."""
        if not isinstance(text, str):
            raise ReportError("toml", f"expected text, got {type(text).__name__}")
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ReportError("toml", f"not TOML: {exc}") from None
        ours = doc.pop(_SECTION, None)
        if not isinstance(ours, dict):
            raise ReportError(_SECTION, "is missing: a [sealtrail] table with funds_code and "
                              "[sealtrail.transmode_codes] (docs/goaml.md)")
        entity = ReportingEntity.from_toml(_toml_text(doc))  # the entity's own checks and messages
        for key in ours:
            if key not in _SECTION_KEYS:
                raise ReportError(f"{_SECTION}.{key}",
                                  f"unknown key; expected one of {', '.join(_SECTION_KEYS)}")
        codes = ours.get("transmode_codes")
        if not isinstance(codes, dict):
            raise ReportError(f"{_SECTION}.transmode_codes", "is missing: a table of the FIU's conduction "
                              f"codes for {', '.join(TRANSMODE_FAMILIES)}")
        for family in (*codes, *TRANSMODE_FAMILIES):
            if family not in TRANSMODE_FAMILIES:
                raise ReportError(f"{_SECTION}.transmode_codes.{family}",
                                  f"unknown key; expected one of {', '.join(TRANSMODE_FAMILIES)}")
            if family not in codes:
                raise ReportError(f"{_SECTION}.transmode_codes.{family}", "is missing")
        if "funds_code" not in ours:
            raise ReportError(f"{_SECTION}.funds_code", "is missing: the FIU's funds-type code of an "
                              "account transfer")
        bics = ours.get("own_bics", [])
        if not isinstance(bics, list):
            raise ReportError(f"{_SECTION}.own_bics", "must be a list of BICs")
        return cls(entity=entity, transmode_codes=dict(codes), funds_code=ours["funds_code"],
                   own_bics=frozenset(_bic8(f"{_SECTION}.own_bics[{i}]", b) for i, b in enumerate(bics)))

    def __post_init__(self) -> None:
        if not isinstance(self.entity, ReportingEntity):
            raise ReportError("entity", f"must be a ReportingEntity, got {type(self.entity).__name__}")
        for family in TRANSMODE_FAMILIES:
            _code(f"{_SECTION}.transmode_codes.{family}", self.transmode_codes.get(family))
        _code(f"{_SECTION}.funds_code", self.funds_code)
        bics = frozenset(_bic8(f"{_SECTION}.own_bics", b) for b in self.own_bics)
        object.__setattr__(self, "own_bics", bics)  # normalised to the institution's 8 characters

    def is_own(self, bic: str | None) -> bool:
        """Whether ``bic`` is one of the bank's own (any branch: the first 8 characters decide)."""
        return bic is not None and bic[:8].upper() in self.own_bics


def read_reporting_settings(path: Path) -> ReportingSettings:
    """:meth:`ReportingSettings.from_toml` of the file at ``path`` (UTF-8, at most 64 KiB);
    ``ReportError`` (field ``reporting_entity``) if it cannot be read."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        raise ReportError("reporting_entity", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise ReportError("reporting_entity", f"{path} is over {MAX_SETTINGS_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportError("reporting_entity", f"{path} is not UTF-8 (byte {exc.start})") from None
    return ReportingSettings.from_toml(text)


def _code(field: str, value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]{1,25}", value):
        raise ReportError(field, f"{value!r} is not an FIU lookup code (1 to 25 of A-Z a-z 0-9 _ . -)")
    return value


def _bic8(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ReportError(field, f"must be a BIC, got {type(value).__name__}")
    if _BIC8.fullmatch(value):  # already the institution's 8 characters
        return value
    try:
        return str(BIC(value.strip()))[:8]
    except SchwiftyException as exc:
        raise ReportError(field, f"{value!r} is not a BIC: {exc}") from None


def _toml_text(doc: Mapping[str, Any], path: tuple[str, ...] = ()) -> str:
    """``doc`` written back as TOML, so that ``ReportingEntity.from_toml`` reads the entity's part
    with its own checks; checked to read back equal."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += ["", "[" + ".".join(_toml_key(p) for p in (*path, k)) + "]", _toml_text(v, (*path, k))]
    text = "\n".join(lines)
    if not path and tomllib.loads(text) != doc:
        raise ReportError("toml", "cannot be read back as written (report it: a value sealtrail does not "
                          "know how to pass on)")
    return text


def _toml_key(key: str) -> str:
    return _toml_string(key)


def _toml_string(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return _toml_string(v)
    if isinstance(v, int | float | date | time):  # datetime is a date
        return repr(v) if isinstance(v, float) else (str(v) if isinstance(v, int) else v.isoformat())
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise ReportError("toml", f"holds a value of type {type(v).__name__}")


# -- drafting -----------------------------------------------------------------------------------


def case_reference(case_id: int) -> str:
    """The document's ``entity_reference`` for a case: ``case-<id>``."""
    return f"case-{case_id}"


def hold_id_of(case_id: int, report_sha256: str) -> str:
    """The legal hold over the evidence of the report ``report_sha256`` on case ``case_id``."""
    return f"case-{case_id}-{report_sha256[:8]}"


@dataclass(frozen=True)
class Draft:
    """A drafted STR: the document's bytes and SHA-256, the goAML transactions in it and the seqs
    of the decisions they come from (in the same order)."""

    case_id: int
    xml: bytes
    sha256: str
    transactions: tuple[ReportTransaction, ...]
    decision_seqs: tuple[int, ...]


def draft_case_report(engine: Engine, case_id: int, reporting: ReportingSettings, *, reason: str,
                      indicators: Sequence[str], action: str | None, submission_date: datetime,
                      amends: str | None, rates: Mapping[str, Decimal] | None = None,
                      fiu_ref_number: str | None = None) -> Draft:
    """The goAML STR of case ``case_id``: one transaction per alert, from its sealed decision and the
    payment message the decision read. ``amends`` must name the report in force (none for a first
    report); ``rates`` (local currency per unit, by ISO 4217 code) is the caller's table for
    transactions in another currency than ``reporting.entity.currency_code_local``. Seals nothing.

    Raises ``CaseNotFoundError`` (no such case), ``CaseConflictError`` (``amends`` is not the report
    in force), ``ReportError`` naming the transaction (a purged payload, naming its seq; a foreign
    amount without a rate; a message goAML cannot carry) or the draft field at fault."""
    if not isinstance(reporting, ReportingSettings):
        raise ReportError("reporting", f"must be ReportingSettings, got {type(reporting).__name__}")
    if isinstance(indicators, str):
        raise ReportError("indicators", "must be a list of codes, not one string")
    detail = case_detail(engine, case_id)
    _check_amends(detail, amends)
    checked_rates = _rates(rates or {})
    seqs = [a.seq for a in detail.alerts]
    decisions = _decisions(engine, seqs)
    txs = tuple(_transaction(i, seq, env, tx, reporting, checked_rates)
                for i, (seq, (env, tx)) in enumerate(zip(seqs, decisions, strict=True)))
    xml = draft_report(StrDraft(entity=reporting.entity, transactions=txs, reason=reason,
                                indicators=tuple(indicators), entity_reference=case_reference(case_id),
                                submission_date=submission_date, action=action,
                                fiu_ref_number=fiu_ref_number, previous_sha256=amends))
    return Draft(case_id, xml, hashlib.sha256(xml).hexdigest(), txs, tuple(seqs))


def _check_amends(detail: CaseDetail, amends: str | None) -> None:
    in_force = detail.case.last_report
    if amends != in_force:
        case = detail.case.case_id
        if in_force is None:
            what = f"no report is in force on case {case}: a first report amends nothing"
        elif amends is None:
            what = f"report {in_force} is in force on case {case}: a new report amends it (amends={in_force})"
        else:
            what = (f"the report in force on case {case} is {in_force}: a report amends the one in force, "
                    f"not {amends}")
        raise CaseConflictError("amends", what)


def _rates(rates: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = {}
    for ccy, rate in rates.items():
        field = f"rates.{ccy}"
        if not isinstance(ccy, str) or not re.fullmatch(r"[A-Z]{3}", ccy):
            raise ReportError(field, f"{ccy!r} is not an ISO 4217 currency code")
        if isinstance(rate, bool) or not isinstance(rate, Decimal | int) or not Decimal(rate).is_finite() \
                or Decimal(rate) <= 0:
            raise ReportError(field, f"{rate!r} is not a positive exact rate (a Decimal, not a float)")
        out[ccy] = Decimal(rate)
    return out


def _decisions(engine: Engine, seqs: Sequence[int]) -> list[tuple[dict[str, Any], Transaction]]:
    """Each seq's decision envelope and the transaction it decided, read back from its payload."""
    e, p = store.entries, store.payloads
    with engine.connect() as conn:
        envs: dict[int, dict[str, Any]] = {}
        for i in range(0, len(seqs), 500):
            chunk = list(seqs[i:i + 500])
            rows = conn.execute(select(e.c.seq, e.c.kind, e.c.record).where(e.c.seq.in_(chunk)))
            for seq, kind, rec in rows:
                if kind != DECISION_KIND:
                    raise ReportError(f"seq {seq}", f"the alert's record is a {kind!r}, not a decision")
                envs[int(seq)] = orjson.loads(rec)
        shas = sorted({str(env.get("payload_sha256")) for env in envs.values()})
        data = payload_data(conn, shas)
        gone = [s for s in shas if data.get(s) is None]
        purged = {str(s): (int(q) if q is not None else None) for s, q in conn.execute(
            select(p.c.sha256, p.c.purge_seq).where(p.c.sha256.in_(gone)))}
    out = []
    for seq in seqs:
        env = envs.get(seq)
        if env is None:
            raise ReportError(f"seq {seq}", "no decision record at this seq")
        sha = env.get("payload_sha256")
        raw = data.get(str(sha)) if sha else None
        if raw is None:
            when = f" (purged at seq {purged[sha]})" if sha in purged and purged[sha] is not None else ""
            raise ReportError(f"seq {seq}", f"the payment message of decision {env['trace_id']} (seq {seq}) "
                              f"was purged{when}: a report cannot be rebuilt from hashes")
        out.append((env, _transaction_of(seq, env["record"], raw)))
    return out


def _transaction_of(seq: int, body: Mapping[str, Any], raw: bytes) -> Transaction:
    """The transaction a decision body sealed, parsed again from its payload (as the trace index
    reads accounts back: ``audit.query.index.accounts_of``)."""
    inp = body["input"]
    try:
        schema = transaction_schema_of(inp.get("parser"))
    except ValueError as exc:
        raise ReportError(f"seq {seq}", str(exc)) from None
    for t in parse_messages(raw, inp["format"]):
        if isinstance(t, Transaction) and t.sha256_of(schema) == inp["transaction_sha256"]:
            return t
    raise ReportError(f"seq {seq}", "the payload holds no transaction with the sealed transaction_sha256")


def _family(message_type: str) -> str:
    if _RETURN.fullmatch(message_type):
        return "return"
    if _INSTITUTION.fullmatch(message_type) and message_type != "MT202COV":
        return "institution"
    return "customer"


_SERVICERS = {"from": ("debtor_agent", "ordering_institution"), "to": ("creditor_agent", "account_with")}
_MT_DEFAULT = {"from": "sender", "to": "receiver"}  # SWIFT: without 52a / 57a, the sender / receiver


def _servicer(tx: Transaction, side: str) -> Agent | None:
    """The institution that keeps the account of ``side`` (``from``: the originator's; ``to``: the
    beneficiary's): the debtor or creditor agent (ISO 20022), the ordering or account-with
    institution (:52a: / :57a:; for an MT202COV's beneficiary, the beneficiary institution, :58a:),
    and in an MT message without them the sender or receiver."""
    roles: tuple[str, ...] = _SERVICERS[side]
    if tx.message_type == "MT202COV" and side == "to":  # the cover's 58a: the beneficiary customer's bank
        roles += ("beneficiary_institution",)
    if tx.message_type.startswith("MT"):
        roles += (_MT_DEFAULT[side],)
    for role in roles:
        hit = next((a for a in tx.agents if a.role == role and (a.bic or a.name_address)), None)
        if hit is not None:
            return hit
    return None


def _transaction(i: int, seq: int, env: Mapping[str, Any], tx: Transaction, reporting: ReportingSettings,
                 rates: Mapping[str, Decimal]) -> ReportTransaction:
    """``report_transaction`` of one alert's decision; a refusal names it (index, trace id, seq)."""
    body = env["record"]
    trace = str(env["trace_id"])
    fired = ", ".join(dict.fromkeys(str(h["id"]) for h in body.get("fired", []))) or "none"
    try:
        return report_transaction(tx, reporting, number=trace, at=_when(env), rates=rates,
                                  note=f"Screened by sealtrail: {body['decision']} (rules {fired}), "
                                       f"ledger seq {seq}.")
    except ReportError as exc:
        raise ReportError(f"transactions[{i}].{exc.field}",
                          f"transaction {trace} (decision seq {seq}): {exc.why}") from None


def report_transaction(tx: Transaction, reporting: ReportingSettings, *, number: str, at: datetime,
                       rates: Mapping[str, Decimal] | None = None,
                       note: str | None = None) -> ReportTransaction:
    """One payment as a goAML transaction (pure): ``number`` its sealtrail trace id, ``at`` when it
    was screened; each side an account at the institution that keeps it (docs/goaml.md, "How a case
    becomes the document"). A currency other than the local one needs its rate in ``rates`` (local
    units per unit); ``note`` ends the transaction's comments. ``ReportError`` names the field."""
    local = reporting.entity.currency_code_local
    amount_local = None
    comment = [f"Value date {tx.value_date.isoformat()}."]
    if tx.currency != local:
        rate = _rates(rates or {}).get(tx.currency)
        if rate is None:
            raise ReportError("amount_local", f"the amount is {tx.amount} {tx.currency}, not in the local "
                              f"{local}: give the rate for {tx.currency} (sealtrail invents none)")
        amount_local = (tx.amount * rate).quantize(_CENT, rounding=ROUND_HALF_EVEN)
        comment.append(f"Local amount at the bank's rate {rate} {local} per {tx.currency}.")
    if note:
        comment.append(note)
    from_side, from_own = _side(tx, tx.originator, "from", reporting)
    to_side, to_own = _side(tx, tx.beneficiary, "to", reporting)
    return ReportTransaction(
        number=number, date=at, amount=tx.amount, currency=tx.currency,
        transmode_code=reporting.transmode_codes[_family(tx.message_type)],
        transmode_comment=tx.message_type[:50], from_=from_side, to=to_side,
        from_my_client=from_own, to_my_client=to_own, amount_local=amount_local,
        purpose=tx.remittance or None, comment=" ".join(comment),
        internal_ref_number=tx.reference if tx.reference.strip() else None)


def _when(env: Mapping[str, Any]) -> datetime:
    """When the payment was screened, as its decision record states it (``at``; else ``recorded_at``)."""
    for text in (env["record"].get("at"), env.get("recorded_at")):
        try:
            at = datetime.fromisoformat(text) if isinstance(text, str) else None
        except ValueError:
            at = None
        if at is not None:
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    raise ReportError("date", "the decision states no time")


def _side(tx: Transaction, party: Party, side: str, reporting: ReportingSettings) -> tuple[Side, bool]:
    agent = _servicer(tx, side)
    bic = agent.bic if agent is not None else None
    account = (party.account or "").strip()
    country = party.country or (party.iban[:2] if party.iban else None) or (bic[4:6] if bic else None)
    if country is None:
        raise ReportError(f"{side}.country", "the message states no country for this side (nor an IBAN or "
                          "BIC to read one from)")
    institution = agent.name_address[0].strip() if agent is not None and agent.name_address else None
    found: Account | Entity | None = None
    try:
        if account:
            code = None if bic else _bank_code(party.iban)
            if bic or code:
                found = Account(institution_name=institution or bic or f"bank code {code}", swift=bic,
                                institution_code=code, account=account, iban=party.iban,
                                account_name=party.name or None)
        if found is None:
            name = party.name or party.bic
            if not name:
                raise ReportError("party", "the message names neither an account at a known institution nor "
                                  "the party")
            found = Entity(name=name)
    except ReportError as exc:
        raise ReportError(f"{side}.{exc.field}", exc.why) from None
    return Side(party=found, country=country, funds_code=reporting.funds_code), reporting.is_own(bic)


def _bank_code(iban: str | None) -> str | None:
    if not iban:
        return None
    try:
        return IBAN(iban).bank_code or None
    except SchwiftyException:
        return None


# -- filing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FiledReport:
    """A filed report: the sealed ``file_report`` event, and the holds that keep its evidence
    (``hold_id`` over ``hold_from``..``hold_to``) and its own bytes (``report_hold_id``)."""

    case_id: int
    seq: int
    trace_id: str
    recorded_at: str
    report_sha256: str
    amends: str | None
    hold_id: str
    hold_from: int
    hold_to: int
    report_hold_id: str


def _principal(p: Principal | Mapping[str, Any]) -> dict[str, Any]:
    return p.to_json() if isinstance(p, Principal) else dict(p)


def _document_text(xml: bytes, tag: str) -> str | None:
    el = fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True).find(tag)
    return None if el is None else (el.text or "")


def _check_document(xml: bytes, case_id: int, amends: str | None) -> None:
    """The document is this case's, and says what it amends exactly as the filing does."""
    ref = _document_text(xml, "entity_reference")
    if ref != case_reference(case_id):
        raise ReportError("report/entity_reference", f"is {ref!r}: the report of case {case_id} has "
                          f"{case_reference(case_id)!r}")
    reason = _document_text(xml, "reason") or ""
    says = re.match(r"Amends the earlier report.*? whose document has SHA-256 ([0-9a-f]{64})\.", reason)
    if amends is None and says is not None:
        raise ReportError("amends", f"the document amends {says[1]}; file it with amends={says[1]}")
    if amends is not None and (says is None or says[1] != amends):
        raise ReportError("report/reason", "an amendment opens its reason with "
                          f"{amendment_note(amends)!r} (amendment_note)")


def _check_transactions(xml: bytes, detail: CaseDetail) -> None:
    """Every transaction the document reports is a decision of this case (its number is the
    decision's trace id): the hold covers the case's evidence, so it must be the report's."""
    root = fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    ours = {a.trace_id for a in detail.alerts}
    for i, el in enumerate(root.findall("transaction")):
        number = el.findtext("transactionnumber") or ""
        if number not in ours:
            raise ReportError(f"report/transaction[{i + 1}]/transactionnumber",
                              f"{number!r} is not a decision of case {detail.case.case_id}")


def _evidence_range(engine: Engine, detail: CaseDetail) -> tuple[int, int]:
    """The seqs a hold must cover so that no payload of the case's decisions can be purged: from
    the first seq any of them was stored at (the same message decided earlier is stored once) to
    the case's last alert."""
    seqs = [a.seq for a in detail.alerts]
    e, p = store.entries, store.payloads
    first = min(seqs)
    with engine.connect() as conn:
        for i in range(0, len(seqs), 500):
            chunk = seqs[i:i + 500]
            records = conn.execute(select(e.c.record).where(e.c.seq.in_(chunk))).scalars()
            envs = [orjson.loads(rec) for rec in records]
            shas = [str(env["payload_sha256"]) for env in envs if "payload_sha256" in env]
            if shas:
                low = conn.execute(select(p.c.first_seq).where(p.c.sha256.in_(shas))
                                   .order_by(p.c.first_seq).limit(1)).scalar()
                first = min(first, int(low)) if low is not None else first
    return first, max(seqs)


def _existing(engine: Engine, hold_id: str) -> Hold | None:
    return next((h for h in current_holds(engine) if h.hold_id == hold_id), None)


def _hold(ledger: Ledger, hold_id: str, seq_from: int, seq_to: int, reason: str, sha: str) -> bool:
    """Place the hold, or find it placed already (a retry) over the range for this report; whether
    this call placed it."""
    held = _existing(ledger.engine, hold_id)
    if held is not None:
        if held.seq_from <= seq_from and seq_to <= held.seq_to and sha in held.reason:
            return False
        raise CaseConflictError("hold", f"legal hold {hold_id} is active over seqs {held.seq_from}.."
                                        f"{held.seq_to} ({held.reason}), not over {seq_from}..{seq_to} for "
                                        f"report {sha}")
    place_hold(ledger, hold_id, seq_from, seq_to, reason)
    return True


def file_case_report(ledger: Ledger, case_id: int, xml: bytes, principal: Principal | Mapping[str, Any], *,
                     rationale: str, amends: str | None = None) -> FiledReport:
    """File ``xml`` as the report of case ``case_id`` for ``principal``: checked (schema, this case,
    the amendment it states), the evidence held, the ``file_report`` event sealed, the document's
    bytes held. Nothing is sealed when the document, the rationale or ``amends`` is refused
    (``ReportError``, ``CaseError``, ``CaseConflictError`` when ``amends`` is not the report in force).
    ``ReportHoldError`` (naming the event's seq) if the report was filed but its bytes' hold failed."""
    if not isinstance(xml, bytes):
        raise ReportError("xml", f"expected bytes, got {type(xml).__name__}")
    validate_report(xml)
    _check_document(xml, case_id, amends)
    sha = hashlib.sha256(xml).hexdigest()
    detail = case_detail(ledger.engine, case_id)
    _check_transactions(xml, detail)
    event_body({"case": case_id}, "file_report", _principal(principal), rationale=rationale, report=sha,
               amends=amends)  # the arguments' own checks, before anything is sealed
    _check_amends(detail, amends)
    seq_from, seq_to = _evidence_range(ledger.engine, detail)
    hold_id = hold_id_of(case_id, sha)
    # worded without "report" or "STR": the reason is shown wherever holds are (purge refusals, the
    # operator's CLI), to people who may not know a report was filed (FATF R.21)
    why = f"evidence hold for case {case_id}: document SHA-256 {sha}"
    mark = _tip(ledger.engine)
    placed = _hold(ledger, hold_id, seq_from, seq_to, why, sha)
    try:
        receipt = act(ledger, principal, "file_report", case=case_id, report=xml, rationale=rationale,
                      amends=amends)
    except BaseException as exc:
        if placed:
            _release_unfiled(ledger, hold_id, case_id, sha, mark, exc)
        raise
    report_hold = f"{hold_id}.report"
    first: int | str = "<the seq its payload was first stored at>"
    try:
        first = _payload_first_seq(ledger.engine, sha)
        _hold(ledger, report_hold, first, first, f"{why} (the report's own bytes)", sha)
    except Exception as exc:  # whatever it was, the caller must hear that the report is filed
        raise ReportHoldError(
            f"report {sha} was filed on case {case_id} (sealed at seq {receipt.seq}) and its evidence is "
            f"held ({hold_id}), but the hold on the report's own bytes failed: {exc}; place it with "
            f"`sealtrail retention hold {report_hold} --from {first} --to {first} --reason \"{why}\"`",
            seq=receipt.seq, hold_id=report_hold, report_sha256=sha) from exc
    return FiledReport(case_id, receipt.seq, receipt.trace_id, receipt.recorded_at, sha, amends, hold_id,
                       seq_from, seq_to, report_hold)


def _payload_first_seq(engine: Engine, sha: str) -> int:
    p = store.payloads
    with engine.connect() as conn:
        got = conn.execute(select(p.c.first_seq).where(p.c.sha256 == sha)).scalar()
    if got is None:
        raise ReportError("report", f"no stored payload {sha}")
    return int(got)


def _tip(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.max(store.entries.c.seq))).scalar() or 0)


def _filing_events_since(engine: Engine, mark: int, case_id: int, sha: str) -> list[tuple[int, bool | None]]:
    """The ``file_report`` events of report ``sha`` on case ``case_id`` sealed after seq ``mark``,
    each with whether it applied (None: not folded yet)."""
    e = store.entries
    out: list[tuple[int, bool | None]] = []
    with engine.connect() as conn:
        rows = conn.execute(select(e.c.seq, e.c.record).where(e.c.kind == EVENT_KIND, e.c.seq > mark))
        for seq, rec in rows:
            body = orjson.loads(rec)["record"]
            if body.get("action") == "file_report" and body.get("report") == sha \
                    and body.get("target") == {"case": case_id}:
                applied = conn.execute(select(case_events.c.applied)
                                       .where(case_events.c.seq == int(seq))).scalar()
                out.append((int(seq), None if applied is None else bool(applied)))
    return out


def _release_unfiled(ledger: Ledger, hold_id: str, case_id: int, sha: str, mark: int,
                     cause: BaseException) -> None:
    """After the filing failed: release the hold placed for it, unless the event may have been
    sealed and applied all the same (a failure after the commit), in which case the hold stays.
    Anything uncertain keeps the hold (a hold too many is safe), noted on ``cause`` and logged."""
    try:
        sealed = _filing_events_since(ledger.engine, mark, case_id, sha)
        if any(applied is not False for _, applied in sealed):
            seqs = ", ".join(str(s) for s, _ in sealed)
            raise ReportError("hold", f"the report's event was sealed (seq {seqs}) and may be in force")
        release_hold(ledger, hold_id, f"report {sha} on case {case_id} was not filed: "
                                      f"{type(cause).__name__}: {str(cause)[:300]}")
    except Exception as exc:
        note = (f"the legal hold {hold_id} placed for this filing is kept ({exc}); once the case's reports "
                f"are checked (sealtrail reports list {case_id}), release it if no report needs it: "
                f"sealtrail retention release {hold_id} --reason ...")
        cause.add_note(note)
        log.warning("%s", note)


# -- reading filed reports ------------------------------------------------------------------------


@dataclass(frozen=True)
class FiledVersion:
    """One filed report of a case, as its sealed event states it."""

    seq: int
    recorded_at: str
    sha256: str
    amends: str | None
    principal: dict[str, Any]
    rationale: str | None
    in_force: bool
    hold_id: str
    held: bool  # whether the evidence hold is active now


def list_case_reports(engine: Engine, case_id: int) -> list[FiledVersion]:
    """Every report filed on case ``case_id`` (events that applied), oldest first."""
    detail = case_detail(engine, case_id)
    filed = [ev for ev in detail.events if ev.action == "file_report" and ev.applied and ev.report]
    bodies = _event_bodies(engine, [ev.seq for ev in filed])
    active = {h.hold_id for h in current_holds(engine)}
    out = []
    for ev in filed:
        sha = str(ev.report)
        hold = hold_id_of(case_id, sha)
        out.append(FiledVersion(ev.seq, ev.recorded_at, sha, bodies[ev.seq].get("amends"), ev.principal,
                                ev.rationale, ev is filed[-1] and sha == detail.case.last_report, hold,
                                hold in active))
    return out


def _event_bodies(engine: Engine, seqs: Iterable[int]) -> dict[int, dict[str, Any]]:
    e = store.entries
    wanted = list(seqs)
    if not wanted:
        return {}
    with engine.connect() as conn:
        return {int(s): orjson.loads(r)["record"] for s, r in conn.execute(
            select(e.c.seq, e.c.record).where(e.c.seq.in_(wanted)))}


def filed_report(engine: Engine, case_id: int, sha256: str) -> bytes:
    """The bytes of the report ``sha256`` filed on case ``case_id``, from its event's payload.
    ``CaseNotFoundError`` (no such case or report), ``ReportPurgedError`` (the bytes were purged)."""
    if not isinstance(sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise CaseNotFoundError("report", "must be a SHA-256 in lower-case hex")
    if not any(v.sha256 == sha256 for v in list_case_reports(engine, case_id)):
        raise CaseNotFoundError("report", f"no report {sha256} was filed on case {case_id}")
    with engine.connect() as conn:
        data = payload_data(conn, [sha256]).get(sha256)
    if data is None:
        raise ReportPurgedError("report", f"the bytes of report {sha256} on case {case_id} were purged; "
                                "the sealed event keeps its SHA-256")
    return data
