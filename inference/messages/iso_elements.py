"""ISO 20022 building blocks every message shares: parties, agents, accounts, postal addresses,
identifiers, amounts and remittance, read from namespace-stripped elements (``iso20022.document``).

Read liberally (``inference.messages.findings``): an IBAN failing its check digits, a BIC of no ISO
3166 country, an unknown country code, an LEI failing its check digits, a text longer than its
schema type or an address of address lines only are findings, the value kept or dropped as each
code says. What cannot be read (an element twice where once is allowed, an amount, a currency, a
control character in a text) raises ``MessageError`` naming its path, e.g.
``CdtTrfTxInf[2]/IntrBkSttlmAmt`` (1-based, as in XPath). Element names of every version are read:
``BICFI`` (and ``BIC`` before 2015), ``AnyBIC`` (and ``BICOrBEI``).
"""

from __future__ import annotations

import re
from decimal import Decimal
from xml.etree.ElementTree import Element

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import note
from inference.messages.transaction import Agent, Identifier, Party

__all__ = ["account", "address", "agent", "amount", "identifiers", "institution_party", "opt", "party",
           "remittance", "req", "req_text", "require_party", "text", "value"]

_CODE = re.compile(r"[A-Z0-9]{1,4}")  # external code lists (ISO 20022 ExternalCode, 1-4 chars)
# Control characters (C0 with tab, CR and LF, DEL, C1): refused in every text value, as the JSON and
# SWIFT parsers refuse them; the ISO 20022 text types carry one line each (remittance is lines of Ustrd).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_XML_SPACE = str.maketrans("\t\n\r", "   ")  # XML white space inside a text (pretty-printing): a space
# PostalAddress24 parts read (others, such as AdrTp, are ignored) and their maximum lengths
_ADDRESS_PARTS = {"Dept": 70, "SubDept": 70, "StrtNm": 70, "BldgNb": 16, "BldgNm": 35, "Flr": 70,
                  "PstBx": 16, "Room": 70, "PstCd": 16, "TwnNm": 35, "TwnLctnNm": 35, "DstrctNm": 35,
                  "CtrySubDvsn": 35, "Ctry": 2}


def agent(el: Element, acct: Element | None, role: str, where: str, acct_where: str = "") -> Agent:
    """A financial institution (FinInstnId: BICFI, name, postal address) and its account."""
    fin = req(el, "FinInstnId", where)
    w = f"{where}/FinInstnId"
    code = _bic_element(fin, w, "BICFI", "BIC")
    name = text(fin, "Nm", w, 140)
    lines, ctry = address(opt(fin, "PstlAdr", w), f"{w}/PstlAdr")
    return Agent(role=role, bic=code,
                 account=account(acct, acct_where)[0] if acct is not None else None,
                 name_address=(*([name] if name else ()), *lines, *([ctry] if ctry else ())))


def institution_party(el: Element, acct: Element | None, where: str, acct_where: str) -> Party:
    """A financial institution as the debtor or creditor of a pacs.009: its BIC is its identifier."""
    ag = agent(el, acct, "party", where, acct_where)
    name = ag.name_address[0] if ag.name_address else None
    iban = fields.iban_checked(ag.account, acct_where) if ag.account else None
    return Party(name=name, account=ag.account, iban=iban, bic=ag.bic, address_lines=ag.name_address[1:],
                 identifiers=(Identifier("BIC", ag.bic),) if ag.bic else ())


def party(el: Element, acct: Element | None, where: str, acct_where: str) -> Party:
    """A party (name, postal address, country of residence, identifiers) and its account. pacs.004
    from version 9 wraps it (``Pty``, or an ``Agt``): both are read."""
    if (inner := opt(el, "Pty", where)) is not None:
        el, where = inner, f"{where}/Pty"
    elif (fi := opt(el, "Agt", where)) is not None:
        return institution_party(fi, acct, f"{where}/Agt", acct_where)
    lines, ctry = address(opt(el, "PstlAdr", where), f"{where}/PstlAdr")
    if ctry is None and (res := text(el, "CtryOfRes", where, 2)) is not None:
        ctry = fields.country_or_none(res, f"{where}/CtryOfRes")
    ids, bic = identifiers(opt(el, "Id", where), f"{where}/Id")
    acct_id, iban = account(acct, acct_where) if acct is not None else (None, None)
    return Party(name=text(el, "Nm", where, 140), account=acct_id, iban=iban, bic=bic,
                 address_lines=lines, country=ctry, identifiers=ids)


