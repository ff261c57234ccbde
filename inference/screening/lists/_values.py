"""Values every list publishes in its own spelling, read into one form: dates of birth, countries,
SWIFT BICs and publication dates.

Dates of birth become ISO 8601 / EDTF (ISO 8601-2) text with the years they cover: ``1950-06-05``,
``1961-04``, ``1953``, an interval ``1951/1953`` or ``1976-01-01/1978-12-31``, and a trailing
``~`` where the list says the date is approximate (``1960~``). Countries become ISO 3166-1 alpha-2
codes, by pycountry's names plus the spellings sanctions lists use that pycountry lacks ("Burma",
"Russia", "Palestinian", "Korea, North"); a name neither knows gives no code. A value that cannot
be read raises ``ValueError`` with a sentence; each parser turns it into a ``ListFormatError``
naming the element.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import Literal

__all__ = ["Dob", "bic", "country_code", "dob_from_bounds", "dob_from_text", "iso_country", "parse_date"]


@dataclass(frozen=True)
class Dob:
    """A date of birth as ISO 8601 / EDTF text and the calendar years it covers."""

    text: str
    years: frozenset[int]


_MONTHS = {m: n for n, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_FULL_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "june": 6, "july": 7, "august": 8,
    "september": 9, "sept": 9, "october": 10, "november": 11, "december": 12,
}
_MIN_YEAR, _MAX_YEAR = 1800, 2200  # a year of birth outside this is a typo, not a person

# One point in time as OFAC and the bank's files write it: "05 Jun 1950", "Jun 1950", "1950",
# "1950-06-05", "1950-06".
_DMY = re.compile(r"(\d{1,2}) ([A-Za-z]{3,9})\.? (\d{4})")
_MY = re.compile(r"([A-Za-z]{3,9})\.? (\d{4})")
_Y = re.compile(r"(\d{4})")
_ISO_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ISO_MONTH = re.compile(r"(\d{4})-(\d{2})")


@dataclass(frozen=True)
class _Point:
    """A date known to a day, a month or a year, as the first and last days it spans."""

    first: date
    last: date


def _year(text: str) -> int:
    year = int(text)
    if not _MIN_YEAR <= year <= _MAX_YEAR:
        raise ValueError(f"year {year} is outside {_MIN_YEAR}-{_MAX_YEAR}")
    return year


def _month(name: str) -> int:
    key = name.lower()
    month = _MONTHS.get(key[:3]) if len(key) == 3 else _FULL_MONTHS.get(key, _MONTHS.get(key))
    if month is None:
        raise ValueError(f"{name!r} is not a month")
    return month


def _day_point(year: int, month: int, day: int) -> _Point:
    d = date(year, month, day)  # ValueError for 31 Feb
    return _Point(d, d)


def _month_point(year: int, month: int) -> _Point:
    if not 1 <= month <= 12:
        raise ValueError(f"month {month} is not 1-12")
    last = date(year + (month == 12), month % 12 + 1, 1).toordinal() - 1
    return _Point(date(year, month, 1), date.fromordinal(last))


def _year_point(year: int) -> _Point:
    return _Point(date(year, 1, 1), date(year, 12, 31))


def _point(text: str) -> _Point:
    text = " ".join(text.split())
    try:
        return _point_of(text)
    except ValueError as exc:
        if "is not a date" in str(exc):
            raise
        raise ValueError(f"{text!r} is not a date ({exc})") from None


def _point_of(text: str) -> _Point:
    if m := _DMY.fullmatch(text):
        return _day_point(_year(m[3]), _month(m[2]), int(m[1]))
    if m := _MY.fullmatch(text):
        return _month_point(_year(m[2]), _month(m[1]))
    if m := _Y.fullmatch(text):
        return _year_point(_year(m[1]))
    if m := _ISO_DAY.fullmatch(text):
        return _day_point(_year(m[1]), int(m[2]), int(m[3]))
    if m := _ISO_MONTH.fullmatch(text):
        return _month_point(_year(m[1]), int(m[2]))
    raise ValueError(f"{text!r} is not a date")


def _years(first: date, last: date) -> frozenset[int]:
    if last < first:
        raise ValueError(f"the range ends ({last.isoformat()}) before it starts ({first.isoformat()})")
    return frozenset(range(first.year, last.year + 1))


_CIRCA = re.compile(r"(?:circa|ca\.|approx\.?|approximately|about)\s+", re.IGNORECASE)
_RANGE = re.compile(r"\s+(?:to|-)\s+|/", re.IGNORECASE)


def dob_from_text(text: str) -> Dob:
    """A date of birth as OFAC writes it ("05 Jun 1950", "Apr 1961", "1951 to 1953", "01 Jan 1976
    to 31 Dec 1978", "circa 1960") or as ISO 8601 / EDTF ("1950-06-05", "1951/1953", "1960~")."""
    raw = " ".join(text.split())
    approx = raw.endswith("~")
    body = raw.removesuffix("~").strip()
    if m := _CIRCA.match(body):
        approx, body = True, body[m.end():]
    if not body:
        raise ValueError("the date is empty")
    parts = _RANGE.split(body)
    if len(parts) > 2:
        raise ValueError(f"{raw!r} is not a date or a range of two dates")
    a, b = _point(parts[0]), _point(parts[-1])
    try:
        return dob_from_bounds(a.first, b.last, approximate=approx)
    except ValueError as exc:
        raise ValueError(f"{raw!r}: {exc}") from None


def dob_from_bounds(first: date, last: date, *, approximate: bool = False) -> Dob:
    """A date of birth given as the first and last day it may be (OFAC's enhanced XML): a day, a
    whole month or a whole year reads as such, anything else as an interval."""
    if last < first:
        raise ValueError(f"the range ends ({last.isoformat()}) before it starts ({first.isoformat()})")
    for d in (first, last):
        _year(str(d.year))

    def as_text(a: date, b: date) -> str | None:
        if a == b:
            return a.isoformat()
        if (a.month, a.day, b.month, b.day) == (1, 1, 12, 31) and a.year == b.year:
            return f"{a.year:04d}"
        if a.day == 1 and (a.year, a.month) == (b.year, b.month) and _month_point(a.year, a.month).last == b:
            return f"{a.year:04d}-{a.month:02d}"
        return None

    whole = as_text(first, last)
    if whole is None:
        start = f"{first.year:04d}" if (first.month, first.day) == (1, 1) else first.isoformat()
        end = f"{last.year:04d}" if (last.month, last.day) == (12, 31) else last.isoformat()
        whole = f"{start}/{end}"
    return Dob(whole + ("~" if approximate else ""), _years(first, last))


_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ].*|Z|[+-]\d{2}:\d{2})?")
_US_DATE = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")


