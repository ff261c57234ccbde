"""Version 3 decision records: ``explanation`` spliced into a batch's bodies is exactly RFC 8785,
bodies state the version their fields make, and a record's explanation reads back or is refused
with the reason named."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.decide.account_risk import AccountRisk, AccountRiskPolicy, SideRisk
from audit.decide.explanation import (
    EXPLANATION_METHOD,
    NOT_EXPLAINED,
    Explanation,
    ExplanationError,
    is_explained,
)
from audit.decide.fixed_point import quantise_rows, quantise_scores
from audit.decide.record import (
    DECISION_SCHEMA_V1,
    DECISION_SCHEMA_V2,
    DECISION_SCHEMA_V3,
    DECISION_SCHEMA_V4,
    decision_bodies,
    decision_body,
    features_from_body,
)
from inference.explain import Reason
from inference.schema import feature_digits
from tests.audit.test_record import columns, record, record_parts, shared_parts, stages, texts

RISK = AccountRisk(AccountRiskPolicy(), "ab" * 8, 450, SideRisk("cd" * 16, 0, 450), None)
codes = st.sampled_from(["TEMPORAL_CYCLE", "FAN_IN", "AMOUNT_VS_HISTORY"])
reasons = st.builds(Reason, codes, st.integers(20, 1000), texts)
explanations = st.one_of(st.just(NOT_EXPLAINED),
                         st.lists(reasons, max_size=3).map(lambda rs: Explanation(tuple(rs))))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_parts, stages, st.lists(st.tuples(record_parts, explanations), min_size=1, max_size=6))
def test_version_3_bodies_from_columns_are_each_record_canonicalised_whole(
        shared: dict[str, Any], stage: dict[str, int],
        records: list[tuple[dict[str, Any], Explanation]]) -> None:
    ds = [replace(record(per, shared, stage), account_risk=RISK, explanation=why) for per, why in records]
    try:
        want: list[bytes] | None = [rfc8785.dumps(decision_body(d)) for d in ds]
    except (ValueError, TypeError):
        want = None  # a lone surrogate somewhere: the batch is refused
    cols = replace(columns(ds), account_risk=[RISK] * len(ds), explanation=[d.explanation for d in ds])
    try:
        got: list[bytes] | None = list(decision_bodies(ds[0], cols, ds.__getitem__))
    except ValueError:
        got = None
    assert got == want
    if want is not None:
        assert all(b'"schema":"sealtrail.decision/3"' in body for body in want)


def _body(**fields: Any) -> dict[str, Any]:
    per = {"at": "2026-12-04T10:00:00.000000Z", "principal": {"subject": "CN=x"}, "message_format": "json",
           "message_type": "json", "reference": "R1", "raw_sha256": "a" * 64, "transaction_sha256": "b" * 64,
           "feature_values": [1.0] * 32, "features_sha256": "c" * 64, "score": 0.97, "decision": "HOLD",
           "fired": (), "fail_safe": None, "queue": 3}
    shared = {"feature_schema": "sealtrail.features/1", "tables": {}, "model_sha256": "0" * 64,
              "backend": "numpy", "module_sha256": "1" * 64, "ruleset_id": "aml_core", "ruleset_version": "1",
              "fuel": 7, "batch_size": 1}
    return decision_body(replace(record(per, shared, {"features": 1, "model": 2, "rules": 3}), **fields))


def test_each_version_is_stated_by_the_fields_its_body_holds() -> None:
    why = Explanation((Reason("TEMPORAL_CYCLE", 412, "money returned to the sender in 3 hops"),))
    assert _body()["schema"] == DECISION_SCHEMA_V1 and "explanation" not in _body()
    assert _body(account_risk=RISK)["schema"] == DECISION_SCHEMA_V2
    v3 = _body(account_risk=RISK, explanation=why)
    assert v3["schema"] == DECISION_SCHEMA_V3 == "sealtrail.decision/3"
    text = "money returned to the sender in 3 hops"
    assert v3["explanation"] == {"method": EXPLANATION_METHOD, "reasons": [{
        "code": "TEMPORAL_CYCLE", "contribution_milli": 412, "text": text}]}
    assert _body(account_risk=RISK, explanation=NOT_EXPLAINED)["explanation"] is None
    v4 = _body(account_risk=RISK, explanation=why, fixed_point=True)
    assert v4["schema"] == DECISION_SCHEMA_V4 == "sealtrail.decision/4"  # no screening stated
    digits = [2, 6, *[0] * 12, 2, 2, 2, 0, 0, 0, 2, 2, 2, *[0] * 9]  # amounts in cents, the log in millionths
    assert (v4["score_ppm"], v4["features"]["digits"]) == (970_000, digits)
    assert v4["features"]["scaled"] == [10**d for d in digits]  # 1.0 in each column's units
    assert "score" not in v4 and "values" not in v4["features"] and v4["explanation"] == v3["explanation"]
    bare = _body(account_risk=RISK, fixed_point=True)  # a model that cannot be attributed
    assert bare["schema"] == DECISION_SCHEMA_V4 and "explanation" not in bare
    with pytest.raises(ValueError, match="account risk"):
        _body(fixed_point=True)
    with pytest.raises(ValueError, match="account risk"):
        _body(explanation=why)  # version 3 is version 2 and an explanation


def test_an_explanation_reads_back_to_what_was_recorded() -> None:
    why = Explanation((Reason("FAN_IN", 35, "the beneficiary was paid by 40 different accounts"),
                       Reason("PASS_THROUGH", 21, "the sender paid on 95% of what it received")))
    assert Explanation.from_json(why.to_json()) == why
    assert Explanation.from_json(None) is NOT_EXPLAINED


@pytest.mark.parametrize(("recorded", "named"), [
    ({"method": "shap/1", "reasons": []}, "method"),
    ({"method": EXPLANATION_METHOD}, "method and reasons"),
    ({"method": EXPLANATION_METHOD, "reasons": [{"code": "FAN_IN", "contribution_milli": 1.5, "text": "x"}]},
     "integer contribution_milli"),
    ({"method": EXPLANATION_METHOD, "reasons": [{"code": "fan in", "contribution_milli": 30, "text": "x"}]},
     "a code"),
    ({"method": EXPLANATION_METHOD,
      "reasons": [{"code": "FAN_IN", "contribution_milli": 30, "text": "x"}] * 4},
     "at most 3"),
    ([], "neither null nor an object"),
])
def test_a_malformed_explanation_is_refused_naming_what_is_wrong(recorded: object, named: str) -> None:
    with pytest.raises(ExplanationError, match=named):
        Explanation.from_json(recorded)


def test_which_decisions_carry_reasons() -> None:
    assert is_explained(0.5, "ALLOW") and is_explained(0.1, "REVIEW") and is_explained(0.0, "HOLD")
    assert not is_explained(0.49, "ALLOW")
    assert not is_explained(None, "HOLD") and not is_explained(float("nan"), "HOLD")  # not scored


raw_values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from(
    [0.0, -0.0, 1e16, 2.0**51, -(2.0**60), 0.125, 0.005, 1234.565, math.nan]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_parts, stages,
       st.lists(st.tuples(record_parts, explanations, st.lists(raw_values, min_size=32, max_size=32),
                          st.one_of(st.just(math.nan), st.floats(-0.5, 1.5))), min_size=1, max_size=6))
def test_version_4_bodies_from_columns_are_each_record_canonicalised_whole(
        shared: dict[str, Any], stage: dict[str, int],
        records: list[tuple[dict[str, Any], Explanation, list[float], float]]) -> None:
    """Rows and scores put in fixed units as the pipeline does, then spliced: each body is the
    rfc8785 bytes of the whole body, holds no float, and its integers decode to the very values."""
    digits = feature_digits("sealtrail.features/1")
    rows, scaled = quantise_rows(np.array([r[2] for r in records], dtype=np.float64), digits)
    scores = quantise_scores(np.array([r[3] for r in records], dtype=np.float64))[0]
    ds = [replace(record(per, shared, stage), account_risk=RISK, explanation=why, fixed_point=True,
                  feature_values=rows[i].tolist(), score=float(scores[i]))
          for i, (per, why, _, _) in enumerate(records)]
    try:
        want: list[bytes] | None = [rfc8785.dumps(decision_body(d)) for d in ds]
    except (ValueError, TypeError):
        want = None  # a lone surrogate somewhere: the batch is refused
    cols = replace(columns(ds), account_risk=[RISK] * len(ds), explanation=[d.explanation for d in ds],
                   scaled_values=scaled)
    try:
        got: list[bytes] | None = list(decision_bodies(ds[0], cols, ds.__getitem__))
    except ValueError:
        got = None
    assert got == want
    if want is None:
        return
    for i, body in enumerate(want):
        parsed = orjson.loads(body)
        assert parsed["schema"] == "sealtrail.decision/4"
        assert b"." not in orjson.dumps(parsed["features"]["scaled"])
        values, score = features_from_body(parsed)
        assert np.array_equal(np.array(values), rows[i], equal_nan=True)
        assert score == scores[i] or (math.isnan(score) and math.isnan(scores[i]))
        assert all(v is None or abs(v) <= 2**50 for v in parsed["features"]["scaled"])
