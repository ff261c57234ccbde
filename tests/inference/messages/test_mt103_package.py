"""Our MT103 parser against the ``mt103`` package from PyPI, field by field.

The package is one regular expression over block 4 with every field optional: it returns
strings (amounts with the SWIFT comma, raw multi-line party text), checks nothing, and reports
a failure only as a falsy ``MT103.text``. Where it is right we must agree with it; where it is
wrong or lossy, the case is named below and our behaviour is asserted instead.
"""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from bench.messages_samples import is_x, mt103, payments
from inference.messages.errors import MessageError
from inference.messages.mt import parse_mt
from inference.messages.transaction import Party, Transaction

package = pytest.importorskip("mt103")

VECTORS = Path(__file__).parents[2] / "vectors" / "messages" / "mt"

# The shape of a typical MT103: 33B/36 conversion, 50K, 52A, 57A, 59, 70, 71A, 72.
SAMPLE = """{1:F01BANKBEBBAXXX0000000000}{2:I103BANKDEFFXXXXN}{3:{108:MUR123}\
{121:e9f0b7c4-3a1b-4c5d-8e6f-7a8b9c0d1e2f}}{4:
:20:REF123
:23B:CRED
:32A:230115EUR1814,28
:33B:USD2000,00
:36:0,9071
:50K:/DE89370400440532013000
JOHN DOE
MAIN STREET 1
10115 BERLIN DE
:52A:BANKBEBB
:57A:DEUTDEFF
:59:/GB33BUKB20201555555555
JANE SMITH
1 HIGH STREET
LONDON
:70:INVOICE 4711
:71A:SHA
:72:/INS/CHASUS33
-}{5:{CHK:123456789ABC}}"""

# Multi-line values everywhere: 52D, four-line 70, 72 with '//' continuation; 13C, 23E, 71F,
# 77B, an /account line without IBAN, and 33B in the settlement currency without 36.
MULTILINE = """{1:F01CHASUS33AXXX1234567890}{2:I103BARCGB22XXXXU}{3:\
{121:0f3c2d1e-5a6b-4c7d-8e9f-a0b1c2d3e4f5}}{4:
:20:INV-77/2026
:13C:/CLSTIME/0915+0100
:23B:SPAY
:23E:SDVA
:32A:260227GBP12500,
:33B:GBP12515,00
:50K:/8877665544
O'NEILL TRADING (UK) LTD.
UNIT 4, 12-14 KING'S ROAD
LONDON SW3 4RP
GB
:52D:FIRST REGIONAL BANK
PO BOX 77
DENVER CO
:57A:BARCGB22
:59:/GB29NWBK60161331926819
MARY JONES
FLAT 2 ? 3 HIGH STREET
:70:/INV/2026-0117
/INV/2026-0118 +0119
PO 4471: PART 2 OF 3
THANK YOU
:71A:BEN
:71F:GBP15,00
:72:/INS/CHASUS33
//LONDON BRANCH
/REC/URGENT
:77B:/ORDERRES/US//SERVICES
-}"""


def _generated() -> list[tuple[str, str]]:
    """A dozen seeded MT103s covering 50K/50F/50A x 59/59A/59F, 33B with 36, 71F, 72."""
    combos = [(o, b) for o in "KFA" for b in ("", "A", "F")] + [("K", ""), ("F", ""), ("K", "A")]
    out = []
    for i, (p, (o, b)) in enumerate(zip(payments(12, seed=103, customers=48), combos, strict=True)):
        p = replace(p, ordering_option=o, beneficiary_option=b, charges=("SHA", "BEN", "OUR")[i % 3])
        if i % 4 == 0 and p.instructed is None:
            other = "USD" if p.currency != "USD" else "EUR"
            p = replace(p, instructed=(other, p.amount + 1, Decimal("1.084137")))
        out.append((f"generated-{i}-50{o}-59{b or 'x'}", mt103(p).decode()))
    return out


CASES = [*_generated(), ("sample", SAMPLE), ("multiline", MULTILINE),
         *((f.stem, f.read_text()) for f in sorted(VECTORS.glob("mt103_*.fin")))]


def ours(text: str) -> Transaction:
    got = list(parse_mt(text.encode()))
    assert len(got) == 1 and isinstance(got[0], Transaction), got
    return got[0]


def refused(text: str) -> MessageError:
    got = list(parse_mt(text.encode()))
    assert len(got) == 1 and isinstance(got[0], MessageError), got
    return got[0]


def option(text: str, number: str) -> str:
    m = re.search(rf"^:{number}([A-Z]?):", text, re.M)
    assert m is not None
    return m.group(1)


