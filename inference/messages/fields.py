"""Field checks shared by every format: currencies and minor units (iso4217), countries
(pycountry), IBANs and BICs (schwifty), amounts as exact decimals, dates.

Lookups are cached: the same currencies, countries and accounts recur on every message.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import lru_cache

import iso4217
import pycountry
from schwifty import BIC, IBAN
from schwifty.exceptions import InvalidCountryCode, SchwiftyException

from inference.messages.errors import MessageError
from inference.messages.findings import note

__all__ = ["amount", "bic", "bic_or_none", "country", "country_or_none", "currency_exponent", "iban_checked",
           "iban_or_none", "iso_date", "lei", "rate", "uetr", "uetr_or_none"]

# The lenient checks (``*_or_none``, ``iban_checked``) never refuse: a bad value becomes a finding
# (inference.messages.findings) and is kept or dropped as each says; the strict ones refuse.
_BIC_SHAPE = re.compile(r"[A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}(?:[A-Z0-9]{3})?")
_IBAN_SHAPE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}")

_SWIFT_AMOUNT = re.compile(r"(?=.{2,15}$)[0-9]+,[0-9]*")  # 15d: 15 characters, comma included
_DOT_AMOUNT = re.compile(r"[0-9]{1,18}(?:\.[0-9]+)?")  # ASCII digits only, not \d
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_LEI = re.compile(r"[A-Z0-9]{18}[0-9]{2}")
_UETR = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@lru_cache(maxsize=512)
def currency_exponent(code: str, field: str) -> int:
    """ISO 4217 minor units of ``code`` (JPY 0, USD 2, BHD 3); refuse unknown codes."""
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise MessageError(f"currency {code!r} is not three capital letters", field=field)
    try:
        exp = iso4217.Currency(code).exponent
    except ValueError:
        raise MessageError(f"currency {code!r} is not an ISO 4217 code", field=field) from None
    if exp is None:
        raise MessageError(f"currency {code!r} has no minor unit (not a payment currency)",
                           field=field)
    return int(exp)


def amount(text: str, currency: str, field: str, *, decimal_mark: str) -> Decimal:
    """An exact amount with at most the currency's minor units; ``decimal_mark`` is ',' for
    SWIFT FIN and '.' for ISO 20022 and JSON. The result carries exactly that many places."""
    exp = currency_exponent(currency, field)
    other = "." if decimal_mark == "," else ","
    if other in text:
        where = "SWIFT requires ','" if decimal_mark == "," else "'.' is required"
        raise MessageError(f"amount {text!r} uses {other!r} where {where}", field=field)
    if not text.isascii():
        raise MessageError(f"amount {text!r} is not a decimal number (ASCII digits)", field=field)
    if not (_SWIFT_AMOUNT if decimal_mark == "," else _DOT_AMOUNT).fullmatch(text):
        raise MessageError(f"amount {text!r} is not a decimal number", field=field)
    whole, _, frac = text.partition(decimal_mark)
    frac = frac.rstrip("0") if len(frac) > exp else frac
    if len(frac) > exp:
        raise MessageError(f"amount {text!r} has more decimals than {currency} allows ({exp})",
                           field=field)
    try:
        value = Decimal(f"{whole}.{frac or '0'}")
    except InvalidOperation:
        raise MessageError(f"amount {text!r} is not a decimal number", field=field) from None
    if value <= 0:
        raise MessageError(f"amount {text!r} must be positive", field=field)
    return value.quantize(Decimal(1).scaleb(-exp))


@lru_cache(maxsize=512)
def country(code: str, field: str) -> str:
    """An ISO 3166-1 alpha-2 code, checked."""
    if not re.fullmatch(r"[A-Z]{2}", code) or pycountry.countries.get(alpha_2=code) is None:
        raise MessageError(f"country {code!r} is not an ISO 3166-1 alpha-2 code", field=field)
    return code


@lru_cache(maxsize=4096)
def bic(text: str, field: str) -> str:
    """A BIC (8 or 11 characters, valid country), upper-case."""
    try:
        return str(BIC(text.strip()))
    except SchwiftyException as exc:
        raise MessageError(f"BIC {text!r} is invalid: {exc}", field=field) from None


def bic_or_none(text: str, field: str) -> str | None:
    """A BIC, upper-case; one of no ISO 3166 country is kept with ``BIC_UNKNOWN_COUNTRY`` (test and
    internal BICs often are), one of another shape dropped with ``BIC_MALFORMED``."""
    code = text.strip().upper()
    if not _BIC_SHAPE.fullmatch(code):
        note("BIC_MALFORMED", field, f"{text!r} is not a BIC (4 letters or digits, 2 letters, 2 and "
                                     "optionally 3 letters or digits)")
        return None
    if _known_country(code[4:6]) is None:
        note("BIC_UNKNOWN_COUNTRY", field, f"BIC {code} names country {code[4:6]!r}, not an ISO 3166 country")
        return code
    return _bic_checked(code)


@lru_cache(maxsize=4096)
def _bic_checked(code: str) -> str:
    try:
        return str(BIC(code))
    except SchwiftyException:  # a shape schwifty's registry rejects: kept as given, the shape is right
        return code


@lru_cache(maxsize=512)
def _known_country(code: str) -> str | None:
    return code if re.fullmatch(r"[A-Z]{2}", code) and pycountry.countries.get(alpha_2=code) else None


def country_or_none(code: str, field: str) -> str | None:
    """An ISO 3166-1 alpha-2 code, or None with ``COUNTRY_UNKNOWN``."""
    known = _known_country(code)
    if known is None:
        note("COUNTRY_UNKNOWN", field, f"{code!r} is not an ISO 3166-1 alpha-2 code")
    return known


def iban_checked(account: str, field: str) -> str | None:
    """``iban_or_none``, and ``IBAN_CHECK_DIGITS`` where ``account`` has the shape of an IBAN of an
    IBAN country but fails its length or check digits."""
    iban = iban_or_none(account)
    if iban is None and (why := _iban_fault(account.replace(" ", "").upper())) is not None:
        note("IBAN_CHECK_DIGITS", field, f"{account!r} {why}")
    return iban


@lru_cache(maxsize=1024)
def _iban_fault(compact: str) -> str | None:
    if not _IBAN_SHAPE.fullmatch(compact):
        return None
    try:
        IBAN(compact)
    except InvalidCountryCode:
        return None  # not an IBAN country: an account number that looks like one
    except SchwiftyException as exc:
        return f"is not a valid IBAN ({exc})"
    return None


def uetr_or_none(text: str, field: str) -> str | None:
    """A UETR, or None with ``UETR_INVALID``."""
    if _UETR.fullmatch(text):
        return text
    note("UETR_INVALID", field, f"{text!r} is not a lower-case version 4 UUID")
    return None


@lru_cache(maxsize=8192)
def iban_or_none(account: str) -> str | None:
    """The normalised IBAN if ``account`` is one (checksum and length verified), else None."""
    compact = account.replace(" ", "").upper()
    if not re.fullmatch(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}", compact):
        return None
    try:
        return str(IBAN(compact).compact)
    except SchwiftyException:
        return None


def uetr(text: str, field: str) -> str:
    """A UETR: a lower-case version-4 UUID (SWIFT gpi)."""
    if not _UETR.fullmatch(text):
        raise MessageError(f"UETR {text!r} is not a lower-case version 4 UUID", field=field)
    return text


def iso_date(text: str, field: str) -> date:
    """Exactly YYYY-MM-DD (``date.fromisoformat`` alone would also take 20250314 or weeks)."""
    if not _ISO_DATE.fullmatch(text):
        raise MessageError(f"date {text!r} is not YYYY-MM-DD", field=field)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise MessageError(f"date {text!r} is not YYYY-MM-DD", field=field) from None


def lei(text: str, field: str) -> str:
    """ISO 17442 LEI: 18 characters and two check digits (ISO 7064 MOD 97-10)."""
    if not _LEI.fullmatch(text) or int("".join(str(int(c, 36)) for c in text)) % 97 != 1:
        raise MessageError(f"LEI {text!r} is invalid (format or check digits)", field=field)
    return text


def rate(text: str, field: str, *, decimal_mark: str) -> Decimal:
    """An exchange rate, normalised (0.90 and 0.9 are one rate, whatever the format)."""
    pattern = r"[0-9]{1,11},[0-9]*" if decimal_mark == "," else r"[0-9]{1,11}(?:\.[0-9]{1,10})?"
    if not re.fullmatch(pattern, text) or len(text) > 12 + (decimal_mark == "."):
        raise MessageError(f"exchange rate {text!r} is not a decimal with {decimal_mark!r}",
                           field=field)
    value = Decimal(text.replace(",", ".").rstrip("."))
    if value <= 0:
        raise MessageError(f"exchange rate {text!r} must be positive", field=field)
    return Decimal(format(value.normalize(), "f"))
