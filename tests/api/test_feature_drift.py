"""Feature drift and per-rule alert rates on /metrics: ``sealtrail_feature_psi{feature}`` against the
training reference of ``inference.drift_reference``, fed by the rows the model scores, and the
``sealtrail_rule_evaluations`` denominator beside ``sealtrail_rule_hits``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from api.metrics import PSI_WINDOW, FeatureDrift, Metrics
from audit.decide.record import RuleHit
from audit.decide.types import Decision
from inference.drift_reference import MAIN_FEATURES, REFERENCE
from inference.schema import MODEL_SCHEMA, feature_names
from tests.api.test_fail_closed import Served, txs

NAMES = feature_names(MODEL_SCHEMA)


def like_reference(n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Rows whose main features follow the reference's shares (one value inside each drawn bin);
    the other columns are noise the drift must not read."""
    rows = rng.normal(size=(n, len(NAMES)))
    for name, ref in REFERENCE["features"].items():
        edges = ref["edges"]
        shares = np.array(ref["shares"] + [ref["missing"]])
        values = [edges[0] - 1.0, *edges, np.nan]  # below the first edge, each bin's start, missing
        rows[:, NAMES.index(name)] = np.array(values)[rng.choice(len(values), n, p=shares / shares.sum())]
    return rows


def metrics() -> Metrics:
    return Metrics(lambda: (0, None), feature_reference=REFERENCE, feature_names=NAMES)


def gauges(m: Metrics) -> dict[str, float]:
    out = {}
    for line in m.render().decode().splitlines():
        if line.startswith("sealtrail_feature_psi{"):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return out


def feed(m: Metrics, rows: npt.NDArray[np.float64], batch: int = 512) -> None:
    assert m.feature_drift is not None
    for i in range(0, len(rows), batch):
        m.feature_drift.observe(rows[i:i + batch])


@pytest.mark.requirement("SR11-7-monitoring")
def test_reference_like_traffic_is_stable_and_a_shifted_feature_is_not() -> None:
    rng = np.random.default_rng(11)
    m = metrics()
    feed(m, like_reference(5_000, rng))
    stable = gauges(m)
    assert set(stable) == set(MAIN_FEATURES) and len(MAIN_FEATURES) == 10
    assert max(stable.values()) < 0.1, stable
    shifted = like_reference(PSI_WINDOW, rng)
    # beneficiaries paid by 300 to 1,000 senders in 30 days, where training mostly had a few
    shifted[:, NAMES.index("bene_fan_in_30d")] = rng.integers(300, 1000, len(shifted))
    feed(m, shifted)
    after = gauges(m)
    assert after["bene_fan_in_30d"] > 0.25
    assert max(v for k, v in after.items() if k != "bene_fan_in_30d") < 0.1, after
    feed(m, like_reference(PSI_WINDOW, rng))  # the window holds the recent rows only
    assert gauges(m)["bene_fan_in_30d"] < 0.1


def test_each_value_falls_in_the_bin_of_its_own_feature_s_edges() -> None:
    """Binned all columns at once, each value lands where its feature's edges put it (the count of
    edges at or below it; NaN in the missing bin, -inf first, +inf last), whatever the other
    features' edges."""
    drift = FeatureDrift(REFERENCE, NAMES)
    rng = np.random.default_rng(7)
    rows = rng.normal(scale=1e3, size=(200, len(NAMES)))
    for k, name in enumerate(drift.features):  # the edges themselves, and the edge cases
        col, edges = NAMES.index(name), drift.edges[k]
        rows[:len(edges), col] = edges
        rows[len(edges):len(edges) + 4, col] = [np.nan, -np.inf, np.inf, edges[0] - 1e-9]
    drift.add(rows)
    held = drift._recent[:len(rows)]
    for k, name in enumerate(drift.features):
        col, edges = rows[:, NAMES.index(name)], drift.edges[k]
        want = np.where(np.isnan(col), len(edges) + 1, np.searchsorted(edges, col, side="right"))
        assert held[:, k].tolist() == want.tolist(), name


def test_no_figure_before_a_thousand_rows() -> None:
    m = metrics()
    feed(m, like_reference(999, np.random.default_rng(1)))
    assert gauges(m) == {}
    feed(m, like_reference(1, np.random.default_rng(2)))
    assert set(gauges(m)) == set(MAIN_FEATURES)