def as_fin(opt: str, p: Party) -> str:
    """Our parsed party written back as the FIN field text (options A, F, K and no letter)."""
    lines = [f"/{p.account}"] if p.account else []
    if opt == "A":
        return "\n".join([*lines, str(p.bic)])
    if opt != "F":
        return "\n".join([*lines, str(p.name), *p.address_lines])
    ids = {i.scheme: i for i in p.identifiers}
    if not lines:
        first = next(i for i in p.identifiers if i.scheme not in ("DOB", "POB"))
        lines = [f"{first.scheme}/{first.country}/{first.value}"]
    *street, town = p.address_lines if p.country else (*p.address_lines, None)
    lines += [f"1/{p.name}", *(f"2/{a}" for a in street)] + ([f"3/{p.country}/{town}"] if town else [])
    if "DOB" in ids:
        lines.append(f"4/{ids['DOB'].value.replace('-', '')}")
    if "POB" in ids:
        lines.append(f"5/{ids['POB'].country}/{ids['POB'].value.rsplit(', ', 1)[0]}")
    return "\n".join(lines)


def swift_decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text.strip().replace(",", "."))


def test_samples_cover_the_options() -> None:
    texts = "\n".join(t for _, t in CASES)
    for tag in (":50K:", ":50F:", ":50A:", ":59:", ":59A:", ":59F:", ":33B:", ":36:", ":70:", ":71F:",
                ":72:", "3/", "4/", "NIDN/"):
        assert tag in texts, tag
    for name, text in CASES:
        body = text.split("{4:\n", 1)[1].rsplit("\n-}", 1)[0]
        assert is_x(re.sub(r"^:\w+:", "", body, flags=re.M)), name


@pytest.mark.parametrize(("name", "text"), CASES, ids=[n for n, _ in CASES])
def test_fields_agree(name: str, text: str) -> None:
    t = ours(text)
    m = package.MT103(text)
    assert m and m.text, "the package should match every valid sample"
    x = m.text
    assert x.transaction_reference == t.reference
    assert x.bank_operation_code == t.bank_operation_code
    assert x.date == t.value_date
    assert x.interbank_settled_currency == t.currency
    # Strings with the SWIFT comma ('1814,28', '12500,'); ours are Decimals with the minor units.
    assert swift_decimal(x.interbank_settled_amount) == t.amount
    assert x.original_ordered_currency == t.instructed_currency
    assert swift_decimal(x.original_ordered_amount) == t.instructed_amount
    # :36: keeps the line break before the next field ('0,9071\n'); compared without it.
    assert swift_decimal(x.exchange_rate) == t.exchange_rate
    assert x.ordering_customer == as_fin(option(text, "50"), t.originator)
    if option(text, "59") == "F":
        # 59F: the package only knows ':59:' and ':59A:'. The regex does not fail: the lazy
        # group of the field before (57A, 56A or 50a) swallows ':59F:...' and beneficiary is
        # None, silently. Ours reads the structured lines; assert ours, and where theirs went.
        assert x.beneficiary is None
        swallowed = [v for k, v in vars(x).items() if k != "raw" and isinstance(v, str) and ":59F:" in v]
        assert len(swallowed) == 1 and swallowed[0].endswith(":59F:" + as_fin("F", t.beneficiary))
        assert t.beneficiary.name and t.beneficiary.account and t.beneficiary.country
    else:
        assert x.beneficiary == as_fin(option(text, "59"), t.beneficiary)
    assert x.remittance_information == t.remittance
    assert x.details_of_charges == t.charges
    assert x.sender_to_receiver_information == t.sender_to_receiver
    assert m.user_header.uetr == t.uetr


def test_50f_is_raw_text_to_the_package() -> None:
    # 50F: the package hands back the numbered lines as they are ('1/...', '3/DE/...'); ours
    # splits name, address, country, date and place of birth and national identifiers.
    text = (VECTORS / "mt103_50f_dob.fin").read_text()
    x = package.MT103(text).text
    assert x.ordering_customer.splitlines()[1:] == ["1/MUELLER HANS PETER", "3/DE/BERLIN", "4/19650423",
                                                    "5/DE/HAMBURG"]
    o = ours(text).originator
    assert (o.name, o.country, o.address_lines) == ("MUELLER HANS PETER", "DE", ("BERLIN",))
    assert [(i.scheme, i.value) for i in o.identifiers] == [("DOB", "1965-04-23"), ("POB", "HAMBURG, DE")]


def _edit(old: str, new: str) -> str:
    assert old in SAMPLE
    return SAMPLE.replace(old, new)


