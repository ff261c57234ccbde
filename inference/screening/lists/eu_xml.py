"""The EU's consolidated list of financial sanctions (the Financial Sanctions Files, FSF: root
``export`` in namespace ``http://eu.europa.ec/fpi/fsd/export``).

Per ``sanctionEntity``: ``logicalId`` is the entry id; each ``nameAlias`` a name (its
``wholeName``, else ``firstName middleName lastName``), weak where ``strong="false"``; the first
strong name is the primary; ``subjectType/@code`` the kind ("person", "enterprise"); each
``regulation/@programme`` a programme; ``designationDate`` the listing date; ``birthdate`` the dates
of birth (``birthdate``, else ``year`` and ``monthOfYear``, else ``yearRangeFrom`` to
``yearRangeTo``; approximate where ``circa="true"``) and their cities the places; citizenship and
address countries (``countryIso2Code``; "00" is unknown) the countries; each ``identification`` an
identifier, or a BIC where its type names SWIFT or BIC. ``generationDate`` is the publication date.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from inference.screening.entries import EntryKind, ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses
from ._xml import ListXml, require_placed

__all__ = ["FORMAT", "NAMESPACE", "parse"]

FORMAT = "eu-xml/1"
_FMT = "eu-xml"
NAMESPACE = "http://eu.europa.ec/fpi/fsd/export"  # sic: ".ec", as the files declare it
_NS = f"{{{NAMESPACE}}}"
_ROOT, _ENTRY = f"{_NS}export", f"{_NS}sanctionEntity"
_KINDS: dict[str, EntryKind] = {"person": "individual", "enterprise": "entity"}


@without_gc_pauses
def parse(data: bytes, name: str) -> SanctionsList:
    """The entries of an EU FSF XML file; ``ListFormatError`` for a file that is not one, or for
    any entry that cannot be read whole."""
    doc = ListXml(data, _FMT)
    read = [(f"sanctionEntity[{n}]", _entry(el, f"sanctionEntity[{n}]"))
            for n, el in enumerate(doc.entries((_ENTRY,)), start=1)]
    root = doc.require_root((_ROOT,), f"<export> in namespace {NAMESPACE!r}")
    require_placed(_FMT, root, (_ENTRY,), len(read), "export")
    generated = root.get("generationDate", "")
    try:
        published = _values.parse_date(generated) if generated.strip() else None
    except ValueError as exc:
        raise ListFormatError(_FMT, "export/@generationDate", str(exc)) from None
    return assemble(_FMT, "eu", name, published, SanctionsList.digest(bytes(data)), read, FORMAT)


def _attr(el: Element, key: str) -> str:
    return " ".join(el.get(key, "").split())


def _country(el: Element) -> str | None:
    return (_values.iso_country(_attr(el, "countryIso2Code"))
            or _values.country_code(_attr(el, "countryDescription")))


def _entry(el: Element, where: str) -> ListEntry:
    subject = el.find(f"{_NS}subjectType")
    kind = _KINDS.get(_attr(subject, "code").lower(), "unknown") if subject is not None else "unknown"
    b = EntryBuilder(_FMT, where, _attr(el, "logicalId"), kind)
    aliases = []
    for alias in el.findall(f"{_NS}nameAlias"):
        whole = _attr(alias, "wholeName") or " ".join(
            p for p in (_attr(alias, k) for k in ("firstName", "middleName", "lastName")) if p)
        aliases.append((whole, _attr(alias, "strong").lower() == "false"))
    for whole, weak in sorted(aliases, key=lambda a: a[1]):  # stable: the first strong name leads
        b.name(whole, weak=weak)
    for regulation in el.findall(f"{_NS}regulation"):
        b.programme(_attr(regulation, "programme"))
    if designated := _attr(el, "designationDate"):
        try:
            b.listed_on = _values.parse_date(designated)
        except ValueError as exc:
            raise b.fail(str(exc), "@designationDate") from None
    for i, birth in enumerate(el.findall(f"{_NS}birthdate"), start=1):
        try:
            dob = _dob(birth)
        except ValueError as exc:
            raise b.fail(str(exc), f"birthdate[{i}]") from None
        if dob is not None:
            b.dob(dob)
        b.place(_attr(birth, "city"))
    for tag in ("citizenship", "address"):
        for c in el.findall(f"{_NS}{tag}"):
            b.country(_country(c))
            if tag == "address":
                b.place(_attr(c, "city"))
    for i, ident in enumerate(el.findall(f"{_NS}identification"), start=1):
        code, label = _attr(ident, "identificationTypeCode"), _attr(ident, "identificationTypeDescription")
        number = _attr(ident, "number") or _attr(ident, "latinNumber")
        if "swift" in f"{code} {label}".lower() or code.lower() == "bic":
            try:
                b.bic(_values.bic(number))
            except ValueError as exc:
                raise b.fail(str(exc), f"identification[{i}]") from None
        else:
            b.identifier(label or code, number, _country(ident))
    return b.build()


def _number(el: Element, key: str) -> str:
    """An attribute the FSF writes as a number, "0" or blank meaning unknown."""
    value = _attr(el, key)
    return "" if value.strip("0") == "" else value


def _dob(el: Element) -> _values.Dob | None:
    approx = "~" if _attr(el, "circa").lower() == "true" else ""
    if full := _attr(el, "birthdate"):
        return _values.dob_from_text(full + approx)
    year, month = _number(el, "year"), _number(el, "monthOfYear")
    if year:
        return _values.dob_from_text((f"{year}-{int(month):02d}" if month.isdigit() else year) + approx)
    start, end = _number(el, "yearRangeFrom"), _number(el, "yearRangeTo")
    if start or end:
        return _values.dob_from_text(f"{start or end}/{end or start}{approx}")
    return None
