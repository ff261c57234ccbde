"""ledger.jcs: byte-identical to the rfc8785 package, refusing what it refuses, and fast.

The reference is ``rfc8785.dumps``; RFC 8785's own examples (section 3.2.2, the sorting example
of 3.2.3 and Appendix B) are checked against both. The ledger seals with this encoder, and seals
its ``Jcs`` bytes (a ``Template`` filled with its pieces included) without parsing them again.
"""

from __future__ import annotations

import collections
import datetime as dt
import enum
import hashlib
import json
import math
import random
import re
import struct
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.canonical import fixed_record, typical_record
from ledger.errors import LedgerError, RecordError
from ledger.jcs import (
    _OPTIONS,
    JCS_NULL,
    CanonicalError,
    Jcs,
    Template,
    _fast_path_taken,
    canonical_bytes,
    canonical_bytes_reference,
    canonical_sha256,
    jcs_int,
    jcs_numbers,
    jcs_str,
)
from ledger.records import Record, seal, seal_many


def reference(value: Any) -> bytes | None:
    """rfc8785's bytes, or None where it refuses."""
    try:
        return rfc8785.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return None


def assert_same_as_reference(value: Any) -> None:
    expected = reference(value)
    if expected is None:
        with pytest.raises(CanonicalError):
            canonical_bytes(value)
    else:
        assert canonical_bytes(value) == expected


# --- arbitrary JSON values -------------------------------------------------------------------

ODD_FLOATS = [0.0, -0.0, 1e16, 1e21, 1e20, 1e-6, 1e-7, 5e-7, 1e-5, 9.999999999999999e-7, 2.5e-6, -3.3e-6,
              5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2,
              1e15, 123456789012345680000.0, 0.1 + 0.2, 12345.67, 3.2e17, math.nextafter(1e16, 0),
              math.nextafter(1e21, 0), math.nextafter(1e-6, 0), math.nan, math.inf, -math.inf]
ODD_TEXTS = ["", "1.0,", "a.0]", "x.0}", "3e-6", "v-0.0", "1e+16", "9e+20", "[1.0]", '"', "\\",
             "\x00\x1f\x7f", "\u2028\u2029", "\ue000", "\uffff", "\U0001f600", "\ud800", "\udfff",
             "2026.12.0", "é€"]
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from(ODD_FLOATS),
    st.integers(-(2**60), 2**60).map(float),
    st.builds(lambda m, e: m * 10.0**e, st.integers(-999, 999), st.integers(-9, 22)),
)
ints = st.one_of(st.integers(-(2**63), 2**63),
                 st.sampled_from([2**53 - 1, 2**53, -(2**53 - 1), -(2**53), 2**64, -(2**63) - 1]))
with_surrogates = st.characters(exclude_categories=())
texts = st.one_of(st.text(max_size=10), st.text(with_surrogates, max_size=6), st.sampled_from(ODD_TEXTS))
keys = st.one_of(texts, texts, texts, st.integers(0, 9))


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Outcome(enum.StrEnum):
    HOLD = "HOLD"


not_json = st.sampled_from([b"x", {1}, Decimal("1.5"), dt.datetime(2026, 1, 1), uuid.UUID(int=7), Colour.RED,
                            Level.HIGH, Outcome.HOLD, orjson.Fragment(b"[]"), 1j])
leaves = st.one_of(st.none(), st.booleans(), ints, floats, floats, texts, not_json)
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(st.lists(children, max_size=5), st.lists(children, max_size=3).map(tuple),
                               st.dictionaries(keys, children, max_size=5)),
    max_leaves=15,
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_value_matches_the_reference_or_both_refuse(value: Any) -> None:
    assert_same_as_reference({"v": value})  # inside a container, so the orjson path is tried


@settings(max_examples=200, deadline=None)
@given(leaves)
def test_top_level_scalars_match_the_reference(value: Any) -> None:
    assert_same_as_reference(value)


# --- decision records ------------------------------------------------------------------------

