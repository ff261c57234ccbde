"""Seeded, varied, valid payment messages for bench.messages and the parser tests.

One ``Payment`` is drawn per transaction and written as SWIFT FIN MT103, MT202 or MT202COV, or as
ISO 20022 pacs.008, pacs.009 (core, or COV with the customer transfer it covers) or pain.001 (a
customer's batch: several payments per ``PmtInf``, several ``PmtInf`` per message, see
``pain001_messages``). FIN text is in the SWIFT X character set, lines of at most 35; IBANs have
valid mod-97 and (where schwifty checks them) national check digits; BICs are real institutions;
amounts have the currency's ISO 4217 minor units. The XML follows each version's element order
(pacs.009.001.11, pain.001.001.03 and .09 validate against their shipped XSD).
"""

from __future__ import annotations

import contextlib
import random
import re
import uuid
from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import Decimal
from xml.sax.saxutils import escape

from schwifty import IBAN
from schwifty.exceptions import SchwiftyException

__all__ = ["PAIN001_MIX", "SEED", "Customer", "Payment", "is_x", "mt103", "mt202", "pacs008", "pacs009",
           "pain001_messages", "payments", "swift_amount"]

SEED = 20260115
EXPONENT = {"EUR": 2, "USD": 2, "GBP": 2, "CHF": 2, "JPY": 0}
PER_EUR = {"EUR": Decimal(1), "USD": Decimal("1.0841"), "GBP": Decimal("0.8532"),
           "CHF": Decimal("0.9418"), "JPY": Decimal("162.37")}
_X = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]*")

# country: currency, banks, BBAN pattern ('#' a random digit; None: no IBAN), "postcode|town", streets
COUNTRIES: dict[str, tuple[str, tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...]]] = {
    "DE": ("EUR", ("DEUTDEFF", "COBADEFF", "BYLADEMM"), "37040044" + "#" * 10,
           ("10115|BERLIN", "20095|HAMBURG", "80331|MUENCHEN", "60311|FRANKFURT AM MAIN"),
           ("FRIEDRICHSTRASSE", "HAUPTSTRASSE", "KOENIGSALLEE", "BAHNHOFSTR.")),
    "FR": ("EUR", ("BNPAFRPP", "SOGEFRPP", "AGRIFRPP"), "3000600001" + "#" * 13,
           ("75008|PARIS", "69002|LYON"), ("RUE DE RIVOLI", "AVENUE DES CHAMPS-ELYSEES")),
    "NL": ("EUR", ("ABNANL2A", "INGBNL2A"), "ABNA" + "#" * 10, ("1012 JS|AMSTERDAM", "3011 AD|ROTTERDAM"),
           ("DAMRAK", "COOLSINGEL", "KALVERSTRAAT")),
    "AT": ("EUR", ("BKAUATWW", "RZBAATWW"), "19043" + "#" * 11, ("1010|WIEN", "5020|SALZBURG"),
           ("KAERNTNER STRASSE", "GETREIDEGASSE")),
    "BE": ("EUR", ("GEBABEBB", "KREDBEBB"), "539" + "#" * 9, ("1000|BRUXELLES", "2000|ANTWERPEN"),
           ("RUE NEUVE", "MEIR")),
    "GB": ("GBP", ("BARCGB22", "NWBKGB2L", "HSBCGB2L"), "BUKB202015" + "#" * 8,
           ("EC2V 7HH|LONDON", "M1 1AE|MANCHESTER"), ("HIGH STREET", "KING'S ROAD", "OXFORD STREET")),
    "CH": ("CHF", ("UBSWCHZH", "CRESCHZZ80A", "ZKBKCHZZ80A"), "00762" + "#" * 12,
           ("8001|ZUERICH", "1204|GENEVE", "4051|BASEL"), ("BAHNHOFSTRASSE", "RUE DU RHONE")),
    "US": ("USD", ("CHASUS33", "CITIUS33", "IRVTUS3N", "BOFAUS3N"), None,
           ("10118|NEW YORK", "60603|CHICAGO", "94105|SAN FRANCISCO"), ("FIFTH AVENUE", "MARKET STREET")),
    "JP": ("JPY", ("MHCBJPJT", "BOTKJPJT", "SMBCJPJT"), None, ("100-0005|TOKYO", "530-0001|OSAKA"),
           ("MARUNOUCHI 1-2-3", "UMEDA 2-4-9")),
}
POSTCODE_LAST = {"GB", "US", "JP"}  # town line 'LONDON EC2V 7HH', not '10115 BERLIN'
FIRST = ("JOHN", "JANE", "HANS PETER", "MARIE", "LUCA", "SOPHIE", "SEAN", "ANNA", "PIERRE", "KLAUS",
         "EMMA", "LIAM", "YUKI", "NOAH", "ZOE", "HIROSHI")
