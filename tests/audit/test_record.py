"""audit.decide.record: decision bodies spliced from a per-batch template are exactly RFC 8785.

The reference is ``rfc8785.dumps(decision_body(inputs))``; the template path must give the same
bytes for any record, and refuse (TypeError, so that the pipeline takes the whole-body path)
what it cannot vouch for.
"""

from __future__ import annotations

import dataclasses
import math
import string
from typing import Any

import numpy as np
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.decide.record import (
    _TEMPLATE_KEY,
    _TEMPLATE_KEYED_OTHERWISE,
    _TEMPLATE_PER_BATCH,
    BodyTemplate,
    DecisionColumns,
    DecisionInputs,
    RuleHit,
    decision_bodies,
    decision_body,
    jcs_fired,
    jcs_int,
    jcs_numbers,
    jcs_rows,
    jcs_str,
    slot_parts,
)
from ledger.jcs import CanonicalError, canonical_bytes

ODD_FLOATS = [0.0, -0.0, 1e16, 1e21, 1e20, 1e-6, 1e-7, 5e-7, 2.5e-6, 9.999999999999999e-7, 5e-324,
              1.7976931348623157e308, 2.0**53, 0.1 + 0.2, 100.0, 12345.67, math.nan]
numbers = st.one_of(st.floats(allow_infinity=False), st.sampled_from(ODD_FLOATS))
ODD_TEXTS = ["ratio 1.0, up", "\x1e-6", "-0.0", "\"%b%s\\", "😀\ue000", "\x00sealtrail-slot:at\x00"]
texts = st.one_of(st.text(max_size=30), st.sampled_from(ODD_TEXTS))
hexes = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
hits = st.builds(RuleHit, st.sampled_from(["HIGH_AMOUNT", "FAN_OUT"]), st.sampled_from(["HOLD", "REVIEW"]),
                 texts)
principals = st.fixed_dictionaries({"subject": texts, "sans": st.lists(texts, max_size=3), "issuer": texts,
                                    "fingerprint_sha256": hexes,
                                    "serial": st.text(string.hexdigits, max_size=8)})
ints = st.integers(0, 2**53 - 1)


def inputs(per: dict[str, Any], shared: dict[str, Any]) -> DecisionInputs:
    return DecisionInputs(**per, **shared)


shared_parts = st.fixed_dictionaries({
    "feature_schema": st.just("sealtrail.features/1"),
    "tables": st.fixed_dictionaries({"fx_rates": texts, "jurisdiction_risk": texts}),
    "model_sha256": hexes, "backend": texts, "module_sha256": hexes, "ruleset_id": texts,
    "ruleset_version": texts, "fuel": ints, "batch_size": st.integers(1, 4096)})
stages = st.fixed_dictionaries({"features": ints, "model": ints, "rules": ints})
record_parts = st.fixed_dictionaries({
    "at": st.just("2026-12-02T20:15:28.123456Z") | texts, "principal": principals, "message_format": texts,
    "message_type": texts, "reference": texts, "raw_sha256": hexes, "transaction_sha256": hexes,
    "feature_values": st.lists(numbers, min_size=32, max_size=32), "features_sha256": hexes,
    "score": numbers, "decision": st.sampled_from(["ALLOW", "REVIEW", "HOLD", "BLOCK"]),
    "fired": st.lists(hits, max_size=4).map(tuple), "fail_safe": st.none() | texts, "queue": ints})


def record(per: dict[str, Any], shared: dict[str, Any], stage: dict[str, int]) -> DecisionInputs:
    per = dict(per)
    queue = per.pop("queue")
    return inputs({**per, "latency_us": {"queue": queue, **stage}}, shared)


def template_for(shared: dict[str, Any], stage: dict[str, int]) -> BodyTemplate | None:
    dummy = {"at": "", "principal": {}, "message_format": "", "message_type": "", "reference": "",
             "raw_sha256": "", "transaction_sha256": "", "feature_values": [], "features_sha256": "",
             "score": 0.0, "decision": "", "fired": (), "fail_safe": None,
             "latency_us": {"queue": 0, **stage}}
    return BodyTemplate.for_batch(inputs(dummy, shared))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_parts, stages, st.lists(record_parts, min_size=1, max_size=5))