# Invalid messages the package accepts (a truthy text, fields as given), each refused by ours
# with the field named: (case, message, field in our error).
INVALID = [
    ("value date 30 February: theirs date None, silently", _edit("230115EUR", "230230EUR"), ":32A:"),
    ("JPY with decimals", _edit("EUR1814,28", "JPY1814,28"), ":32A:"),
    ("amount with two commas", _edit("EUR1814,28", "EUR1,814,28"), ":32A:"),
    ("not an ISO 4217 currency", _edit("EUR1814,28", "XYZ1814,28"), ":32A:"),
    ("mandatory :59a: missing", _edit(":59:/GB33BUKB20201555555555\nJANE SMITH\n1 HIGH STREET\nLONDON\n", ""),
     ":59a:"),
    ("mandatory :32A: missing", _edit(":32A:230115EUR1814,28\n", ""), ":32A:"),
]
# Flawed messages both read: the package silently, ours naming the defect as a finding on the
# transaction: (case, message, finding code, field).
FLAWED = [
    ("charges code not OUR/SHA/BEN", _edit(":71A:SHA", ":71A:FOO"), "CODE_NOT_IN_LIST", ":71A:"),
    ("'@' outside the X character set", _edit("JOHN DOE", "JOHN@DOE"), "NON_X_CHARACTER", "block 4"),
    ("non-ASCII letter", _edit("JOHN DOE", "JÖRG DOE"), "NON_X_CHARACTER", "block 4"),
    ("name line of 45 characters", _edit("JOHN DOE", "JOHN DOE " + "X" * 36), "LINE_TOO_LONG", ":50K:"),
    ("upper-case UETR", _edit("e9f0b7c4-3a1b-4c5d-8e6f-7a8b9c0d1e2f", "E9F0B7C4-3A1B-4C5D-8E6F-7A8B9C0D1E2F"),
     "UETR_INVALID", "block 3 {121:}"),
    ("57A that is not a BIC", _edit(":57A:DEUTDEFF", ":57A:NOT A BIC"), "BIC_MALFORMED", ":57A:"),
]


@pytest.mark.parametrize(("case", "text", "field"), INVALID, ids=[c for c, _, _ in INVALID])
def test_invalid_input_the_package_accepts(case: str, text: str, field: str) -> None:
    m = package.MT103(text)
    assert m and m.text, f"the package no longer accepts: {case}"
    if "30 February" in case:
        assert m.text.interbank_settled_amount == "1814,28" and m.text.date is None
    assert refused(text).field == field


@pytest.mark.parametrize(("case", "text", "code", "field"), FLAWED, ids=[c for c, *_ in FLAWED])
def test_flawed_input_both_read_ours_names_the_flaw(case: str, text: str, code: str, field: str) -> None:
    m = package.MT103(text)
    assert m and m.text, f"the package no longer accepts: {case}"
    (t,) = parse_mt(text.encode())
    assert isinstance(t, Transaction), t
    assert (code, field) in {(f.code, f.field) for f in t.findings}


def test_space_in_reference_fails_the_package() -> None:
    # :20: is 16x and the X set includes the space; the package's [^\s:]+ cannot take it, so
    # its whole text block fails (every field None) where ours reads the message.
    text = _edit(":20:REF123", ":20:REF 123")
    assert not package.MT103(text).text
    assert ours(text).reference == "REF 123"


@pytest.mark.parametrize(("case", "old", "new", "swallowed_by"), [
    # 55A (third reimbursement institution) is missing from the package's regex: it ends up
    # inside receiver_correspondent ('DEUTDEFF\n:55A:BNPAFRPP').
    ("55A", ":57A:DEUTDEFF", ":53A:CHASUS33\n:54A:DEUTDEFF\n:55A:BNPAFRPP\n:57A:DEUTDEFF",
     "receiver_correspondent"),
    # 53A with an /account line: the package's 53a group stops at the first line break, so
    # the whole field lands in ordering_institution.
    ("53A with account", ":57A:DEUTDEFF", ":53A:/123456\nCHASUS33\n:57A:DEUTDEFF", "ordering_institution"),
], ids=["55A", "53A with account"])
def test_fields_the_package_swallows(case: str, old: str, new: str, swallowed_by: str) -> None:
    text = _edit(old, new)
    x = package.MT103(text).text
    assert f":{case[:3]}:" in getattr(x, swallowed_by)
    roles = {a.role: a for a in ours(text).agents}
    assert roles["senders_correspondent"].bic == "CHASUS33"
    if case == "55A":
        assert roles["third_reimbursement"].bic == "BNPAFRPP"
    else:
        assert roles["senders_correspondent"].account == "123456"


def test_rje_file_second_message_lost_by_the_package() -> None:
    # An RJE file ('$' between messages): the package's block 5 group (.+, greedy) takes the
    # second message as the first one's trailer; ours yields both.
    second = _edit(":20:REF123", ":20:REF124")
    text = f"{SAMPLE}\n$\n{second}"
    m = package.MT103(text)
    assert m.text.transaction_reference == "REF123" and ":20:REF124" in m.trailer
    got = list(parse_mt(text.encode()))
    assert [t.reference for t in got if isinstance(t, Transaction)] == ["REF123", "REF124"]