def test_a_feature_gone_missing_is_drift_and_nan_or_inf_never_fails() -> None:
    rng = np.random.default_rng(5)
    rows = like_reference(4_000, rng)
    rows[::3, NAMES.index("bene_count_1h")] = np.nan  # a third of the payments without the value
    rows[::7, NAMES.index("pass_through_7d_q16")] = np.inf
    rows[1::7, NAMES.index("pass_through_7d_q16")] = -np.inf
    m = metrics()
    feed(m, rows)
    psi = gauges(m)
    assert psi["bene_count_1h"] > 0.25  # the training payments always had it
    assert all(np.isfinite(v) for v in psi.values())
    m2 = metrics()
    feed(m2, np.full((1_500, len(NAMES)), np.nan))  # nothing readable at all
    assert min(gauges(m2).values()) > 0.25


def test_rows_of_another_shape_are_refused_and_observing_them_never_fails(
        caplog: pytest.LogCaptureFixture) -> None:
    m = metrics()
    drift = m.feature_drift
    assert drift is not None
    with pytest.raises(ValueError, match="shape"):
        drift.add(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="numbers"):
        drift.add(np.array([["a"] * len(NAMES)]))
    with pytest.raises(ValueError, match="shape"):
        drift.add(np.zeros(len(NAMES)))
    with caplog.at_level(logging.ERROR, logger="api.metrics"):
        drift.observe(np.zeros((4, 5)))  # what the pipeline calls: logged, never raised
    assert "feature drift: 4 rows left out" in caplog.text


@pytest.mark.parametrize(("reference", "match"), [
    ({}, "needs 'features'"),
    ({"features": {"no_such_feature": {"edges": [1.0], "shares": [0.5, 0.5], "missing": 0.0}}},
     "do not have: no_such_feature"),
    ({"features": {"bene_count_1h": {"edges": [2.0, 1.0], "shares": [0.3, 0.3, 0.4], "missing": 0}}},
     "ascending edges"),
    ({"features": {"bene_count_1h": {"edges": [1.0], "shares": [1.0], "missing": 0}}}, "one share more"),
    ({"features": {"bene_count_1h": {"edges": list(range(300)), "shares": [0.0] * 301, "missing": 0}}},
     "at most 255 bins"),
])
def test_a_malformed_reference_is_refused(reference: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FeatureDrift(reference, NAMES)


def decision(fired: tuple[str, ...] = (), fail_safe: str | None = None, replayed: bool = False) -> Decision:
    return Decision("t", 0, "00", "2026-12-04T00:00:00Z", "REVIEW" if fired else "ALLOW", 0.1,
                    tuple(RuleHit(r, "REVIEW", "why") for r in fired), fail_safe, replayed=replayed)


def counter(m: Metrics, name: str) -> dict[str, float]:
    out = {}
    for line in m.render().decode().splitlines():
        if line.startswith(name):
            key = line.split('"')[1] if "{" in line else ""
            out[key] = float(line.rsplit(" ", 1)[1])
    return out


def test_each_rule_s_alert_rate_has_a_denominator_and_replays_count_once() -> None:
    m = Metrics(lambda: (0, None))
    m.observe_batch([decision(("FAN_IN_24H",)), decision(("FAN_IN_24H", "SWIFT_NAK")), decision(),
                     decision(fail_safe="DEADLINE_EXCEEDED"), decision(fail_safe="SANDBOX_FAULT: trap"),
                     decision(fail_safe="MODEL_ERROR: boom"),  # the rules ran, on a missing score
                     decision(("FAN_IN_24H",), replayed=True)])  # answered again: counted when sealed
    assert counter(m, "sealtrail_rule_hits_total") == {"FAN_IN_24H": 2.0, "SWIFT_NAK": 1.0}
    assert counter(m, "sealtrail_rule_evaluations_total") == {"": 4.0}
    assert sum(counter(m, "sealtrail_decisions_total").values()) == 7  # every answer, by outcome



def test_the_served_app_reports_each_main_feature_s_drift(served: Served) -> None:
    bodies = txs(1_100, seed=73)
    served.batches(bodies)
    assert served.runtime.pipeline.on_scored is not None
    text = served.client.get("/metrics", headers={"x-test-role": "admin"}).text
    psi = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
           if line.startswith("sealtrail_feature_psi{")}
    assert set(psi) == set(MAIN_FEATURES) and all(v >= 0 for v in psi.values())
    evaluated = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                 if line.startswith("sealtrail_rule_evaluations_total ")]
    assert evaluated == [1_100.0]
