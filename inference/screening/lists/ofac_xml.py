"""OFAC's classic XML (``sdnList``): the SDN list (SDN.XML) and the consolidated non-SDN list
(CONSOLIDATED.XML), which share one schema.

Both namespaces OFAC has published it under are read: ``http://tempuri.org/sdnList.xsd`` and,
since May 2024, ``https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/XML``.

The file does not say which of the two lists it is, so the caller does: ``source="ofac-sdn"`` or
``"ofac-consolidated"`` (``lists.load`` takes it from its ``source`` argument, or from the list's
name when that is one of the two).

Per ``sdnEntry``: ``uid`` is the entry id; ``firstName lastName`` the primary name ("Muhammad
SAEED"; an entity's ``lastName`` alone); each ``aka`` an alias, weak where its category is "weak";
``sdnType`` the kind (a type OFAC adds later reads as "unknown"); ``programList`` the programmes;
``idList`` the identifiers (a "SWIFT/BIC" id is a BIC; the descriptive rows OFAC keeps there, such
as "Gender" or "Additional Sanctions Information -", identify nothing and are left out);
``dateOfBirthList`` the dates of birth; nationality, citizenship, address countries and a vessel's
flag the countries; places of birth and address cities the places. ``Publish_Date`` (MM/DD/YYYY)
is the publication date.
"""

from __future__ import annotations

from typing import Literal
from xml.etree.ElementTree import Element

from inference.screening.entries import EntryKind, ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses
from ._xml import ListXml, each, namespace, require_placed, text, text_at

__all__ = ["FORMAT", "NAMESPACES", "parse"]

FORMAT = "ofac-xml/1"
_FMT = "ofac-xml"
NAMESPACES = ("http://tempuri.org/sdnList.xsd",
              "https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/XML")
_ROOTS = frozenset(f"{{{ns}}}sdnList" for ns in NAMESPACES)
_ENTRIES = frozenset(f"{{{ns}}}sdnEntry" for ns in NAMESPACES)

KINDS: dict[str, EntryKind] = {"individual": "individual", "entity": "entity", "vessel": "vessel",
                               "aircraft": "aircraft"}

# idList rows that describe an entry rather than identify it (OFAC files such notes there).
NOT_IDENTIFIERS = ("gender", "additional sanctions information", "secondary sanctions risk",
                   "transactions prohibited", "effective date", "listing date",
                   "organization established date", "organization type", "target type", "executive order",
                   "caatsa section")


@without_gc_pauses
def parse(data: bytes, name: str, *, source: Literal["ofac-sdn", "ofac-consolidated"]) -> SanctionsList:
    """The entries of an OFAC classic XML file, as list ``source``; ``ListFormatError`` for a file
    that is not one, or for any entry that cannot be read whole."""
    doc = ListXml(data, _FMT)
    read = [(f"sdnEntry[{n}]", _entry(el, n)) for n, el in enumerate(doc.entries(_ENTRIES), start=1)]
    root = doc.require_root(_ROOTS, "<sdnList> in an OFAC namespace")
    require_placed(_FMT, root, _ENTRIES, len(read), "sdnList")
    ns = namespace(root.tag)
    published_text = text_at(root, f"{ns}publshInformation", f"{ns}Publish_Date")
    try:
        published = _values.parse_date(published_text, order="mdy") if published_text else None
    except ValueError as exc:
        raise ListFormatError(_FMT, "publshInformation/Publish_Date", str(exc)) from None
    return assemble(_FMT, source, name, published, SanctionsList.digest(bytes(data)), read, FORMAT)


def full_name(el: Element, ns: str) -> str:
    """``firstName lastName`` of an entry or an aka ("Muhammad SAEED"; an entity has no first name)."""
    first_name, last_name = text(el.find(f"{ns}firstName")), text(el.find(f"{ns}lastName"))
    return f"{first_name} {last_name}".strip()


def _entry(el: Element, n: int) -> ListEntry:
    ns = namespace(el.tag)
    kind = KINDS.get(text(el.find(f"{ns}sdnType")).lower(), "unknown")
    b = EntryBuilder(_FMT, f"sdnEntry[{n}]", text(el.find(f"{ns}uid")), kind)
    b.primary(full_name(el, ns), "lastName")
    for aka in each(el, f"{ns}akaList", f"{ns}aka"):
        b.name(full_name(aka, ns), weak=text(aka.find(f"{ns}category")).lower() == "weak")
    for p in each(el, f"{ns}programList", f"{ns}program"):
        b.programme(p.text)
    for i, ident in enumerate(each(el, f"{ns}idList", f"{ns}id"), start=1):
        id_type, number = text(ident.find(f"{ns}idType")), text(ident.find(f"{ns}idNumber"))
        if id_type.upper().replace(" ", "") in ("SWIFT/BIC", "SWIFT", "BIC"):
            try:
                b.bic(_values.bic(number))
            except ValueError as exc:
                raise b.fail(str(exc), f"idList/id[{i}]") from None
        elif number and not id_type.lower().startswith(NOT_IDENTIFIERS):
            b.identifier(id_type, number, _values.country_code(text(ident.find(f"{ns}idCountry"))))
    for i, item in enumerate(each(el, f"{ns}dateOfBirthList", f"{ns}dateOfBirthItem"), start=1):
        if value := text(item.find(f"{ns}dateOfBirth")):
            try:
                b.dob(_values.dob_from_text(value))
            except ValueError as exc:
                raise b.fail(str(exc), f"dateOfBirthList/dateOfBirthItem[{i}]") from None
    for path in (("nationalityList", "nationality", "country"), ("citizenshipList", "citizenship", "country"),
                 ("addressList", "address", "country"), ("vesselInfo", "vesselFlag")):
        for c in each(el, *(ns + step for step in path)):
            b.country(_values.country_code(text(c)))
    for pob in each(el, f"{ns}placeOfBirthList", f"{ns}placeOfBirthItem", f"{ns}placeOfBirth"):
        b.place(pob.text)
    for city in each(el, f"{ns}addressList", f"{ns}address", f"{ns}city"):
        b.place(city.text)
    return b.build()