hexes = st.binary(min_size=32, max_size=32).map(bytes.hex)
features = st.one_of(st.none(), st.floats(0, 1), st.integers(0, 500).map(float),
                     st.integers(0, 10**11).map(lambda cents: cents / 100), st.sampled_from(ODD_FLOATS[:-3]),
                     st.floats(allow_nan=False, allow_infinity=False))
scores = st.one_of(st.floats(0, 1), st.sampled_from([0.123456789012345678, 1e-300, 5e-324, 2.3e-6, 0.0, 1.0]))
REASONS = ["amount 12345.67 EUR above 10000 for a payee first seen today", "7 payments in 24h",
           "beneficiary country on the FATF grey list", "score 0.91 above 0.85"]
rule_hits = st.fixed_dictionaries({"id": st.sampled_from(["high_amount", "velocity_24h", "grey_list"]),
                                   "reason": st.sampled_from(REASONS),
                                   "outcome": st.sampled_from(["HOLD", "REVIEW", "BLOCK"])})
decision_records = st.fixed_dictionaries({
    "trace_id": st.uuids().map(str),
    "recorded_at": st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2030, 1, 1))
                     .map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
    "principal": st.fixed_dictionaries({
        "subject": st.just("CN=scorer,O=Bank"), "sans": st.just(["URI:spiffe://bank.example/ns/aml/sa/scorer"]),
        "issuer": st.just("CN=Bank Issuing CA,O=Bank"), "fingerprint_sha256": hexes}),
    "input": st.fixed_dictionaries({"raw_sha256": hexes, "transaction_sha256": hexes}),
    "features": st.fixed_dictionaries({"values": st.lists(features, min_size=32, max_size=32),
                                       "sha256": hexes}),
    "model": st.fixed_dictionaries({"sha256": hexes, "backend": st.sampled_from(["numpy", "onnxruntime"])}),
    "score": scores,
    "rules": st.fixed_dictionaries({"module_sha256": hexes, "ruleset_id": st.just("aml_core"),
                                    "version": st.just("2026.12.0")}),
    "decision": st.sampled_from(["ALLOW", "REVIEW", "HOLD", "BLOCK"]),
    "fired": st.lists(rule_hits, max_size=3),
    "fuel": st.integers(0, 2**40),
    "latency_us": st.fixed_dictionaries({"features": st.integers(0, 10**6), "model": st.integers(0, 10**6),
                                         "rules": st.integers(0, 10**6), "ledger": st.integers(0, 10**6)}),
})

# The texts the module docstring names: a string holding one of these may send a record with an
# odd float to the reference path (the rewrite must not touch a string).
def holds_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(holds_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds_float(v) for v in value)
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decision_records)
def test_records_match_the_reference_and_only_floats_leave_the_fast_path(record: dict[str, Any]) -> None:
    assert canonical_bytes(record) == rfc8785.dumps(record)
    assert _fast_path_taken(record) is not holds_float(record)


def test_version_4_records_take_the_fast_path_and_records_with_floats_the_reference() -> None:
    rng = random.Random(8785)
    fixed = [fixed_record(rng) for _ in range(1000)]
    assert [canonical_bytes(r) for r in fixed] == [rfc8785.dumps(r) for r in fixed]
    assert all(_fast_path_taken(r) for r in fixed)
    floats = [typical_record(rng) for _ in range(200)]
    assert [canonical_bytes(r) for r in floats] == [rfc8785.dumps(r) for r in floats]
    assert not any(_fast_path_taken(r) for r in floats)


def test_the_floats_orjson_lays_out_differently_are_written_as_the_reference_does() -> None:
    record: dict[str, Any] = {"amounts": [12345.67, 1e16, 0.1 + 0.2, 100.0, -0.0, 2.5e-6, 1e21, 5e-7],
                              "score": 1e-6}
    assert not _fast_path_taken(record)
    assert canonical_bytes(record) == (b'{"amounts":[12345.67,10000000000000000,0.30000000000000004,100,0,'
                                       b'0.0000025,1e+21,5e-7],"score":0.000001}')
    assert canonical_bytes(record) == rfc8785.dumps(record)


