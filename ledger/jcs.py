"""RFC 8785 (JCS) canonical bytes, the ledger's one encoder: orjson where that is proven
identical, rfc8785 elsewhere.

Everything sealed is JCS, and every JCS byte the ledger seals comes from here: ``Record`` bodies
given as objects are encoded with ``canonical_bytes``, and bytes typed ``Jcs`` (what this module
returns: ``canonical_bytes``, the ``jcs_*`` pieces and a filled ``Template``) may be sealed
without being parsed again (``Record.from_jcs``). Bytes from anywhere else are parsed once.

``rfc8785.dumps`` is the reference (pure Python; ~120 us for one decision record here, most of
it formatting floats). ``orjson.dumps(option=OPT_SORT_KEYS)`` takes ~2-3 us but is not JCS.
Every way the two differ, and how the fast path rules each out:

* types: orjson also writes UUIDs, Enum members (as ``.value``, which for an IntEnum/StrEnum
  may differ from the int/str the reference writes), ``orjson.Fragment`` (raw bytes),
  dataclasses, datetimes and subclasses of str/int/list/dict. A C pickler whose
  ``reducer_override`` refuses everything proves that each node is an exact None, bool, int,
  float, str, list, tuple or dict (or bytes, set, ..., which orjson then refuses); anything
  else (subclasses, IntEnum/StrEnum, numpy scalars) takes the reference path.
* NaN and +-Infinity: orjson writes ``null``, the reference refuses. Seen in the pickle bytes:
  BINFLOAT is ``G`` + the big-endian double, whose first two bytes give the exponent.
* integers: orjson takes 64 bits, the reference +-(2**53 - 1): ``OPT_STRICT_INTEGER`` is that range.
* floats (orjson 3.13): both print the shortest round-trip digits, but orjson writes ``1.0``
  for integral values and ``-0.0``, and uses exponent form outside 1e-5 <= |x| < 1e16 where
  ECMAScript uses 1e-6 <= |x| < 1e21 (with the same ``1e-7`` / ``1e+21`` shape beyond).
  So ``D.0`` becomes ``D`` (one literal regex substitution), and, only when the pickle shows
  a float with such a binary exponent, ``-0.0`` becomes ``0`` and mantissas with ``e-6`` or
  ``e+16`` .. ``e+20`` become plain decimals. Every other number token is already identical
  (checked at import over each decimal exponent; the fast path switches off if not).
* number-like text inside a string (``"ratio 1.0, up"``) must not be rewritten. The rewrites
  only touch a token right after ``:``, ``,`` or ``[`` (never the ``1e-6`` of an escaped
  ``\\u001e-6``), and the pickle holds every string verbatim: where a string (or stray bytes)
  may hold such text, the result is parsed back and must equal the input, so a touched string,
  or a NaN turned ``null``, sends the value to the reference.
* key order: orjson sorts by code point (UTF-8 bytes), JCS by UTF-16 code unit. They differ
  only when an astral character meets one in U+E000..U+FFFF at the same index of two keys, so
  output holding both kinds of character takes the reference path.
* string escaping: identical (``\\b \\f \\n \\r \\t \\" \\\\``, other C0 controls as lower-case
  ``\\u00xx``; DEL, U+2028/2029 and the rest as raw UTF-8); lone surrogates refused by both.
* depth: orjson stops at 254 levels, the reference decides deeper values; a scalar at the top
  goes straight to the reference.

Measured per decision record (32 features, ~1.35 kB) with ``python -m bench.canonical`` on a
shared 2-core AMD EPYC, Python 3.11: rfc8785 122 us, orjson sorted 3.3 us, canonical_bytes
14 us (8.7x faster than rfc8785: 28% of one core at 20,000 decisions/s, against 244%). Of the
14 us: orjson ~3, the pickle pass ~3, the ``.0`` substitution ~3, the literal scans ~1 each.
Records with -0.0, an e-6 and an e+16 float in each take 31 us (4.3x). The checks scan bytes
for literals because the alternatives cost more than all of that: a regex that tokenises the
whole output 10-20 us, a Python walk over the record (types and NaN alone) ~10 us.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NewType

import orjson
import rfc8785

from ledger.errors import LedgerError

__all__ = ["JCS_NULL", "CanonicalError", "Jcs", "Template", "canonical_bytes", "canonical_bytes_reference",
           "canonical_sha256", "jcs_int", "jcs_numbers", "jcs_rows", "jcs_str"]

Jcs = NewType("Jcs", bytes)
"""RFC 8785 bytes of one JSON value, made by this module (its functions are the only places that
assert the type, each once; ``mypy --strict`` holds every other caller to it)."""
JCS_NULL = Jcs(b"null")

_INT_LIMIT = 2**53 - 1
# The two encoders whose output is typed Jcs as it stands, once here, at no cost per call: the
# reference, and orjson on an exact str (it escapes strings exactly as RFC 8785 does, see above).
_reference_dumps: Callable[[Any], Jcs] = rfc8785.dumps  # type: ignore[assignment]
_dumps_str: Callable[[str], Jcs] = orjson.dumps  # type: ignore[assignment]
_OPTIONS = (orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER | orjson.OPT_PASSTHROUGH_SUBCLASS
            | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS)

# Over the pickle bytes. BINFLOAT is b"G" + IEEE-754 big-endian: byte 0 = sign + exponent high
# bits, byte 1 = exponent low nibble + mantissa. Every test is a superset: a stray match in other
# data only costs the slower path.
_FLOAT_GATE = re.compile(rb"G[\x7f\xff\x80>\xbeCD\xc3\xc4]")  # a cheap first look for the next one
# NaN/inf (exponent all ones); -0.0; 2**-20 <= |x| < 2**-16 (the e-6 decade); 2**53 <= |x| < 2**70
# (e+16 .. e+20). Lookaheads only, so that no match swallows the b"G" of the next float; the
# group is byte 0, which tells the kinds apart.
_ODD_FLOAT = re.compile(
    rb"G(?=(.))(?=[\x7f\xff][\xf0-\xff]|\x80\x00|[>\xbe][\xb0-\xef]|[C\xc3][\x40-\xff]|[D\xc4][\x00-\x4f])",
    re.DOTALL)
_NON_FINITE, _NEGATIVE = {b"\x7f", b"\xff"}, b"\x80"
_DOT0_TEXT = re.compile(rb"\.0[,\]}]")  # in a string, the .0 rewrite would change the string
_NEGATIVE_ZERO_TEXT = b"-0.0"  # likewise for the -0.0 rewrite
_ODD_EXPONENT = re.compile(rb"e(?:-6|\+1[6-9]|\+20)(?!\d)")  # in orjson's output; or in a string
_DIGITS = frozenset(b"0123456789")
_MANTISSA_BEFORE = re.compile(rb"[:,\[](-?)(\d(?:\.\d+)?)\Z")  # ends where an exponent starts

# Over orjson's output.
_DOT0 = re.compile(rb"\.0(?=[,\]}])")
_NEGATIVE_ZERO = re.compile(rb"-0\.0(?=[,\]}])")  # outside strings, always a whole token
_ASTRAL = re.compile(rb"[\xf0-\xf4]")
_E000_FFFF = re.compile(rb"[\xee\xef]")


class CanonicalError(LedgerError, ValueError):
    """A value that has no RFC 8785 form; ``path`` points at it (``$.features.values[3]``).

    A ``ValueError`` too, as it was before the encoder moved into the ledger."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"{reason} at {path}")
        self.reason = reason
        self.path = path


