"""One normalised form for an entry of any sanctions list, whatever format it was published in.

OFAC, the UN, the EU, the UK and a bank's own lists each describe a listed person or organisation
in their own XML or CSV; each parser in ``inference.screening.lists`` turns its format into
``ListEntry`` values, and everything after parsing (the index, matching, the decision, replay)
sees only these. ``SanctionsList`` is one loaded list: its source, the publication date the list
states, the SHA-256 of the exact bytes loaded (the list's version: what a decision names and a
bundle carries), and its entries in the order published.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

__all__ = ["ENTRY_KINDS", "SOURCES", "EntryId", "EntryKind", "ListEntry", "SanctionsList", "Source"]

# "region": a sanctioned territory or city ("Crimea", "Sevastopol"), listed by a bank's own list so
# that a payment naming it in an address or in free text is found like a listed name
EntryKind = Literal["individual", "entity", "vessel", "aircraft", "region", "unknown"]
ENTRY_KINDS: tuple[EntryKind, ...] = ("individual", "entity", "vessel", "aircraft", "region", "unknown")

Source = Literal["ofac-sdn", "ofac-consolidated", "un", "eu", "uk", "internal"]
SOURCES: tuple[Source, ...] = ("ofac-sdn", "ofac-consolidated", "un", "eu", "uk", "internal")


@dataclass(frozen=True)
class EntryId:
    """An identifier a list gives an entry (passport, national id, IMO number, SWIFT BIC, ...)."""

    kind: str  # as the list names it, e.g. "Passport", "SWIFT/BIC", "IMO"
    value: str  # as published
    country: str | None = None  # ISO 3166-1 alpha-2 when the list states and we recognise it


@dataclass(frozen=True)
class ListEntry:
    """One listed person, organisation, vessel or aircraft, as its list published it.

    ``names[0]`` is the primary name; the rest are the aliases the list gives (strong and weak
    alike: ``weak_aliases`` holds the indexes of those the list marks weak or low quality, which
    score lower). Dates of birth are kept as published (a full date, a year, or a range's bounds:
    ``dob_years`` holds the years they cover, what secondary evidence compares).
    """

    entry_id: str  # the list's own id (OFAC uid, UN reference number, EU logical id, UK unique id)
    kind: EntryKind
    names: tuple[str, ...]
    programmes: tuple[str, ...] = ()
    weak_aliases: frozenset[int] = frozenset()
    dobs: tuple[str, ...] = ()
    dob_years: frozenset[int] = frozenset()
    countries: tuple[str, ...] = ()  # nationality, citizenship, address and registration countries
    identifiers: tuple[EntryId, ...] = ()
    bics: tuple[str, ...] = ()  # SWIFT BICs, 8 or 11 characters, upper case
    places: tuple[str, ...] = ()  # places of birth and address cities, for free-text screening
    listed_on: date | None = None

    def __post_init__(self) -> None:
        if not self.names or not all(n.strip() for n in self.names):
            raise ValueError(f"entry {self.entry_id!r}: every listed entry needs a non-blank name")
        if self.kind not in ENTRY_KINDS:
            raise ValueError(f"entry {self.entry_id!r}: unknown kind {self.kind!r}")

    def to_json(self) -> dict[str, Any]:
        """The entry as canonical JSON material (sorted sets, ISO dates): what a hit quotes."""
        return {
            "entry_id": self.entry_id, "kind": self.kind, "names": list(self.names),
            "weak_aliases": sorted(self.weak_aliases), "programmes": list(self.programmes),
            "dobs": list(self.dobs), "countries": list(self.countries),
            "identifiers": [{"kind": i.kind, "value": i.value, "country": i.country}
                            for i in self.identifiers],
            "bics": list(self.bics), "places": list(self.places),
            "listed_on": self.listed_on.isoformat() if self.listed_on else None,
        }


@dataclass(frozen=True)
class SanctionsList:
    """One version of one list: where it comes from, when it says it was published, the SHA-256
    of the bytes it was parsed from, and its entries."""

    source: Source
    name: str  # the bank's name for this list, e.g. "ofac-sdn" or "internal-exits"
    published: date | None
    sha256: str
    entries: tuple[ListEntry, ...]
    format: str  # the parser that read it, e.g. "ofac-xml/1"
    by_id: dict[str, ListEntry] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown list source {self.source!r}; one of {', '.join(SOURCES)}")
        ids: dict[str, ListEntry] = {}
        for e in self.entries:
            if e.entry_id in ids:
                raise ValueError(f"list {self.name!r}: entry id {e.entry_id!r} appears twice")
            ids[e.entry_id] = e
        object.__setattr__(self, "by_id", ids)

    @staticmethod
    def digest(data: bytes) -> str:
        """The list version: SHA-256 of the exact bytes loaded, lower-case hex."""
        return hashlib.sha256(data).hexdigest()
