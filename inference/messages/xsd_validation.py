"""Structural validation of ISO 20022 XML against the official XSD of each message version.

Off the scoring path: ``sealtrail parse --validate`` and the corpus tests call it, the
decision pipeline never does (a schema check costs tens of times a parse; docs/messages.md
says which of the parsers' own checks stand in for it there). The bytes are read exactly as
the parsers read them (``iso20022.parse_xml``: defusedxml, no DTD, entities or external
references, the same size and namespace-length caps), then each business application header
(``AppHdr``) and each ``Document`` is checked against the schema of its namespace, shipped in
``inference/messages/xsd/`` (SOURCE.md names each file's origin). A namespace with no schema
shipped, a national variant such as ``pain.001.001.03.ch.02`` among them, is *not validated*,
never invalid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal
from xml.etree.ElementTree import Element

from inference.messages.errors import MessageError
from inference.messages.iso20022 import parse_xml

__all__ = ["MAX_ERRORS", "SCHEMAS", "PartValidation", "SchemaError", "XsdValidationError",
           "schema_for", "validate_xml"]

MAX_ERRORS = 10  # per part: the first ones in document order; the rest are counted
_MAX_REASON = 300
_ISO = "urn:iso:std:iso:20022:tech:xsd:"
_ISO_NAME = re.compile(r"(?:head|pacs|pain)\.[0-9]{3}\.[0-9]{3}\.[0-9]{2}")
_PARTS = ("AppHdr", "Document")
_MAX_DEPTH = 8  # envelope levels searched for parts (the parsers look 4 deep; a report may look further)

Status = Literal["valid", "invalid", "not validated"]


def _shipped() -> frozenset[str]:
    folder = resources.files("inference.messages") / "xsd"
    return frozenset(p.name.removesuffix(".xsd") for p in folder.iterdir() if p.name.endswith(".xsd"))


SCHEMAS: frozenset[str] = _shipped()
"""The message versions whose schema ships with sealtrail (e.g. ``pacs.008.001.08``)."""


class XsdValidationError(MessageError):
    """Schema validation could not run: a shipped schema unreadable, or the validator failed on
    this input. Never a verdict on the message; xmlschema's own exceptions do not pass through."""


@dataclass(frozen=True)
class SchemaError:
    """One difference from the schema: where (local element names from the part's root, e.g.
    ``Document/FIToFICstmrCdtTrf/CdtTrfTxInf/ChrgBr``) and why."""

    path: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class PartValidation:
    """The verdict on one ``AppHdr`` or ``Document``: ``status`` valid, invalid (``errors``, at
    most MAX_ERRORS, ``omitted`` more) or not validated (``note`` says why)."""

    part: Literal["AppHdr", "Document"]
    namespace: str
    schema: str | None  # the shipped file checked against, e.g. "pacs.008.001.08.xsd"
    status: Status
    errors: tuple[SchemaError, ...] = ()
    omitted: int = 0
    note: str = ""

    @property
    def valid(self) -> bool | None:
        """True or False when checked; None when no schema was shipped for the namespace."""
        return None if self.status == "not validated" else self.status == "valid"

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "namespace": self.namespace, "schema": self.schema,
                "status": self.status, "valid": self.valid,
                "errors": [e.to_json() for e in self.errors], "errors_omitted": self.omitted,
                "note": self.note}


def schema_for(namespace: str) -> str | None:
    """The message version whose shipped schema checks ``namespace`` (None: none shipped)."""
    if not namespace.startswith(_ISO):
        return None
    name = namespace.removeprefix(_ISO)
    return name if _ISO_NAME.fullmatch(name) and name in SCHEMAS else None


def validate_xml(data: bytes) -> tuple[PartValidation, ...]:
    """Each ``AppHdr`` and ``Document`` in ``data`` checked against its version's schema, in
    document order. ``MessageError`` when ``data`` is not XML the parsers would read (size,
    encoding, DTD or entities, not well-formed) or holds no ``Document``."""
    root = parse_xml(data)
    parts = _parts(root)
    if not any(_local(el.tag) == "Document" for el in parts):
        raise MessageError(f"root element {_local(root.tag)!r} holds no ISO 20022 Document",
                           field="Document")
    return tuple(_validate(el) for el in parts)


def _parts(root: Element) -> list[Element]:
    """``AppHdr`` and ``Document`` elements, the root itself or inside an envelope of any name,
    without looking inside a part (a ``Document`` carried in another's SplmtryData is its
    content, not a part)."""
    found: list[Element] = []
    level = [root]
    for _ in range(_MAX_DEPTH + 1):
        nxt: list[Element] = []
        for el in level:
            if _local(el.tag) in _PARTS:
                found.append(el)
            else:
                nxt.extend(el)
        level = nxt[:10_000]
    order = {id(el): n for n, el in enumerate(root.iter())}
    return sorted(found, key=lambda el: order[id(el)])


def _validate(el: Element) -> PartValidation:
    part: Literal["AppHdr", "Document"] = "AppHdr" if _local(el.tag) == "AppHdr" else "Document"
    namespace = el.tag[1:el.tag.index("}")] if el.tag.startswith("{") else ""
    name = schema_for(namespace)
    if name is None:
        why = f"no schema shipped for {namespace}" if namespace else f"the {part} has no namespace"
        return PartValidation(part, namespace, None, "not validated", note=why)
    schema = _load(name)
    errors: list[SchemaError] = []
    omitted = 0
    try:
        for exc in schema.iter_errors(el, use_location_hints=False):
            if len(errors) < MAX_ERRORS:
                errors.append(SchemaError(_path(exc.path, part), _reason(exc)))
            else:
                omitted += 1
    except Exception as exc:  # the validator itself failed: say so, in the package's own error
        raise XsdValidationError(f"the {name} schema check failed on this input "
                                 f"({type(exc).__name__}: {str(exc)[:200]})", field=part) from None
    if errors:
        return PartValidation(part, namespace, f"{name}.xsd", "invalid", tuple(errors), omitted)
    return PartValidation(part, namespace, f"{name}.xsd", "valid")


@cache
def _load(name: str) -> Any:
    """The compiled schema of message version ``name``, built once per process (about 0.3 s)."""
    import xmlschema  # here: loading xmlschema costs ~0.2 s and only validation needs it

    try:
        text = (resources.files("inference.messages") / "xsd" / f"{name}.xsd").read_bytes().decode("utf-8")
        return xmlschema.XMLSchema(text, allow="none", defuse="always")
    except Exception as exc:
        raise XsdValidationError(f"the shipped schema {name}.xsd cannot be loaded "
                                 f"({type(exc).__name__}: {str(exc)[:200]})", field="schema") from None


_QNAME = re.compile(r"\{(?:urn|https?):[^}\s]*\}")
_STEP = re.compile(r"(?:\{[^}]*\}|[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)(\[[0-9]+\])?")


def _path(xpath: str | None, part: str) -> str:
    """xmlschema's XPath of the failing element as local names (``Document/GrpHdr/MsgId``)."""
    if not xpath:
        return part
    steps = [f"{m[1]}{m[2] or ''}" for step in xpath.strip("/").split("/") if (m := _STEP.fullmatch(step))]
    return "/".join(steps) or part


def _reason(exc: Any) -> str:
    text = str(getattr(exc, "reason", None) or getattr(exc, "message", None) or exc)
    text = " ".join(text.split())
    text = _QNAME.sub("", text)  # qualified names read as local names
    return text if len(text) <= _MAX_REASON else text[:_MAX_REASON - 3] + "..."


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]