LAST = ("DOE", "SMITH", "MUELLER", "DUPONT", "YAMADA", "ROSSI", "VAN DER BERG", "SCHMIDT", "O'NEILL",
        "TANAKA", "JONES", "GARCIA-LOPEZ", "WEBER", "MARTIN")
FIRMS = ("ACME TRADING", "NORDWIND LOGISTIK", "ALPINE PRECISION", "BLUE HARBOUR IMPORTS",
         "SAKURA ELECTRONICS", "ORCHARD FOODS", "RHEIN CHEMIE", "ATLAS MARINE SERVICES")
FORMS = {"DE": "GMBH", "FR": "SAS", "NL": "B.V.", "AT": "GMBH", "BE": "NV", "GB": "LTD", "CH": "AG",
         "US": "LLC", "JP": "K.K."}
REMITTANCE = ("INVOICE {n}", "/INV/{y}-{n}", "/RFB/ORDER {n}", "SALARY {m} {y}", "RENT FLAT {k} {m}",
              "PO {n} PART PAYMENT", "CONTRACT {n}/{k} (FINAL)", "REF. {n}, THANK YOU")
MONTHS = ("JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST", "SEPTEMBER", "OCTOBER",
          "NOVEMBER", "DECEMBER")
S2R = ("/INS/{bic}", "/ACC/INSTANT", "/BNF/TREASURY", "/REC/PAYMENT {n}")


_HEAD_OFFICE = "X" * 3  # the branch code of a BIC's head office


def is_x(text: str) -> bool:
    """True when every line is SWIFT X characters and at most 35 long."""
    return all(len(ln) <= 35 and _X.fullmatch(ln) for ln in text.split("\n"))


def _iban(country: str, bban: str) -> str:
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def _account(rng: random.Random, country: str) -> str:
    """A valid IBAN for IBAN countries (retried until schwifty's national check passes too),
    a plain account number for the US and Japan."""
    pattern = COUNTRIES[country][2]
    if pattern is None:
        return "".join(rng.choice("0123456789") for _ in range(rng.choice((7, 9, 12))))
    while True:
        text = _iban(country, "".join(rng.choice("0123456789") if c == "#" else c for c in pattern))
        with contextlib.suppress(SchwiftyException):
            return str(IBAN(text, validate_bban=True).compact)


@dataclass(frozen=True)
class Customer:
    """A payer or payee: name and address lines of at most 35 X characters."""

    name: str
    street: str
    postcode: str
    town: str
    country: str
    account: str
    bank: str  # BIC of the customer's bank
    person: bool
    born: date | None = None
    birthplace: str | None = None
    national_id: str | None = None

    @property
    def town_line(self) -> str:
        """Postcode and town as a FIN address line."""
        parts = (self.town, self.postcode) if self.country in POSTCODE_LAST else (self.postcode, self.town)
        return " ".join(parts)


def _customer(rng: random.Random, country: str) -> Customer:
    _, banks, _, towns, streets = COUNTRIES[country]
    person = rng.random() < 0.55
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}" if person else f"{rng.choice(FIRMS)} {FORMS[country]}"
    street = f"{rng.choice(streets)} {rng.randint(1, 240)}" if country != "JP" else rng.choice(streets)
    born = date(1940, 1, 1) + timedelta(days=rng.randrange(60 * 365)) if person else None
    birthplace = rng.choice(towns).split("|")[1] if person else None
    nid = f"T{rng.randrange(10**8):08d}" if person and rng.random() < 0.5 else None
    if rng.random() < 0.2:
        name, street = name.title(), street.title()
    postcode, town = rng.choice(towns).split("|")
    return Customer(name, street, postcode, town, country, _account(rng, country), rng.choice(banks),
                    person, born, birthplace, nid)


