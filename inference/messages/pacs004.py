"""ISO 20022 pacs.004 (PaymentReturn, every version from 001.02) -> ``Transaction``s, one per ``TxInf``.

A return moves money back: its originator is the party returning the funds (the original creditor)
and its beneficiary the original debtor. Version 9 and later state the return's own chain
(``RtrChain``: Dbtr/Cdtr as ``Pty`` or ``Agt``); earlier versions only the original transaction
(``OrgnlTxRef``), whose debtor and creditor are then swapped. The amount is the returned interbank
settlement amount (``RtrdIntrBkSttlmAmt``); the returned payment (``OrgnlUETR``, ``OrgnlEndToEndId``,
``OrgnlInstrId``, the return reason code) is kept as ``Transaction.original``. Findings and refusals
as for pacs.008 (``inference.messages.pacs008``).
"""

from __future__ import annotations

import hashlib
from xml.etree.ElementTree import Element

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import collect, note
from inference.messages.iso20022 import DOC as _DOC
from inference.messages.iso20022 import document, iso_date, parse_xml
from inference.messages.iso_elements import agent, amount, opt, party, remittance, req, require_party, text
from inference.messages.transaction import R16, Agent, Original, Party, Transaction

__all__ = ["parse_pacs004"]

_INSTRUCTING = (("InstgAgt", "instructing"), ("InstdAgt", "instructed"))
_CHAIN = (("DbtrAgt", "debtor_agent"), ("IntrmyAgt1", "intermediary"), ("CdtrAgt", "creditor_agent"))


def parse_pacs004(data: bytes) -> list[Transaction]:
    """Every return in a pacs.004 message, or ``MessageError``."""
    doc, message_type, header = document(parse_xml(data), "pacs.004", 2)
    with collect() as group_found:
        header()
        body = req(doc, "PmtRtr", _DOC)
        grp = req(body, "GrpHdr", "")
        txs = body.findall("TxInf")
        if not txs:
            raise MessageError("no TxInf (at least one is mandatory)", field="TxInf")
        declared = text(grp, "NbOfTxs", "GrpHdr", 15)
        if declared is not None and (not declared.isdigit() or int(declared) != len(txs)):
            note("NB_OF_TXS_MISMATCH", "GrpHdr/NbOfTxs",
                 f"NbOfTxs {declared!r}; the message holds {len(txs)}")
        grp_date = text(grp, "IntrBkSttlmDt", "GrpHdr", 25)
        grp_value_date = iso_date(grp_date, "GrpHdr/IntrBkSttlmDt") if grp_date is not None else None
        grp_agents = {tag: agent(el, None, role, f"GrpHdr/{tag}") for tag, role in _INSTRUCTING
                      if (el := opt(grp, tag, "GrpHdr")) is not None}
    sha = hashlib.sha256(data).hexdigest()
    out = []
    for n, tx in enumerate(txs, 1):
        p = f"TxInf[{n}]"
        with collect() as found:
            amt, ccy = amount(req(tx, "RtrdIntrBkSttlmAmt", p), f"{p}/RtrdIntrBkSttlmAmt")
            sttl = text(tx, "IntrBkSttlmDt", p, 25)
            value_date = iso_date(sttl, f"{p}/IntrBkSttlmDt") if sttl is not None else grp_value_date
            if value_date is None:
                raise MessageError("IntrBkSttlmDt is missing here and in GrpHdr (mandatory)",
                                   field=f"{p}/IntrBkSttlmDt")
            instd = opt(tx, "RtrdInstdAmt", p)
            instructed, instructed_ccy = amount(instd, f"{p}/RtrdInstdAmt") if instd is not None else (None,
                                                                                                       None)
            originator, beneficiary, chain_agents = _parties(tx, p)
            uetr = text(tx, "OrgnlUETR", p, 36)
            reason = None
            if (rsn := opt(tx, "RtrRsnInf", p)) is not None and (r := opt(rsn, "Rsn",
                                                                          f"{p}/RtrRsnInf")) is not None:
                reason = text(r, "Cd", f"{p}/RtrRsnInf/Rsn", 4) or text(r, "Prtry", f"{p}/RtrRsnInf/Rsn", 35)
            original = Original(uetr=fields.uetr_or_none(uetr, f"{p}/OrgnlUETR") if uetr else None,
                                end_to_end_id=text(tx, "OrgnlEndToEndId", p, 35),
                                instruction_id=text(tx, "OrgnlInstrId", p, 35), reason=reason)
            reference = text(tx, "RtrId", p, 35) or original.end_to_end_id
            if reference is None:
                note("MANDATORY_FIELD_MISSING", f"{p}/RtrId",
                     "neither RtrId nor OrgnlEndToEndId; NOTPROVIDED used")
            agents = [a for tag, role in _INSTRUCTING
                      if (a := (agent(el, None, role, f"{p}/{tag}") if (el := opt(tx, tag, p)) is not None
                                else grp_agents.get(tag))) is not None]
            ref = opt(tx, "OrgnlTxRef", p)
            out.append(Transaction(
                message_type=message_type, reference=reference or "NOTPROVIDED",
                related_reference=original.end_to_end_id, amount=amt, currency=ccy, value_date=value_date,
                instructed_amount=instructed, instructed_currency=instructed_ccy,
                originator=originator, beneficiary=beneficiary, agents=(*agents, *chain_agents),
                remittance=remittance(opt(ref, "RmtInf", f"{p}/OrgnlTxRef"), f"{p}/OrgnlTxRef/RmtInf")
                if ref is not None else None,
                charges=text(tx, "ChrgBr", p, 4), raw_sha256=sha, r16=R16.of(originator, beneficiary),
                findings=(*group_found, *found), original=original))
    return out


