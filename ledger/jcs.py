"""RFC 8785 (JCS) canonical bytes, the ledger's one encoder: orjson where a value holds no float,
the ``rfc8785`` package where it does.

Everything sealed is JCS, and every JCS byte the ledger seals comes from here: ``Record`` bodies
given as objects are encoded with ``canonical_bytes``, and bytes typed ``Jcs`` (what this module
returns: ``canonical_bytes``, the ``jcs_*`` pieces and a filled ``Template``) may be sealed
without being parsed again (``Record.from_jcs``). Bytes from anywhere else are parsed once.

``rfc8785.dumps`` is the reference (pure Python; ~120 us for a decision record with float
features, most of it formatting floats). ``orjson.dumps(option=OPT_SORT_KEYS)`` takes a few us
and, for a value made of nothing but exact ``dict``, ``list``, ``tuple``, ``str``, ``int``,
``bool`` and ``None``, writes exactly the reference's bytes:

* integers: both write the decimal digits; ``OPT_STRICT_INTEGER`` refuses what the reference
  refuses, beyond +-(2**53 - 1);
* strings: the same escaping (``\\b \\f \\n \\r \\t \\" \\\\``, other C0 controls as lower-case
  ``\\u00xx``, DEL, U+2028/2029 and the rest as raw UTF-8); lone surrogates refused by both;
* key order: orjson sorts by code point, JCS by UTF-16 code unit; they differ only when an astral
  character meets one in U+E000..U+FFFF at the same index of two keys, so output holding both
  kinds of character takes the reference path;
* depth: orjson stops at 254 levels, where the reference decides.

What orjson writes unlike the reference is everything else: floats (``1.0``, ``-0.0``, exponent
ranges, NaN as ``null``), subclasses of the builtin types, Enum members, UUIDs, dataclasses,
datetimes, numpy values and ``orjson.Fragment``. One walk over the value (``_plain``) lets only
the exact types above through; any other value takes the reference path, which encodes it or
refuses it (``CanonicalError``). Decision records hold no float since ``sealtrail.decision/4``
(integers in fixed units), nor does any other record on the hot path, so the reference serves
only records such as a model card's metrics and older records re-encoded by tools.

Measured with ``python -m bench.canonical`` (see docs/performance.md for the figures).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NewType

import orjson
import rfc8785

from ledger.errors import LedgerError

__all__ = ["JCS_NULL", "CanonicalError", "Jcs", "Template", "canonical_bytes", "canonical_bytes_reference",
           "canonical_sha256", "jcs_int", "jcs_int_rows", "jcs_numbers", "jcs_rows", "jcs_str"]

Jcs = NewType("Jcs", bytes)
"""RFC 8785 bytes of one JSON value, made by this module (its functions are the only places that
assert the type, each once; ``mypy --strict`` holds every other caller to it)."""
JCS_NULL = Jcs(b"null")

_INT_LIMIT = 2**53 - 1
# The two encoders whose output is typed Jcs as it stands, once here, at no cost per call: the
# reference, and orjson on an exact str (it escapes strings exactly as RFC 8785 does, see above).
_reference_dumps: Callable[[Any], Jcs] = rfc8785.dumps  # type: ignore[assignment]
_dumps_str: Callable[[str], Jcs] = orjson.dumps  # type: ignore[assignment]
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
_ASTRAL = re.compile(rb"[\xf0-\xf4]")  # the lead byte of a character beyond U+FFFF
_E000_FFFF = re.compile(rb"[\xee\xef]")  # the lead byte of one in U+E000..U+FFFF


class CanonicalError(LedgerError, ValueError):
    """A value that has no RFC 8785 form; ``path`` points at it (``$.features.values[3]``).

    A ``ValueError`` too, as it was before the encoder moved into the ledger."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"{reason} at {path}")
        self.reason = reason
        self.path = path


_MAX_DEPTH = 254  # orjson's nesting limit; deeper values (a value that holds itself) go to the reference


