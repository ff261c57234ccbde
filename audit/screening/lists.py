"""Sanctions lists as sealed records: who loaded which version of which list, and its bytes.

Loading a list seals one record of kind ``sanctions_list`` (body ``sealtrail.sanctions-list/1``)
whose payload is the list file exactly as loaded. The record names the list, its source, its
format (and the version of the parser that read it), the publication date the file states, the
SHA-256 of its bytes (the list's version: what a decision screened against names), how many
entries it holds, who loaded it and why. The bytes are the record's payload, stored apart from the
chained record and bound to it by its SHA-256, so the list a decision used can be read back and
parsed again for as long as the record is kept.

The lists in force are a function of the sealed records alone: for each list name, the last
``sanctions_list`` record (before a given seq, for a decision sealed at that seq). A record with
``withdrawn`` true takes a list out of force; it has no payload.
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import Engine, select

from audit.decide.principal import Principal
from audit.errors import ListError, ListNotFoundError
from audit.officer_words import signed_act
from audit.screening.diff import ListDiff, diff_lists
from inference.screening.entries import SOURCES, SanctionsList, Source
from inference.screening.errors import ListFormatError
from inference.screening.index import screenable
from inference.screening.lists import FORMATS, load
from ledger import store
from ledger.append import Ledger
from ledger.jcs import canonical_bytes
from ledger.records import Record, format_time

__all__ = ["LIST_KIND", "LIST_SCHEMA", "MAX_LIST_BYTES", "ListInForce", "LoadsDiff", "collector_paused",
           "diff_loads", "list_history", "lists_in_force", "lists_needed_since", "read_list", "seal_list",
           "withdraw_list"]

LIST_KIND = "sanctions_list"
LIST_SCHEMA = "sealtrail.sanctions-list/1"
MAX_LIST_BYTES = 256 * 1024 * 1024  # the full OFAC SDN XML is about 100 MB with every field
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


@dataclass(frozen=True)
class ListInForce:
    """One sealed load of a list: the record's seq and body."""

    seq: int
    name: str
    source: str
    format: str
    sha256: str
    published: str | None
    entries: int
    withdrawn: bool
    recorded_at: str
    principal: dict[str, Any]
    rationale: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "name": self.name, "source": self.source, "format": self.format,
                "sha256": self.sha256, "published": self.published, "entries": self.entries,
                "withdrawn": self.withdrawn, "recorded_at": self.recorded_at, "principal": self.principal,
                "rationale": self.rationale}


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a list is parsed and indexed, and what they made frozen
    (``gc.freeze``) after. Building a 30,000-entry index allocates millions of objects, and each
    full collection meanwhile, or the first one after, scans them all with the GIL held: 70-260 ms
    during which the batches of a deciding process (the same process, for a list loaded over HTTP)
    wait (``bench.screening_reload``: the slowest request while a 30,000-entry list was loaded fell
    from 348 ms to 42 ms). Frozen, the index (long-lived, without cycles) is skipped by every later
    collection; refcounting still frees it when a newer one replaces it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ListError("name", "a list's name is 1-64 characters: lower-case letters, digits, '.', '_', "
                                "'-', starting with a letter or digit (e.g. ofac-sdn, un, bank-exits)")
    return name


