"""Mutation fuzzing of the payment-message parsers: ``parse_messages`` never raises.

Seeds are the message vectors (``tests/vectors/messages``: FIN and pacs.008), the public samples
under ``tests/vectors/public`` where present, and JSON messages (the canonical ``to_json()`` of every
seed that parses, one object each and one array of them all). Each case is a seed with one to three
mutations applied in turn: byte flips, insertions of bytes or syntax, deletions, truncation,
FIN block and field shuffles, XML element swaps, duplicates and removals, JSON tree edits and
duplicate keys, nesting thousands deep, a value of 1 MB (or just under the format's limit),
invalid UTF-8, overlong sequences, UTF-16/32 byte-order marks and re-encodings, NULs.

The property (``outcome``): a list whose items are each a ``Transaction`` whose
``canonical_bytes()`` and ``sha256`` work, or a ``MessageError`` naming a field. Anything else,
or an exception, is a crash: its input is written to ``--out`` with the mutations and traceback,
and a minimised copy beside it. The tests (``tests/inference/messages/test_fuzz_messages.py``,
``tests/api/test_fuzz_http.py``) draw their cases from the same mutations.
Run from the repository root: ``python -m bench.fuzz_messages [--cases N] [--out DIR]``.
"""

from __future__ import annotations

import sys

if not __package__ and __name__ == "__main__":  # keep the same entry point as the other benchmarks
    sys.exit("run it as a module from the repository root: python -m bench.fuzz_messages")

import argparse
import itertools
import json
import random
import re
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.machine import host_info, probe_ms, version_of
from inference.messages import MessageError, Transaction, detect_format, parse_messages

__all__ = ["EXTENSIONS", "FORMATS", "MUTATIONS", "Case", "ContractError", "Fmt", "Seed", "kinds_for",
           "minimise", "mutate", "outcome", "pool_for", "seeds"]

Kind = Literal["mt", "pacs008", "json"]
Fmt = Literal["mt", "pacs008", "iso20022", "json", "auto"]
FORMATS: tuple[Fmt, ...] = ("mt", "pacs008", "iso20022", "json", "auto")
EXTENSIONS: dict[str, Kind] = {".fin": "mt", ".xml": "pacs008", ".json": "json"}
ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
LIMITS: dict[Kind, int] = {"mt": 12_000, "pacs008": 1 << 20, "json": 1 << 20}  # a message's byte limit
MB = 1 << 20
Rng = random.Random


@dataclass(frozen=True)
class Seed:
    """A well-formed (or at least real) message to mutate: where it came from, its format, its bytes."""

    name: str
    kind: Kind
    data: bytes


def _public_kind(path: Path, data: bytes) -> Kind | None:
    if path.suffix.lower() in EXTENSIONS:
        return EXTENSIONS[path.suffix.lower()]
    try:
        kind = detect_format(data)
    except MessageError:
        return None
    # every ISO 20022 message seeds the XML group (the "auto" runs read each as its own message)
    return "mt" if kind == "mt" else "json" if kind == "json" else "pacs008"


def seeds(vectors: Path = VECTORS) -> list[Seed]:
    """Every seed, read now (public samples may be added while others work): FIN, pacs.008,
    public samples of a known format, and JSON made from each that parses."""
    out: list[Seed] = []
    for folder, ext in (("mt", "fin"), ("pacs008", "xml")):
        for p in sorted((vectors / "messages" / folder).glob(f"*.{ext}")):
            out.append(Seed(f"messages/{folder}/{p.name}", EXTENSIONS[f".{ext}"], p.read_bytes()))
    public = vectors / "public"
    if public.is_dir():
        for p in sorted(public.rglob("*")):
            skip = p.name == "expected.json" or p.name.upper().startswith("LICENSE") or p.suffix == ".md"
            if skip or not p.is_file():
                continue
            data = p.read_bytes()
            kind = _public_kind(p, data)
            if kind is not None:
                out.append(Seed(f"public/{p.relative_to(public)}", kind, data))
    docs: list[Any] = [_MINIMAL_JSON]
    for s in list(out):
        try:
            docs += [got.to_json() for got in parse_messages(s.data, s.kind) if isinstance(got, Transaction)]
        except Exception:
            continue
    for n, doc in enumerate(docs):
        out.append(Seed(f"json/{n}", "json", json.dumps(doc, ensure_ascii=n % 2 == 0).encode()))
    out.append(Seed("json/array", "json", json.dumps(docs[:8], indent=1).encode()))
    return out