@dataclass(frozen=True)
class Payment:
    """Everything one message says; renderers pick the fields their format carries."""

    reference: str
    related: str
    uetr: str
    mur: str | None
    value_date: date
    currency: str
    amount: Decimal
    instructed: tuple[str, Decimal, Decimal | None] | None  # currency, amount, rate
    originator: Customer
    beneficiary: Customer
    sender: str
    receiver: str
    ordering_option: str  # K, F or A
    beneficiary_option: str  # "", A or F
    op_code: str
    charges: str
    intermediary: str | None
    remittance: tuple[str, ...]
    s2r: str | None
    regulatory: str | None


def _amount(rng: random.Random, currency: str) -> Decimal:
    eur = Decimal(10 ** rng.uniform(1, 6.7)) * PER_EUR[currency]
    value = eur.quantize(Decimal(1).scaleb(-EXPONENT[currency]))
    if rng.random() < 0.3:
        value = value.quantize(Decimal(1)).quantize(value)  # round sums are common
    return max(value, Decimal(1))


def _reference(rng: random.Random, n: int, day: date) -> str:
    tail = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(5))
    return rng.choice((f"FT{day:%y}{day.timetuple().tm_yday:03d}{tail}", f"PAY-{day.year}-{n:05d}",
                       f"INV{rng.randrange(10**6)}/{n % 97}", f"{rng.choice(('TRF', 'OUT'))}{n:09d}"))


def payments(n: int, seed: int = SEED, customers: int = 1024) -> list[Payment]:
    """``n`` payments between ``customers`` seeded customers (accounts recur, as in real flows)."""
    rng = random.Random(seed)
    pool = [_customer(rng, rng.choice(list(COUNTRIES))) for _ in range(customers)]
    out = []
    for i in range(n):
        orig, bene = rng.sample(pool, 2)
        sender = rng.choice(("DEUTDEFF", "BARCGB22", "CHASUS33", "UBSWCHZH", "BNPAFRPP"))
        day = date(2025, 1, 2) + timedelta(days=rng.randrange(540))
        currency = COUNTRIES[bene.country][0] if rng.random() < 0.7 else rng.choice(list(EXPONENT))
        amt = _amount(rng, currency)
        instructed: tuple[str, Decimal, Decimal | None] | None = None
        if rng.random() < 0.25:
            other = rng.choice([c for c in EXPONENT if c != currency])
            rate = (PER_EUR[currency] / PER_EUR[other] * Decimal(rng.uniform(0.98, 1.02)))
            rate = rate.quantize(Decimal("0.000001") if rate < 10 else Decimal("0.00001"))
            inst = (amt / rate).quantize(Decimal(1).scaleb(-EXPONENT[other]))
            instructed = (other, max(inst, Decimal(1)), rate)
        elif rng.random() < 0.1:
            instructed = (currency, amt, None)
        charges = rng.choice(("SHA", "SHA", "OUR", "BEN"))
        lines = [t.format(n=rng.randrange(10**6), y=day.year, k=rng.randint(1, 40), m=MONTHS[day.month - 1])
                 for t in rng.sample(REMITTANCE, rng.randint(1, 3))]
        s2r = rng.choice(S2R).format(bic=orig.bank, n=i) if rng.random() < 0.3 else None
        out.append(Payment(
            reference=_reference(rng, i, day), related=f"REL{rng.randrange(10**8):08d}",
            uetr=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            mur=f"MUR{i:06d}" if rng.random() < 0.3 else None, value_date=day, currency=currency,
            amount=amt, instructed=instructed, originator=orig, beneficiary=bene,
            sender=orig.bank if rng.random() < 0.8 else sender,
            receiver=bene.bank if bene.bank[:4] != orig.bank[:4] else
            "CHASUS33" if orig.bank[:4] != "CHAS" else "BNPAFRPP",
            ordering_option=rng.choices("KFA", (70, 20, 10))[0],
            beneficiary_option=rng.choices(("", "F", "A"), (80, 12, 8))[0],
            op_code=rng.choices(("CRED", "SPAY", "SSTD", "SPRI"), (85, 5, 5, 5))[0], charges=charges,
            intermediary=rng.choice(("IRVTUS3N", "CITIUS33", "DEUTDEFF")) if rng.random() < 0.2 else None,
            remittance=tuple(ln[:35] for ln in lines) if rng.random() < 0.8 else (), s2r=s2r,
            regulatory=f"/ORDERRES/{orig.country}//TRADE" if rng.random() < 0.05 else None))
    return out


