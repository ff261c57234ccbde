"""One entry gathered field by field as a parser reads it, then the whole list assembled: what
every format's parser shares, so that every list gets the same duplicate, blank and ordering rules.

Names keep the order the list gives them, the primary first; a name given twice is kept once (as
strong if the list gives it strong anywhere). Programmes, dates of birth, countries, places,
identifiers and BICs keep their first appearance and drop repeats.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterable
from datetime import date
from typing import ParamSpec, TypeVar

from inference.screening.entries import EntryId, EntryKind, ListEntry, SanctionsList, Source
from inference.screening.errors import ListFormatError

from ._values import Dob

__all__ = ["EntryBuilder", "assemble", "without_gc_pauses"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def without_gc_pauses(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """``parse`` with Python's cyclic garbage collector paused while it runs (if it was on).

    Reading a list makes millions of objects and no reference cycles (an element tree has no
    parent links; entries are frozen values), yet each collection rescans every object still
    alive: with it running, a 30,000-entry list took a quarter longer to read. Reference counting
    frees everything as usual; the collector is on again when ``parse`` returns or raises, unless
    it was off before.
    """
    @functools.wraps(parse)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return parse(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()
    return paused


def _clean(text: str | None) -> str:
    return " ".join(text.split()) if text else ""


class EntryBuilder:
    """The fields of one entry as they are read; ``build()`` makes the frozen ``ListEntry``."""

    def __init__(self, fmt: str, where: str, entry_id: str, kind: EntryKind) -> None:
        self.fmt, self.where = fmt, where
        self.entry_id = _clean(entry_id)
        if not self.entry_id:
            raise ListFormatError(fmt, where, "the entry has no id")
        self.kind: EntryKind = kind
        self._names: dict[str, bool] = {}  # name -> weak
        self._programmes: dict[str, None] = {}
        self._dobs: dict[str, Dob] = {}
        self._countries: dict[str, None] = {}
        self._ids: dict[EntryId, None] = {}
        self._bics: dict[str, None] = {}
        self._places: dict[str, None] = {}
        self.listed_on: date | None = None

    def fail(self, problem: str, part: str = "") -> ListFormatError:
        """The error for a bad value in this entry (``part`` the element or field within it)."""
        return ListFormatError(self.fmt, f"{self.where} (id {self.entry_id!r}){'/' + part if part else ''}",
                               problem)

    def primary(self, text: str | None, what: str) -> None:
        """The primary name, which the format always gives (``what`` names its element)."""
        if not _clean(text):
            raise self.fail(f"the entry has no name: {what} is empty")
        self.name(text)

    def name(self, text: str | None, *, weak: bool = False) -> None:
        """A name: the first one added is the primary; later ones are aliases."""
        n = _clean(text)
        if n:
            self._names[n] = self._names.get(n, True) and weak

    def programme(self, text: str | None) -> None:
        if p := _clean(text):
            self._programmes.setdefault(p, None)

    def dob(self, dob: Dob) -> None:
        self._dobs.setdefault(dob.text, dob)

    def country(self, code: str | None) -> None:
        if code:
            self._countries.setdefault(code, None)

    def identifier(self, kind: str | None, value: str | None, country: str | None = None) -> None:
        k, v = _clean(kind), _clean(value)
        if v:
            self._ids.setdefault(EntryId(k or "id", v, country), None)

    def bic(self, code: str) -> None:
        self._bics.setdefault(code, None)

    def place(self, text: str | None) -> None:
        p = _clean(text)
        if p and p != "-":
            self._places.setdefault(p, None)

    def build(self) -> ListEntry:
        if not self._names:
            raise ListFormatError(self.fmt, f"{self.where} (id {self.entry_id!r})", "the entry has no name")
        names = tuple(self._names)
        weak = frozenset(i for i, n in enumerate(names) if i and self._names[n])
        years: frozenset[int] = frozenset().union(*(d.years for d in self._dobs.values()))
        return ListEntry(
            entry_id=self.entry_id, kind=self.kind, names=names, programmes=tuple(self._programmes),
            weak_aliases=weak, dobs=tuple(self._dobs), dob_years=years, countries=tuple(self._countries),
            identifiers=tuple(self._ids), bics=tuple(self._bics), places=tuple(self._places),
            listed_on=self.listed_on,
        )


def assemble(fmt: str, source: Source, name: str, published: date | None, digest: str,
             entries: Iterable[tuple[str, ListEntry]], format_version: str) -> SanctionsList:
    """The list, or ``ListFormatError`` naming the second entry that repeats an id (``entries``
    pairs each entry with where it was read)."""
    seen: dict[str, str] = {}
    ordered: list[ListEntry] = []
    for where, entry in entries:
        if entry.entry_id in seen:
            raise ListFormatError(fmt, where, f"entry id {entry.entry_id!r} appears twice "
                                  f"(first at {seen[entry.entry_id]})")
        seen[entry.entry_id] = where
        ordered.append(entry)
    return SanctionsList(source=source, name=name, published=published, sha256=digest,
                         entries=tuple(ordered), format=format_version)