_MINIMAL_JSON: dict[str, Any] = {
    "reference": "FUZZ-1", "value_date": "2025-06-02", "amount": "1814.28", "currency": "EUR",
    "originator": {"name": "Müller GmbH", "account": "DE89370400440532013000", "country": "DE",
                   "address_lines": ["Industriestraße 7", "70565 Stuttgart"]},
    "beneficiary": {"name": "Atelier Lefèvre", "account": "FR1420041010050500013M02606"},
}


# --- mutations: (data, rng, kind) -> (data, what was done) ----------------------------------------

Mutation = Callable[[bytes, Rng, Kind], tuple[bytes, str]]

_TOKENS: tuple[bytes, ...] = (
    b"{", b"}", b"{1:", b"{2:", b"{3:{121:", b"{4:\r\n", b"-}", b"\r\n-}", b"{5:{CHK:", b"{S:", b":20:",
    b":32A:", b":50K:", b"\r\n:59:", b"\r\n", b"\n", b"\r", b"$", b"\x01", b"\x03", b",", b",00",
    b"<", b">", b"</", b"/>", b"<a>", b"</a>", b"<Document>", b"<CdtTrfTxInf>", b"&amp;", b"&#0;",
    b"&#xD800;", b"&#x1F;", b"&lt;", b"&unknown;", b"<![CDATA[", b"]]>", b"<!--", b"-->",
    b"<?xml version='1.0' encoding='UTF-16'?>", b"<!DOCTYPE d [<!ENTITY e 'x'>]>", b'xmlns="urn:x"',
    b'"', b"\\", b"\\u0000", b"\\ud800", b"\\udc00\\ud800", b"[", b"]", b":", b"null", b"true", b"1e999",
    b"-0", b"NaN", b"Infinity", b"99999999999999999999999999", b"0.0000000000001", b"\x00", b"\xff",
    b"\xc0\x80", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\t", b" ", b"\x7f", b"\xc2\x85", b"\xe2\x80\xae",
)
_BAD_UTF8: tuple[bytes, ...] = (
    b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",
    b"\xf8\x88\x80\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82", b"\xf0\x9f\x98", b"\x00", b"\xef\xbf\xbe", b"\xef\xbf\xbf", b"\xc2",
)
_BOMS: tuple[bytes, ...] = (b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\xff\xfe\x00\x00",
                            b"\x00\x00\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf")
_OVERLONG = {b"<": b"\xc0\xbc", b">": b"\xc0\xbe", b"{": b"\xc1\xbb", b"}": b"\xc1\xbd", b":": b"\xc0\xba",
             b'"': b"\xc0\xa2", b"/": b"\xe0\x80\xaf", b"\n": b"\xc0\x8a"}
_FIN_TAGS = (b":20:", b":21:", b":23B:", b":32A:", b":33B:", b":36:", b":50A:", b":50F:", b":50K:", b":52A:",
             b":57A:", b":59:", b":59F:", b":70:", b":71A:", b":71F:", b":72:", b":77B:", b":99Z:", b":3:")
_XML_TAGS = (b"Document", b"FIToFICstmrCdtTrf", b"GrpHdr", b"CdtTrfTxInf", b"IntrBkSttlmAmt", b"Dbtr",
             b"Cdtr", b"Nm", b"IBAN", b"BICFI", b"PstlAdr", b"Ctry", b"AdrLine", b"AppHdr", b"MsgDefIdr",
             b"x:Nm")
