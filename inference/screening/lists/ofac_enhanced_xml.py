"""OFAC's ENHANCED_XML export (``sanctionsData``): SDN_ENHANCED.XML and CONS_ENHANCED.XML.

Every file is checked against OFAC's published schema (``xsd/ofac_ENHANCED_XML.xsd``, see
``xsd/NOTICE``) as it is read: an element the schema does not allow, a required one missing or a
value of the wrong type refuses the whole file, naming the element
(``sanctionsData/entities/entity[2]/names/name[1]/isPrimary``). The schema is read by xmlschema
and checked by ``_xsd`` (see there why).

The file says which list it is: when every entity is on the "SDN List" alone it is the SDN list
(source "ofac-sdn"); otherwise it carries non-SDN lists and is the consolidated list
("ofac-consolidated").

Per ``entity``: the ``id`` attribute is the entry id (OFAC's uid, the same as in the classic XML);
the primary ``name`` first, each name's translations in every script, weak where the name
``isLowQuality``; "First Last" where a translation has a first name, else its full name;
``entityType`` the kind; ``sanctionsPrograms`` the programmes; the earliest ``datePublished`` of its
``sanctionsLists`` the listing date; ``identityDocuments`` the identifiers (type "SWIFT/BIC": a
BIC); "Birthdate" features the dates of birth (by their ``valueDate`` bounds, else their text);
"Place of Birth" features and address cities the places; address countries and "Nationality
Country", "Citizenship Country" and "Vessel Flag" features the countries. ``dataAsOf`` is the
publication date.
"""

from __future__ import annotations

import functools
from datetime import date
from importlib import resources
from typing import Literal
from xml.etree.ElementTree import Element

from inference.screening.entries import ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses
from ._xml import ListXml, each, first, text, text_at
from ._xsd import Decl, SchemaFault, check, compile_schema
from .ofac_xml import KINDS

__all__ = ["FORMAT", "NAMESPACE", "SCHEMA_FILE", "parse"]

FORMAT = "ofac-enhanced-xml/1"
_FMT = "ofac-enhanced-xml"
NAMESPACE = "https://sanctionslistservice.ofac.treas.gov/api/PublicationPreview/exports/ENHANCED_XML"
SCHEMA_FILE = "ofac_ENHANCED_XML.xsd"
_NS = f"{{{NAMESPACE}}}"
_ROOT, _ENTITIES, _ENTITY = f"{_NS}sanctionsData", f"{_NS}entities", f"{_NS}entity"
SDN_LIST = "SDN List"

_COUNTRY_FEATURES = ("nationality country", "citizenship country", "nationality of registration",
                     "vessel flag")


