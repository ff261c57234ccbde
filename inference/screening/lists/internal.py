"""The bank's own lists (exits, internal watch lists), in CSV or JSON; source "internal".

CSV (UTF-8, an optional byte-order mark, RFC 4180 quoting), with exactly this header::

    entry_id,kind,name,aliases,dob,countries,identifiers,bics,programmes

JSON (UTF-8)::

    {"list": "internal-exits", "published": "2024-05-01",
     "entries": [{"entry_id": "EX-1", "kind": "individual", "name": "...", "aliases": ["..."],
                  "dob": ["1970-03-04"], "countries": ["GB"], "identifiers": ["PASSPORT:123456789:GB"],
                  "bics": ["ABCDGB2L"], "programmes": ["EXIT-2024"]}]}

The fields are the same in both. ``entry_id`` and ``name`` are required; ``kind`` is one of
individual, entity, vessel, aircraft or unknown (blank or absent: unknown). In CSV, ``aliases``,
``dob``, ``countries``, ``identifiers``, ``bics`` and ``programmes`` hold several values separated
by ``;``; in JSON they are lists of strings (absent: none). A ``dob`` is ISO 8601 (``1970-03-04``,
``1970-03``, ``1970``) or an interval of two (``1969/1971``), optionally ending ``~`` for
approximate. ``countries`` are ISO 3166-1 alpha-2 codes. An identifier is ``KIND:VALUE`` or
``KIND:VALUE:CC`` (the last part a country code where it is two letters). ``bics`` are 8 or 11
characters. In JSON, ``list`` must be the name the list is loaded under and ``published`` the
publication date (YYYY-MM-DD); a CSV's publication date is given to ``parse_csv``. An unknown
column or key, a blank id or name, a repeated id and any value not of its form refuse the file.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import date
from typing import Any

from inference.screening.entries import ENTRY_KINDS, EntryKind, ListEntry, SanctionsList
from inference.screening.errors import ListFormatError

from . import _values
from ._build import EntryBuilder, assemble, without_gc_pauses

__all__ = ["CSV_FORMAT", "CSV_HEADER", "JSON_FORMAT", "MAX_INTERNAL_BYTES", "parse_csv", "parse_json"]

CSV_FORMAT, JSON_FORMAT = "internal-csv/1", "internal-json/1"
CSV_HEADER = ("entry_id", "kind", "name", "aliases", "dob", "countries", "identifiers", "bics", "programmes")
_LIST_FIELDS = CSV_HEADER[3:]
_KINDS: dict[str, EntryKind] = {k: k for k in ENTRY_KINDS}
MAX_INTERNAL_BYTES = 64 << 20
"""The largest internal list read (64 MiB: hundreds of thousands of entries)."""


def _text(data: bytes, fmt: str) -> str:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ListFormatError(fmt, "file", f"expected bytes, got {type(data).__name__}")
    if len(data) > MAX_INTERNAL_BYTES:
        raise ListFormatError(fmt, "file",
                              f"the file is {len(data)} bytes; the limit is {MAX_INTERNAL_BYTES}")
    try:
        return bytes(data).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ListFormatError(fmt, "file", f"not UTF-8 (invalid byte at offset {exc.start})") from None


@without_gc_pauses
def parse_csv(data: bytes, name: str, *, published: date | None = None) -> SanctionsList:
    """The entries of an internal list in CSV, published on ``published`` (the file does not say)."""
    fmt = "internal-csv"
    rows = csv.reader(io.StringIO(_text(data, fmt), newline=""), strict=True)
    try:
        header = next(rows, None)
        if header is None:
            raise ListFormatError(fmt, "line 1", "the file is empty; the header is "
                                  f"{','.join(CSV_HEADER)}")
        if tuple(h.strip() for h in header) != CSV_HEADER:
            missing = [h for h in CSV_HEADER if h not in header]
            extra = [h for h in header if h not in CSV_HEADER]
            raise ListFormatError(fmt, "line 1", f"the header must be {','.join(CSV_HEADER)}"
                                  + (f"; missing {', '.join(missing)}" if missing else "")
                                  + (f"; unknown {', '.join(extra)}" if extra else "")
                                  + ("" if missing or extra else "; columns out of order"))
        read: list[tuple[str, ListEntry]] = []
        for row in rows:
            where = f"line {rows.line_num}"
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(CSV_HEADER):
                raise ListFormatError(fmt, where, f"{len(row)} fields; the header has {len(CSV_HEADER)}")
            fields = dict(zip(CSV_HEADER, row, strict=True))
            values = {k: [v.strip() for v in fields[k].split(";") if v.strip()] for k in _LIST_FIELDS}
            entry = _entry(fmt, where, fields["entry_id"], fields["kind"], fields["name"], values)
            read.append((where, entry))
    except csv.Error as exc:
        raise ListFormatError(fmt, f"line {rows.line_num}", f"not valid CSV: {exc}") from None
    return assemble(fmt, "internal", name, published, SanctionsList.digest(bytes(data)), read, CSV_FORMAT)


_TOP_KEYS = frozenset({"list", "published", "entries"})
_ENTRY_KEYS = frozenset(CSV_HEADER)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"key {k!r} appears twice in one object")
        seen[k] = v
    return seen


@without_gc_pauses
def parse_json(data: bytes, name: str) -> SanctionsList:
    """The entries of an internal list in JSON; its ``list`` must be ``name``."""
    fmt = "internal-json"
    try:
        doc = json.loads(_text(data, fmt), object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as exc:
        raise ListFormatError(fmt, "file", f"not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise ListFormatError(fmt, "file", f"expected an object, got {_kind_of(doc)}")
    if unknown := sorted(set(doc) - _TOP_KEYS):
        raise ListFormatError(fmt, "file", f"unknown key(s) {', '.join(unknown)}; the keys are list, "
                              "published, entries")
    for key in ("list", "published", "entries"):
        if key not in doc:
            raise ListFormatError(fmt, key, "required key missing")
    if doc["list"] != name:
        raise ListFormatError(fmt, "list", f"the file is list {doc['list']!r}, loaded as {name!r}")
    if not isinstance(doc["published"], str):
        raise ListFormatError(fmt, "published",
                              f"expected a YYYY-MM-DD string, got {_kind_of(doc['published'])}")
    try:
        published = date.fromisoformat(doc["published"]) if len(doc["published"]) == 10 else None
    except ValueError:
        published = None
    if published is None:
        raise ListFormatError(fmt, "published", f"{doc['published']!r} is not a date written YYYY-MM-DD")
    if not isinstance(doc["entries"], list):
        raise ListFormatError(fmt, "entries", f"expected a list, got {_kind_of(doc['entries'])}")
    return assemble(fmt, "internal", name, published, SanctionsList.digest(bytes(data)),
                    _json_entries(fmt, doc["entries"]), JSON_FORMAT)


def _json_entries(fmt: str, entries: list[Any]) -> Iterable[tuple[str, ListEntry]]:
    for n, item in enumerate(entries):
        where = f"entries[{n}]"
        if not isinstance(item, dict):
            raise ListFormatError(fmt, where, f"expected an object, got {_kind_of(item)}")
        if unknown := sorted(set(item) - _ENTRY_KEYS):
            raise ListFormatError(fmt, where, f"unknown key(s) {', '.join(unknown)}; the keys are "
                                  f"{', '.join(CSV_HEADER)}")
        scalars = {}
        for key in ("entry_id", "kind", "name"):
            value = item.get(key, "")
            if not isinstance(value, str):
                raise ListFormatError(fmt, f"{where}.{key}", f"expected a string, got {_kind_of(value)}")
            scalars[key] = value
        values: dict[str, list[str]] = {}
        for key in _LIST_FIELDS:
            items = item.get(key, [])
            if not isinstance(items, list):
                raise ListFormatError(fmt, f"{where}.{key}",
                                      f"expected a list of strings, got {_kind_of(items)}")
            for i, v in enumerate(items):
                if not isinstance(v, str):
                    raise ListFormatError(fmt, f"{where}.{key}[{i}]", f"expected a string, got {_kind_of(v)}")
            values[key] = [v.strip() for v in items if v.strip()]
        yield where, _entry(fmt, where, scalars["entry_id"], scalars["kind"], scalars["name"], values)


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _entry(fmt: str, where: str, entry_id: str, kind: str, name: str,
           values: dict[str, list[str]]) -> ListEntry:
    entry_kind = _KINDS.get(kind.strip().lower() or "unknown")
    if entry_kind is None:
        raise ListFormatError(fmt, f"{where} kind", f"{kind!r} is not one of {', '.join(ENTRY_KINDS)}")
    b = EntryBuilder(fmt, where, entry_id, entry_kind)
    if not name.strip():
        raise b.fail("the entry has no name", "name")
    b.name(name)
    for alias in values["aliases"]:
        b.name(alias)
    for p in values["programmes"]:
        b.programme(p)
    for d in values["dob"]:
        try:
            b.dob(_values.dob_from_text(d))
        except ValueError as exc:
            raise b.fail(str(exc), "dob") from None
    for c in values["countries"]:
        code = _values.iso_country(c)
        if code is None:
            raise b.fail(f"{c!r} is not an ISO 3166-1 alpha-2 country code", "countries")
        b.country(code)
    for ident in values["identifiers"]:
        kind_part, sep, rest = ident.partition(":")
        if not sep or not kind_part.strip() or not rest.strip():
            raise b.fail(f"identifier {ident!r} is not KIND:VALUE or KIND:VALUE:CC", "identifiers")
        value, country = rest, None
        head, sep, tail = rest.rpartition(":")
        if sep and head.strip() and len(tail.strip()) == 2 and tail.strip().isalpha():
            country = _values.iso_country(tail)
            if country is None:
                raise b.fail(f"identifier {ident!r}: {tail.strip()!r} is not an ISO 3166-1 alpha-2 "
                             "country code", "identifiers")
            value = head
        b.identifier(kind_part, value, country)
    for code in values["bics"]:
        try:
            b.bic(_values.bic(code))
        except ValueError as exc:
            raise b.fail(str(exc), "bics") from None
    return b.build()