@pytest.mark.parametrize("text", ["ratio 1.0, above", "uuid 01234e-6789", "uuid 0123be-6789", "minus -0.0",
                                  "1e+17 cents", "\x1e-6", "[\x0e+16]"])
def test_number_like_text_in_strings_is_never_rewritten(text: str) -> None:
    value: dict[str, Any] = {"note": text, "odd": [2.5e-6, 1e17, -0.0, 3.0]}
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert json.loads(canonical_bytes(value))["note"] == text


# --- RFC 8785's own examples -----------------------------------------------------------------

APPENDIX_B = [  # RFC 8785 Appendix B: IEEE-754 bits -> JSON; None where the value is refused
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
    ("7fffffffffffffff", None), ("7ff0000000000000", None),
    ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str | None) -> None:
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    wrappings: list[tuple[Callable[[float], Any], str]] = [
        (lambda x: x, "{}"), (lambda x: [x], "[{}]"), (lambda x: {"n": [1, x]}, '{{"n":[1,{}]}}')]
    for wrap, text in wrappings:
        if expected is None:
            with pytest.raises(CanonicalError, match="not a JSON number"):
                canonical_bytes(wrap(number))
            assert reference(wrap(number)) is None
        else:
            assert canonical_bytes(wrap(number)) == text.format(expected).encode()
            assert rfc8785.dumps(wrap(number)) == text.format(expected).encode()


def test_rfc8785_section_3_2_2_sample() -> None:
    document = json.loads(r'''{
        "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}''')
    expected = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
                '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}').encode()
    assert canonical_bytes(document) == expected == rfc8785.dumps(document)


def test_rfc8785_sorting_example_orders_keys_by_utf16_code_units() -> None:
    document = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
                "1": "One", "\U0001f600": "Emoji: Grinning Face",  # "\ud83d\ude00" in the RFC
                "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}
    order = ["Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign",
             "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"]
    out = canonical_bytes(document)
    assert out == rfc8785.dumps(document)
    assert [v for v in json.loads(out).values()] == order
    assert not _fast_path_taken(document)  # orjson sorts by code point: U+FB33 before the emoji


def test_every_decimal_exponent_and_its_neighbours() -> None:
    numbers = []
    for exp in range(-324, 309):
        for mantissa in ("1", "2.5", "9.999999999999999", "1.2345678901234567"):
            x = float(f"{mantissa}e{exp}")
            if 0 < x < math.inf:
                numbers += [y for y in (x, math.nextafter(x, 0), math.nextafter(x, math.inf)) if y < math.inf]
    numbers += [-x for x in numbers] + [float(i) for i in range(-2000, 2000)]
    assert canonical_bytes(numbers) == rfc8785.dumps(numbers)


def test_every_code_point_escapes_as_the_reference_does() -> None:
    below_e000 = "".join(map(chr, range(0xD800)))
    upper_bmp, astral = "".join(map(chr, range(0xE000, 0x10000))), "".join(map(chr, range(0x10000, 0x110000)))
    for text in (below_e000 + upper_bmp, below_e000 + astral):  # together, they would sort-gate (below)
        value = {"s": text, "each": list(text[:0x3000])}
        assert _fast_path_taken(value)
        assert canonical_bytes(value) == rfc8785.dumps(value)
    keys = {chr(c): c for c in [*range(0x3000), *range(0xE000, 0x10000, 7)]}
    assert _fast_path_taken(keys)
    assert canonical_bytes(keys) == rfc8785.dumps(keys)
    keys["\U0001f600"] = 0x1F600  # now astral and U+E000.. keys meet: the reference path
    assert not _fast_path_taken(keys)
    assert canonical_bytes(keys) == rfc8785.dumps(keys)


# --- refusals --------------------------------------------------------------------------------

