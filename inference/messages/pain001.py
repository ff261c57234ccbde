"""ISO 20022 pain.001 (CustomerCreditTransferInitiation, every version from 001.03) -> ``Transaction``s:
one per ``CdtTrfTxInf``, its debtor, debtor account and agent from its ``PmtInf``.

A customer's instruction to its bank, not yet an interbank payment: the amount is the instructed
amount (``Amt/InstdAmt``, or the equivalent amount ``Amt/EqvtAmt/Amt``), the value date the requested
execution date (``ReqdExctnDt``, a date or, from version 8, ``Dt``/``DtTm``), the initiating party
(``GrpHdr/InitgPty``) and ultimate parties are kept. Findings and refusals as for pacs.008
(``inference.messages.pacs008``); NbOfTxs and CtrlSum are checked for the message and each PmtInf.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import date
from decimal import Decimal
from xml.etree.ElementTree import Element

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import Finding, collect, note
from inference.messages.iso20022 import DOC as _DOC
from inference.messages.iso20022 import document, iso_date, parse_xml
from inference.messages.iso_elements import agent, amount, opt, party, remittance, req, require_party, text
from inference.messages.transaction import R16, Agent, Party, Transaction

__all__ = ["parse_pain001"]

_CHARGES = frozenset({"DEBT", "CRED", "SHAR", "SLEV"})


def parse_pain001(data: bytes) -> list[Transaction]:
    """Every credit transfer a pain.001 initiates, or ``MessageError``."""
    doc, message_type, header = document(parse_xml(data), "pain.001", 3)
    sha = hashlib.sha256(data).hexdigest()
    with collect() as group_found:
        header()
        body = req(doc, "CstmrCdtTrfInitn", _DOC)
        grp = req(body, "GrpHdr", "")
        initg = opt(grp, "InitgPty", "GrpHdr")
        initiating = party(initg, None, "GrpHdr/InitgPty", "") if initg is not None else None
        blocks = body.findall("PmtInf")
        if not blocks:
            raise MessageError("no PmtInf (at least one is mandatory)", field="PmtInf")
    out: list[Transaction] = []
    for b, blk in enumerate(blocks, 1):
        out += _block(blk, f"PmtInf[{b}]", message_type, sha, tuple(group_found), initiating)
    extra = _sums(grp, "GrpHdr", out)
    return [replace(t, findings=(*t.findings, *extra)) for t in out] if extra else out


def _sums(el: Element, p: str, txs: list[Transaction]) -> list[Finding]:
    """NbOfTxs and CtrlSum of a group header or PmtInf against the transactions they count."""
    got: list[Finding] = []
    declared = text(el, "NbOfTxs", p, 15)
    if declared is not None and (not declared.isdigit() or int(declared) != len(txs)):
        got.append(Finding("NB_OF_TXS_MISMATCH", f"{p}/NbOfTxs",
                           f"NbOfTxs {declared!r}; {len(txs)} transactions"))
    ctrl = text(el, "CtrlSum", p, 19)
    if ctrl is not None:
        try:
            ok = Decimal(ctrl) == sum(t.amount for t in txs)
        except ArithmeticError:
            ok = False
        if not ok:
            got.append(Finding("CTRL_SUM_MISMATCH", f"{p}/CtrlSum",
                               f"CtrlSum {ctrl!r} is not the sum of the amounts"))
    return got


def _block(blk: Element, p: str, message_type: str, sha: str, group: tuple[Finding, ...],
           initiating: Party | None) -> list[Transaction]:
    with collect() as found:
        when = opt(blk, "ReqdExctnDt", p)
        if when is None:
            raise MessageError("ReqdExctnDt is missing (mandatory)", field=f"{p}/ReqdExctnDt")
        wp = f"{p}/ReqdExctnDt"
        if len(when):
            given = text(when, "Dt", wp, 10) or text(when, "DtTm", wp, 40)
            if given is None:
                raise MessageError("holds neither Dt nor DtTm", field=wp)
        else:
            given = (when.text or "").strip()
        value_date = iso_date(given, wp)
        debtor = party(req(blk, "Dbtr", p), opt(blk, "DbtrAcct", p), f"{p}/Dbtr", f"{p}/DbtrAcct")
        require_party(debtor, f"{p}/Dbtr")
        dbtr_agt = opt(blk, "DbtrAgt", p)
        agents: list[Agent] = [agent(dbtr_agt, None, "debtor_agent",
                                     f"{p}/DbtrAgt")] if dbtr_agt is not None else []
        ult = opt(blk, "UltmtDbtr", p)
        ultimate_o = party(ult, None, f"{p}/UltmtDbtr", "") if ult is not None else None
        charges = text(blk, "ChrgBr", p, 4)
    block_found = (*group, *found)
    out = [_tx(tx, f"{p}/CdtTrfTxInf[{n}]", message_type, sha, block_found, value_date, debtor, agents,
               ultimate_o, initiating, charges) for n, tx in enumerate(blk.findall("CdtTrfTxInf"), 1)]
    if not out:
        raise MessageError("no CdtTrfTxInf (at least one is mandatory)", field=f"{p}/CdtTrfTxInf")
    extra = _sums(blk, p, out)
    return [replace(t, findings=(*t.findings, *extra)) for t in out] if extra else out


def _tx(tx: Element, p: str, message_type: str, sha: str, inherited: tuple[Finding, ...], value_date: date,
        debtor: Party, agents: list[Agent], ultimate_o: Party | None, initiating: Party | None,
        charges: str | None) -> Transaction:
    with collect() as found:
        pmt = req(tx, "PmtId", p)
        amt_el = req(tx, "Amt", p)
        instd = opt(amt_el, "InstdAmt", f"{p}/Amt")
        if instd is not None:
            amt, ccy = amount(instd, f"{p}/Amt/InstdAmt")
        else:
            eqvt = req(amt_el, "EqvtAmt", f"{p}/Amt")
            amt, ccy = amount(req(eqvt, "Amt", f"{p}/Amt/EqvtAmt"), f"{p}/Amt/EqvtAmt/Amt")
        creditor = party(req(tx, "Cdtr", p), opt(tx, "CdtrAcct", p), f"{p}/Cdtr", f"{p}/CdtrAcct")
        require_party(creditor, f"{p}/Cdtr")
        chain = list(agents)
        for tag, role in (("IntrmyAgt1", "intermediary"), ("CdtrAgt", "creditor_agent")):
            if (el := opt(tx, tag, p)) is not None:
                chain.append(agent(el, None, role, f"{p}/{tag}"))
        ult_c = opt(tx, "UltmtCdtr", p)
        ult_d = opt(tx, "UltmtDbtr", p)
        own_charges = text(tx, "ChrgBr", p, 4) or charges
        if own_charges is not None and own_charges not in _CHARGES:
            note("CODE_NOT_IN_LIST", f"{p}/ChrgBr", f"{own_charges!r} is not one of {sorted(_CHARGES)}")
        uetr = text(pmt, "UETR", f"{p}/PmtId", 36)
        reference = text(pmt, "EndToEndId", f"{p}/PmtId", 35)
        if reference is None:
            note("MANDATORY_FIELD_MISSING", f"{p}/PmtId/EndToEndId", "the end-to-end id is missing")
        return Transaction(
            message_type=message_type, reference=reference or "NOTPROVIDED",
            related_reference=text(pmt, "InstrId", f"{p}/PmtId", 35), amount=amt, currency=ccy,
            value_date=value_date,
            originator=debtor, beneficiary=creditor, agents=tuple(chain),
            uetr=fields.uetr_or_none(uetr, f"{p}/PmtId/UETR") if uetr is not None else None,
            remittance=remittance(opt(tx, "RmtInf", p), f"{p}/RmtInf"), charges=own_charges, raw_sha256=sha,
            r16=R16.of(debtor, creditor), findings=(*inherited, *found),
            ultimate_originator=party(ult_d, None, f"{p}/UltmtDbtr", "") if ult_d is not None else ultimate_o,
            ultimate_beneficiary=party(ult_c, None, f"{p}/UltmtCdtr", "") if ult_c is not None else None,
            initiating_party=initiating)