def swift_amount(value: Decimal) -> str:
    """A FIN amount: comma decimal mark, no grouping ('1814,28'; '150000,' in JPY)."""
    text = format(value, "f").replace(".", ",")
    return text if "," in text else text + ","


def _headers(p: Payment, mt: str, cov: bool = False) -> str:
    lt = f"{p.sender[:8]}A{p.sender[8:] or _HEAD_OFFICE}"
    dest = f"{p.receiver[:8]}X{p.receiver[8:] or _HEAD_OFFICE}"
    b3 = (f"{{108:{p.mur}}}" if p.mur else "") + ("{119:COV}" if cov else "") + f"{{121:{p.uetr}}}"
    seq = int(p.uetr[:6], 16) % 10**6
    return f"{{1:F01{lt}{seq % 10**4:04d}{seq:06d}}}{{2:I{mt}{dest}N}}{{3:{b3}}}{{4:\n"


def _ordering(p: Payment) -> str:
    c = p.originator
    if p.ordering_option == "A":
        return f":50A:/{c.account}\n{c.bank}"
    if p.ordering_option == "K":
        return f":50K:/{c.account}\n{c.name}\n{c.street}\n{c.town_line}"
    town = f"3/{c.country}/{c.town_line}"[:35]
    if c.person and c.born and c.birthplace and not c.national_id:
        return (f":50F:/{c.account}\n1/{c.name}\n{town}\n4/{c.born:%Y%m%d}\n"
                f"5/{c.country}/{c.birthplace}")
    first = f"NIDN/{c.country}/{c.national_id}" if c.national_id else f"/{c.account}"
    return f":50F:{first}\n1/{c.name}\n2/{c.street}\n{town}"


def _beneficiary(p: Payment) -> str:
    c = p.beneficiary
    if p.beneficiary_option == "A":
        return f":59A:/{c.account}\n{c.bank}"
    if p.beneficiary_option == "F":
        return f":59F:/{c.account}\n1/{c.name}\n2/{c.street}\n3/{c.country}/{c.town_line}"
    return f":59:/{c.account}\n{c.name}\n{c.street}\n{c.town_line}"


def mt103(p: Payment) -> bytes:
    """The payment as an MT103 (options 50K/50F/50A and 59/59F/59A; optional fields vary)."""
    f = [f":20:{p.reference}", f":23B:{p.op_code}",
         f":32A:{p.value_date:%y%m%d}{p.currency}{swift_amount(p.amount)}"]
    if p.instructed:
        f.append(f":33B:{p.instructed[0]}{swift_amount(p.instructed[1])}")
        f += [f":36:{swift_amount(p.instructed[2])}"] if p.instructed[2] else []
    f.append(_ordering(p))
    if p.sender != p.originator.bank:
        f.append(f":52A:{p.originator.bank}")
    if p.intermediary:
        f.append(f":56A:{p.intermediary}")
    f += [f":57A:{p.beneficiary.bank}", _beneficiary(p)]
    if p.remittance:
        f.append(":70:" + "\n".join(p.remittance))
    f.append(f":71A:{p.charges}")
    if p.charges == "BEN":
        f.append(f":71F:{p.currency}{swift_amount(Decimal(15).quantize(p.amount))}")
    f += [f":72:{p.s2r}"] if p.s2r else []
    f += [f":77B:{p.regulatory}"] if p.regulatory else []
    return (_headers(p, "103") + "\n".join(f) + "\n-}").encode()