def record_with(path: list[str | int], bad: Any) -> dict[str, Any]:
    record = typical_record(random.Random(1))
    node: Any = record
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = bad
    return record


@pytest.mark.parametrize(("path", "bad", "where", "why"), [
    (["features", "values", 3], math.nan, "$.features.values[3]", "not a JSON number"),
    (["score"], math.inf, "$.score", "not a JSON number"),
    (["features", "values", 0], -math.inf, "$.features.values[0]", "not a JSON number"),
    (["fuel"], 2**53, "$.fuel", "2\\*\\*53"),
    (["latency_us", "model"], -(2**63), "$.latency_us.model", "2\\*\\*53"),
    (["latency_us"], {1: 2}, "$.latency_us", "object key 1 is a int"),
    (["fired", 0, "reason"], "\ud800", "$.fired[0].reason", "lone surrogate"),
    (["input"], {"\udfff": "x"}, '$.input["\\udfff"]', "lone surrogate"),
    (["input", "raw sha"], {1, 2}, '$.input["raw sha"]', "set is not a JSON type"),
    (["model", "sha256"], b"\x00", "$.model.sha256", "bytes is not a JSON type"),
    (["features", "values", 31], Decimal("1.5"), "$.features.values[31]", "Decimal is not a JSON type"),
    (["recorded_at"], dt.datetime(2026, 12, 2), "$.recorded_at", "datetime is not a JSON type"),
    (["trace_id"], uuid.UUID(int=1), "$.trace_id", "UUID is not a JSON type"),
    (["decision"], Colour.RED, "$.decision", "Colour is not a JSON type"),
    (["fired"], [orjson.Fragment(b"{}")], "$.fired[0]", "Fragment is not a JSON type"),
])
def test_refusals_name_the_path(path: list[str | int], bad: Any, where: str, why: str) -> None:
    record = record_with(path, bad)
    assert reference(record) is None
    with pytest.raises(CanonicalError, match=why) as caught:
        canonical_bytes(record)
    assert caught.value.path == where
    assert str(caught.value).endswith(f"at {where}")
    with pytest.raises(CanonicalError):
        canonical_bytes_reference(record)


def test_canonical_error_is_a_ledger_error_and_still_a_value_error() -> None:
    with pytest.raises(LedgerError):
        canonical_bytes([math.nan])
    with pytest.raises(ValueError):
        canonical_bytes([math.nan])


def test_nesting_beyond_orjson_goes_to_the_reference_and_beyond_that_is_refused() -> None:
    deep: Any = 1.0
    for _ in range(300):
        deep = [deep]
    assert not _fast_path_taken(deep)
    assert canonical_bytes(deep) == b"[" * 300 + b"1" + b"]" * 300
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(CanonicalError, match="nested deeper"):
        canonical_bytes(deep)


# --- types the reference converts ------------------------------------------------------------

class CustomValue(enum.StrEnum):  # str content "abc", but .value 5: orjson would write 5
    def __new__(cls, text: str, value: int) -> CustomValue:
        member = str.__new__(cls, text)
        member._value_ = value  # type: ignore[assignment]  # the point: .value is not the str
        return member

    A = ("abc", 5)


Point = collections.namedtuple("Point", "x y")


class Tagged(dict[str, Any]):
    pass


@pytest.mark.parametrize(("value", "expected"), [
    ({"level": Level.HIGH}, b'{"level":3}'),
    ({"outcome": Outcome.HOLD}, b'{"outcome":"HOLD"}'),
    ({"custom": CustomValue.A}, b'{"custom":"abc"}'),
    ({"point": Point(1.0, 2.5)}, b'{"point":[1,2.5]}'),
    (Tagged(b=1, a=(True, None)), b'{"a":[true,null],"b":1}'),
    ({"t": (1, [2.0])}, b'{"t":[1,[2]]}'),
])
def test_enums_subclasses_and_tuples_are_written_as_the_reference_does(value: Any, expected: bytes) -> None:
    assert canonical_bytes(value) == expected == rfc8785.dumps(value)