def seal_list(ledger: Ledger, data: bytes, fmt: str, name: str, principal: Principal | Mapping[str, Any],
              rationale: str, *, source: Source | None = None, published: date | None = None) -> ListInForce:
    """Parse ``data`` as ``fmt`` and, only if it parses whole, seal it as the version of list
    ``name`` in force from now on; the sealed load. ``source`` and ``published`` are for formats
    that do not state them (the bank's own CSV); a format that states them wins."""
    name = _name(name)
    if fmt not in FORMATS:
        raise ListError("format", f"unknown list format {fmt!r}; one of {', '.join(FORMATS)}")
    if source is not None and source not in SOURCES:
        raise ListError("source", f"unknown list source {source!r}; one of {', '.join(SOURCES)}")
    if len(data) > MAX_LIST_BYTES:
        raise ListError("file", f"the list is over {MAX_LIST_BYTES:,} bytes (the limit)")
    who, why = signed_act(principal, rationale, ListError)
    try:
        with collector_paused():
            parsed = load(data, fmt, name, source=source, published=published)
    except ListFormatError as exc:
        raise ListError("file", str(exc)) from None
    if not parsed.entries:
        raise ListError("file", "the list has no entries (a list is withdrawn with `lists withdraw`, "
                                "not by loading an empty file)")
    ghost = next((e for e in parsed.entries if not screenable(e)), None)
    if ghost is not None:  # it would be loaded and never match anything
        raise ListError("file", f"entry {ghost.entry_id!r}: none of its names "
                                f"({', '.join(map(repr, ghost.names))}) has a word that can be screened")
    body = _body(parsed, fmt, who, why)
    (r,) = ledger.append_many([Record.from_canonical_body(LIST_KIND, canonical_bytes(body), payload=data)])
    return _in_force(r.seq, body, r.recorded_at)


def withdraw_list(ledger: Ledger, name: str, principal: Principal | Mapping[str, Any],
                  rationale: str) -> ListInForce:
    """Seal that list ``name`` is no longer screened against (from the next decision on)."""
    name = _name(name)
    who, why = signed_act(principal, rationale, ListError)
    current = {x.name: x for x in lists_in_force(ledger.engine)}
    if name not in current:
        raise ListNotFoundError("name", f"no list {name!r} is in force")
    was = current[name]
    body = {"schema": LIST_SCHEMA, "name": name, "source": was.source, "format": was.format, "parser": "",
            "sha256": hashlib.sha256(b"").hexdigest(), "published": None, "entries": 0, "withdrawn": True,
            "principal": who, "rationale": why}
    (r,) = ledger.append_many([Record.from_canonical_body(LIST_KIND, canonical_bytes(body))])
    return _in_force(r.seq, body, r.recorded_at)


def _body(parsed: SanctionsList, fmt: str, who: dict[str, Any], why: str) -> dict[str, Any]:
    return {"schema": LIST_SCHEMA, "name": parsed.name, "source": parsed.source, "format": fmt,
            "parser": parsed.format, "sha256": parsed.sha256,
            "published": parsed.published.isoformat() if parsed.published else None,
            "entries": len(parsed.entries), "withdrawn": False, "principal": who, "rationale": why}