def mt202(p: Payment, cov: bool = False) -> bytes:
    """The payment's cover between the banks: an MT202, or an MT202COV with the customer
    sequence B (50a, 59a, 70, 72, 33B)."""
    f = [f":20:{p.reference}", f":21:{p.related}",
         f":32A:{p.value_date:%y%m%d}{p.currency}{swift_amount(p.amount)}",
         f":52A:{p.originator.bank}"]
    f += [f":56A:{p.intermediary}"] if p.intermediary else []
    f += [f":57A:{p.receiver}", f":58A:{p.beneficiary.bank}" if cov or p.op_code != "CRED"
          else f":58A:/{p.beneficiary.account}\n{p.beneficiary.bank}"]
    if cov:
        f += [_ordering(p), _beneficiary(p)]
        f += [":70:" + "\n".join(p.remittance)] if p.remittance else []
        f += [f":33B:{p.instructed[0]}{swift_amount(p.instructed[1])}"] if p.instructed else []
    elif p.s2r:
        f.append(f":72:{p.s2r}")
    return (_headers(p, "202", cov) + "\n".join(f) + "\n-}").encode()


_CHARGE_BEARER = {"SHA": "SHAR", "OUR": "DEBT", "BEN": "CRED"}


def _e(tag: str, *kids: str, attrs: str = "") -> str:
    """An XML element: ``kids`` are elements (already rendered) or, alone, escaped text."""
    if len(kids) == 1 and not kids[0].startswith("<"):
        return f"<{tag}{attrs}>{escape(kids[0])}</{tag}>"
    inner = "\n".join(k for k in kids if k).replace("\n", "\n  ")
    return f"<{tag}{attrs}>\n  {inner}\n</{tag}>"


def _fin(tag: str, bic: str) -> str:
    return _e(tag, _e("FinInstnId", _e("BICFI", bic)))


def _iso_party(c: Customer, with_id: bool) -> str:
    street, _, number = c.street.rpartition(" ")
    street, number = (street, number) if number.isdigit() and street else (c.street, "")
    adr = _e("PstlAdr", _e("StrtNm", street), number and _e("BldgNb", number), _e("PstCd", c.postcode),
             _e("TwnNm", c.town), _e("Ctry", c.country))
    ids = []
    if with_id and c.born and c.birthplace:
        ids.append(_e("DtAndPlcOfBirth", _e("BirthDt", c.born.isoformat()), _e("CityOfBirth", c.birthplace),
                      _e("CtryOfBirth", c.country)))
    if with_id and c.national_id:
        ids.append(_e("Othr", _e("Id", c.national_id), _e("SchmeNm", _e("Cd", "NIDN"))))
    return "\n".join((_e("Nm", c.name), adr, *([_e("Id", _e("PrvtId", *ids))] if ids else ())))


def _iso_account(tag: str, account: str) -> str:
    ident = _e("IBAN", account) if account[:2].isalpha() else _e("Othr", _e("Id", account))
    return _e(tag, _e("Id", ident))