def test_int_and_str_enum_members_leave_the_orjson_path() -> None:
    # orjson may write an Enum member's .value, the reference writes its int/str content: only
    # exact builtin types take the orjson path.
    assert orjson.dumps({"custom": CustomValue.A}, option=_OPTIONS | orjson.OPT_PASSTHROUGH_SUBCLASS,
                        default=lambda v: v.value) == b'{"custom":5}'
    assert not _fast_path_taken({"level": Level.HIGH})
    assert not _fast_path_taken({"custom": CustomValue.A})


# --- the rest of the API ---------------------------------------------------------------------

def test_canonical_sha256_is_lower_case_hex_of_the_canonical_bytes() -> None:
    digest = canonical_sha256({"b": 1, "a": [1.0, "x"]})
    assert digest == hashlib.sha256(b'{"a":[1,"x"],"b":1}').hexdigest()
    assert re.fullmatch("[0-9a-f]{64}", digest)


def test_reference_path_gives_the_same_bytes() -> None:
    record = typical_record(random.Random(2))
    assert canonical_bytes_reference(record) == canonical_bytes(record)


def test_threads_share_nothing() -> None:
    rng = random.Random(3)
    records = [typical_record(rng) for _ in range(200)]
    expected = [rfc8785.dumps(r) for r in records]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(5):
            assert list(pool.map(canonical_bytes, records)) == expected


def test_a_float_whose_bytes_look_like_an_opcode_does_not_hide_the_nan_after_it() -> None:
    # 0x3ff0000000004743 ends in b"GC": with the next float's b"G" that reads like a float tag.
    tricky = struct.unpack(">d", bytes.fromhex("3ff0000000004743"))[0]
    with pytest.raises(CanonicalError, match=r"nan is not a JSON number at \$\[1\]"):
        canonical_bytes([tricky, math.nan])
    assert canonical_bytes([tricky, 1e17]) == rfc8785.dumps([tricky, 1e17])


def test_a_string_that_the_rewrite_would_touch_sends_the_value_to_the_reference() -> None:
    value: dict[str, Any] = {"note": "ratio 1.0, above", "x": [2.0]}
    assert not _fast_path_taken(value)
    assert canonical_bytes(value) == b'{"note":"ratio 1.0, above","x":[2]}' == rfc8785.dumps(value)


def test_the_old_import_paths_give_this_module_with_a_warning() -> None:
    import importlib
    import sys

    import ledger.jcs

    for old in ("audit.canonical", "audit.decide.canonical"):
        sys.modules.pop(old, None)
        with pytest.warns(DeprecationWarning, match="ledger.jcs"):
            assert importlib.import_module(old) is ledger.jcs


# --- a value with holes: Template ----------------------------------------------------------------

SLOT_NAMES = ("a", "b", "c")
slot_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-2**53 + 1, 2**53 - 1) | st.text(max_size=8) | st.sampled_from(ODD_FLOATS[:-3]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=6), slot_values, max_size=4), st.permutations(list(SLOT_NAMES)),
       st.lists(slot_values, min_size=3, max_size=3))
def test_a_filled_template_is_the_canonical_bytes_of_the_filled_value(
        constant: dict[str, Any], keys: list[str], fills: list[Any]) -> None:
    value: dict[str, Any] = {**constant, "nested": {k: Template.marker(k) for k in keys[:2]},
                             keys[2]: [Template.marker(keys[2])]}
    template = Template.of(value, SLOT_NAMES)
    assert template is not None  # hypothesis' text holds no NUL-framed marker
    filled = {**constant, "nested": {k: fills[SLOT_NAMES.index(k)] for k in keys[:2]},
              keys[2]: [fills[SLOT_NAMES.index(keys[2])]]}
    parts = [canonical_bytes(v) for v in fills]
    assert template.fill(parts) == rfc8785.dumps(filled)


