"""The simulated bank's customers for ``inference.simulate``: countries, accounts, names, banks.

Built once per seed, before any payment is drawn. Accounts in IBAN countries carry a
checksum-valid IBAN (ISO 13616, mod-97 check digits computed here) in both ``Party.account``
and ``Party.iban``; accounts in countries without an IBAN scheme (US, JP, CA, KP, VN, ...)
carry a national account number in ``Party.account`` and ``iban=None``, exactly as the
message parsers leave them. Each account banks with a plausible 8-character BIC whose
characters 5-6 are its country.

Countries come in four groups: low-risk home markets, financial hubs (low FATF risk, used by
legitimate trade and by layering and round-tripping), FATF jurisdictions under increased
monitoring ("grey list") and FATF high-risk jurisdictions subject to a call for action
("black list"), both as published in October 2025.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from inference.messages.transaction import Identifier, Party

__all__ = [
    "CALL_FOR_ACTION",
    "COUNTRIES",
    "HUBS",
    "INCREASED_MONITORING",
    "LOW_RISK",
    "Account",
    "Country",
    "Population",
    "build_population",
    "iban_check_digits",
]


@dataclass(frozen=True)
class Country:
    code: str  # ISO 3166-1 alpha-2
    bban: str | None  # ISO 13616 BBAN format, e.g. "4!a6!n8!n"; None where there is no IBAN
    currency: str  # what its customers pay in
    utc_offset: int  # hours, January
    city: str
    weight: int  # relative share of the bank's customers within the country's group


_C = Country
LOW_RISK: tuple[Country, ...] = (
    _C("US", None, "USD", -5, "New York", 18), _C("GB", "4!a6!n8!n", "GBP", 0, "London", 13),
    _C("DE", "8!n10!n", "EUR", 1, "Frankfurt", 11), _C("FR", "5!n5!n11!c2!n", "EUR", 1, "Paris", 9),
    _C("NL", "4!a10!n", "EUR", 1, "Amsterdam", 5), _C("ES", "4!n4!n1!n1!n10!n", "EUR", 1, "Madrid", 5),
    _C("IT", "1!a5!n5!n12!c", "EUR", 1, "Milan", 5), _C("CH", "5!n12!c", "CHF", 1, "Zurich", 4),
    _C("JP", None, "JPY", 9, "Tokyo", 4), _C("CA", None, "CAD", -5, "Toronto", 3),
    _C("BE", "3!n7!n2!n", "EUR", 1, "Brussels", 3), _C("AT", "5!n11!n", "EUR", 1, "Vienna", 2),
    _C("IE", "4!a6!n8!n", "EUR", 0, "Dublin", 2), _C("PT", "4!n4!n11!n2!n", "EUR", 0, "Lisbon", 2),
)
HUBS: tuple[Country, ...] = (
    _C("LU", "3!n13!c", "EUR", 1, "Luxembourg", 3), _C("CY", "3!n5!n16!c", "EUR", 2, "Limassol", 2),
    _C("MT", "4!a5!n18!c", "EUR", 1, "Valletta", 1), _C("AE", "3!n16!n", "USD", 4, "Dubai", 3),
    _C("HK", None, "USD", 8, "Hong Kong", 2),
)
# FATF "jurisdictions under increased monitoring", October 2025 (BG pays in EUR since 2026-01-01).
INCREASED_MONITORING: tuple[Country, ...] = (
    _C("DZ", "22!n", "USD", 1, "Algiers", 1), _C("AO", "21!n", "USD", 1, "Luanda", 1),
    _C("BO", None, "USD", -4, "La Paz", 1), _C("BG", "4!a4!n2!n8!c", "EUR", 2, "Sofia", 3),
    _C("CM", "23!n", "USD", 1, "Douala", 1), _C("CI", "2!a22!n", "USD", 0, "Abidjan", 1),
    _C("CD", None, "USD", 1, "Kinshasa", 1), _C("HT", None, "USD", -5, "Port-au-Prince", 1),
    _C("KE", None, "USD", 3, "Nairobi", 2), _C("LA", None, "USD", 7, "Vientiane", 1),
    _C("LB", "4!n20!c", "USD", 2, "Beirut", 1), _C("MC", "5!n5!n11!c2!n", "EUR", 1, "Monaco", 2),
    _C("NA", None, "USD", 2, "Windhoek", 1), _C("NP", None, "USD", 6, "Kathmandu", 1),
    _C("SS", None, "USD", 2, "Juba", 1), _C("SY", None, "USD", 3, "Damascus", 1),
    _C("VE", None, "USD", -4, "Caracas", 1), _C("VN", None, "USD", 7, "Hanoi", 3),
    _C("YE", "4!a4!n18!c", "USD", 3, "Aden", 1), _C("VG", "4!a16!n", "USD", -4, "Road Town", 2),
)
# FATF "high-risk jurisdictions subject to a call for action", October 2025.
CALL_FOR_ACTION: tuple[Country, ...] = (
    _C("KP", None, "USD", 9, "Pyongyang", 1), _C("IR", "22!n", "USD", 3, "Tehran", 1),
    _C("MM", None, "USD", 7, "Yangon", 1),
)
COUNTRIES: dict[str, Country] = {
    c.code: c for group in (LOW_RISK, HUBS, INCREASED_MONITORING, CALL_FOR_ACTION) for c in group
}
# Share of the population outside the low-risk home markets (each country at least once).
_MINOR_GROUPS = ((HUBS, 0.05), (INCREASED_MONITORING, 0.08), (CALL_FOR_ACTION, 0.01))

_FIRST = ("Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kenji",
          "Lena", "Marco", "Nadia", "Omar", "Paula", "Quentin", "Rosa", "Samir", "Tara", "Ugo", "Vera",
          "Wei", "Yusuf")
_LAST = ("Adams", "Bauer", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Horvat", "Ito", "Jansen",
         "Keller", "Lopez", "Martin", "Nguyen", "Okafor", "Petrov", "Rossi", "Schmidt", "Tanaka", "Silva",
         "Varga", "Weber", "Young", "Zimmer")
_TRADE = ("Trading", "Logistics", "Consulting", "Holdings", "Foods", "Textiles", "Imports", "Technologies",
          "Services", "Metals")
_SUFFIX = {"US": "Inc", "DE": "GmbH", "AT": "GmbH", "FR": "SARL", "LU": "SARL", "NL": "BV", "BE": "BV",
           "ES": "SL", "IT": "SRL", "CH": "AG", "JP": "KK", "PT": "Lda", "AE": "FZE", "MC": "SAM"}
_STREETS = ("Market Street", "Station Road", "Harbour Way", "Main Street", "Park Avenue", "Mill Lane")
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = "0123456789"
_SPEC = re.compile(r"(\d+)!([nac])")


@dataclass(frozen=True)
class Account:
    """One customer account. ``parties[0]`` is the full originator record; 1-3 are the
    incomplete forms some payments carry (no address or id; account only; birth date only)."""

    index: int
    country: str
    currency: str
    business: bool
    account: str  # IBAN, or the national account number where the country has no IBAN
    iban: str | None
    bic: str
    parties: tuple[Party, Party, Party, Party]
    activity: float  # relative number of normal payments it sends


@dataclass(frozen=True)
class Population:
    """All accounts, and the index pools that payments draw from (each in index order)."""

    accounts: tuple[Account, ...]
    payees: tuple[tuple[int, ...], ...]  # usual counterparties of each account, by index
    low: tuple[int, ...]  # low-risk home-market accounts
    low_retail: tuple[int, ...]
    low_business: tuple[int, ...]
    hubs: tuple[int, ...]
    grey: tuple[int, ...]
    black: tuple[int, ...]
    by_country: dict[str, tuple[int, ...]]


def iban_check_digits(country: str, bban: str) -> str:
    """ISO 13616 check digits (ISO 7064 mod 97-10) for ``country`` + ``bban``."""
    digits = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{98 - int(digits) % 97:02d}"


def _chars(rng: random.Random, n: int, kind: str) -> str:
    # Account numbers are digits even where the format allows letters ("c").
    return "".join(rng.choices(_UPPER if kind == "a" else _DIGITS, k=n))


def _weighted(rng: random.Random, group: tuple[Country, ...], k: int) -> list[Country]:
    return rng.choices(group, weights=[c.weight for c in group], k=k)


def _bank(rng: random.Random, country: Country) -> tuple[str, str]:
    """(BIC, the bank's prefix of the BBAN): the first BBAN component (or the first 5 characters
    of a single-component BBAN) identifies the bank; a 4-letter one is the BIC's bank code."""
    code = _chars(rng, 4, "a")
    bic = f"{code}{country.code}{_chars(rng, 2, 'a')}"
    if country.bban is None:
        return bic, ""
    parts = _SPEC.findall(country.bban)
    size, kind = parts[0]
    if len(parts) == 1:
        return bic, _chars(rng, 5, kind)
    return bic, (code if (size, kind) == ("4", "a") else _chars(rng, int(size), kind))