def require_party(p: Party, where: str) -> Party:
    """``p``, unless nothing of it can be read (no name, account, BIC or identifier): such a debtor or
    creditor is not a payment to screen."""
    if not (p.name or p.account or p.bic or p.identifiers):
        raise MessageError("holds no name, account, BIC or identifier", field=where)
    return p


def account(acct: Element, where: str) -> tuple[str, str | None]:
    """The account as given (IBAN or Othr/Id) and its IBAN where it is a valid one."""
    ident = req(acct, "Id", where)
    w = f"{where}/Id"
    given = text(ident, "IBAN", w, 34)
    if given is not None:
        return given, fields.iban_checked(given, f"{w}/IBAN")
    othr = opt(ident, "Othr", w)
    if othr is None:
        raise MessageError("account Id has neither IBAN nor Othr (one is mandatory)", field=w)
    given = req_text(othr, "Id", f"{w}/Othr", 34)
    return given, fields.iban_or_none(given)


def address(adr: Element | None, w: str) -> tuple[tuple[str, ...], str | None]:
    """Structured parts as lines ('StrtNm BldgNb', 'PstCd TwnNm', ...), then each AdrLine."""
    if adr is None:
        return (), None
    got: dict[str, str] = {}
    adr_lines: list[str] = []
    for child in adr:  # one pass over the children, not one search per part
        tag = child.tag
        if tag == "AdrLine":
            adr_lines.append(value(child, w, 70))
        elif (limit := _ADDRESS_PARTS.get(tag)) is not None:
            if tag in got:
                raise MessageError(f"{tag} appears twice; at most once is allowed", field=f"{w}/{tag}")
            got[tag] = value(child, w, limit)
    if len(adr_lines) > 7:
        note("FIELD_TOO_LONG", f"{w}/AdrLine", f"{len(adr_lines)} AdrLine; at most 7 are allowed")
    g = got.get
    if adr_lines and not (g("TwnNm") and g("Ctry")):
        note("UNSTRUCTURED_ADDRESS", w, "address lines without a town and country")
    lines = [s for s in (g("Dept"), g("SubDept"), _join(g("StrtNm"), g("BldgNb")), g("BldgNm"),
                         _join(g("Flr"), g("Room")), g("PstBx"), _join(g("PstCd"), g("TwnNm")),
                         g("TwnLctnNm"), g("DstrctNm"), g("CtrySubDvsn")) if s]
    ctry = g("Ctry")
    return (*lines, *adr_lines), fields.country_or_none(ctry, f"{w}/Ctry") if ctry is not None else None


def _join(a: str | None, b: str | None) -> str | None:
    return f"{a} {b}" if a and b else a or b


def _bic_element(parent: Element, w: str, *tags: str) -> str | None:
    """The BIC in the first of ``tags`` present (element names differ between versions)."""
    for tag in tags:
        given = text(parent, tag, w, 11)
        if given is not None:
            return fields.bic_or_none(given, f"{w}/{tag}")
    return None


def identifiers(el: Element | None, w: str) -> tuple[tuple[Identifier, ...], str | None]:
    """PrvtId (birth date and place, other ids) or OrgId (BIC, LEI, other ids); and the BIC."""
    if el is None:
        return (), None
    prvt, org = opt(el, "PrvtId", w), opt(el, "OrgId", w)
    if (prvt is None) == (org is None):
        raise MessageError("Id must hold exactly one of PrvtId and OrgId", field=w)
    out: list[Identifier] = []
    bic = None
    if prvt is not None:
        w += "/PrvtId"
        birth = opt(prvt, "DtAndPlcOfBirth", w)
        if birth is not None:
            bw = f"{w}/DtAndPlcOfBirth"
            born = fields.iso_date(req_text(birth, "BirthDt", bw, 10), f"{bw}/BirthDt")
            city = req_text(birth, "CityOfBirth", bw, 35)
            cc = req_text(birth, "CtryOfBirth", bw, 2)
            out += [Identifier("DOB", born.isoformat()),
                    Identifier("POB", f"{city}, {cc}", fields.country_or_none(cc, f"{bw}/CtryOfBirth"))]
        holder = prvt
    else:
        assert org is not None
        w += "/OrgId"
        bic = _bic_element(org, w, "AnyBIC", "BICOrBEI")
        if bic is not None:
            out.append(Identifier("BIC", bic))
        lei = text(org, "LEI", w, 20)
        if lei is not None:
            try:
                out.append(Identifier("LEI", fields.lei(lei, f"{w}/LEI")))
            except MessageError as exc:
                note("LEI_CHECK_DIGITS", f"{w}/LEI", exc.reason)
                out.append(Identifier("OTHR", lei))
        holder = org
    for n, othr in enumerate(holder.findall("Othr"), 1):
        ow = f"{w}/Othr[{n}]"
        ident = req_text(othr, "Id", ow, 35)
        scheme_el = opt(othr, "SchmeNm", ow)
        code = text(scheme_el, "Cd", f"{ow}/SchmeNm", 4) if scheme_el is not None else None
        if code is not None and not _CODE.fullmatch(code):
            note("CODE_NOT_IN_LIST", f"{ow}/SchmeNm/Cd",
                 f"scheme code {code!r} is not 1-4 capitals or digits")
            code = None
        out.append(Identifier(code or "OTHR", ident))
    return tuple(out), bic


