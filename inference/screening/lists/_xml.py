"""A list file's XML, read safely and in one pass.

defusedxml reads the file's prolog, everything before the root element, with DTDs refused: a DTD
(and so any entity declaration, internal or external) can stand only there, so a billion-laughs
bomb or an external entity is refused before anything is expanded or fetched. A file whose prolog
holds no DTD cannot declare an entity or point to an external one (a reference to an undeclared
entity is a well-formedness error, and a DOCTYPE after the prolog is not well-formed either), so
the standard library's C parser then reads the whole file: a list of 30,000 entries is a hundred
megabytes, and defusedxml's parser, whose handlers run in Python, reads it half as fast again. The
file is capped at ``MAX_LIST_BYTES``.

Entries stream: each is handed over as soon as its end tag is read and cleared once the parser
has taken what it needs, so memory stays near the size of the file rather than of its tree. The
root is known only at the end; the parsers check it, and where the entries stood, before they
return anything.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Iterator
from typing import Any
from xml.etree.ElementTree import Element, ParseError, iterparse

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from inference.screening.errors import ListFormatError

__all__ = ["MAX_LIST_BYTES", "ListXml", "each", "first", "local", "namespace", "require_placed", "text",
           "text_at"]

MAX_LIST_BYTES = 512 << 20
"""The largest list file read (512 MiB: OFAC's largest export is a fifth of that)."""


def local(tag: str) -> str:
    """A tag without its namespace: ``{ns}sdnEntry`` -> ``sdnEntry``."""
    return tag.rpartition("}")[2]


def namespace(tag: str) -> str:
    """A tag's namespace as the ``{ns}`` prefix to build sibling tags with ('' when none)."""
    return tag[: tag.index("}") + 1] if tag.startswith("{") else ""


def text(el: Element | None) -> str:
    """An element's text, whitespace collapsed ('' for a missing or empty element)."""
    return " ".join(el.text.split()) if el is not None and el.text else ""


# Paths as separate tags: ElementTree's find/findall take a single tag in C, about ten times as fast
# as a path ("a/b"), which goes through ElementPath in Python; a 30,000-entry list reads millions.

def each(el: Element, *tags: str) -> list[Element]:
    """The elements at the path ``tags`` below ``el`` (``each(entry, "akaList", "aka")``)."""
    level = [el]
    for tag in tags:
        level = [c for e in level for c in e.findall(tag)]
    return level


def first(el: Element | None, *tags: str) -> Element | None:
    """The first element at the path ``tags`` below ``el``, or None."""
    for tag in tags:
        if el is None:
            return None
        el = el.find(tag)
    return el


def text_at(el: Element | None, *tags: str) -> str:
    """``text`` of the first element at the path ``tags`` below ``el``."""
    return text(first(el, *tags))


class ListXml:
    """One pass over ``data``: ``entries(tags)`` yields each element whose tag is in ``tags`` when
    its end tag is read; ``root`` is the document element once the pass is over."""

    def __init__(self, data: bytes, fmt: str) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ListFormatError(fmt, "file", f"expected bytes, got {type(data).__name__}")
        if len(data) > MAX_LIST_BYTES:
            raise ListFormatError(fmt, "file",
                                  f"the file is {len(data)} bytes; the limit is {MAX_LIST_BYTES}")
        self._data, self._fmt = bytes(data), fmt
        self._root: Element | None = None

    @property
    def root(self) -> Element:
        if self._root is None:
            raise RuntimeError("ListXml.root is known only once entries() has been read to the end")
        return self._root

    def entries(self, tags: Collection[str]) -> Iterator[Element]:
        """Each element with a tag in ``tags`` (qualified names), in document order; cleared after
        the caller has read it. ``ListFormatError`` for XML that is not well-formed or that holds
        a DTD."""
        fmt = self._fmt
        if not self._data.strip():
            raise ListFormatError(fmt, "file", "the file is empty")
        _refuse_dtd(self._data, fmt)
        it = iterparse(io.BytesIO(self._data), events=("end",))
        last: Element | None = None
        try:
            for _event, el in it:
                last = el
                if el.tag in tags:
                    yield el
                    el.clear()
        except ParseError as exc:
            raise ListFormatError(fmt, "file", f"not well-formed XML: {exc}") from None
        if last is None:  # pragma: no cover - expat raises "no element found" first
            raise ListFormatError(fmt, "file", "no XML element found")
        self._root = last  # the document element ends last

    def require_root(self, names: Collection[str], what: str) -> Element:
        """The root, or ``ListFormatError`` unless its qualified tag is one of ``names``."""
        root = self.root
        if root.tag not in names:
            raise ListFormatError(self._fmt, "root", f"the root element is {_shown(root.tag)}, "
                                  f"not {what}: this is not a file of format {self._fmt}")
        return root


class _PrologRead(Exception):
    """The root element has started: the prolog, where a DTD could stand, is behind."""


class _StopAtRoot:
    """A parser target that stops the parse at the root element's start tag."""

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        raise _PrologRead

    def end(self, tag: str) -> None:  # pragma: no cover - never reached past the root's start
        return None

    def data(self, data: str) -> None:
        return None

    def close(self) -> None:
        return None


_PROLOG_CHUNK = 1 << 16


def _refuse_dtd(data: bytes, fmt: str) -> None:
    """``ListFormatError`` when defusedxml finds a DTD, an entity declaration or an external
    reference in the prolog; returns at the root element's start tag."""
    parser: Any = DefusedXMLParser(target=_StopAtRoot(), forbid_dtd=True, forbid_entities=True,
                                   forbid_external=True)
    try:
        for at in range(0, len(data), _PROLOG_CHUNK):
            parser.feed(data[at:at + _PROLOG_CHUNK])
        parser.close()
    except _PrologRead:
        return
    except DefusedXmlException as exc:
        raise ListFormatError(fmt, "file", "DTDs, entity declarations and external references are "
                              f"refused ({type(exc).__name__})") from None
    except ParseError as exc:
        raise ListFormatError(fmt, "file", f"not well-formed XML: {exc}") from None


def _shown(tag: str) -> str:
    ns = namespace(tag)
    return f"<{local(tag)}> in namespace {ns[1:-1]!r}" if ns else f"<{tag}> with no namespace"


def require_placed(fmt: str, container: Element | None, tags: Collection[str], count: int,
                   what: str) -> None:
    """``ListFormatError`` unless the ``count`` entries read were all children of ``container``
    (an entry nested somewhere else in the file is not silently loaded as one)."""
    placed = sum(1 for c in container if c.tag in tags) if container is not None else 0
    if placed != count:
        raise ListFormatError(fmt, what, f"{count - placed} entr{'y' if count - placed == 1 else 'ies'} "
                              f"found outside {what}, where the format puts them")
