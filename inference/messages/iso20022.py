"""ISO 20022 XML, safely: defusedxml parsing (no DTD, entity declarations or external
references, so a billion-laughs bomb or an external entity is refused, never expanded), a
size cap, UTF-8 only, and the Document / AppHdr envelope with namespace checks."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from xml.etree.ElementTree import Element, ParseError
from xml.etree.ElementTree import fromstring as _c_fromstring

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from inference.messages import fields
from inference.messages.errors import MessageError
from inference.messages.findings import note

__all__ = ["DOC", "MAX_XML_BYTES", "READ", "document", "iso_date", "parse_xml"]

MAX_XML_BYTES = 1 << 20
DOC = _DOC = "Document"
_ISO = "urn:iso:std:iso:20022:tech:xsd:"
_TAG = re.compile(r"\{urn:iso:std:iso:20022:tech:xsd:([a-z]{4}\.[0-9]{3}\.[0-9]{3}\.([0-9]{2}))\}(.+)")
# A national variant's namespace (e.g. Swiss Payment Standards' ...six-interbank-clearing.com/de/
# pain.001.001.03.ch.02.xsd): read as the ISO message it restricts.
_VARIANT = re.compile(r"\{https?://[^}]*/((?:pacs|pain)\.[0-9]{3}\.[0-9]{3}\.([0-9]{2}))\.[a-z]{2}\.[0-9]{2}\.xsd\}(.+)")
# Any markup declaration but a comment or CDATA section (a DOCTYPE above all). Input holding one goes
# through defusedxml, which refuses DTDs, entities and external references. Input without one has no
# DTD, hence no entity to expand or fetch: the standard library's C parser reads it, about twice as
# fast as defusedxml's Python callbacks (measured: pacs.008 from ~5,000 to ~6,800/s; docs/performance.md).
# Sound because the bytes are UTF-8 by then (checked above, and any declared encoding is UTF-8), where
# a declaration can only be written as the bytes "<!".
_DECLARATION = re.compile(rb"<!(?!--|\[CDATA\[)")
_DECL_ENCODING = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
# A namespace name longer than this is refused before parsing: expat's cost grows with the name's
# length times the elements in its scope (a 400 KB name over 40,000 elements took 32 s). ISO 20022
# names are under 60 characters; any real one fits.
MAX_NAMESPACE = 256
_LONG_NAMESPACE = re.compile(rb"xmlns(?::[^\s=]{0,64})?\s*=\s*(?:\"[^\"]{%d}|'[^']{%d})"
                             % (MAX_NAMESPACE, MAX_NAMESPACE))


def parse_xml(data: bytes) -> Element:
    """The root element of ``data``: UTF-8, at most MAX_XML_BYTES, no DTD/entities/external (input
    with a markup declaration is read by defusedxml, the rest by the C parser: see _DECLARATION)."""
    if len(data) > MAX_XML_BYTES:
        raise MessageError(f"message is {len(data)} bytes; the limit is {MAX_XML_BYTES}", field=_DOC)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"not UTF-8 (invalid byte at offset {exc.start})", field=_DOC) from None
    if _LONG_NAMESPACE.search(data) is not None:
        raise MessageError(f"a namespace name is longer than {MAX_NAMESPACE} characters", field=_DOC)
    decl = _DECL_ENCODING.match(data.removeprefix(b"\xef\xbb\xbf"))
    if decl and decl[1].lower() not in (b"utf-8", b"utf8"):
        raise MessageError(f"declared encoding {decl[1].decode()!r}; only UTF-8 is accepted", field=_DOC)
    try:
        if _DECLARATION.search(data) is None:
            return _c_fromstring(data)
        root: Element = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise MessageError(f"DTDs, entities and external references are forbidden: {exc}",
                           field=_DOC) from None
    except ParseError as exc:
        raise MessageError(f"not well-formed XML: {exc}", field=_DOC) from None
    return root


def document(root: Element, family: str, min_version: int) -> tuple[Element, str, Callable[[], None]]:
    """The ``Document`` of message ``family`` (e.g. ``pacs.008``) at ``min_version`` or later, its
    tags made local: the root itself, or found beside an ``AppHdr`` in an envelope of any name (as
    SWIFT Alliance, a CBPR+ ``DataPDU`` or a bank's own wrapper carry them). Also a function that
    checks the AppHdr against the Document, to call where findings are collected."""
    doc, header = _find(root)
    m = _TAG.fullmatch(doc.tag) or _VARIANT.fullmatch(doc.tag)
    if m is None or m[3] != _DOC:
        raise MessageError(f"{_short(doc.tag)!r} is not an ISO 20022 Document", field=_DOC)
    message_type = m[1]
    if not message_type.startswith(family + "."):
        raise MessageError(f"unsupported message {message_type}: {family} is parsed here "
                           f"(sealtrail reads {', '.join(READ)})", field=_DOC)
    if int(m[2]) < min_version:
        raise MessageError(f"{message_type} is not supported ({family}.001.{min_version:02d} and later)",
                           field=_DOC)
    _localise(doc, doc.tag[1:doc.tag.index("}")])
    return doc, message_type, (lambda: _check_header(header, message_type)) if header is not None else _none


READ = ("pacs.008", "pacs.009", "pacs.004", "pain.001")


def _none() -> None:
    return None


def _find(root: Element) -> tuple[Element, Element | None]:
    """The Document, and the AppHdr beside it, at most 4 levels into an envelope."""
    if _local(root.tag) == _DOC:
        return root, None
    level = [root]
    for _ in range(4):
        for el in level:
            kids = list(el)
            docs = [k for k in kids if _local(k.tag) == _DOC]
            if docs:
                if len(docs) > 1:
                    raise MessageError("the envelope holds more than one Document", field=_DOC)
                hdrs = [k for k in kids if _local(k.tag) == "AppHdr"]
                return docs[0], hdrs[0] if hdrs else _header_near(root)
        level = [k for el in level for k in el][:10_000]
    raise MessageError(f"root element {_short(root.tag)!r} is neither a Document nor an envelope holding one",
                       field=_DOC)


def _header_near(root: Element) -> Element | None:
    for el in root.iter():
        if _local(el.tag) == "AppHdr":
            return el
    return None


def _short(tag: str) -> str:
    return tag if len(tag) <= 120 else tag[:117] + "..."


def iso_date(given: str, field: str) -> date:
    """An ISO date; a date-time where a date belongs (as some senders write) gives its date, noted."""
    if len(given) > 10 and given[10:11] == "T":
        note("DATE_FORMAT", field, f"{given!r} is a date-time; its date is used")
        given = given[:10]
    return fields.iso_date(given, field)


def _check_header(header: Element, message_type: str) -> None:
    m = _TAG.fullmatch(header.tag)
    if m is None or not m[1].startswith("head.001.001."):
        note("APPHDR_VERSION_MISMATCH", "AppHdr", f"{_short(header.tag)!r} is not a head.001 business "
                                                  "application header; not read")
        return
    ns = header.tag[:header.tag.index("}") + 1]
    idr = header.find(ns + "MsgDefIdr")
    named = (idr.text or "").strip() if idr is not None else ""
    if named and named != message_type and not message_type.startswith(named.split("COV")[0]):
        note("APPHDR_VERSION_MISMATCH", "AppHdr/MsgDefIdr", f"AppHdr names {named[:40]!r} but the Document "
                                                            f"is {message_type}")


def _localise(doc: Element, ns: str) -> None:
    """Strip the namespace from every tag (one pass, then plain local-name lookups); refuse any
    element outside it, except inside SplmtryData where the schema allows any content."""
    prefix = "{" + ns + "}"
    cut = len(prefix)
    foreign_ok: set[int] = set()
    for el in doc.iter():
        tag = el.tag
        if tag.startswith(prefix):
            el.tag = tag = tag[cut:]
            if tag == "SplmtryData":
                foreign_ok.update(id(e) for e in el.iter())
        elif id(el) not in foreign_ok:
            raise MessageError(f"element {tag!r} is not in the {ns} namespace", field=_local(tag))


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]