class _NotPlainJSON(TypeError):
    pass


class _ExactTypesPickler(pickle.Pickler):
    """Pickles only what the C pickler handles itself: exact builtin types, no reduction."""

    def reducer_override(self, obj: Any) -> Any:
        raise _NotPlainJSON(type(obj).__name__)


def _refuse(obj: Any) -> Any:
    raise _NotPlainJSON(type(obj).__name__)


_local = threading.local()


def _pickle_exact(obj: Any) -> bytes:
    # One pickler per thread, taken out while in use so that a re-entrant call builds its own.
    state: tuple[io.BytesIO, _ExactTypesPickler] | None = _local.__dict__.pop("state", None)
    if state is None:
        buffer = io.BytesIO()
        pickler = _ExactTypesPickler(buffer, protocol=5)
        pickler.fast = True  # no memo: every float and string is written where it stands
        state = (buffer, pickler)
    buffer, pickler = state
    buffer.seek(0)
    buffer.truncate()
    pickler.dump(obj)  # on an exception the state is dropped, not reused
    raw = buffer.getvalue()
    if len(raw) <= 1 << 20:  # keep no large buffer alive between calls
        _local.state = state
    return raw


def _in_strings(raw: bytes) -> bool:
    """Whether a string may hold a digit + one of the odd exponents (the rewrite could match it)."""
    return any(m.start() > 0 and raw[m.start() - 1] in _DIGITS for m in _ODD_EXPONENT.finditer(raw))