def remittance(el: Element | None, w: str) -> str | None:
    """Unstructured lines, then each structured creditor reference."""
    if el is None:
        return None
    lines = [value(u, w, 140) for u in el.findall("Ustrd")]
    for n, strd in enumerate(el.findall("Strd"), 1):
        ref = opt(strd, "CdtrRefInf", f"{w}/Strd[{n}]")
        if ref is not None and (got := text(ref, "Ref", f"{w}/Strd[{n}]/CdtrRefInf", 35)):
            lines.append(got)
    return "\n".join(lines) or None


def amount(el: Element, where: str) -> tuple[Decimal, str]:
    """An amount with its Ccy attribute, exact in the currency's minor units."""
    ccy = el.get("Ccy")
    if ccy is None:
        raise MessageError("Ccy attribute is missing (mandatory)", field=f"{where}/@Ccy")
    fields.currency_exponent(ccy, f"{where}/@Ccy")
    given = value(el, where.rpartition("/")[0], 19)
    return fields.amount(given, ccy, where, decimal_mark="."), ccy


def opt(parent: Element, tag: str, path: str) -> Element | None:
    """The child ``tag`` or None; twice is refused (a message must not read two ways)."""
    found = parent.findall(tag)
    if not found:
        return None
    if len(found) > 1:
        raise MessageError(f"{tag} appears {len(found)} times; at most once is allowed",
                           field=f"{path}/{tag}".lstrip("/"))
    return found[0]


def req(parent: Element, tag: str, path: str) -> Element:
    el = opt(parent, tag, path)
    if el is None:
        raise MessageError(f"{tag} is missing (mandatory)", field=f"{path}/{tag}".lstrip("/"))
    return el


def value(el: Element, path: str, max_len: int) -> str:
    """An element's text: present, no control character; longer than ``max_len`` is a finding."""
    got = (el.text or "").strip()
    if not got or len(el):
        raise MessageError(f"{el.tag} must hold text (1-{max_len} characters)", field=_where(path, el))
    # isprintable() is False wherever _CONTROL would match: the search runs only on the rare text it may
    if not got.isprintable() and (bad := _CONTROL.search(got)) is not None:
        where = _where(path, el)
        if _CONTROL.search(got.translate(_XML_SPACE)) is not None:
            raise MessageError(f"{el.tag} holds the control character U+{ord(bad.group()):04X}", field=where)
        note("LAYOUT", where, f"line break or tab U+{ord(bad.group()):04X} read as a space")
        got = " ".join(got.split())
    if len(got) > max_len:
        where = _where(path, el)
        if len(got) > 4 * max_len + 1024:  # beyond any reading of the schema: not kept
            raise MessageError(f"{el.tag} is {len(got)} characters; at most {max_len} are allowed",
                               field=where)
        note("FIELD_TOO_LONG", where, f"{len(got)} characters; at most {max_len} are allowed")
    return got


def _where(path: str, el: Element) -> str:
    return f"{path}/{el.tag}".lstrip("/")


def text(parent: Element, tag: str, path: str, max_len: int) -> str | None:
    el = opt(parent, tag, path)
    return None if el is None else value(el, path, max_len)


def req_text(parent: Element, tag: str, path: str, max_len: int) -> str:
    return value(req(parent, tag, path), path, max_len)