def _plain(obj: Any) -> bool:
    """Whether ``obj`` is made of exact ``dict`` (string keys), ``list``, ``tuple``, ``str``,
    ``int``, ``bool`` and ``None`` alone, nested at most ``_MAX_DEPTH`` deep: values orjson writes
    as RFC 8785 does. Iterative, so depth costs no recursion, and bounded, so a value that holds
    itself ends here; a float or any other type answers False."""
    kind = type(obj)
    if kind is not dict and kind is not list and kind is not tuple:
        return kind is str or kind is int or kind is bool or obj is None
    stack: list[tuple[Any, int]] = [(obj, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth >= _MAX_DEPTH:
            return False
        if type(value) is dict:
            for key in value:
                if type(key) is not str:
                    return False
            items = value.values()
        else:
            items = value
        for item in items:
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is dict or kind is list or kind is tuple:
                push((item, depth + 1))
            else:
                return False
    return True


def _fast(obj: Any) -> bytes | None:
    """The JCS bytes of ``obj`` through orjson, or None where that is not proven identical."""
    if not _plain(obj):
        return None
    try:
        out = orjson.dumps(obj, option=_OPTIONS)
    except (TypeError, ValueError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None  # an integer out of range, a lone surrogate, too deep: the reference decides
    if not out.isascii() and _ASTRAL.search(out) is not None and _E000_FFFF.search(out) is not None:
        return None
    return out


def _fast_path_taken(obj: Any) -> bool:
    """Whether ``canonical_bytes(obj)`` is served by orjson (for tests and the benchmark)."""
    return _fast(obj) is not None


def _path_item(path: str, key: str) -> str:
    if key.isidentifier() and key.isascii():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"  # escapes quotes, controls and lone surrogates


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _find_refusal(obj: Any) -> tuple[str, str] | None:
    """Where and why the reference refuses ``obj`` (its rules, walked without recursion)."""
    stack: list[tuple[Any, str]] = [(obj, "$")]
    while stack:
        value, path = stack.pop()
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int):
            if not -_INT_LIMIT <= int(value) <= _INT_LIMIT:
                return "integer outside +-(2**53 - 1), where IEEE-754 doubles stop being exact", path
        elif isinstance(value, str):
            if not _encodable(value):
                return "string holds a lone surrogate (not Unicode text)", path
        elif isinstance(value, float):
            if not math.isfinite(float(value)):
                return f"{float(value)!r} is not a JSON number", path
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, dict):
            for key in value:
                if not isinstance(key, str):
                    return f"object key {key!r} is a {type(key).__name__}, not a string", path
                if not _encodable(key):
                    return "object key holds a lone surrogate (not Unicode text)", _path_item(path, key)
            stack.extend((value[k], _path_item(path, k)) for k in reversed(list(value)))
        else:
            return f"{type(value).__name__} is not a JSON type", path
    return None


def canonical_bytes_reference(obj: Any) -> Jcs:
    """RFC 8785 bytes by the ``rfc8785`` package alone: the reference the fast path must equal."""
    try:
        return _reference_dumps(obj)
    except RecursionError as e:
        raise CanonicalError("nested deeper than the reference encoder can go") from e
    except (ValueError, TypeError, AttributeError) as e:  # rfc8785 errors, and UnicodeEncodeError
        found = _find_refusal(obj)
        reason, path = found if found is not None else (str(e) or type(e).__name__, "$")
        raise CanonicalError(reason, path) from e


def canonical_bytes(obj: Any) -> Jcs:
    """RFC 8785 (JCS) bytes of a JSON value; raises CanonicalError where it has none.

    Byte-identical to ``canonical_bytes_reference``. Like any encoder, it reads ``obj`` more
    than once: another thread must not change it during the call.
    """
    out = _fast(obj)
    if out is not None:
        return Jcs(out)
    return canonical_bytes_reference(obj)


def canonical_sha256(obj: Any) -> str:
    """Lower-case hex SHA-256 of the canonical bytes."""
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()


# --- pieces of canonical bytes, and a value spliced from them ----------------------------------

def jcs_str(value: object) -> Jcs:
    """Canonical bytes of an exact ``str``; TypeError for anything else, or for text that is
    not Unicode (a lone surrogate)."""
    if type(value) is not str:
        raise TypeError(f"{type(value).__name__} is not a str")
    return _dumps_str(value)


def jcs_int(value: object) -> Jcs:
    """Canonical bytes of an exact ``int`` within +-(2**53 - 1); TypeError for anything else."""
    if type(value) is not int or not -_INT_LIMIT <= value <= _INT_LIMIT:
        raise TypeError(f"{value!r} is not an integer JSON number")
    return Jcs(str(value).encode())


def jcs_rows(rows: list[list[float | None]]) -> list[Jcs]:
    """The canonical bytes of each row of numbers (``null`` for None), from one encoder call
    for all of them: a JCS array is ``[`` + its elements' canonical bytes joined by ``,`` + ``]``,
    and a number or ``null`` holds no bracket, so the rows of ``[[...],[...]]`` split exactly."""
    if not rows or any(not r for r in rows):
        return [canonical_bytes(r) for r in rows]
    inner = canonical_bytes(rows)[2:-2].split(b"],[")
    if len(inner) != len(rows):  # pragma: no cover - impossible for numbers; never guess
        return [canonical_bytes(r) for r in rows]
    return [Jcs(b"[" + p + b"]") for p in inner]


_INT_ROW_BYTES = b"0123456789-,[]nul"  # all that rows of integers and nulls are written with


def jcs_int_rows(rows: list[list[int | None]]) -> list[Jcs]:
    """The canonical bytes of each row of integers (``null`` for None), from one orjson call.

    An integer within +-(2**53 - 1) is written the same by orjson and by RFC 8785 (its decimal
    digits); ``OPT_STRICT_INTEGER`` refuses any other, and the bytes are checked to hold nothing
    but digits, ``-``, ``,``, brackets and ``null``, which rules out a float (``.`` or ``e``), a
    bool, a string or a nested list that slipped in: TypeError then, as for any value that is
    not such a row."""
    if not rows or any(type(r) is not list or not r for r in rows):
        raise TypeError("rows of integers are non-empty lists")
    try:
        whole = orjson.dumps(rows, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError as exc:
        raise TypeError(f"not rows of integers within +-(2**53 - 1): {exc}") from None
    if (whole.translate(None, _INT_ROW_BYTES) or whole.count(b"[") != len(rows) + 1
            or whole.count(b"null") != sum(r.count(None) for r in rows)):
        raise TypeError("not rows of integers and nulls")  # a float (NaN is written null), bool, string, list
    inner = whole[2:-2].split(b"],[")
    if len(inner) != len(rows):
        raise TypeError("not rows of integers and nulls")
    return [Jcs(b"[" + p + b"]") for p in inner]


def jcs_numbers(values: list[float | None]) -> list[Jcs]:
    """The canonical bytes of each number (or None) of ``values``, from one encoder call: the
    array's elements joined by ``,``, and a number holds no comma."""
    if not values:
        return []
    out = canonical_bytes(values)[1:-1].split(b",")
    if len(out) != len(values):  # pragma: no cover - impossible for numbers; never guess
        return [canonical_bytes(v) for v in values]
    return out  # type: ignore[return-value]  # each a whole number token, or null


class Template:
    """The canonical bytes of one JSON value with holes, filled many times over.

    Built from a value in which the string value of each slot is ``Template.marker(slot)``:
    its canonical bytes are made once, and each fill puts the canonical bytes of another value
    where a marker (quotes included) stood. JCS writes an object as ``{`` + its ``"key":value``
    members in key order + ``}``; the keys do not change, so the result is exactly the canonical
    bytes of the value with those values in the slots (tests hold it to rfc8785).
    """

    def __init__(self, pieces: tuple[bytes, ...], order: tuple[int, ...]) -> None:
        if len(pieces) != len(order) + 1:
            raise ValueError(f"{len(pieces)} constant pieces around {len(order)} slots")
        self._pieces = pieces  # the constant bytes before, between and after the slots
        self._order = order  # the slot (index into the slots given to ``of``) of each hole, in output order
        self._fmt = b"%b".join(p.replace(b"%", b"%%") for p in pieces)  # '%' doubled, '%b' at each slot

    @staticmethod
    def marker(slot: str) -> str:
        """The string to put where ``slot``'s value goes."""
        return f"\x00sealtrail-slot:{slot}\x00"  # JCS writes it as "\u0000sealtrail-slot:...\u0000"

    @classmethod
    def of(cls, value: Any, slots: Sequence[str]) -> Template | None:
        """The template of ``value`` (markers at ``slots``), or None where a slot cannot be found
        exactly once as a value: a constant string that holds a marker's text, or a marker used
        as an object key (do not guess). CanonicalError where ``value`` has no RFC 8785 form."""
        text = canonical_bytes(value)
        tokens = [orjson.dumps(cls.marker(slot)) for slot in slots]
        found: list[tuple[int, int]] = []
        for i, token in enumerate(tokens):
            at = text.find(token)
            if at < 0 or text.count(token) != 1 or text[at + len(token):at + len(token) + 1] == b":":
                return None
            found.append((at, i))
        found.sort()
        pieces: list[bytes] = []
        last = 0
        for at, i in found:
            pieces.append(text[last:at])
            last = at + len(tokens[i])
        pieces.append(text[last:])
        return cls(tuple(pieces), tuple(i for _, i in found))

    def bind(self, parts: Mapping[int, Jcs]) -> Template:
        """This template with the slots numbered in ``parts`` filled for good (a batch's shared
        values, say); the others stay holes, still numbered as in ``of``."""
        pieces: list[bytes] = [self._pieces[0]]
        order: list[int] = []
        for slot, after in zip(self._order, self._pieces[1:], strict=True):
            part = parts.get(slot)
            if part is None:
                order.append(slot)
                pieces.append(after)
            else:
                pieces[-1] += part + after
        return Template(tuple(pieces), tuple(order))

    def fill(self, parts: Sequence[Jcs]) -> Jcs:
        """The canonical bytes with each slot's value, ``parts`` in the order of the slots."""
        order = self._order
        return Jcs(self._fmt % tuple([parts[i] for i in order]))