def _account_number(rng: random.Random, country: Country, bank_prefix: str) -> tuple[str, str | None]:
    if country.bban is None:
        return _chars(rng, 12, "n"), None
    kinds = "".join(kind * int(size) for size, kind in _SPEC.findall(country.bban))
    bban = bank_prefix + "".join(_chars(rng, 1, kind) for kind in kinds[len(bank_prefix):])
    iban = f"{country.code}{iban_check_digits(country.code, bban)}{bban}"
    return iban, iban


def _parties(rng: random.Random, index: int, country: Country, business: bool,
             account: str, iban: str | None) -> tuple[Party, Party, Party, Party]:
    last = rng.choice(_LAST)
    if business:
        name = f"{last} {rng.choice(_TRADE)} {_SUFFIX.get(country.code, 'Ltd')}"
    else:
        name = f"{rng.choice(_FIRST)} {last}"
    address = (f"{rng.randint(1, 220)} {rng.choice(_STREETS)}", country.city)
    full = Party(name=name, account=account, iban=iban, address_lines=address, country=country.code,
                 identifiers=(Identifier("CUST", f"C{index:09d}", country.code),))
    no_address = Party(name=name, account=account, iban=iban, country=country.code)
    account_only = Party(account=account, iban=iban, country=country.code)
    born = f"{rng.randint(1950, 2004)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    birth_date_only = no_address if business else Party(
        name=name, account=account, iban=iban, country=country.code, identifiers=(Identifier("DOB", born),))
    return full, no_address, account_only, birth_date_only


