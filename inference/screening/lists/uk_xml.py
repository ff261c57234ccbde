"""The UK Sanctions List, as the FCDO publishes it in XML (``Designations``; the list that replaced
OFSI's Consolidated List of Asset Freeze Targets in January 2026). The element names are those of
the published file, as opensanctions' ``gb/fcdo_sanctions`` crawler reads them.

Per ``Designation``: ``UniqueID`` is the entry id ("AFG0006"); each ``Names/Name`` a name,
``Name1`` to ``Name5`` then ``Name6`` (the family name, or an organisation's whole name), the
``NameType`` "Primary Name" first (the file spells it in several cases, so it is compared
case-folded), an ``AliasStrength`` of "Low quality a.k.a" weak; each ``NameNonLatinScript`` an
alias; ``IndividualEntityShip`` the kind; ``RegimeName`` the programme; ``DateDesignated`` the
listing date; ``DOB`` the dates of birth (DD/MM/YYYY, "dd" and "mm" where unknown); address
countries, ``Nationality`` and a ship's flag the countries; address cities (``AddressLine6``) and
towns of birth the places; passport, national identifier, business registration and IMO numbers
the identifiers. ``DateGenerated`` (DD/MM/YYYY) is the publication date.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element

from inference.screening.entries import EntryKind, ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses
from ._xml import ListXml, each, require_placed, text

__all__ = ["FORMAT", "parse"]

FORMAT = "uk-xml/1"
_FMT = "uk-xml"
_KINDS: dict[str, EntryKind] = {"individual": "individual", "entity": "entity", "ship": "vessel"}
_NAME_PARTS = ("Name1", "Name2", "Name3", "Name4", "Name5", "Name6")
_IDENTIFIERS = (("PassportNumber", "Passport"), ("NationalIdentifierNumber", "National Identifier"),
                ("BusinessRegistrationNumber", "Business Registration Number"), ("IMONumber", "IMO"))
_UK_DOB = re.compile(r"(\d{1,2}|dd)/(\d{1,2}|mm)/(\d{4})", re.IGNORECASE)


@without_gc_pauses
def parse(data: bytes, name: str) -> SanctionsList:
    """The entries of a UK Sanctions List XML file; ``ListFormatError`` for a file that is not one,
    or for any entry that cannot be read whole."""
    doc = ListXml(data, _FMT)
    read = [(f"Designation[{n}]", _entry(el, f"Designation[{n}]"))
            for n, el in enumerate(doc.entries(("Designation",)), start=1)]
    root = doc.require_root(("Designations",), "<Designations>")
    require_placed(_FMT, root, ("Designation",), len(read), "Designations")
    generated = text(root.find("DateGenerated"))
    try:
        published = _values.parse_date(generated, order="dmy") if generated else None
    except ValueError as exc:
        raise ListFormatError(_FMT, "Designations/DateGenerated", str(exc)) from None
    return assemble(_FMT, "uk", name, published, SanctionsList.digest(bytes(data)), read, FORMAT)


def _entry(el: Element, where: str) -> ListEntry:
    kind = _KINDS.get(text(el.find("IndividualEntityShip")).lower(), "unknown")
    b = EntryBuilder(_FMT, where, text(el.find("UniqueID")), kind)
    names = each(el, "Names", "Name")
    for n in sorted(names, key=lambda x: text(x.find("NameType")).casefold() != "primary name"):
        full = " ".join(p for p in (text(n.find(t)) for t in _NAME_PARTS) if p)
        b.name(full, weak="low" in text(n.find("AliasStrength")).casefold())
    for non_latin in el.iter("NameNonLatinScript"):
        b.name(text(non_latin))
    b.programme(text(el.find("RegimeName")))
    if designated := text(el.find("DateDesignated")):
        try:
            b.listed_on = _values.parse_date(designated, order="dmy")
        except ValueError as exc:
            raise b.fail(str(exc), "DateDesignated") from None
    for i, dob in enumerate(el.iter("DOB"), start=1):
        if value := text(dob):
            try:
                b.dob(_dob(value))
            except ValueError as exc:
                raise b.fail(str(exc), f"DOBs/DOB[{i}]") from None
    for address in each(el, "Addresses", "Address"):
        b.country(_values.country_code(text(address.find("AddressCountry"))))
        b.place(text(address.find("AddressLine6")))
    for tag in ("Nationality", "CurrentBelievedFlagOfShip"):
        for c in el.iter(tag):
            b.country(_values.country_code(text(c)))
    for town in el.iter("TownOfBirth"):
        b.place(text(town))
    for tag, label in _IDENTIFIERS:
        for ident in el.iter(tag):
            b.identifier(label, text(ident))
    return b.build()


def _dob(value: str) -> _values.Dob:
    """DD/MM/YYYY with "dd" and "mm" standing for an unknown day or month ("dd/mm/1945")."""
    m = _UK_DOB.fullmatch(value)
    if m is None:
        return _values.dob_from_text(value)  # a bare year, or ISO 8601
    day, month, year = m[1].lower(), m[2].lower(), m[3]
    if month == "mm":
        return _values.dob_from_text(year)
    if day == "dd":
        return _values.dob_from_text(f"{year}-{int(month):02d}")
    return _values.dob_from_text(f"{year}-{int(month):02d}-{int(day):02d}")
