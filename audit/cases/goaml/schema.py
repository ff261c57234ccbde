"""Checks a goAML STR document against sealtrail's STR profile (``goaml_str.xsd``, shipped beside
this module; docs/goaml.md says what it covers and where it differs from an FIU's full schema).

The document is read as untrusted input: bytes only, at most ``MAX_REPORT_BYTES``, UTF-8, parsed by
defusedxml with DTDs, entity declarations and external references refused, so an entity bomb or an
external entity is never expanded. Every failure is a ``ReportError`` naming where (an element path
such as ``report/transaction[1]/t_from``) and why; xmlschema's and the parsers' own exceptions do
not pass through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from audit.errors import ReportError

__all__ = ["MAX_REPORT_BYTES", "PROFILE", "SCHEMA_FILE", "ReportError", "SchemaFault", "validate_report"]

MAX_REPORT_BYTES = 16 << 20
"""The largest document ``validate_report`` reads (16 MiB: thousands of transactions)."""

SCHEMA_FILE = "goaml_str.xsd"
PROFILE = "sealtrail-goaml-str-1"
"""The profile's version, as the shipped schema's ``version`` attribute states it."""

_MAX_FAULTS = 10
_MAX_WHY = 300
_DECL_ENCODING = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")


@dataclass(frozen=True)
class SchemaFault:
    """One difference from the profile: ``path`` the element (``report/transaction[2]/t_to``),
    ``why`` in words."""

    path: str
    why: str


def validate_report(xml: bytes) -> None:
    """Return when ``xml`` is a goAML STR document valid under the shipped profile; otherwise raise
    ``ReportError`` naming the first element missing, out of place or malformed."""
    root = _parse(xml)
    schema = _schema()
    faults: list[SchemaFault] = []
    try:
        for exc in schema.iter_errors(root, use_location_hints=False):
            faults.append(_fault(exc))
            if len(faults) >= _MAX_FAULTS:
                break
    except Exception as exc:  # the validator itself failed: never let its exception through
        raise ReportError("report", f"the schema check failed on this input ({type(exc).__name__}: "
                          f"{str(exc)[:200]})") from None
    if faults:
        raise ReportError(faults[0].path, faults[0].why, faults=tuple(faults))


def _parse(xml: bytes) -> Element:
    if not isinstance(xml, bytes | bytearray | memoryview):
        raise ReportError("xml", f"expected bytes, got {type(xml).__name__}")
    data = bytes(xml)
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError("xml", f"the document is {len(data)} bytes; the limit is {MAX_REPORT_BYTES}")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReportError("xml", f"not UTF-8 (invalid byte at offset {exc.start})") from None
    declared = _DECL_ENCODING.match(data.removeprefix(b"\xef\xbb\xbf"))
    if declared and declared[1].lower() not in (b"utf-8", b"utf8"):
        raise ReportError("xml", f"declared encoding {declared[1].decode()!r}; only UTF-8 is read")
    try:
        root: Element = fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise ReportError("xml", "DTDs, entity declarations and external references are refused "
                          f"({exc})") from None
    except ParseError as exc:
        raise ReportError("xml", f"not well-formed XML: {exc}") from None
    return root


@cache
def _schema() -> Any:
    """The compiled profile, built once per process."""
    import xmlschema  # here: only validation needs it, and importing it costs ~0.2 s

    try:
        text = (resources.files(__package__ or "audit.cases.goaml") / SCHEMA_FILE).read_text("utf-8")
        return xmlschema.XMLSchema(text, allow="none", defuse="always")
    except Exception as exc:
        raise ReportError("schema", f"the shipped {SCHEMA_FILE} cannot be loaded "
                          f"({type(exc).__name__}: {str(exc)[:200]})") from None


_STEP = re.compile(r"(?:\{[^}]*\})?([A-Za-z_][\w.-]*)(\[[0-9]+\])?")
_QNAME = re.compile(r"\{(?:urn|https?):[^}\s]*\}")  # a qualified name's namespace; not a regex's {3}


def _fault(exc: Any) -> SchemaFault:
    """xmlschema's error as a path and a sentence; a missing or misplaced child is named in the path
    (``report/transaction[1]/t_from``), never only in the sentence."""
    path = _path(getattr(exc, "path", None))
    reason = " ".join(str(getattr(exc, "reason", None) or exc).split())
    reason = _QNAME.sub("", reason)
    expected = _expected(exc)
    value = getattr(exc, "obj", None)
    if expected:
        names = " or ".join(expected)
        path = f"{path}/{expected[0] if len(expected) == 1 else '(' + '|'.join(expected) + ')'}"
        found = getattr(exc, "invalid_tag", None)
        reason = (f"{names} is missing" if found is None
                  else f"{names} is missing or out of order (found {_local(str(found))} in its place)")
    elif getattr(exc, "invalid_tag", None) is not None:
        path = f"{path}/{_local(str(exc.invalid_tag))}"
    elif isinstance(value, str | int | float):
        shown = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
        reason = f"{shown!r}: {reason}"
    return SchemaFault(path, reason if len(reason) <= _MAX_WHY else reason[:_MAX_WHY - 3] + "...")


def _expected(exc: Any) -> list[str]:
    """The element names the validator expected where a child is missing (``t_from_my_client``,
    ``t_from``); empty when it expected nothing in particular (an unexpected extra child)."""
    try:
        particles = list(getattr(exc, "expected", None) or ())
    except Exception:
        return []
    names = [_local(str(p.name)) for p in particles if getattr(p, "name", None)]
    return list(dict.fromkeys(names))


def _path(xpath: str | None) -> str:
    if not xpath:
        return "report"
    steps = [f"{m[1]}{m[2] or ''}" for step in xpath.strip("/").split("/") if (m := _STEP.fullmatch(step))]
    return "/".join(steps) or "report"


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]
