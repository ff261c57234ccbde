"""An XML Schema read by xmlschema, compiled into a checker fast enough for a list of 30,000
entries.

xmlschema reads the published XSD (it is the authority on what the schema says) and walks each
instance element at about 1 ms per OFAC entity: 30 s for a full list. The schemas the lists
publish use a small part of XSD: sequences of named elements with occurrence bounds, required and
optional attributes, element-only or simple content, and the built-in types string, int, boolean,
date and dateTime. ``compile_schema`` turns such a schema into plain tables and refuses any schema
that uses more (a choice, a wildcard, mixed content, a facet, a default...), so the checker never
silently under-checks; ``check`` then validates an element tree against them in a single walk.
The tests cross-check it against xmlschema's own validation on valid and invalid documents. At
the edges it is stricter than xmlschema: digits are ASCII only, as XSD defines them (xmlschema
takes any Unicode digit), and a year before 1 is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from xml.etree.ElementTree import Element

__all__ = ["Decl", "SchemaFault", "check", "compile_schema"]

_XS = "{http://www.w3.org/2001/XMLSchema}"
_XSI = "{http://www.w3.org/2001/XMLSchema-instance}"


class SchemaFault(Exception):
    """An element that breaks the schema: ``path`` (``sanctionsData/entities/entity[3]/names``)
    and ``why``."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


@dataclass(frozen=True)
class Particle:
    """A child element a sequence allows: its qualified name, bounds and declaration."""

    tag: str
    min: int
    max: int | None  # None: unbounded
    decl: Decl


@dataclass
class Decl:
    """One element declaration, compiled: simple content of a built-in type (``value``) or a
    sequence of children, and its attributes (name -> (type, required))."""

    tag: str
    value: str | None = None  # the built-in type of simple content, e.g. "int"; None: element-only
    attributes: dict[str, tuple[str, bool]] = field(default_factory=dict)
    children: tuple[Particle, ...] = ()
    by_tag: dict[str, int] = field(default_factory=dict)  # child tag -> index of its particle
    required: tuple[str, ...] = ()  # the attributes that must be present


_TYPES = ("string", "int", "boolean", "date", "dateTime")


def compile_schema(schema: Any, root_tag: str) -> Decl:
    """The declaration of ``root_tag`` in an ``xmlschema.XMLSchema``, compiled; ``ValueError`` for a
    construct the checker does not implement."""
    elements = {str(e.name): e for e in schema.elements.values()}
    if root_tag not in elements:
        raise ValueError(f"the schema declares no global element {root_tag}")
    return _compile_element(elements[root_tag], {})


def _builtin(xsd_type: Any, where: str) -> str:
    name = str(getattr(xsd_type, "name", None) or "")
    if not name.startswith(_XS) or name[len(_XS):] not in _TYPES:
        raise ValueError(f"{where}: type {name or 'anonymous'} is not one of {', '.join(_TYPES)}")
    return name[len(_XS):]


def _compile_element(el: Any, done: dict[int, Decl]) -> Decl:
    where = str(el.name)
    if el.default is not None or el.fixed is not None or el.nillable or el.abstract:
        raise ValueError(f"{where}: default, fixed, nillable or abstract elements are not implemented")
    t = el.type
    if id(t) in done and done[id(t)].tag == where:
        return done[id(t)]
    if t.is_simple():
        return Decl(where, value=_builtin(t, where))
    if t.mixed or t.is_empty() or getattr(t, "open_content", None) is not None:
        raise ValueError(f"{where}: mixed, empty or open content is not implemented")
    attrs: dict[str, tuple[str, bool]] = {}
    for name, attr in t.attributes.items():
        if name is None or attr.fixed is not None or attr.default is not None or attr.use == "prohibited":
            raise ValueError(f"{where}: attribute wildcards, defaults and fixed values are not implemented")
        attrs[str(name)] = (_builtin(attr.type, f"{where}@{name}"), attr.use == "required")
    required = tuple(n for n, (_kind, req) in attrs.items() if req)
    if t.has_simple_content():
        return Decl(where, value=_builtin(t.content, where), attributes=attrs, required=required)
    group = t.content
    if group.model != "sequence" or (group.min_occurs, group.max_occurs) != (1, 1):
        raise ValueError(f"{where}: only a sequence occurring once is implemented ({group.model})")
    decl = Decl(where, attributes=attrs, required=required)
    done[id(t)] = decl
    particles: list[Particle] = []
    for p in group:
        if not hasattr(p, "type") or getattr(p, "ref", None) is not None:
            raise ValueError(f"{where}: nested groups, wildcards and element references are not implemented")
        particles.append(Particle(str(p.name), int(p.min_occurs), p.max_occurs, _compile_element(p, done)))
    tags = [p.tag for p in particles]
    if len(set(tags)) != len(tags):
        raise ValueError(f"{where}: a sequence naming one element twice is not implemented")
    decl.children = tuple(particles)
    decl.by_tag = {tag: i for i, tag in enumerate(tags)}
    return decl


