"""Sanctions-list parsers: one module per published format, each turning a list file's bytes into
a ``SanctionsList`` (``inference.screening.entries``) or refusing it whole with ``ListFormatError``.

========================  ============================================  ==================================
format                    file                                          source
========================  ============================================  ==================================
``ofac-xml``              OFAC classic XML, SDN.XML / CONSOLIDATED.XML  ofac-sdn or ofac-consolidated (*)
``ofac-enhanced-xml``     OFAC ENHANCED_XML, checked against its XSD    from the file: ofac-sdn when every
                                                                        entity is on the SDN List alone
``un-xml``                UN Security Council Consolidated List         un
``eu-xml``                EU Financial Sanctions Files (FSF) XML        eu
``uk-xml``                UK Sanctions List (FCDO) XML                  uk
``internal-csv``          the bank's own list, CSV (see ``internal``)   internal
``internal-json``         the bank's own list, JSON (see ``internal``)  internal
========================  ============================================  ==================================

(*) The classic XML does not say which OFAC list it is: ``load`` takes the ``source`` argument, or
the list's name when that is "ofac-sdn" or "ofac-consolidated", and refuses to guess otherwise.
Every other format says (or is) its source, and that is the one used.

Every XML file's prolog is read by defusedxml with DTDs refused, so no entity is declared, expanded
or fetched; the entries then stream one by one (``_xml`` says why that is safe). Every parser
refuses, naming the element or line: a file that is not of its format, an entry without an id or
a name, an id given twice, a date it cannot read, a SWIFT BIC that is not 8 or 11 characters.
Nothing of a refused file is returned.
"""

from __future__ import annotations

from datetime import date

from inference.screening.entries import SOURCES, SanctionsList, Source
from inference.screening.errors import ListFormatError

from . import eu_xml, internal, ofac_enhanced_xml, ofac_xml, uk_xml, un_xml

__all__ = ["FORMATS", "ListFormatError", "load"]

FORMATS = ("ofac-xml", "ofac-enhanced-xml", "un-xml", "eu-xml", "uk-xml", "internal-csv", "internal-json")

_OFAC = ("ofac-sdn", "ofac-consolidated")


def load(data: bytes, fmt: str, name: str, *, source: Source | None = None,
         published: date | None = None) -> SanctionsList:
    """The list in ``data``, read as format ``fmt`` (one of ``FORMATS``) and named ``name``.

    ``source`` and ``published`` are for what a format does not state: which OFAC list a classic
    ``ofac-xml`` file is, and an ``internal-csv`` list's publication date. Where the file states
    them, the file wins and these are not used (so a sealed load can be parsed again with the
    values it was sealed with). ``ListFormatError`` for anything that cannot be loaded whole.
    """
    if fmt not in FORMATS:
        raise ListFormatError(str(fmt), "format", f"unknown list format; one of {', '.join(FORMATS)}")
    if not isinstance(name, str) or not name.strip():
        raise ListFormatError(fmt, "name", "every list needs a non-blank name")
    if source is not None and source not in SOURCES:
        raise ListFormatError(fmt, "source", f"unknown source {source!r}; one of {', '.join(SOURCES)}")
    if fmt == "ofac-xml":
        chosen = source or (name if name in _OFAC else None)
        if chosen not in _OFAC:
            raise ListFormatError(fmt, "source", "the classic OFAC XML does not say which list it is: "
                                  "give source='ofac-sdn' or source='ofac-consolidated'")
        return ofac_xml.parse(data, name, source="ofac-sdn" if chosen == "ofac-sdn" else "ofac-consolidated")
    if fmt == "ofac-enhanced-xml":
        return ofac_enhanced_xml.parse(data, name)
    if fmt == "un-xml":
        return un_xml.parse(data, name)
    if fmt == "eu-xml":
        return eu_xml.parse(data, name)
    if fmt == "uk-xml":
        return uk_xml.parse(data, name)
    if fmt == "internal-csv":
        return internal.parse_csv(data, name, published=published)
    return internal.parse_json(data, name)