def build_population(seed: int, n_accounts: int) -> Population:
    """``n_accounts`` customer accounts and their usual payees, deterministic from ``seed``."""
    rng = random.Random(f"sealtrail.simulate/{seed}/population")
    countries: list[Country] = []
    for group, share in _MINOR_GROUPS:
        quota = max(len(group), round(n_accounts * share))
        countries += [*group, *_weighted(rng, group, quota - len(group))]
    n_low = n_accounts - len(countries)
    countries = [*LOW_RISK, *_weighted(rng, LOW_RISK, n_low - len(LOW_RISK)), *countries]
    banks = {c.code: [_bank(rng, c) for _ in range(3)] for c in COUNTRIES.values()}
    seen: set[str] = set()
    accounts: list[Account] = []
    for index, country in enumerate(countries):
        bic, bank_part = rng.choice(banks[country.code])
        account, iban = _account_number(rng, country, bank_part)
        while account in seen:
            account, iban = _account_number(rng, country, bank_part)
        seen.add(account)
        business = rng.random() < (0.35 if country in HUBS else 0.2)
        activity = (2.0 if business else 1.0) * (0.6 if country in INCREASED_MONITORING else 1.0)
        if country in CALL_FOR_ACTION:
            activity = 0.0  # appear only in the high-risk-corridor typology
        accounts.append(Account(index, country.code, country.currency, business, account, iban, bic,
                                _parties(rng, index, country, business, account, iban), activity))
    return _with_payees(rng, tuple(accounts))


def _with_payees(rng: random.Random, accounts: tuple[Account, ...]) -> Population:
    def pick(group: tuple[Country, ...], business: bool | None = None) -> tuple[int, ...]:
        codes = {c.code for c in group}
        return tuple(a.index for a in accounts
                     if a.country in codes and (business is None or a.business == business))

    by_country: dict[str, list[int]] = {}
    for a in accounts:
        by_country.setdefault(a.country, []).append(a.index)
    low, grey = pick(LOW_RISK), pick(INCREASED_MONITORING)
    payees: list[tuple[int, ...]] = []
    for a in accounts:
        domestic = by_country[a.country]
        chosen: list[int] = []
        for _ in range(rng.randint(2, 7)):
            r = rng.random()
            if r < 0.75 and len(domestic) > 1:
                pool: tuple[int, ...] | list[int] = domestic
            elif r < 0.95 or a.business:
                pool = low
            else:
                pool = grey  # family abroad
            b = rng.choice(pool)
            if b != a.index and b not in chosen:
                chosen.append(b)
        payees.append(tuple(chosen) or (low[0] if low[0] != a.index else low[1],))
    return Population(
        accounts=accounts, payees=tuple(payees), low=low, low_retail=pick(LOW_RISK, False),
        low_business=pick(LOW_RISK, True), hubs=pick(HUBS), grey=grey, black=pick(CALL_FOR_ACTION),
        by_country={k: tuple(v) for k, v in by_country.items()},
    )