_JSON_VALUES: tuple[Any, ...] = (
    None, 0, -1, 1.5, 1e308, 10**30, -(10**40), "", "x", " ", "0", "1,5", "-1.00", "1e3", "NaN", "2025-02-30",
    "99999-01-01", "\x00", "\ud800", "\u202e", "a\nb", "\x85", "é" * 300, True, False, [], {}, [None],
    {"": ""},
    {"scheme": "BIC", "value": "X"}, [{"role": "sender"}], "DE00000000000000000000", "XAU", "eur",
)


def _at(rng: Rng, data: bytes) -> int:
    return rng.randint(0, len(data))


def flip(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """One to eight bits flipped at random places."""
    if not data:
        return b"\x00", "flip (empty: a NUL)"
    b = bytearray(data)
    at = []
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        at.append(i)
    return bytes(b), f"flip bits at {at}"


def insert(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """Syntax of any format, or random bytes, once or several times, at a random place."""
    i = _at(rng, data)
    if rng.random() < 0.7:
        piece = rng.choice(_TOKENS) * rng.choice((1, 1, 1, 2, 3, 17))
    else:
        piece = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return data[:i] + piece + data[i:], f"insert {piece[:40]!r} at {i}"


def delete(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """A run of 1-64 bytes removed."""
    if not data:
        return data, "delete (empty)"
    i = rng.randrange(len(data))
    n = rng.randint(1, min(64, len(data) - i))
    return data[:i] + data[i + n:], f"delete {n} at {i}"


def truncate(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """The first n bytes, any n (a split multi-byte character included)."""
    i = rng.randint(0, max(0, len(data) - 1))
    return data[:i], f"truncate to {i}"


def _on_spans(data: bytes, spans: Sequence[tuple[int, int]], rng: Rng, what: str) -> tuple[bytes, str]:
    """Swap two spans, duplicate one, drop one or move one; spans may nest (swap then duplicates)."""
    op = rng.choice(("swap", "dup", "drop", "move", "dup-many"))
    a0, a1 = spans[rng.randrange(len(spans))]
    b0, b1 = spans[rng.randrange(len(spans))]
    if op == "swap" and (a1 <= b0 or b1 <= a0) and (a0, a1) != (b0, b1):
        (a0, a1), (b0, b1) = sorted(((a0, a1), (b0, b1)))
        return data[:a0] + data[b0:b1] + data[a1:b0] + data[a0:a1] + data[b1:], f"swap {what} {a0} and {b0}"
    if op == "drop":
        return data[:a0] + data[a1:], f"drop {what} at {a0}"
    if op == "move":
        piece, rest = data[a0:a1], data[:a0] + data[a1:]
        i = rng.randint(0, len(rest))
        return rest[:i] + piece + rest[i:], f"move {what} at {a0} to {i}"
    times = rng.choice((50, 500)) if op == "dup-many" else 1
    return data[:a1] + data[a0:a1] * times + data[a1:], f"duplicate {what} at {a0} x{times}"


def _fin_blocks(data: bytes) -> list[tuple[int, int]]:
    """Every ``{...}`` span, balanced, at any depth (blocks and block 3's fields)."""
    spans, stack = [], []
    for m in _BRACE.finditer(data):
        if m.group() == b"{":
            stack.append(m.start())
        elif stack:
            spans.append((stack.pop(), m.end()))
    return spans


_BRACE = re.compile(rb"[{}]")


_FIELD = re.compile(rb"(?m)^:[0-9]{2}[A-Z]?:")


def _fin_fields(data: bytes) -> list[tuple[int, int]]:
    starts = [m.start() for m in _FIELD.finditer(data)]
    spans = []
    for k, s in enumerate(starts):
        end = data.find(b"-}", s)
        end = len(data) if end < 0 else end
        nxt = starts[k + 1] if k + 1 < len(starts) else end
        spans.append((s, min(nxt, end)))
    return spans


def fin_blocks(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """A FIN block ``{n:...}`` (or a field of block 3 or 5) swapped, duplicated, dropped or moved."""
    spans = _fin_blocks(data)
    return _on_spans(data, spans, rng, "block") if spans else insert(data, rng, kind)


def fin_fields(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """A ``:NNa:`` field of block 4 swapped, duplicated, dropped, moved, or its tag renamed."""
    spans = _fin_fields(data)
    if not spans:
        return insert(data, rng, kind)
    if rng.random() < 0.25:
        s, _ = spans[rng.randrange(len(spans))]
        m = _FIELD.match(data, s)
        assert m is not None
        tag = rng.choice(_FIN_TAGS)
        return data[:s] + tag + data[m.end():], f"retag field at {s} as {tag.decode()}"
    return _on_spans(data, spans, rng, "field")


_TAG = re.compile(rb"<(/?)([A-Za-z_][\w.:\-]*)(?:\s[^<>]*?)?(/?)>")


def _xml_elements(data: bytes) -> list[tuple[int, int]]:
    spans, stack = [], []
    for m in itertools.islice(_TAG.finditer(data), _MAX_TAGS):
        close, name, empty = m.group(1, 2, 3)
        if empty:
            spans.append(m.span())
        elif not close:
            stack.append((name, m.start()))
        elif stack and stack[-1][0] == name:
            spans.append((stack.pop()[1], m.end()))
    return spans


_MAX_TAGS = 4_000  # the elements of a message, and then some of a mutation's deep nesting


def xml_elements(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """An element swapped, duplicated, dropped, moved, or renamed (one tag or both)."""
    spans = _xml_elements(data)
    if not spans:
        return insert(data, rng, kind)
    if rng.random() < 0.25:
        tags = list(_TAG.finditer(data))
        m = tags[rng.randrange(len(tags))]
        name = rng.choice(_XML_TAGS)
        return data[:m.start(2)] + name + data[m.end(2):], f"rename tag at {m.start()} to {name.decode()}"
    return _on_spans(data, spans, rng, "element")


class _Dup:
    """A marker: this object is written with ``key`` twice."""

    def __init__(self, obj: dict[str, Any], key: str, other: Any) -> None:
        self.obj, self.key, self.other = obj, key, other


def _dump(node: Any) -> str:
    if isinstance(node, _Dup):
        body = json.dumps(node.obj, ensure_ascii=False)
        extra = f"{json.dumps(node.key)}: {json.dumps(node.other)}"
        return body[:-1] + (", " if node.obj else "") + extra + "}"
    if isinstance(node, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dump(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(map(_dump, node)) + "]"
    return json.dumps(node, ensure_ascii=False)


def _json_slots(node: Any, path: str = "$") -> Iterator[tuple[Any, Any, str]]:
    """(container, key or index, path) of every value under ``node``."""
    items: Iterator[tuple[Any, Any]]
    if isinstance(node, dict):
        items = iter(list(node.items()))
    elif isinstance(node, list):
        items = iter(list(enumerate(node)))
    else:
        return
    for k, v in items:
        yield node, k, f"{path}.{k}"
        yield from _json_slots(v, f"{path}.{k}")


def _json_tree(data: bytes) -> Any:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict | list) else None


def json_tree(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """A key dropped or given twice, two values swapped, a value of another type, a value wrapped."""
    try:
        return _json_tree_edit(data, rng)
    except RecursionError:  # a document nested deeper than this edit walks
        return insert(data, rng, kind)


def _json_tree_edit(data: bytes, rng: Rng) -> tuple[bytes, str]:
    doc = _json_tree(data)
    slots = list(_json_slots(doc)) if doc is not None else []
    if not slots:
        return insert(data, rng, "json")
    holder, key, path = slots[rng.randrange(len(slots))]
    op = rng.choice(("drop", "dup-key", "swap", "retype", "retype", "wrap"))
    if op == "drop":
        del holder[key]
    elif op == "dup-key" and isinstance(holder, dict):
        parent = next(((h, k) for h, k, _ in slots if h[k] is holder), None)
        dup = _Dup(holder, key, rng.choice(_JSON_VALUES))
        if parent is None:
            return _dump(dup).encode("utf-8", "surrogatepass"), f"duplicate key {path}"
        parent[0][parent[1]] = dup
        return _dump(doc).encode("utf-8", "surrogatepass"), f"duplicate key {path}"
    elif op == "swap":
        h2, k2, p2 = slots[rng.randrange(len(slots))]
        if h2 is not holder or k2 != key:
            a, b = holder[key], h2[k2]
            if a is h2 or b is holder:  # one holds the other: swapping would make a cycle
                return _dump(doc).encode("utf-8", "surrogatepass"), "swap (nested; none)"
            holder[key], h2[k2] = b, a
            path = f"{path} <-> {p2}"
    elif op == "wrap":
        holder[key] = rng.choice(([holder[key]], {"value": holder[key]}))
    else:
        holder[key] = rng.choice(_JSON_VALUES)
    return _dump(doc).encode("utf-8", "surrogatepass"), f"json {op} {path}"


def deep(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """Nesting thousands deep (XML elements, JSON arrays or objects, FIN braces), closed or not."""
    n = rng.choice((500, 1_000, 2_000, 5_000, 20_000))
    closed = rng.random() < 0.7
    if kind == "pacs008":
        opens, closes = b"<a>" * n, b"</a>" * n
    elif kind == "json":
        obj = rng.random() < 0.5
        opens, closes = (b'{"a":' * n, b"}" * n) if obj else (b"[" * n, b"]" * n)
        opens += b"1" if obj else b""
    else:
        opens, closes = b"{3:" * n, b"}" * n
    nest, what = opens + (closes if closed else b""), f"deep {n} {'closed' if closed else 'open'}"
    find = {"pacs008": _xml_elements, "json": _json_value_spans, "mt": _fin_blocks}[kind]
    spans = find(data) if rng.random() < 0.6 else []
    if spans:  # in place of a value
        s, e = spans[rng.randrange(len(spans))]
        if kind == "pacs008":  # inside the element, around its content
            inner = data.find(b">", s) + 1
            e = data.rfind(b"<", inner, e)
            s = inner if 0 < inner <= e else s
            e = max(e, s)
        return data[:s] + nest + data[e:], f"{what} at {s}"
    if rng.random() < 0.5:
        return opens + data + (closes if closed else b""), f"{what} around"
    i = _at(rng, data)
    return data[:i] + nest + data[i:], f"{what} at {i}"


_JSON_VALUE = re.compile(rb':\s*("[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9][0-9.eE+-]*|null|true|false)')


def _json_value_spans(data: bytes) -> list[tuple[int, int]]:
    return [(m.start(1), m.end(1)) for m in _JSON_VALUE.finditer(data)]


_TEXT = re.compile(rb">([^<>]+)<")
_ATTR = re.compile(rb'=\s*"([^"]*)"')


def huge(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """A value of 1 MB, of 10 kB, or just under the format's limit, in a field, element, string or number."""
    size = rng.choice((MB, 10_000, max(1, LIMITS[kind] - len(data) - rng.randint(0, 64))))
    fill = rng.choice((b"A", b"9", b"\xc3\xa9", b" ", b"\\u00e9", b"/"))
    value = (fill * (size // len(fill) + 1))[:size]
    spans: list[tuple[int, int]]
    if kind == "mt":
        spans = [(m.end(), m.end()) for m in _FIELD.finditer(data)]
    elif kind == "pacs008":
        spans = [(m.start(1), m.end(1)) for m in (*_TEXT.finditer(data), *_ATTR.finditer(data))]
    else:
        spans = [(s + 1, e - 1) if data[s:s + 1] == b'"' else (s, e) for s, e in _json_value_spans(data)]
    if not spans:
        i = _at(rng, data)
        return data[:i] + value + data[i:], f"huge {size:,} B of {fill!r} at {i}"
    s, e = spans[rng.randrange(len(spans))]
    return data[:s] + value + data[e:], f"huge {size:,} B of {fill!r} as the value at {s}"


def encoding(data: bytes, rng: Rng, kind: Kind) -> tuple[bytes, str]:
    """Invalid UTF-8, an overlong structural character, a byte-order mark, a NUL, another encoding."""
    op = rng.choice(("bad", "bad", "overlong", "bom", "nul", "reencode"))
    if op == "bad":
        i, piece = _at(rng, data), rng.choice(_BAD_UTF8)
        return data[:i] + piece + data[i:], f"invalid UTF-8 {piece!r} at {i}"
    if op == "overlong":
        found = [(k, v) for k, v in _OVERLONG.items() if k in data]
        if found:
            k, v = rng.choice(found)
            where = [m.start() for m in re.finditer(re.escape(k), data)]
            i = rng.choice(where)
            return data[:i] + v + data[i + 1:], f"overlong {v!r} for {k!r} at {i}"
        op = "nul"
    if op == "bom":
        bom = rng.choice(_BOMS)
        return bom + data, f"BOM {bom!r}"
    if op == "nul":
        i = _at(rng, data)
        return data[:i] + b"\x00" + data[i:], f"NUL at {i}"
    codec = rng.choice(("utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp500", "utf-7"))
    text = data.decode("utf-8", "replace")
    return text.encode(codec, "replace"), f"re-encoded as {codec}"


MUTATIONS: dict[str, Mutation] = {
    "flip": flip, "insert": insert, "delete": delete, "truncate": truncate, "fin_blocks": fin_blocks,
    "fin_fields": fin_fields, "xml_elements": xml_elements, "json_tree": json_tree, "deep": deep,
    "huge": huge, "encoding": encoding,
}
STRUCTURAL: dict[Kind, frozenset[str]] = {  # mutations that only make sense on their own format
    "mt": frozenset({"fin_blocks", "fin_fields"}), "pacs008": frozenset({"xml_elements"}),
    "json": frozenset({"json_tree"}),
}


def kinds_for(kind: Kind) -> list[str]:
    """The mutations that apply to a seed of ``kind`` (others' structural ones left out)."""
    return _KINDS_FOR[kind]


_KINDS_FOR: dict[Kind, list[str]] = {
    kind: [m for m in MUTATIONS if not any(m in v for k, v in STRUCTURAL.items() if k != kind)]
    for kind in STRUCTURAL}


@dataclass(frozen=True)
class Case:
    """A mutated seed: the bytes and how they were made."""

    seed: Seed
    data: bytes
    steps: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        return f"{self.seed.name}: " + "; ".join(self.steps)


def mutate(seed: Seed, names: Sequence[str], rng: Rng) -> Case:
    """``seed`` with the mutations ``names`` applied in turn, each drawing from ``rng``."""
    data, steps = seed.data, []
    for name in names:
        data, what = MUTATIONS[name](data, rng, seed.kind)
        steps.append(f"{name}: {what}")
    return Case(seed, data, tuple(steps))


# --- the property -----------------------------------------------------------------------------------

class ContractError(AssertionError):
    """``parse_messages`` returned something its contract does not allow."""


def outcome(data: bytes, fmt: Fmt) -> Literal["decided", "refused"]:
    """'decided' (every message a Transaction), 'refused' (at least one MessageError naming a field),
    or ``ContractError``; an exception from the parser propagates."""
    got = parse_messages(data, fmt)
    if not isinstance(got, list):
        raise ContractError(f"returned {type(got).__name__}, not a list")
    refused = not got  # an empty list decides nothing
    for k, item in enumerate(got):
        if isinstance(item, Transaction):
            canonical, digest = item.canonical_bytes(), item.sha256
            if not isinstance(canonical, bytes) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ContractError(f"item {k}: canonical_bytes()/sha256 gave {canonical[:40]!r}/{digest!r}")
        elif isinstance(item, MessageError):
            if not isinstance(item.field, str) or not item.field:
                raise ContractError(f"item {k}: MessageError without a field: {item!r} ({item.field=})")
            refused = True
        else:
            raise ContractError(f"item {k} is a {type(item).__name__}: {item!r:.200}")
    return "refused" if refused else "decided"


# --- the benchmark ----------------------------------------------------------------------------------

def _signature(exc: BaseException) -> str:
    """The exception's type and the innermost frame in the project: one per bug."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/inference/" in f.filename or "/bench/" in f.filename] or frames
    last = ours[-1] if ours else None
    where = f"{Path(last.filename).name}:{last.lineno}" if last else "?"
    return f"{type(exc).__name__} at {where}"


def crash_of(data: bytes, fmt: Fmt) -> BaseException | None:
    """The exception ``outcome`` raises on ``data``, or None."""
    try:
        outcome(data, fmt)
    except (Exception, RecursionError) as exc:
        return exc
    return None


def minimise(data: bytes, fmt: Fmt, budget_s: float = 20.0) -> bytes:
    """A smaller input with the same crash signature: chunks removed while it persists."""
    first = crash_of(data, fmt)
    if first is None:
        return data
    want, deadline = _signature(first), time.monotonic() + budget_s
    chunk = max(1, len(data) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        i, shrunk = 0, False
        while i < len(data) and time.monotonic() < deadline:
            trial = data[:i] + data[i + chunk:]
            exc = crash_of(trial, fmt)
            if exc is not None and _signature(exc) == want:
                data, shrunk = trial, True
            else:
                i += chunk
        if not shrunk:
            chunk //= 2
    return data


@dataclass
class Tally:
    """One format's run: outcomes, time, the slowest case and the crashes."""

    fmt: Fmt
    cases: int = 0
    decided: int = 0
    refused: int = 0
    crashes: int = 0
    seconds: float = 0.0
    slowest_s: float = 0.0
    slowest: str = ""
    slowest_bytes: int = 0
    signatures: dict[str, int] = field(default_factory=dict)


def _write_crash(out: Path, tally: Tally, case: Case, exc: BaseException, do_minimise: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ext = {"mt": "fin", "pacs008": "xml", "json": "json"}[case.seed.kind]
    stem = f"{tally.fmt}-{tally.crashes:04d}"
    (out / f"{stem}.{ext}").write_bytes(case.data)
    tb = "".join(traceback.format_exception(exc))
    small = minimise(case.data, tally.fmt) if do_minimise else case.data
    (out / f"{stem}.min.{ext}").write_bytes(small)
    (out / f"{stem}.txt").write_text(f"format: {tally.fmt}\nmutations: {case.describe()}\n"
                                     f"signature: {_signature(exc)}\nbytes: {len(case.data):,} "
                                     f"(minimised {len(small):,})\n\n{tb}", encoding="utf-8")


def _weights(n: int) -> int:
    return 1 if n < 60 else 2 if n < 90 else 3


def run(fmt: Fmt, pool: Sequence[Seed], cases: int, rng: Rng, out: Path, do_minimise: bool) -> Tally:
    """``cases`` mutated seeds through ``outcome``, timed one by one."""
    tally = Tally(fmt)
    clock = time.perf_counter
    for _ in range(cases):
        seed = pool[rng.randrange(len(pool))]
        names = kinds_for(seed.kind)
        case = mutate(seed, [rng.choice(names) for _ in range(_weights(rng.randrange(100)))], rng)
        t0 = clock()
        try:
            result = outcome(case.data, fmt)
        except (Exception, RecursionError) as exc:
            dt = clock() - t0
            tally.crashes += 1
            sig = _signature(exc)
            tally.signatures[sig] = tally.signatures.get(sig, 0) + 1
            if tally.signatures[sig] <= 3:  # three inputs per distinct crash are plenty
                _write_crash(out, tally, case, exc, do_minimise and tally.signatures[sig] == 1)
        else:
            dt = clock() - t0
            if result == "decided":
                tally.decided += 1
            else:
                tally.refused += 1
        tally.cases += 1
        tally.seconds += dt
        if dt > tally.slowest_s:
            tally.slowest_s, tally.slowest, tally.slowest_bytes = dt, case.describe(), len(case.data)
    return tally


def baseline(fmt: Fmt, pool: Sequence[Seed], seconds: float = 0.5) -> float:
    """Unmutated seeds per second through the same property: what the mutated rate compares with."""
    clock, done, t0 = time.perf_counter, 0, time.perf_counter()
    while clock() - t0 < seconds:
        for s in pool:
            crash_of(s.data, fmt)
        done += len(pool)
    return done / (clock() - t0)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench.fuzz_messages", description=__doc__)
    ap.add_argument("--cases", type=int, default=200_000, help="cases in all, shared by the formats")
    ap.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated, of {','.join(FORMATS)}")
    ap.add_argument("--seed", type=int, default=1, help="the random seed (a run is reproducible)")
    ap.add_argument("--out", type=Path, default=Path("fuzz-crashes"), help="where crashing inputs go")
    ap.add_argument("--no-minimise", action="store_true", help="write crashing inputs as found only")
    return ap.parse_args(argv)


def pool_for(fmt: Fmt, every: Sequence[Seed]) -> list[Seed]:
    """The seeds a format is fuzzed with: its own, every XML seed for 'iso20022' (pacs.008, pacs.009,
    pacs.004 and pain.001 samples, so each ISO 20022 parser meets its own messages), all for 'auto'."""
    if fmt == "auto":
        return list(every)
    kind = "pacs008" if fmt == "iso20022" else fmt
    return [s for s in every if s.kind == kind]


def main(argv: Sequence[str] | None = None) -> int:
    """Fuzz every format, print the machine, the figures per format and the crashes; 1 on any crash."""
    args = parse_args(argv)
    fmts: list[Fmt] = [f for f in FORMATS if f in args.formats.split(",")]
    every = seeds()
    host = host_info()
    print(f"CPU:        {host['cpu']} ({host['cores']} cores; one process, one thread)")
    print(f"RAM:        {host['ram_gib']} GiB")
    print(f"OS:         {host['os']}")
    print(f"Python:     {host['python']}; hypothesis {version_of('hypothesis')}, defusedxml "
          f"{version_of('defusedxml')}, pydantic {version_of('pydantic')}")
    by_kind = {k: sum(s.kind == k for s in every) for k in ("mt", "pacs008", "json")}
    public = sum(s.name.startswith("public/") for s in every)
    print(f"Seeds:      {len(every)} ({', '.join(f'{k} {v}' for k, v in by_kind.items())}; {public} public)")
    per = max(1, args.cases // len(fmts))
    print(f"Cases:      {per:,} per format, 1-3 mutations each of {', '.join(MUTATIONS)}; seed {args.seed}\n")
    probe_before = probe_ms()
    tallies = []
    head = (f"{'format':<8} {'cases':>8} {'decided':>8} {'refused':>8} {'crash':>6} {'cases/s':>8} "
            f"{'seeds/s':>8} {'ratio':>6}  slowest case")
    print(head + "\n" + "-" * len(head))
    for fmt in fmts:
        pool = pool_for(fmt, every)
        base = baseline(fmt, pool)
        t = run(fmt, pool, per, random.Random(f"{args.seed}-{fmt}"), args.out, not args.no_minimise)
        tallies.append(t)
        rate = t.cases / t.seconds if t.seconds else 0.0
        print(f"{fmt:<8} {t.cases:>8,} {t.decided:>8,} {t.refused:>8,} {t.crashes:>6,} {rate:>8,.0f} "
              f"{base:>8,.0f} {rate / base:>5.2f}x  {t.slowest_s * 1e3:,.1f} ms, {t.slowest_bytes:,} B: "
              f"{t.slowest}", flush=True)
    probe_after = probe_ms()
    print("\ncases/s: mutated cases through parse_messages and the property check, parsing time only; "
          "seeds/s: the unmutated seeds, same check (ratio = cases/s over seeds/s)")
    print(f"CPU probe:  {probe_before:.1f} ms before, {probe_after:.1f} ms after (a fixed pure-Python loop)")
    crashes = sum(t.crashes for t in tallies)
    for t in tallies:
        for sig, n in sorted(t.signatures.items()):
            print(f"CRASH {t.fmt}: {sig} x{n}")
    if crashes:
        print(f"\n{crashes:,} crashing case(s); inputs, minimised copies and tracebacks in {args.out}/")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
