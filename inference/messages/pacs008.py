"""ISO 20022 interbank credit transfers -> ``Transaction``s: pacs.008 (FIToFICustomerCreditTransfer,
every version from 001.02) and pacs.009 (FinancialInstitutionCreditTransfer, core and COV).

The XML is read by ``iso20022.parse_xml`` (defusedxml, size cap, UTF-8 only) and
``iso20022.document`` (a bare ``Document``, or one beside a head.001 ``AppHdr`` in any envelope).
Each ``CdtTrfTxInf`` becomes one Transaction. Read liberally (``inference.messages.findings``): a
group header without settlement information, NbOfTxs or CtrlSum that do not add up, a missing charge
bearer or debtor/creditor agent, a code outside its list are findings on every transaction they
concern; what cannot be read raises ``MessageError`` naming its path, e.g.
``CdtTrfTxInf[2]/IntrBkSttlmAmt`` (1-based, as in XPath). Two different settlement dates (group and
transaction) are refused: the payment would read two ways.

A pacs.009's debtor and creditor are financial institutions (their BIC is their identifier); a
pacs.009 COV carries the customer credit transfer it covers (``UndrlygCstmrCdtTrf``), whose debtor
and creditor become the originator and beneficiary, as an MT202COV's sequence B does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal
from xml.etree.ElementTree import Element

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import Finding, collect, note
from inference.messages.iso20022 import DOC as _DOC
from inference.messages.iso20022 import MAX_XML_BYTES, document, iso_date, parse_xml
from inference.messages.iso_elements import (
    agent,
    amount,
    institution_party,
    opt,
    party,
    remittance,
    req,
    require_party,
    text,
)
from inference.messages.transaction import R16, Agent, Party, Transaction

__all__ = ["MAX_XML_BYTES", "parse_pacs008", "parse_pacs009", "parse_transfers"]

_CTRL_SUM = re.compile(r"[0-9]{1,18}(?:\.[0-9]{1,17})?")
_CHARGES = frozenset({"DEBT", "CRED", "SHAR", "SLEV"})
_SETTLEMENT = frozenset({"INDA", "INGA", "COVE", "CLRG"})
_INSTRUCTING = (("InstgAgt", "instructing"), ("InstdAgt", "instructed"))
# (element, its account element, role), in payment-chain order
_CHAIN = (("DbtrAgt", "DbtrAgtAcct", "debtor_agent"), ("IntrmyAgt1", "IntrmyAgt1Acct", "intermediary"),
          ("IntrmyAgt2", "IntrmyAgt2Acct", "intermediary"), ("IntrmyAgt3", "IntrmyAgt3Acct", "intermediary"),
          ("CdtrAgt", "CdtrAgtAcct", "creditor_agent"))
_BODY = {"pacs.008": "FIToFICstmrCdtTrf", "pacs.009": "FICdtTrf"}


def parse_pacs008(data: bytes) -> list[Transaction]:
    """Every credit transfer in a pacs.008 message, or ``MessageError``."""
    return parse_transfers(data, "pacs.008")


def parse_pacs009(data: bytes) -> list[Transaction]:
    """Every credit transfer in a pacs.009 (core or COV) message, or ``MessageError``."""
    return parse_transfers(data, "pacs.009")


def parse_transfers(data: bytes, family: str) -> list[Transaction]:
    doc, message_type, header = document(parse_xml(data), family, 2)
    with collect() as group_found:
        header()
        body = req(doc, _BODY[family], _DOC)
        grp = req(body, "GrpHdr", "")
        if text(grp, "MsgId", "GrpHdr", 35) is None:
            note("MANDATORY_FIELD_MISSING", "GrpHdr/MsgId", "the message identification is missing")
        txs = body.findall("CdtTrfTxInf")
        if not txs:
            raise MessageError("no CdtTrfTxInf (at least one is mandatory)", field="CdtTrfTxInf")
        declared = text(grp, "NbOfTxs", "GrpHdr", 15)
        if declared is None:
            note("MANDATORY_FIELD_MISSING", "GrpHdr/NbOfTxs", "the number of transactions is missing")
        elif not declared.isascii() or not declared.isdigit() or int(declared) != len(txs):
            note("NB_OF_TXS_MISMATCH", "GrpHdr/NbOfTxs",
                 f"NbOfTxs {declared!r}; the message holds {len(txs)}")
        sttlm = opt(grp, "SttlmInf", "GrpHdr")
        method = text(sttlm, "SttlmMtd", "GrpHdr/SttlmInf", 4) if sttlm is not None else None
        if method is None:
            note("MISSING_SETTLEMENT_INFO", "GrpHdr/SttlmInf", "no settlement method (SttlmInf/SttlmMtd)")
        elif method not in _SETTLEMENT:
            note("CODE_NOT_IN_LIST", "GrpHdr/SttlmInf/SttlmMtd",
                 f"{method!r} is not one of {sorted(_SETTLEMENT)}")
        grp_date = text(grp, "IntrBkSttlmDt", "GrpHdr", 25)
        grp_value_date = iso_date(grp_date, "GrpHdr/IntrBkSttlmDt") if grp_date is not None else None
        agents = {}
        for tag, role in _INSTRUCTING:
            if (el := opt(grp, tag, "GrpHdr")) is not None:
                agents[tag] = agent(el, None, role, f"GrpHdr/{tag}")
    group = _Group(message_type, hashlib.sha256(data).hexdigest(), grp_value_date, agents, tuple(group_found))
    out = [_transaction(tx, f"CdtTrfTxInf[{n}]", group, family) for n, tx in enumerate(txs, 1)]
    ctrl = text(grp, "CtrlSum", "GrpHdr", 19)
    if ctrl is not None and (not _CTRL_SUM.fullmatch(ctrl) or Decimal(ctrl) != sum(t.amount for t in out)):
        found = Finding("CTRL_SUM_MISMATCH", "GrpHdr/CtrlSum",
                        f"CtrlSum {ctrl!r} is not the sum of the amounts")
        out = [replace(t, findings=(*t.findings, found)) for t in out]
    return out


@dataclass(frozen=True, slots=True)
class _Group:
    """What every transaction of the message shares."""

    message_type: str
    sha256: str
    value_date: date | None  # GrpHdr/IntrBkSttlmDt, the default for each transaction
    agents: dict[str, Agent]  # GrpHdr/InstgAgt and InstdAgt, the defaults
    findings: tuple[Finding, ...]  # the group header's, on every transaction


def _transaction(tx: Element, p: str, group: _Group, family: str) -> Transaction:
    with collect() as found:
        pmt = req(tx, "PmtId", p)
        pp = f"{p}/PmtId"
        uetr = text(pmt, "UETR", pp, 36)
        amt, currency = amount(req(tx, "IntrBkSttlmAmt", p), f"{p}/IntrBkSttlmAmt")
        sttl = text(tx, "IntrBkSttlmDt", p, 25)
        value_date = iso_date(sttl, f"{p}/IntrBkSttlmDt") if sttl is not None else group.value_date
        if value_date is None:
            raise MessageError("IntrBkSttlmDt is missing here and in GrpHdr (mandatory)",
                               field=f"{p}/IntrBkSttlmDt")
        if group.value_date is not None and value_date != group.value_date:
            note("SETTLEMENT_DATE_CONFLICT", f"{p}/IntrBkSttlmDt",
                 f"{value_date} here, {group.value_date} in GrpHdr/IntrBkSttlmDt")
        rate_text = text(tx, "XchgRate", p, 23)
        rate = fields.rate(rate_text, f"{p}/XchgRate", decimal_mark=".") if rate_text else None
        charges = text(tx, "ChrgBr", p, 4)
        if charges is None and family == "pacs.008":
            note("MANDATORY_FIELD_MISSING", f"{p}/ChrgBr", "the charge bearer is missing")
        elif charges is not None and charges not in _CHARGES:
            note("CODE_NOT_IN_LIST", f"{p}/ChrgBr", f"{charges!r} is not one of {sorted(_CHARGES)}")
        cover = opt(tx, "UndrlygCstmrCdtTrf", p) if family == "pacs.009" else None
        src, sp = (cover, f"{p}/UndrlygCstmrCdtTrf") if cover is not None else (tx, p)
        instd = opt(src, "InstdAmt", sp)
        instructed, instructed_ccy = amount(instd, f"{sp}/InstdAmt") if instd is not None else (None, None)
        if family == "pacs.009" and cover is None:
            originator = institution_party(req(tx, "Dbtr", p), opt(tx, "DbtrAcct", p), f"{p}/Dbtr",
                                           f"{p}/DbtrAcct")
            beneficiary = institution_party(req(tx, "Cdtr", p), opt(tx, "CdtrAcct", p), f"{p}/Cdtr",
                                            f"{p}/CdtrAcct")
            ultimate_o = ultimate_b = None
        else:
            originator = party(req(src, "Dbtr", sp), opt(src, "DbtrAcct", sp), f"{sp}/Dbtr", f"{sp}/DbtrAcct")
            beneficiary = party(req(src, "Cdtr", sp), opt(src, "CdtrAcct", sp), f"{sp}/Cdtr",
                                f"{sp}/CdtrAcct")
            ultimate_o = _opt_party(src, "UltmtDbtr", sp)
            ultimate_b = _opt_party(src, "UltmtCdtr", sp)
        require_party(originator, f"{sp}/Dbtr")
        require_party(beneficiary, f"{sp}/Cdtr")
        agents = _agents(tx, p, group, family, cover)
        rmt = remittance(opt(src, "RmtInf", sp), f"{sp}/RmtInf")
        reference = text(pmt, "EndToEndId", pp, 35)
        if reference is None:
            note("MANDATORY_FIELD_MISSING", f"{pp}/EndToEndId",
                 "the end-to-end id is missing; NOTPROVIDED used")
        return Transaction(
            message_type=group.message_type,
            reference=reference or "NOTPROVIDED",
            related_reference=text(pmt, "InstrId", pp, 35),
            uetr=fields.uetr_or_none(uetr, f"{pp}/UETR") if uetr is not None else None,
            amount=amt, currency=currency, value_date=value_date,
            instructed_amount=instructed, instructed_currency=instructed_ccy,
            exchange_rate=rate, originator=originator, beneficiary=beneficiary,
            agents=agents, remittance=rmt, charges=charges, raw_sha256=group.sha256,
            r16=R16.of(originator, beneficiary), findings=(*group.findings, *found),
            ultimate_originator=ultimate_o, ultimate_beneficiary=ultimate_b,
        )


def _opt_party(el: Element, tag: str, p: str) -> Party | None:
    found = opt(el, tag, p)
    return None if found is None else party(found, None, f"{p}/{tag}", "")


def _agents(tx: Element, p: str, group: _Group, family: str, cover: Element | None) -> tuple[Agent, ...]:
    out = []
    for tag, role in _INSTRUCTING:
        el = opt(tx, tag, p)
        ag = agent(el, None, role, f"{p}/{tag}") if el is not None else group.agents.get(tag)
        if ag is not None:
            out.append(ag)
    chains = [(tx, p)] + ([(cover, f"{p}/UndrlygCstmrCdtTrf")] if cover is not None else [])
    for src, sp in chains:
        for tag, acct, role in _CHAIN:
            el = opt(src, tag, sp)
            if el is not None:
                out.append(agent(el, opt(src, acct, sp), role, f"{sp}/{tag}", f"{sp}/{acct}"))
            elif tag in ("DbtrAgt", "CdtrAgt") and family == "pacs.008":
                note("MANDATORY_FIELD_MISSING", f"{sp}/{tag}", f"{tag} is missing")
    return tuple(out)

