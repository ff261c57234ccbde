"""The UN Security Council Consolidated List (``CONSOLIDATED_LIST``, https://scsanctions.un.org).

Per ``INDIVIDUAL`` (under ``INDIVIDUALS``) and ``ENTITY`` (under ``ENTITIES``): ``REFERENCE_NUMBER``
is the entry id ("TAi.154"); ``FIRST_NAME`` to ``FOURTH_NAME`` the primary name; each
``INDIVIDUAL_ALIAS`` / ``ENTITY_ALIAS`` an alias, weak where its ``QUALITY`` is "Low" (or "Very
Low"); ``NAME_ORIGINAL_SCRIPT`` an alias; ``UN_LIST_TYPE`` the programme; ``LISTED_ON`` the listing
date; ``INDIVIDUAL_DATE_OF_BIRTH`` the dates of birth (a ``DATE``, a ``YEAR``, or ``FROM_YEAR`` to
``TO_YEAR``; approximate where ``TYPE_OF_DATE`` is "APPROXIMATELY"); ``NATIONALITY`` and address
countries the countries; places of birth and address cities the places;
``INDIVIDUAL_DOCUMENT`` the identifiers. The root's ``dateGenerated`` is the publication date.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from inference.screening.entries import EntryKind, ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses
from ._xml import ListXml, each, require_placed, text

__all__ = ["FORMAT", "parse"]

FORMAT = "un-xml/1"
_FMT = "un-xml"
_NAME_PARTS = ("FIRST_NAME", "SECOND_NAME", "THIRD_NAME", "FOURTH_NAME")
_WEAK = ("low", "very low")


@without_gc_pauses
def parse(data: bytes, name: str) -> SanctionsList:
    """The entries of a UN consolidated list file; ``ListFormatError`` for a file that is not one,
    or for any entry that cannot be read whole."""
    doc = ListXml(data, _FMT)
    read: list[tuple[str, ListEntry]] = []
    counts = {"INDIVIDUAL": 0, "ENTITY": 0}
    for el in doc.entries(("INDIVIDUAL", "ENTITY")):
        counts[el.tag] += 1
        where = f"{el.tag}[{counts[el.tag]}]"
        read.append((where, _entry(el, where)))
    root = doc.require_root(("CONSOLIDATED_LIST",), "<CONSOLIDATED_LIST>")
    require_placed(_FMT, root.find("INDIVIDUALS"), ("INDIVIDUAL",), counts["INDIVIDUAL"], "INDIVIDUALS")
    require_placed(_FMT, root.find("ENTITIES"), ("ENTITY",), counts["ENTITY"], "ENTITIES")
    generated = root.get("dateGenerated", "")
    try:
        published = _values.parse_date(generated) if generated.strip() else None
    except ValueError as exc:
        raise ListFormatError(_FMT, "CONSOLIDATED_LIST/@dateGenerated", str(exc)) from None
    return assemble(_FMT, "un", name, published, SanctionsList.digest(bytes(data)), read, FORMAT)


def _entry(el: Element, where: str) -> ListEntry:
    kind: EntryKind = "individual" if el.tag == "INDIVIDUAL" else "entity"
    b = EntryBuilder(_FMT, where, text(el.find("REFERENCE_NUMBER")), kind)
    b.primary(" ".join(p for p in (text(el.find(t)) for t in _NAME_PARTS) if p), "FIRST_NAME")
    b.name(text(el.find("NAME_ORIGINAL_SCRIPT")))
    for alias in el.findall(f"{el.tag}_ALIAS"):
        b.name(text(alias.find("ALIAS_NAME")), weak=text(alias.find("QUALITY")).lower() in _WEAK)
    b.programme(text(el.find("UN_LIST_TYPE")))
    if listed := text(el.find("LISTED_ON")):
        try:
            b.listed_on = _values.parse_date(listed)
        except ValueError as exc:
            raise b.fail(str(exc), "LISTED_ON") from None
    for i, dob in enumerate(el.findall("INDIVIDUAL_DATE_OF_BIRTH"), start=1):
        try:
            parsed = _dob(dob)
        except ValueError as exc:
            raise b.fail(str(exc), f"INDIVIDUAL_DATE_OF_BIRTH[{i}]") from None
        if parsed is not None:
            b.dob(parsed)
    for nationality in each(el, "NATIONALITY", "VALUE"):
        b.country(_values.country_code(text(nationality)))
    for address in el.findall(f"{el.tag}_ADDRESS"):
        b.country(_values.country_code(text(address.find("COUNTRY"))))
        b.place(text(address.find("CITY")))
    for birthplace in el.findall("INDIVIDUAL_PLACE_OF_BIRTH"):
        b.place(text(birthplace.find("CITY")))
    for document in el.findall("INDIVIDUAL_DOCUMENT"):
        issuer = text(document.find("COUNTRY_OF_ISSUE")) or text(document.find("ISSUING_COUNTRY"))
        b.identifier(text(document.find("TYPE_OF_DOCUMENT")), text(document.find("NUMBER")),
                     _values.country_code(issuer))
    return b.build()


def _dob(el: Element) -> _values.Dob | None:
    approx = "~" if text(el.find("TYPE_OF_DATE")).upper() == "APPROXIMATELY" else ""
    day, year = text(el.find("DATE")), text(el.find("YEAR"))
    start, end = text(el.find("FROM_YEAR")), text(el.find("TO_YEAR"))
    if day:
        return _values.dob_from_text(day + approx)
    if year:
        return _values.dob_from_text(year + approx)
    if start or end:
        return _values.dob_from_text(f"{start or end}/{end or start}{approx}")
    return None