def parse_date(text: str, *, order: Literal["iso", "mdy", "dmy"] = "iso") -> date:
    """A publication or listing date: ISO 8601 (a time and offset after it are ignored: the date
    is the one the list states), or ``order="mdy"`` / ``"dmy"`` for OFAC's 04/22/2020 and the UK's
    22/04/2020."""
    raw = text.strip()
    if order == "iso":
        m = _ISO_DATE.fullmatch(raw)
        if m is None:
            raise ValueError(f"{raw!r} is not an ISO 8601 date (YYYY-MM-DD)")
        return date(int(m[1]), int(m[2]), int(m[3]))
    m = _US_DATE.fullmatch(raw)
    if m is None:
        raise ValueError(f"{raw!r} is not a date written {'MM/DD/YYYY' if order == 'mdy' else 'DD/MM/YYYY'}")
    a, b, year = int(m[1]), int(m[2]), int(m[3])
    month, day = (a, b) if order == "mdy" else (b, a)
    return date(year, month, day)


# --- countries -------------------------------------------------------------------------------

_NOT_WORD = re.compile(r"[^0-9a-z]+")
_PAREN = re.compile(r"\s*\([^)]*\)")

# Spellings the lists use that pycountry's names, official names and common names do not give.
_ALIASES = {
    "russia": "RU", "burma": "MM", "turkey": "TR", "korea north": "KP", "north korea": "KP",
    "korea south": "KR", "south korea": "KR", "congo democratic republic": "CD",
    "democratic republic of congo": "CD", "congo kinshasa": "CD", "drc": "CD", "congo brazzaville": "CG",
    "republic of congo": "CG", "palestinian": "PS", "palestine": "PS", "palestinian territories": "PS",
    "occupied palestinian territory": "PS", "west bank": "PS", "gaza": "PS", "gaza strip": "PS",
    "kosovo": "XK", "macedonia": "MK", "ivory coast": "CI", "cape verde": "CV", "swaziland": "SZ",
    "vatican": "VA", "vatican city": "VA", "micronesia": "FM", "brunei": "BN", "uk": "GB",
    "great britain": "GB", "britain": "GB", "usa": "US", "united states of america": "US", "uae": "AE",
    "east timor": "TL", "bosnia": "BA", "czech republic": "CZ", "laos": "LA", "syria": "SY",
}


def _key(name: str) -> str:
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold().replace("&", " and ")
    text = _NOT_WORD.sub(" ", text).strip()
    return text.removeprefix("the ")


@functools.cache
def _country_index() -> dict[str, str]:
    import pycountry  # here: its database loads on first use (~50 ms), only list parsing needs it

    index: dict[str, str] = {}
    for c in pycountry.countries:
        code = str(c.alpha_2)
        for attr in ("name", "official_name", "common_name"):
            name = getattr(c, attr, None)
            if not name:
                continue
            variants = {name, _PAREN.sub("", name)}
            if ", " in name:  # "Korea, Democratic People's Republic of" -> "Democratic ... of Korea"
                head, _, tail = name.partition(", ")
                variants.add(f"{tail} {head}")
            for v in variants:
                index.setdefault(_key(v), code)
    for key, code in _ALIASES.items():
        index.setdefault(key, code)
    return index


@functools.cache
def country_code(name: str) -> str | None:
    """ISO 3166-1 alpha-2 for a country as a list names it ("Pakistan", "Iran (Islamic Republic
    of)", "Korea, North"), or None where the name is not a country we know."""
    return _country_index().get(_key(name)) if name.strip() else None


@functools.cache
def iso_country(code: str) -> str | None:
    """``code`` upper-cased when it is an ISO 3166-1 alpha-2 code (or XK, Kosovo, which the lists
    use), else None (the EU writes "00" for unknown)."""
    import pycountry

    upper = code.strip().upper()
    if upper == "XK" or (len(upper) == 2 and pycountry.countries.get(alpha_2=upper) is not None):
        return upper
    return None


# --- BICs ------------------------------------------------------------------------------------

_BIC = re.compile(r"[A-Z]{4}[A-Z]{2}[A-Z0-9]{2}(?:[A-Z0-9]{3})?")


def bic(value: str) -> str:
    """A SWIFT BIC, spaces removed and upper-cased; ``ValueError`` unless 8 or 11 characters of the
    ISO 9362 form (4 letters institution, 2 letters country, 2 location, optional 3 branch)."""
    compact = "".join(value.split()).upper()
    if len(compact) not in (8, 11):
        raise ValueError(f"SWIFT/BIC {value.strip()!r} is {len(compact)} characters, not 8 or 11")
    if not _BIC.fullmatch(compact):
        raise ValueError(f"SWIFT/BIC {value.strip()!r} is not of the form AAAABBCC or AAAABBCCDDD")
    return compact