def test_spliced_bodies_are_the_rfc8785_bytes_of_the_whole_body(shared: dict[str, Any], stage: dict[str, int],
                                                                 records: list[dict[str, Any]]) -> None:
    template = template_for(shared, stage)
    for per in records:
        d = record(per, shared, stage)
        try:
            want: bytes | None = rfc8785.dumps(decision_body(d))
        except (ValueError, TypeError):
            want = None  # a lone surrogate: the reference refuses
        if template is None:  # a constant that holds a marker's text: only the whole-body path
            assert any("sealtrail-slot" in str(v) for v in shared.values())
            continue
        try:
            got: bytes | None = template.body(slot_parts(d))
        except TypeError:
            got = None  # the pipeline then canonicalises the whole body, which refuses the same
        assert got == want


def test_a_constant_that_holds_a_marker_is_not_spliced() -> None:
    shared = {"feature_schema": "sealtrail.features/1", "tables": {}, "model_sha256": "00" * 32,
              "backend": "\x00sealtrail-slot:at\x00", "module_sha256": "11" * 32, "ruleset_id": "aml_core",
              "ruleset_version": "1", "fuel": 1, "batch_size": 1}
    assert template_for(shared, {"features": 1, "model": 2, "rules": 3}) is None


def test_percent_signs_in_constants_survive_the_splice() -> None:
    shared = {"feature_schema": "sealtrail.features/1", "tables": {"fx_rates": "100%b"}, "model_sha256": "%s",
              "backend": "%%", "module_sha256": "11" * 32, "ruleset_id": "aml_core", "ruleset_version": "1",
              "fuel": 7, "batch_size": 1}
    stage = {"features": 1, "model": 2, "rules": 3}
    template = template_for(shared, stage)
    assert template is not None
    d = record({"at": "2026-12-02T20:15:28.123456Z", "principal": {"subject": "CN=%b"},
                "message_format": "json", "message_type": "json", "reference": "R%1", "raw_sha256": "a" * 64,
                "transaction_sha256": "b" * 64,
                "feature_values": [1.0] * 32, "features_sha256": "c" * 64, "score": 0.5, "decision": "ALLOW",
                "fired": (), "fail_safe": None, "queue": 3}, shared, stage)
    assert template.body(slot_parts(d)) == rfc8785.dumps(decision_body(d))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), numbers.filter(lambda v: not math.isnan(v))), min_size=1,
                         max_size=40), min_size=1, max_size=20))
def test_rows_and_numbers_split_from_one_call_equal_each_alone(rows: list[list[float | None]]) -> None:
    assert jcs_rows(rows) == [rfc8785.dumps(r) for r in rows]
    flat = [v for r in rows for v in r]
    assert jcs_numbers(flat) == [rfc8785.dumps(v) for v in flat]


def test_the_splice_refuses_what_it_cannot_vouch_for() -> None:
    class Text(str):
        pass

    for bad in (Text("x"), 1, None, "\ud800"):
        with pytest.raises(TypeError):
            jcs_str(bad)
    for bad_int in (True, 2**53, -(2**53), 1.0):
        with pytest.raises(TypeError):
            jcs_int(bad_int)
    assert jcs_int(2**53 - 1) == b"9007199254740991" and jcs_str("é\n\"") == rfc8785.dumps("é\n\"")


def columns(ds: list[DecisionInputs]) -> DecisionColumns:
    return DecisionColumns(
        at=[d.at for d in ds], decision=[d.decision for d in ds], fail_safe=[d.fail_safe for d in ds],
        feature_values=np.array([d.feature_values for d in ds], dtype=np.float64),
        features_sha256=[d.features_sha256 for d in ds], fired=[jcs_fired(d.fired) for d in ds],
        message_format=[d.message_format for d in ds], message_type=[d.message_type for d in ds],
        raw_sha256=[d.raw_sha256 for d in ds], reference=[d.reference for d in ds],
        transaction_sha256=[d.transaction_sha256 for d in ds],
        principal=[canonical_bytes(d.principal) for d in ds],
        score=[d.score for d in ds], queue_us=[d.latency_us["queue"] for d in ds])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_parts, stages, st.lists(record_parts, min_size=1, max_size=6))
def test_a_batch_of_bodies_from_columns_is_each_record_canonicalised_whole(
        shared: dict[str, Any], stage: dict[str, int], records: list[dict[str, Any]]) -> None:
    ds = [record(per, shared, stage) for per in records]
    try:
        want: list[bytes] | None = [rfc8785.dumps(decision_body(d)) for d in ds]
    except (ValueError, TypeError):
        want = None  # a lone surrogate somewhere: the batch is refused
    blank = record({**records[0], "principal": {}, "fired": (), "queue": 0}, shared, stage)
    try:
        got: list[bytes] | None = list(decision_bodies(blank, columns(ds), ds.__getitem__))
    except CanonicalError:
        got = None
    assert got == want