def pacs008(p: Payment) -> bytes:
    """The payment as a one-transaction pacs.008.001.08, .09 or .10 (CBPR+-like: structured
    addresses, UETR; about three in ten in an envelope with a head.001 application header)."""
    version = 8 + int(p.uetr[0], 16) % 3
    ns = f"urn:iso:std:iso:20022:tech:xsd:pacs.008.001.{version:02d}"
    amt = _e("IntrBkSttlmAmt", format(p.amount, "f"), attrs=f' Ccy="{p.currency}"')
    inst = (_e("InstdAmt", format(p.instructed[1], "f"), attrs=f' Ccy="{p.instructed[0]}"')
            if p.instructed else "")
    rate = _e("XchgRate", format(p.instructed[2], "f")) if p.instructed and p.instructed[2] else ""
    with_id = p.ordering_option == "F"
    tx = _e("CdtTrfTxInf",
            _e("PmtId", _e("InstrId", p.related), _e("EndToEndId", p.reference), _e("UETR", p.uetr)),
            amt, _e("IntrBkSttlmDt", p.value_date.isoformat()), inst, rate,
            _e("ChrgBr", _CHARGE_BEARER[p.charges]), _fin("InstgAgt", p.sender), _fin("InstdAgt", p.receiver),
            _fin("IntrmyAgt1", p.intermediary) if p.intermediary else "",
            _e("Dbtr", _iso_party(p.originator, with_id)), _iso_account("DbtrAcct", p.originator.account),
            _fin("DbtrAgt", p.originator.bank), _fin("CdtrAgt", p.beneficiary.bank),
            _e("Cdtr", _iso_party(p.beneficiary, False)), _iso_account("CdtrAcct", p.beneficiary.account),
            _e("RmtInf", *(_e("Ustrd", ln) for ln in p.remittance)) if p.remittance else "")
    grp = _e("GrpHdr", _e("MsgId", f"{p.sender[:8]}-{p.related}"),
             _e("CreDtTm", f"{p.value_date.isoformat()}T09:{int(p.amount) % 60:02d}:00Z"),
             _e("NbOfTxs", "1"), _e("SttlmInf", _e("SttlmMtd", "INDA" if p.op_code == "CRED" else "CLRG")))
    doc = _e("Document", _e("FIToFICstmrCdtTrf", grp, tx), attrs=f' xmlns="{ns}"')
    if p.mur:
        hdr = _app_hdr(p, f"pacs.008.001.{version:02d}", p.sender, p.receiver)
        doc = _e("Envelope", hdr, doc, attrs=' xmlns="urn:example:envelope"')
    return _xml(doc)


def _xml(doc: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + doc + "\n").encode()


def _app_hdr(p: Payment, message: str, sender: str, receiver: str, service: str = "") -> str:
    """A head.001.001.02 business application header."""
    return _e("AppHdr", _e("Fr", _fin("FIId", sender)), _e("To", _fin("FIId", receiver)),
              _e("BizMsgIdr", p.related), _e("MsgDefIdr", message), service and _e("BizSvc", service),
              _e("CreDt", f"{p.value_date.isoformat()}T09:00:00Z"),
              attrs=' xmlns="urn:iso:std:iso:20022:tech:xsd:head.001.001.02"')


def _group_header(msg_id: str, p: Payment, txs: int, *rest: str) -> str:
    return _e("GrpHdr", _e("MsgId", msg_id),
              _e("CreDtTm", f"{p.value_date.isoformat()}T09:{int(p.amount) % 60:02d}:00Z"),
              _e("NbOfTxs", str(txs)), *rest)


def _ustrd(p: Payment) -> str:
    return _e("RmtInf", *(_e("Ustrd", ln) for ln in p.remittance)) if p.remittance else ""