@functools.cache
def _schema() -> Decl:
    """The shipped schema, compiled once per process (xmlschema reads it in about 0.2 s)."""
    import xmlschema  # here: only this format needs it, and importing it costs ~0.2 s

    try:
        package = resources.files(__package__ or "inference.screening.lists")
        xsd = (package / "xsd" / SCHEMA_FILE).read_text("utf-8")
        return compile_schema(xmlschema.XMLSchema(xsd, allow="none", defuse="always"), _ROOT)
    except Exception as exc:
        raise ListFormatError(_FMT, "schema", f"the shipped {SCHEMA_FILE} cannot be loaded "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None


def _particle(decl: Decl, tag: str) -> Decl:
    return decl.children[decl.by_tag[tag]].decl


@without_gc_pauses
def parse(data: bytes, name: str) -> SanctionsList:
    """The entries of an OFAC ENHANCED_XML file, valid under OFAC's schema; ``ListFormatError``
    naming the first element that breaks the schema or cannot be read."""
    root_decl = _schema()
    entity_decl = _particle(_particle(root_decl, _ENTITIES), _ENTITY)
    doc = ListXml(data, _FMT)
    read: list[tuple[str, ListEntry]] = []
    lists: set[str] = set()
    for n, el in enumerate(doc.entries((_ENTITY,)), start=1):
        where = f"sanctionsData/entities/entity[{n}]"
        _checked(el, entity_decl, where)
        read.append((where, _entry(el, where, lists)))
    root = doc.require_root((_ROOT,), f"<sanctionsData> in namespace {NAMESPACE!r}")
    _checked(root, root_decl, "sanctionsData", deep=False)  # entities were checked as they were read
    for child in root:
        _checked(child, _particle(root_decl, child.tag), f"sanctionsData/{child.tag[len(_NS):]}",
                 deep=child.tag != _ENTITIES)
    if len(each(root, _ENTITIES, _ENTITY)) != len(read):
        raise ListFormatError(_FMT, "sanctionsData", "an entity stands outside sanctionsData/entities")
    filters = first(root, f"{_NS}publicationInfo", f"{_NS}filters")
    for s in each(filters, f"{_NS}sanctionsLists", f"{_NS}sanctionsList") if filters is not None else ():
        lists.add(text(s))
    try:
        published = _values.parse_date(text_at(root, f"{_NS}publicationInfo", f"{_NS}dataAsOf"))
    except ValueError as exc:
        raise ListFormatError(_FMT, "sanctionsData/publicationInfo/dataAsOf", str(exc)) from None
    return assemble(_FMT, source_of(lists), name, published, SanctionsList.digest(bytes(data)), read, FORMAT)


def source_of(lists: set[str]) -> Literal["ofac-sdn", "ofac-consolidated"]:
    """"ofac-sdn" when the file's entities are on the SDN List alone, else "ofac-consolidated"."""
    return "ofac-sdn" if lists <= {SDN_LIST} else "ofac-consolidated"


def _checked(el: Element, decl: Decl, where: str, *, deep: bool = True) -> None:
    try:
        check(el, decl, where, deep=deep)
    except SchemaFault as fault:
        raise ListFormatError(_FMT, fault.path, f"not valid under {SCHEMA_FILE}: {fault.why}") from None


def _true(el: Element, tag: str) -> bool:
    return text(el.find(tag)) in ("true", "1")


def _entry(el: Element, where: str, lists: set[str]) -> ListEntry:
    n = _NS
    kind = KINDS.get(text_at(el, f"{n}generalInfo", f"{n}entityType").lower(), "unknown")
    b = EntryBuilder(_FMT, where, el.get("id", ""), kind)
    for name in sorted(each(el, f"{n}names", f"{n}name"), key=lambda x: not _true(x, f"{n}isPrimary")):
        weak = _true(name, f"{n}isLowQuality")
        translations = each(name, f"{n}translations", f"{n}translation")
        for tr in sorted(translations, key=lambda x: not _true(x, f"{n}isPrimary")):  # stable sorts
            first_name, last = text(tr.find(f"{n}formattedFirstName")), text(tr.find(f"{n}formattedLastName"))
            full = text(tr.find(f"{n}formattedFullName"))
            b.name(f"{first_name} {last}" if first_name else (full or last), weak=weak)
    for i, s in enumerate(each(el, f"{n}sanctionsLists", f"{n}sanctionsList"), start=1):
        lists.add(text(s))
        try:
            listed = _values.parse_date(s.get("datePublished", ""))
        except ValueError as exc:
            raise b.fail(str(exc), f"sanctionsLists/sanctionsList[{i}]/@datePublished") from None
        b.listed_on = min(b.listed_on or listed, listed)
    for p in each(el, f"{n}sanctionsPrograms", f"{n}sanctionsProgram"):
        b.programme(p.text)
    for i, doc in enumerate(each(el, f"{n}identityDocuments", f"{n}identityDocument"), start=1):
        doc_type, number = text(doc.find(f"{n}type")), text(doc.find(f"{n}documentNumber"))
        if doc_type.upper().replace(" ", "") in ("SWIFT/BIC", "SWIFT", "BIC"):
            try:
                b.bic(_values.bic(number))
            except ValueError as exc:
                raise b.fail(str(exc), f"identityDocuments/identityDocument[{i}]") from None
        else:
            b.identifier(doc_type, number, _values.country_code(text(doc.find(f"{n}issuingCountry"))))
    for i, f in enumerate(each(el, f"{n}features", f"{n}feature"), start=1):
        ftype, value = text(f.find(f"{n}type")).lower(), text(f.find(f"{n}value"))
        if ftype == "birthdate":
            try:
                b.dob(_birthdate(f, value))
            except ValueError as exc:
                raise b.fail(str(exc), f"features/feature[{i}]") from None
        elif ftype == "place of birth":
            b.place(value)
        elif ftype in _COUNTRY_FEATURES:
            b.country(_values.country_code(value))
    for address in each(el, f"{n}addresses", f"{n}address"):
        for c in (address.find(f"{n}country"), first(address, f"{n}translations", f"{n}country")):
            b.country(_values.country_code(text(c)))
        parts = each(address, f"{n}translations", f"{n}translation", f"{n}addressParts", f"{n}addressPart")
        for part in parts:
            if text(part.find(f"{n}type")).upper() == "CITY":
                b.place(text(part.find(f"{n}value")))
    return b.build()


def _birthdate(feature: Element, value: str) -> _values.Dob:
    n = _NS
    period = feature.find(f"{n}valueDate")
    if period is None:
        return _values.dob_from_text(value)
    bounds = [text(period.find(n + k)) for k in ("fromDateBegin", "fromDateEnd", "toDateBegin", "toDateEnd")]
    given = [b for b in bounds if b]
    if not given:
        return _values.dob_from_text(value)
    # From the earliest the period may start to the latest it may end (xs:date: the schema checked them).
    first_day, last_day = date.fromisoformat(given[0][:10]), date.fromisoformat(given[-1][:10])
    return _values.dob_from_bounds(first_day, last_day, approximate=_true(period, f"{n}isApproximate"))