def test_values_the_splice_does_not_vouch_for_take_the_whole_body_path() -> None:
    class Text(str):
        pass

    shared = {"feature_schema": "sealtrail.features/1", "tables": {"fx_rates": "t1"},
              "model_sha256": "00" * 32, "backend": "numpy", "module_sha256": "11" * 32,
              "ruleset_id": "aml_core", "ruleset_version": "1", "fuel": 7, "batch_size": 2}
    stage = {"features": 1, "model": 2, "rules": 3}
    per = {"at": "2026-12-02T20:15:28.123456Z", "principal": {"subject": "CN=x"}, "message_format": "json",
           "message_type": "json", "reference": "R1", "raw_sha256": "a" * 64, "transaction_sha256": "b" * 64,
           "feature_values": [1.0, math.nan] * 16, "features_sha256": "c" * 64, "score": math.nan,
           "decision": "HOLD", "fired": (RuleHit("HIGH_AMOUNT", "HOLD", "amount 1.0, high"),),
           "fail_safe": "MODEL_ERROR", "queue": 3}
    ds = [record(per, shared, stage), record({**per, "reference": Text("R2")}, shared, stage)]
    bodies = decision_bodies(ds[0], columns(ds), ds.__getitem__)
    assert bodies == [rfc8785.dumps(decision_body(d)) for d in ds]
    assert bodies[1].count(b'"reference":"R2"') == 1 and bodies[0].count(b'"score":null') == 1


# What a record states per decision (a slot of the template): never part of a kept template.
PER_RECORD = ("at", "principal", "message_format", "message_type", "reference", "raw_sha256",
              "transaction_sha256", "feature_values", "features_sha256", "score", "decision", "fired",
              "fail_safe")


def test_every_field_of_a_record_is_a_slot_a_per_batch_number_or_part_of_the_template_key() -> None:
    """A field added to the record without a place here would let a template kept from an earlier
    batch state another batch's value: this fails first."""
    named = [*PER_RECORD, *_TEMPLATE_KEY, *_TEMPLATE_KEYED_OTHERWISE, *_TEMPLATE_PER_BATCH]
    assert sorted(named) == sorted(f.name for f in dataclasses.fields(DecisionInputs))
    assert len(set(named)) == len(named)


def test_a_template_kept_across_batches_states_each_batch_its_own_numbers_and_constants() -> None:
    base = {"feature_schema": "sealtrail.features/1", "tables": {"fx_rates": "t1"}, "model_sha256": "00" * 32,
            "backend": "numpy", "module_sha256": "11" * 32, "ruleset_id": "aml_core", "ruleset_version": "1",
            "fuel": 7, "batch_size": 1}
    per = {"at": "2026-12-02T20:15:28.123456Z", "principal": {"subject": "CN=x"}, "message_format": "json",
           "message_type": "json", "reference": "R1", "raw_sha256": "a" * 64, "transaction_sha256": "b" * 64,
           "feature_values": [1.0] * 32, "features_sha256": "c" * 64, "score": 0.25, "decision": "ALLOW",
           "fired": (), "fail_safe": None, "queue": 3}
    batches = [
        (base, {"features": 1, "model": 2, "rules": 3}),
        ({**base, "fuel": 9_000_000, "batch_size": 1024}, {"features": 40, "model": 0, "rules": 7}),
        ({**base, "model_sha256": "22" * 32}, {"features": 1, "model": 2, "rules": 3}),  # another model
        ({**base, "tables": {"fx_rates": "t2"}}, {"features": 1, "model": 2, "rules": 3}),  # other tables
        (base, {"features": 1, "model": 2, "rules": 3, "explain": 5}),  # another stage
        ({**base, "fuel": 2**60}, {"features": 1, "model": 2, "rules": 3}),  # past JSON's exact integers
        (base, {"features": 1, "model": 2, "rules": 3}),  # the first again
    ]
    for shared, stage in batches:
        d = record(per, shared, stage)
        if shared["fuel"] == 2**60:  # never spliced: refused as the whole body is
            with pytest.raises(CanonicalError, match="fuel"):
                template_for(shared, stage)
            continue
        template = template_for(shared, stage)
        assert template is not None
        assert template.body(slot_parts(d)) == rfc8785.dumps(decision_body(d))