def pacs009(p: Payment, cov: bool = False) -> bytes:
    """The banks' transfer as a one-transaction pacs.009.001.08, .10 or .11 (about 4, 1 and 2 in 7).
    Core: debtor and creditor are the ordering and beneficiary institutions (an MT202's 52A and
    58A; the creditor's account where the MT202 gives one). COV (``cov``): the same, with the
    customer credit transfer it covers (``UndrlygCstmrCdtTrf``: debtor, creditor, their accounts,
    agents, remittance and instructed amount, as an MT202COV's sequence B). About half come in an
    envelope with a head.001 application header, as CBPR+ sends them."""
    version = (8, 8, 8, 8, 10, 11, 11)[int(p.uetr[1], 16) % 7]
    ns = f"urn:iso:std:iso:20022:tech:xsd:pacs.009.001.{version:02d}"
    if cov:
        inst = (_e("InstdAmt", format(p.instructed[1], "f"), attrs=f' Ccy="{p.instructed[0]}"')
                if p.instructed else "")
        tail = _e("UndrlygCstmrCdtTrf",
                  _e("Dbtr", _iso_party(p.originator, p.ordering_option == "F")),
                  _iso_account("DbtrAcct", p.originator.account), _fin("DbtrAgt", p.originator.bank),
                  _fin("CdtrAgt", p.beneficiary.bank), _e("Cdtr", _iso_party(p.beneficiary, False)),
                  _iso_account("CdtrAcct", p.beneficiary.account), _ustrd(p), inst)
    else:
        tail = _e("InstrForNxtAgt", _e("InstrInf", p.s2r)) if p.s2r else ""
    tx = _e("CdtTrfTxInf",
            _e("PmtId", _e("InstrId", p.related), _e("EndToEndId", p.reference), _e("UETR", p.uetr)),
            _e("IntrBkSttlmAmt", format(p.amount, "f"), attrs=f' Ccy="{p.currency}"'),
            _e("IntrBkSttlmDt", p.value_date.isoformat()), _fin("InstgAgt", p.sender),
            _fin("InstdAgt", p.receiver), _fin("IntrmyAgt1", p.intermediary) if p.intermediary else "",
            _fin("Dbtr", p.originator.bank),
            _fin("CdtrAgt", p.receiver) if p.receiver != p.beneficiary.bank else "",
            _fin("Cdtr", p.beneficiary.bank),
            _iso_account("CdtrAcct", p.beneficiary.account) if not cov and p.op_code == "CRED" else "",
            tail)
    grp = _group_header(f"{p.sender[:8]}-{p.related}", p, 1,
                        _e("SttlmInf", _e("SttlmMtd", "INDA" if p.op_code == "CRED" else "CLRG")))
    doc = _e("Document", _e("FICdtTrf", grp, tx), attrs=f' xmlns="{ns}"')
    if int(p.uetr[2], 16) % 2:
        hdr = _app_hdr(p, f"pacs.009.001.{version:02d}", p.sender, p.receiver,
                       "swift.cbprplus.cov.02" if cov else "swift.cbprplus.02")
        doc = _e("Envelope", hdr, doc, attrs=' xmlns="urn:swift:xsd:envelope"')
    return _xml(doc)


# pain.001 messages, drawn in turn until the payments run out: (kind, weight). A CBPR+ initiation is a
# pain.001.001.09 with one PmtInf of one transaction, in an envelope with an application header; a
# corporate batch file is a pain.001.001.03 or .09 of several PmtInf (one debtor account and execution
# date each) of several transactions each. Half the .09 batches carry UETRs.
_PAIN_KINDS = (("cbpr", 20), ("batch.03", 45), ("batch.09", 35))
_PAIN_BLOCKS = ((1, 55), (2, 25), (3, 12), (4, 8))  # PmtInf per batch file
_PAIN_TXS = (((1, 1), 25), ((2, 5), 40), ((6, 20), 27), ((21, 60), 8))  # CdtTrfTxInf per PmtInf
PAIN001_MIX = ("20% CBPR+ (pain.001.001.09, AppHdr, 1 PmtInf of 1 transaction), 45% pain.001.001.03 and "
               "35% .09 batch files of 1/2/3/4 PmtInf (55/25/12/8%) of 1, 2-5, 6-20 or 21-60 "
               "transactions (25/40/27/8%)")


def pain001_messages(pays: list[Payment], seed: int = SEED) -> list[tuple[bytes, tuple[Payment, ...]]]:
    """``pays`` as pain.001 messages (``_PAIN_KINDS``), each with the payments it carries in order.
    The payments of one PmtInf share its debtor and requested execution date (its first payment's):
    the payments returned are the ones written, changed so where a PmtInf changed them."""
    rng = random.Random(seed + 1)
    kinds, kind_w = [k for k, _ in _PAIN_KINDS], [w for _, w in _PAIN_KINDS]
    blocks, block_w = [k for k, _ in _PAIN_BLOCKS], [w for _, w in _PAIN_BLOCKS]
    spans, span_w = [k for k, _ in _PAIN_TXS], [w for _, w in _PAIN_TXS]
    out: list[tuple[bytes, tuple[Payment, ...]]] = []
    i = 0
    while i < len(pays):
        kind = rng.choices(kinds, kind_w)[0]
        sizes = [1] if kind == "cbpr" else [rng.randint(*rng.choices(spans, span_w)[0])
                                            for _ in range(rng.choices(blocks, block_w)[0])]
        grouped: list[tuple[Payment, ...]] = []
        for size in sizes:
            chunk = pays[i:i + size]
            i += len(chunk)
            if chunk:
                head = chunk[0]
                grouped.append(tuple(replace(q, originator=head.originator, value_date=head.value_date)
                                     for q in chunk))
        uetr = kind == "cbpr" or (kind == "batch.09" and rng.random() < 0.5)
        out.append((_pain001(kind, grouped, uetr), tuple(q for b in grouped for q in b)))
    return out


