"""The flood benchmark runs on a small list and reports what it says it does (``bench.screening_flood``):
healthy payments decided beside flooded ones, each flooded payment decided and, under the default
budget, never allowed (held as not screened in full, or for its hits)."""

from __future__ import annotations

import pytest

from bench.screening_flood import flood
from inference.screening.screen import DEFAULT_BUDGET


@pytest.mark.slow
def test_flooded_payments_are_decided_beside_healthy_ones_and_never_allowed() -> None:
    got = flood(3000, 300, 2.0, DEFAULT_BUDGET)
    assert got["budget"] == DEFAULT_BUDGET and got["healthy"] > 0 and got["flooded"] >= 1
    assert got["flooded_decisions"] and not any(d.startswith("ALLOW") for d in got["flooded_decisions"])
    assert set(got["healthy_latency_ms"]) == {"median", "p99", "max"}
