"""Countries, currencies, banks and account identifiers of the held-out world.

Each country has a currency (all with two ISO 4217 minor units), a winter UTC offset for
local-time behaviour and a weight in the population. Banks get a BIC of their own country
(ISO 9362: 4-letter institution code, the ISO 3166 country, a 2-character location). IBAN
countries get IBANs built from the national BBAN format (``schwifty``'s registry gives the
shape) with ISO 13616 mod-97 check digits computed here; other countries get a plain
account number. FX is this world's own fixed table (USD per unit), not the features' table.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
from schwifty.registry import get_iban_spec

__all__ = ["COUNTRIES", "Bank", "Country", "iban_check_digits", "make_account_number", "make_banks"]


@dataclass(frozen=True)
class Country:
    code: str  # ISO 3166-1 alpha-2
    currency: str  # ISO 4217
    usd_per_unit: float
    utc_offset_h: int  # local time = UTC + offset (winter)
    weight: float  # share of the population's accounts
    iban: bool


# The world: a European core with card and wire traffic, plus the hubs and corridors that wires
# between companies use. Weights sum to 1.
COUNTRIES: tuple[Country, ...] = (
    Country("DE", "EUR", 1.09, 1, 0.22, True),
    Country("NL", "EUR", 1.09, 1, 0.10, True),
    Country("GB", "GBP", 1.27, 0, 0.14, True),
    Country("AT", "EUR", 1.09, 1, 0.05, True),
    Country("CH", "CHF", 1.13, 1, 0.05, True),
    Country("PL", "PLN", 0.25, 1, 0.07, True),
    Country("SE", "SEK", 0.094, 1, 0.04, True),
    Country("IE", "EUR", 1.09, 0, 0.03, True),
    Country("CZ", "CZK", 0.043, 1, 0.03, True),
    Country("LU", "EUR", 1.09, 1, 0.02, True),
    Country("CY", "EUR", 1.09, 2, 0.015, True),
    Country("BG", "BGN", 0.56, 2, 0.015, True),
    Country("TR", "TRY", 0.029, 3, 0.03, True),
    Country("US", "USD", 1.0, -5, 0.12, False),
    Country("SG", "SGD", 0.74, 8, 0.03, False),
    Country("HK", "HKD", 0.128, 8, 0.02, False),
    Country("MX", "MXN", 0.052, -6, 0.03, False),
    Country("VG", "USD", 1.0, -4, 0.01, False),
)
BY_CODE = {c.code: c for c in COUNTRIES}
_ALNUM = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class Bank:
    name: str
    bic: str
    country: Country


def iban_check_digits(country: str, bban: str) -> str:
    """ISO 13616 check digits: 98 - (BBAN + country + '00' as digits) mod 97, two digits."""
    digits = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{98 - int(digits) % 97:02d}"


def _bban(spec: str, rng: np.random.Generator, fixed: str) -> str:
    """A BBAN of the shape ``spec`` (e.g. ``4!a6!n8!n``) whose first characters are ``fixed``."""
    out: list[str] = []
    i = 0
    while i < len(spec):
        j = spec.index("!", i)
        n, kind = int(spec[i:j]), spec[j + 1]
        alphabet = {"n": string.digits, "a": string.ascii_uppercase, "c": _ALNUM}[kind]
        out.extend(alphabet[int(k)] for k in rng.integers(0, len(alphabet), n))
        i = j + 2
    text = "".join(out)
    return fixed + text[len(fixed) :]


def make_banks(rng: np.random.Generator, per_country: int = 3) -> dict[str, list[Bank]]:
    """``per_country`` banks in every country, each with a distinct BIC of its country."""
    banks: dict[str, list[Bank]] = {}
    seen: set[str] = set()
    for c in COUNTRIES:
        banks[c.code] = []
        while len(banks[c.code]) < per_country:
            inst = "".join(string.ascii_uppercase[int(k)] for k in rng.integers(0, 26, 4))
            loc = "".join(_ALNUM[int(k)] for k in rng.integers(0, 36, 2)).replace("0", "2")
            bic = f"{inst}{c.code}{loc}"
            if bic in seen:
                continue
            seen.add(bic)
            banks[c.code].append(Bank(f"{inst.title()} Bank {c.code}", bic, c))
    return banks


def make_account_number(bank: Bank, rng: np.random.Generator, bank_index: int) -> tuple[str, bool]:
    """A new account at ``bank``: (IBAN, True) in an IBAN country, else (account number, False).

    The bank's national code is the same for all its accounts (``bank_index`` fixes its digits),
    so accounts of one bank share a prefix as real IBANs do."""
    code = bank.country.code
    if not bank.country.iban:
        return f"{bank_index + 1:03d}" + "".join(str(int(d)) for d in rng.integers(0, 10, 9)), False
    spec = get_iban_spec(code).bban_spec
    first = spec.split("!")[1][0]  # the kind of the first component: the bank code
    fixed = bank.bic[:4] if first == "a" else f"{bank_index + 1:03d}"
    bban = _bban(spec, rng, fixed)
    return f"{code}{iban_check_digits(code, bban)}{bban}", True