def _fin_v(tag: str, bic: str, version: int) -> str:
    """A FinInstnId by BIC: ``BIC`` before version 4 of pain.001, ``BICFI`` since."""
    return _e(tag, _e("FinInstnId", _e("BICFI" if version >= 4 else "BIC", bic)))


def _sum(block: tuple[Payment, ...]) -> str:
    return format(sum(q.amount for q in block), "f")


def _pain001(kind: str, blocks: list[tuple[Payment, ...]], uetr: bool) -> bytes:
    version = 3 if kind == "batch.03" else 9
    first = blocks[0][0]
    every = [q for b in blocks for q in b]
    infos = []
    for n, block in enumerate(blocks, 1):
        head = block[0]
        debtor = head.originator
        sepa = all(q.currency == "EUR" and q.beneficiary.account[:2].isalpha() for q in block) and \
            debtor.account[:2].isalpha()
        when = head.value_date.isoformat()
        txs = [_e("CdtTrfTxInf",
                  _e("PmtId", _e("InstrId", q.related) if n % 2 else "", _e("EndToEndId", q.reference),
                     _e("UETR", q.uetr) if uetr else ""),
                  _e("Amt", _e("InstdAmt", format(q.amount, "f"), attrs=f' Ccy="{q.currency}"')),
                  "" if sepa else _e("ChrgBr", _CHARGE_BEARER[q.charges]),
                  _fin_v("IntrmyAgt1", q.intermediary, version) if q.intermediary and not sepa else "",
                  _fin_v("CdtrAgt", q.beneficiary.bank, version),
                  _e("Cdtr", _iso_party(q.beneficiary, False)),
                  _iso_account("CdtrAcct", q.beneficiary.account),
                  (_e("RmtInf", _e("Ustrd", " ".join(q.remittance)[:140])) if q.remittance else "") if sepa
                  else _ustrd(q))
               for q in block]
        infos.append(_e("PmtInf", _e("PmtInfId", f"PMT-{head.related}-{n}"), _e("PmtMtd", "TRF"),
                        _e("BtchBookg", "true") if len(block) > 1 else "", _e("NbOfTxs", str(len(block))),
                        _e("CtrlSum", _sum(block)),
                        _e("PmtTpInf", _e("SvcLvl", _e("Cd", "SEPA"))) if sepa else "",
                        _e("ReqdExctnDt", when) if version < 8 else _e("ReqdExctnDt", _e("Dt", when)),
                        _e("Dbtr", _iso_party(debtor, head.ordering_option == "F")),
                        _iso_account("DbtrAcct", debtor.account), _fin_v("DbtrAgt", debtor.bank, version),
                        _e("ChrgBr", "SLEV") if sepa else "", *txs))
    grp = _group_header(f"PAIN-{first.related}", first, len(every), _e("CtrlSum", _sum(tuple(every))),
                        _e("InitgPty", _e("Nm", first.originator.name)))
    ns = f"urn:iso:std:iso:20022:tech:xsd:pain.001.001.{version:02d}"
    doc = _e("Document", _e("CstmrCdtTrfInitn", grp, *infos), attrs=f' xmlns="{ns}"')
    if kind == "cbpr":
        hdr = _app_hdr(first, f"pain.001.001.{version:02d}", first.originator.bank, first.sender,
                       "swift.cbprplus.02")
        doc = _e("Envelope", hdr, doc, attrs=' xmlns="urn:swift:xsd:envelope"')
    return _xml(doc)