def test_a_template_refuses_a_marker_it_cannot_place_exactly_once() -> None:
    m = Template.marker
    assert Template.of({"x": m("a")}, ["a", "b"]) is None  # missing
    assert Template.of({"x": m("a"), "y": m("a")}, ["a"]) is None  # twice
    assert Template.of({"x": m("a"), "y": [m("a")]}, ["a"]) is None  # twice, once in an array
    assert Template.of({m("a"): 1}, ["a"]) is None  # a key: its sorted place would move
    with pytest.raises(CanonicalError):
        Template.of({"x": m("a"), "y": math.nan}, ["a"])


def test_marker_text_inside_another_string_is_not_a_slot() -> None:
    m = Template.marker
    value = {"x": m("a"), "note": m("a") + " too", "q": f'"{m("a")}"'}
    template = Template.of(value, ["a"])
    assert template is not None
    assert template.fill([jcs_str("filled")]) == rfc8785.dumps({**value, "x": "filled"})


def test_percent_signs_in_a_template_survive_the_fill() -> None:
    template = Template.of({"f": "%b %s %%", "x": Template.marker("a")}, ["a"])
    assert template is not None
    assert template.fill([jcs_str("%b")]) == rfc8785.dumps({"f": "%b %s %%", "x": "%b"})


def test_pieces_are_the_canonical_bytes_of_each_value() -> None:
    assert jcs_str("é\n\"") == rfc8785.dumps("é\n\"") and rfc8785.dumps(None) == JCS_NULL
    assert jcs_int(-(2**53 - 1)) == b"-9007199254740991"
    assert jcs_numbers([1.0, None, 1e-7, -0.0]) == [rfc8785.dumps(v) for v in (1.0, None, 1e-7, -0.0)]


# --- the ledger seals with it ---------------------------------------------------------------------

TS = "2026-12-02T11:22:18.123456Z"


def test_a_record_body_given_as_an_object_is_encoded_by_this_module() -> None:
    body: dict[str, Any] = {"score": 1e-7, "z": -0.0, "a": [1.0, "😀\ue000"], "level": Level.HIGH}
    _, env, _ = seal(Record("test.event", body), TS, "01890a5d-ac96-774b-bcce-b302099a8057")
    assert orjson.loads(env)["record"] == orjson.loads(rfc8785.dumps(body))
    assert b'"record":' + canonical_bytes(body) + b',"recorded_at"' in env
    with pytest.raises(RecordError, match=r"not JSON-serialisable: .*at \$\.x"):
        seal(Record("test.event", {"x": math.nan}), TS)


def test_jcs_bodies_are_sealed_as_they_are_and_the_same_as_parsed_ones() -> None:
    template = Template.of({"kind": "t", "v": Template.marker("v")}, ["v"])
    assert template is not None
    bodies = [canonical_bytes({"b": 1, "a": "x"}), template.fill([canonical_bytes([1.5, None])])]
    for body in bodies:
        fast, parsed = Record.from_jcs("test.event", body), Record.from_canonical_body("test.event", body)
        assert fast.body_from_jcs and not parsed.body_from_jcs
        tid = "01890a5d-ac96-774b-bcce-b302099a8057"
        assert seal(fast, TS, tid) == seal(parsed, TS, tid)
        (tid2, env, _), = seal_many([fast], TS)
        assert seal(parsed, TS, tid2)[1] == env


@pytest.mark.parametrize("body", [b"[1]", b'"x"', b"", b"{"])
def test_jcs_bodies_must_still_be_braced(body: bytes) -> None:
    with pytest.raises(RecordError, match="JSON object"):
        seal_many([Record.from_jcs("test.event", Jcs(body))], TS)


def test_the_unchecked_constructor_is_deprecated_and_seals_as_before() -> None:
    body = canonical_bytes({"a": 1})
    with pytest.warns(DeprecationWarning, match="from_jcs"):
        old = Record.from_canonical_body_unchecked("test.event", body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = Record.from_jcs("test.event", body)
    assert old == new
