"""ISO 20022 XML, safely: defusedxml parsing (no DTD, entity declarations or external
references, so a billion-laughs bomb or an external entity is refused, never expanded), a
size cap, UTF-8 only, and the Document / AppHdr envelope with namespace checks."""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from inference.messages.errors import MessageError

__all__ = ["DOC", "MAX_XML_BYTES", "document", "parse_xml"]

MAX_XML_BYTES = 1 << 20
DOC = _DOC = "Document"
_ISO = "urn:iso:std:iso:20022:tech:xsd:"
_TAG = re.compile(r"\{urn:iso:std:iso:20022:tech:xsd:([a-z]{4}\.[0-9]{3}\.[0-9]{3}\.([0-9]{2}))\}(.+)")
_DECL_ENCODING = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
# A namespace name longer than this is refused before parsing: expat's cost grows with the name's
# length times the elements in its scope (a 400 KB name over 40,000 elements took 32 s). ISO 20022
# names are under 60 characters; any real one fits.
MAX_NAMESPACE = 256
_LONG_NAMESPACE = re.compile(rb"xmlns(?::[^\s=]{0,64})?\s*=\s*(?:\"[^\"]{%d}|'[^']{%d})"
                             % (MAX_NAMESPACE, MAX_NAMESPACE))


def parse_xml(data: bytes) -> Element:
    """The root element of ``data``: UTF-8, at most MAX_XML_BYTES, no DTD/entities/external."""
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
        root: Element = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise MessageError(f"DTDs, entities and external references are forbidden: {exc}",
                           field=_DOC) from None
    except ParseError as exc:
        raise MessageError(f"not well-formed XML: {exc}", field=_DOC) from None
    return root


def document(root: Element, family: str, min_version: int) -> tuple[Element, str]:
    """The ``Document`` (bare or beside an ``AppHdr``) of message ``family`` (e.g.
    ``pacs.008.001.``) at ``min_version`` or later, its tags made local."""
    doc, header = root, None
    if _local(root.tag) != _DOC:
        kids = {_local(k.tag): k for k in root}
        doc, header = kids.get(_DOC, root), kids.get("AppHdr")
        if doc is root or len(root) != 1 + (header is not None):
            raise MessageError(f"root element {root.tag!r} is neither a Document nor an envelope of "
                               "AppHdr and Document", field=_DOC)
    m = _TAG.fullmatch(doc.tag)
    if m is None or m[3] != _DOC:
        raise MessageError(f"{doc.tag!r} is not an ISO 20022 Document", field=_DOC)
    message_type = m[1]
    if not message_type.startswith(family):
        raise MessageError(f"unsupported message {message_type}: only {family}* is parsed here",
                           field=_DOC)
    if int(m[2]) < min_version:
        raise MessageError(f"{message_type} is not supported ({family}{min_version:02d} and later)",
                           field=_DOC)
    if header is not None:
        _check_header(header, message_type)
    _localise(doc, _ISO + message_type)
    return doc, message_type


def _check_header(header: Element, message_type: str) -> None:
    m = _TAG.fullmatch(header.tag)
    if m is None or not m[1].startswith("head.001.001."):
        raise MessageError(f"{header.tag!r} is not a head.001 business application header", field="AppHdr")
    ns = header.tag[:header.tag.index("}") + 1]
    idr = header.find(ns + "MsgDefIdr")
    if idr is not None and (idr.text or "").strip() != message_type:
        raise MessageError(f"AppHdr names {idr.text!r} but the Document is {message_type}",
                           field="AppHdr/MsgDefIdr")


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