def _rewrite_exponents(found: list[re.Match[bytes]], out: bytes) -> bytes:
    """d.ddde-6 and d.ddde+16 .. e+20 (the ``found`` exponents) as the plain decimals of ECMAScript.

    Only whole number tokens are touched: a mantissa right after ``:``, ``,`` or ``[`` (so not
    the ``1e-6`` of an escaped ``\\u001e-6``; the caller made sure no string holds such text).
    """
    pieces: list[bytes] = []
    last = 0
    for m in found:
        token = _MANTISSA_BEFORE.search(out, max(0, m.start() - 25), m.start())
        if token is None:
            continue
        sign, digits = token.group(1), token.group(2).replace(b".", b"")
        if m.group() == b"e-6":
            number = sign + b"0.00000" + digits
        else:  # e+16 .. e+20: an integer
            number = sign + digits + b"0" * (int(m.group()[2:]) + 1 - len(digits))
        pieces += [out[last:token.start(1)], number]
        last = m.end()
    return b"".join([*pieces, out[last:]])


def _fast(obj: Any) -> bytes | None:
    """The JCS bytes of ``obj`` through orjson, or None where that is not proven identical."""
    if type(obj) is not dict and type(obj) is not list:
        return None
    try:
        raw = _pickle_exact(obj)
        out = orjson.dumps(obj, default=_refuse, option=_OPTIONS)
    except (TypeError, ValueError, RecursionError, pickle.PicklingError):
        return None  # orjson.JSONEncodeError is a TypeError
    # A byte pattern that is harmless or not (stray bytes in other data, or the real thing) is
    # settled by parsing the result back: NaN became null, and a rewritten string would differ.
    kinds: set[bytes] = set()
    unsure = False
    if _FLOAT_GATE.search(raw) is not None:
        kinds = set(_ODD_FLOAT.findall(raw))  # byte 0 of each float orjson may write unlike JCS
        unsure = not _NON_FINITE.isdisjoint(kinds)  # NaN or an infinity
        if _NEGATIVE in kinds:
            out, count = _NEGATIVE_ZERO.subn(b"0", out)
            unsure = unsure or (count > 0 and _NEGATIVE_ZERO_TEXT in raw)
    unsure = unsure or _DOT0_TEXT.search(raw) is not None
    out = _DOT0.sub(b"", out)
    if not out.isascii() and _ASTRAL.search(out) is not None and _E000_FFFF.search(out) is not None:
        return None
    if unsure:  # every number token so far parses back to the very same float
        try:
            if orjson.loads(out) != obj:
                return None
        except orjson.JSONDecodeError:
            return None
    if kinds - _NON_FINITE - {_NEGATIVE}:  # last: 1.2e+17 -> 120000000000000000 parses as an int
        found = list(_ODD_EXPONENT.finditer(out))
        if found:
            if _in_strings(raw):
                return None
            out = _rewrite_exponents(found, out)
    return out


def _fast_path_taken(obj: Any) -> bool:
    """Whether ``canonical_bytes(obj)`` is served by orjson (for tests and the benchmark)."""
    return _FAST_PATH_ON and _fast(obj) is not None


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
    if _FAST_PATH_ON:
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

    def __init__(self, fmt: bytes, order: tuple[int, ...]) -> None:
        self._fmt = fmt  # the constant bytes, '%' doubled, '%b' at each slot
        self._order = order  # the slot (index into the slots given to ``of``) of each '%b', in output order

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
            pieces += [text[last:at].replace(b"%", b"%%"), b"%b"]
            last = at + len(tokens[i])
        pieces.append(text[last:].replace(b"%", b"%%"))
        return cls(b"".join(pieces), tuple(i for _, i in found))

    def fill(self, parts: Sequence[Jcs]) -> Jcs:
        """The canonical bytes with each slot's value, ``parts`` in the order of the slots."""
        order = self._order
        return Jcs(self._fmt % tuple([parts[i] for i in order]))


def _self_test() -> bool:
    """Whether this orjson still lays numbers out as the rules above assume (checked once)."""
    floats: list[float] = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    for exp in [*range(-12, 26), *range(-323, 308, 23)]:  # every exponent where a layout switches
        for mantissa in (1.0, 1.5, 9.999999999999999, 4.35):
            x = float(f"{mantissa}e{exp}")
            floats += [x, -math.nextafter(x, math.inf), math.nextafter(x, 0.0)]
    floats += [float(i) for i in range(-100, 100, 7)] + [2.0**53, 0.1 + 0.2, 123456789.0]
    sample: dict[str, Any] = {"f": floats, "i": [0, -1, _INT_LIMIT, -_INT_LIMIT],
                              "s": "\x00\x1f\x7f\u2028\"\\/é😀"}
    return _fast(sample) == rfc8785.dumps(sample)


_FAST_PATH_ON = True
if not _self_test():  # pragma: no cover - only with an orjson whose float layout changed
    _FAST_PATH_ON = False
    warnings.warn("orjson's output no longer matches RFC 8785 as ledger.jcs assumes; "
                  "canonical_bytes uses the rfc8785 package alone", RuntimeWarning, stacklevel=1)
