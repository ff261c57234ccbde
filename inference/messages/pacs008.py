"""ISO 20022 pacs.008 (FIToFICustomerCreditTransfer, 001.08 and later) -> ``Transaction``s.

The XML is parsed with defusedxml (no DTD, entity declarations or external references: a
billion-laughs bomb or an external entity is refused, never expanded), at most
``MAX_XML_BYTES``, UTF-8 only. A bare ``Document`` or an envelope holding an ``AppHdr``
(head.001) and the ``Document`` is accepted. Each ``CdtTrfTxInf`` becomes one Transaction;
any missing mandatory element or bad value raises ``MessageError`` naming its path, e.g.
``CdtTrfTxInf[2]/IntrBkSttlmAmt`` (1-based, as in XPath).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from xml.etree.ElementTree import Element

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.iso20022 import DOC as _DOC
from inference.messages.iso20022 import MAX_XML_BYTES, document, parse_xml
from inference.messages.transaction import R16, Agent, Identifier, Party, Transaction

__all__ = ["MAX_XML_BYTES", "parse_pacs008"]

_CODE = re.compile(r"[A-Z0-9]{1,4}")  # external code lists (ISO 20022 ExternalCode, 1-4 chars)
_CTRL_SUM = re.compile(r"[0-9]{1,18}(?:\.[0-9]{1,17})?")
# Control characters (C0 with tab, CR and LF, DEL, C1): refused in every text value, as the JSON and
# SWIFT parsers refuse them; the ISO 20022 text types carry one line each (remittance is lines of Ustrd).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CHARGES = frozenset({"DEBT", "CRED", "SHAR", "SLEV"})
_SETTLEMENT = frozenset({"INDA", "INGA", "COVE", "CLRG"})
_INSTRUCTING = (("InstgAgt", "instructing"), ("InstdAgt", "instructed"))
# (element, its account element, role), in payment-chain order
_CHAIN = (("DbtrAgt", "DbtrAgtAcct", "debtor_agent"), ("IntrmyAgt1", "IntrmyAgt1Acct", "intermediary"),
          ("IntrmyAgt2", "IntrmyAgt2Acct", "intermediary"), ("IntrmyAgt3", "IntrmyAgt3Acct", "intermediary"),
          ("CdtrAgt", "CdtrAgtAcct", "creditor_agent"))
_MANDATORY_AGENTS = frozenset({"DbtrAgt", "CdtrAgt"})
# PostalAddress24 parts read (others, such as AdrTp, are ignored) and their maximum lengths
_ADDRESS_PARTS = {"Dept": 70, "SubDept": 70, "StrtNm": 70, "BldgNb": 16, "BldgNm": 35, "Flr": 70,
                  "PstBx": 16, "Room": 70, "PstCd": 16, "TwnNm": 35, "TwnLctnNm": 35, "DstrctNm": 35,
                  "CtrySubDvsn": 35, "Ctry": 2}


def parse_pacs008(data: bytes) -> list[Transaction]:
    """Every credit transfer in a pacs.008 message, or ``MessageError``."""
    doc, message_type = document(parse_xml(data), "pacs.008.001.", 8)
    body = _req(doc, "FIToFICstmrCdtTrf", _DOC)
    grp = _req(body, "GrpHdr", "")
    _req_text(grp, "MsgId", "GrpHdr", 35)
    txs = body.findall("CdtTrfTxInf")
    if not txs:
        raise MessageError("no CdtTrfTxInf (at least one is mandatory)", field="CdtTrfTxInf")
    declared = _req_text(grp, "NbOfTxs", "GrpHdr", 15)
    if not declared.isascii() or not declared.isdigit() or int(declared) != len(txs):
        raise MessageError(f"NbOfTxs {declared!r} but the message holds {len(txs)} CdtTrfTxInf",
                           field="GrpHdr/NbOfTxs")
    method = _req_text(_req(grp, "SttlmInf", "GrpHdr"), "SttlmMtd", "GrpHdr/SttlmInf", 4)
    if method not in _SETTLEMENT:
        raise MessageError(f"SttlmMtd {method!r} is not one of {sorted(_SETTLEMENT)}",
                           field="GrpHdr/SttlmInf/SttlmMtd")
    grp_date = _text(grp, "IntrBkSttlmDt", "GrpHdr", 10)
    agents = {}
    for tag, role in _INSTRUCTING:
        if (el := _opt(grp, tag, "GrpHdr")) is not None:
            agents[tag] = _agent(el, None, role, f"GrpHdr/{tag}")
    grp_value_date = fields.iso_date(grp_date, "GrpHdr/IntrBkSttlmDt") if grp_date is not None else None
    group = _Group(message_type, hashlib.sha256(data).hexdigest(), grp_value_date, agents)
    out = [_transaction(tx, f"CdtTrfTxInf[{n}]", group) for n, tx in enumerate(txs, 1)]
    ctrl = _text(grp, "CtrlSum", "GrpHdr", 19)
    if ctrl is not None and (not _CTRL_SUM.fullmatch(ctrl) or Decimal(ctrl) != sum(t.amount for t in out)):
        raise MessageError(f"CtrlSum {ctrl!r} is not the sum of the IntrBkSttlmAmt",
                           field="GrpHdr/CtrlSum")
    return out


@dataclass(frozen=True, slots=True)
class _Group:
    """What every transaction of the message shares."""

    message_type: str
    sha256: str
    value_date: date | None  # GrpHdr/IntrBkSttlmDt, the default for each transaction
    agents: dict[str, Agent]  # GrpHdr/InstgAgt and InstdAgt, the defaults


def _transaction(tx: Element, p: str, group: _Group) -> Transaction:
    pmt = _req(tx, "PmtId", p)
    pp = f"{p}/PmtId"
    uetr = _text(pmt, "UETR", pp, 36)
    amount, currency = _amount(_req(tx, "IntrBkSttlmAmt", p), f"{p}/IntrBkSttlmAmt")
    instd = _opt(tx, "InstdAmt", p)
    instructed, instructed_ccy = _amount(instd, f"{p}/InstdAmt") if instd is not None else (None, None)
    sttl = _text(tx, "IntrBkSttlmDt", p, 10)
    value_date = fields.iso_date(sttl, f"{p}/IntrBkSttlmDt") if sttl is not None else group.value_date
    if value_date is None:
        raise MessageError("IntrBkSttlmDt is missing here and in GrpHdr (mandatory)",
                           field=f"{p}/IntrBkSttlmDt")
    rate_text = _text(tx, "XchgRate", p, 23)
    rate = fields.rate(rate_text, f"{p}/XchgRate", decimal_mark=".") if rate_text else None
    charges = _req_text(tx, "ChrgBr", p, 4)
    if charges not in _CHARGES:
        raise MessageError(f"ChrgBr {charges!r} is not one of {sorted(_CHARGES)}", field=f"{p}/ChrgBr")
    originator = _party(_req(tx, "Dbtr", p), _opt(tx, "DbtrAcct", p), f"{p}/Dbtr", f"{p}/DbtrAcct")
    beneficiary = _party(_req(tx, "Cdtr", p), _opt(tx, "CdtrAcct", p), f"{p}/Cdtr", f"{p}/CdtrAcct")
    return Transaction(
        message_type=group.message_type,
        reference=_req_text(pmt, "EndToEndId", pp, 35),
        related_reference=_text(pmt, "InstrId", pp, 35),
        uetr=fields.uetr(uetr, f"{pp}/UETR") if uetr is not None else None,
        amount=amount, currency=currency, value_date=value_date,
        instructed_amount=instructed, instructed_currency=instructed_ccy,
        exchange_rate=rate,
        originator=originator, beneficiary=beneficiary,
        agents=_agents(tx, p, group), remittance=_remittance(_opt(tx, "RmtInf", p), f"{p}/RmtInf"),
        charges=charges, raw_sha256=group.sha256, r16=R16.of(originator, beneficiary),
    )


def _agents(tx: Element, p: str, group: _Group) -> tuple[Agent, ...]:
    out = []
    for tag, role in _INSTRUCTING:
        el = _opt(tx, tag, p)
        agent = _agent(el, None, role, f"{p}/{tag}") if el is not None else group.agents.get(tag)
        if agent is not None:
            out.append(agent)
    for tag, acct, role in _CHAIN:
        el = _req(tx, tag, p) if tag in _MANDATORY_AGENTS else _opt(tx, tag, p)
        if el is not None:
            out.append(_agent(el, _opt(tx, acct, p), role, f"{p}/{tag}", f"{p}/{acct}"))
    return tuple(out)


def _agent(el: Element, acct: Element | None, role: str, where: str, acct_where: str = "") -> Agent:
    fin = _req(el, "FinInstnId", where)
    w = f"{where}/FinInstnId"
    bic = _text(fin, "BICFI", w, 11)
    name = _text(fin, "Nm", w, 140)
    lines, ctry = _address(_opt(fin, "PstlAdr", w), f"{w}/PstlAdr")
    return Agent(role=role, bic=fields.bic(bic, f"{w}/BICFI") if bic is not None else None,
                 account=_account(acct, acct_where)[0] if acct is not None else None,
                 name_address=(*([name] if name else ()), *lines, *([ctry] if ctry else ())))


def _party(el: Element, acct: Element | None, where: str, acct_where: str) -> Party:
    lines, ctry = _address(_opt(el, "PstlAdr", where), f"{where}/PstlAdr")
    if ctry is None and (res := _text(el, "CtryOfRes", where, 2)) is not None:
        ctry = fields.country(res, f"{where}/CtryOfRes")
    identifiers, bic = _identifiers(_opt(el, "Id", where), f"{where}/Id")
    account, iban = _account(acct, acct_where) if acct is not None else (None, None)
    return Party(name=_text(el, "Nm", where, 140), account=account, iban=iban, bic=bic,
                 address_lines=lines, country=ctry, identifiers=identifiers)


def _account(acct: Element, where: str) -> tuple[str, str | None]:
    ident = _req(acct, "Id", where)
    w = f"{where}/Id"
    text = _text(ident, "IBAN", w, 34)
    if text is not None:
        iban = fields.iban_or_none(text)
        if iban is None:
            raise MessageError(f"IBAN {text!r} is invalid (country, length or check digits)",
                               field=f"{w}/IBAN")
        return text, iban
    othr = _opt(ident, "Othr", w)
    if othr is None:
        raise MessageError("account Id has neither IBAN nor Othr (one is mandatory)", field=w)
    text = _req_text(othr, "Id", f"{w}/Othr", 34)
    return text, fields.iban_or_none(text)


def _address(adr: Element | None, w: str) -> tuple[tuple[str, ...], str | None]:
    """Structured parts as lines ('StrtNm BldgNb', 'PstCd TwnNm', ...), then each AdrLine."""
    if adr is None:
        return (), None
    got: dict[str, str] = {}
    adr_lines: list[str] = []
    for child in adr:  # one pass over the children, not one search per part
        tag = child.tag
        if tag == "AdrLine":
            adr_lines.append(_value(child, w, 70))
        elif (limit := _ADDRESS_PARTS.get(tag)) is not None:
            if tag in got:
                raise MessageError(f"{tag} appears twice; at most once is allowed", field=f"{w}/{tag}")
            got[tag] = _value(child, w, limit)
    if len(adr_lines) > 7:
        raise MessageError(f"{len(adr_lines)} AdrLine; at most 7 are allowed", field=f"{w}/AdrLine")
    g = got.get
    lines = [s for s in (g("Dept"), g("SubDept"), _join(g("StrtNm"), g("BldgNb")), g("BldgNm"),
                         _join(g("Flr"), g("Room")), g("PstBx"), _join(g("PstCd"), g("TwnNm")),
                         g("TwnLctnNm"), g("DstrctNm"), g("CtrySubDvsn")) if s]
    ctry = g("Ctry")
    return (*lines, *adr_lines), fields.country(ctry, f"{w}/Ctry") if ctry is not None else None


def _join(a: str | None, b: str | None) -> str | None:
    return f"{a} {b}" if a and b else a or b


def _identifiers(el: Element | None, w: str) -> tuple[tuple[Identifier, ...], str | None]:
    """PrvtId (birth date and place, other ids) or OrgId (BIC, LEI, other ids); and the BIC."""
    if el is None:
        return (), None
    prvt, org = _opt(el, "PrvtId", w), _opt(el, "OrgId", w)
    if (prvt is None) == (org is None):
        raise MessageError("Id must hold exactly one of PrvtId and OrgId", field=w)
    out: list[Identifier] = []
    bic = None
    if prvt is not None:
        w += "/PrvtId"
        birth = _opt(prvt, "DtAndPlcOfBirth", w)
        if birth is not None:
            bw = f"{w}/DtAndPlcOfBirth"
            born = fields.iso_date(_req_text(birth, "BirthDt", bw, 10), f"{bw}/BirthDt")
            city = _req_text(birth, "CityOfBirth", bw, 35)
            ctry = fields.country(_req_text(birth, "CtryOfBirth", bw, 2), f"{bw}/CtryOfBirth")
            out += [Identifier("DOB", born.isoformat()), Identifier("POB", f"{city}, {ctry}", ctry)]
        holder = prvt
    else:
        assert org is not None
        w += "/OrgId"
        any_bic = _text(org, "AnyBIC", w, 11)
        if any_bic is not None:
            bic = fields.bic(any_bic, f"{w}/AnyBIC")
            out.append(Identifier("BIC", bic))
        lei = _text(org, "LEI", w, 20)
        if lei is not None:
            out.append(Identifier("LEI", fields.lei(lei, f"{w}/LEI")))
        holder = org
    for n, othr in enumerate(holder.findall("Othr"), 1):
        ow = f"{w}/Othr[{n}]"
        value = _req_text(othr, "Id", ow, 35)
        scheme_el = _opt(othr, "SchmeNm", ow)
        code = _text(scheme_el, "Cd", f"{ow}/SchmeNm", 4) if scheme_el is not None else None
        if code is not None and not _CODE.fullmatch(code):
            raise MessageError(f"scheme code {code!r} is not 1-4 capitals or digits",
                               field=f"{ow}/SchmeNm/Cd")
        out.append(Identifier(code or "OTHR", value))
    return tuple(out), bic


def _remittance(el: Element | None, w: str) -> str | None:
    if el is None:
        return None
    lines = [_value(u, w, 140) for u in el.findall("Ustrd")]
    for n, strd in enumerate(el.findall("Strd"), 1):
        ref = _opt(strd, "CdtrRefInf", f"{w}/Strd[{n}]")
        if ref is not None and (text := _text(ref, "Ref", f"{w}/Strd[{n}]/CdtrRefInf", 35)):
            lines.append(text)
    return "\n".join(lines) or None


def _amount(el: Element, where: str) -> tuple[Decimal, str]:
    ccy = el.get("Ccy")
    if ccy is None:
        raise MessageError("Ccy attribute is missing (mandatory)", field=f"{where}/@Ccy")
    fields.currency_exponent(ccy, f"{where}/@Ccy")
    text = _value(el, where.rpartition("/")[0], 19)
    return fields.amount(text, ccy, where, decimal_mark="."), ccy



def _opt(parent: Element, tag: str, path: str) -> Element | None:
    found = parent.findall(tag)
    if not found:
        return None
    if len(found) > 1:
        raise MessageError(f"{tag} appears {len(found)} times; at most once is allowed",
                           field=f"{path}/{tag}".lstrip("/"))
    return found[0]


def _req(parent: Element, tag: str, path: str) -> Element:
    el = _opt(parent, tag, path)
    if el is None:
        raise MessageError(f"{tag} is missing (mandatory)", field=f"{path}/{tag}".lstrip("/"))
    return el


def _value(el: Element, path: str, max_len: int) -> str:
    text = (el.text or "").strip()
    if not text or len(el):
        raise MessageError(f"{el.tag} must hold text (1-{max_len} characters)",
                           field=f"{path}/{el.tag}".lstrip("/"))
    if len(text) > max_len:
        raise MessageError(f"{el.tag} is {len(text)} characters; at most {max_len} are allowed",
                           field=f"{path}/{el.tag}".lstrip("/"))
    if (bad := _CONTROL.search(text)) is not None:
        raise MessageError(f"{el.tag} holds the control character U+{ord(bad.group()):04X}",
                           field=f"{path}/{el.tag}".lstrip("/"))
    return text


def _text(parent: Element, tag: str, path: str, max_len: int) -> str | None:
    el = _opt(parent, tag, path)
    return None if el is None else _value(el, path, max_len)


def _req_text(parent: Element, tag: str, path: str, max_len: int) -> str:
    return _value(_req(parent, tag, path), path, max_len)