def _parties(tx: Element, p: str) -> tuple[Party, Party, tuple[Agent, ...]]:
    """The return's originator and beneficiary, and its agents: from ``RtrChain`` where stated, else
    the original transaction's creditor and debtor, swapped."""
    chain, ref = opt(tx, "RtrChain", p), opt(tx, "OrgnlTxRef", p)
    if chain is not None:
        cp = f"{p}/RtrChain"
        dbtr, cdtr = opt(chain, "Dbtr", cp), opt(chain, "Cdtr", cp)
        if dbtr is not None and cdtr is not None:
            acct_src = ref if ref is not None else chain
            ap = f"{p}/OrgnlTxRef" if ref is not None else cp
            orig = party(dbtr, opt(acct_src, "CdtrAcct", ap), f"{cp}/Dbtr", f"{ap}/CdtrAcct")
            bene = party(cdtr, opt(acct_src, "DbtrAcct", ap), f"{cp}/Cdtr", f"{ap}/DbtrAcct")
            return require_party(orig, f"{cp}/Dbtr"), require_party(bene, f"{cp}/Cdtr"), _agents(chain, cp)
    if ref is None:
        raise MessageError("the return names no parties (neither RtrChain nor OrgnlTxRef)",
                           field=f"{p}/OrgnlTxRef")
    rp = f"{p}/OrgnlTxRef"
    cdtr, dbtr = opt(ref, "Cdtr", rp), opt(ref, "Dbtr", rp)
    if cdtr is None or dbtr is None:
        raise MessageError("the original transaction names no debtor and creditor", field=f"{rp}/Dbtr")
    orig = party(cdtr, opt(ref, "CdtrAcct", rp), f"{rp}/Cdtr", f"{rp}/CdtrAcct")
    bene = party(dbtr, opt(ref, "DbtrAcct", rp), f"{rp}/Dbtr", f"{rp}/DbtrAcct")
    return require_party(orig, f"{rp}/Cdtr"), require_party(bene, f"{rp}/Dbtr"), _agents(ref, rp)


def _agents(el: Element, p: str) -> tuple[Agent, ...]:
    return tuple(agent(a, None, role, f"{p}/{tag}") for tag, role in _CHAIN
                 if (a := opt(el, tag, p)) is not None)