_INT = re.compile(r"[+-]?[0-9]+")
_DATE = re.compile(r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})(Z|[+-](?:(?:0[0-9]|1[0-3]):[0-5][0-9]|14:00))?")
_DATETIME = re.compile(r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
                       r"(Z|[+-](?:(?:0[0-9]|1[0-3]):[0-5][0-9]|14:00))?")


def _int(raw: str) -> bool:
    if raw.isdigit() and raw.isascii() and len(raw) < 10:  # the usual case, without a regex
        return True
    value = raw.strip(" \t\r\n")  # whiteSpace collapse: the non-string types ignore the edges
    return _INT.fullmatch(value) is not None and -(2**31) <= int(value) < 2**31


def _boolean(raw: str) -> bool:
    return raw.strip(" \t\r\n") in ("true", "false", "1", "0")


def _date_or_time(pattern: re.Pattern[str], raw: str) -> bool:
    m = pattern.fullmatch(raw.strip(" \t\r\n"))
    if m is None or int(m[1]) <= 0:
        return False
    try:
        date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    if pattern is _DATETIME:
        h, mi, s = int(m[4]), int(m[5]), int(m[6])
        return (h < 24 and mi < 60 and s < 60) or ((h, mi, s) == (24, 0, 0) and not (m[7] or "").strip(".0"))
    return True


_VALID: dict[str, Callable[[str], bool]] = {
    "string": lambda raw: True, "int": _int, "boolean": _boolean,
    "date": lambda raw: _date_or_time(_DATE, raw), "dateTime": lambda raw: _date_or_time(_DATETIME, raw),
}


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


class _Fault(Exception):
    """A fault found below the element being checked: ``rel`` is its path from there."""

    def __init__(self, rel: str, why: str) -> None:
        super().__init__(why)
        self.rel, self.why = rel, why


def check(el: Element, decl: Decl, path: str, *, deep: bool = True) -> None:
    """``SchemaFault`` for the first way ``el`` breaks ``decl``; with ``deep=False`` its children
    are checked for their order and number only (children already checked, then cleared)."""
    if el.tag != decl.tag:
        raise SchemaFault(path, f"expected <{_local(decl.tag)}>, found <{_local(el.tag)}>")
    try:
        _check(el, decl, deep)
    except _Fault as fault:
        raise SchemaFault(path + fault.rel, fault.why) from None


def _step(parent: Element, child: Element, p: Particle) -> str:
    """``/name`` or ``/name[n]`` (where the element may repeat): a step of a fault's path."""
    if p.max == 1:
        return f"/{_local(child.tag)}"
    n = 0
    for sibling in parent:
        n += sibling.tag == child.tag
        if sibling is child:
            break
    return f"/{_local(child.tag)}[{n}]"


def _check(el: Element, decl: Decl, deep: bool) -> None:  # the hot loop: paths only on a fault
    attrs = decl.attributes
    if el.attrib:
        for name, value in el.attrib.items():
            spec = attrs.get(name)
            if spec is None:
                if name.startswith(_XSI):
                    continue
                raise _Fault(f"/@{_local(name)}", "attribute not allowed here")
            if spec[0] != "string" and not _VALID[spec[0]](value):
                raise _Fault(f"/@{_local(name)}", f"{value[:40]!r} is not a valid xs:{spec[0]}")
    for name in decl.required:
        if name not in el.attrib:
            raise _Fault(f"/@{_local(name)}", "required attribute missing")
    kind = decl.value
    if kind is not None:
        if len(el):
            raise _Fault(f"/{_local(el[0].tag)}", f"<{_local(decl.tag)}> holds text only")
        if kind != "string" and not _VALID[kind](el.text or ""):
            raise _Fault("", f"{(el.text or '')[:40]!r} is not a valid xs:{kind}")
        return
    if el.text and not el.text.isspace():
        raise _Fault("", f"text {el.text.strip()[:40]!r} where only elements are allowed")
    particles, by_tag = decl.children, decl.by_tag
    pos, count = 0, 0
    for child in el:
        if child.tail and not child.tail.isspace():
            raise _Fault("", f"text {child.tail.strip()[:40]!r} where only elements are allowed")
        idx = by_tag.get(child.tag)
        if idx != pos:
            if idx is None or idx < pos:
                raise _Fault(f"/{_local(child.tag)}", "element not allowed here" if idx is None
                             else "element out of order")
            while pos < idx:
                _require_min(particles[pos], count)
                pos, count = pos + 1, 0
        count += 1
        p = particles[pos]
        if p.max is not None and count > p.max:
            raise _Fault(f"/{_local(child.tag)}", f"occurs more than {p.max} time(s)")
        if deep:
            try:
                _check(child, p.decl, True)
            except _Fault as fault:
                fault.rel = _step(el, child, p) + fault.rel
                raise
    while pos < len(particles):
        _require_min(particles[pos], count)
        pos, count = pos + 1, 0


def _require_min(p: Particle, count: int) -> None:
    if count < p.min:
        raise _Fault(f"/{_local(p.tag)}", "required element missing")