def _in_force(seq: int, body: Mapping[str, Any], recorded_at: str) -> ListInForce:
    try:
        return ListInForce(seq, str(body["name"]), str(body["source"]), str(body["format"]),
                           str(body["sha256"]), body["published"], int(body["entries"]),
                           bool(body["withdrawn"]), recorded_at, dict(body["principal"]),
                           str(body["rationale"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ListError("seq", f"record {seq} is not a {LIST_SCHEMA} body ({exc})") from None


def _loads(engine: Engine, *, before: int | None = None, name: str | None = None) -> list[ListInForce]:
    e = store.entries
    q = select(e.c.seq, e.c.record).where(e.c.kind == LIST_KIND)
    if before is not None:
        q = q.where(e.c.seq < before)
    with engine.connect() as conn:
        rows = conn.execute(q.order_by(e.c.seq)).all()
    out = []
    for seq, raw in rows:
        env = orjson.loads(raw)
        body = env.get("record") if isinstance(env, dict) else None
        if not isinstance(body, dict) or body.get("schema") != LIST_SCHEMA:
            raise ListError("seq", f"record {seq} of kind {LIST_KIND} is not a {LIST_SCHEMA} body")
        if name is None or body.get("name") == name:
            out.append(_in_force(int(seq), body, str(env.get("recorded_at"))))
    return out


def lists_in_force(engine: Engine, *, before: int | None = None) -> list[ListInForce]:
    """The last sealed load of each list not withdrawn (before seq ``before`` if given), by name."""
    if before is not None and (type(before) is not int or before < 0):
        raise ListError("before", "must be a seq")
    last: dict[str, ListInForce] = {}
    for x in _loads(engine, before=before):
        last[x.name] = x
    return sorted((x for x in last.values() if not x.withdrawn), key=lambda x: x.name)


def lists_needed_since(engine: Engine, since: datetime) -> set[str]:
    """The SHA-256 of every list version in force at some time from ``since`` on: those still in
    force, and those replaced or withdrawn at or after it. Decisions of that period were screened
    against them, so their bytes are kept while those decisions are (retention skips them)."""
    cutoff = format_time(since)
    loads = _loads(engine)
    out: set[str] = set()
    for i, x in enumerate(loads):
        if x.withdrawn:
            continue
        nxt = next((y for y in loads[i + 1:] if y.name == x.name), None)
        if nxt is None or nxt.recorded_at >= cutoff:
            out.add(x.sha256)
    return out


def list_history(engine: Engine, name: str) -> list[ListInForce]:
    """Every sealed load and withdrawal of list ``name``, oldest first."""
    found = _loads(engine, name=_name(name))
    if not found:
        raise ListNotFoundError("name", f"no list {name!r} was ever loaded")
    return found


def read_list(engine: Engine, load_: ListInForce) -> SanctionsList:
    """The list of a sealed load, parsed again from its payload (checked against its SHA-256)."""
    if load_.withdrawn:
        raise ListError("seq", f"record {load_.seq} withdraws list {load_.name!r}: it has no entries")
    p = store.payloads
    with engine.connect() as conn:  # the body's sha256 is the payload's: the bytes parsed
        row = conn.execute(select(p.c.data).where(p.c.sha256 == load_.sha256)).first()
    if row is None or row[0] is None:
        raise ListError("seq", f"the bytes of list {load_.name!r} sealed at {load_.seq} are not in the "
                               "payload store (purged?): decisions that used it cannot be screened again")
    data = bytes(row[0])
    if hashlib.sha256(data).hexdigest() != load_.sha256:
        raise ListError("seq", f"the stored bytes of list {load_.name!r} (seq {load_.seq}) do not hash to "
                               f"the sealed {load_.sha256}")
    try:
        return load(data, load_.format, load_.name, source=load_.source,  # type: ignore[arg-type]
                    published=date.fromisoformat(load_.published) if load_.published else None)
    except ListFormatError as exc:
        raise ListError("seq", f"list {load_.name!r} sealed at {load_.seq} no longer parses: {exc}") from None


@dataclass(frozen=True)
class LoadsDiff:
    """Two sealed loads of one list and what changed from the older (``old``) to the newer."""

    name: str
    old: ListInForce
    new: ListInForce
    diff: ListDiff

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "from_seq": self.old.seq, "to_seq": self.new.seq, **self.diff.to_json()}


def diff_loads(engine: Engine, name: str, *, old: int | None = None, new: int | None = None) -> LoadsDiff:
    """What changed in list ``name`` from its sealed load at seq ``old`` to the one at ``new``; by
    default ``new`` is its last load and ``old`` the load before ``new``. ``ListNotFoundError``
    naming ``from`` or ``to`` for a seq that is not a load of the list (a withdrawal is none), and
    ``name`` for a list never loaded or without two loads to compare."""
    loads = [x for x in list_history(engine, name) if not x.withdrawn]
    by_seq = {x.seq: x for x in loads}
    for seq, field in ((old, "from"), (new, "to")):
        if seq is not None and seq not in by_seq:
            raise ListNotFoundError(field, f"seq {seq} is not a load of list {name!r}")
    to = by_seq[new] if new is not None else loads[-1]  # a list with a history was loaded at least once
    earlier = [x for x in loads if x.seq < to.seq]
    if old is None and not earlier:
        if len(loads) < 2:
            raise ListNotFoundError("name", f"list {name!r} has fewer than two loads to compare")
        raise ListNotFoundError("from", f"list {name!r} has no load before seq {to.seq} to compare with")
    fr = by_seq[old] if old is not None else earlier[-1]
    return LoadsDiff(name, fr, to, diff_lists(read_list(engine, fr), read_list(engine, to)))
